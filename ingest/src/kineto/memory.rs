//! The allocator's `[memory]` instant events (`profile_memory=True`) into the `memory` table.
//!
//! Why here and not in the sink: a trace has hundreds to a few thousand of them against
//! millions of slices, so they skip the rows' spill. The walk keeps them, trace-relative, in
//! file order, in a `Spool` of fixed-size records (a long `profile_memory` capture can hold
//! one per allocation, so they go to a temporary file past 65,536 rather than grow the
//! process); once the step spans and the base time are known, `write` gives each its step
//! (the process's `ProfilerStep#N` span around it, as for a CPU op) and writes the one part,
//! a chunk of events at a time.

use std::path::PathBuf;

use bytemuck::{Pod, Zeroable};

use super::spool::Spool;
use crate::error::{IngestError, Result};
use crate::json::Cursor;
use crate::schema::MEMORY;
use crate::sink::Parts;
use crate::trace_event::{self, Ev};
use crate::writer::{Cols, TableWriter};

use super::links::Links;

/// The event's name, as a raw JSON value (quotes kept).
pub(crate) const NAME: &[u8] = b"\"[memory]\"";

/// The `cat` Kineto gives them.
pub(crate) const CAT: &[u8] = b"cpu_instant_event";

/// The args read, in `MemEvent` order.
const ARGS: [&[u8]; 6] = [
    b"Device Type",
    b"Device Id",
    b"Bytes",
    b"Addr",
    b"Total Allocated",
    b"Total Reserved",
];

/// c10's `DeviceType` codes (c10/core/DeviceType.h) and their names: data, not a match.
const DEVICE_TYPES: &[(i64, &str)] = &[
    (0, "cpu"),
    (1, "cuda"),
    (2, "mkldnn"),
    (3, "opengl"),
    (4, "opencl"),
    (5, "ideep"),
    (6, "hip"),
    (7, "fpga"),
    (8, "maia"),
    (9, "xla"),
    (10, "vulkan"),
    (11, "metal"),
    (12, "xpu"),
    (13, "mps"),
    (14, "meta"),
    (15, "hpu"),
    (16, "ve"),
    (17, "lazy"),
    (18, "ipu"),
    (19, "mtia"),
    (20, "privateuseone"),
];

/// The name of a c10 device type code (`type N` for one not in the table).
pub(crate) fn device_type_name(code: i64) -> String {
    DEVICE_TYPES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| format!("type {code}"), |(_, n)| (*n).to_string())
}

/// One `[memory]` event, its time trace-relative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemEvent {
    pub ts: i64,
    pub pid_key: i64,
    pub device_type: i64,
    pub device: i64,
    pub bytes: Option<i64>,
    pub addr: Option<i64>,
    pub total_allocated: Option<i64>,
    pub total_reserved: Option<i64>,
}

/// A `MemEvent` as the spool holds it: `None`s as bits of `nulls`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(crate) struct MemRec {
    fixed: [i64; 4],
    opt: [i64; 4],
    nulls: u64,
}

impl From<&MemEvent> for MemRec {
    fn from(e: &MemEvent) -> MemRec {
        let opts = [e.bytes, e.addr, e.total_allocated, e.total_reserved];
        MemRec {
            fixed: [e.ts, e.pid_key, e.device_type, e.device],
            opt: opts.map(|o| o.unwrap_or(0)),
            nulls: (0..4).filter(|&i| opts[i].is_none()).map(|i| 1 << i).sum(),
        }
    }
}

impl From<&MemRec> for MemEvent {
    fn from(r: &MemRec) -> MemEvent {
        let opt = |i: usize| (r.nulls & (1 << i) == 0).then_some(r.opt[i]);
        let [ts, pid_key, device_type, device] = r.fixed;
        MemEvent {
            ts,
            pid_key,
            device_type,
            device,
            bytes: opt(0),
            addr: opt(1),
            total_allocated: opt(2),
            total_reserved: opt(3),
        }
    }
}

/// The memory events of a walk, in file order.
pub(crate) type MemLog = Spool<MemRec>;

/// Whether a `ph`/`cat` pair may be a memory event (the rest of the event is then read).
#[inline]
pub(crate) fn may_be(ph: &[u8], cat: &[u8]) -> bool {
    ph == b"i" && cat == CAT
}

