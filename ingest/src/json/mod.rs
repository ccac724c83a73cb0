//! A small, fast JSON cursor over a byte slice.
//!
//! Why not serde: a Kineto trace is mostly fields aorta never reads (occupancy, strides,
//! python ids). Typed serde parses every one of them and measured 188 MB/s here; this cursor
//! walks the bytes once, hands out borrowed slices for the few fields that matter, and skips
//! the rest with `memchr` over string bodies. It is deliberately lax about what it skips
//! (it checks nesting and string quoting, not every token), and strict about what it reads.
//!
//! A reader that knows which key usually comes next asks for it by its bytes (`expected`).

use std::borrow::Cow;

mod blocks;
pub(crate) mod canonical;
mod expected;
pub(crate) mod layout;
mod short;

pub(crate) use expected::Key;

/// Why a read stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JsonError {
    /// The slice ended before the value did: more input may complete it.
    Incomplete,
    /// The bytes at `offset` (relative to the slice) are not what JSON allows here.
    Syntax { offset: usize, msg: &'static str },
}

pub(crate) type JResult<T> = Result<T, JsonError>;

/// A read position inside one byte slice.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    pub b: &'a [u8],
    pub i: usize,
}

fn syntax<T>(offset: usize, msg: &'static str) -> JResult<T> {
    Err(JsonError::Syntax { offset, msg })
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Cursor { b, i: 0 }
    }

    pub(crate) fn at(b: &'a [u8], i: usize) -> Self {
        Cursor { b, i }
    }

    /// Skips blanks. Any byte up to space counts: besides the four JSON blanks those are
    /// control bytes, which JSON forbids outside strings anyway (one compare, not four).
    #[inline]
    pub(crate) fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if c > b' ' {
                break;
            }
            self.i += 1;
        }
    }

    /// Next non-blank byte, without consuming it.
    #[inline]
    pub(crate) fn peek(&mut self) -> JResult<u8> {
        self.ws();
        self.b.get(self.i).copied().ok_or(JsonError::Incomplete)
    }

    #[inline]
    pub(crate) fn expect(&mut self, c: u8, msg: &'static str) -> JResult<()> {
        if self.peek()? == c {
            self.i += 1;
            Ok(())
        } else {
            syntax(self.i, msg)
        }
    }

    /// After `{` or `,`: the next key, or `None` at `}`.
    #[inline]
    pub(crate) fn next_key(&mut self, first: bool) -> JResult<Option<Cow<'a, str>>> {
        let c = self.peek()?;
        if c == b'}' {
            self.i += 1;
            return Ok(None);
        }
        if !first {
            if c != b',' {
                return syntax(self.i, "expected ',' or '}' in object");
            }
            self.i += 1;
            self.ws();
        }
        if self.peek()? != b'"' {
            return syntax(self.i, "expected a string key");
        }
        let k = self.string()?;
        self.expect(b':', "expected ':' after key")?;
        self.ws();
        Ok(Some(k))
    }

    /// Like `next_key`, but the key's raw bytes (keys aorta looks for have no escapes).
    #[inline]
    pub(crate) fn next_key_raw(&mut self, first: bool) -> JResult<Option<&'a [u8]>> {
        prefetch(self.b, self.i + PREFETCH_AHEAD);
        match self.member_fast(first) {
            Some((k, v)) => {
                if let Some(v) = v {
                    // Only the key was asked for: leave the cursor on its value.
                    self.i -= v.len();
                }
                Ok(Some(k))
            }
            None => self.key_walk(first),
        }
    }

    /// The next member of the object the cursor is in: its key's raw bytes and its value's
    /// (as `skip_value` returns them), or `None` at the object's end. Errors as
    /// `next_key_raw` then `skip_value` give them.
    #[inline]
    pub(crate) fn next_member_raw(&mut self, first: bool) -> JResult<Option<(&'a [u8], &'a [u8])>> {
        prefetch(self.b, self.i + PREFETCH_AHEAD);
        let k = match self.member_fast(first) {
            Some((k, Some(v))) => return Ok(Some((k, v))),
            Some((k, None)) => k,
            None => match self.key_walk(first)? {
                Some(k) => k,
                None => return Ok(None),
            },
        };
        Ok(Some((k, self.skip_value()?)))
    }

    /// A member decided from one 32-byte look (see `short::key_masks`) in the usual case:
    /// blanks, the `,` (unless `first`), a key without escapes, blanks, `:`, blanks and the
    /// value's first byte. A string without escapes, or a number (or literal), that ends
    /// within the look is read too (`Some` value, the cursor after it); otherwise the cursor
    /// is left on the value (`None` value). Anything else (the object's end, an escaped key,
    /// a long key, an error, the end of the input) answers `None` with nothing consumed, and
    /// `key_walk` reads it byte by byte, errors and all.
    #[inline]
    fn member_fast(&mut self, first: bool) -> Option<(&'a [u8], Option<&'a [u8]>)> {
        let w: &[u8; 32] = self.b.get(self.i..self.i + 32)?.try_into().ok()?;
        let m = short::key_masks(w);
        let solid = !m.blank as u64;
        // The first bit of `mask` above bit `k` (64 when there is none).
        let next = |mask: u64, k: u32| (mask & !((2u64 << k) - 1)).trailing_zeros();
        let mut p = solid.trailing_zeros();
        if !first {
            if *w.get(p as usize)? != b',' {
                return None;
            }
            p = next(solid, p);
        }
        if *w.get(p as usize)? != b'"' {
            return None;
        }
        let q = next(m.quote as u64, p);
        if q >= 32 || next(m.backslash as u64, p) < q {
            return None;
        }
        let colon = next(solid, q);
        if *w.get(colon as usize)? != b':' {
            return None;
        }
        let v = next(solid, colon);
        let at = self.i;
        // Where the value ends, when it is a string or a scalar that ends within the look.
        let end = match *w.get(v as usize)? {
            b'"' => {
                let close = next(m.quote as u64, v);
                (close < 32 && next(m.backslash as u64, v) > close).then_some(close + 1)
            }
            b'{' | b'[' => None,
            _ if m.sep & (1 << v) != 0 => None,
            _ => Some(next((m.blank | m.sep) as u64, v)).filter(|&e| e < 32),
        };
        let key = &self.b[at + p as usize + 1..at + q as usize];
        let Some(end) = end else {
            self.i = at + v as usize;
            return Some((key, None));
        };
        self.i = at + end as usize;
        Some((key, Some(&self.b[at + v as usize..at + end as usize])))
    }

    /// `next_key_raw` byte by byte.
    fn key_walk(&mut self, first: bool) -> JResult<Option<&'a [u8]>> {
        let c = self.peek()?;
        if c == b'}' {
            self.i += 1;
            return Ok(None);
        }
        if !first {
            if c != b',' {
                return syntax(self.i, "expected ',' or '}' in object");
            }
            self.i += 1;
            if self.peek()? != b'"' {
                return syntax(self.i, "expected a string key");
            }
        } else if c != b'"' {
            return syntax(self.i, "expected a string key");
        }
        let (k, _) = self.string_raw()?;
        self.expect(b':', "expected ':' after key")?;
        self.ws();
        Ok(Some(k))
    }

    /// Reads a string at the cursor (which must be on `"`), unescaping only when needed.
    pub(crate) fn string(&mut self) -> JResult<Cow<'a, str>> {
        let start = self.i;
        let (raw, escaped) = self.string_raw()?;
        if !escaped {
            return match std::str::from_utf8(raw) {
                Ok(s) => Ok(Cow::Borrowed(s)),
                Err(_) => syntax(start, "string is not valid UTF-8"),
            };
        }
        unescape(raw).map(Cow::Owned).ok_or(JsonError::Syntax {
            offset: start,
            msg: "invalid escape in string",
        })
    }

    /// The bytes between the quotes, and whether they contain escapes.
    #[inline]
    pub(crate) fn string_raw(&mut self) -> JResult<(&'a [u8], bool)> {
        debug_assert_eq!(self.b.get(self.i), Some(&b'"'));
        let start = self.i + 1;
        // Keys and most values are short: one 32-byte look (see `short`) usually finds the
        // closing quote; longer strings and the end of the input go on with `memchr2`.
        let Some(w) = self.b.get(start..start + 32) else {
            return self.string_tail(start, start);
        };
        let m = short::quote_or_backslash(w.try_into().expect("32 bytes"));
        if m == 0 {
            return self.string_tail(start, start + 32);
        }
        let j = start + m.trailing_zeros() as usize;
        if self.b[j] == b'"' {
            self.i = j + 1;
            return Ok((&self.b[start..j], false));
        }
        self.string_tail(start, j)
    }

    /// The rest of a string from `j` on, with `memchr2`.
    fn string_tail(&mut self, start: usize, mut j: usize) -> JResult<(&'a [u8], bool)> {
        let mut escaped = false;
        loop {
            match memchr::memchr2(b'"', b'\\', &self.b[j..]) {
                None => return Err(JsonError::Incomplete),
                Some(k) => {
                    j += k;
                    if self.b[j] == b'"' {
                        self.i = j + 1;
                        return Ok((&self.b[start..j], escaped));
                    }
                    escaped = true;
                    j += 2;
                    if j > self.b.len() {
                        return Err(JsonError::Incomplete);
                    }
                }
            }
        }
    }

    /// The text of a scalar (number, `true`, `false`, `null`) at the cursor.
    #[inline]
    pub(crate) fn scalar_text(&mut self) -> JResult<&'a [u8]> {
        let start = self.i;
        let mut j = start;
        // Numbers are short: one 32-byte look (see `short`) usually finds their end.
        if let Some(w) = self.b.get(start..start + 32) {
            let m = short::key_masks(w.try_into().expect("32 bytes"));
            let m = m.blank | m.sep;
            if m == 0 {
                j += 32;
            } else {
                return self.scalar_to(start, start + m.trailing_zeros() as usize);
            }
        }
        while let Some(&c) = self.b.get(j) {
            if ENDS_SCALAR[c as usize] {
                return self.scalar_to(start, j);
            }
            j += 1;
        }
        Err(JsonError::Incomplete)
    }

    /// The scalar `b[start..end]` (`end` is the byte that ends it).
    #[inline]
    fn scalar_to(&mut self, start: usize, end: usize) -> JResult<&'a [u8]> {
        if end == start {
            return syntax(start, "expected a value");
        }
        self.i = end;
        Ok(&self.b[start..end])
    }

    /// Skips one value of any type and returns its bytes.
    pub(crate) fn skip_value(&mut self) -> JResult<&'a [u8]> {
        let start = {
            self.ws();
            self.i
        };
        match self.b.get(self.i) {
            None => Err(JsonError::Incomplete),
            Some(b'"') => {
                self.string_raw()?;
                Ok(&self.b[start..self.i])
            }
            Some(b'{') | Some(b'[') => self.skip_nested(start),
            Some(_) => self.scalar_text(),
        }
    }

    fn skip_nested(&mut self, start: usize) -> JResult<&'a [u8]> {
        self.i = start + 1;
        self.close(self.b[start], 1)?;
        Ok(&self.b[start..self.i])
    }

    /// Skips the rest of the object whose key/value list the cursor is inside.
    pub(crate) fn skip_rest_of_object(&mut self) -> JResult<()> {
        self.close(b'{', 1)
    }

    /// Moves past the bracket that closes `depth` open `open` brackets (64 bytes at a time,
    /// see `blocks`).
    fn close(&mut self, open: u8, depth: usize) -> JResult<()> {
        match blocks::close(self.b, self.i, open, depth) {
            Some(i) => {
                self.i = i;
                Ok(())
            }
            None => Err(JsonError::Incomplete),
        }
    }
}

