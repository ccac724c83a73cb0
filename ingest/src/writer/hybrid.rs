//! Parquet's RLE / bit-packed hybrid encoding, for the string columns' pages (`strings`):
//! their definition levels and dictionary indices.
//!
//! Why here: arrow-rs keeps its encoder private (behind its `experimental` feature), and the
//! encoding is short. The layout is the format's (parquet-format, Encodings.md); the tests
//! check it against the format's own example, and `strings`' tests read every page back
//! through arrow-rs' decoder.

/// Bits a dictionary index takes in a data page, for a dictionary of `n` values (0 for one).
pub(super) fn width(n: usize) -> u8 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()) as u8
}

/// Appends `values` in Parquet's RLE / bit-packed hybrid encoding at `width` bits: runs of 8
/// or more equal values as RLE runs, the rest bit-packed 8 to a group (at most 63 groups a
/// run, the one-byte header other writers keep to), the last group padded with zeros.
pub(super) fn hybrid(out: &mut Vec<u8>, values: &[u32], width: u8) {
    let (mut lit, mut i) = (0, 0);
    while i < values.len() {
        let v = values[i];
        let run = values[i..].iter().take_while(|&&x| x == v).count();
        // Literals before a run must fill whole groups: they take the run's first values.
        let pad = (8 - (i - lit) % 8) % 8;
        if run >= 8 + pad {
            packed(out, &values[lit..i + pad], width);
            i += pad;
            varint(out, (run - pad) << 1);
            let bytes = usize::from(width).div_ceil(8);
            out.extend_from_slice(&v.to_le_bytes()[..bytes]);
            i += run - pad;
            lit = i;
        } else {
            i += run;
        }
    }
    packed(out, &values[lit..], width);
}

/// Bit-packed runs of `values`, 504 (63 groups) at most a run; only the last may end in a
/// partial group, padded with zeros.
fn packed(out: &mut Vec<u8>, values: &[u32], width: u8) {
    for run in values.chunks(504) {
        let groups = run.len().div_ceil(8);
        varint(out, groups << 1 | 1);
        let (mut acc, mut bits) = (0u64, 0u8);
        for k in 0..groups * 8 {
            acc |= u64::from(run.get(k).copied().unwrap_or(0)) << bits;
            bits += width;
            while bits >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                bits -= 8;
            }
        }
    }
}

/// ULEB128, as the hybrid encoding's run headers are written.
fn varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::{hybrid, width};

    #[test]
    fn an_index_takes_the_bits_of_the_largest() {
        let cases = [
            (0, 0),
            (1, 0),
            (2, 1),
            (3, 2),
            (4, 2),
            (5, 3),
            (256, 8),
            (257, 9),
        ];
        for (n, bits) in cases {
            assert_eq!(width(n), bits, "{n} values");
        }
    }

    /// The format's example of bit-packing (Encodings.md): 0 to 7 at 3 bits are the bytes
    /// 10001000 11000110 11111010, after the run's header (one group: 1 << 1 | 1).
    #[test]
    fn the_formats_example() {
        let mut out = Vec::new();
        hybrid(&mut out, &[0, 1, 2, 3, 4, 5, 6, 7], 3);
        assert_eq!(out, [0b11, 0b1000_1000, 0b1100_0110, 0b1111_1010]);
    }

    /// Ten equal values are one RLE run (header 10 << 1, the value in one byte); three
    /// values before it fill their group with five of the run, whose other five are too few
    /// for a run, so all thirteen are bit-packed in two groups, the last padded.
    #[test]
    fn runs_and_groups() {
        let mut out = Vec::new();
        hybrid(&mut out, &[5; 10], 3);
        assert_eq!(out, [20, 5]);
        let mut out = Vec::new();
        let v = [1, 2, 3, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7];
        hybrid(&mut out, &v, 4);
        assert_eq!(
            out,
            [2 << 1 | 1, 0x21, 0x73, 0x77, 0x77, 0x77, 0x77, 0x07, 0x00]
        );
        // With eight of the run left after the group is filled, they are a run.
        let mut out = Vec::new();
        let v = [1, 2, 3, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7];
        hybrid(&mut out, &v, 4);
        assert_eq!(out, [1 << 1 | 1, 0x21, 0x73, 0x77, 0x77, 8 << 1, 7]);
        // 600 values without a run: a full run of 63 groups, then the rest.
        let v: Vec<u32> = (0..600).map(|i| i % 2).collect();
        let mut out = Vec::new();
        hybrid(&mut out, &v, 1);
        assert_eq!(out[0], 63 << 1 | 1);
        assert_eq!(out[64], 12 << 1 | 1);
        assert_eq!(out.len(), 1 + 63 + 1 + 12);
    }
}
