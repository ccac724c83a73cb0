//! Finding the end of a short token (a key, a short string, a number) 32 bytes at a time.
//!
//! Why: most of what the cursor reads is keys of 2–20 bytes and numbers of up to 18, and a
//! byte-at-a-time loop pays a compare and a branch per byte (it was the top of the Kineto
//! profile, `next_key_raw` + `skip_value` ~25 %). Two 16-byte SSE2 compares (part of every
//! x86-64 CPU, so no feature check) and a `trailing_zeros` find the end in a handful of
//! instructions; `memchr` would be as fast on the bytes but costs a call to set up.
//! Elsewhere the same masks are built byte by byte.

/// Bit `k` is set when byte `k` of `w` is `"` or `\`.
#[inline]
pub(super) fn quote_or_backslash(w: &[u8; 32]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        let half = |k: usize| {
            // SAFETY: `w` has 32 bytes, so the 16 at 16*k (k < 2) are in bounds; loadu has
            // no alignment requirement; SSE2 is part of every x86-64 CPU.
            unsafe {
                let v = _mm_loadu_si128(w.as_ptr().add(16 * k) as *const __m128i);
                let hit = _mm_or_si128(
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
                );
                _mm_movemask_epi8(hit) as u16 as u32
            }
        };
        half(0) | (half(1) << 16)
    }
    #[cfg(not(target_arch = "x86_64"))]
    mask_of(w, |c| c == b'"' || c == b'\\')
}

/// Bit `k` is set when byte `k` of `w` equals byte `k` of `lit`.
#[inline]
pub(super) fn equal_bytes(w: &[u8; 32], lit: &[u8; 32]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};
        let half = |k: usize| {
            // SAFETY: both arrays have 32 bytes, so the 16 at 16*k (k < 2) are in bounds;
            // loadu has no alignment requirement; SSE2 is part of every x86-64 CPU.
            unsafe {
                let a = _mm_loadu_si128(w.as_ptr().add(16 * k) as *const __m128i);
                let b = _mm_loadu_si128(lit.as_ptr().add(16 * k) as *const __m128i);
                _mm_movemask_epi8(_mm_cmpeq_epi8(a, b)) as u16 as u32
            }
        };
        half(0) | (half(1) << 16)
    }
    #[cfg(not(target_arch = "x86_64"))]
    w.iter()
        .zip(lit)
        .enumerate()
        .fold(0, |m, (k, (a, b))| if a == b { m | 1 << k } else { m })
}

/// What `Cursor::next_member_raw` needs to read `, "key": value` from one 32-byte look:
/// bit `k` of each mask is set when byte `k` is a quote, a backslash, a blank (a byte up to
/// space, as the cursor counts blanks), or one of `,` `}` `]` (which, like blanks, end a
/// number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeyMasks {
    pub quote: u32,
    pub backslash: u32,
    pub blank: u32,
    pub sep: u32,
}

#[inline]
pub(super) fn key_masks(w: &[u8; 32]) -> KeyMasks {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        let half = |k: usize| {
            // SAFETY: as in `quote_or_backslash`.
            unsafe {
                let v = _mm_loadu_si128(w.as_ptr().add(16 * k) as *const __m128i);
                let bits = |m| _mm_movemask_epi8(m) as u16 as u32;
                let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
                // Unsigned `v <= ' '`: min(v, ' ') == v.
                let blank = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(b' ' as i8)), v);
                let sep = _mm_or_si128(_mm_or_si128(eq(b','), eq(b'}')), eq(b']'));
                (bits(eq(b'"')), bits(eq(b'\\')), bits(blank), bits(sep))
            }
        };
        let (lo, hi) = (half(0), half(1));
        KeyMasks {
            quote: lo.0 | hi.0 << 16,
            backslash: lo.1 | hi.1 << 16,
            blank: lo.2 | hi.2 << 16,
            sep: lo.3 | hi.3 << 16,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    KeyMasks {
        quote: mask_of(w, |c| c == b'"'),
        backslash: mask_of(w, |c| c == b'\\'),
        blank: mask_of(w, |c| c <= b' '),
        sep: mask_of(w, |c| c == b',' || c == b'}' || c == b']'),
    }
}

#[cfg(any(test, not(target_arch = "x86_64")))]
fn mask_of(w: &[u8; 32], hit: impl Fn(u8) -> bool) -> u32 {
    w.iter()
        .enumerate()
        .fold(0, |m, (k, &c)| if hit(c) { m | 1 << k } else { m })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn masks_match_the_byte_tests(w in proptest::array::uniform32(any::<u8>())) {
            prop_assert_eq!(quote_or_backslash(&w), mask_of(&w, |c| c == b'"' || c == b'\\'));
            let mut lit = w;
            lit[w[0] as usize % 32] ^= 1;
            lit[w[1] as usize % 32] = b'"';
            let eq = w.iter().zip(&lit).enumerate().fold(0, |m, (k, (a, b))| if a == b { m | 1 << k } else { m });
            prop_assert_eq!(equal_bytes(&w, &lit), eq);
            prop_assert_eq!(
                key_masks(&w),
                KeyMasks {
                    quote: mask_of(&w, |c| c == b'"'),
                    backslash: mask_of(&w, |c| c == b'\\'),
                    blank: mask_of(&w, |c| c <= b' '),
                    sep: mask_of(&w, |c| c == b',' || c == b'}' || c == b']'),
                }
            );
        }
    }
}
