//! Damaged generic Chrome traces and Nsight Systems exports never panic: they ingest, or
//! fail with an error that names the file and leaves nothing behind.

use proptest::prelude::*;

use crate::common::{check, corpus_bytes};

/// A generic Chrome array trace with every phase the reader handles.
fn chrome_trace() -> Vec<u8> {
    let mut s = String::from("[\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"p\"}},\n");
    for i in 0..200 {
        s.push_str(&format!(
            "{{\"ph\": \"B\", \"name\": \"b{i}\", \"cat\": \"app\", \"pid\": 1, \"tid\": {t}, \"ts\": {i}}},\n\
             {{\"ph\": \"X\", \"name\": \"sgemm_{i}\", \"cat\": \"kernel\", \"pid\": 0, \"tid\": \"stream 7\", \"ts\": {i}.5, \"dur\": 0.25, \"args\": {{\"stream\": 7, \"grid\": [1, 2, 3]}}}},\n\
             {{\"ph\": \"i\", \"name\": \"mark\", \"pid\": 1, \"tid\": {t}, \"ts\": {i}.75, \"s\": \"t\"}},\n\
             {{\"ph\": \"E\", \"pid\": 1, \"tid\": {t}, \"ts\": {i}.9}},\n",
            t = i % 3
        ));
    }
    s.push_str(
        "{\"ph\": \"s\", \"name\": \"flow\", \"pid\": 1, \"tid\": 1, \"ts\": 3, \"id\": 1}\n]\n",
    );
    s.into_bytes()
}

/// The corpus's Nsight Systems SQLite export of CloverLeaf.
fn cloverleaf() -> Option<Vec<u8>> {
    corpus_bytes("nsys/cloverleaf-cuda.sqlite")
}

fn overwrite(mut t: Vec<u8>, frac: f64, len: usize, byte: u8) -> Vec<u8> {
    let at = ((t.len() as f64 * frac) as usize).min(t.len() - 1);
    let end = (at + len).min(t.len());
    t[at..end].iter_mut().for_each(|b| *b = byte);
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn chrome_cut_anywhere(frac in 0.0f64..1.0) {
        let t = chrome_trace();
        let at = (t.len() as f64 * frac) as usize;
        check("t.json", &t[..at])?;
    }

    #[test]
    fn chrome_bytes_overwritten_anywhere(frac in 0.0f64..1.0, len in 1usize..64, byte in any::<u8>()) {
        check("t.json", &overwrite(chrome_trace(), frac, len, byte))?;
    }

    #[test]
    fn nsys_cut_anywhere(frac in 0.0f64..1.0) {
        let Some(t) = cloverleaf() else { return Ok(()) };
        // At least the 16-byte magic, so the SQLite reader (not JSON detection) is exercised.
        let at = ((t.len() as f64 * frac) as usize).max(16);
        check("c.sqlite", &t[..at])?;
    }

    #[test]
    fn nsys_bytes_overwritten_anywhere(frac in 0.0f64..1.0, len in 1usize..64, byte in any::<u8>()) {
        let Some(t) = cloverleaf() else { return Ok(()) };
        check("c.sqlite", &overwrite(t, frac, len, byte))?;
    }
}
