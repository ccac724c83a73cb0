//! What every damaged-input proptest checks: the file ingests, or fails with one line that
//! names it (and an offset inside it for parse errors), leaving nothing behind.

use std::path::PathBuf;

use proptest::prelude::*;

/// Ingests `bytes` as the file `name`; on failure checks the message names the file and,
/// for parse errors, an offset within the input, and that nothing was left behind.
pub fn check(name: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = dir.path().join("out");
    let opts = aorta_ingest::Options {
        out: out.clone(),
        ..Default::default()
    };
    match aorta_ingest::ingest(std::slice::from_ref(&path), &opts, &Default::default()) {
        Ok(_) => Ok(()),
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.starts_with(&path.display().to_string()), "{msg}");
            prop_assert!(!msg.contains('\n'), "{msg}");
            if let aorta_ingest::IngestError::Parse { offset, .. } = e {
                prop_assert!(offset <= bytes.len() as u64, "{msg}");
            }
            let leftovers: Vec<_> = std::fs::read_dir(&out)
                .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            prop_assert!(leftovers.is_empty(), "failed run left {leftovers:?}");
            Ok(())
        }
    }
}
