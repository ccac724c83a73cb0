//! The device peak table (transform/peaks/devices.toml): dense matrix TFLOP/s per dtype and
//! HBM bandwidth per GPU, kept as data with the datasheet each figure comes from, so a
//! reviewer checks numbers against sources instead of reading code, and a user adds a GPU
//! (or corrects one) with `--device-peaks FILE` without a new aorta.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// The shipped table.
pub(crate) const DEFAULT_PEAKS: &str = include_str!("../../peaks/devices.toml");

/// The dtypes a peak can be given for.
pub(crate) const DTYPES: [&str; 7] = ["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4"];

/// Why a device-peak table (`--device-peaks`) could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PeaksError {
    /// The file is not a valid peak table: bad TOML, an unknown field or dtype key, a device
    /// whose `match` names nothing, a peak that is not a positive number.
    #[error("{path}: {msg}")]
    Invalid {
        /// The file (`<built-in devices.toml>` for the shipped one).
        path: String,
        /// What is wrong, naming the device and key.
        msg: String,
    },
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// One GPU's peaks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// The name the tables show for the device (`H100 SXM`).
    pub name: String,
    #[serde(rename = "match")]
    pub(crate) matches: Vec<String>,
    /// HBM bandwidth, TB/s.
    pub hbm_tbps: f64,
    /// Dense peak per dtype key (`bf16`, `fp8`, …), TFLOP/s.
    pub tflops: BTreeMap<String, f64>,
    pub(crate) source: String,
}

impl Device {
    /// The dense peak for a dtype key (`bf16`), TFLOP/s.
    pub fn tflops(&self, key: &str) -> Option<f64> {
        self.tflops.get(key).copied()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: Option<String>,
    #[serde(default)]
    device: Vec<Device>,
}

/// The devices, tried in order.
#[derive(Debug, Clone)]
pub struct Peaks {
    /// The shipped table's version, plus `+user` when a file extends it.
    pub version: String,
    pub(crate) devices: Vec<Device>,
}

impl Default for Peaks {
    fn default() -> Peaks {
        Peaks::parse(DEFAULT_PEAKS, "<built-in devices.toml>").expect("the shipped table is valid")
    }
}

impl Peaks {
    /// The shipped table, with `user`'s devices tried first when given.
    pub fn load(user: Option<&Path>) -> Result<Peaks, PeaksError> {
        let mut peaks = Peaks::default();
        if let Some(path) = user {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| PeaksError::Io {
                path: shown.clone(),
                source,
            })?;
            let extra = Peaks::parse(&text, &shown)?;
            let mut devices = extra.devices;
            devices.extend(peaks.devices);
            peaks = Peaks {
                version: format!("{}+user", peaks.version),
                devices,
            };
        }
        Ok(peaks)
    }

    /// Parses a table, checking every entry (a typo in a dtype key is an error, not a peak
    /// that silently never applies).
    pub(crate) fn parse(text: &str, path: &str) -> Result<Peaks, PeaksError> {
        let invalid = |msg: String| PeaksError::Invalid {
            path: path.to_string(),
            msg,
        };
        let f: File = toml::from_str(text)
            .map_err(|e| invalid(e.to_string().lines().next().unwrap_or("").to_string()))?;
        for d in &f.device {
            let at = format!("device `{}`", d.name);
            if d.matches.iter().all(|m| m.trim().is_empty()) {
                return Err(invalid(format!("{at}: `match` names no device")));
            }
            if !(d.hbm_tbps > 0.0 && d.hbm_tbps.is_finite()) {
                return Err(invalid(format!("{at}: hbm_tbps must be a positive number")));
            }
            for (k, v) in &d.tflops {
                if !DTYPES.contains(&k.as_str()) {
                    return Err(invalid(format!(
                        "{at}: unknown dtype `{k}` (known: {})",
                        DTYPES.join(", ")
                    )));
                }
                if !(*v > 0.0 && v.is_finite()) {
                    return Err(invalid(format!("{at}: {k} must be a positive number")));
                }
            }
        }
        Ok(Peaks {
            version: f.version.unwrap_or_else(|| "unversioned".into()),
            devices: f.device,
        })
    }

