//! The rules of the per-window measurement, on plain rows (no polars): which CPU ranges are
//! windows and in which phase, which GPU work each window owns, and what it measures.
//! Kept apart from the dataset reading so that the hand-made cases test the rules alone.

use rustc_hash::FxHashMap as HashMap;

use crate::comm_split::union;
use crate::intervals::{intersection, length};

use super::{WindowInstance, WindowNames};

/// A thread: (run, rank, pid, tid). Windows own only the launches of their own thread.
pub(super) type Thread<'a> = (&'a str, i64, Option<i64>, Option<i64>);

/// A process: (run, rank, pid).
type Process<'a> = (&'a str, i64, Option<i64>);

/// A CPU range (`cpu_ops` row of category `user_annotation`: `record_function`, a user
/// annotation, an NVTX or roctx range).
#[derive(Debug, Clone, Copy)]
pub(super) struct Range<'a> {
    pub thread: Thread<'a>,
    pub name: &'a str,
    pub start: i64,
    pub end: i64,
    pub step: Option<i64>,
}

/// A launch call (`cpu_ops` row of a launch category, runtime or driver) with its
/// correlation id.
#[derive(Debug, Clone, Copy)]
pub(super) struct Call<'a> {
    pub thread: Thread<'a>,
    pub start: i64,
    pub correlation: i64,
}

/// What a GPU activity counts as inside a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// The taxonomy's `gemm`.
    Gemm,
    /// The taxonomy's `comm`: NCCL/RCCL, userbuffers, peer-to-peer copies.
    Comm,
    /// Anything else (other kernels, copies, sets): only in e2e.
    Other,
}

impl Role {
    pub(super) fn of_category(category: Option<&str>) -> Role {
        match category {
            Some("gemm") => Role::Gemm,
            Some("comm") => Role::Comm,
            _ => Role::Other,
        }
    }
}

/// A GPU activity that a launch call's correlation id links to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gpu<'a> {
    pub run: &'a str,
    pub rank: i64,
    pub role: Role,
    pub start: i64,
    pub end: i64,
    pub correlation: i64,
}

/// The phase a range of this name sets for the windows inside it: `fprop`, `dgrad` and
/// `wgrad` as named, `forward` is `fprop`, `backward` (no finer phase) is `bwd`.
pub(super) fn phase_of_range(name: &str) -> Option<&'static str> {
    match name {
        "fprop" | "forward" => Some("fprop"),
        "dgrad" => Some("dgrad"),
        "wgrad" => Some("wgrad"),
        "backward" => Some("bwd"),
        _ => None,
    }
}

/// Whether a range of this name is a window: (operator, the phase its name carries). A
/// window is a range named exactly as one of `names`, or TransformerEngine's NVTX range of a
/// userbuffers GEMM, `transformer_engine.<Module>.<forward|backward>.<ub_name>.<gemm>`
/// (`.gemm` fprop, `.dgrad_gemm` dgrad, `.wgrad_gemm` wgrad) whose `<ub_name>` is one of
/// `names`.
pub(super) fn window_of<'n>(
    name: &str,
    names: &'n WindowNames,
) -> Option<(&'n str, Option<&'static str>)> {
    let known = |op: &str| {
        names
            .operators
            .iter()
            .find(|o| *o == op)
            .map(String::as_str)
    };
    if let Some(op) = known(name) {
        return Some((op, None));
    }
    let rest = name.strip_prefix("transformer_engine.")?;
    let mut parts = rest.rsplit('.');
    let phase = match parts.next()? {
        "gemm" => "fprop",
        "dgrad_gemm" => "dgrad",
        "wgrad_gemm" => "wgrad",
        _ => return None,
    };
    Some((known(parts.next()?)?, Some(phase)))
}

/// One window before measurement.
#[derive(Debug, Clone)]
struct Window<'a> {
    range: Range<'a>,
    operator: String,
    phase: &'static str,
}

/// The windows among `ranges`, each with its phase: the one its name carries, else the
/// innermost phase range enclosing it on its thread, else the innermost one enclosing it on
/// another thread of its process (PyTorch runs backward on its autograd thread, while the
/// `backward` range around `loss.backward()` is on the main thread), else `fprop`.
fn windows<'a>(ranges: &[Range<'a>], names: &WindowNames) -> Vec<Window<'a>> {
    let mut phases: HashMap<Process, Vec<(&Range, &'static str)>> = HashMap::default();
    for r in ranges {
        if let Some(p) = phase_of_range(r.name) {
            let (run, rank, pid, _) = r.thread;
            phases.entry((run, rank, pid)).or_default().push((r, p));
        }
    }
    let none = Vec::new();
    ranges
        .iter()
        .filter_map(|r| {
            let (operator, named) = window_of(r.name, names)?;
            let (run, rank, pid, _) = r.thread;
            let around = phases.get(&(run, rank, pid)).unwrap_or(&none);
            let innermost = |same_thread: bool| {
                around
                    .iter()
                    .filter(|(p, _)| (p.thread == r.thread) == same_thread)
                    .filter(|(p, _)| p.start <= r.start && r.end <= p.end)
                    .min_by_key(|(p, _)| p.end - p.start)
                    .map(|&(_, phase)| phase)
            };
            let phase = named
                .or_else(|| innermost(true))
                .or_else(|| innermost(false))
                .unwrap_or("fprop");
            Some(Window {
                range: *r,
                operator: operator.to_string(),
                phase,
            })
        })
        .collect()
}

