//! The report's first screen: per run, the verdicts in words, each with its number and a link
//! to the section that shows it.
//!
//! A reader opens the page to learn who is late, how much communication is exposed and why,
//! how idle the GPUs are and how well they are used. The sections below answer that, but a
//! page of charts and tables leaves the reader to find the answer. Every number here is one
//! the page (and the CLI) already computes: the straggler rows of `aorta collectives`, the
//! rank rows of `aorta overlap --by rank`, the breakdown rows of `aorta breakdown`, the
//! rank-level MFU of `aorta perf` and the findings of `aorta info`, never recomputed another
//! way. What is not known is said briefly, never guessed.

use std::fmt::Write as _;

use aorta_transform::collectives::Job;
use aorta_transform::idle::breakdown::Row;
use aorta_transform::idle::Key;
use aorta_transform::info::RunSummary;
use aorta_transform::perf::PerfRun;
use aorta_transform::rows::{floats, ints};

use super::data::{RankTotal, RunData};
use super::{anchor, join};
use crate::fmt;
use crate::page::{esc, Page};

/// Section anchors the verdicts link to (the page's `<h2 id>`s).
pub(crate) const OVERLAP: &str = "overlap";
pub(crate) const IDLE: &str = "idle";
pub(crate) const MFU: &str = "mfu";
pub(crate) const QUALITY: &str = "data-quality";

/// One verdict: its text (plain, escaped when written) and the anchor it links to.
struct Verdict {
    text: String,
    link: String,
    label: &'static str,
}

/// What the headline reads, all computed once for the page.
pub(crate) struct Inputs<'a> {
    pub data: &'a RunData,
    pub idle: &'a [(Key, Row)],
    pub perf: &'a [PerfRun],
    pub info: &'a [RunSummary],
}

/// The headline of every reported run, at the top of the page.
pub(crate) fn render(page: &mut Page, inp: &Inputs) {
    let mut html = String::from("<div class=\"headline\" id=\"headline\">\n");
    for run in &inp.data.runs {
        let verdicts = verdicts(inp, run);
        let _ = writeln!(
            html,
            "<h3 id=\"{}\">Run {}: headline</h3>\n<ul>",
            esc(&anchor("headline", run)),
            esc(run)
        );
        for v in verdicts {
            let _ = writeln!(
                html,
                "<li>{} <a href=\"#{}\">{} →</a></li>",
                esc(&v.text),
                esc(&v.link),
                v.label
            );
        }
        html.push_str("</ul>\n");
    }
    html.push_str("</div>\n");
    page.raw(&html);
}

fn verdicts(inp: &Inputs, run: &str) -> Vec<Verdict> {
    let d = inp.data;
    let mut out = Vec::new();
    if let Some(job) = d.jobs.iter().find(|j| j.run == run) {
        out.extend(lateness(job));
    }
    let totals: Vec<&RankTotal> = d.totals.iter().filter(|t| t.run == run).collect();
    out.extend(exposed(&totals));
    let idle: Vec<&(Key, Row)> = inp.idle.iter().filter(|(k, _)| k.run == run).collect();
    out.extend(idle_verdict(&idle));
    if let Some(p) = inp.perf.iter().find(|p| p.run == run) {
        out.extend(mfu(p, &d.ranks));
    }
    let job = d.jobs.iter().find(|j| j.run == run);
    out.push(quality(inp.info.iter().find(|s| s.run == run), job));
    out
}

/// Who arrived last at the collectives and what it cost the others (`aorta collectives`'
/// straggler rows).
fn lateness(job: &Job) -> Option<Verdict> {
    if job.ranks.len() < 2 || !job.arrivals.iter().any(Option::is_some) {
        return None;
    }
    let df = job.rank_view().ok()?;
    let (rank, place) = (ints(&df, "rank"), ints(&df, "straggler_rank"));
    let (last, insts, caused) = (
        ints(&df, "times_last"),
        ints(&df, "instances"),
        ints(&df, "caused_ns"),
    );
    let wait = floats(&df, "wait_pct");
    let top = (0..df.height()).find(|&i| place[i] == Some(1))?;
    let link = anchor("across-ranks", &job.run);
    let caused_ns = caused[top].unwrap_or(0);
    if caused_ns == 0 {
        return Some(Verdict {
            text: "No rank made the others wait: at every matched collective the ranks \
                   arrived together (0.000 ms caused)."
                .into(),
            link,
            label: "across ranks",
        });
    }
    let r = rank[top].unwrap_or(0);
    let others: Vec<(i64, f64)> = (0..df.height())
        .filter(|&i| i != top)
        .filter_map(|i| Some((rank[i]?, wait[i]?)))
        .collect();
    let waiting = match others.as_slice() {
        [] => String::new(),
        [(o, w)] => format!(
            "; rank {o} spent {} % of its collective kernel time waiting",
            fmt::pct(*w)
        ),
        _ => {
            let lo = others.iter().map(|o| o.1).fold(f64::MAX, f64::min);
            let hi = others.iter().map(|o| o.1).fold(f64::MIN, f64::max);
            format!(
                "; the other {} ranks spent {} % of their collective kernel time waiting",
                others.len(),
                range(lo, hi)
            )
        }
    };
    Some(Verdict {
        text: format!(
            "Rank {r} is the straggler: last to arrive at {} of {} collectives, it made the \
             others wait {} ms in all (caused){waiting}.",
            last[top].unwrap_or(0),
            insts[top].unwrap_or(0),
            fmt::ms_ns(caused_ns),
        ),
        link,
        label: "across ranks",
    })
}

