//! Bad input never crashes: a real trace cut at any byte or with any bytes overwritten either
//! ingests or fails with an error that names the file and an offset inside it — never a
//! panic, never output left behind by a failed run.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

fn corpus_trace() -> Option<Vec<u8>> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/kineto/rocm/mi350x_aorta/smci350_200691.pt.trace.json");
    match std::fs::read(&p) {
        Ok(b) => Some(b),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("corpus missing: {}", p.display())
        }
        Err(_) => None,
    }
}

/// Ingests `bytes` as one file; on failure checks the message names the file and, for
/// parse errors, an offset within the input.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("t.pt.trace.json");
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn cut_anywhere(frac in 0.0f64..1.0) {
        let Some(t) = corpus_trace() else { return Ok(()) };
        let at = (t.len() as f64 * frac) as usize;
        check(&t[..at])?;
    }

    #[test]
    fn bytes_overwritten_anywhere(frac in 0.0f64..1.0, len in 1usize..64, byte in any::<u8>()) {
        let Some(mut t) = corpus_trace() else { return Ok(()) };
        let at = ((t.len() as f64 * frac) as usize).min(t.len() - 1);
        let end = (at + len).min(t.len());
        t[at..end].iter_mut().for_each(|b| *b = byte);
        check(&t)?;
    }
}
