//! One rocprofv3 JSON buffer record, read with the crate's cursor into plain integers.
//!
//! Every buffer record kind shares the envelope (`kind`, `operation`, `thread_id`,
//! `correlation_id`, `start_timestamp`, `end_timestamp`, `stream_id`); kernel dispatches nest
//! their agent, queue, kernel id and sizes under `dispatch_info`, memory copies carry
//! `src_agent_id`, `dst_agent_id` and `bytes`. One reader fills whichever fields are present.
//! `Strings` names a record from its process's `strings` table.

use std::path::Path;

use serde_json::Value;

use super::links::Call;
use super::messages::{self, Messages};
use super::stream::Stream;
use crate::error::ParseErr;
use crate::json::{int_from_value, Cursor, JResult};

/// A process object's `strings`: each buffer record kind's name and operation names, and the
/// roctx messages.
///
/// rocprofiler-sdk's `generateJSON.cpp` writes `strings.buffer_records` (indexed by a
/// record's `kind`, then its `operation`) and `strings.marker_api` = the tool's
/// `marker_messages`, a correlation id → message map that cereal writes as
/// `[{"key": id, "value": message}]`. Its `tool.cpp` adds a message for `roctxMarkA`,
/// `roctxRangePushA` and `roctxRangeStartA` under the call's `correlation_id.internal`, and
/// the push's (start's) record carries that id with the pop's (stop's) time as its end;
/// `generateCSV.cpp` writes such a record's message as its `Function`. So a marker record
/// with a message is named by it, as in the CSV output.
#[derive(Debug, Default)]
pub(super) struct Strings {
    pub kinds: Vec<(String, Vec<String>)>,
    pub messages: Messages,
}

impl Strings {
    /// The `strings` table at the stream's read position (`messages` says how it is read);
    /// the messages' lookup, once large, in a file in `dir` (the staging directory).
    pub(super) fn read(s: &mut Stream, dir: &Path) -> Result<Strings, ParseErr> {
        let (kinds, messages) = messages::read_strings(s, dir)?;
        let list = kinds.as_ref().and_then(Value::as_array);
        let text = |v: &Value| v.as_str().unwrap_or("").to_string();
        let kinds = list
            .into_iter()
            .flatten()
            .map(|k| {
                let ops = k.get("operations").and_then(Value::as_array);
                let name = k.get("kind").map_or(String::new(), text);
                (name, ops.into_iter().flatten().map(text).collect())
            })
            .collect();
        Ok(Strings { kinds, messages })
    }

    /// A record's kind (the API domain) and operation names ("" when unknown).
    pub(super) fn names(&self, r: &Rec) -> (&str, &str) {
        let k = r
            .kind
            .and_then(|k| self.kinds.get(usize::try_from(k).ok()?));
        let op = r.op.and_then(|o| k?.1.get(usize::try_from(o).ok()?));
        (
            k.map_or("", |k| k.0.as_str()),
            op.map_or("", String::as_str),
        )
    }

    /// An API record's domain and name: a marker's message, else its operation.
    pub(super) fn api_names(&self, r: &Rec) -> (&str, &str) {
        let (domain, op) = self.names(r);
        let message = r
            .corr
            .filter(|_| super::is_marker(domain))
            .and_then(|c| self.messages.get(c));
        (domain, message.unwrap_or(op))
    }

    /// Whether any message names a step to `marker`.
    pub(super) fn names_steps(&self, marker: &crate::step_span::StepMarker) -> bool {
        self.messages.name_a_step(marker)
    }
}

