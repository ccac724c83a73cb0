//! Streaming the top level of a Chrome/Kineto trace in bounded windows.
//!
//! The file is an object whose `traceEvents` array can be gigabytes long, and whose other keys
//! (metadata) can sit before or after it. We keep one buffer of decompressed bytes and parse
//! its complete events on every worker at once: each starts at a guessed event boundary, and
//! a guess is accepted only if the previous worker, parsing for real, stopped exactly there
//! (otherwise that range is parsed again). No serial pre-scan for boundaries is needed.
//! Memory is the buffer plus the largest single event, whatever the file size.

use crate::error::ParseErr;
use crate::json::{Cursor, JsonError};
use crate::window::Window;

mod runs;
use runs::parse_window;

/// Below twice this many bytes a window is parsed by one worker.
pub(crate) const SUB_WINDOW: usize = 256 << 10;

/// The longest single event (or top-level metadata value) read. Profilers write events of a
/// few hundred bytes; a longer one is no event aorta could use, and each window that ends
/// inside it is parsed again from its start, so without a limit a 1 GB string made ingest
/// quadratic (52 s and 8 GB for one event in a debug build).
pub(crate) const MAX_EVENT: usize = 64 << 20;

pub(crate) trait Visitor: Sync + Send {
    /// What a worker accumulates from a run of events.
    type Part: Send + Default;
    /// An empty part for a run of about `bytes` bytes of events (a visitor may size its
    /// buffers from it, rather than growing them row by row).
    fn part(&self, bytes: usize) -> Self::Part {
        let _ = bytes;
        Self::Part::default()
    }
    /// A top-level key other than `traceEvents`, with its raw JSON value.
    fn meta(&mut self, key: &str, raw: &[u8]) -> Result<(), ParseErr>;
    /// Reads the event at the cursor (on its `{`) into `part`, leaving the cursor after it;
    /// `off` is the event's offset in the stream.
    fn event(&self, c: &mut Cursor<'_>, part: &mut Self::Part, off: u64) -> Result<(), JsonError>;
    /// Takes finished parts, in file order, one at a time: on whichever worker ended the run
    /// that made the part next, while other runs are being parsed (so a visitor keeps what
    /// it takes behind a lock).
    fn take(&self, part: Self::Part) -> Result<(), ParseErr>;
}

/// How many runs a window of `len` bytes is cut into: two for a file read by one worker of
/// its own, else one per `RUN` bytes and at least two per worker.
///
/// Why: each run has costs of its own (its strings interned and its names classified afresh,
/// its batch re-mapped by the spill thread, the wait for the slowest run). Cutting every
/// file's window into two runs per worker of the pool, as before, made 16 files on 16
/// workers parse 32 runs of 128 KiB per 4 MiB window, and the process used ~25 % more CPU
/// than 16 processes of one job each on the same files (docs/PERFORMANCE.md, issue 33). But
/// two runs per worker leave a worker idle for up to half its share of every window while the
/// other finishes its last run: on two workers, runs of `RUN` in 32 MiB windows
/// (`window::mapped_step`) kept them busier than four runs of a 4 MiB window. A file with
/// one worker of its own keeps two runs, which idle workers of the pool take.
fn runs_for(len: usize, threads: usize, files: usize) -> usize {
    match threads / files.max(1) {
        0 | 1 => 2,
        workers => (2 * workers).max(len / RUN),
    }
}

/// The size of run a window is cut into, where its workers need no more (`runs_for`).
const RUN: usize = 1 << 20;

pub(crate) struct Driver {
    win: Window,
    /// Stream offset of the window's first byte.
    base: u64,
}

/// What the top level looked like.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Shape {
    /// `[ ... ]` rather than `{ "traceEvents": [...] }`.
    pub array_form: bool,
    /// An array-form file that ended without its closing `]`.
    pub unterminated: bool,
    pub events: u64,
}

impl Driver {
    pub(crate) fn new(win: Window) -> Driver {
        Driver { win, base: 0 }
    }

    fn err(&self, pos: usize, msg: impl Into<String>) -> ParseErr {
        ParseErr::new(self.base + pos as u64, msg)
    }

    /// A read failure, placed at the end of what was read.
    fn read_err(&self, e: std::io::Error) -> ParseErr {
        let len = self.win.bytes().len();
        self.err(len, format!("reading the input failed: {e}"))
    }

