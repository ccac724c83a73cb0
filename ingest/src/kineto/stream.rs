//! Streaming the top level of a Chrome/Kineto trace in bounded windows.
//!
//! The file is an object whose `traceEvents` array can be gigabytes long, and whose other keys
//! (metadata) can sit before or after it. We keep one buffer of decompressed bytes, hand every
//! run of complete events to the visitor as one window (split into sub-windows that workers
//! parse in parallel), and drop it. Memory is the buffer plus the largest single event,
//! whatever the file size.

use crate::error::ParseErr;
use crate::json::{Cursor, JsonError};
use crate::source::Chunks;

/// Aim for sub-windows of this many bytes, so a window splits across worker threads.
pub const SUB_WINDOW: usize = 256 << 10;

pub trait Visitor {
    /// A top-level key other than `traceEvents`, with its raw JSON value.
    fn meta(&mut self, key: &str, raw: &[u8]) -> Result<(), ParseErr>;
    /// A run of complete events: `w` holds them with their separators; `splits` are offsets
    /// inside `w` where a new event may start; `base` is the offset of `w` in the stream.
    fn window(&mut self, w: &[u8], base: u64, splits: &[usize]) -> Result<(), ParseErr>;
}

pub struct Driver {
    chunks: Chunks,
    buf: Vec<u8>,
    base: u64,
    eof: bool,
}

/// What the top level looked like.
#[derive(Debug, Default, Clone, Copy)]
pub struct Shape {
    /// `[ ... ]` rather than `{ "traceEvents": [...] }`.
    pub array_form: bool,
    /// An array-form file that ended without its closing `]`.
    pub unterminated: bool,
    pub events: u64,
}

impl Driver {
    pub fn new(chunks: Chunks) -> Driver {
        Driver {
            chunks,
            buf: Vec::new(),
            base: 0,
            eof: false,
        }
    }

    fn err(&self, pos: usize, msg: impl Into<String>) -> ParseErr {
        ParseErr::new(self.base + pos as u64, msg)
    }

    /// Appends the next chunk; false at the end of the stream.
    fn fill(&mut self) -> Result<bool, ParseErr> {
        if self.eof {
            return Ok(false);
        }
        match self.chunks.next_chunk() {
            Ok(Some(c)) => {
                self.buf.extend_from_slice(&c);
                Ok(true)
            }
            Ok(None) => {
                self.eof = true;
                Ok(false)
            }
            Err(e) => Err(self.err(self.buf.len(), format!("reading the input failed: {e}"))),
        }
    }

    /// Runs `f` at `pos`, reading more input whenever the value is incomplete.
    fn complete<T>(
        &mut self,
        pos: usize,
        what: &str,
        f: impl Fn(&mut Cursor) -> Result<T, JsonError>,
    ) -> Result<(T, usize), ParseErr> {
        loop {
            let mut c = Cursor::at(&self.buf, pos);
            match f(&mut c) {
                Ok(v) => return Ok((v, c.i)),
                Err(JsonError::Syntax { offset, msg }) => return Err(self.err(offset, msg)),
                Err(JsonError::Incomplete) => {
                    if !self.fill()? {
                        return Err(
                            self.err(self.buf.len(), format!("unexpected end of file in {what}"))
                        );
                    }
                }
            }
        }
    }

    /// Forgets the bytes before `pos`; returns the new position of `pos`.
    fn consume(&mut self, pos: usize) -> usize {
        self.buf.drain(..pos);
        self.base += pos as u64;
        0
    }

    pub fn run(mut self, v: &mut impl Visitor) -> Result<Shape, ParseErr> {
        let (first, mut pos) = self.complete(0, "the file", |c| {
            if c.b.starts_with(b"\xEF\xBB\xBF") && c.i == 0 {
                c.i = 3;
            }
            c.peek()
        })?;
        let mut shape = Shape::default();
        match first {
            b'[' => {
                shape.array_form = true;
                let (events, _, closed) = self.events(pos + 1, v, true)?;
                shape.events = events;
                shape.unterminated = !closed;
                return Ok(shape);
            }
            b'{' => pos += 1,
            _ => return Err(self.err(pos, "not a JSON trace: expected '{' or '['")),
        }
        let mut firstkey = true;
        loop {
            let (key, p) = self.complete(pos, "the top-level object", |c| {
                c.next_key(firstkey).map(|k| k.map(|k| k.into_owned()))
            })?;
            firstkey = false;
            let Some(key) = key else {
                pos = p;
                break;
            };
            if key == "traceEvents" {
                let (b, p) = self.complete(p, "traceEvents", |c| c.peek().map(|b| (b, c.i)))?;
                if b.0 != b'[' {
                    return Err(self.err(b.1, "traceEvents is not an array"));
                }
                let (n, end, _) = self.events(p + 1, v, false)?;
                shape.events += n;
                pos = end;
            } else {
                let (raw, p) =
                    self.complete(p, "metadata", |c| c.skip_value().map(|r| r.to_vec()))?;
                v.meta(&key, &raw)?;
                pos = p;
                pos = self.consume(pos);
            }
        }
        self.expect_end(pos)?;
        Ok(shape)
    }