    /// The first device whose `match` substrings occur in `name` (case-insensitive).
    pub(crate) fn find(&self, name: &str) -> Option<&Device> {
        let name = name.to_lowercase();
        self.devices.iter().find(|d| {
            d.matches
                .iter()
                .any(|m| !m.trim().is_empty() && name.contains(&m.to_lowercase()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_device_names_find_their_datasheet_entry() {
        let p = Peaks::default();
        let name = |n: &str| p.find(n).map(|d| d.name.as_str());
        // Names as the corpus's traces write them.
        assert_eq!(name("NVIDIA H100 80GB HBM3"), Some("H100 SXM"));
        assert_eq!(name("NVIDIA H100 PCIe"), Some("H100 PCIe"));
        assert_eq!(name("NVIDIA H200"), Some("H200"));
        assert_eq!(name("NVIDIA GH200 480GB"), Some("GH200 (96 GB HBM3)"));
        assert_eq!(name("NVIDIA GB200"), Some("GB200"));
        assert_eq!(name("NVIDIA B200"), Some("B200"));
        assert_eq!(name("NVIDIA A100-SXM4-80GB"), Some("A100 SXM4 80GB"));
        assert_eq!(name("NVIDIA A100-PG509-200"), Some("A100 40GB"));
        assert_eq!(name("Tesla V100-SXM2-32GB"), Some("V100 SXM2"));
        assert_eq!(name("AMD Instinct MI300X VF"), Some("MI300X"));
        assert_eq!(name("AMD Instinct MI350X"), Some("MI350X"));
        assert_eq!(name("AMD Instinct MI210"), Some("MI210"));
        // A generic name is no device: null ratios, not a guess.
        assert_eq!(name("AMD Radeon Graphics"), None);
        assert_eq!(name("AMD Instinct MI300A"), None);
        let h100 = p.find("NVIDIA H100 80GB HBM3").unwrap();
        // The datasheet's 1,979 TFLOP/s with sparsity, halved.
        assert_eq!((h100.tflops("bf16"), h100.hbm_tbps), (Some(989.5), 3.35));
        assert_eq!(p.find("Tesla V100-SXM2-32GB").unwrap().tflops("bf16"), None);
        // TF32 (issue 31): the datasheets' 989 TFLOP/s with sparsity, halved, on H100 SXM
        // and H200; A100's 156 dense; MI300X's TF32 (xf32) matrix figure. Every TF32 peak is
        // above its device's FP32 one (the tensor cores), and no CDNA2/CDNA4 part has one.
        let tf32 = |n: &str| p.find(n).unwrap().tflops("tf32");
        assert_eq!(tf32("NVIDIA H100 80GB HBM3"), Some(494.5));
        assert_eq!(tf32("NVIDIA H200"), Some(494.5));
        assert_eq!(tf32("NVIDIA A100-SXM4-80GB"), Some(156.0));
        assert_eq!(tf32("AMD Instinct MI300X"), Some(653.7));
        for n in [
            "AMD Instinct MI210",
            "AMD Instinct MI250X",
            "AMD Instinct MI355X",
        ] {
            assert_eq!(tf32(n), None, "{n}");
        }
        for d in &p.devices {
            if let (Some(t), Some(f)) = (d.tflops("tf32"), d.tflops("fp32")) {
                assert!(t > f, "{}", d.name);
            }
        }
    }

    #[test]
    fn every_required_device_is_in_the_table_with_a_source() {
        let p = Peaks::default();
        for n in [
            "H100 SXM",
            "H100 PCIe",
            "H200",
            "B200",
            "GB200",
            "A100 SXM4 80GB",
            "V100 SXM2",
            "L40S",
            "MI300X",
            "MI325X",
            "MI350X",
            "MI355X",
            "MI250X (one GCD)",
            "MI210",
        ] {
            let d = p.devices.iter().find(|d| d.name == n).expect(n);
            assert!(
                d.source.contains("datasheet") || d.source.contains("data sheet"),
                "{n}"
            );
            assert!(d.tflops("bf16").or(d.tflops("fp16")).is_some(), "{n}");
        }
        assert_eq!(p.version, "1.0");
    }

    /// docs/PERF.md's device table shows the same figures as the TOML (rows named as a
    /// device of the table; the GH200 row folds two entries into one).
    #[test]
    fn the_documented_table_is_the_shipped_one() {
        let doc = include_str!("../../../docs/PERF.md");
        let p = Peaks::default();
        let section = doc.split("## Device peaks").nth(1).unwrap();
        let mut matched = 0;
        for line in section.lines().filter(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let Some(d) = p.devices.iter().find(|d| d.name == cells[1]) else {
                continue;
            };
            for (i, key) in DTYPES.iter().enumerate() {
                let shown = cells[3 + i].parse::<f64>().ok();
                assert_eq!(shown, d.tflops(key), "{} {key}", d.name);
            }
            assert_eq!(
                cells[10].parse::<f64>().ok(),
                Some(d.hbm_tbps),
                "{}",
                d.name
            );
            matched += 1;
        }
        assert_eq!(
            matched,
            p.devices.len() - 2,
            "every device but the two GH200 entries"
        );
    }

    #[test]
    fn a_user_file_goes_first_and_bad_entries_are_one_line_errors() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("mine.toml");
        std::fs::write(
            &f,
            r#"[[device]]
name = "H100 at 600 W"
match = ["H100"]
hbm_tbps = 3.35
tflops = { bf16 = 1000 }
source = "measured"
"#,
        )
        .unwrap();
        let p = Peaks::load(Some(&f)).unwrap();
        assert_eq!(p.version, "1.0+user");
        assert_eq!(
            p.find("NVIDIA H100 80GB HBM3").unwrap().name,
            "H100 at 600 W"
        );
        assert_eq!(p.find("AMD Instinct MI300X").unwrap().name, "MI300X");
        std::fs::write(&f, "[[device]]\nname = \"x\"\nmatch = [\"x\"]\nhbm_tbps = 1\ntflops = { bf61 = 1 }\nsource = \"\"\n").unwrap();
        let e = Peaks::load(Some(&f)).unwrap_err().to_string();
        assert!(
            e.starts_with(&f.display().to_string()) && e.contains("unknown dtype `bf61`"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        std::fs::write(&f, "[[device]]\nname = 3\n").unwrap();
        let e = Peaks::load(Some(&f)).unwrap_err().to_string();
        assert!(
            e.starts_with(&f.display().to_string()) && !e.contains('\n'),
            "{e}"
        );
        let e = Peaks::load(Some(&dir.path().join("none.toml"))).unwrap_err();
        assert!(e.to_string().contains("none.toml"), "{e}");
    }
}
