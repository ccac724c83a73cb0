//! Skipping nested JSON 64 bytes at a time.
//!
//! Why: the bytes aorta skips (the `args` of most events, and whole events a reader does
//! not want) are most of a trace, and they are full of short strings: a walk that stops at
//! every quote (even with `memchr`) pays a call per string. Here each 64-byte block becomes bit
//! masks of quotes, backslashes and brackets (SSE2 compares, part of every x86-64 CPU);
//! escaped quotes and string interiors are removed with carry-propagating bit arithmetic
//! (the stage-1 idea of simdjson), and only the brackets left are looked at one by one.

/// Position just after the bracket that closes `depth` open `open` brackets, scanning from
/// `from` (which must be outside any string); `None` when `b` ends first.
///
/// Like the scalar walk it replaces, only this bracket pair and quotes matter: in valid JSON
/// the other pair nests inside.
pub(super) fn close(b: &[u8], from: usize, open: u8, depth: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("pclmulqdq")
    {
        // SAFETY: the CPU has both features (checked just above).
        return unsafe { close_avx2(b, from, open, depth) };
    }
    // SAFETY: `of` needs SSE2, which every x86-64 CPU has (elsewhere it is scalar).
    #[allow(unused_unsafe)]
    let masks = |blk: &[u8; 64], o, s| unsafe { Masks::of(blk, o, s) };
    close_with(b, from, open, depth, masks, prefix_xor)
}

/// `close` compiled for AVX2 and carry-less multiply: two 32-byte compares per byte value
/// instead of four 16-byte ones, and the string-interior prefix XOR in one instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,pclmulqdq")]
fn close_avx2(b: &[u8], from: usize, open: u8, depth: usize) -> Option<usize> {
    // Inside this function both features are enabled, so the calls are safe.
    let masks = |blk: &[u8; 64], o, s| Masks::of_avx2(blk, o, s);
    close_with(b, from, open, depth, masks, |x| prefix_xor_clmul(x))
}

/// The block loop, generic over how masks and prefix XORs are computed (inlined into each
/// caller, so each gets its own instruction set).
#[inline(always)]
fn close_with(
    b: &[u8],
    from: usize,
    open: u8,
    mut depth: usize,
    masks: impl Fn(&[u8; 64], u8, u8) -> Masks,
    pxor: impl Fn(u64) -> u64,
) -> Option<usize> {
    let shut = if open == b'{' { b'}' } else { b']' };
    let mut st = Carry::default();
    let mut j = from;
    while let Some(block) = b.get(j..j + 64) {
        let block: &[u8; 64] = block.try_into().expect("64 bytes");
        let m = masks(block, open, shut);
        if let Some(k) = st.block(m, &pxor, &mut depth) {
            return Some(j + k + 1);
        }
        j += 64;
    }
    // The tail, padded with blanks (which are neither quotes nor brackets).
    let rest = b.get(j..).unwrap_or_default();
    let mut last = [b' '; 64];
    last[..rest.len()].copy_from_slice(rest);
    let m = masks(&last, open, shut);
    st.block(m, &pxor, &mut depth).map(|k| j + k + 1)
}

/// What one block hands the next: inside a string? is the first byte escaped?
#[derive(Default)]
struct Carry {
    in_string: u64,
    next_escaped: u64,
}

impl Carry {
    /// Updates `depth` over one block; the index of the closing bracket if it is here.
    #[inline(always)]
    fn block(&mut self, m: Masks, pxor: impl Fn(u64) -> u64, depth: &mut usize) -> Option<usize> {
        let quotes = if m.backslash | self.next_escaped == 0 {
            m.quote
        } else {
            m.quote & !self.escaped(m.backslash)
        };
        // Bits from an opening quote up to (not including) its closing quote.
        let inside = pxor(quotes) ^ self.in_string;
        self.in_string = ((inside as i64) >> 63) as u64;
        let opens = m.open & !inside;
        let closes = m.close & !inside;
        if closes == 0 {
            *depth += opens.count_ones() as usize;
            return None;
        }
        let mut all = opens | closes;
        while all != 0 {
            let bit = all & all.wrapping_neg();
            if opens & bit != 0 {
                *depth += 1;
            } else {
                *depth -= 1;
                if *depth == 0 {
                    return Some(bit.trailing_zeros() as usize);
                }
            }
            all ^= bit;
        }
        None
    }

    /// The bytes escaped by a backslash (runs of backslashes escape in pairs).
    #[inline(always)]
    fn escaped(&mut self, backslash: u64) -> u64 {
        const ODD_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;
        let potential = backslash & !self.next_escaped;
        // Odd-length runs starting on an even bit (and even-length runs on odd bits) flip
        // the parity of the byte after them; subtraction finds where each run ends.
        let maybe_escaped = potential << 1;
        let codes = ((maybe_escaped | ODD_BITS).wrapping_sub(potential)) ^ ODD_BITS;
        let escaped = codes ^ (backslash | self.next_escaped);
        self.next_escaped = (codes & backslash) >> 63;
        escaped
    }
}

