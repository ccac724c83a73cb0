//! One text per JSON value for the shape columns (`input_dims`, `input_types`,
//! `concrete_inputs`, `input_strides`).
//!
//! Why: the columns keep the trace's own JSON text, and harnesses format it differently
//! (Kineto writes `[[8944, 1024], [1024, 2816]]`, some pretty-print it over many lines), so
//! grouping operators by shape split identical shapes. The canonical form is Kineto's own:
//! no whitespace outside strings except one space after each `,` and `:`. Strings and
//! numbers are kept byte for byte. Traces already in that form (every PyTorch profiler
//! trace) are recognised by one pass over the bytes and copied unchanged.

use std::borrow::Cow;

/// `raw` in the canonical form: borrowed when it already is, else rewritten.
pub(crate) fn canonical(raw: &str) -> Cow<'_, str> {
    if is_canonical(raw.as_bytes()) {
        Cow::Borrowed(raw)
    } else {
        Cow::Owned(rewrite(raw))
    }
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// Whether every blank outside strings is a single space right after `,` or `:`, and every
/// `,` and `:` outside strings is followed by exactly that space.
fn is_canonical(b: &[u8]) -> bool {
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b',' | b':' => {
                    if b.get(i + 1) != Some(&b' ') || b.get(i + 2).is_some_and(|&n| is_blank(n)) {
                        return false;
                    }
                    i += 1;
                }
                c if is_blank(c) => return false,
                _ => {}
            }
        }
        i += 1;
    }
    true
}

fn rewrite(raw: &str) -> String {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c);
            match c {
                b'\\' if i + 1 < b.len() => {
                    i += 1;
                    out.push(b[i]);
                }
                b'"' => in_str = false,
                _ => {}
            }
        } else if c == b'"' {
            in_str = true;
            out.push(c);
        } else if c == b',' || c == b':' {
            out.extend_from_slice(&[c, b' ']);
        } else if !is_blank(c) {
            out.push(c);
        }
        i += 1;
    }
    // Only ASCII blanks were dropped and ASCII bytes added between whole characters.
    String::from_utf8(out).expect("UTF-8 in, UTF-8 out")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kineto_text_is_kept_and_other_layouts_become_it() {
        let kineto = r#"[[8944, 1024], [1024, 2816], []]"#;
        assert!(matches!(canonical(kineto), Cow::Borrowed(_)));
        for raw in [
            "[[8944,1024],[1024,2816],[]]",
            "[\n  [\n    8944,\n    1024\n  ],\n  [\n    1024,\n    2816\n  ],\n  []\n]",
            "[ [8944 , 1024] ,\t[1024,  2816],[ ] ]",
            "[[8944,\r\n 1024], [1024, 2816], []]",
        ] {
            assert_eq!(canonical(raw), kineto, "{raw:?}");
        }
        // Strings keep their bytes, blanks and escapes included.
        let types = "[\"c10::BFloat16\",\n \"a, b\\\" \\\\\",{\"k\":\"x y\"}]";
        assert_eq!(
            canonical(types),
            r#"["c10::BFloat16", "a, b\" \\", {"k": "x y"}]"#
        );
        assert!(matches!(canonical(r#"["a,b", "c: d"]"#), Cow::Borrowed(_)));
    }

    proptest! {
        /// Any layout of the same value gives the same text, and that text is a fixed point.
        #[test]
        fn any_blanks_give_one_text(v in proptest::collection::vec(proptest::collection::vec(0u32..99_999, 0..4), 0..5),
                                     blanks in proptest::collection::vec(prop_oneof![Just(""), Just(" "), Just("\n  "), Just("\t")], 64)) {
            let mut k = 0;
            let mut blank = || { k += 1; blanks[k % blanks.len()] };
            let mut raw = format!("{}[", blank());
            for (i, dims) in v.iter().enumerate() {
                if i > 0 { raw += &format!("{},{}", blank(), blank()); }
                raw += "[";
                for (j, d) in dims.iter().enumerate() {
                    if j > 0 { raw += &format!(",{}", blank()); }
                    raw += &format!("{}{d}{}", blank(), blank());
                }
                raw += "]";
            }
            raw += &format!("{}]{}", blank(), blank());
            let want = serde_json::to_string(&v).unwrap().replace(',', ", ");
            let got = canonical(&raw).into_owned();
            prop_assert_eq!(&got, &want);
            prop_assert!(matches!(canonical(&got), Cow::Borrowed(_)));
        }
    }
}
