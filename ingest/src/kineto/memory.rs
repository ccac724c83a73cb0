//! The allocator's `[memory]` instant events (`profile_memory=True`) into the `memory` table.
//!
//! Why here and not in the sink: a trace has hundreds to a few thousand of them against
//! millions of slices, so they skip the spill. The walk keeps them, trace-relative, in file
//! order; once the step spans and the base time are known, `write` gives each its step (the
//! process's `ProfilerStep#N` span around it, as for a CPU op) and writes the one part.

use std::path::PathBuf;

use crate::error::Result;
use crate::json::Cursor;
use crate::schema::MEMORY;
use crate::sink::Parts;
use crate::trace_event::{self, Ev};
use crate::writer::{write_all, Cols};

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
/// absolute with `base`, each event's step looked up in `links`.
pub(crate) fn write(
    events: &[MemEvent],
    links: &Links,
    base: i64,
    parts: &Parts,
) -> Result<Option<(PathBuf, u64)>> {
    if events.is_empty() {
        return Ok(None);
    }
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
    write_all(&MEMORY, &parts.path(&MEMORY), b.finish())
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
        let free = br#"{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 11,
            "args": {"Bytes": -512, "Device Type": 0, "Device Id": -1}}"#;
        let f = ev(free).unwrap();
        assert_eq!(
            (f.bytes, f.device, f.total_allocated),
            (Some(-512), -1, None)
        );
        assert_eq!(device_type_name(f.device_type), "cpu");
        assert_eq!(device_type_name(99), "type 99");
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
