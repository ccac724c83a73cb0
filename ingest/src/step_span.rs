//! Step spans: the ranges that give every row its step.
//!
//! Kineto and Chrome traces carry them as CPU annotations, nsys as NVTX ranges; each reader
//! collects its own, and the `steps` table (`file`) is built from them the same way for all.
//! Which ranges are steps is a [`StepMarker`]: PyTorch's `ProfilerStep#N` by default, or, for
//! captures without the PyTorch profiler (nsys, hand-annotated Kineto traces), a regex on the
//! range names (`aorta ingest --step-marker 'train_step (\d+)'`).

/// Why a trace with more step ranges than aorta keeps is refused (`MAX_STEP_SPANS`, the
/// Kineto reader's limit, which every reader shares): each range costs a span, a GPU window
/// and a name until the file is written, so a trace of millions of empty steps would grow
/// without a bound. Readers add where the range that passes the limit is.
pub(crate) fn too_many_steps() -> String {
    format!(
        "more than {MAX_STEP_SPANS} step ranges (ProfilerStep#N, or --step-marker's) in one trace: aorta's limit (a real profile holds thousands)"
    )
}

/// The most step annotations (`ProfilerStep#N`, or `--step-marker`'s) one trace may hold,
/// in every reader. Each costs ~150 B until the file is written (its span, its per-step
/// aggregates, its name and `steps` row), so without a limit a trace of 10⁷ empty steps
/// (1 GB of JSON) took 4 GB. Real profiles hold thousands. (Here, not in a reader: every
/// reader imports this module, and it imports none of them.)
pub(crate) const MAX_STEP_SPANS: usize = 1_000_000;

/// A step span, in trace-relative ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: i64,
    pub end: i64,
    pub step: i64,
}

/// Which annotation ranges mark steps.
#[derive(Debug, Clone, Default)]
pub enum StepMarker {
    /// `ProfilerStep#N`, as the PyTorch profiler writes it.
    #[default]
    ProfilerStep,
    /// Names the regex matches; its first capture group is the step number.
    Regex(regex::Regex),
}

impl StepMarker {
    /// A `--step-marker` pattern: a regex with a capture group for the step number.
    pub fn parse(pattern: &str) -> Result<StepMarker, String> {
        let re = regex::Regex::new(pattern).map_err(|e| format!("--step-marker: {e}"))?;
        if re.captures_len() < 2 {
            return Err(format!(
                "--step-marker `{pattern}`: needs a capture group for the step number, e.g. 'train_step (\\d+)'"
            ));
        }
        Ok(StepMarker::Regex(re))
    }

    /// The step a range named `name` (raw JSON string bytes, quoted, or plain text) marks.
    pub(crate) fn step(&self, name: &[u8]) -> Option<i64> {
        match self {
            StepMarker::ProfilerStep => crate::trace_event::profiler_step(name),
            StepMarker::Regex(re) => {
                let text = std::str::from_utf8(crate::trace_event::unquote(name)).ok()?;
                re.captures(text)?.get(1)?.as_str().parse().ok()
            }
        }
    }

    /// What the manifest records, so a changed marker reads the inputs again ("" by default).
    pub(crate) fn fingerprint(&self) -> String {
        match self {
            StepMarker::ProfilerStep => String::new(),
            StepMarker::Regex(re) => re.as_str().to_string(),
        }
    }

    /// Whether this is the default (nsys can then let SQLite pick the ranges by prefix).
    pub(crate) fn is_profiler_step(&self) -> bool {
        matches!(self, StepMarker::ProfilerStep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_give_the_step_of_a_name() {
        let d = StepMarker::default();
        assert_eq!(d.step(b"\"ProfilerStep#7\""), Some(7));
        assert_eq!(d.step(b"\"train_step 7\""), None);
        let m = StepMarker::parse(r"^train_step (\d+)$").unwrap();
        assert_eq!(m.step(b"\"train_step 7\""), Some(7));
        assert_eq!(m.step(b"train_step 12"), Some(12));
        assert_eq!(m.step(b"\"ProfilerStep#7\""), None);
        assert_eq!(m.fingerprint(), r"^train_step (\d+)$");
        assert!(StepMarker::parse("train_step")
            .unwrap_err()
            .contains("capture group"));
        assert!(StepMarker::parse("(")
            .unwrap_err()
            .starts_with("--step-marker:"));
    }
}
