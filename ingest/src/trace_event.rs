//! One trace event, read as raw slices: nothing is decoded until a table asks for it.

use std::borrow::Cow;

use crate::json::layout::Layouts;
use crate::json::{int_from_value, us_text_to_ns, Cursor, JResult, Key};

/// The trace categories aorta distinguishes (current and legacy 2021 spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cat {
    CpuOp,
    UserAnnotation,
    GpuUserAnnotation,
    Kernel,
    Memcpy,
    Memset,
    Runtime,
    Driver,
    PythonFunction,
    /// Anything else (flows, overhead, sync, instants…).
    Other,
}

impl Cat {
    pub(crate) fn of(raw: &[u8]) -> Cat {
        match raw {
            b"cpu_op" | b"Operator" => Cat::CpuOp,
            b"user_annotation" => Cat::UserAnnotation,
            b"gpu_user_annotation" => Cat::GpuUserAnnotation,
            b"kernel" | b"Kernel" => Cat::Kernel,
            b"gpu_memcpy" | b"Memcpy" => Cat::Memcpy,
            b"gpu_memset" | b"Memset" => Cat::Memset,
            b"cuda_runtime" | b"Runtime" | b"hip_runtime" => Cat::Runtime,
            b"cuda_driver" | b"Driver" => Cat::Driver,
            b"python_function" => Cat::PythonFunction,
            _ => Cat::Other,
        }
    }

    /// Whether the event runs on a GPU (kernel, copy, memset) rather than a CPU thread.
    pub(crate) fn is_gpu(self) -> bool {
        matches!(self, Cat::Kernel | Cat::Memcpy | Cat::Memset)
    }
}

/// An event as raw JSON slices (values keep their quotes).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Ev<'a> {
    pub ph: &'a [u8],
    pub cat: &'a [u8],
    pub name: Option<&'a [u8]>,
    pub pid: Option<&'a [u8]>,
    pub tid: Option<&'a [u8]>,
    pub ts: Option<&'a [u8]>,
    pub dur: Option<&'a [u8]>,
    pub args: Option<&'a [u8]>,
}

/// Reads the event object at the cursor (on `{`), leaving the cursor after it.
pub(crate) fn parse<'a>(c: &mut Cursor<'a>) -> JResult<Ev<'a>> {
    parse_if(c, |_, _| true, None).map(|(ev, _)| ev)
}

/// Like `parse`, but once `ph` and `cat` are both known and `wanted(ph, Some(cat))` says no,
/// skips the rest of the event unread (`false` in the result). Kineto writes `ph` and `cat`
/// first, so a reader that wants few events reads two keys of most.
///
/// `wanted(ph, None)` is asked as soon as `ph` is known, before `cat`: `false` says no
/// whatever the `cat`. With `layouts`, the members from there to `cat` are then matched
/// against those of an earlier such event instead of read (`json::layout`): where the
/// cursor stops, and any error, are what reading them gives. Of an event said no to, only
/// `ph` is meant to be read.
pub(crate) fn parse_if<'a>(
    c: &mut Cursor<'a>,
    wanted: impl Fn(&[u8], Option<&[u8]>) -> bool,
    mut layouts: Option<&mut Layouts>,
) -> JResult<(Ev<'a>, bool)> {
    let mut ev = Ev { ..Ev::default() };
    c.expect(b'{', "expected an event object")?;
    let mut first = true;
    let (mut has_ph, mut has_cat) = (false, false);
    // Where the members after an unwanted `ph` start, while `cat` is still to come.
    let mut after_ph = None;
    while let Some((k, v)) = c.next_member_raw(first)? {
        first = false;
        match k {
            b"ph" | b"cat" => {
                let v = unquote(v);
                if k == b"ph" {
                    (ev.ph, has_ph) = (v, true);
                    if !has_cat && !wanted(v, None) {
                        if let Some(n) = layouts.as_deref().and_then(|l| l.find(c.b, c.i)) {
                            c.i += n;
                            c.skip_rest_of_object()?;
                            return Ok((ev, false));
                        }
                        after_ph = Some(c.i);
                    }
                } else {
                    (ev.cat, has_cat) = (v, true);
                }
                if has_ph && has_cat && !wanted(ev.ph, Some(ev.cat)) {
                    if let (Some(l), Some(at)) = (layouts.as_deref_mut(), after_ph) {
                        l.keep(&c.b[at..c.i]);
                    }
                    c.skip_rest_of_object()?;
                    return Ok((ev, false));
                }
            }
            b"name" => ev.name = Some(v),
            b"pid" => ev.pid = Some(v),
            b"tid" => ev.tid = Some(v),
            b"ts" => ev.ts = Some(v),
            b"dur" => ev.dur = Some(v),
            b"args" => ev.args = Some(v),
            _ => {}
        }
    }
    Ok((ev, true))
}

