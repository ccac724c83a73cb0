//! Inputs built to exhaust time or memory: each ends in bounded time and memory, with a
//! clear error or the right rows. The binary runs as a child; its peak RSS is its `VmHWM`
//! (/proc/PID/status), read every 10 ms until it exits (its rusage would not do: `ru_maxrss`
//! keeps the test process's own resident size, which the child shares from spawn to exec),
//! its wall time comes from the clock, and a child over its time is killed (a failure).
//!
//! Sizes: the nesting, the string and the sparse file are the issue's (10^6 levels, 1 GiB,
//! 10 GiB). The ProfilerStep bomb is 3 x 10^5 steps here, not 10^7: a debug build ingests
//! about 6 MB/s of such events (10^6 steps, 100 MB: 18 s on a busy 2-core machine), so
//! 10^7 (1 GB of JSON) would take minutes; docs/RELIABILITY.md gives the 10^7 run of a
//! release build, and how memory grows with the number of steps.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{s, AORTA};

/// What a bounded child did.
struct Bounded {
    code: i32,
    stderr: String,
    max_rss_mb: f64,
    wall: Duration,
}

/// Runs `aorta ARGS`, killing it past `limit`; its exit status, stderr and peak RSS.
fn bounded(args: &[&str], limit: Duration) -> Bounded {
    let t0 = Instant::now();
    let mut child = Command::new(AORTA)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut err_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err_pipe, &mut s).unwrap();
        s
    });
    let mut hwm_kb = 0u64;
    let status = loop {
        // Before the exit check: once it has exited, its memory is gone from /proc.
        if let Some(kb) = vm_hwm_kb(&status_file) {
            hwm_kb = hwm_kb.max(kb);
        }
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("aorta {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Bounded {
        code: status
            .code()
            .expect("aorta exited (not killed by a signal)"),
        stderr: reader.join().unwrap(),
        max_rss_mb: hwm_kb as f64 / 1024.0,
        wall: t0.elapsed(),
    }
}

/// The peak resident size of a running process (`VmHWM`), in KiB.
fn vm_hwm_kb(status_file: &str) -> Option<u64> {
    let text = std::fs::read_to_string(status_file).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One error line naming `path` at byte `offset`.
fn one_error_at(b: &Bounded, path: &Path, offset: u64, says: &str) {
    assert_eq!(b.code, 2, "{}", b.stderr);
    let want = format!("aorta: error: {}: byte {offset}: ", path.display());
    let lines: Vec<&str> = b.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", b.stderr);
    assert!(
        lines[0].starts_with(&want) && lines[0].contains(says),
        "{}",
        b.stderr
    );
}

/// A kernel event whose `args` nest 10^6 arrays deep is read (the kernel lands, `args` it
/// does not need are skipped without recursion); a trace that is 10^6 nested arrays is one
/// error at its second byte.
#[test]
fn nesting_a_million_deep() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1_000_000;
    let deep = dir.path().join("deep.pt.trace.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&deep).unwrap());
    f.write_all(br#"{"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","name":"nvjet_tst","pid":0,"tid":7,"ts":1,"dur":1,"args":{"stream":7,"x":"#).unwrap();
    f.write_all(&vec![b'['; n]).unwrap();
    f.write_all(&vec![b']'; n]).unwrap();
    f.write_all(b"}}]}").unwrap();
    f.flush().unwrap();
    let ds = dir.path().join("ds");
    let b = bounded(
        &["ingest", s(&deep), "-o", s(&ds), "-q"],
        Duration::from_secs(30),
    );
    assert_eq!(b.code, 0, "{}", b.stderr);
    let rows: u64 = super::manifest_inputs(&ds)[0]["rows"]["gpu_activities"]
        .as_u64()
        .unwrap();
    assert_eq!(rows, 1);
    assert!(
        b.max_rss_mb > 1.0 && b.max_rss_mb < 300.0,
        "{} MB",
        b.max_rss_mb
    );
    let arrays = dir.path().join("arrays.json");
    std::fs::write(&arrays, [vec![b'['; n], vec![b']'; n]].concat()).unwrap();
    let b = bounded(
        &["ingest", s(&arrays), "-o", s(&ds)],
        Duration::from_secs(30),
    );
    one_error_at(&b, &arrays, 1, "expected an event object");
}

/// A 1 GiB string (an event's name) is refused at the event's first byte once it passes
/// `walk::MAX_EVENT`, long before the end of the string: it used to take 52 s and 8 GB.
#[test]
fn a_one_gib_string_is_refused_at_its_event() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.pt.trace.json");
    let head = br#"{"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","pid":0,"tid":7,"ts":1,"dur":1,"name":""#;
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    f.write_all(head).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..1024 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"\"}]}").unwrap();
    f.flush().unwrap();
    drop(f);
    let ds = dir.path().join("ds");
    let b = bounded(&["ingest", s(&p), "-o", s(&ds)], Duration::from_secs(60));
    let event = head.windows(2).position(|w| w == b"[{").unwrap() + 1;
    one_error_at(&b, &p, event as u64, "longer than 64 MiB");
    assert!(b.max_rss_mb < 600.0, "{} MB", b.max_rss_mb);
    assert!(!ds.exists(), "no dataset from a failed first ingest");
}

/// 3 x 10^5 `ProfilerStep#N` annotations (scaled from 10^7, see the module docs): every
/// step is a row of `steps`, in bounded memory.
#[test]
fn many_profiler_steps() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300_000u64;
    let p = dir.path().join("steps.pt.trace.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    f.write_all(br#"{"schemaVersion":1,"distributedInfo":{"rank":0},"traceEvents":["#)
        .unwrap();
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        write!(
            f,
            r#"{sep}{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{i}","pid":1,"tid":1,"ts":{},"dur":2}}"#,
            i * 3
        )
        .unwrap();
    }
    f.write_all(b"]}").unwrap();
    f.flush().unwrap();
    drop(f);
    let ds = dir.path().join("ds");
    let b = bounded(
        &["ingest", s(&p), "-o", s(&ds), "-q"],
        Duration::from_secs(60),
    );
    assert_eq!(b.code, 0, "{}", b.stderr);
    let rows = super::manifest_inputs(&ds)[0]["rows"]["steps"]
        .as_u64()
        .unwrap();
    assert_eq!(rows, n);
    assert!(b.max_rss_mb < 400.0, "{} MB", b.max_rss_mb);
    eprintln!("{n} steps: {:.1?}, {:.0} MB", b.wall, b.max_rss_mb);
}

/// A 10 GiB sparse file (no disk used): all zero bytes, and the same after 64 KiB of
/// spaces. Both are one error at the first byte that is not a blank, at once.
#[test]
fn a_ten_gib_sparse_file() {
    let dir = tempfile::tempdir().unwrap();
    for blanks in [0u64, 64 << 10] {
        let p = dir.path().join(format!("sparse{blanks}.json"));
        let f = std::fs::File::create(&p).unwrap();
        std::io::Write::write_all(&mut &f, &vec![b' '; blanks as usize]).unwrap();
        f.set_len(10 << 30).unwrap();
        let ds = dir.path().join("ds");
        let b = bounded(&["ingest", s(&p), "-o", s(&ds)], Duration::from_secs(30));
        one_error_at(&b, &p, blanks, "not a JSON trace");
        assert!(b.max_rss_mb < 300.0, "{} MB", b.max_rss_mb);
        assert!(b.wall < Duration::from_secs(10), "{:?}", b.wall);
    }
}
