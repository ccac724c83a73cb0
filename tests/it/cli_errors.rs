//! `aorta ingest` from the outside: broken inputs: exit codes and one-line errors with a
//! byte offset (or line), and nothing written.
//!
//! Every expected offset is computed here from the fixture itself, never copied from the
//! tool's output.

use crate::common::cli::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

// ---------------------------------------------------------------------------------------------
// 1. The broken Kineto `.tmp` a crashed writer leaves.

#[test]
fn broken_tmp_is_one_error_line_at_its_end_and_writes_nothing() {
    let Some(data) = corpus() else { return };
    let broken = data.join(BROKEN_TMP);
    let bytes = std::fs::read(&broken).unwrap();
    // Why the offset is the file's length: the file is plain (uncompressed) JSON whose last
    // non-blank bytes are `},` inside `traceEvents`, so every byte up to the end is a valid
    // prefix of a trace and the first place anything can be found missing is end of file.
    // serde_json agrees independently: it fails with an end-of-file error, not a syntax one.
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.trim_end().ends_with("},"),
        "fixture no longer ends inside traceEvents"
    );
    let e = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_err();
    assert_eq!(
        e.classify(),
        serde_json::error::Category::Eof,
        "fixture is not merely truncated: {e}"
    );
    let expected = bytes.len() as u64;
    let events = complete_events(&bytes);

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = ingest(&[&broken], &out, &[]);
    assert_eq!(code(&o), 2, "stderr:\n{}", stderr(&o));
    let msg = one_error_line(&o, &broken, &format!("byte {expected}"));
    assert_eq!(byte_offset(&o, &broken), expected);
    assert_eq!(
        msg,
        format!(
            "unexpected end of file inside traceEvents after {events} events (truncated trace?)"
        )
    );
    assert!(!out.join("manifest.json").exists());
    assert_nothing_written(&out);
    assert!(entries_starting(&out, ".staging-").is_empty());
}

#[test]
fn keep_going_lands_the_good_file_and_lists_the_broken_one() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("mixed");
    std::fs::create_dir(&input).unwrap();
    let broken = input.join("truncated_tmp_style.pt.trace.json.tmp");
    let good = input.join("sdma_overlap.pt.trace.json.gz");
    std::fs::copy(data.join(BROKEN_TMP), &broken).unwrap();
    std::fs::copy(data.join(SDMA), &good).unwrap();
    let broken_bytes = std::fs::read(&broken).unwrap();
    let (broken_len, events) = (broken_bytes.len(), complete_events(&broken_bytes));
    let out = tmp.path().join("out");

    let o = ingest(&[&input], &out, &["--keep-going"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "stderr:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        !err.contains("aorta: error:"),
        "--keep-going must not end in an error:\n{err}"
    );
    let failed: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("aorta: failed: "))
        .collect();
    assert_eq!(
        failed,
        vec![format!("aorta: failed: {}: byte {broken_len}: unexpected end of file inside traceEvents after {events} events (truncated trace?)", broken.display())],
        "stderr:\n{err}"
    );
    assert!(err.contains("ingested 1 of 2 files"), "{err}");
    assert!(err.contains("(0 unchanged, 1 failed)"), "{err}");

    // The good file landed: its parts under run=<dir name>, rank 0 (it carries no rank).
    let sources = manifest_sources(&out);
    assert_eq!(sources.len(), 1, "{sources:?}");
    assert!(
        sources[0].ends_with("sdma_overlap.pt.trace.json.gz"),
        "{sources:?}"
    );
    for table in ["gpu_activities", "cpu_ops", "runs", "steps"] {
        let parts = parquet_files(&out.join(table).join("run=mixed").join("rank=0"));
        assert_eq!(parts.len(), 1, "{table}: {parts:?}");
    }
    // And nothing of the broken one: every part belongs to the one manifest entry.
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let mut listed: Vec<PathBuf> = m["inputs"][0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    let mut on_disk = parquet_files(&out);
    on_disk.sort();
    listed.sort();
    assert_eq!(on_disk, listed);
    assert!(entries_starting(&out, ".staging-").is_empty());
}

// ---------------------------------------------------------------------------------------------
// 2. Broken inputs of every kind: one line, the file, where, exit 2, nothing written.

