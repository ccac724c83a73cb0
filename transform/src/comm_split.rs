//! The overlap split: of a rank's communication time, how much is waiting and how much is
//! transfer, and how much transfer no compute hides.
//!
//! Exposed communication mixes two problems with different fixes: waiting for a late peer
//! (fixed by balancing the ranks) and transfer with nothing to overlap it (fixed by better
//! overlap). `exposed_transfer_ns` is the second alone.

use crate::intervals::{intersection, length, Union};

/// One comm kernel of a rank: `[start, start + wait)` waits, `[start + wait, end)` transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part {
    pub start: i64,
    pub end: i64,
    pub wait: i64,
    pub step: Option<i64>,
}

/// The three split metrics of one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Split {
    pub comm_wait_ns: i64,
    pub comm_transfer_ns: i64,
    pub exposed_transfer_ns: i64,
}

/// The split of `parts` against `compute` (sorted disjoint segments).
pub(crate) fn split<'a>(
    parts: impl IntoIterator<Item = &'a Part>,
    compute: &[(i64, i64)],
) -> Split {
    let mut wait: Vec<(i64, i64)> = vec![];
    let mut transfer: Vec<(i64, i64)> = vec![];
    for p in parts {
        let mid = p.start + p.wait;
        if mid > p.start {
            wait.push((p.start, mid));
        }
        if p.end > mid {
            transfer.push((mid, p.end));
        }
    }
    let (wait, transfer) = (union(wait), union(transfer));
    let transfer_ns = length(&transfer);
    Split {
        comm_wait_ns: length(&wait),
        comm_transfer_ns: transfer_ns,
        exposed_transfer_ns: transfer_ns - intersection(&transfer, compute),
    }
}

/// Sorted disjoint segments covering `segs`.
pub fn union(mut segs: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    segs.sort_unstable();
    let mut u = Union::default();
    for (s, e) in segs {
        u.push(s, e);
    }
    u.segments().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_by_hand() {
        let p = |start, end, wait| Part {
            start,
            end,
            wait,
            step: None,
        };
        // Kernel A waits [0, 40) and transfers [40, 100); kernel B waits [90, 95), transfers
        // [95, 130). Compute covers [50, 70) and [120, 200).
        let parts = [p(0, 100, 40), p(90, 130, 5)];
        let s = split(&parts, &[(50, 70), (120, 200)]);
        assert_eq!(s.comm_wait_ns, 40 + 5);
        // Transfer union [40, 130) = 90, minus compute 20 + 10.
        assert_eq!(s.comm_transfer_ns, 90);
        assert_eq!(s.exposed_transfer_ns, 60);
    }
}