impl Rec {
    /// What `ApiLinks` takes of an API record named `domain`/`name`: `None` without times.
    pub(super) fn call<'a>(&self, domain: &'a str, name: &'a str) -> Option<Call<'a>> {
        Some(Call {
            domain,
            name,
            tid: self.tid,
            start: self.start?,
            end: self.end?,
            correlation: self.corr,
        })
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Rec {
    pub kind: Option<i64>,
    pub op: Option<i64>,
    pub tid: Option<i64>,
    pub corr: Option<i64>,
    pub ext: Option<i64>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub stream: Option<i64>,
    pub agent: Option<i64>,
    pub queue: Option<i64>,
    pub kernel_id: Option<i64>,
    pub workgroup: [Option<i64>; 3],
    pub grid: [Option<i64>; 3],
    pub src_agent: Option<i64>,
    pub dst_agent: Option<i64>,
    pub bytes: Option<i64>,
}

/// A number at the cursor; plain non-negative integers (nearly every value of a rocprof
/// record) are read in one pass, anything else through the generic path.
fn int(c: &mut Cursor<'_>) -> JResult<Option<i64>> {
    c.ws();
    let (b, start) = (c.b, c.i);
    let mut j = start;
    let mut v: i64 = 0;
    while let Some(&d) = b.get(j) {
        if !d.is_ascii_digit() {
            break;
        }
        match v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
        {
            Some(n) => v = n,
            None => break,
        }
        j += 1;
    }
    if j > start
        && matches!(
            b.get(j),
            Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
        )
    {
        c.i = j;
        return Ok(Some(v));
    }
    c.skip_value().map(int_from_value)
}

/// `{"handle": N}` (or a bare number).
fn handle(c: &mut Cursor<'_>) -> JResult<Option<i64>> {
    if c.peek()? != b'{' {
        return int(c);
    }
    let mut out = None;
    fields(c, |c, k| {
        if k == b"handle" {
            out = int(c)?;
        } else {
            c.skip_value()?;
        }
        Ok(())
    })?;
    Ok(out)
}

/// `{"x": .., "y": .., "z": ..}`.
fn xyz(c: &mut Cursor<'_>) -> JResult<[Option<i64>; 3]> {
    let mut out = [None; 3];
    if c.peek()? != b'{' {
        c.skip_value()?;
        return Ok(out);
    }
    fields(c, |c, k| {
        match k {
            b"x" => out[0] = int(c)?,
            b"y" => out[1] = int(c)?,
            b"z" => out[2] = int(c)?,
            _ => {
                c.skip_value()?;
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` on each key of the object at the cursor, with the cursor on its value.
fn fields<'a>(
    c: &mut Cursor<'a>,
    mut f: impl FnMut(&mut Cursor<'a>, &[u8]) -> JResult<()>,
) -> JResult<()> {
    c.expect(b'{', "expected an object")?;
    let mut first = true;
    while let Some(k) = c.next_key_raw(first)? {
        first = false;
        f(c, k)?;
    }
    Ok(())
}

/// A cursor over rocprofv3's exact minified bytes of a kernel dispatch record.
struct Literal<'a> {
    b: &'a [u8],
    i: usize,
}

impl Literal<'_> {
    /// `lit` then a non-negative integer. Generic over the literal's length, so that each
    /// comparison is a few inline loads: with the literals in one array of slices, every
    /// one of the 23 per record was a `memcmp` call, which cost more than the comparing.
    #[inline(always)]
    fn int<const N: usize>(&mut self, lit: &[u8; N]) -> Option<i64> {
        self.lit(lit)?;
        let (start, mut v) = (self.i, 0i64);
        while let Some(d) = self.b.get(self.i).filter(|d| d.is_ascii_digit()) {
            v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
            self.i += 1;
        }
        (self.i > start).then_some(v)
    }

    #[inline(always)]
    fn lit<const N: usize>(&mut self, lit: &[u8; N]) -> Option<()> {
        let s = self.b.get(self.i..self.i + N)?;
        self.i += N;
        (s == lit).then_some(())
    }
}

/// A kernel dispatch in exactly the layout rocprofv3 writes (minified, keys in this order,
/// 22 integers between fixed byte strings) starting at `i`, and the position after it;
/// `None` for anything else (including a record cut by the end of the buffer). Matching
/// the bytes literally reads a record several times faster than walking its keys; any
/// other layout takes the general path.
fn dispatch_fast(b: &[u8], i: usize) -> Option<(Rec, usize)> {
    let mut l = Literal { b, i };
    l.int(b"{\"size\":")?;
    let kind = l.int(b",\"kind\":")?;
    let op = l.int(b",\"operation\":")?;
    let tid = l.int(b",\"thread_id\":")?;
    let corr = l.int(b",\"correlation_id\":{\"internal\":")?;
    let ext = l.int(b",\"external\":")?;
    let start = l.int(b"},\"start_timestamp\":")?;
    let end = l.int(b",\"end_timestamp\":")?;
    l.int(b",\"dispatch_info\":{\"size\":")?;
    let agent = l.int(b",\"agent_id\":{\"handle\":")?;
    let queue = l.int(b"},\"queue_id\":{\"handle\":")?;
    let kernel_id = l.int(b"},\"kernel_id\":")?;
    l.int(b",\"dispatch_id\":")?;
    l.int(b",\"private_segment_size\":")?;
    l.int(b",\"group_segment_size\":")?;
    let wg = [
        l.int(b",\"workgroup_size\":{\"x\":")?,
        l.int(b",\"y\":")?,
        l.int(b",\"z\":")?,
    ];
    let grid = [
        l.int(b"},\"grid_size\":{\"x\":")?,
        l.int(b",\"y\":")?,
        l.int(b",\"z\":")?,
    ];
    let stream = l.int(b"}},\"stream_id\":{\"handle\":")?;
    l.lit(b"}}")?;
    let r = Rec {
        kind: Some(kind),
        op: Some(op),
        tid: Some(tid),
        corr: Some(corr),
        ext: Some(ext),
        start: Some(start),
        end: Some(end),
        agent: Some(agent),
        queue: Some(queue),
        kernel_id: Some(kernel_id),
        workgroup: wg.map(Some),
        grid: grid.map(Some),
        stream: Some(stream),
        ..Rec::default()
    };
    Some((r, l.i))
}

/// Reads the record object at the cursor.
pub(super) fn parse(c: &mut Cursor<'_>) -> JResult<Rec> {
    c.ws();
    if let Some((r, end)) = dispatch_fast(c.b, c.i) {
        c.i = end;
        return Ok(r);
    }
    let mut r = Rec::default();
    fields(c, |c, k| {
        match k {
            b"kind" => r.kind = int(c)?,
            b"operation" => r.op = int(c)?,
            b"thread_id" => r.tid = int(c)?,
            b"start_timestamp" => r.start = int(c)?,
            b"end_timestamp" => r.end = int(c)?,
            b"stream_id" => r.stream = handle(c)?,
            b"correlation_id" => correlation(c, &mut r)?,
            b"dispatch_info" => dispatch_info(c, &mut r)?,
            b"src_agent_id" => r.src_agent = handle(c)?,
            b"dst_agent_id" => r.dst_agent = handle(c)?,
            b"bytes" => r.bytes = int(c)?,
            _ => {
                c.skip_value()?;
            }
        }
        Ok(())
    })?;
    Ok(r)
}

fn correlation(c: &mut Cursor<'_>, r: &mut Rec) -> JResult<()> {
    if c.peek()? != b'{' {
        r.corr = int(c)?;
        return Ok(());
    }
    fields(c, |c, k| {
        match k {
            b"internal" => r.corr = int(c)?,
            b"external" => r.ext = handle(c)?,
            _ => {
                c.skip_value()?;
            }
        }
        Ok(())
    })
}

fn dispatch_info(c: &mut Cursor<'_>, r: &mut Rec) -> JResult<()> {
    fields(c, |c, k| {
        match k {
            b"agent_id" => r.agent = handle(c)?,
            b"queue_id" => r.queue = handle(c)?,
            b"kernel_id" => r.kernel_id = int(c)?,
            b"workgroup_size" => r.workgroup = xyz(c)?,
            b"grid_size" => r.grid = xyz(c)?,
            _ => {
                c.skip_value()?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_real_dispatch_record() {
        // The first kernel_dispatch record of the MI350X 908 results file.
        let s = br#"{"size":184,"kind":11,"operation":2,"thread_id":908,"correlation_id":{"internal":1,"external":0},"start_timestamp":63857982592000,"end_timestamp":63857982594840,"dispatch_info":{"size":72,"agent_id":{"handle":37946},"queue_id":{"handle":16},"kernel_id":8,"dispatch_id":1,"private_segment_size":0,"group_segment_size":0,"workgroup_size":{"x":512,"y":1,"z":1},"grid_size":{"x":512,"y":1,"z":1}},"stream_id":{"handle":0}},"#;
        let mut c = Cursor::new(s);
        let r = parse(&mut c).unwrap();
        assert_eq!((r.kind, r.op, r.tid), (Some(11), Some(2), Some(908)));
        assert_eq!((r.corr, r.ext), (Some(1), Some(0)));
        assert_eq!(
            (r.start, r.end),
            (Some(63857982592000), Some(63857982594840))
        );
        assert_eq!(
            (r.agent, r.queue, r.kernel_id),
            (Some(37946), Some(16), Some(8))
        );
        assert_eq!(r.workgroup, [Some(512), Some(1), Some(1)]);
        assert_eq!(r.grid, [Some(512), Some(1), Some(1)]);
        assert_eq!(r.stream, Some(0));
        assert_eq!(&s[c.i..], b",");
    }

    #[test]
    fn the_literal_layout_and_the_general_reader_agree() {
        let s = br#"{"size":184,"kind":11,"operation":2,"thread_id":908,"correlation_id":{"internal":1,"external":0},"start_timestamp":63857982592000,"end_timestamp":63857982594840,"dispatch_info":{"size":72,"agent_id":{"handle":37946},"queue_id":{"handle":16},"kernel_id":8,"dispatch_id":1,"private_segment_size":0,"group_segment_size":0,"workgroup_size":{"x":512,"y":1,"z":1},"grid_size":{"x":256,"y":2,"z":3}},"stream_id":{"handle":5}}"#;
        let (fast, end) = dispatch_fast(s, 0).unwrap();
        assert_eq!(end, s.len());
        // The same record with a blank after its first brace takes the general path.
        let mut spaced = b"{ ".to_vec();
        spaced.extend_from_slice(&s[1..]);
        assert!(dispatch_fast(&spaced, 0).is_none());
        let slow = parse(&mut Cursor::new(&spaced)).unwrap();
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
        assert_eq!(fast.grid, [Some(256), Some(2), Some(3)]);
        assert_eq!(fast.stream, Some(5));
        // Cut anywhere: no fast match, and the general reader asks for more input.
        for cut in [1, 100, s.len() - 1] {
            assert!(dispatch_fast(&s[..cut], 0).is_none());
            let e = parse(&mut Cursor::new(&s[..cut])).unwrap_err();
            assert_eq!(e, crate::json::JsonError::Incomplete);
        }
    }

    #[test]
    fn numbers_of_every_shape() {
        let read = |t: &str| int(&mut Cursor::new(t.as_bytes()));
        assert_eq!(read("42,"), Ok(Some(42)));
        assert_eq!(read(" 7}"), Ok(Some(7)));
        assert_eq!(read("-3,"), Ok(Some(-3)));
        assert_eq!(read("\"12\","), Ok(Some(12)));
        assert_eq!(read("1.5,"), Ok(None));
        assert_eq!(read("99999999999999999999,"), Ok(None));
        assert_eq!(read("123"), Err(crate::json::JsonError::Incomplete));
    }
}
