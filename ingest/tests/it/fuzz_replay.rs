//! The fuzz targets' inputs replayed through the same entry points (`aorta_ingest::fuzzing`)
//! without instrumentation, so CI holds what the fuzz campaigns found (docs/FUZZING.md):
//! every committed seed (`fuzz/seeds/<target>/`) is read without error, and every minimized
//! crasher (`fuzz/regressions/<target>/`) is read without a panic, any error being one line
//! that names the file (`fuzzing::read` asserts that).

use std::path::{Path, PathBuf};

use aorta_ingest::fuzzing::{self, Reader, Scratch};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `fuzz/<kind>/<target>/`, sorted (none when the directory is absent).
fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Runs the target named `target` on `bytes`; `Err` carries the error line.
fn run(scratch: &Scratch, target: &str, bytes: &[u8]) -> Result<(), String> {
    match target {
        "rank_map" => fuzzing::rank_map(bytes)
            .map(drop)
            .map_err(|e| e.to_string()),
        "rules" => fuzzing::rules(bytes).map_err(|e| e.to_string()),
        t => {
            let r = Reader::ALL.into_iter().find(|r| r.name() == t).unwrap();
            fuzzing::read(scratch, r, bytes)
                .map(drop)
                .map_err(|e| e.to_string())
        }
    }
}

fn targets() -> Vec<&'static str> {
    let mut t: Vec<&str> = Reader::ALL.iter().map(|r| r.name()).collect();
    t.extend(["rank_map", "rules"]);
    t
}

#[test]
fn every_seed_is_read() {
    let scratch = Scratch::new().unwrap();
    let mut n = 0;
    for t in targets() {
        for (p, bytes) in inputs("seeds", t) {
            run(&scratch, t, &bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 9, "only {n} seeds under {}", fuzz_dir().display());
}

#[test]
fn no_crasher_panics() {
    let scratch = Scratch::new().unwrap();
    for t in targets() {
        for (p, bytes) in inputs("regressions", t) {
            let go = std::panic::AssertUnwindSafe(|| run(&scratch, t, &bytes));
            let res = std::panic::catch_unwind(go);
            assert!(res.is_ok(), "{} panics", p.display());
        }
    }
}

/// Rows of `table` that reading `bytes` with `reader` produced, and the findings count.
fn rows(reader: Reader, bytes: &[u8], table: &str) -> (u64, u64) {
    let scratch = Scratch::new().unwrap();
    let out = fuzzing::read(&scratch, reader, bytes).unwrap();
    (out.rows.get(table).copied().unwrap_or(0), out.warnings)
}

/// Found by the fuzzer: `ts + dur` past the int64 ns range overflowed (a panic in debug
/// builds, a wrapped end in release ones). A time past `json::TIME_LIMIT_NS` (3·10¹⁸ ns) is
/// now unusable, counted and not written; the same slice at a usable time is written, even
/// where its end and the trace's base time add up to more than int64 could hold before.
#[test]
fn a_slice_ending_past_int64_ns_is_a_finding_not_a_panic() {
    let chrome =
        |ts: &str, dur: &str| format!(r#"[{{"ph":"X","name":"a","ts":{ts},"dur":{dur}}}]"#);
    let kineto = |ts: &str, dur: &str| {
        format!(
            r#"{{"traceEvents":[{{"ph":"X","cat":"cpu_op","name":"a","ts":{ts},"dur":{dur}}}]}}"#
        )
    };
    let (usable, past) = ("2900000000000000", "9000000000000000");
    for (reader, text) in [
        (Reader::Chrome, chrome as fn(&str, &str) -> String),
        (Reader::Kineto, kineto),
    ] {
        let (ok, _) = rows(reader, text(usable, "5").as_bytes(), "cpu_ops");
        assert_eq!(ok, 1, "{reader:?}");
        let (ok, _) = rows(reader, text(usable, usable).as_bytes(), "cpu_ops");
        assert_eq!(ok, 1, "{reader:?}: ends at 5.8e18 ns, inside int64");
        // A time past the limit is no time: the slice is not written; a duration past it is
        // no duration: the slice is kept with none, as one without `dur`. Both are findings.
        for (ts, dur, written) in [(past, "5", 0), (usable, past, 1)] {
            let (n, findings) = rows(reader, text(ts, dur).as_bytes(), "cpu_ops");
            assert_eq!(n, written, "{reader:?} {ts} {dur}");
            assert!(findings >= 1, "{reader:?} {ts} {dur}");
        }
    }
    // A base time (int64 ns) added to a time and its duration: 9e18 + 5.8e18 overflowed.
    // A base past the limit is no time; the trace's own times stay.
    for base in ["9000000000000000000", "2900000000000000000"] {
        let t = format!(
            r#"{{"baseTimeNanoseconds":{base},"traceEvents":[{{"ph":"X","cat":"cpu_op","name":"a","ts":{usable},"dur":{usable}}}]}}"#
        );
        let (ok, _) = rows(Reader::Kineto, t.as_bytes(), "cpu_ops");
        assert_eq!(ok, 1, "base {base}");
    }
}

/// Found by the fuzzer: a rocprofv3 JSON key with a newline in it, quoted by the error of
/// the truncated file, made the error two lines.
#[test]
fn an_error_quoting_a_key_with_a_newline_is_one_line() {
    let bytes =
        std::fs::read(fuzz_dir().join("regressions/rocprof_json/newline_in_key.json")).unwrap();
    let scratch = Scratch::new().unwrap();
    let e = fuzzing::read(&scratch, Reader::RocprofJson, &bytes)
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n') && e.contains("\\n"), "{e}");
}

/// Found by the fuzzer: in an Nsight Systems export whose `META_DATA_EXPORT` schema names a
/// column in bytes that are not UTF-8, a value of the wrong type made rusqlite panic while
/// naming the column in its error. Built here: the schema text is patched in the file.
#[test]
fn a_damaged_column_name_in_an_nsys_export_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.sqlite");
    let conn = rusqlite::Connection::open(&p).unwrap();
    conn.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
         CREATE TABLE META_DATA_EXPORT (nameQ TEXT, value TEXT);
         INSERT INTO StringIds VALUES (1, 'k');
         INSERT INTO META_DATA_EXPORT VALUES (42, 'not a name');
         INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.13.2');",
    )
    .unwrap();
    drop(conn);
    let mut bytes = std::fs::read(&p).unwrap();
    let at = bytes.windows(5).position(|w| w == b"nameQ").unwrap();
    bytes[at + 4] = 0xFF;
    let scratch = Scratch::new().unwrap();
    let out = fuzzing::read(&scratch, Reader::Nsys, &bytes).unwrap();
    assert_eq!(out.rows.get("gpu_activities"), None);
}
