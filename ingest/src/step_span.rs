//! Step spans: the `ProfilerStep#N` ranges that give every row its step.
//!
//! Kineto and Chrome traces carry them as CPU annotations, nsys as NVTX ranges; each reader
//! collects its own, and the `steps` table (`file`) is built from them the same way for all.

/// A `ProfilerStep#N` span, in trace-relative ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: i64,
    pub end: i64,
    pub step: i64,
}
