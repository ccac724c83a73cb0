//! Aligned text tables for the terminal: every column as wide as its widest cell (header
//! included), text left-aligned, numbers right-aligned, two spaces between columns. A table
//! given a width is fitted into it by cutting its text columns, widest first, each cut cell
//! ending in `…`: operator shapes and kernel names run to hundreds of characters, and one
//! such cell would push every column after it off the screen or out of line. The cut is the
//! terminal's only: `--format json` and `csv` (and the files the commands write) keep every
//! value whole.

/// How a column's cells are aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text, flush left, never cut (short words: a status, a unit).
    Left,
    /// Text, flush left, cut down to at most this many characters where the table must fit
    /// a width: a shape keeps more than the dtypes beside it.
    Cut(usize),
    /// Numbers: flush right, never cut.
    Right,
}

/// The widest line of a fitted table (`aorta perf`, `aorta compare`'s operators): what a
/// terminal shows without wrapping, beside a side panel.
pub(crate) const WIDTH: usize = 160;

/// The fewest characters a cut column keeps: enough to tell `aten::_scaled_dot…` from
/// `aten::addmm`.
pub(crate) const MIN_CUT: usize = 12;

/// `lines` (the header first, then the rows, each as long as `align`) as text: each line
/// indented by two spaces, trailing blanks trimmed. With `width`, the `Cut` columns are
/// narrowed, the widest first (the rightmost of equals), until every line fits in `width`
/// characters or each is down to its floor; a cell longer than its column keeps its start
/// and ends in `…`.
pub(crate) fn render(lines: &[Vec<String>], align: &[Align], width: Option<usize>) -> String {
    let n = align.len();
    let len = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = (0..n)
        .map(|c| lines.iter().map(|l| len(&l[c])).max().unwrap_or(0))
        .collect();
    if let Some(max) = width {
        let total = |w: &[usize]| 2 + w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
        while total(&widths) > max {
            let widest = (0..n)
                .filter(|&c| matches!(align[c], Align::Cut(floor) if widths[c] > floor.max(1)))
                .max_by_key(|&c| (widths[c], c));
            match widest {
                Some(c) => widths[c] -= 1,
                None => break,
            }
        }
    }
    let mut s = String::new();
    for l in lines {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(c, v)| {
                let w = widths[c];
                match align[c] {
                    Align::Left | Align::Cut(_) => format!("{:<w$}", cut(v, w)),
                    Align::Right => format!("{v:>w$}"),
                }
            })
            .collect();
        s.push_str("  ");
        s.push_str(cells.join("  ").trim_end());
        s.push('\n');
    }
    s
}

/// `s` in at most `w` characters: whole when it fits, else its first `w - 1` and `…`.
pub(crate) fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let keep: String = s.chars().take(w.saturating_sub(1)).collect();
    format!("{keep}…")
}