/// Writes `bytes` as `name`, ingests it alone, and checks the failure: exit 2, one error line
/// naming the file at `loc` (e.g. `byte 5000`) whose message contains `what`, nothing written.
fn fails_alone(name: &str, bytes: &[u8], loc: &str, what: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = tmp.path().join("out");
    let o = ingest(&[&path], &out, &[]);
    assert_eq!(code(&o), 2, "stderr:\n{}", stderr(&o));
    let msg = one_error_line(&o, &path, loc);
    assert!(msg.contains(what), "{msg}");
    assert_nothing_written(&out);
}

#[test]
fn json_cut_mid_token_fails_at_the_cut() {
    let Some(data) = corpus() else { return };
    let full = gunzip(&std::fs::read(data.join(SDMA)).unwrap());
    let cut = &full[..5000];
    // The cut lands inside a value (serde_json reports end of file, not a syntax error), so
    // the first byte where the trace can be known incomplete is the end: 5000.
    let e = serde_json::from_slice::<serde_json::Value>(cut).unwrap_err();
    assert_eq!(e.classify(), serde_json::error::Category::Eof, "{e}");

    fails_alone(
        "cut.pt.trace.json",
        cut,
        "byte 5000",
        "unexpected end of file",
    );
}

/// Decodes as much of a one-member (possibly corrupt) gzip as the deflate data allows,
/// exactly: flate2's low-level `Decompress` keeps the bytes written by a call that fails
/// (its `Read` adapters drop them). Returns the decoded bytes and why decoding stopped
/// (`None`: a complete stream with a matching CRC32 and length).
fn gunzip_until_error(gz: &[u8]) -> (Vec<u8>, Option<String>) {
    assert!(
        gz.len() >= 18 && gz[..3] == [0x1f, 0x8b, 8],
        "not a deflate gzip"
    );
    let flags = gz[3];
    let mut i = 10;
    if flags & 4 != 0 {
        i += 2 + u16::from_le_bytes([gz[i], gz[i + 1]]) as usize;
    }
    for bit in [8, 16] {
        if flags & bit != 0 {
            i += gz[i..].iter().position(|&b| b == 0).unwrap() + 1;
        }
    }
    if flags & 2 != 0 {
        i += 2;
    }
    let body = &gz[i..];
    let mut d = flate2::Decompress::new(false);
    let mut out = Vec::new();
    loop {
        out.reserve(1 << 20);
        let consumed = d.total_in() as usize;
        match d.decompress_vec(&body[consumed..], &mut out, flate2::FlushDecompress::None) {
            Err(e) => return (out, Some(format!("corrupt deflate data: {e}"))),
            Ok(flate2::Status::StreamEnd) => break,
            Ok(_) if d.total_in() as usize == body.len() && out.len() < out.capacity() => {
                return (out, Some("truncated deflate data".into()))
            }
            Ok(_) => {}
        }
    }
    let end = d.total_in() as usize;
    let trailer = &body[end..end + 8];
    let mut crc = flate2::Crc::new();
    crc.update(&out);
    let want_crc = u32::from_le_bytes(trailer[..4].try_into().unwrap());
    let want_len = u32::from_le_bytes(trailer[4..].try_into().unwrap());
    assert_eq!(body.len(), end + 8, "more than one gzip member");
    if crc.sum() != want_crc || out.len() as u32 != want_len {
        return (out, Some("checksum mismatch".into()));
    }
    (out, None)
}

/// How far before the failure point a decoder error may be reported: flate2 drops what the
/// failing read call inflated, and the reader caps each call at `aorta_ingest::source::READ_CAP`.
const DECODER_SLACK: u64 = 64 << 10;