/// A raw JSON string value without its quotes (escapes kept).
pub(crate) fn unquote(v: &[u8]) -> &[u8] {
    if v.len() >= 2 && v[0] == b'"' && v[v.len() - 1] == b'"' {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

/// A raw value as text: strings unescaped, other values as written.
pub(crate) fn text(v: &[u8]) -> Option<Cow<'_, str>> {
    if v.first() == Some(&b'"') {
        Cursor::new(v).string().ok()
    } else if v == b"null" {
        None
    } else {
        std::str::from_utf8(v).ok().map(Cow::Borrowed)
    }
}

/// The body of a raw string value that has no escapes (so it is its own text).
#[inline]
pub(crate) fn plain_string(v: &[u8]) -> Option<&[u8]> {
    let body = v.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    memchr::memchr(b'\\', body).is_none().then_some(body)
}

/// A raw value as an integer (numbers, numeric strings, hex strings).
pub(crate) fn int(v: &[u8]) -> Option<i64> {
    int_from_value(v)
}

/// A raw `ts`/`dur` value (µs, number or numeric string) in exact ns.
pub(crate) fn micros(v: &[u8]) -> Option<i64> {
    us_text_to_ns(unquote(v))
}

/// Process id as a key: the integer, or a hash of a string pid.
pub(crate) fn pid_key(raw: Option<&[u8]>) -> i64 {
    match raw {
        None => i64::MIN,
        Some(r) => int(r).unwrap_or_else(|| {
            r.iter().fold(0xcbf29ce484222325u64, |h, &b| {
                (h ^ b as u64).wrapping_mul(0x100000001b3)
            }) as i64
        }),
    }
}

/// The step number of a `ProfilerStep#N` name.
pub(crate) fn profiler_step(name: &[u8]) -> Option<i64> {
    let n = unquote(name);
    n.strip_prefix(b"ProfilerStep#")
        .and_then(crate::json::digits)
}

/// Picks the raw values of `keys` out of an `args` object in one pass.
pub(crate) fn pick<'a, const N: usize>(args: &'a [u8], keys: &[&[u8]; N]) -> [Option<&'a [u8]>; N] {
    let mut out = [None; N];
    let mut c = Cursor::new(args);
    if c.expect(b'{', "").is_err() {
        return out;
    }
    let mut first = true;
    while let Ok(Some((k, v))) = c.next_member_raw(first) {
        first = false;
        if let Some(i) = keys.iter().position(|w| *w == k) {
            out[i] = Some(v);
        }
    }
    out
}

/// The keys of an `args` object in the order a writer usually writes them, each with its
/// index in the `keys` of `pick_usual` (`None`: a key read past, not picked).
pub(crate) type Usual<const M: usize> = [(Key, Option<usize>); M];

