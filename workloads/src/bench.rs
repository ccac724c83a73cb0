//! The overlap benchmark loop, written once against [`Backend`].
//!
//! Per iteration: an iteration-start event on the compute stream, which the comm stream
//! waits for; `gemms_per_iter` GEMMs on the compute stream and `collectives_per_iter`
//! collectives on the comm stream, each between two timing events; with `serial` the comm
//! stream also waits for the last GEMM (so overlap ≈ 0); then the compute stream waits for the
//! comm stream and records the iteration-end event.

use crate::backend::{Backend, Stream};
use crate::config::BenchConfig;
use crate::error::Result;

/// What an operation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Gemm,
    Collective,
}

/// One timed operation, ms relative to the run's base event (the first measured iteration's
/// start).
#[derive(Clone, Debug, PartialEq)]
pub struct OpTiming {
    pub kind: OpKind,
    pub stream: Stream,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// One measured iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct IterTiming {
    /// 0-based among measured iterations.
    pub step: usize,
    pub start_ms: f64,
    pub end_ms: f64,
    pub ops: Vec<OpTiming>,
}

struct PendingOp<E> {
    kind: OpKind,
    stream: Stream,
    start: E,
    end: E,
}

struct PendingIter<E> {
    start: E,
    end: E,
    ops: Vec<PendingOp<E>>,
}

/// Run `warmup` iterations, synchronize, then `iters` timed ones; returns their timings and
/// the host wall clock (epoch ns) just before the timed ones were enqueued.
pub fn run<B: Backend>(b: &mut B, cfg: &BenchConfig) -> Result<(Vec<IterTiming>, u64)> {
    for _ in 0..cfg.warmup {
        iteration(b, cfg)?;
    }
    b.synchronize()?;
    let base_time_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut pending = Vec::with_capacity(cfg.iters);
    for _ in 0..cfg.iters {
        pending.push(iteration(b, cfg)?);
    }
    b.synchronize()?;
    let base = &pending[0].start;
    let mut out = Vec::with_capacity(pending.len());
    for (step, it) in pending.iter().enumerate() {
        let mut ops = Vec::with_capacity(it.ops.len());
        for op in &it.ops {
            ops.push(OpTiming {
                kind: op.kind,
                stream: op.stream,
                start_ms: b.elapsed_ms(base, &op.start)?,
                end_ms: b.elapsed_ms(base, &op.end)?,
            });
        }
        out.push(IterTiming {
            step,
            start_ms: b.elapsed_ms(base, &it.start)?,
            end_ms: b.elapsed_ms(base, &it.end)?,
            ops,
        });
    }
    Ok((out, base_time_ns))
}

/// Enqueues `op` on `stream` between two timing events.
fn timed<B: Backend>(
    b: &mut B,
    stream: Stream,
    kind: OpKind,
    op: impl FnOnce(&mut B) -> Result<()>,
) -> Result<PendingOp<B::Event>> {
    let start = b.record(stream)?;
    op(b)?;
    let end = b.record(stream)?;
    Ok(PendingOp {
        kind,
        stream,
        start,
        end,
    })
}

fn iteration<B: Backend>(b: &mut B, cfg: &BenchConfig) -> Result<PendingIter<B::Event>> {
    let start = b.record(Stream::Compute)?;
    b.wait(Stream::Comm, &start)?;
    let mut ops = Vec::with_capacity(cfg.gemms_per_iter + cfg.collectives_per_iter);
    for _ in 0..cfg.gemms_per_iter {
        ops.push(timed(b, Stream::Compute, OpKind::Gemm, |b| {
            b.gemm(Stream::Compute)
        })?);
    }
    if cfg.serial {
        let done = b.record(Stream::Compute)?;
        b.wait(Stream::Comm, &done)?;
    }
    for _ in 0..cfg.collectives_per_iter {
        ops.push(timed(b, Stream::Comm, OpKind::Collective, |b| {
            b.collective(Stream::Comm)
        })?);
    }
    let comm_done = b.record(Stream::Comm)?;
    b.wait(Stream::Compute, &comm_done)?;
    let end = b.record(Stream::Compute)?;
    Ok(PendingIter { start, end, ops })
}

/// A simulated GPU: each stream is a clock; work advances it, waits take the max.
#[cfg(test)]
pub(crate) struct SimBackend {
    pub clock: [f64; 2],
    pub gemm_ms: f64,
    pub coll_ms: f64,
}

#[cfg(test)]
impl SimBackend {
    fn idx(s: Stream) -> usize {
        match s {
            Stream::Compute => 0,
            Stream::Comm => 1,
        }
    }
}

#[cfg(test)]
impl Backend for SimBackend {
    type Event = f64;
    fn device_count(&self) -> usize {
        1
    }
    fn device(&self) -> usize {
        0
    }
    fn device_name(&self) -> String {
        "sim".into()
    }
    fn gemm(&mut self, s: Stream) -> Result<()> {
        self.clock[Self::idx(s)] += self.gemm_ms;
        Ok(())
    }
    fn collective(&mut self, s: Stream) -> Result<()> {
        self.clock[Self::idx(s)] += self.coll_ms;
        Ok(())
    }
    fn record(&mut self, s: Stream) -> Result<f64> {
        Ok(self.clock[Self::idx(s)])
    }
    fn wait(&mut self, s: Stream, ev: &f64) -> Result<()> {
        let c = &mut self.clock[Self::idx(s)];
        *c = c.max(*ev);
        Ok(())
    }
    fn elapsed_ms(&self, a: &f64, b: &f64) -> Result<f64> {
        Ok(b - a)
    }
    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_config;

    fn sim() -> SimBackend {
        SimBackend {
            clock: [100.0, 100.0],
            gemm_ms: 1.0,
            coll_ms: 1.5,
        }
    }

    #[test]
    fn overlapped_schedule() {
        let cfg = test_config(); // 2 GEMMs, 1 collective, 1 warm-up, 3 iters
        let (its, _) = run(&mut sim(), &cfg).unwrap();
        assert_eq!(its.len(), 3);
        assert_eq!(its[0].start_ms, 0.0);
        // GEMMs 0-1, 1-2; collective 0-1.5 alongside; iteration 2 ms.
        let it = &its[1];
        assert_eq!((it.start_ms, it.end_ms), (2.0, 4.0));
        let coll = it
            .ops
            .iter()
            .find(|o| o.kind == OpKind::Collective)
            .unwrap();
        assert_eq!((coll.start_ms, coll.end_ms), (2.0, 3.5));
        assert_eq!(it.ops.len(), 3);
    }

    #[test]
    fn serial_schedule() {
        let mut cfg = test_config();
        cfg.serial = true;
        let (its, _) = run(&mut sim(), &cfg).unwrap();
        let it = &its[0];
        let coll = it
            .ops
            .iter()
            .find(|o| o.kind == OpKind::Collective)
            .unwrap();
        assert_eq!((coll.start_ms, coll.end_ms), (2.0, 3.5));
        assert_eq!(it.end_ms, 3.5);
    }
}
