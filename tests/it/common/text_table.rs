//! Reading back the aligned text tables the commands print (`aorta compare`'s operators,
//! `aorta perf`): where each column is, from its header, and whether every row keeps to it.

/// (start, end) character offsets of each word of a header line (its headers are single
/// words).
fn header_spans(header: &[char]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < header.len() {
        if header[i] == ' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < header.len() && header[i] != ' ' {
            i += 1;
        }
        spans.push((start, i));
    }
    spans
}

/// Checks the rows of a table against its header and returns their cells: every line is at
/// most `width` characters; a text column's cell (`left`) starts at its header's first
/// character, a number's ends at its header's last, each with a blank before or after it.
/// A cell is read up to two blanks in a row (cells hold single blanks at most).
pub(crate) fn aligned_cells(
    header: &str,
    rows: &[&str],
    left: &[bool],
    width: usize,
) -> Vec<Vec<String>> {
    let h: Vec<char> = header.chars().collect();
    let spans = header_spans(&h);
    assert_eq!(spans.len(), left.len(), "header words: {header}");
    assert!(h.len() <= width, "{} > {width}: {header}", h.len());
    let mut out = Vec::new();
    for row in rows {
        let r: Vec<char> = row.chars().collect();
        assert!(r.len() <= width, "{} characters > {width}:\n{row}", r.len());
        let blank = |i: usize| r.get(i).is_none_or(|c| *c == ' ');
        let mut cells = Vec::new();
        for (c, &(start, end)) in spans.iter().enumerate() {
            let cell: String = if left[c] && blank(start) && blank(start + 1) {
                String::new() // an empty text cell
            } else if left[c] {
                assert!(
                    !blank(start) && (start == 0 || blank(start - 1)),
                    "column {c} does not start at {start}:\n{header}\n{row}"
                );
                let mut e = start;
                while e < r.len() && !(blank(e) && blank(e + 1)) {
                    e += 1;
                }
                r[start..e].iter().collect()
            } else {
                assert!(
                    !blank(end - 1) && blank(end),
                    "column {c} does not end at {end}:\n{header}\n{row}"
                );
                let mut s = end;
                while s > 0 && !(blank(s - 1) && (s < 2 || blank(s - 2))) {
                    s -= 1;
                }
                r[s..end].iter().collect()
            };
            cells.push(cell);
        }
        out.push(cells);
    }
    out
}

/// Whether a printed cell is the full value, or its start cut with `…`.
pub(crate) fn shows(cell: &str, full: &str) -> bool {
    cell == full
        || cell
            .strip_suffix('…')
            .is_some_and(|p| full.starts_with(p) && full.chars().count() > p.chars().count())
}
