//! The `strings` table of a rocprofv3 JSON process object, read piece by piece from the
//! stream: its `buffer_records` (kind and operation names: small) as a `Value`, and its roctx
//! messages (`marker_api`) one pair at a time into `Messages`.
//!
//! Why not the whole table at once: a capture holds a message per roctx range, and reading
//! `strings` as one piece held its text, then every message with its id, and restarted the
//! read of that piece from its start each time the window had to grow. 2,000,000 ranges of
//! 100 distinct messages peaked at 270 MB on two jobs, 4,000,000 of unique ones at 755 MB
//! (docs/PERFORMANCE.md). Now a distinct message costs its text once (`rows::Interner`), and
//! each id the few bytes that name its message in a correlation → value lookup
//! (`kineto::launches`), whose blocks go to a file in the staging directory once large: what
//! grows with the ranges is that lookup's index, 16 bytes a block of 4,096 ids.

use std::io;
use std::path::Path;

use serde_json::Value;

use super::stream::Stream;
use crate::error::ParseErr;
use crate::kineto::launches::{Keep, LaunchSteps};
use crate::rows::Interner;
use crate::step_span::StepMarker;

/// Pairs added to the lookup at once.
const CHUNK: usize = 4096;

/// Distinct messages found by their text; past these, a message not among them is kept
/// again each time (a capture whose every range has a message of its own, such as a step's
/// `ProfilerStep#N`, would otherwise grow a table that it never finds anything in, and pay
/// for rehashing it from the texts: ~30 % more time at a million steps).
const SEEN_MAX: usize = 1 << 16;