    /// Extends the window; false at the end of the stream.
    fn fill(&mut self) -> Result<bool, ParseErr> {
        self.win.fill().map_err(|e| self.read_err(e))
    }

    /// Runs `f` at `pos`, reading more input whenever the value is incomplete.
    fn complete<T>(
        &mut self,
        pos: usize,
        what: &str,
        f: impl Fn(&mut Cursor) -> Result<T, JsonError>,
    ) -> Result<(T, usize), ParseErr> {
        loop {
            let mut c = Cursor::at(self.win.bytes(), pos);
            match f(&mut c) {
                Ok(v) => return Ok((v, c.i)),
                Err(JsonError::Syntax { offset, msg }) => return Err(self.err(offset, msg)),
                Err(JsonError::Incomplete) => {
                    self.within_limit(pos, what)?;
                    if !self.fill()? {
                        let len = self.win.bytes().len();
                        return Err(self.err(len, format!("unexpected end of file in {what}")));
                    }
                }
            }
        }
    }

    /// An error when the value starting at `pos` is still incomplete after `MAX_EVENT` bytes.
    fn within_limit(&self, pos: usize, what: &str) -> Result<(), ParseErr> {
        let rest = &self.win.bytes()[pos..];
        if rest.len() > MAX_EVENT && rest.iter().all(|b| is_json_blank(*b)) {
            let mib = MAX_EVENT >> 20;
            return Err(self.err(pos, format!("{mib} MiB of blanks and no JSON: not a trace")));
        }
        if rest.len() > MAX_EVENT {
            return Err(self.err(
                pos,
                format!(
                    "a value in {what} longer than {} MiB (the most aorta reads in one event)",
                    MAX_EVENT >> 20
                ),
            ));
        }
        Ok(())
    }

    /// Forgets the bytes before `pos`; returns the new position of `pos`.
    fn consume(&mut self, pos: usize) -> usize {
        self.win.consume(pos);
        self.base += pos as u64;
        0
    }