/// For each launch call, the innermost window of its thread whose span holds the call's
/// start: (run, rank, correlation) → window index. One stack scan per thread.
fn owners<'a>(wins: &[Window<'a>], calls: &[Call<'a>]) -> HashMap<(&'a str, i64, i64), usize> {
    let mut by_thread: HashMap<Thread, (Vec<usize>, Vec<&Call>)> = HashMap::default();
    for (i, w) in wins.iter().enumerate() {
        by_thread.entry(w.range.thread).or_default().0.push(i);
    }
    for c in calls {
        if let Some(t) = by_thread.get_mut(&c.thread) {
            t.1.push(c);
        }
    }
    let mut out = HashMap::default();
    for (_, (mut ws, mut cs)) in by_thread {
        ws.sort_by_key(|&i| (wins[i].range.start, std::cmp::Reverse(wins[i].range.end)));
        cs.sort_by_key(|c| c.start);
        let (mut stack, mut next) = (Vec::<usize>::new(), 0);
        for c in cs {
            while next < ws.len() && wins[ws[next]].range.start <= c.start {
                stack.push(ws[next]);
                next += 1;
            }
            // Ranges of one thread nest, so those that ended are on top.
            stack.retain(|&w| wins[w].range.end >= c.start);
            if let Some(&w) = stack.last() {
                let (run, rank, _, _) = c.thread;
                out.entry((run, rank, c.correlation)).or_insert(w);
            }
        }
    }
    out
}