#[cfg(test)]
thread_local! {
    /// Tests of the callers: every `Messages` made on this thread keeps its lookup in a file
    /// that cannot be read back once sealed (`LaunchSteps::break_file`).
    pub(super) static BREAK_LOOKUPS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Correlation id → message, as rocprofiler-sdk's `marker_messages` (the last of an id
/// written counts).
#[derive(Debug, Default)]
pub(super) struct Messages {
    /// Every distinct message (the first `SEEN_MAX` found by their text).
    texts: Interner,
    /// Id → the index of its message in `texts` (the last written).
    ids: LaunchSteps,
    /// Pairs not yet in `ids`.
    pending: Vec<(i64, Option<i64>)>,
    /// The first failed write of `ids`' file (later pairs are then dropped).
    write_error: Option<io::Error>,
}

impl Messages {
    /// No messages; the lookup's file, if it needs one, goes in `dir`.
    fn new(dir: &Path) -> Messages {
        #[cfg(test)]
        if BREAK_LOOKUPS.get() {
            return Messages {
                ids: LaunchSteps::in_file(Some(dir.to_path_buf())),
                ..Messages::default()
            };
        }
        Messages {
            ids: LaunchSteps::in_dir(Some(dir.to_path_buf())),
            ..Messages::default()
        }
    }

    /// Adds a message (before `seal`).
    fn push(&mut self, id: i64, message: &str) {
        let text = if self.texts.len() < SEEN_MAX {
            self.texts.id(message)
        } else {
            let seen = self.texts.find(message.as_bytes());
            seen.unwrap_or_else(|| self.texts.append(message))
        };
        self.pending.push((id, Some(i64::from(text))));
        if self.pending.len() == CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let v = std::mem::take(&mut self.pending);
        if self.write_error.is_none() && !v.is_empty() {
            self.write_error = self.ids.add_pairs(v, Keep::Last).err();
        }
    }

    /// Every pair is in the lookup.
    fn seal(&mut self) {
        self.flush();
        self.ids.shrink();
        #[cfg(test)]
        if BREAK_LOOKUPS.get() {
            self.ids.break_file();
        }
    }

    /// The message of correlation id `id`.
    pub(super) fn get(&self, id: i64) -> Option<&str> {
        let text = self.ids.get(id)??;
        Some(self.texts.get(text as u32))
    }

    /// Whether any id's message names a step to `marker`.
    pub(super) fn name_a_step(&self, marker: &StepMarker) -> bool {
        let naming: Vec<bool> = self
            .texts
            .iter()
            .map(|t| marker.step(t.as_bytes()).is_some())
            .collect();
        naming.contains(&true)
            && self
                .ids
                .any_value(|v| v.is_some_and(|t| naming[t as usize]))
    }

    /// The first I/O error of the lookup's file: its write, or a read that answered "no
    /// message" (`LaunchSteps::take_read_error`).
    pub(super) fn take_error(&mut self) -> Option<io::Error> {
        self.write_error
            .take()
            .or_else(|| self.ids.take_read_error())
    }

    /// `marker_api` as cereal writes it, `[{"key": id, "value": message}]`, or an object
    /// `{"id": message}`; anything else holds no message.
    fn add_pair(&mut self, pair: &Value) {
        let key = pair.get("key").and_then(json_int);
        if let (Some(k), Some(m)) = (key, pair.get("value").and_then(Value::as_str)) {
            self.push(k, m);
        }
    }
}

fn json_int(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// Reads the `strings` table at the read position: its `buffer_records` (small) as a
/// `Value`, its `marker_api` pair by pair into `Messages` (the lookup's file in `dir`); any
/// other value, or key, holds neither. Of a repeated key, the last counts (as a `Value`
/// reads it). Errors name the byte where the piece that failed ends; an end of file inside
/// the table is `unexpected end of file in strings`, as before.
pub(super) fn read_strings(
    s: &mut Stream,
    dir: &Path,
) -> Result<(Option<Value>, Messages), ParseErr> {
    let (mut kinds, mut messages) = (None, Messages::new(dir));
    if s.read(WHAT, |c| c.peek())? != b'{' {
        s.skip(WHAT)?;
        return Ok((kinds, messages));
    }
    s.object(WHAT, |s, key| {
        match key {
            "buffer_records" => kinds = Some(value(s)?),
            "marker_api" => messages = read_messages(s, dir)?,
            _ => {
                s.skip(WHAT)?;
            }
        }
        Ok(())
    })?;
    Ok((kinds, messages))
}

/// What errors inside the table name.
const WHAT: &str = "strings";

/// The next value, read whole.
fn value(s: &mut Stream) -> Result<Value, ParseErr> {
    let raw = s.raw(WHAT)?;
    serde_json::from_slice(&raw).map_err(|e| ParseErr::new(s.offset(), format!("{WHAT}: {e}")))
}

/// The messages at the read position: an array pair by pair; an object (`{"id": message}`,
/// which rocprofiler-sdk does not write) read whole, in the order a `Value` object keeps
/// its keys, as it was read before.
fn read_messages(s: &mut Stream, dir: &Path) -> Result<Messages, ParseErr> {
    let mut m = Messages::new(dir);
    match s.read(WHAT, |c| c.peek())? {
        b'[' => {
            s.array(WHAT, |s| {
                m.add_pair(&value(s)?);
                Ok(())
            })?;
        }
        b'{' => {
            if let Value::Object(all) = value(s)? {
                for (k, v) in &all {
                    if let (Ok(k), Some(v)) = (k.trim().parse(), v.as_str()) {
                        m.push(k, v);
                    }
                }
            }
        }
        _ => {
            s.skip(WHAT)?;
        }
    }
    m.seal();
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// The table `text` read from a stream over a file that holds it and a `}` (a number
    /// is only whole where something follows it), the lookup's blocks in a file
    /// (`in_file`) when `in_file`.
    fn read(text: &[u8], in_file: bool) -> Result<(Option<Value>, Messages), ParseErr> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strings.json");
        std::fs::write(&path, [text, b"}"].concat()).unwrap();
        let win = crate::window::Window::open(&path, Arc::new(AtomicU64::new(0)), None).unwrap();
        let mut s = Stream::new(win);
        let (kinds, mut m) = read_strings(&mut s, dir.path())?;
        if in_file {
            // The same pairs again, through a lookup whose every block is in its file.
            let mut again = Messages {
                ids: LaunchSteps::in_file(Some(dir.path().to_path_buf())),
                ..Messages::default()
            };
            let (texts, ids) = (&m.texts, &m.ids);
            for id in -10..10_000 {
                if let Some(t) = ids.get(id).flatten() {
                    again.push(id, texts.get(t as u32));
                }
            }
            again.seal();
            m = again;
        }
        Ok((kinds, m))
    }

    /// Every message in id order, over the ids the tests use.
    fn values(m: &Messages) -> Vec<&str> {
        (-10..10_000).filter_map(|id| m.get(id)).collect()
    }

    /// The messages as the `Value` reading gave them: ids as numbers or text, the last of a
    /// repeated id, pairs without a text value skipped, both shapes, other values empty.
    #[test]
    fn messages_read_as_a_value_map_of_them_would() {
        for in_file in [false, true] {
            let (kinds, m) = read(
                br#"{"buffer_records":[{"kind":"MARKER_CORE_API","operations":["a"]}],
                "marker_api":[{"key":5,"value":"step 1"},{"key":"7","value":"x"},
                {"key":5,"value":"step 2"},{"key":9,"value":3},{"value":"no key"},17,
                {"key":-2,"value":""}],"other":[1,2]}"#,
                in_file,
            )
            .unwrap();
            assert_eq!(kinds.unwrap()[0]["kind"], "MARKER_CORE_API");
            assert_eq!(m.get(5), Some("step 2"), "the last of an id");
            assert_eq!(m.get(7), Some("x"));
            assert_eq!(m.get(-2), Some(""));
            assert_eq!((m.get(9), m.get(0)), (None, None));
            assert_eq!(values(&m), ["", "step 2", "x"]);
        }
        let (_, m) = read(
            br#"{"marker_api":{" 3 ":"a","4":"b","x":"c","5":1}}"#,
            false,
        )
        .unwrap();
        assert_eq!(values(&m), ["a", "b"]);
        for other in [
            &b"[1,{}]"[..],
            b"3",
            b"null",
            b"\"s\"",
            br#"{"marker_api":7}"#,
        ] {
            let (kinds, m) = read(other, false).unwrap();
            assert!(kinds.is_none() && values(&m).is_empty());
        }
        // Errors name the byte where the piece that failed is.
        let cut = read(b"{\"marker_api\":[1,}", false).unwrap_err();
        assert_eq!(cut.offset, 17, "{cut:?}");
        let cut = read(b"{\"marker_api\":[{\"key\":1,\"value\":\"a", false).unwrap_err();
        assert_eq!(
            cut.msg,
            "unexpected end of file in strings (truncated file?)"
        );
    }

    /// Whether a message names a step is asked of each id's last message, not of every
    /// message ever written: an id whose step message was replaced names none.
    #[test]
    fn a_step_is_named_by_an_ids_last_message() {
        let marker = StepMarker::default();
        for in_file in [false, true] {
            let named = |t: &[u8]| read(t, in_file).unwrap().1.name_a_step(&marker);
            assert!(named(
                br#"{"marker_api":[{"key":1,"value":"ProfilerStep#3"}]}"#
            ));
            assert!(!named(br#"{"marker_api":[{"key":1,"value":"forward"}]}"#));
            assert!(!named(
                br#"{"marker_api":[{"key":1,"value":"ProfilerStep#3"},{"key":1,"value":"fwd"}]}"#
            ));
            assert!(named(
                br#"{"marker_api":[{"key":1,"value":"fwd"},{"key":1,"value":"ProfilerStep#3"}]}"#
            ));
        }
    }

    /// Repeated messages are kept once: 100,000 ids of 10 messages hold 10 texts, and the
    /// lookup's blocks, past `HELD_MAX`, are in its file.
    #[test]
    fn a_message_is_kept_once_however_many_ids_name_it() {
        let mut text = String::from("{\"marker_api\":[");
        for id in 0..100_000 {
            let sep = if id > 0 { "," } else { "" };
            text += &format!(
                "{sep}{{\"key\":{},\"value\":\"layer {}\"}}",
                3 * id,
                id % 10
            );
        }
        text += "]}";
        let (_, m) = read(text.as_bytes(), false).unwrap();
        assert_eq!(m.texts.len(), 10);
        assert_eq!(m.get(3 * 12_345), Some("layer 5"));
        assert_eq!(m.get(3 * 12_345 + 1), None);
        assert!(m.ids.heap_bytes() < 1 << 20, "{}", m.ids.heap_bytes());
        // Past `SEEN_MAX` distinct messages a new one is kept each time it comes, and every
        // id still answers its own.
        let mut text = String::from("{\"marker_api\":[");
        let n = SEEN_MAX as i64 + 100;
        for id in 0..n + 2 {
            let sep = if id > 0 { "," } else { "" };
            let msg = if id < n {
                format!("step {id}")
            } else {
                "late".into()
            };
            text += &format!("{sep}{{\"key\":{id},\"value\":\"{msg}\"}}");
        }
        text += "]}";
        let (_, m) = read(text.as_bytes(), false).unwrap();
        assert_eq!(m.get(7), Some("step 7"));
        assert_eq!(m.get(n - 1), Some(format!("step {}", n - 1).as_str()));
        assert_eq!((m.get(n), m.get(n + 1)), (Some("late"), Some("late")));
        assert_eq!(m.texts.len() as i64, n + 2);
    }
}