    fn expect_end(&mut self, pos: usize) -> Result<(), ParseErr> {
        let (_, p) = self
            .complete(pos, "the file", |c| {
                c.ws();
                if c.i < c.b.len() {
                    Ok(())
                } else {
                    Err(JsonError::Incomplete)
                }
            })
            .or_else(|e| {
                if self.eof {
                    Ok(((), self.buf.len()))
                } else {
                    Err(e)
                }
            })?;
        if p < self.buf.len() {
            return Err(self.err(p, "unexpected data after the end of the trace object"));
        }
        Ok(())
    }

    /// Streams the elements of an event array starting at `pos` (just after `[`).
    /// Returns (events, position after `]`, whether `]` was seen).
    fn events(
        &mut self,
        mut pos: usize,
        v: &mut impl Visitor,
        tolerate_eof: bool,
    ) -> Result<(u64, usize, bool), ParseErr> {
        let mut count = 0u64;
        loop {
            let scan = scan_events(&self.buf, pos, count > 0);
            if let Some((off, msg)) = scan.error {
                return Err(self.err(off, msg));
            }
            if scan.last > pos {
                v.window(
                    &self.buf[pos..scan.last],
                    self.base + pos as u64,
                    &scan.splits,
                )?;
            }
            count += scan.events;
            if let Some(end) = scan.closed_at {
                return Ok((count, end, true));
            }
            pos = self.consume(scan.last);
            if !self.fill()? {
                if tolerate_eof
                    && self.buf[pos..]
                        .iter()
                        .all(|b| b.is_ascii_whitespace() || *b == b',')
                {
                    return Ok((count, self.buf.len(), false));
                }
                return Err(self.err(
                    self.buf.len(),
                    format!("unexpected end of file inside traceEvents after {count} events (truncated trace?)"),
                ));
            }
        }
    }
}

struct Scan {
    /// End of the last complete event.
    last: usize,
    splits: Vec<usize>,
    events: u64,
    closed_at: Option<usize>,
    error: Option<(usize, &'static str)>,
}

/// Finds the complete events in `buf[pos..]`.
fn scan_events(buf: &[u8], pos: usize, mut need_sep: bool) -> Scan {
    let mut s = Scan {
        last: pos,
        splits: Vec::new(),
        events: 0,
        closed_at: None,
        error: None,
    };
    let mut split_from = pos;
    loop {
        let mut c = Cursor::at(buf, s.last);
        c.ws();
        let Some(&b) = buf.get(c.i) else { return s };
        if b == b']' {
            s.closed_at = Some(c.i + 1);
            return s;
        }
        if need_sep {
            if b != b',' {
                s.error = Some((c.i, "expected ',' or ']' between events"));
                return s;
            }
            c.i += 1;
            c.ws();
            match buf.get(c.i) {
                None => return s,
                Some(b']') => {
                    s.closed_at = Some(c.i + 1);
                    return s;
                }
                _ => {}
            }
        }
        if buf[c.i] != b'{' {
            s.error = Some((c.i, "expected an event object in traceEvents"));
            return s;
        }
        match c.skip_value() {
            Ok(_) => {
                s.events += 1;
                s.last = c.i;
                need_sep = true;
                if s.last - split_from >= SUB_WINDOW {
                    s.splits.push(s.last - pos);
                    split_from = s.last;
                }
            }
            Err(JsonError::Incomplete) => return s,
            Err(JsonError::Syntax { offset, msg }) => {
                s.error = Some((offset, msg));
                return s;
            }
        }
    }
}

/// Calls `f` with a cursor on each event of a window (or sub-window); `f` must leave the
/// cursor just after the event's closing brace.
pub fn for_each_event<'a>(
    w: &'a [u8],
    mut f: impl FnMut(&mut Cursor<'a>) -> Result<(), JsonError>,
) -> Result<(), ParseErr> {
    let mut c = Cursor::new(w);
    loop {
        c.ws();
        if c.i < w.len() && w[c.i] == b',' {
            c.i += 1;
            c.ws();
        }
        if c.i >= w.len() {
            return Ok(());
        }
        let start = c.i;
        f(&mut c).map_err(|e| match e {
            JsonError::Syntax { offset, msg } => ParseErr::new(offset as u64, msg),
            JsonError::Incomplete => ParseErr::new(start as u64, "event ends early"),
        })?;
    }
}