/// `Usual` for `order`, its indices found in `keys` (at compile time).
pub(crate) const fn usual<const N: usize, const M: usize>(
    keys: &[&[u8]; N],
    order: [&[u8]; M],
) -> Usual<M> {
    let mut out = [(Key::new(b""), None); M];
    let mut m = 0;
    while m < M {
        let mut slot = None;
        let mut n = 0;
        while n < N {
            if same(keys[n], order[m]) && slot.is_none() {
                slot = Some(n);
            }
            n += 1;
        }
        out[m] = (Key::new(order[m]), slot);
        m += 1;
    }
    out
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `pick`, faster where the members come in the `usual` order: each such member is a compare
/// of its key's bytes (`Cursor::member_key_at`) instead of a search for the key's end; any
/// other member is read as `pick` reads it, and the order is taken up again after it. The
/// values and where the walk stops are `pick`'s.
pub(crate) fn pick_usual<'a, const N: usize>(
    args: &'a [u8],
    keys: &[&[u8]; N],
    usual: &[(Key, Option<usize>)],
) -> [Option<&'a [u8]>; N] {
    pick_hinted(args, keys, usual, &[None; N]).0
}

/// `pick_usual`, where `hints[i]` may give the text key `i`'s value likely has: a value
/// this reader returned before (the same key in an earlier event), whole. A value met in the
/// usual order that starts with those bytes is taken without scanning it (bit `i` of the
/// mask returned says so). Only a nested value or a string is used as a hint: its last byte
/// ends it, so bytes equal to a whole value read before are that value, as `skip_value`
/// would find it again. (Any other prefix, `[` say, would not be.)
pub(crate) fn pick_hinted<'a, const N: usize>(
    args: &'a [u8],
    keys: &[&[u8]; N],
    usual: &[(Key, Option<usize>)],
    hints: &[Option<&[u8]>; N],
) -> ([Option<&'a [u8]>; N], u32) {
    let mut out = [None; N];
    let mut hit = 0;
    let mut c = Cursor::new(args);
    if c.expect(b'{', "").is_err() {
        return (out, hit);
    }
    let mut first = true;
    let mut next = 0;
    loop {
        if let Some((key, slot)) = usual.get(next) {
            if c.member_key_at(first, key) {
                let hint = slot.and_then(|i| hints[i]);
                let (v, hinted) = match hint {
                    Some(h)
                        if matches!(h.first(), Some(b'[' | b'{' | b'"'))
                            && c.b[c.i..].starts_with(h) =>
                    {
                        c.i += h.len();
                        (h.len(), true)
                    }
                    _ => match c.value() {
                        Ok(v) => (v.len(), false),
                        Err(_) => return (out, hit),
                    },
                };
                if let Some(i) = *slot {
                    out[i] = Some(&args[c.i - v..c.i]);
                    hit = if hinted {
                        hit | 1 << i
                    } else {
                        hit & !(1 << i)
                    };
                }
                (first, next) = (false, next + 1);
                continue;
            }
        }
        let Ok(Some((k, v))) = c.next_member_raw(first) else {
            return (out, hit);
        };
        first = false;
        if let Some(i) = keys.iter().position(|w| *w == k) {
            out[i] = Some(v);
            hit &= !(1 << i);
        }
        if let Some(p) = usual.iter().position(|(key, _)| key.name() == k) {
            next = p + 1;
        }
    }
}

/// A `[x, y, z]` list of integers (grid, block).
pub(crate) fn dim3(v: &[u8]) -> [Option<i64>; 3] {
    let mut out = [None; 3];
    let inner = v.strip_prefix(b"[").and_then(|v| v.strip_suffix(b"]"));
    if let Some(inner) = inner {
        for (slot, part) in out.iter_mut().zip(inner.split(|&b| b == b',')) {
            *slot = int(part.trim_ascii());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kineto's flows (both kinds, both phases, ids and times of every length), a slice
    /// between them, an instant and a metadata event, one to a line as Kineto writes them.
    fn flows() -> String {
        let mut t = String::new();
        for i in 0..40u64 {
            let (ph, cat) = [
                ("s", "ac2g"),
                ("f", "ac2g"),
                ("f", "fwdbwd"),
                ("s", "fwdbwd"),
            ][i as usize % 4];
            let (id, ts) = (7 * i * i, 4_921_692_138_567_324 + 9_871 * i * i * i);
            t += &format!(
                "  {{\n    \"ph\": \"{ph}\", \"id\": {id}, \"pid\": 715, \"tid\": {tid}, \"ts\": {}.{:03},\n    \"cat\": \"{cat}\", \"name\": \"{cat}\", \"bp\": \"e\"\n  }},\n",
                ts / 1000, ts % 1000, tid = 739 + i % 3,
            );
            if i % 7 == 3 {
                t += "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 715, \"tid\": 739, \"ts\": 5, \"dur\": 1},\n";
                t += "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"pid\": 1, \"ts\": 6},\n";
                t += "  {\"name\": \"thread_name\", \"ph\": \"M\", \"ts\": 6, \"pid\": 1, \"tid\": 2},\n";
            }
        }
        t
    }

    /// Every event of `t` through `parse_if` as the Kineto reader calls it, with or without
    /// layouts: what each gave (or the error) and where the cursor stopped.
    fn outcomes(t: &[u8], mut layouts: Option<&mut Layouts>) -> Vec<String> {
        let wanted = |ph: &[u8], cat: Option<&[u8]>| {
            ph == b"X" || cat.map_or(ph == b"i", |cat| ph == b"i" && cat == b"cpu_instant_event")
        };
        let mut c = Cursor::new(t);
        let mut out = Vec::new();
        loop {
            c.ws();
            if c.i >= t.len() {
                return out;
            }
            // Of an event said no to, only `ph` is meant to be read.
            let got = parse_if(&mut c, wanted, layouts.as_deref_mut()).map(|(ev, read)| {
                if read {
                    format!("{ev:?}")
                } else {
                    format!("skipped {:?}", ev.ph)
                }
            });
            out.push(format!("{got:?} at {}", c.i));
            if got.is_err() {
                return out;
            }
            c.ws();
            if c.b.get(c.i) == Some(&b',') {
                c.i += 1;
            }
        }
    }

    #[test]
    fn flows_are_matched_not_read() {
        let t = flows();
        let mut l = Layouts::default();
        let with = outcomes(t.as_bytes(), Some(&mut l));
        assert_eq!(with, outcomes(t.as_bytes(), None));
        assert!(with.iter().all(|o| o.starts_with("Ok")));
        // The last flow of each kind was matched: its members are a layout kept.
        for kind in [r#""ph": "s", "id""#, r#""ph": "f", "id""#] {
            let at = t.rfind(kind).unwrap() + r#""ph": "s""#.len();
            assert!(l.find(t.as_bytes(), at).is_some(), "{kind}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Layouts change nothing but the work: the same events, the same errors at the same
        /// offsets, the cursor at the same byte, whatever bytes a flow's members became.
        #[test]
        fn layouts_read_as_members_do(
            flips in proptest::collection::vec((
                proptest::num::usize::ANY,
                proptest::sample::select(b"0123456789:;,\" {}[]xa\\\n".to_vec()),
            ), 1..4),
            cut in proptest::num::usize::ANY,
        ) {
            let mut t = flows().into_bytes();
            let n = t.len();
            for (at, b) in flips {
                t[at % n] = b;
            }
            t.truncate(n - cut % 200);
            let mut l = Layouts::default();
            proptest::prop_assert_eq!(outcomes(&t, Some(&mut l)), outcomes(&t, None));
        }
    }

    #[test]
    fn reads_a_kineto_kernel_event() {
        let s = br#"{
    "ph": "X", "cat": "kernel", "name": "void f<\"x\">()", "pid": 0, "tid": 7,
    "ts": 4464418948386.134, "dur": 1.5,
    "args": {"External id": 253, "stream": 7, "correlation": 377, "grid": [140, 1, 1]}
  }, "#;
        let mut c = Cursor::new(s);
        let ev = parse(&mut c).unwrap();
        assert_eq!(ev.ph, b"X");
        assert_eq!(Cat::of(ev.cat), Cat::Kernel);
        assert_eq!(text(ev.name.unwrap()).unwrap(), "void f<\"x\">()");
        assert_eq!(micros(ev.ts.unwrap()), Some(4_464_418_948_386_134));
        let [corr, ext, grid, missing] = pick(
            ev.args.unwrap(),
            &[b"correlation", b"External id", b"grid", b"bytes"],
        );
        assert_eq!(int(corr.unwrap()), Some(377));
        assert_eq!(int(ext.unwrap()), Some(253));
        assert_eq!(dim3(grid.unwrap()), [Some(140), Some(1), Some(1)]);
        assert!(missing.is_none());
        assert_eq!(&s[c.i..], b", ");
    }

    proptest::proptest! {
        /// `pick_usual` picks what `pick` picks, whatever the order, blanks and flaws.
        #[test]
        fn usual_picks_are_picks(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "\"External id\": ", "\"Record function id\":", "\"Input Dims\": ",
                    "\"Input type\": ", "\"Ev Idx\": ", "\"other\": ", "\"Input\\u0020Dims\": ",
                    "[[1, 2], []]", "[\"float\", \"\"]", "5", "\"x\"", "{}", "[", "}",
                    ", ", ",", ",\n      ", " ", ":", "\"", "\\",
                ]),
                0..24,
            ),
            lead in proptest::sample::select(vec!["{", "{\n      ", "{\"External id\": 3, ", "["]),
        ) {
            const KEYS: [&[u8]; 3] = [b"External id", b"Input Dims", b"Input type"];
            static USUAL: Usual<5> = usual(
                &KEYS,
                [b"External id", b"Record function id", b"Input type", b"Input Dims", b"Ev Idx"],
            );
            let mut text = String::from(lead);
            text.extend(pieces.iter().copied());
            let text = text.as_bytes();
            let want = pick(text, &KEYS);
            proptest::prop_assert_eq!(pick_usual(text, &KEYS, &USUAL), want);
            // Hints (values read before), right or wrong, change nothing but the work: a
            // value taken from its hint is the hint. A scalar is never taken from its hint.
            let all: [&[u8]; 5] = [b"[[1, 2], []]", b"[\"float\", \"\"]", b"5", b"{}", b"\"x\""];
            for h in all {
                for hints in [[Some(h), None, Some(h)], [None, Some(h), Some(h)]] {
                    let (got, hit) = pick_hinted(text, &KEYS, &USUAL, &hints);
                    proptest::prop_assert_eq!(got, want);
                    for (i, v) in got.iter().enumerate() {
                        if hit & (1 << i) != 0 {
                            proptest::prop_assert_eq!(*v, hints[i]);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn usual_keys_know_where_they_go() {
        const KEYS: [&[u8]; 2] = [b"b", b"a"];
        let u = usual(&KEYS, [b"a", b"c", b"b"]);
        assert_eq!(
            u.map(|(k, slot)| (k.name().to_vec(), slot)),
            [
                (b"a".to_vec(), Some(1)),
                (b"c".to_vec(), None),
                (b"b".to_vec(), Some(0)),
            ]
        );
        let args = br#"{"a": 1, "c": [2], "b": "x"}"#;
        assert_eq!(
            pick_usual(args, &KEYS, &u),
            [Some(&b"\"x\""[..]), Some(&b"1"[..])]
        );
    }

    #[test]
    fn step_names() {
        assert_eq!(profiler_step(b"\"ProfilerStep#12\""), Some(12));
        assert_eq!(profiler_step(b"\"ProfilerStep#x\""), None);
        assert_eq!(profiler_step(b"\"aten::mm\""), None);
    }
}
