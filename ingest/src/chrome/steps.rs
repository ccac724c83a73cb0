//! Steps of a generic Chrome trace, from `--step-marker`.
//!
//! Why a pre-pass: the reader writes each window's rows as soon as its workers have parsed
//! them, and a step range, like the launch of a kernel, may come anywhere in the file. So
//! when `--step-marker` names the ranges, one walk before the rows collects the ranges on
//! CPU threads whose name it matches (`X` slices and `B`/`E` pairs, any category but the
//! GPU ones; `gpu_user_annotation` ranges are the GPU-side spans) and the launches (runtime
//! or driver slices with `args.correlation`), into the Kineto reader's `Links`: rows then get
//! their steps by the same rules as Kineto's `ProfilerStep#N` spans (a CPU row by its start,
//! in its process; a GPU row by its launch, else its GPU start). Without `--step-marker`
//! nothing changes: the file is read once, as before, and rows have no step.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::slices::{self, Target};
use crate::diag::Diagnostics;
use crate::error::ParseErr;
use crate::json::{Cursor, JsonError};
use crate::kineto::links::{Links, Partial};
use crate::rows::{CpuCategory, StepSource};
use crate::step_span::{Span, StepMarker};
use crate::trace_event::{self, pid_key, Cat, Ev};
use crate::walk::Visitor;

/// What a `B` the scan keeps is: a step range, a launch, or both.
#[derive(Debug, Clone, Copy)]
struct Noted {
    pid: i64,
    ts: i64,
    step: Option<i64>,
    corr: Option<i64>,
    off: u64,
}

/// A `B` (with what it notes, if anything) or an `E`, in file order.
enum Edge {
    Begin((i64, i64), Option<Noted>),
    End((i64, i64), Option<i64>),
}

/// What a worker found in a run of events.
#[derive(Default)]
pub(crate) struct ScanPart {
    partial: Partial,
    edges: Vec<Edge>,
    pids: BTreeSet<i64>,
}

/// The walk that collects the step spans and launches (and the pids, for `--rank-map`).
pub(crate) struct StepScan {
    marker: StepMarker,
    /// Whether every event's pid is wanted (`--rank-map`); else GPU slices are skipped
    /// after their `ph` and `cat`.
    want_pids: bool,
    scanned: Mutex<Scanned>,
}

/// What the scan's parts add up to (`Visitor::take`).
struct Scanned {
    links: Links,
    /// Open `B`s per thread, across the whole file.
    open: FxHashMap<(i64, i64), Vec<Option<Noted>>>,
    pids: BTreeSet<i64>,
}

impl StepScan {
    /// A scan whose launches wait in a temporary file in `staging`.
    pub(crate) fn new(marker: StepMarker, want_pids: bool, staging: PathBuf) -> StepScan {
        StepScan {
            marker,
            want_pids,
            scanned: Mutex::new(Scanned {
                links: Links::spilling_to(staging),
                open: FxHashMap::default(),
                pids: BTreeSet::new(),
            }),
        }
    }

    fn scanned(&mut self) -> &mut Scanned {
        self.scanned.get_mut().expect("scan not poisoned")
    }

    /// The error that stopped the walk writing the launches to their file, if one did.
    pub(crate) fn take_spill_error(&mut self) -> Option<std::io::Error> {
        self.scanned().links.take_spill_error()
    }

    /// The pids of the events read.
    pub(crate) fn take_pids(&mut self) -> BTreeSet<i64> {
        std::mem::take(&mut self.scanned().pids)
    }

    /// The links, spans sorted and every launch given its step.
    pub(crate) fn finish(mut self) -> std::io::Result<Links> {
        let links = &mut self.scanned().links;
        links.finish()?;
        Ok(std::mem::take(links))
    }

    /// What a slice on a CPU thread notes: its step, if the marker names it, and the
    /// correlation of a runtime or driver call.
    fn noted(&self, ev: &Ev, target: &Target, ts: i64, off: u64) -> Option<Noted> {
        let Target::Cpu {
            category,
            correlation,
            ..
        } = target
        else {
            return None;
        };
        let step = ev.name.and_then(|n| self.marker.step(n));
        let launch = matches!(category, CpuCategory::Runtime | CpuCategory::Driver);
        let corr = correlation.filter(|_| launch);
        (step.is_some() || corr.is_some()).then_some(Noted {
            pid: pid_key(ev.pid),
            ts,
            step,
            corr,
            off,
        })
    }
}