/// Every window instance of `ranges` that owns GPU work, measured: the activities of `gpu`
/// whose launch call (`calls`, matched by correlation id on the same run and rank) started
/// inside the window's span on its thread. A window that launched nothing is left out: it
/// has no GPU time to measure.
pub(super) fn measure(
    ranges: &[Range],
    calls: &[Call],
    gpu: &[Gpu],
    names: &WindowNames,
) -> Vec<WindowInstance> {
    let wins = windows(ranges, names);
    let owner = owners(&wins, calls);
    let mut owned: Vec<Vec<&Gpu>> = vec![Vec::new(); wins.len()];
    for g in gpu {
        if let Some(&w) = owner.get(&(g.run, g.rank, g.correlation)) {
            owned[w].push(g);
        }
    }
    wins.iter()
        .zip(owned)
        .filter(|(_, acts)| !acts.is_empty())
        .map(|(w, acts)| {
            let segs = |role: Role| -> Vec<(i64, i64)> {
                let v = acts.iter().filter(|g| g.role == role);
                union(v.map(|g| (g.start, g.end.max(g.start))).collect())
            };
            let (gemm, comm) = (segs(Role::Gemm), segs(Role::Comm));
            let first = acts.iter().map(|g| g.start).min().unwrap_or(0);
            let last = acts
                .iter()
                .map(|g| g.end.max(g.start))
                .max()
                .unwrap_or(first);
            let count = |role: Role| acts.iter().filter(|g| g.role == role).count();
            let (run, rank, _, _) = w.range.thread;
            WindowInstance {
                run: run.to_string(),
                rank,
                step: w.range.step,
                operator: w.operator.clone(),
                phase: w.phase.to_string(),
                gemm_ns: length(&gemm),
                comm_ns: length(&comm),
                overlap_ns: intersection(&gemm, &comm),
                e2e_ns: last - first,
                num_gemm_events: count(Role::Gemm),
                num_comm_events: count(Role::Comm),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Thread = ("r", 0, Some(1), Some(1));
    const OTHER: Thread = ("r", 0, Some(1), Some(2));

    fn range(thread: Thread<'static>, name: &'static str, start: i64, end: i64) -> Range<'static> {
        Range {
            thread,
            name,
            start,
            end,
            step: Some(4),
        }
    }

    fn call(thread: Thread<'static>, start: i64, correlation: i64) -> Call<'static> {
        Call {
            thread,
            start,
            correlation,
        }
    }

    fn gpu(role: Role, start: i64, end: i64, correlation: i64) -> Gpu<'static> {
        Gpu {
            run: "r",
            rank: 0,
            role,
            start,
            end,
            correlation,
        }
    }

    #[test]
    fn window_names_and_transformer_engine_ranges() {
        let n = WindowNames::default();
        assert_eq!(window_of("qkv", &n), Some(("qkv", None)));
        assert_eq!(window_of("qkv2", &n), None);
        assert_eq!(
            window_of("transformer_engine._Linear.forward.proj.gemm", &n),
            Some(("proj", Some("fprop")))
        );
        assert_eq!(
            window_of(
                "transformer_engine._LayerNormMLP.backward.fc1.dgrad_gemm",
                &n
            ),
            Some(("fc1", Some("dgrad")))
        );
        assert_eq!(
            window_of("transformer_engine._Linear.backward.fc2.wgrad_gemm", &n),
            Some(("fc2", Some("wgrad")))
        );
        // No ub_name: the label's last part before the GEMM is the pass, no operator.
        assert_eq!(
            window_of("transformer_engine._Linear.forward.gemm", &n),
            None
        );
        assert_eq!(
            window_of("transformer_engine._Linear.forward.qkv", &n),
            None
        );
        let custom = WindowNames {
            operators: vec!["attn_out".into()],
        };
        assert_eq!(window_of("attn_out", &custom), Some(("attn_out", None)));
        assert_eq!(window_of("qkv", &custom), None);
    }

    #[test]
    fn phase_ranges_by_name() {
        let names = [
            "fprop", "forward", "dgrad", "wgrad", "backward", "Forward", "bwd",
        ];
        let got: Vec<Option<&str>> = names.iter().map(|n| phase_of_range(n)).collect();
        assert_eq!(
            got,
            [
                Some("fprop"),
                Some("fprop"),
                Some("dgrad"),
                Some("wgrad"),
                Some("bwd"),
                None,
                None
            ]
        );
    }

    #[test]
    fn phases_come_from_the_innermost_enclosing_range_else_another_thread_else_fprop() {
        let ranges = [
            range(T, "backward", 0, 1000),
            range(T, "dgrad", 100, 400),
            range(T, "qkv", 150, 300), // inside dgrad inside backward: dgrad
            range(T, "proj", 500, 600), // inside backward only: bwd
            range(T, "fc1", 2000, 2100), // nothing around on its thread; backward on another
            range(OTHER, "backward", 1900, 2500),
            range(T, "fc2", 3000, 3100), // nothing anywhere: fprop
            range(
                T,
                "transformer_engine._Linear.backward.fc2.wgrad_gemm",
                200,
                250,
            ),
        ];
        let w = windows(&ranges, &WindowNames::default());
        let got: Vec<(&str, &str)> = w.iter().map(|w| (w.operator.as_str(), w.phase)).collect();
        assert_eq!(
            got,
            [
                ("qkv", "dgrad"),
                ("proj", "bwd"),
                ("fc1", "bwd"),
                ("fc2", "fprop"),
                // TE's name wins over the enclosing dgrad.
                ("fc2", "wgrad"),
            ]
        );
    }

    /// Hand-computed: a window [100, 200] on thread T launches a GEMM (call at 110, GPU
    /// [1000, 1600)), an NCCL kernel (call at 120, GPU [1400, 2000)) and a peer copy (call at
    /// 130, GPU [1900, 2100)); a call at 250, after the window, launches a GEMM no window owns;
    /// a call inside the span but on another thread is not the window's.
    #[test]
    fn unions_intersection_and_e2e_by_hand() {
        let ranges = [range(T, "qkv", 100, 200)];
        let calls = [
            call(T, 110, 1),
            call(T, 120, 2),
            call(T, 130, 3),
            call(T, 250, 4),
            call(OTHER, 150, 5),
        ];
        let gpu = [
            gpu(Role::Gemm, 1000, 1600, 1),
            gpu(Role::Comm, 1400, 2000, 2),
            gpu(Role::Comm, 1900, 2100, 3),
            gpu(Role::Gemm, 2200, 2300, 4),
            gpu(Role::Other, 900, 950, 5),
        ];
        let got = measure(&ranges, &calls, &gpu, &WindowNames::default());
        assert_eq!(got.len(), 1);
        let w = &got[0];
        assert_eq!(w.gemm_ns, 600);
        // Comm union [1400, 2100).
        assert_eq!(w.comm_ns, 700);
        // [1400, 1600).
        assert_eq!(w.overlap_ns, 200);
        assert_eq!(w.e2e_ns, 2100 - 1000);
        assert_eq!((w.num_gemm_events, w.num_comm_events), (1, 2));
        assert_eq!((w.operator.as_str(), w.phase.as_str()), ("qkv", "fprop"));
        assert_eq!(w.step, Some(4));
    }

    #[test]
    fn the_innermost_window_owns_and_a_window_that_launched_nothing_is_left_out() {
        let ranges = [
            range(T, "fc1", 0, 1000),
            range(T, "transformer_engine._Linear.forward.fc2.gemm", 100, 200),
            range(T, "proj", 5000, 6000),
        ];
        let calls = [call(T, 50, 1), call(T, 150, 2), call(T, 300, 3)];
        let gpu = [
            gpu(Role::Comm, 10, 20, 1),
            gpu(Role::Gemm, 30, 40, 2),
            gpu(Role::Gemm, 50, 70, 3),
        ];
        let got = measure(&ranges, &calls, &gpu, &WindowNames::default());
        let by_op: Vec<(&str, i64, i64)> = got
            .iter()
            .map(|w| (w.operator.as_str(), w.gemm_ns, w.comm_ns))
            .collect();
        assert_eq!(by_op, [("fc1", 20, 10), ("fc2", 10, 0)]);
    }
}