/// `lo–hi` as percentages, or one value when both print alike.
fn range(lo: f64, hi: f64) -> String {
    let (a, b) = (fmt::pct(lo), fmt::pct(hi));
    if a == b {
        a
    } else {
        format!("{a}–{b}")
    }
}

/// How much communication no compute hid, on the rank with the most, and how much of its
/// comm was waiting (`aorta overlap --by rank`).
fn exposed(totals: &[&RankTotal]) -> Option<Verdict> {
    let trace: Vec<&&RankTotal> = totals.iter().filter(|t| t.source == "trace").collect();
    let link = OVERLAP.to_string();
    let label = "overlap";
    if trace.is_empty() {
        // JSONL logs only: they give compute∩comm per iteration but no comm union.
        let j = totals
            .iter()
            .filter(|t| t.compute_comm_overlap_ns.is_some())
            .max_by_key(|t| t.compute_comm_overlap_ns)?;
        if j.comm_ns.is_some_and(|c| c > 0) {
            return Some(exposed_text(&[j]));
        }
        return Some(Verdict {
            text: format!(
                "Exposed communication: unknown. The JSONL logs give compute∩comm ({} ms on \
                 rank {}, all iterations) but no communication time, so what was exposed \
                 cannot be told.",
                fmt::opt(j.compute_comm_overlap_ns, fmt::ms_ns),
                j.rank
            ),
            link,
            label,
        });
    }
    if trace.iter().all(|t| t.comm_ns.unwrap_or(0) == 0) {
        return Some(Verdict {
            text: "No communication kernels: nothing to expose.".into(),
            link,
            label,
        });
    }
    let refs: Vec<&RankTotal> = trace.iter().map(|t| **t).collect();
    Some(exposed_text(&refs))
}

fn exposed_text(rows: &[&RankTotal]) -> Verdict {
    let t = rows
        .iter()
        .max_by_key(|t| (t.exposed_comm_ns.unwrap_or(0), std::cmp::Reverse(t.rank)))
        .copied()
        .unwrap_or(rows[0]);
    let many = rows.len() > 1;
    let head = if many {
        format!(
            "Exposed communication: at most {} ms per rank, on rank {}",
            fmt::opt(t.exposed_comm_ns, fmt::ms_ns),
            t.rank
        )
    } else {
        format!(
            "Exposed communication: {} ms",
            fmt::opt(t.exposed_comm_ns, fmt::ms_ns)
        )
    };
    let whose = if many { "its" } else { "the" };
    let of = format!(
        " (of {whose} {} ms of comm in a {} ms window; {} % hidden under compute).",
        fmt::opt(t.comm_ns, fmt::ms_ns),
        fmt::opt(t.window_ns, fmt::ms_ns),
        fmt::opt(t.comm_hidden_pct, fmt::pct),
    );
    let split = match (t.comm_wait_ns, t.exposed_transfer_ns) {
        (Some(w), Some(x)) => format!(
            " Of that rank's comm, {} ms was waiting for the last rank to arrive, and {} ms of \
             transfer ran with no compute (what better overlap can hide).",
            fmt::ms_ns(w),
            fmt::ms_ns(x)
        ),
        _ => " Waiting is not measured: no collective was matched across ranks.".into(),
    };
    Verdict {
        text: format!("{head}{of}{split}"),
        link: OVERLAP.into(),
        label: "overlap",
    }
}

