//! Bad rocprofv3 JSON never crashes: a real (shortened) results file cut at any byte or with
//! any bytes overwritten either ingests or fails with an error naming the file and an offset
//! inside it — never a panic, never output left behind.

use std::io::Read;
use std::sync::OnceLock;

use proptest::prelude::*;

use crate::common::{check, corpus};

/// The MI350X results file with its first 300 dispatches, minified as rocprofv3 writes it.
fn sample() -> Option<&'static [u8]> {
    static S: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let p = corpus("rocprofv3/json/mi350x_908_results.json.gz")?;
        let f = std::fs::File::open(&p).unwrap();
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(f)
            .read_to_end(&mut text)
            .unwrap();
        let mut doc: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let proc0 = &mut doc["rocprofiler-sdk-tool"][0];
        proc0["buffer_records"]["kernel_dispatch"]
            .as_array_mut()
            .unwrap()
            .truncate(300);
        proc0["kernel_symbols"]
            .as_array_mut()
            .unwrap()
            .truncate(400);
        Some(serde_json::to_vec(&doc).unwrap())
    })
    .as_deref()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn cut_anywhere(frac in 0.0f64..1.0) {
        let Some(s) = sample() else { return Ok(()) };
        let cut = ((s.len() as f64) * frac) as usize;
        check("908_results.json", &s[..cut])?;
    }

    #[test]
    fn bytes_overwritten_anywhere(frac in 0.0f64..1.0, len in 1usize..64, byte in any::<u8>()) {
        let Some(s) = sample() else { return Ok(()) };
        let mut b = s.to_vec();
        let at = ((b.len() as f64) * frac) as usize;
        for x in b.iter_mut().skip(at).take(len) {
            *x = byte;
        }
        check("908_results.json", &b)?;
    }
}
