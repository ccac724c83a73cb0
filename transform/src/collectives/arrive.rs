//! Arrivals, waiting and transfer: the METRICS.md "cross-rank collectives" definitions.
//!
//! A collective kernel starts on each member when that rank gets there, but no data moves
//! until the last member has arrived. So each kernel splits into a wait (from its own
//! arrival to the last member's, clipped to the kernel) and a transfer (the rest). Two
//! passes over the ranks do it: the first finds each instance's first, last and
//! second-to-last arrival, the second splits every kernel against them.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::clock::Clock;
use super::load::{Group, InstanceKey, Kernel, RankKernels, NO_STEP};

/// Whether an instance can be paired across ranks, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every rank of the run that has the group has this instance, all of one kind.
    Paired,
    /// A one-rank group: nothing to wait for.
    Single,
    /// Only one member was traced (one rank of a multi-rank group).
    Unpaired,
    /// Members disagree on the kind at this seq.
    KindMismatch,
    /// Some member lacks it (a truncated trace, or a rank that lost a kernel).
    MissingRanks,
}

impl Status {
    /// The name the `status` columns of `collectives` and `collective_instances` hold.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Paired => "paired",
            Status::Single => "single",
            Status::Unpaired => "unpaired",
            Status::KindMismatch => "kind_mismatch",
            Status::MissingRanks => "missing_ranks",
        }
    }

    /// Arrivals, waits and transfers are defined.
    pub(crate) fn timed(self) -> bool {
        matches!(self, Status::Paired | Status::Single)
    }

    pub(crate) fn of(inst: &InstanceKey, group: &Group) -> Status {
        if inst.kind_mismatch {
            Status::KindMismatch
        } else if group.size == Some(1) {
            Status::Single
        } else if inst.members < group.present {
            Status::MissingRanks
        } else if inst.members == 1 {
            Status::Unpaired
        } else {
            Status::Paired
        }
    }
}

/// One instance's arrivals on the reference clock.
#[derive(Debug, Clone, Copy)]
pub struct Arrivals {
    pub(crate) first: i64,
    /// The latest arrival, ns on the reference rank's clock.
    pub last: i64,
    /// The second-to-last arrival (`last` for one member: nobody else imposed anything).
    pub second: i64,
    /// The member that arrived last (ties: the lowest rank).
    pub last_rank: i64,
    /// The last rank's kernel's step.
    pub step: i64,
    /// Minimum transfer time over the members.
    pub(crate) transfer: i64,
}

const UNSEEN: Arrivals = Arrivals {
    first: i64::MAX,
    last: i64::MIN,
    second: i64::MIN,
    last_rank: -1,
    step: i64::MIN,
    transfer: i64::MAX,
};

/// First pass: arrivals per timed instance (`None` for the others).
pub(super) fn arrivals(
    ranks: &[RankKernels],
    clocks: &[Clock],
    status: &[Status],
) -> Vec<Option<Arrivals>> {
    let mut out = vec![UNSEEN; status.len()];
    // Ranks ascending and `>`: a tie for last goes to the lowest rank.
    for (rk, clock) in ranks.iter().zip(clocks) {
        for k in rk
            .kernels
            .iter()
            .filter(|k| status[k.inst as usize].timed())
        {
            let a = &mut out[k.inst as usize];
            let arrival = k.start - clock.offset_ns;
            a.first = a.first.min(arrival);
            if arrival > a.last {
                a.second = a.last;
                (a.last, a.last_rank, a.step) = (arrival, rk.rank, k.step);
            } else if arrival > a.second {
                a.second = arrival;
            }
        }
    }
    for (rk, clock) in ranks.iter().zip(clocks) {
        for k in rk
            .kernels
            .iter()
            .filter(|k| status[k.inst as usize].timed())
        {
            let (wait, _) = split(k, clock, &out[k.inst as usize]);
            let a = &mut out[k.inst as usize];
            a.transfer = a.transfer.min(k.end - k.start - wait);
        }
    }
    out.into_iter()
        .zip(status)
        .map(|(mut a, s)| {
            s.timed().then(|| {
                if a.second == i64::MIN {
                    a.second = a.last;
                }
                a
            })
        })
        .collect()
}

