//! The roctx messages of a rocprofv3 JSON process object (`strings.marker_api`), read one
//! pair at a time and kept in one buffer.
//!
//! Why not a `serde_json::Value` of the whole `strings` table and a map of `String`s: a
//! capture whose every step is a roctx range has a message per step, and at the million
//! steps a trace may hold (`MAX_STEP_SPANS`) the `Value` took ~630 MB while it was read, and
//! each of the two maps alive at once (the reader's and the step pre-pass's) ~90 MB. Here a
//! message costs its text and 12 bytes, and only one pair is ever a `Value`.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Correlation id → message, as rocprofiler-sdk's `marker_messages` (the last of an id
/// written counts).
#[derive(Debug, Default)]
pub(super) struct Messages {
    /// The messages one after another: as written until `seal`, then in id order.
    text: String,
    /// Until `seal`: (id, start, length) of each message in `text`, as written.
    written: Vec<(i64, u32, u32)>,
    /// After `seal`: the ids, sorted, one each, and where each one's message starts in
    /// `text` (it ends where the next one starts): 12 bytes a message.
    ids: Vec<i64>,
    starts: Vec<u32>,
}

impl Messages {
    /// Adds a message (before `seal`); one past 4 GiB of text is not kept (its record is then
    /// named by its operation, as one without a message).
    fn push(&mut self, id: i64, message: &str) {
        if u32::try_from(self.text.len() + message.len()).is_err() {
            return;
        }
        let (start, len) = (self.text.len() as u32, message.len() as u32);
        self.text.push_str(message);
        self.written.push((id, start, len));
    }

    /// Sorts the ids, the last message of a repeated id kept, and lays the text out in their
    /// order.
    fn seal(&mut self) {
        let mut w = std::mem::take(&mut self.written);
        // Stable: an id's messages stay in the order written; reversed, the last comes first.
        w.sort_by_key(|e| e.0);
        w.reverse();
        w.dedup_by_key(|e| e.0);
        w.reverse();
        let mut text = String::with_capacity(w.iter().map(|e| e.2 as usize).sum());
        (self.ids, self.starts) = w
            .iter()
            .map(|&(id, start, len)| {
                let at = text.len() as u32;
                text.push_str(&self.text[start as usize..(start + len) as usize]);
                (id, at)
            })
            .unzip();
        self.text = text;
    }

    fn text_of(&self, i: usize) -> &str {
        let end = self
            .starts
            .get(i + 1)
            .map_or(self.text.len(), |&e| e as usize);
        &self.text[self.starts[i] as usize..end]
    }

    /// The message of correlation id `id`.
    pub(super) fn get(&self, id: i64) -> Option<&str> {
        let i = self.ids.binary_search(&id).ok()?;
        Some(self.text_of(i))
    }

    /// Every message, in id order.
    pub(super) fn values(&self) -> impl Iterator<Item = &str> {
        (0..self.ids.len()).map(|i| self.text_of(i))
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

/// A `strings` table: its `buffer_records` (small) as a `Value`, its `marker_api` pair by
/// pair into `Messages`; any other value, or key, holds neither.
pub(super) fn parse_strings(raw: &[u8]) -> serde_json::Result<(Option<Value>, Messages)> {
    let mut de = serde_json::Deserializer::from_slice(raw);
    let out = de.deserialize_any(StringsVisitor)?;
    de.end()?;
    Ok(out)
}

struct StringsVisitor;

/// Accepts any JSON value; only an object's keys are read.
macro_rules! nothing_for {
    ($($f:ident: $t:ty),*) => {
        $(fn $f<E: de::Error>(self, _: $t) -> Result<Self::Value, E> {
            Ok(Default::default())
        })*
    };
}

impl<'de> Visitor<'de> for StringsVisitor {
    type Value = (Option<Value>, Messages);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a strings table")
    }

    nothing_for!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Default::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Default::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut kinds, mut messages) = (None, Messages::default());
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "buffer_records" => kinds = Some(map.next_value::<Value>()?),
                // A repeated key counts as `Value` reads it: the last.
                "marker_api" => messages = map.next_value_seed(MessagesSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((kinds, messages))
    }
}

struct MessagesSeed;

impl<'de> DeserializeSeed<'de> for MessagesSeed {
    type Value = Messages;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Messages, D::Error> {
        d.deserialize_any(MessagesVisitor)
    }
}

struct MessagesVisitor;

impl<'de> Visitor<'de> for MessagesVisitor {
    type Value = Messages;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("roctx messages")
    }

    nothing_for!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Default::default())
    }

    /// `[{"key": id, "value": message}]`: one pair at a time.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages, A::Error> {
        let mut m = Messages::default();
        while let Some(pair) = seq.next_element::<Value>()? {
            m.add_pair(&pair);
        }
        m.seal();
        Ok(m)
    }

    /// `{"id": message}`: read whole, in the order a `Value` object keeps its keys (the
    /// format rocprofiler-sdk does not write; kept as it was read before).
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Messages, A::Error> {
        let mut all = serde_json::Map::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            all.insert(k, v);
        }
        let mut m = Messages::default();
        for (k, v) in &all {
            if let (Ok(k), Some(v)) = (k.trim().parse(), v.as_str()) {
                m.push(k, v);
            }
        }
        m.seal();
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages as the `Value` reading gave them: ids as numbers or text, the last of a
    /// repeated id, pairs without a text value skipped, both shapes, other values empty.
    #[test]
    fn messages_read_as_a_value_map_of_them_would() {
        let (kinds, m) = parse_strings(
            br#"{"buffer_records":[{"kind":"MARKER_CORE_API","operations":["a"]}],
                "marker_api":[{"key":5,"value":"step 1"},{"key":"7","value":"x"},
                {"key":5,"value":"step 2"},{"key":9,"value":3},{"value":"no key"},17,
                {"key":-2,"value":""}],"other":[1,2]}"#,
        )
        .unwrap();
        assert_eq!(kinds.unwrap()[0]["kind"], "MARKER_CORE_API");
        assert_eq!(m.get(5), Some("step 2"), "the last of an id");
        assert_eq!(m.get(7), Some("x"));
        assert_eq!(m.get(-2), Some(""));
        assert_eq!((m.get(9), m.get(0)), (None, None));
        assert_eq!(m.values().collect::<Vec<_>>(), ["", "step 2", "x"]);
        let (_, m) = parse_strings(br#"{"marker_api":{" 3 ":"a","4":"b","x":"c","5":1}}"#).unwrap();
        assert_eq!(m.values().collect::<Vec<_>>(), ["a", "b"]);
        for other in [
            &b"[1,{}]"[..],
            b"3",
            b"null",
            b"\"s\"",
            br#"{"marker_api":7}"#,
        ] {
            let (kinds, m) = parse_strings(other).unwrap();
            assert!(kinds.is_none() && m.values().next().is_none());
        }
        assert!(parse_strings(b"{\"marker_api\":[1,}").is_err());
    }
}