/// The memory event `ev` is, if it is one with a usable `ts` (`None` otherwise).
pub(crate) fn read(ev: &Ev) -> Option<MemEvent> {
    if ev.name != Some(NAME) || !may_be(ev.ph, ev.cat) {
        return None;
    }
    let ts = ev.ts.and_then(trace_event::micros)?;
    let a = ev.args.map(args).unwrap_or_default();
    let int = |i: usize| a[i].and_then(trace_event::int);
    Some(MemEvent {
        ts,
        pid_key: trace_event::pid_key(ev.pid),
        // PyTorch writes both on every event; a trace that lacks them is host memory.
        device_type: int(0).unwrap_or(0),
        device: int(1).unwrap_or(-1),
        bytes: int(2),
        addr: int(3),
        total_allocated: int(4),
        total_reserved: int(5),
    })
}

/// The raw values of `ARGS` in an `args` object.
///
/// Not `trace_event::pick`: a second caller of `pick::<6>` (the CPU reader's size) made the
/// compiler stop inlining it into the CPU reader, whose key compares became `memcmp` calls
/// (+1 % instructions on the benchmark trace, which has no memory events). Memory events are
/// few, so this plain walk, kept out of line, costs nothing that matters.
#[inline(never)]
fn args(raw: &[u8]) -> [Option<&[u8]>; ARGS.len()] {
    let mut out = [None; ARGS.len()];
    let mut c = Cursor::new(raw);
    if c.expect(b'{', "").is_err() {
        return out;
    }
    let mut first = true;
    while let Ok(Some((k, v))) = c.next_member_raw(first) {
        first = false;
        if let Some(i) = ARGS.iter().position(|w| *w == k) {
            out[i] = Some(v);
        }
    }
    out
}

/// Writes the `memory` part of one file (none when it has no memory events): times made
/// absolute with `base`, each event's step looked up in `links`; a failed read of the
/// spool's file is an error about `staging`.
pub(crate) fn write(
    events: MemLog,
    links: &Links,
    base: i64,
    parts: &Parts,
    staging: &std::path::Path,
) -> Result<Option<(PathBuf, u64)>> {
    if events.len() == 0 {
        return Ok(None);
    }
    let mut w = TableWriter::new(&MEMORY, parts.path(&MEMORY));
    let mut chunk = Vec::new();
    events.drain(
        |recs| {
            chunk.clear();
            chunk.extend(recs.iter().map(MemEvent::from));
            w.write(&batch(&chunk, links, base))
        },
        |e| IngestError::io(staging, e),
    )?;
    w.close()
}

