//! What a run was configured with, for the trace's `aorta_params` (the dataset's
//! `runs.params`): the workload's flags and the environment knobs the GPU libraries read.
//!
//! Why in the trace: runs with equal params are repeats of one configuration, and a sweep
//! compares configurations by these params, so a trace must say what it ran with without a
//! `--param` on the ingest command line. The environment is read once, here, by name prefix:
//! any variable NCCL, RCCL, HIP, HSA, NVSHMEM or PyTorch's NCCL layer may read is recorded as it
//! was set, whether or not the library acts on it (deciding that is the sweep's knob check).

use serde_json::{Map, Value};

/// Environment names recorded: these prefixes, plus [`ENV_NAMES`].
pub const ENV_PREFIXES: &[&str] = &[
    "NCCL_",
    "RCCL_",
    "HSA_",
    "HIP_",
    "NVSHMEM_",
    "TORCH_NCCL_",
    "TORCH_SYMM_MEM_",
];

/// Single environment names recorded.
pub const ENV_NAMES: &[&str] = &["CUDA_DEVICE_MAX_CONNECTIONS", "PYTORCH_CUDA_ALLOC_CONF"];

/// Whether environment variable `name` is a knob [`env_knobs`] records.
pub fn is_knob(name: &str) -> bool {
    ENV_NAMES.contains(&name) || ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The knobs set in `vars` (name → value, as strings), sorted by name.
pub fn env_knobs(vars: impl IntoIterator<Item = (String, String)>) -> Map<String, Value> {
    let mut knobs: Vec<(String, String)> = vars.into_iter().filter(|(k, _)| is_knob(k)).collect();
    knobs.sort();
    knobs
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect()
}

/// `flags` (the workload's own, by flag name without `--`) followed by this process's
/// environment knobs. Flag names are lower case and environment names upper case, so the two
/// never collide in the one flat object.
pub fn params(flags: Map<String, Value>) -> Map<String, Value> {
    let mut all = flags;
    all.extend(env_knobs(std::env::vars()));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Python workloads record the same knobs (`aorta_metrics.env_knobs`): one list,
    /// written twice across the two languages, held equal here.
    #[test]
    fn the_python_scripts_list_the_same_knobs() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/torch");
        let o = std::process::Command::new("python3")
            .current_dir(dir)
            .args([
                "-c",
                "import aorta_metrics as m; print('\\n'.join(m.ENV_PREFIXES)); print('--'); print('\\n'.join(m.ENV_NAMES))",
            ])
            .output()
            .expect("python3 runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8(o.stdout).unwrap();
        let (prefixes, names) = text.split_once("--\n").unwrap();
        assert_eq!(prefixes.lines().collect::<Vec<_>>(), ENV_PREFIXES);
        assert_eq!(names.lines().collect::<Vec<_>>(), ENV_NAMES);
    }

    #[test]
    fn only_the_libraries_knobs_are_recorded_sorted() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("NCCL_MAX_NCHANNELS", "4"),
            ("RCCL_NUM_CHANNELS", "8"),
            ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("HSA_ENABLE_SDMA", "0"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let got: Vec<(String, Value)> = env_knobs(vars).into_iter().collect();
        let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "CUDA_DEVICE_MAX_CONNECTIONS",
                "HSA_ENABLE_SDMA",
                "NCCL_MAX_NCHANNELS",
                "RCCL_NUM_CHANNELS"
            ]
        );
        assert_eq!(got[2].1, Value::String("4".into()));
    }
}