/// Bit `i` is the XOR of bits `0..=i`.
#[inline]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// `prefix_xor` as one carry-less multiply by all ones.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "pclmulqdq")]
fn prefix_xor_clmul(x: u64) -> u64 {
    use std::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set1_epi8, _mm_set_epi64x,
    };
    let p = _mm_clmulepi64_si128(_mm_set_epi64x(0, x as i64), _mm_set1_epi8(-1), 0);
    _mm_cvtsi128_si64(p) as u64
}

/// One bit per byte of a block, for each byte value we look for.
#[derive(Default)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

impl Masks {
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "sse2")]
    fn of(block: &[u8; 64], open: u8, shut: u8) -> Masks {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        #[inline]
        #[target_feature(enable = "sse2")]
        fn eq(v: __m128i, c: u8) -> u64 {
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8))) as u16 as u64
        }
        let mut m = Masks::default();
        for k in 0..4 {
            // SAFETY: the block has 64 bytes, so the 16 at 16*k are in bounds, and loadu has
            // no alignment requirement.
            let v = unsafe { _mm_loadu_si128(block.as_ptr().add(16 * k) as *const __m128i) };
            m.quote |= eq(v, b'"') << (16 * k);
            m.backslash |= eq(v, b'\\') << (16 * k);
            m.open |= eq(v, open) << (16 * k);
            m.close |= eq(v, shut) << (16 * k);
        }
        m
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx2")]
    fn of_avx2(block: &[u8; 64], open: u8, shut: u8) -> Masks {
        use std::arch::x86_64::{
            __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
        };
        #[inline]
        #[target_feature(enable = "avx2")]
        fn eq(v: __m256i, c: u8) -> u64 {
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8))) as u32 as u64
        }
        let mut m = Masks::default();
        for k in 0..2 {
            // SAFETY: the block has 64 bytes, so the 32 at 32*k are in bounds, and loadu has
            // no alignment requirement.
            let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * k) as *const __m256i) };
            m.quote |= eq(v, b'"') << (32 * k);
            m.backslash |= eq(v, b'\\') << (32 * k);
            m.open |= eq(v, open) << (32 * k);
            m.close |= eq(v, shut) << (32 * k);
        }
        m
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn of(block: &[u8; 64], open: u8, shut: u8) -> Masks {
        let mut m = Masks::default();
        for (i, &c) in block.iter().enumerate() {
            let bit = 1u64 << i;
            match c {
                b'"' => m.quote |= bit,
                b'\\' => m.backslash |= bit,
                c if c == open => m.open |= bit,
                c if c == shut => m.close |= bit,
                _ => {}
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The obvious byte-at-a-time walk, to check the bit arithmetic against.
    fn reference(b: &[u8], from: usize, open: u8, mut depth: usize) -> Option<usize> {
        let shut = if open == b'{' { b'}' } else { b']' };
        let (mut in_string, mut escaped) = (false, false);
        for (i, &c) in b.iter().enumerate().skip(from) {
            // A backslash makes the next byte no quote, wherever it is (outside strings only
            // invalid JSON has one; both walks then agree on some answer).
            let quote = c == b'"' && !escaped;
            escaped = c == b'\\' && !escaped;
            if in_string {
                in_string = !quote;
            } else if quote {
                in_string = true;
            } else if c == open {
                depth += 1;
            } else if c == shut {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
        }
        None
    }

    #[test]
    fn escapes_and_strings_across_blocks() {
        let s = br#"{"a": "}\"}", "b": "\\", "c": {"d": [1, "]"]}, "e": "x\\\"}"} tail"#;
        assert_eq!(close(s, 1, b'{', 1), reference(s, 1, b'{', 1));
        assert_eq!(&s[..close(s, 1, b'{', 1).unwrap()], &s[..s.len() - 5]);
        // The same with the interesting bytes straddling a 64-byte boundary.
        for pad in 0..70 {
            let mut t = vec![b'{'];
            t.extend(std::iter::repeat_n(b' ', pad));
            t.extend_from_slice(&s[1..]);
            assert_eq!(
                close(&t, 1, b'{', 1),
                reference(&t, 1, b'{', 1),
                "pad {pad}"
            );
        }
        assert_eq!(close(br#"{"a": "}"#, 1, b'{', 1), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn matches_the_byte_walk(
            body in proptest::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\\'), Just(b'{'), Just(b'}'),
                    Just(b'['), Just(b']'), Just(b' '), Just(b'a'),
                ],
                0..300,
            ),
            square in any::<bool>(),
        ) {
            let open = if square { b'[' } else { b'{' };
            let mut b = vec![open];
            b.extend(body);
            prop_assert_eq!(close(&b, 1, open, 1), reference(&b, 1, open, 1));
        }
    }
}