/// The `memory` rows of `events`.
fn batch(events: &[MemEvent], links: &Links, base: i64) -> arrow_array::RecordBatch {
    let mut b = Cols::new(&MEMORY);
    b.i64("ts_ns", events.iter().map(|e| e.ts + base));
    let names: Vec<String> = events
        .iter()
        .map(|e| device_type_name(e.device_type))
        .collect();
    b.str("device_type", names.iter().map(String::as_str));
    b.i64("device", events.iter().map(|e| e.device));
    b.opt_i64("bytes", events.iter().map(|e| e.bytes));
    b.opt_i64("addr", events.iter().map(|e| e.addr));
    b.opt_i64("total_allocated", events.iter().map(|e| e.total_allocated));
    b.opt_i64("total_reserved", events.iter().map(|e| e.total_reserved));
    b.opt_i64(
        "step",
        events.iter().map(|e| links.step_at(e.pid_key, e.ts)),
    );
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &[u8]) -> Option<MemEvent> {
        read(&trace_event::parse(&mut Cursor::new(s)).unwrap())
    }

    #[test]
    fn reads_an_allocation_and_a_free() {
        let alloc = br#"{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
            "pid": 7, "tid": 7, "ts": 10.5, "args": {"Total Reserved": 4096, "Total Allocated": 512,
            "Bytes": 512, "Addr": 140000, "Device Id": 0, "Device Type": 6, "Ev Idx": 3}}"#;
        let e = ev(alloc).unwrap();
        assert_eq!(
            e,
            MemEvent {
                ts: 10_500,
                pid_key: 7,
                device_type: 6,
                device: 0,
                bytes: Some(512),
                addr: Some(140000),
                total_allocated: Some(512),
                total_reserved: Some(4096),
            }
        );
        assert_eq!(device_type_name(e.device_type), "hip");
        assert_eq!(MemEvent::from(&MemRec::from(&e)), e);
        let free = br#"{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 11,
            "args": {"Bytes": -512, "Device Type": 0, "Device Id": -1}}"#;
        let f = ev(free).unwrap();
        assert_eq!(
            (f.bytes, f.device, f.total_allocated),
            (Some(-512), -1, None)
        );
        assert_eq!(device_type_name(f.device_type), "cpu");
        assert_eq!(MemEvent::from(&MemRec::from(&f)), f);
        assert_eq!(device_type_name(99), "type 99");
    }

    /// More events than the spool holds in memory come out as rows in file order, each
    /// with its values, nulls, absolute time and step.
    #[test]
    fn events_past_the_spool_chunk_are_written_in_order() {
        use crate::kineto::links::Partial;
        use crate::step_span::Span;
        use arrow_array::{Array, Int64Array, StringArray};
        let dir = tempfile::tempdir().unwrap();
        let n = 2 * super::super::spool::CHUNK + 3;
        let events: Vec<MemEvent> = (0..n as i64)
            .map(|i| MemEvent {
                ts: i * 10,
                pid_key: 1 + i % 2,
                device_type: i % 3,
                device: i % 4 - 1,
                bytes: (i % 5 != 0).then_some(i),
                addr: Some(7),
                total_allocated: None,
                total_reserved: Some(-i),
            })
            .collect();
        let mut log = MemLog::in_dir(dir.path().join("staging"));
        for c in events.chunks(1000) {
            log.extend(c.iter().map(MemRec::from)).unwrap();
        }
        // Process 1 has step 3 from 0 to 500,000 ns; process 2 step 4 from 600,000 to 900,000.
        let mut links = Links::default();
        let mut p = Partial::default();
        let span = Span {
            start: 0,
            end: 500_000,
            step: 3,
        };
        p.cpu_span(1, span, 0);
        let span = Span {
            start: 600_000,
            end: 900_000,
            step: 4,
        };
        p.cpu_span(2, span, 0);
        links.absorb(p).unwrap();
        links.finish().unwrap();
        let parts = Parts {
            root: dir.path().into(),
            run: "r".into(),
            rank: 0,
            tag: "t".into(),
        };
        let (path, rows) = write(log, &links, 1_000, &parts, dir.path())
            .unwrap()
            .unwrap();
        assert_eq!(rows, n as u64);
        let file = std::fs::File::open(path).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let (mut ts, mut bytes, mut reserved, mut step, mut kind) =
            (vec![], vec![], vec![], vec![], vec![]);
        let int = |b: &arrow_array::RecordBatch, c: &str| {
            let a = b.column_by_name(c).unwrap();
            let a = a.as_any().downcast_ref::<Int64Array>().unwrap().clone();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i)))
                .collect::<Vec<_>>()
        };
        for b in reader {
            let b = b.unwrap();
            ts.extend(int(&b, "ts_ns"));
            bytes.extend(int(&b, "bytes"));
            reserved.extend(int(&b, "total_reserved"));
            step.extend(int(&b, "step"));
            let names = b.column_by_name("device_type").unwrap();
            let names = names.as_any().downcast_ref::<StringArray>().unwrap();
            kind.extend((0..names.len()).map(|i| names.value(i).to_string()));
        }
        let want_step = |e: &MemEvent| match e.pid_key {
            1 => (e.ts <= 500_000).then_some(3),
            _ => (600_000..=900_000).contains(&e.ts).then_some(4),
        };
        assert_eq!(
            ts,
            events
                .iter()
                .map(|e| Some(e.ts + 1_000))
                .collect::<Vec<_>>()
        );
        assert_eq!(bytes, events.iter().map(|e| e.bytes).collect::<Vec<_>>());
        assert_eq!(
            reserved,
            events.iter().map(|e| e.total_reserved).collect::<Vec<_>>()
        );
        assert_eq!(step, events.iter().map(want_step).collect::<Vec<_>>());
        let kinds: Vec<String> = events
            .iter()
            .map(|e| device_type_name(e.device_type))
            .collect();
        assert_eq!(kind, kinds);
    }

    #[test]
    fn other_instants_and_a_memory_event_without_ts_are_not_rows() {
        let other = br#"{"ph": "i", "cat": "cpu_instant_event", "name": "[OutOfMemory]", "ts": 1}"#;
        assert_eq!(ev(other), None);
        let no_ts = br#"{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]"}"#;
        assert_eq!(ev(no_ts), None);
        let slice = br#"{"ph": "X", "cat": "cpu_op", "name": "[memory]", "ts": 1, "dur": 2}"#;
        assert_eq!(ev(slice), None);
    }
}
