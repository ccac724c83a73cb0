//! Which environment knobs the GPU libraries read: the table behind the sweep's knob check.
//!
//! Sweeping a variable no library reads costs GPU hours and proves nothing (the Python aorta
//! scripts sweep `RCCL_NUM_CHANNELS`, which RCCL never reads). The table is data
//! (`env_knobs.toml`, documented in docs/SWEEPS.md) so that adding a knob is one entry.

use std::sync::OnceLock;

use serde::Deserialize;

const TABLE: &str = include_str!("env_knobs.toml");

#[derive(Deserialize)]
struct Table {
    knob: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default = "yes")]
    read: bool,
    library: Option<String>,
    what: Option<String>,
    instead: Option<String>,
}

fn yes() -> bool {
    true
}

fn table() -> &'static [Entry] {
    static T: OnceLock<Vec<Entry>> = OnceLock::new();
    T.get_or_init(|| {
        toml::from_str::<Table>(TABLE)
            .expect("the shipped env_knobs.toml is valid (a test parses it)")
            .knob
    })
}

/// What the table says of one environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Knob {
    /// A library reads it.
    Read {
        /// Which (`NCCL/RCCL`, `HIP`, `CUDA`, …).
        library: String,
        /// What it sets.
        what: String,
    },
    /// Swept in the field, read by no library.
    Unread {
        /// What to set instead.
        instead: String,
    },
    /// Not in the table.
    Unknown,
}

/// Looks `name` up.
pub fn lookup(name: &str) -> Knob {
    match table().iter().find(|e| e.name == name) {
        Some(e) if e.read => Knob::Read {
            library: e.library.clone().unwrap_or_default(),
            what: e.what.clone().unwrap_or_default(),
        },
        Some(e) => Knob::Unread {
            instead: e.instead.clone().unwrap_or_default(),
        },
        None => Knob::Unknown,
    }
}

/// The warning for an environment knob the table does not list as read; `None` for one it
/// does.
pub fn warning(name: &str) -> Option<String> {
    match lookup(name) {
        Knob::Read { .. } => None,
        Knob::Unread { instead } => Some(format!(
            "knob {name}: no library reads it (set {instead}); its runs will only measure noise"
        )),
        Knob::Unknown => Some(format!(
            "knob {name}: not in aorta's table of variables NCCL, RCCL, HIP, HSA, CUDA and PyTorch \
             read (docs/SWEEPS.md); check its spelling"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_knows_the_real_knobs() {
        assert!(table().len() > 40);
        for k in [
            "NCCL_MIN_NCHANNELS",
            "NCCL_MAX_NCHANNELS",
            "NCCL_MIN_CTAS",
            "NCCL_MAX_CTAS",
            "NCCL_BUFFSIZE",
            "HSA_ENABLE_SDMA",
            "CUDA_DEVICE_MAX_CONNECTIONS",
        ] {
            assert!(matches!(lookup(k), Knob::Read { .. }), "{k}");
            assert_eq!(warning(k), None);
        }
        for k in ["RCCL_NUM_CHANNELS", "RCCL_ENABLE_SDMA", "RCCL_BUFFER_SIZE"] {
            assert!(matches!(lookup(k), Knob::Unread { .. }), "{k}");
            assert!(warning(k).unwrap().contains("no library reads it"));
        }
        assert_eq!(lookup("NCCL_MAX_NCHANELS"), Knob::Unknown);
        assert!(warning("NCCL_MAX_NCHANELS")
            .unwrap()
            .contains("check its spelling"));
        let mut names: Vec<&str> = table().iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a knob listed twice");
    }
}
