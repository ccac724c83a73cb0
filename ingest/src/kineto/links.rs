//! What a row needs to know before it can be written: the trace's metadata, the step spans,
//! and the launches.
//!
//! A kernel's step is the step of the runtime call that launched it, and Kineto writes the
//! `ProfilerStep#N` spans, the runtime calls and the kernels in whatever order its buffers
//! drained (kernels before their launches, annotations after the ops they contain, the base
//! time after the events). So the row walk notes the top-level metadata, the step spans and
//! one (correlation, ts, pid) triple per launch as it goes, and `pending` settles the rows'
//! steps at the end. The launches go to a temporary file as they are absorbed, and `finish`
//! turns them into a compact correlation → step lookup (`launches`), so the walk's memory
//! does not grow with them; the step spans do, by 24 bytes a span (twice that after
//! `finish` when several processes have spans), up to `MAX_STEP_SPANS`.
//! `LinkPass`, a walk that notes only these, re-reads a file that failed (`first_error`).

use std::path::PathBuf;
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::launches::{LaunchLog, LaunchSteps};

use crate::error::ParseErr;
use crate::json::{usable_time, Cursor, JsonError};
use crate::step_span::{Span, StepMarker, MAX_STEP_SPANS};
use crate::trace_event::{self, pid_key, Cat, Ev};
use crate::walk::Visitor;

/// The top-level keys aorta keeps.
#[derive(Debug, Default, Clone)]
pub(crate) struct Meta {
    pub base_time_ns: Option<i64>,
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    /// (id, name, warpSize) of every visible GPU.
    pub devices: Vec<(i64, String, Option<i64>)>,
    /// Version keys as written, e.g. ("cuda_runtime_version", "13000").
    pub versions: Vec<(String, String)>,
    /// Top-level keys Kineto does not write itself: run parameters (`runs.params`).
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// Top-level keys that Kineto and PyTorch's profiler write themselves (plus Kineto's log
/// lines): not run parameters.
const KINETO_KEYS: &[&str] = &[
    "traceEvents",
    "schemaVersion",
    "displayTimeUnit",
    "traceName",
    "trace_id",
    "record_shapes",
    "profile_memory",
    "with_stack",
    "with_flops",
    "with_modules",
    "INFO",
    "WARNING",
    "ERROR",
];

/// A parameter value larger than this is replaced by a note of its size.
const MAX_PARAM_BYTES: usize = 64 << 10;

const VERSION_KEYS: &[&str] = &[
    "cuda_runtime_version",
    "cuda_driver_version",
    "cupti_version",
    "roctracer_version",
    "rocprofiler-sdk_version",
    "hip_runtime_version",
    "hip_driver_version",
];

impl Meta {
    pub(crate) fn take(&mut self, key: &str, raw: &[u8]) {
        match key {
            // A base past `TIME_LIMIT_NS` is no time: the trace stays relative.
            "baseTimeNanoseconds" => {
                self.base_time_ns = trace_event::int(raw).filter(|&b| usable_time(b))
            }
            "distributedInfo" => {
                let v: serde_json::Value = serde_json::from_slice(raw).unwrap_or_default();
                self.rank = json_int(&v["rank"]);
                self.world_size = json_int(&v["world_size"]);
            }
            "deviceProperties" => {
                let v: serde_json::Value = serde_json::from_slice(raw).unwrap_or_default();
                for d in v.as_array().into_iter().flatten() {
                    let id = json_int(&d["id"]).unwrap_or(self.devices.len() as i64);
                    let name = d["name"].as_str().unwrap_or("").to_string();
                    self.devices.push((id, name, json_int(&d["warpSize"])));
                }
            }
            k if VERSION_KEYS.contains(&k) => {
                let text = String::from_utf8_lossy(raw).trim_matches('"').to_string();
                self.versions.push((k.to_string(), text));
            }
            k if KINETO_KEYS.contains(&k) => {}
            k => {
                self.params.insert(k.to_string(), param_value(raw));
            }
        }
    }
}

fn param_value(raw: &[u8]) -> serde_json::Value {
    if raw.len() > MAX_PARAM_BYTES {
        return format!("<{} bytes omitted>", raw.len()).into();
    }
    serde_json::from_slice(raw).unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned().into())
}