/// (wait, arrival) of one kernel of an instance with these arrivals.
pub(super) fn split(k: &Kernel, clock: &Clock, a: &Arrivals) -> (i64, i64) {
    let arrival = k.start - clock.offset_ns;
    let wait = (a.last - arrival).clamp(0, k.end - k.start);
    (wait, arrival)
}

/// Straggler numbers of one rank over a set of instances (the run, or one step).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RankStats {
    /// Paired instances with this rank as a member.
    pub instances: i64,
    /// Of those, the instances where it arrived last.
    pub times_last: i64,
    /// Sum over those of its arrival − the second-to-last arrival, ns.
    pub caused_ns: i64,
    /// Sum of its kernels' `wait_ns` (time run before the last member arrived).
    pub wait_ns: i64,
    /// Sum of its kernels' `transfer_ns` (duration − wait).
    pub transfer_ns: i64,
}

/// Rows of `collective_ranks`: (level, step, rank) → numbers; level 0 is the whole run
/// (step `None`), level 1 one step (`None`: kernels outside every step).
pub type Stragglers = BTreeMap<(u8, Option<i64>, i64), RankStats>;

/// The straggler rows of every rank: each rank's steps are summed on a worker thread
/// (millions of kernels), then merged into the run and step rows (thousands).
pub(super) fn stragglers(
    ranks: &[RankKernels],
    clocks: &[Clock],
    arr: &[Option<Arrivals>],
    status: &[Status],
) -> Stragglers {
    let idx: Vec<usize> = (0..ranks.len()).collect();
    let Ok(per_rank) = crate::par::map(&idx, |&r| {
        Ok::<_, std::convert::Infallible>(rank_steps(&ranks[r], &clocks[r], arr, status))
    });
    let mut out = Stragglers::new();
    for (rk, steps) in ranks.iter().zip(per_rank) {
        for (step, s) in steps {
            let run = out.entry((0, None, rk.rank)).or_default();
            run.instances += s.instances;
            run.wait_ns += s.wait_ns;
            run.transfer_ns += s.transfer_ns;
            run.times_last += s.times_last;
            run.caused_ns += s.caused_ns;
            out.insert((1, step, rk.rank), s);
        }
    }
    out
}

/// One rank's paired kernels summed per step (`None`: outside every step).
fn rank_steps(
    rk: &RankKernels,
    clock: &Clock,
    arr: &[Option<Arrivals>],
    status: &[Status],
) -> FxHashMap<Option<i64>, RankStats> {
    let mut steps: FxHashMap<Option<i64>, RankStats> = FxHashMap::default();
    for k in &rk.kernels {
        if status[k.inst as usize] != Status::Paired {
            continue;
        }
        let Some(a) = &arr[k.inst as usize] else {
            continue;
        };
        let (wait, arrival) = split(k, clock, a);
        let s = steps
            .entry((k.step != NO_STEP).then_some(k.step))
            .or_default();
        s.instances += 1;
        s.wait_ns += wait;
        s.transfer_ns += k.end - k.start - wait;
        if a.last_rank == rk.rank {
            s.times_last += 1;
            s.caused_ns += arrival - a.second;
        }
    }
    steps
}

/// The order of stragglers within one run or step: by caused delay, then times last, then
/// rank (1 = the rank that held the others up the most).
pub(super) fn ranking(rows: &[(i64, RankStats)]) -> Vec<i64> {
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by_key(|&i| {
        let (rank, s) = rows[i];
        (
            std::cmp::Reverse(s.caused_ns),
            std::cmp::Reverse(s.times_last),
            rank,
        )
    });
    let mut place = vec![0; rows.len()];
    for (p, i) in idx.into_iter().enumerate() {
        place[i] = p as i64 + 1;
    }
    place
}