/// The idle share of the idlest rank and its main cause (`aorta breakdown`).
fn idle_verdict(rows: &[&(Key, Row)]) -> Option<Verdict> {
    let (k, r) = rows
        .iter()
        .map(|x| (&x.0, &x.1))
        .max_by(|a, b| super::idle::idle_pct(a.1).total_cmp(&super::idle::idle_pct(b.1)))?;
    let (link, label) = (IDLE.to_string(), "idle");
    if r.idle_ns == 0 {
        return Some(Verdict {
            text: "No GPU idle time: on every rank something ran from the first activity to \
                   the last."
                .into(),
            link,
            label,
        });
    }
    let causes = [
        (
            r.idle.host_wait_ns,
            "host-wait",
            "nothing was queued, so the GPU waited for the CPU",
        ),
        (
            r.idle.kernel_wait_ns,
            "kernel-wait",
            "queued, the short launch gaps between kernels",
        ),
        (
            r.idle.other_ns,
            "other",
            "queued but blocked, on an event or another stream",
        ),
    ];
    let (ns, name, why) = causes
        .iter()
        .max_by_key(|c| c.0)
        .copied()
        .unwrap_or(causes[0]);
    let who = if rows.len() > 1 {
        format!(
            "at most {} % of a rank's window, on rank {}",
            fmt::pct(super::idle::idle_pct(r)),
            k.rank
        )
    } else {
        format!("{} % of the window", fmt::pct(super::idle::idle_pct(r)))
    };
    Some(Verdict {
        text: format!(
            "Idle: {who} ({} ms of {} ms), mostly {name} ({} ms: {why}).",
            fmt::ms_ns(r.idle_ns),
            fmt::ms_ns(r.window_ns),
            fmt::ms_ns(ns)
        ),
        link,
        label,
    })
}

/// MFU over each reported rank's steps (`aorta perf`'s rank rows), where a FLOPs model and a
/// known GPU allow it.
fn mfu(p: &PerfRun, ranks: &[i64]) -> Option<Verdict> {
    let rows: Vec<_> = p
        .steps
        .iter()
        .filter(|s| s.level == "rank" && ranks.contains(&s.rank))
        .collect();
    let known: Vec<_> = rows.iter().filter(|s| s.mfu_pct.is_some()).collect();
    let (link, label) = (MFU.to_string(), "MFU");
    if known.is_empty() {
        if rows.is_empty() {
            return None;
        }
        return Some(Verdict {
            text: if rows.iter().all(|s| s.model_flops == 0) {
                "MFU: not modelled (no GEMM, attention or convolution with known shapes).".into()
            } else {
                "MFU: not known: the GPU has no entry in the device-peak table \
                 (`--device-peaks FILE` adds one)."
                    .into()
            },
            link,
            label,
        });
    }
    let v: Vec<f64> = known.iter().filter_map(|s| s.mfu_pct).collect();
    let lo = v.iter().copied().fold(f64::MAX, f64::min);
    let hi = v.iter().copied().fold(f64::MIN, f64::max);
    let first = known[0];
    let what = format!(
        "{} on {}",
        first.dtype.unwrap_or("-"),
        first.device.as_deref().unwrap_or("-")
    );
    let text = if known.len() == 1 {
        format!(
            "MFU: {} % on rank {} over its steps ({what}): model FLOPs / (GPU window × peak).",
            fmt::pct(lo),
            first.rank
        )
    } else {
        let ranks: Vec<i64> = known.iter().map(|s| s.rank).collect();
        format!(
            "MFU: {} % over each rank's steps (ranks {}; {what}): model FLOPs / (GPU window × \
             peak).",
            range(lo, hi),
            join(&ranks)
        )
    };
    Some(Verdict { text, link, label })
}

/// The data-quality findings worth a look: `aorta info`'s trouble codes and what the
/// collective matching found incomplete.
fn quality(info: Option<&RunSummary>, job: Option<&Job>) -> Verdict {
    let mut items: Vec<String> = Vec::new();
    let mut noise = 0;
    if let Some(s) = info {
        for f in &s.findings {
            if f.severity == "trouble" {
                items.push(format!("{} ×{}", f.code, f.count));
            } else {
                noise += f.count;
            }
        }
    }
    if let Some(j) = job {
        for f in j.findings() {
            if super::quality::collective_severity(f.code) == "trouble" {
                items.push(format!("{} ×{}", f.code, f.count));
            } else {
                noise += f.count as i64;
            }
        }
    }
    let text = if items.is_empty() {
        format!(
            "Data quality: nothing to check ({noise} noise finding{}, expected in healthy \
             traces).",
            if noise == 1 { "" } else { "s" }
        )
    } else {
        let shown = items.len().min(4);
        let more = items.len() - shown;
        format!(
            "Data quality: check {}{}.",
            items[..shown].join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    };
    Verdict {
        text,
        link: QUALITY.into(),
        label: "data quality",
    }
}
