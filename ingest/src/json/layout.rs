//! The members of an event that `trace_event::parse_if` must read but will not keep, checked
//! against the bytes of the same members of an earlier event.
//!
//! Why: Kineto writes a flow event (`ph` `s` or `f`, one per kernel launch and one per
//! autograd edge: ~30 % of a training trace's events) as `"ph", "id", "pid", "tid", "ts",
//! "cat"`, and the Kineto reader wants none of them. It decides so at `ph`, but it must still
//! read up to `cat` member by member: that is where a malformed flow is reported, at its
//! offset (the reader skips the rest of an event it does not want, unread, only after `cat`).
//! Those four members cost ~4 % of an ingest's instructions. Flows differ from each other
//! only in their digits, so bytes that are an earlier flow's bytes, a digit wherever that one
//! had a digit, are members that read the same way, up to the same `cat`, with no error:
//! no byte that a JSON reader decides on (quote, backslash, blank, `,` `:` `{` `}` `[` `]`,
//! the bytes of a key it looks for) is a digit. One 16-byte compare checks 16 of them.

/// The bytes from just after an unwanted event's `ph` member to just after its `cat` member,
/// of up to `SLOTS` events that were read member by member.
#[derive(Debug, Default)]
pub(crate) struct Layouts {
    seen: [Vec<u8>; SLOTS],
    /// The slot the next layout goes into.
    next: usize,
}

/// Layouts kept: a Kineto trace has two kinds of flow (`ac2g`, `fwdbwd`), each in two phases.
const SLOTS: usize = 4;

/// Longer stretches are read member by member every time (a layout is copied when kept).
const MAX_LEN: usize = 192;

impl Layouts {
    /// The length of the kept layout that `b[at..]` starts with, if any.
    #[inline]
    pub(crate) fn find(&self, b: &[u8], at: usize) -> Option<usize> {
        self.seen.iter().find_map(|l| {
            let here = b.get(at..at + l.len())?;
            (!l.is_empty() && same_but_digits(l, here)).then_some(l.len())
        })
    }

    /// Keeps `bytes`, which were read member by member without an error.
    pub(crate) fn keep(&mut self, bytes: &[u8]) {
        if bytes.len() > MAX_LEN || self.seen.iter().any(|l| l == bytes) {
            return;
        }
        let slot = &mut self.seen[self.next];
        slot.clear();
        slot.extend_from_slice(bytes);
        self.next = (self.next + 1) % SLOTS;
    }
}

/// Whether every byte of `b` is `a`'s byte, or both are ASCII digits (same lengths).
#[inline]
fn same_but_digits(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    let whole = a.len() / 16 * 16;
    let chunks = a[..whole].chunks_exact(16).zip(b[..whole].chunks_exact(16));
    for (x, y) in chunks {
        if !same16(
            x.try_into().expect("16 bytes"),
            y.try_into().expect("16 bytes"),
        ) {
            return false;
        }
    }
    let digit = |c: u8| c.is_ascii_digit();
    a[whole..]
        .iter()
        .zip(&b[whole..])
        .all(|(&x, &y)| x == y || (digit(x) && digit(y)))
}

/// `same_but_digits` of 16 bytes.
#[inline]
fn same16(a: &[u8; 16], b: &[u8; 16]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8,
            _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_sub_epi8,
        };
        // SAFETY: both arrays have 16 bytes; loadu has no alignment requirement; SSE2 is
        // part of every x86-64 CPU.
        unsafe {
            let x = _mm_loadu_si128(a.as_ptr() as *const __m128i);
            let y = _mm_loadu_si128(b.as_ptr() as *const __m128i);
            // Unsigned `c - '0' <= 9`: min(d, 9) == d.
            let digit = |v| {
                let d = _mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8));
                _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d)
            };
            let ok = _mm_or_si128(_mm_cmpeq_epi8(x, y), _mm_and_si128(digit(x), digit(y)));
            _mm_movemask_epi8(ok) == 0xFFFF
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    a.iter()
        .zip(b)
        .all(|(&x, &y)| x == y || (x.is_ascii_digit() && y.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sixteen_at_once_is_byte_by_byte(
            a in proptest::collection::vec(any::<u8>(), 0..70),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        ) {
            let mut b = a.clone();
            for (at, c) in flips {
                if !b.is_empty() {
                    let n = b.len();
                    b[at % n] = c;
                }
            }
            let slow = a.iter().zip(&b).all(|(&x, &y)| x == y || (x.is_ascii_digit() && y.is_ascii_digit()));
            prop_assert_eq!(same_but_digits(&a, &b), slow);
        }
    }

    #[test]
    fn a_layout_is_found_with_other_digits_only() {
        let mut l = Layouts::default();
        let flow = br#", "id": 17, "pid": 715, "tid": 739, "ts": 4921692138567.324, "cat": "ac2g""#;
        l.keep(flow);
        let other = br#", "id": 98, "pid": 715, "tid": 739, "ts": 4921692139999.001, "cat": "ac2g", "name": "x"}"#;
        assert_eq!(l.find(other, 0), Some(flow.len()));
        let longer =
            br#", "id": 987, "pid": 715, "tid": 739, "ts": 4921692139999.001, "cat": "ac2g"}"#;
        assert_eq!(l.find(longer, 0), None);
        let colon =
            br#", "id"; 98, "pid": 715, "tid": 739, "ts": 4921692139999.001, "cat": "ac2g"}"#;
        assert_eq!(l.find(colon, 0), None);
        assert_eq!(
            l.find(&other[..20], 0),
            None,
            "too short to hold the layout"
        );
    }
}