/// Flips 16 bytes at `at` of `gz` and checks the one-line error against where the decoded
/// stream first differs from the real trace (`first_diff`) and how far it decodes at all
/// (`decodable`), both computed here with flate2's low-level decoder.
fn check_corrupt_gzip(gz: &[u8], at: usize, clean_break: bool) {
    let original = gunzip(gz);
    let mut bad = gz.to_vec();
    for b in &mut bad[at..at + 16] {
        *b ^= 0xff;
    }
    let (decoded, err) = gunzip_until_error(&bad);
    let err = err.unwrap_or_else(|| panic!("flipping bytes at {at} did not corrupt the gzip"));
    let first_diff = decoded
        .iter()
        .zip(&original)
        .position(|(a, b)| a != b)
        .unwrap_or(decoded.len().min(original.len())) as u64;
    let decodable = decoded.len() as u64;
    if clean_break {
        // The decoder itself fails, at a block boundary: no garbage comes out before it.
        assert!(!err.contains("checksum"), "damage at {at}: {err}");
        assert_eq!(
            first_diff, decodable,
            "damage at {at} decodes to garbage first"
        );
    }

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("corrupt.pt.trace.json.gz");
    std::fs::write(&path, &bad).unwrap();
    let out = tmp.path().join("out");
    let o = ingest(&[&path], &out, &[]);
    assert_eq!(code(&o), 2, "damage at {at}; stderr:\n{}", stderr(&o));
    let n = byte_offset(&o, &path);
    one_error_line(&o, &path, &format!("byte {n}"));
    // Never past what can be decoded. Not before the damage either: the parser finds garbage
    // at or after `first_diff`, or the decoder fails at `decodable`, of which a failing read
    // may lose up to DECODER_SLACK.
    let low = first_diff.min(decodable.saturating_sub(DECODER_SLACK));
    assert!(
        (low..=decodable).contains(&n),
        "damage at {at} ({err}): offset {n} outside [{low}, {decodable}] \
         (first damaged decoded byte {first_diff}, decodable length {decodable})\n{}",
        stderr(&o)
    );
    assert_nothing_written(&out);
}

#[test]
fn corrupt_gzip_fails_at_or_after_the_damage() {
    let Some(data) = corpus() else { return };
    // Damage near the start (inside the first 64 KiB the format sniffer reads, where the
    // deflate decoder itself fails) and in the middle (decodes to garbage, then fails).
    let small = std::fs::read(data.join(SDMA)).unwrap();
    for at in [30, 200, 1000, small.len() / 2] {
        check_corrupt_gzip(&small, at, false);
    }
}

#[test]
fn corrupt_deflate_block_deep_in_a_big_trace() {
    let Some(data) = corpus() else { return };
    // Damage that breaks a deflate block header megabytes into the decoded stream (found by
    // trying positions; each is checked below to make the decoder fail with no garbage
    // before it): the offset must be where decoding stopped, not the start of the read
    // chunk (which is what a reader losing the bytes of the failing read reports).
    let big = std::fs::read(data.join(FSDP2_RANK0)).unwrap();
    for at in [115_226, 170_503, 310_847] {
        check_corrupt_gzip(&big, at, true);
    }
}

#[test]
fn missing_input_names_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("nope.pt.trace.json");
    let out = tmp.path().join("out");
    let o = ingest(&[&path], &out, &[]);
    assert_eq!(code(&o), 2, "stderr:\n{}", stderr(&o));
    let err = stderr(&o);
    let os = std::fs::metadata(&path).unwrap_err().to_string();
    assert_eq!(
        err.trim_end(),
        format!("aorta: error: {}: {os}", path.display())
    );
    assert!(!out.join("manifest.json").exists());
}

#[test]
fn gzip_with_bad_checksum_fails_at_the_end_of_the_stream() {
    let Some(data) = corpus() else { return };
    // A stored (level 0) gzip keeps the trace text verbatim, so one letter of an event name in
    // the middle can be flipped in place: the JSON stays valid and only the CRC32 check at
    // the end of the stream fails, after all decompressed bytes were read.
    let text = gunzip(&std::fs::read(data.join(SDMA)).unwrap());
    let mut gz = gzip(&text, flate2::Compression::none());
    let needle = b"\"name\": \"";
    let at = gz[gz.len() / 2..]
        .windows(needle.len() + 1)
        .position(|w| w.starts_with(needle) && w[needle.len()].is_ascii_alphabetic())
        .expect("a name in the second half")
        + gz.len() / 2
        + needle.len();
    gz[at] ^= 0x20; // swap the letter's case
    let (decoded, err) = gunzip_until_error(&gz);
    let err = err.expect("CRC mismatch");
    assert_eq!(decoded.len(), text.len(), "{err}");
    assert!(serde_json::from_slice::<serde_json::Value>(&decoded).is_ok());
    let expected = text.len();

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("badcrc.pt.trace.json.gz");
    std::fs::write(&path, &gz).unwrap();
    let out = tmp.path().join("out");
    let o = ingest(&[&path], &out, &[]);
    assert_eq!(code(&o), 2, "stderr:\n{}", stderr(&o));
    let msg = one_error_line(&o, &path, &format!("byte {expected}"));
    assert!(msg.contains("checksum"), "{msg}");
    assert_nothing_written(&out);
}

