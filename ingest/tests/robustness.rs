//! Bad input never crashes: a real trace cut at any byte or with any bytes overwritten either
//! ingests or fails with an error that names the file and an offset inside it — never a
//! panic, never output left behind by a failed run.

use std::path::Path;

mod common;

use common::check;
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn cut_anywhere(frac in 0.0f64..1.0) {
        let Some(t) = corpus_trace() else { return Ok(()) };
        let at = (t.len() as f64 * frac) as usize;
        check("t.pt.trace.json", &t[..at])?;
    }

    #[test]
    fn bytes_overwritten_anywhere(frac in 0.0f64..1.0, len in 1usize..64, byte in any::<u8>()) {
        let Some(mut t) = corpus_trace() else { return Ok(()) };
        let at = ((t.len() as f64 * frac) as usize).min(t.len() - 1);
        let end = (at + len).min(t.len());
        t[at..end].iter_mut().for_each(|b| *b = byte);
        check("t.pt.trace.json", &t)?;
    }
}

/// Pass 1 skips flows at their `ph`; a malformed flow must still be the error reported, at
/// its offset, even when the file has a later error that the fast pass 1 meets first.
#[test]
fn a_malformed_flow_is_reported_before_a_later_error() {
    let Some(t) = corpus_trace() else { return };
    let flow = b"\"ph\": \"f\", \"id\":";
    let at = t.windows(flow.len()).position(|w| w == flow).unwrap() + flow.len() - 1;
    let mut bad = t.clone();
    bad[at] = b';';
    let dir = tempfile::tempdir().unwrap();
    for cut in [bad.len(), bad.len() - 100] {
        let path = dir.path().join("t.pt.trace.json");
        std::fs::write(&path, &bad[..cut]).unwrap();
        let opts = aorta_ingest::Options {
            out: dir.path().join("out"),
            ..Default::default()
        };
        let e = aorta_ingest::ingest(std::slice::from_ref(&path), &opts, &Default::default())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("byte {at}: expected ':' after key")),
            "{e}"
        );
    }
}