    pub(crate) fn run<V: Visitor>(mut self, v: &mut V) -> Result<Shape, ParseErr> {
        // Only JSON's four blanks may come first: a file of NUL bytes (a sparse file) is
        // refused at its first byte, not read to its end as blanks.
        let (first, mut pos) = self.complete(0, "the file", |c| {
            if c.b.starts_with(b"\xEF\xBB\xBF") && c.i == 0 {
                c.i = 3;
            }
            match c.b[c.i..].iter().position(|b| !is_json_blank(*b)) {
                Some(k) => {
                    c.i += k;
                    Ok(c.b[c.i])
                }
                None => Err(JsonError::Incomplete),
            }
        })?;
        let mut shape = Shape::default();
        match first {
            b'[' => {
                shape.array_form = true;
                let (events, _, closed) = self.events(pos + 1, v, true)?;
                // Only blanks are parsed past the array, but the whole file is hashed.
                self.win.hash_rest().map_err(|e| self.read_err(e))?;
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

    /// Only blanks may follow the top-level object, up to the end of the stream.
    fn expect_end(&mut self, mut pos: usize) -> Result<(), ParseErr> {
        loop {
            if let Some(k) = self.win.bytes()[pos..]
                .iter()
                .position(|b| !b.is_ascii_whitespace())
            {
                return Err(self.err(pos + k, "unexpected data after the end of the trace object"));
            }
            pos = self.consume(self.win.bytes().len());
            if !self.fill()? {
                return Ok(());
            }
        }
    }

    /// Streams the elements of an event array starting at `pos` (just after `[`).
    /// Returns (events, position after `]`, whether `]` was seen).
    fn events<V: Visitor>(
        &mut self,
        mut pos: usize,
        v: &mut V,
        tolerate_eof: bool,
    ) -> Result<(u64, usize, bool), ParseErr> {
        let mut count = 0u64;
        loop {
            // Parse this window while the next chunk is read (or inflated).
            let base = self.base;
            let (parsed, read) = self
                .win
                .parse_ahead(|buf, behind| parse_window(&*v, buf, pos, base, behind));
            let read = read.map_err(|e| self.read_err(e));
            let (n, end, last) = parsed?;
            count += n;
            let more = read?;
            if let Some(end) = end {
                self.win.append_ahead(more).map_err(|e| self.read_err(e))?;
                return Ok((count, end, true));
            }
            // Drop the parsed bytes first, so only the unparsed tail moves, not the new chunk.
            pos = self.consume(last);
            self.within_limit(pos, "traceEvents")?;
            self.win.append_ahead(more).map_err(|e| self.read_err(e))?;
            if !more {
                let buf = self.win.bytes();
                let rest = &buf[pos..];
                if tolerate_eof && rest.iter().all(|b| b.is_ascii_whitespace() || *b == b',') {
                    return Ok((count, buf.len(), false));
                }
                return Err(self.err(
                    buf.len(),
                    format!("unexpected end of file inside traceEvents after {count} events (truncated trace?)"),
                ));
            }
        }
    }
}

fn is_json_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::MAP_MIN;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// Two runs per worker a file has to itself, never fewer than two, and one per `RUN`
    /// where it has more than one.
    #[test]
    fn runs_follow_the_workers_of_a_file() {
        let small = 1 << 20;
        assert_eq!(runs_for(small, 1, 1), 2);
        assert_eq!(runs_for(small, 16, 1), 32);
        assert_eq!(runs_for(small, 16, 2), 16);
        assert_eq!(runs_for(small, 16, 3), 10);
        assert_eq!(runs_for(small, 16, 16), 2);
        assert_eq!(runs_for(small, 2, 40), 2);
        assert_eq!(runs_for(small, 4, 0), 8);
        // A chunk read by one worker: two runs, as before.
        assert_eq!(runs_for(4 << 20, 1, 1), 2);
        assert_eq!(runs_for((4 << 20) + 3000, 16, 16), 2);
        // A read chunk on two workers: four runs, as before.
        assert_eq!(runs_for(4 << 20, 2, 1), 4);
        // 32 MiB windows: a run per MiB on two workers, two per worker on sixteen.
        assert_eq!(runs_for(32 << 20, 2, 1), 32);
        assert_eq!(runs_for(32 << 20, 16, 1), 32);
    }

    /// Collects each event's `name`, so the result shows which boundaries were used.
    #[derive(Default)]
    struct Names(std::sync::Mutex<Vec<String>>);

    impl Visitor for Names {
        type Part = Vec<String>;
        fn meta(&mut self, _: &str, _: &[u8]) -> Result<(), ParseErr> {
            Ok(())
        }
        fn event(
            &self,
            c: &mut Cursor<'_>,
            part: &mut Vec<String>,
            _: u64,
        ) -> Result<(), JsonError> {
            let ev = crate::trace_event::parse(c)?;
            // Workers that started from a wrong guess read garbage: never panic on it.
            let name = ev
                .name
                .and_then(crate::trace_event::text)
                .unwrap_or_default();
            part.push(name.into_owned());
            Ok(())
        }
        fn take(&self, part: Vec<String>) -> Result<(), ParseErr> {
            self.0.lock().unwrap().extend(part);
            Ok(())
        }
    }

    /// Parses `text` from a file, mapped when it is large enough, and read: both must agree.
    fn run(text: &str) -> Result<(Shape, Vec<String>), ParseErr> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(&p, text).unwrap();
        let go = |may_map| {
            let win = Window::open_as(&p, Arc::new(AtomicU64::new(0)), None, may_map).unwrap();
            let mapped = matches!(win, Window::Mapped { .. });
            assert_eq!(mapped, may_map && text.len() as u64 >= MAP_MIN);
            let mut v = Names::default();
            Driver::new(win)
                .run(&mut v)
                .map(|shape| (shape, v.0.into_inner().unwrap()))
        };
        let (mapped, read) = (go(true), go(false));
        assert_eq!(format!("{mapped:?}"), format!("{read:?}"));
        mapped
    }

    /// A `len`-byte-or-more trace of numbered events, pretty-printed like Kineto's.
    fn big_trace(len: usize) -> (String, usize) {
        let mut s = String::from("{\"traceEvents\": [\n");
        let mut n = 0;
        while s.len() < len {
            s.push_str(&format!(
                "  {{\"ph\": \"X\", \"name\": \"e{n}\", \"args\": {{\"a\": [1, \"}}\"]}}}},\n"
            ));
            n += 1;
        }
        s.push_str("  {\"name\": \"last\"}\n], \"baseTimeNanoseconds\": 1}\n");
        (s, n + 1)
    }

    #[test]
    fn mapped_and_read_inputs_agree_across_many_windows() {
        let (text, n) = big_trace(3 * crate::source::CHUNK + 12345);
        let (shape, names) = run(&text).unwrap();
        assert_eq!(shape.events, n as u64);
        assert_eq!(names.last().map(String::as_str), Some("last"));
        assert_eq!(names[1234], "e1234");
        // Cut mid-event at several places: the same error, at the end of the file.
        for cut in [
            text.len() - 40,
            2 * crate::source::CHUNK + 7,
            MAP_MIN as usize + 3,
        ] {
            let e = run(&text[..cut]).unwrap_err();
            assert_eq!(e.offset, cut as u64, "{}", e.msg);
        }
    }

    /// The walk hashes what it reads, the next chunk of a mapped file while the window is
    /// parsed: the hash is that of the whole file read alone, in either kind of window.
    #[test]
    fn the_walk_hashes_the_file_it_reads() {
        let (text, _) = big_trace(5 * crate::source::CHUNK + 4321);
        // The array's end in a window with more of the file after it: the object form with
        // 40 MiB of blanks after its `}`, and the array form with 9 MiB after its `]`.
        let blanks = format!("{text}{}", " ".repeat(40 << 20));
        let body = text.trim_start_matches("{\"traceEvents\": ");
        let array = format!(
            "{}{}",
            &body[..body.rfind(']').unwrap() + 1],
            "\n".repeat(9 << 20)
        );
        let dir = tempfile::tempdir().unwrap();
        for (i, text) in [text.as_str(), &blanks, &array].into_iter().enumerate() {
            let p = dir.path().join(format!("t{i}.json"));
            std::fs::write(&p, text).unwrap();
            let (want, _) = crate::source::content_hash(&p).unwrap();
            for threads in [1, 2, 5] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                for may_map in [true, false] {
                    let h = crate::source::Hasher::default();
                    let progress = Arc::new(AtomicU64::new(0));
                    let win = Window::open_as(&p, progress, Some(h.clone()), may_map).unwrap();
                    pool.install(|| Driver::new(win).run(&mut Names::default()).unwrap());
                    let what = format!("file {i}, {threads} threads, mapped: {may_map}");
                    assert_eq!(crate::source::digest(&h), want, "{what}");
                }
            }
        }
    }