#[test]
fn trace_events_not_an_array() {
    let text = r#"{"traceEvents": 5}"#;
    // The offending value is the `5`.
    let at = text.find('5').unwrap();
    fails_alone(
        "five.json",
        text.as_bytes(),
        &format!("byte {at}"),
        "traceEvents is not an array",
    );
}

/// Ingests a one-file trace that must succeed; returns its diagnostics as code → count and
/// checks that no slice was written.
fn ingest_ok_without_slices(name: &str, text: &str) -> BTreeMap<String, i64> {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(name);
    std::fs::write(&path, text).unwrap();
    let out = tmp.path().join("out");
    let o = ingest(&[&path], &out, &[]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{text}\nstderr:\n{err}");
    assert!(err.contains("ingested 1 of 1 files"), "{err}");
    for table in ["gpu_activities", "cpu_ops"] {
        let df = aorta_transform::dataset::read(&out, table).unwrap();
        assert_eq!(df.height(), 0, "{table} got rows from {text}");
    }
    let diag = aorta_transform::dataset::read(&out, "diagnostics").unwrap();
    let codes = diag.column("code").unwrap().str().unwrap();
    let counts = diag.column("count").unwrap().i64().unwrap();
    (0..diag.height())
        .map(|i| (codes.get(i).unwrap().to_string(), counts.get(i).unwrap()))
        .collect()
}

#[test]
fn wrongly_typed_timestamp_is_a_diagnostic_not_an_error() {
    // A string `ts` is a data-quality problem of one event, not a broken file: the file lands,
    // the event is dropped and counted. Decided by running it: the brief's exact input has no
    // `cat`, so it is dropped (and counted) as a category aorta does not tabulate before its
    // timestamp is looked at.
    // (`schemaVersion` marks it as Kineto's: a marker-less object is a generic Chrome trace,
    // whose reader puts uncategorized slices in `cpu_ops`.)
    let d = ingest_ok_without_slices(
        "abc.json",
        r#"{"schemaVersion": 1, "traceEvents": [{"ph": "X", "ts": "abc"}]}"#,
    );
    assert_eq!(d.get("skipped_category"), Some(&1), "{d:?}");
    assert_eq!(d.get("missing_timestamp"), None, "{d:?}");
    // With a category aorta reads, the bad `ts` itself is the finding, CPU and GPU alike.
    let cpu =
        r#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "ts": "abc", "dur": 1}]}"#;
    let d = ingest_ok_without_slices("cpu.json", cpu);
    assert_eq!(d.get("missing_timestamp"), Some(&1), "{d:?}");
    let gpu = r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "abc", "dur": 1, "args": {"device": 0, "stream": 7}}]}"#;
    let d = ingest_ok_without_slices("gpu.json", gpu);
    assert_eq!(d.get("missing_timestamp"), Some(&1), "{d:?}");
}

/// An input with no content is said to be empty, in every format (by name or by content),
/// plain, blank or gzipped: `<file>: empty file`, not a trace cut off at byte 0. (An empty
/// rocprofv3 CSV is skipped before any reader, as `empty or one-column CSV`.)
#[test]
fn empty_inputs_say_so_in_every_format() {
    let gz_nothing = gzip(b"", flate2::Compression::default());
    let cases: [(&str, &[u8]); 5] = [
        ("empty.pt.trace.json", b""),
        ("empty.pt.trace.json.gz", &gz_nothing),
        ("blank.json", b"  \n\n"),
        ("rank_00_metrics.jsonl", b""),
        ("job.sqlite", b""),
    ];
    for (name, bytes) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = tmp.path().join("out");
        let o = ingest(&[&path], &out, &[]);
        assert_eq!(code(&o), 2, "{name}: {}", stderr(&o));
        assert_eq!(
            stderr(&o),
            format!("aorta: error: {}: empty file\n", path.display()),
            "{name}"
        );
        assert_nothing_written(&out);
    }
}