fn json_int(v: &serde_json::Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// The spans and launches of a run of events.
#[derive(Default)]
pub(crate) struct Partial {
    cpu_spans: Vec<(i64, Span)>,
    gpu_spans: Vec<Span>,
    launches: Vec<(i64, i64, i64)>,
    /// The byte offset of the last step annotation noted (where the limit is reported).
    last_span_off: u64,
}

impl Partial {
    /// A `ProfilerStep#N` annotation of process `pid` (a `pid_key`) at byte `off`.
    pub(crate) fn cpu_span(&mut self, pid: i64, span: Span, off: u64) {
        self.cpu_spans.push((pid, span));
        self.last_span_off = off;
    }

    /// A GPU-side step annotation (`gpu_user_annotation`) at byte `off`.
    pub(crate) fn gpu_span(&mut self, span: Span, off: u64) {
        self.gpu_spans.push(span);
        self.last_span_off = off;
    }

    /// A runtime or driver call with correlation `corr`, at `ts` in process `pid`.
    pub(crate) fn launch(&mut self, corr: i64, ts: i64, pid: i64) {
        self.launches.push((corr, ts, pid));
    }
}

/// The links of a whole file.
#[derive(Debug, Default)]
pub(crate) struct Links {
    pub meta: Meta,
    cpu_spans: FxHashMap<i64, Vec<Span>>,
    all_cpu_spans: Vec<Span>,
    gpu_spans: Vec<Span>,
    /// Correlation → step of the launch, once `finish`ed.
    launch_steps: LaunchSteps,
    /// The launches absorbed, until `finish`.
    launches: LaunchLog,
    /// Why the launches could not be written to their file (the walk stops).
    spill_error: Option<std::io::Error>,
    /// Step annotations absorbed (CPU and GPU).
    span_count: usize,
}

impl Links {
    /// Links whose launches wait in a temporary file in `dir` (the staging directory).
    pub(crate) fn spilling_to(dir: PathBuf) -> Links {
        Links {
            launches: LaunchLog::in_dir(dir),
            ..Links::default()
        }
    }

    /// Links that keep no launches (a walk that only looks for the first error).
    pub(crate) fn without_launches() -> Links {
        Links {
            launches: LaunchLog::discarding(),
            ..Links::default()
        }
    }

    /// The error that stopped the walk writing the launches to their file, if one did.
    pub(crate) fn take_spill_error(&mut self) -> Option<std::io::Error> {
        self.spill_error.take()
    }

    pub(crate) fn has_steps(&self) -> bool {
        !self.all_cpu_spans.is_empty() || !self.gpu_spans.is_empty()
    }

    /// Every CPU step span (all processes), sorted by start.
    pub(crate) fn cpu_spans(&self) -> &[Span] {
        &self.all_cpu_spans
    }

    /// The step of a CPU time in process `pid` (any thread).
    pub(crate) fn step_at(&self, pid: i64, ts: i64) -> Option<i64> {
        lookup(self.spans_of(pid), ts)
    }

    fn spans_of(&self, pid: i64) -> &[Span] {
        self.cpu_spans
            .get(&pid)
            .map(Vec::as_slice)
            .unwrap_or(&self.all_cpu_spans)
    }

    /// `step_at`, answered from `cache` when `ts` falls where the last answer does.
    pub(crate) fn step_at_cached(&self, cache: &mut StepCache, pid: i64, ts: i64) -> Option<i64> {
        if let Some(c) = cache.0.filter(|c| c.pid == pid && c.lo <= ts && ts <= c.hi) {
            return Some(c.step);
        }
        let spans = self.spans_of(pid);
        let n = spans.partition_point(|s| s.start <= ts);
        match n.checked_sub(1).map(|k| spans[k]) {
            // `lookup`'s first candidate holds `ts`: so it does for every time from its start
            // up to its end or the next span's start, whichever comes first.
            Some(s) if ts <= s.end => {
                let next = spans.get(n).map_or(i64::MAX, |x| x.start.saturating_sub(1));
                let (lo, hi, step) = (s.start, s.end.min(next), s.step);
                cache.0 = Some(Cached { pid, lo, hi, step });
                Some(step)
            }
            _ => lookup(spans, ts),
        }
    }

    /// Heap bytes of the correlation → step lookup.
    pub(crate) fn launch_bytes(&self) -> usize {
        self.launch_steps.heap_bytes()
    }

    /// The lookup's blocks, bytes in its file, questions answered from the file and blocks
    /// read for them (for `AORTA_TIMING`).
    pub(crate) fn launch_stats(&self) -> (usize, u64, u64, u64) {
        self.launch_steps.stats()
    }

    /// The error a read of the lookup's file met, if one did: the settle's answers are not
    /// to be trusted then.
    pub(crate) fn take_launch_error(&self) -> Option<std::io::Error> {
        self.launch_steps.take_read_error()
    }

    /// The launches' lookup (`launch_step` answers from it).
    pub(crate) fn launches(&self) -> &LaunchSteps {
        &self.launch_steps
    }

    /// `Some(step)` when a runtime call with this correlation exists.
    pub(crate) fn launch_step(&self, corr: i64) -> Option<Option<i64>> {
        self.launch_steps.get(corr)
    }

    /// The fallback: a GPU time against the GPU-side step spans (CPU spans if none).
    pub(crate) fn gpu_step_at(&self, ts: i64) -> Option<i64> {
        if self.gpu_spans.is_empty() {
            lookup(&self.all_cpu_spans, ts)
        } else {
            lookup(&self.gpu_spans, ts)
        }
    }

    /// Adds what a run of events noted (runs are absorbed in file order); an error past
    /// `MAX_STEP_SPANS` step annotations, or when the launches' file cannot be written
    /// (`take_spill_error` says why).
    pub(crate) fn absorb(&mut self, p: Partial) -> Result<(), ParseErr> {
        self.span_count += p.cpu_spans.len() + p.gpu_spans.len();
        if self.span_count > MAX_STEP_SPANS {
            return Err(ParseErr::new(
                p.last_span_off,
                format!("more than {MAX_STEP_SPANS} step annotations (ProfilerStep#N) in one trace: aorta's limit (a real profile holds thousands)"),
            ));
        }
        for (pid, span) in p.cpu_spans {
            self.cpu_spans.entry(pid).or_default().push(span);
        }
        self.gpu_spans.extend(p.gpu_spans);
        if let Err(e) = super::launches::log(&mut self.launches, &p.launches) {
            self.spill_error = Some(e);
            return Err(ParseErr::new(0, "stopped: writing the output failed"));
        }
        Ok(())
    }

    /// Sorts the spans and gives each launch its step, once every event has been absorbed;
    /// an error if the launches' file cannot be read back.
    pub(crate) fn finish(&mut self) -> std::io::Result<()> {
        let launches = self.finish_spans();
        let steps = self.launch_steps(launches, 1)?;
        self.set_launch_steps(steps);
        Ok(())
    }

    /// `finish` in parts, for the Kineto settle on many cores, which builds the launches'
    /// lookup beside the CPU rows (they need only the spans): sorts the spans and takes the
    /// launches out.
    pub(crate) fn finish_spans(&mut self) -> LaunchLog {
        for spans in self.cpu_spans.values_mut() {
            spans.sort_by_key(|s| (s.start, s.end));
        }
        if self.cpu_spans.len() == 1 {
            // One process (the usual trace): its spans are all the spans, and `spans_of`
            // answers every pid from those, so they are kept once (24 bytes a step).
            let (_, spans) = self.cpu_spans.drain().next().expect("one entry");
            self.all_cpu_spans = spans;
        } else {
            self.all_cpu_spans = self.cpu_spans.values().flatten().copied().collect();
            self.all_cpu_spans.sort_by_key(|s| (s.start, s.end));
        }
        self.gpu_spans.sort_by_key(|s| (s.start, s.end));
        std::mem::take(&mut self.launches)
    }

    /// The lookup of `launches` (`finish_spans`), each given the step of its time: asked in
    /// file order, where a thread's launches rise in time, so mostly answered by the last
    /// span (`step_at_cached`; a binary search each was two thirds of the build's steps).
    /// `threads`: how many threads the build may use (`LaunchSteps::build`).
    pub(crate) fn launch_steps(
        &self,
        launches: LaunchLog,
        threads: usize,
    ) -> std::io::Result<LaunchSteps> {
        let step = |cache: &mut StepCache, pid, ts| self.step_at_cached(cache, pid, ts);
        LaunchSteps::build(launches, step, threads)
    }

    /// Keeps the lookup that `launch_step` answers from.
    pub(crate) fn set_launch_steps(&mut self, steps: LaunchSteps) {
        self.launch_steps = steps;
    }
}

/// A worker's last `step_at_cached` answer: ops of a thread come in time order, so most
/// lookups land in the same span and skip the hash lookup and the binary search.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StepCache(Option<Cached>);

#[derive(Debug, Clone, Copy)]
struct Cached {
    pid: i64,
    lo: i64,
    hi: i64,
    step: i64,
}

/// The span containing `ts` (start ≤ ts ≤ end), preferring the latest start.
fn lookup(spans: &[Span], ts: i64) -> Option<i64> {
    let n = spans.partition_point(|s| s.start <= ts);
    spans[..n]
        .iter()
        .rev()
        .take(4)
        .find(|s| ts <= s.end)
        .map(|s| s.step)
}

/// A walk that notes only the links, reading every event up to its `cat` (and the slices
/// it notes in full): the strict re-read of a file that failed (see `kineto::first_error`),
/// and the reference the row walk's notes are tested against.
#[derive(Default)]
pub(crate) struct LinkPass {
    pub links: Mutex<Links>,
    /// Which annotation ranges are steps.
    pub marker: StepMarker,
}

impl LinkPass {
    /// The links, settled (the tests' reference for the row walk's notes).
    #[cfg(test)]
    pub(crate) fn finish(self) -> Links {
        let mut links = self.links.into_inner().expect("links not poisoned");
        links.finish().expect("launches read back");
        links
    }
}

impl Visitor for LinkPass {
    type Part = Partial;

    fn meta(&mut self, key: &str, raw: &[u8]) -> Result<(), ParseErr> {
        let links = self.links.get_mut().expect("links not poisoned");
        links.meta.take(key, raw);
        Ok(())
    }

    fn event(&self, c: &mut Cursor<'_>, part: &mut Partial, off: u64) -> Result<(), JsonError> {
        let (ev, read) = trace_event::parse_if(
            c,
            |ph, cat| {
                ph == b"X"
                    && cat.is_none_or(|cat| {
                        matches!(
                            Cat::of(cat),
                            Cat::UserAnnotation
                                | Cat::GpuUserAnnotation
                                | Cat::Runtime
                                | Cat::Driver
                        )
                    })
            },
            None,
        )?;
        if read && ev.ph == b"X" {
            note(part, &ev, &self.marker, off);
        }
        Ok(())
    }

    fn take(&self, p: Partial) -> Result<(), ParseErr> {
        self.links.lock().expect("links not poisoned").absorb(p)
    }
}

/// Notes the span or launch a slice event (at byte `off`) is, if it is one.
pub(crate) fn note(p: &mut Partial, ev: &Ev, marker: &StepMarker, off: u64) {
    let cat = Cat::of(ev.cat);
    let Some(ts) = ev.ts.and_then(trace_event::micros) else {
        return;
    };
    match cat {
        Cat::UserAnnotation | Cat::GpuUserAnnotation => {
            let Some(step) = ev.name.and_then(|n| marker.step(n)) else {
                return;
            };
            let end = ts + ev.dur.and_then(trace_event::micros).unwrap_or(0).max(0);
            let span = Span {
                start: ts,
                end,
                step,
            };
            if cat == Cat::UserAnnotation {
                p.cpu_span(pid_key(ev.pid), span, off);
            } else {
                p.gpu_span(span, off);
            }
        }
        Cat::Runtime | Cat::Driver => {
            let [corr] = ev
                .args
                .map(|a| trace_event::pick(a, &[b"correlation"]))
                .unwrap_or([None]);
            if let Some(corr) = corr.and_then(trace_event::int) {
                p.launches.push((corr, ts, pid_key(ev.pid)));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The cached lookup answers as `step_at` does, whatever the order of queries.
        #[test]
        fn cached_lookup_matches_step_at(
            spans in proptest::collection::vec((0i64..100, 0i64..30, 0i64..2), 0..12),
            queries in proptest::collection::vec((0i64..3, -5i64..140), 1..60),
        ) {
            let mut links = Links::default();
            for (i, &(start, len, pid)) in spans.iter().enumerate() {
                let span = Span { start, end: start + len, step: i as i64 };
                links.cpu_spans.entry(pid).or_default().push(span);
            }
            links.finish().unwrap();
            let mut cache = StepCache::default();
            for (pid, ts) in queries {
                prop_assert_eq!(
                    links.step_at_cached(&mut cache, pid, ts),
                    links.step_at(pid, ts)
                );
            }
        }
    }

    /// A launches' file that cannot be made stops the walk, and says why.
    #[test]
    fn a_launch_spool_that_cannot_be_written_stops_the_walk() {
        let not_a_dir = tempfile::NamedTempFile::new().unwrap();
        let mut links = Links::spilling_to(not_a_dir.path().join("staging"));
        let mut p = Partial::default();
        (0..super::super::spool::CHUNK as i64).for_each(|i| p.launch(i, i, 1));
        let e = links.absorb(p).unwrap_err();
        assert!(e.msg.contains("writing the output failed"), "{}", e.msg);
        assert!(links.take_spill_error().is_some());
    }

    /// Past `MAX_STEP_SPANS` step annotations the file is refused at the byte of the last
    /// one noted, whichever runs of events they came in.
    #[test]
    fn step_annotations_past_the_limit_are_refused_where_they_are() {
        let span = |i: usize| Span {
            start: i as i64,
            end: i as i64,
            step: i as i64,
        };
        let mut links = Links::default();
        let mut a = Partial::default();
        (0..MAX_STEP_SPANS - 1).for_each(|i| a.cpu_span(1, span(i), 10 + i as u64));
        links.absorb(a).unwrap();
        let mut b = Partial::default();
        b.gpu_spans.push(span(0));
        b.last_span_off = 7;
        links.absorb(b).unwrap();
        let mut c = Partial::default();
        c.cpu_span(2, span(0), 123_456);
        let e = links.absorb(c).unwrap_err();
        assert_eq!(e.offset, 123_456);
        assert!(
            e.msg.contains("more than 1000000 step annotations"),
            "{}",
            e.msg
        );
    }
}
