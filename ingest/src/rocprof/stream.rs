//! A serial pull parser over a `Window`: reads one JSON value at a time, asking for more
//! input when the value is incomplete and dropping what was parsed, so memory is the window
//! plus the largest single value read whole (a record, a kernel symbol, a roctx message), never
//! the document. Arrays and objects can be walked element by element, or skipped that way.

use crate::error::ParseErr;
use crate::json::{Cursor, JResult, JsonError};
use crate::window::Window;

/// Deeper than this, a skipped value is read whole (a pathological file, not a rocprof one).
const STREAM_DEPTH: u32 = 32;

pub(super) struct Stream {
    win: Window,
    /// Stream offset of the window's first byte.
    base: u64,
    pos: usize,
}

impl Stream {
    pub(super) fn new(win: Window) -> Stream {
        Stream {
            win,
            base: 0,
            pos: 0,
        }
    }

    pub(super) fn err(&self, pos: usize, msg: impl Into<String>) -> ParseErr {
        ParseErr::new(self.base + pos as u64, msg)
    }

    /// Offset of the next unread byte in the (decompressed) stream.
    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Runs `f` at the read position until it completes, reading more input as needed.
    pub(super) fn read<T>(
        &mut self,
        what: &str,
        f: impl Fn(&mut Cursor<'_>) -> JResult<T>,
    ) -> Result<T, ParseErr> {
        loop {
            let mut c = Cursor::at(self.win.bytes(), self.pos);
            match f(&mut c) {
                Ok(v) => {
                    self.pos = c.i;
                    return Ok(v);
                }
                Err(JsonError::Syntax { offset, msg }) => return Err(self.err(offset, msg)),
                Err(JsonError::Incomplete) => {
                    // Drop what was parsed before asking for more.
                    self.win.consume(self.pos);
                    self.base += self.pos as u64;
                    self.pos = 0;
                    let more = self.win.fill().map_err(|e| {
                        self.err(self.win.bytes().len(), format!("reading failed: {e}"))
                    })?;
                    if !more {
                        let end = self.win.bytes().len();
                        return Err(self.err(
                            end,
                            format!("unexpected end of file in {what} (truncated file?)"),
                        ));
                    }
                }
            }
        }
    }

    /// The raw bytes of the next value, read whole.
    pub(super) fn raw(&mut self, what: &str) -> Result<Vec<u8>, ParseErr> {
        self.read(what, |c| c.skip_value().map(<[u8]>::to_vec))
    }

    /// Calls `each` on every element of the array at the read position.
    pub(super) fn array(
        &mut self,
        what: &str,
        mut each: impl FnMut(&mut Stream) -> Result<(), ParseErr>,
    ) -> Result<u64, ParseErr> {
        self.read(what, |c| c.expect(b'[', "expected an array"))?;
        let mut n = 0u64;
        loop {
            let done = self.read(what, |c| {
                if c.peek()? == b']' {
                    c.i += 1;
                    return Ok(true);
                }
                if n > 0 {
                    c.expect(b',', "expected ',' or ']' in array")?;
                }
                c.peek().map(|_| false)
            })?;
            if done {
                return Ok(n);
            }
            each(self)?;
            n += 1;
        }
    }

    /// Calls `each` with every key of the object at the read position (on its value).
    pub(super) fn object(
        &mut self,
        what: &str,
        mut each: impl FnMut(&mut Stream, &str) -> Result<(), ParseErr>,
    ) -> Result<(), ParseErr> {
        self.read(what, |c| c.expect(b'{', "expected an object"))?;
        let mut first = true;
        loop {
            let key = self.read(what, |c| {
                c.next_key(first).map(|k| k.map(|k| k.into_owned()))
            })?;
            first = false;
            match key {
                Some(k) => each(self, &k)?,
                None => return Ok(()),
            }
        }
    }

    /// Skips the next value, element by element for arrays and objects.
    pub(super) fn skip(&mut self, what: &str) -> Result<u64, ParseErr> {
        self.skip_depth(what, 0)
    }

    fn skip_depth(&mut self, what: &str, depth: u32) -> Result<u64, ParseErr> {
        let b = self.read(what, |c| c.peek())?;
        match b {
            b'[' if depth < STREAM_DEPTH => {
                self.array(what, |s| s.skip_depth(what, depth + 1).map(|_| ()))
            }
            b'{' if depth < STREAM_DEPTH => self
                .object(what, |s, _| s.skip_depth(what, depth + 1).map(|_| ()))
                .map(|_| 1),
            _ => self.read(what, |c| c.skip_value().map(|_| 1)),
        }
    }

    /// Only blanks may follow the document.
    pub(super) fn expect_end(&mut self) -> Result<(), ParseErr> {
        loop {
            let rest = &self.win.bytes()[self.pos..];
            if let Some(k) = rest.iter().position(|b| !b.is_ascii_whitespace()) {
                return Err(self.err(
                    self.pos + k,
                    "unexpected data after the end of the document",
                ));
            }
            self.pos = self.win.bytes().len();
            self.win.consume(self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
            let more = self
                .win
                .fill()
                .map_err(|e| self.err(0, format!("reading failed: {e}")))?;
            if !more {
                return Ok(());
            }
        }
    }
}