/// Notes a slice that ends at `end` into `p`.
fn note(p: &mut Partial, n: Noted, end: i64) {
    if let Some(step) = n.step {
        let span = Span {
            start: n.ts,
            end: end.max(n.ts),
            step,
        };
        p.cpu_span(n.pid, span, n.off);
    }
    if let Some(corr) = n.corr {
        p.launch(corr, n.ts, n.pid);
    }
}

impl Visitor for StepScan {
    type Part = ScanPart;

    fn meta(&mut self, _key: &str, _raw: &[u8]) -> Result<(), ParseErr> {
        Ok(())
    }

    fn event(&self, c: &mut Cursor<'_>, part: &mut ScanPart, off: u64) -> Result<(), JsonError> {
        // Decided once `cat` is known too: an event without one is read whole.
        let (ev, read) = trace_event::parse_if(
            c,
            |ph, cat| {
                cat.is_none_or(|cat| {
                    self.want_pids
                        || matches!(ph, b"B" | b"E")
                        || (ph == b"X" && !Cat::of(cat).is_gpu())
                })
            },
            None,
        )?;
        if !read {
            return Ok(());
        }
        if let Some(pid) = ev.pid.and_then(trace_event::int) {
            part.pids.insert(pid);
        }
        let ts = ev.ts.and_then(trace_event::micros);
        match ev.ph {
            b"X" => {
                let Some(ts) = ts else { return Ok(()) };
                let dur = ev.dur.and_then(trace_event::micros).unwrap_or(0).max(0);
                let target = slices::target(&ev);
                if let Some(n) = self.noted(&ev, &target, ts, off) {
                    note(&mut part.partial, n, ts.saturating_add(dur));
                } else if matches!(target, Target::Skip) {
                    // `gpu_user_annotation`: the GPU side of a step range.
                    if let Some(step) = ev.name.and_then(|n| self.marker.step(n)) {
                        let end = ts.saturating_add(dur);
                        part.partial.gpu_span(
                            Span {
                                start: ts,
                                end,
                                step,
                            },
                            off,
                        );
                    }
                }
            }
            b"B" => {
                let noted = ts.and_then(|ts| self.noted(&ev, &slices::target(&ev), ts, off));
                part.edges.push(Edge::Begin(slices::thread(&ev), noted));
            }
            b"E" => part.edges.push(Edge::End(slices::thread(&ev), ts)),
            _ => {}
        }
        Ok(())
    }

    fn take(&self, mut part: ScanPart) -> Result<(), ParseErr> {
        let mut s = self.scanned.lock().expect("scan not poisoned");
        for edge in part.edges.drain(..) {
            match edge {
                Edge::Begin(thread, n) => s.open.entry(thread).or_default().push(n),
                Edge::End(thread, ts) => {
                    let open = s.open.get_mut(&thread).and_then(Vec::pop).flatten();
                    if let (Some(n), Some(end)) = (open, ts) {
                        note(&mut part.partial, n, end);
                    }
                }
            }
        }
        s.pids.append(&mut part.pids);
        s.links.absorb(part.partial)
    }
}

/// A CPU row's step: the span its start lies in, in its process.
pub(crate) fn cpu_step(
    links: &Links,
    pid: i64,
    start: i64,
    diag: &mut Diagnostics,
    off: u64,
    name: &str,
) -> Option<i64> {
    let step = links.step_at(pid, start);
    if step.is_none() && links.has_steps() {
        outside(diag, off, name);
    }
    step
}

/// A GPU row's step: that of its launch (the runtime call of its correlation), else its
/// GPU start against the GPU-side spans (the CPU ones if none), as Kineto's reader does.
pub(crate) fn gpu_step(
    links: &Links,
    corr: Option<i64>,
    start: i64,
    diag: &mut Diagnostics,
    off: u64,
    name: &str,
) -> (Option<i64>, StepSource) {
    if let Some(step) = corr.and_then(|c| links.launch_step(c)) {
        if step.is_none() && links.has_steps() {
            outside(diag, off, name);
        }
        return (step, StepSource::Launch);
    }
    diag.add_min("kernel_without_launch", Some(off as i64), || {
        format!("{name} (correlation {corr:?})")
    });
    if !links.has_steps() {
        return (None, StepSource::None);
    }
    let step = links.gpu_step_at(start);
    if step.is_none() {
        outside(diag, off, name);
    }
    (step, StepSource::GpuTime)
}

fn outside(diag: &mut Diagnostics, off: u64, name: &str) {
    diag.add_min("outside_steps", Some(off as i64), || name.to_string());
}