    #[test]
    fn wrong_split_guesses_are_detected_and_reparsed() {
        // Names full of `},{` and `}, {` make many split guesses land inside strings; the
        // events must still come out exactly once each, in order.
        let n = 60_000;
        let want: Vec<String> = (0..n)
            .map(|i| format!("k{i}\"}},{{\"x\":{{}}, {{\"y"))
            .collect();
        let events: Vec<String> = want
            .iter()
            .map(|w| {
                format!(
                    "{{\"ph\":\"X\",\"name\":{},\"args\":{{\"a\":[{{}},{{}}]}}}}",
                    serde_json::to_string(w).unwrap()
                )
            })
            .collect();
        let text = format!(
            "{{\"traceEvents\":[{}], \"traceName\": \"t\"}}",
            events.join(",\n  ")
        );
        assert!(text.len() > 4 * SUB_WINDOW);
        let (shape, got) = run(&text).unwrap();
        assert_eq!(shape.events, n as u64);
        assert_eq!(got, want);
    }

    #[test]
    fn only_blanks_may_follow_the_trace_object() {
        assert_eq!(run("{\"traceEvents\": []}\n\n").unwrap().0.events, 0);
        let text = "{\"traceEvents\": [{\"name\": \"a\"}]} \n x";
        let e = run(text).unwrap_err();
        assert_eq!(e.offset, text.find('x').unwrap() as u64);
        assert!(
            e.msg.contains("after the end of the trace object"),
            "{}",
            e.msg
        );
    }

    #[test]
    fn truncated_array_reports_the_end_offset() {
        let text =
            "{\"traceEvents\": [\n  {\"ph\": \"X\", \"name\": \"a\"},\n  {\"ph\": \"X\", \"na";
        let e = run(text).unwrap_err();
        assert_eq!(e.offset, text.len() as u64);
        assert!(e.msg.contains("after 1 events"), "{}", e.msg);
        let (shape, got) = run("[{\"name\": \"a\"}, {\"name\": \"b\"},\n").unwrap();
        assert!(shape.array_form && shape.unterminated);
        assert_eq!(got, ["a", "b"]);
    }
}