/// Without --keep-going the first broken input stops the ingest and nothing lands: the
/// line says how many other inputs were left out (and how many of them were broken too),
/// and names --keep-going; with it, the readable ones land.
#[test]
fn a_stop_counts_the_inputs_left_out() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("mixed");
    std::fs::create_dir(&input).unwrap();
    // Input order is path order: `a_empty` is the first failure, `b_broken` the second.
    let empty = input.join("a_empty.pt.trace.json");
    std::fs::write(&empty, b"").unwrap();
    std::fs::copy(data.join(BROKEN_TMP), input.join("b_broken.pt.trace.json")).unwrap();
    for n in ["c_good", "d_good"] {
        std::fs::copy(data.join(SDMA), input.join(format!("{n}.pt.trace.json.gz"))).unwrap();
    }
    let out = tmp.path().join("out");
    let o = ingest(&[&input], &out, &[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "aorta: error: {}: empty file (3 other inputs not ingested, 1 of them broken too; \
             --keep-going ingests the readable ones and lists the broken ones)\n",
            empty.display()
        )
    );
    assert_nothing_written(&out);
    // One other input, readable: singular, no broken clause.
    std::fs::remove_file(input.join("b_broken.pt.trace.json")).unwrap();
    std::fs::remove_file(input.join("d_good.pt.trace.json.gz")).unwrap();
    let o = ingest(&[&input], &out, &[]);
    assert_eq!(
        stderr(&o),
        format!(
            "aorta: error: {}: empty file (1 other input not ingested; \
             --keep-going ingests the readable ones and lists the broken ones)\n",
            empty.display()
        )
    );
    let o = ingest(&[&input], &out, &["--keep-going", "-q"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(manifest_sources(&out).len(), 1);
}

#[test]
fn jsonl_with_broken_second_line_names_the_line() {
    let text =
        "{\"step\": 1, \"loss\": 0.5}\n{\"step\": 2, \"loss\": \n{\"step\": 3, \"loss\": 0.25}\n";
    fails_alone(
        "rank_00_metrics.jsonl",
        text.as_bytes(),
        "line 2",
        "not JSON",
    );
}

// ---------------------------------------------------------------------------------------------
// A dataset an older aorta wrote.

/// Schema v4 added columns (`cpu_ops.concrete_inputs`, …): a v3 dataset read by this aorta is
/// one line naming the dataset and the way out, not a polars "column not found".
#[test]
fn a_dataset_of_an_older_schema_is_one_line_saying_to_ingest_again() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ds");
    let trace = data.join("kineto/cuda/h100_models/bert-small.json.gz");
    let o = ingest(&[&trace], &out, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let manifest = out.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let now = m["schema_version"].as_u64().unwrap();
    m["schema_version"] = (now - 1).into();
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    for cmd in ["overlap", "collectives", "report"] {
        let o = aorta(&[cmd.as_ref(), out.as_os_str()]);
        assert_eq!(code(&o), 2, "{cmd}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        assert!(
            err.contains(&format!("schema v{}, this aorta reads v{now}", now - 1))
                && err.contains("ingest the traces again")
                && err.contains(&out.display().to_string()),
            "{cmd}: {err}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. A processor older than the build.

/// The built `aorta`, run by `qemu-x86_64` (Debian's qemu-user, which `.ci/run` installs) as
/// a Nehalem (x86-64-v2: no AVX) and as a Haswell (x86-64-v3, what the workspace builds for:
/// `.cargo/config.toml`). The first gets one line and exit 2 from the processor check
/// (`aorta_ingest::cpu`) instead of SIGILL; the second runs.
#[cfg(target_arch = "x86_64")]
#[test]
fn an_older_processor_is_told_in_one_line_what_to_do() {
    let Some(qemu) = crate::common::tool(&["qemu-x86_64"], "qemu-user") else {
        return;
    };
    let run = |cpu: &str| {
        std::process::Command::new(&qemu)
            .args(["-cpu", cpu, AORTA, "--version"])
            .output()
            .expect("qemu-x86_64 runs")
    };
    let old = run("Nehalem");
    // A build for the base x86-64 (RUSTFLAGS overriding the workspace's) runs anywhere.
    if cfg!(target_feature = "avx2") {
        assert_eq!(code(&old), 2, "stderr:\n{}", stderr(&old));
        let err = stderr(&old);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(
                "aorta: error: this build of aorta is for x86-64-v3 and this processor lacks \
                 avx, avx2, bmi1, bmi2, fma: build it for this processor with \
                 RUSTFLAGS=\"-C target-cpu=native\" cargo build --release"
            ),
            "{err}"
        );
        assert!(old.stdout.is_empty());
    } else {
        assert_eq!(code(&old), 0, "stderr:\n{}", stderr(&old));
    }
    if cfg!(target_feature = "avx512f") {
        return; // a build for this processor (`native`), which a Haswell cannot run
    }
    let v3 = run("Haswell");
    assert_eq!(code(&v3), 0, "stderr:\n{}", stderr(&v3));
    let version = String::from_utf8_lossy(&v3.stdout);
    assert!(version.starts_with("aorta "), "{version}");
}
