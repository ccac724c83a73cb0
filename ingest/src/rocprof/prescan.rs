//! The JSON reader's pre-passes for steps: two quick reads of the file, made only when a
//! roctx message names a step.
//!
//! Why two: rocprofiler-sdk's `generateJSON.cpp` writes a process's `buffer_records` in the
//! order `kernel_dispatch`, `hip_api`, `hsa_api`, `marker_api`, `rccl_api`, `memory_copy`, …,
//! so in one streaming read a dispatch comes before the call that launched it and before
//! the marker ranges that give that call its step. The first pass reads only the
//! `marker_api` records (the step spans); the second the other API records, turning each
//! launch into its step at once and adding it to a compact correlation → step lookup
//! (`kineto::launches`, its blocks in a file in the staging directory once large), so
//! neither keeps anything per dispatch or per call in memory. (Runs of correlation ids in a
//! `BTreeMap` cost ~130 bytes a run, and a capture whose every step holds one launch has a
//! run per launch: 127 MB at the million steps a trace may hold.) Every other array is skipped record by
//! record without being decoded. A file these passes cannot read is left to the main pass,
//! which reports its error where it always did; an I/O error of their own files in the
//! staging directory (the lookups') fails the file here, as the main pass would not meet it.

use std::io;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::links::{self, ApiLinks};
use super::records::{self, Rec, Strings};
use super::stream::Stream;
use crate::error::{IngestError, ParseErr};
use crate::kineto::launches::{Keep, LaunchSteps};
use crate::step_span::{Span, StepMarker, MAX_STEP_SPANS};
use crate::window::Window;

/// Pairs added to a lookup at once.
const CHUNK: usize = 4096;

/// The step spans of one process object and the step of each of its launches.
#[derive(Debug, Default)]
pub(super) struct Steps {
    pub spans: Vec<Span>,
    pub launch_steps: LaunchSteps,
}

/// The steps of every process object of the JSON file at `path`, by index; `None` when the
/// file cannot be read to its end. An error at the marker record that passes
/// `MAX_STEP_SPANS` step spans in the file (all process objects together), or when the
/// launches' lookup cannot be written to its file in `dir` (the staging directory), or
/// the messages' lookup read back from its own.
pub(super) fn scan(
    path: &Path,
    marker: &StepMarker,
    dir: &Path,
) -> Result<Option<Vec<Steps>>, IngestError> {
    let mut links: Vec<ApiLinks> = Vec::new();
    let (mut count, mut too_many, mut unread) = (0, None, None);
    let walked = walk(
        path,
        dir,
        &mut unread,
        |bucket| bucket == "marker_api",
        |i, t, r, off| {
            if links.len() <= i {
                links.resize_with(i + 1, || ApiLinks::new(marker.clone()));
            }
            let (domain, name) = t.api_names(r);
            let Some(c) = r.call(domain, name).filter(|_| super::is_marker(domain)) else {
                return Ok(());
            };
            let limit = || links::too_many_steps(c.name, c.start);
            let noted = links[i].note_span(&c);
            count += usize::from(noted.as_ref().is_ok_and(|&n| n));
            match noted {
                Ok(_) if count <= MAX_STEP_SPANS => Ok(()),
                Ok(_) => Err(ParseErr::new(off, limit())),
                Err(msg) => Err(ParseErr::new(off, msg)),
            }
            .inspect_err(|e| too_many = Some(e.clone()))
        },
    );
    if let Some(e) = too_many {
        return Err(e.at(path));
    }
    if let Some(e) = unread {
        return Err(IngestError::io(dir, e));
    }
    if walked.is_err() {
        return Ok(None);
    }
    let new_lookup = || LaunchSteps::in_dir(Some(dir.to_path_buf()));
    let mut lookups: Vec<LaunchSteps> = links.iter().map(|_| new_lookup()).collect();
    if links.iter().any(|l| !l.spans().is_empty()) {
        // Each process's (correlation, step) pairs, a chunk at a time into its lookup.
        let mut chunks: Vec<Vec<(i64, Option<i64>)>> = vec![Vec::new(); links.len()];
        let mut io_error = None;
        let mut add = |lookup: &mut LaunchSteps, chunk: &mut Vec<_>| {
            let res = lookup.add_pairs(std::mem::take(chunk), Keep::Last);
            res.map_err(|e| io_error.get_or_insert(e).to_string())
        };
        let walked = walk(
            path,
            dir,
            &mut unread,
            |bucket| bucket.ends_with("_api"),
            |i, t, r, off| {
                let Some(l) = links.get(i).filter(|l| !l.spans().is_empty()) else {
                    return Ok(());
                };
                // A launch as `ApiLinks::note` takes one: a timed call with a thread and a
                // correlation id, of any domain but RCCL's.
                let (domain, _) = t.names(r);
                if let (Some(_), Some(corr), Some(start), Some(_)) = (r.tid, r.corr, r.start, r.end)
                {
                    if !super::has_prefix(domain, "RCCL") {
                        chunks[i].push((corr, l.step_at(start)));
                        if chunks[i].len() == CHUNK {
                            add(&mut lookups[i], &mut chunks[i])
                                .map_err(|msg| ParseErr::new(off, msg))?;
                        }
                    }
                }
                Ok(())
            },
        );
        if walked.is_ok() {
            for (lookup, chunk) in lookups.iter_mut().zip(&mut chunks) {
                if add(lookup, chunk).is_err() {
                    break;
                }
                lookup.shrink();
            }
        }
        if let Some(e) = io_error.or(unread) {
            return Err(IngestError::io(dir, e));
        }
        if walked.is_err() {
            return Ok(None);
        }
    }
    let steps = links
        .into_iter()
        .zip(lookups)
        .map(|(l, launch_steps)| Steps {
            spans: l.into_spans(),
            launch_steps,
        });
    Ok(Some(steps.collect()))
}