/// How far ahead of the cursor `next_key_raw` asks for the bytes (a few events' worth).
pub(super) const PREFETCH_AHEAD: usize = 1024;

/// Asks the CPU to start loading the cache line at `b[at]` (nothing when past the end).
#[inline(always)]
pub(super) fn prefetch(b: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = b.get(at) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint (it never faults), and `p` is in bounds anyway;
        // SSE is part of every x86-64 CPU.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const u8 as *const i8) };
    }
}

/// Bytes that end a number or literal: `,` `}` `]` and blanks (as `ws` counts them).
static ENDS_SCALAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c <= b' ' as usize {
        t[c] = true;
        c += 1;
    }
    t[b',' as usize] = true;
    t[b'}' as usize] = true;
    t[b']' as usize] = true;
    t
};

fn unescape(raw: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let e = *raw.get(i + 1)?;
        i += 2;
        match e {
            b'"' | b'\\' | b'/' => out.push(e),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'u' => {
                let mut cp = hex4(raw.get(i..i + 4)?)?;
                i += 4;
                if (0xD800..0xDC00).contains(&cp) && raw.get(i..i + 2) == Some(b"\\u") {
                    let lo = hex4(raw.get(i + 2..i + 6)?)?;
                    if (0xDC00..0xE000).contains(&lo) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    }
                }
                let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

fn hex4(h: &[u8]) -> Option<u32> {
    std::str::from_utf8(h)
        .ok()
        .and_then(|s| u32::from_str_radix(s, 16).ok())
}

/// The largest time (in magnitude) aorta reads, in ns: 3·10¹⁸, the year 2065 as Unix time
/// or 95 years as a relative one. A time past it is unusable, so any sum of three times
/// (a base time + a timestamp + a duration) fits in i64 and no reader's addition overflows.
pub(crate) const TIME_LIMIT_NS: i64 = 3_000_000_000_000_000_000;

/// Whether `ns` is a time aorta can add without overflow (`TIME_LIMIT_NS`).
pub(crate) fn usable_time(ns: i64) -> bool {
    (-TIME_LIMIT_NS..=TIME_LIMIT_NS).contains(&ns)
}

/// Parses a JSON number written in microseconds into integer nanoseconds, exactly.
///
/// `1712195495507888.958` → `1712195495507888958`. Digits past the third decimal are
/// rounded half away from zero; an exponent falls back to f64 (only hand-written traces use
/// one, and their values are small). `None` past `TIME_LIMIT_NS`.
pub(crate) fn us_text_to_ns(t: &[u8]) -> Option<i64> {
    short_us_to_ns(t)
        .or_else(|| us_text_to_ns_any(t))
        .filter(|&ns| usable_time(ns))
}

/// `us_text_to_ns` for the usual text in one pass: up to 17 digits, then maybe `.` and
/// digits (no sign, no exponent). `None` for anything else, which `us_text_to_ns_any` reads.
#[inline]
fn short_us_to_ns(t: &[u8]) -> Option<i64> {
    let digit = |i: usize| t.get(i).map(|c| c.wrapping_sub(b'0')).filter(|&d| d < 10);
    let mut us: i64 = 0;
    let mut i = 0;
    while let Some(d) = digit(i) {
        if i == 17 {
            return None;
        }
        us = us * 10 + d as i64;
        i += 1;
    }
    if i == 0 {
        return None;
    }
    // The first three decimals as ns, and the fourth rounds.
    let mut ns = 0i64;
    if t.get(i) == Some(&b'.') {
        i += 1;
        let first = i;
        while let Some(d) = digit(i) {
            ns += match i - first {
                0 => d as i64 * 100,
                1 => d as i64 * 10,
                2 => d as i64,
                3 => (d >= 5) as i64,
                _ => 0,
            };
            i += 1;
        }
    }
    if i != t.len() {
        return None;
    }
    us.checked_mul(1000)?.checked_add(ns)
}

/// `us_text_to_ns` for any text: signs, exponents, long integers.
fn us_text_to_ns_any(t: &[u8]) -> Option<i64> {
    let (neg, t) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        _ => (false, t),
    };
    if t.is_empty() {
        return None;
    }
    if t.iter().any(|&c| c == b'e' || c == b'E') {
        let v: f64 = std::str::from_utf8(t).ok()?.parse().ok()?;
        // Out of the int64 ns range (`1e90`) is unusable, like a too-long integer below; an
        // `as` cast would saturate it to i64::MAX, a time that was never in the trace.
        let ns = (v * 1000.0).round();
        let ns = (ns.abs() < i64::MAX as f64).then_some(ns as i64)?;
        return Some(if neg { -ns } else { ns });
    }
    let dot = t.iter().position(|&c| c == b'.');
    let (int, frac) = match dot {
        Some(d) => (&t[..d], &t[d + 1..]),
        None => (t, &t[t.len()..]),
    };
    let mut v: i64 = digits(int)?;
    let mut scale = 0;
    for &c in frac.iter().take(3) {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
        scale += 1;
    }
    for _ in scale..3 {
        v = v.checked_mul(10)?;
    }
    if let Some(&r) = frac.get(3) {
        if !frac[3..].iter().all(u8::is_ascii_digit) {
            return None;
        }
        if r >= b'5' {
            v = v.checked_add(1)?;
        }
    }
    Some(if neg { -v } else { v })
}

/// Parses an integer written as digits (no sign).
pub(crate) fn digits(t: &[u8]) -> Option<i64> {
    if t.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in t {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    Some(v)
}

/// An integer from a JSON value's text: `42`, `-3`, `"42"`, `"0x1f"`, or `42.0`.
pub(crate) fn int_from_value(v: &[u8]) -> Option<i64> {
    short_int(v).or_else(|| int_from_any(v))
}

/// `int_from_value` for the usual text: up to 18 digits, nothing else.
#[inline]
fn short_int(v: &[u8]) -> Option<i64> {
    if v.is_empty() || v.len() > 18 {
        return None;
    }
    let mut n: i64 = 0;
    for &c in v {
        let d = c.wrapping_sub(b'0');
        if d >= 10 {
            return None;
        }
        n = n * 10 + d as i64;
    }
    Some(n)
}

/// `int_from_value` for any spelling.
fn int_from_any(v: &[u8]) -> Option<i64> {
    let v = if v.len() >= 2 && v[0] == b'"' && v[v.len() - 1] == b'"' {
        &v[1..v.len() - 1]
    } else {
        v
    };
    let (neg, body) = match v.first() {
        Some(b'-') => (true, &v[1..]),
        _ => (false, v),
    };
    let n = if body.len() > 2 && (body.starts_with(b"0x") || body.starts_with(b"0X")) {
        i64::from_str_radix(std::str::from_utf8(&body[2..]).ok()?, 16).ok()?
    } else if let Some(d) = body.iter().position(|&c| c == b'.') {
        if !body[d + 1..].iter().all(|&c| c == b'0') {
            return None;
        }
        digits(&body[..d])?
    } else {
        digits(body)?
    };
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests;