/// Reads the process objects of `path`, calling `each` with the process index, its
/// `strings`, every record of the buffer arrays `wanted` names (read after `strings`) and
/// its byte offset; other records are skipped. An error of `each` stops the walk, as does an
/// I/O error of a process's messages' lookup (its file in `dir`), which is kept in `unread`
/// (it is the staging directory's error, not the file's).
fn walk(
    path: &Path,
    dir: &Path,
    unread: &mut Option<io::Error>,
    wanted: impl Fn(&str) -> bool,
    mut each: impl FnMut(usize, &Strings, &Rec, u64) -> Result<(), ParseErr>,
) -> Result<(), ParseErr> {
    let win = Window::open(path, Arc::new(AtomicU64::new(0)), None)
        .map_err(|e| ParseErr::new(0, e.to_string()))?;
    let mut s = Stream::new(win);
    let mut n = 0;
    s.object("the document", |s, key| match key {
        "rocprofiler-sdk-tool" => s
            .array(key, |s| {
                n += 1;
                process(s, n - 1, dir, unread, &wanted, &mut each)
            })
            .map(|_| ()),
        _ => s.skip(key).map(|_| ()),
    })
}

fn process(
    s: &mut Stream,
    i: usize,
    dir: &Path,
    unread: &mut Option<io::Error>,
    wanted: &impl Fn(&str) -> bool,
    each: &mut impl FnMut(usize, &Strings, &Rec, u64) -> Result<(), ParseErr>,
) -> Result<(), ParseErr> {
    let mut strings: Option<Strings> = None;
    s.object("a process object", |s, key| match key {
        "strings" => {
            strings = Some(Strings::read(s, dir)?);
            Ok(())
        }
        "buffer_records" => s.object(key, |s, bucket| match &strings {
            Some(t) if wanted(bucket) => s
                .array(bucket, |s| {
                    let off = s.offset();
                    let r = s.read("a record", records::parse)?;
                    each(i, t, &r, off)
                })
                .map(|_| ()),
            _ => skip_records(s, bucket),
        }),
        _ => s.skip(key).map(|_| ()),
    })?;
    // Names the lookup's file could not give were read as no message: the walk stops, and
    // `scan` fails the file with the error.
    match strings.and_then(|mut t| t.messages.take_error()) {
        Some(e) => {
            let msg = e.to_string();
            *unread = Some(e);
            Err(ParseErr::new(s.offset(), msg))
        }
        None => Ok(()),
    }
}

/// Skips an array of records one record at a time, without decoding them.
pub(super) fn skip_records(s: &mut Stream, what: &str) -> Result<(), ParseErr> {
    if s.read(what, |c| c.peek())? != b'[' {
        return s.skip(what).map(|_| ());
    }
    s.array(what, |s| s.read("a record", |c| c.skip_value().map(|_| ())))
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rocprof::messages::BREAK_LOOKUPS;

    /// One process whose roctx range `ProfilerStep#1` is named through the messages'
    /// lookup, among enough other messages that their first block is in its file.
    fn doc() -> String {
        let others: String = (2..5000)
            .map(|id| format!(r#",{{"key":{id},"value":"m"}}"#))
            .collect();
        format!(
            r#"{{"rocprofiler-sdk-tool":[{{"strings":{{"buffer_records":[
            {{"kind":"MARKER_CORE_RANGE_API","operations":["roctxThreadRangeA"]}}],
            "marker_api":[{{"key":1,"value":"ProfilerStep#1"}}{others}]}},
            "buffer_records":{{"marker_api":[{{"size":64,"kind":0,"operation":0,
            "correlation_id":{{"internal":1,"external":0}},"start_timestamp":10,
            "end_timestamp":20,"thread_id":5}}]}}}}]}}"#
        )
    }

    /// A messages' lookup that cannot be read back fails the scan as the staging
    /// directory's I/O error; before, the scan answered "not readable to its end" and the
    /// main pass, whose own lookup could be read, wrote the rows without their steps.
    #[test]
    fn an_unreadable_messages_lookup_fails_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p_results.json");
        std::fs::write(&path, doc()).unwrap();
        let marker = StepMarker::default();
        let steps = scan(&path, &marker, dir.path()).unwrap().unwrap();
        assert_eq!(
            steps[0].spans.len(),
            1,
            "the step is read when the lookup is"
        );
        BREAK_LOOKUPS.set(true);
        let res = scan(&path, &marker, dir.path());
        BREAK_LOOKUPS.set(false);
        match res {
            Err(IngestError::Io { path, .. }) => assert_eq!(path, dir.path().display().to_string()),
            other => panic!("{other:?}"),
        }
    }
}
