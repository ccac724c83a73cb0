//! The benchmark loop, written once against [`Backend`] and shared by both workloads.
//!
//! Per iteration: an iteration-start event on the compute stream, which the side stream
//! waits for; `gemms` GEMMs on the compute stream and the `side` ops (collectives or copies)
//! on the side stream, each between two timing events; with `serial` the side stream also
//! waits for the last GEMM (so overlap is 0 by construction); on a straggler rank the side
//! stream stalls `delay_us` before its ops; then the compute stream waits for the side stream
//! and records the iteration-end event, and the host waits for that event before it enqueues
//! the next iteration. That last wait makes each iteration a step as a training loop's is:
//! the host's span of an iteration (written as its `ProfilerStep#N`) holds the launch calls of
//! exactly that iteration's GPU work, and lasts as long as the GPU took for it, instead of the
//! microseconds it takes to enqueue it.
//!
//! Every launch call's host time is kept too, so the trace has a runtime launch event per
//! kernel and copy, as Kineto's do. Host and GPU times share one axis: after the warm-up the
//! host records an origin event on the idle GPU and waits for it; the host instant the wait
//! returns is at or after the event's GPU time, so host times measured from that instant are
//! never later than they really were on the GPU's axis (at most the wait's wake-up latency,
//! microseconds, earlier), and a launch never appears after the work it launched.

use crate::backend::{Backend, Op, Stream};
use crate::error::Result;

/// What one iteration enqueues, and how many iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// GEMMs per iteration on [`Stream::Compute`].
    pub(crate) gemms: usize,
    /// The ops of one iteration on `side_stream`, in order.
    pub(crate) side: Vec<Op>,
    pub(crate) side_stream: Stream,
    /// The side stream starts only after the iteration's last GEMM.
    pub(crate) serial: bool,
    /// µs the side stream stalls before each iteration's side ops (the straggler rank's
    /// `--slow-ms`); 0 on every other rank.
    pub(crate) delay_us: u64,
    pub(crate) iters: usize,
    pub(crate) warmup: usize,
}

/// One timed operation, ms relative to the run's base event (the first measured iteration's
/// start).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpTiming {
    pub kind: Op,
    pub stream: Stream,
    pub start_ms: f64,
    pub end_ms: f64,
    /// The host call that enqueued it (cuBLAS, NCCL, the copy), on the same axis.
    pub launch: HostSpan,
}

/// A span of host time, ms on the GPU events' axis (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct HostSpan {
    pub start_ms: f64,
    pub end_ms: f64,
}

/// One measured iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct IterTiming {
    /// 0-based among measured iterations.
    pub(crate) step: usize,
    pub(crate) start_ms: f64,
    pub(crate) end_ms: f64,
    pub(crate) ops: Vec<OpTiming>,
    /// The host's span of the iteration: from before its first enqueue to the return of the
    /// wait for its end event (the trace's `ProfilerStep#N`).
    pub(crate) host: HostSpan,
}

/// The measured iterations of one run and the host wall clock (epoch ns) just before they
/// were enqueued.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The `iters` measured iterations, in order, their times relative to the first one's start.
    pub iters: Vec<IterTiming>,
    /// Host wall clock (ns since the Unix epoch) read after the warm-up, just before the measured
    /// iterations were enqueued: what the trace's `baseTimeNanoseconds` anchors to.
    pub base_time_ns: u64,
}

struct PendingOp<E> {
    kind: Op,
    stream: Stream,
    start: E,
    end: E,
    /// Host ms ([`Backend::host_ms`]) around the enqueue call.
    launch: (f64, f64),
}

struct PendingIter<E> {
    start: E,
    end: E,
    ops: Vec<PendingOp<E>>,
    /// Host ms before the first enqueue and after the wait for `end`.
    host: (f64, f64),
}

/// Run `warmup` iterations, synchronize, then `iters` timed ones, and read their events.
pub fn run<B: Backend>(b: &mut B, s: &Schedule) -> Result<Measured> {
    for _ in 0..s.warmup {
        iteration(b, s)?;
    }
    b.synchronize()?;
    // The origin of the host axis (module docs): an event on the idle GPU, waited for.
    let origin = b.record(Stream::Compute)?;
    b.synchronize()?;
    let host_origin_ms = b.host_ms();
    let base_time_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut pending = Vec::with_capacity(s.iters);
    for _ in 0..s.iters {
        pending.push(iteration(b, s)?);
    }
    b.synchronize()?;
    let iters = read_times(b, &origin, host_origin_ms, &pending)?;
    Ok(Measured {
        iters,
        base_time_ns,
    })
}

/// Event times relative to the first iteration's start event; host times on the same axis:
/// host ms since the origin wait returned, less the GPU time from the origin event to the
/// first start event.
fn read_times<B: Backend>(
    b: &B,
    origin: &B::Event,
    host_origin_ms: f64,
    pending: &[PendingIter<B::Event>],
) -> Result<Vec<IterTiming>> {
    let Some(first) = pending.first() else {
        return Ok(Vec::new());
    };
    let base = &first.start;
    let shift = host_origin_ms + b.elapsed_ms(origin, base)?;
    let host = |(start, end): (f64, f64)| HostSpan {
        start_ms: start - shift,
        end_ms: end - shift,
    };
    let mut out = Vec::with_capacity(pending.len());
    for (step, it) in pending.iter().enumerate() {
        let mut ops = Vec::with_capacity(it.ops.len());
        for op in &it.ops {
            ops.push(OpTiming {
                kind: op.kind,
                stream: op.stream,
                start_ms: b.elapsed_ms(base, &op.start)?,
                end_ms: b.elapsed_ms(base, &op.end)?,
                launch: host(op.launch),
            });
        }
        out.push(IterTiming {
            step,
            start_ms: b.elapsed_ms(base, &it.start)?,
            end_ms: b.elapsed_ms(base, &it.end)?,
            ops,
            host: host(it.host),
        });
    }
    Ok(out)
}

/// Enqueues `kind` on `stream` between two timing events, timing the enqueue call on the host.
fn timed<B: Backend>(b: &mut B, stream: Stream, kind: Op) -> Result<PendingOp<B::Event>> {
    let start = b.record(stream)?;
    let t0 = b.host_ms();
    b.enqueue(stream, kind)?;
    let t1 = b.host_ms();
    let end = b.record(stream)?;
    Ok(PendingOp {
        kind,
        stream,
        start,
        end,
        launch: (t0, t1),
    })
}

fn iteration<B: Backend>(b: &mut B, s: &Schedule) -> Result<PendingIter<B::Event>> {
    let side = s.side_stream;
    let host_start = b.host_ms();
    let start = b.record(Stream::Compute)?;
    b.wait(side, &start)?;
    let mut ops = Vec::with_capacity(s.gemms + s.side.len());
    for _ in 0..s.gemms {
        ops.push(timed(b, Stream::Compute, Op::Gemm)?);
    }
    if s.serial {
        let done = b.record(Stream::Compute)?;
        b.wait(side, &done)?;
    }
    if s.delay_us > 0 {
        ops.push(timed(b, side, Op::Delay(s.delay_us))?);
    }
    for &op in &s.side {
        ops.push(timed(b, side, op)?);
    }
    let side_done = b.record(side)?;
    b.wait(Stream::Compute, &side_done)?;
    let end = b.record(Stream::Compute)?;
    b.host_wait(&end)?;
    Ok(PendingIter {
        start,
        end,
        ops,
        host: (host_start, b.host_ms()),
    })
}

/// A simulated GPU: each stream is a clock; work advances it, waits take the max.
#[cfg(test)]
pub(crate) struct SimBackend {
    pub clock: [f64; 3],
    pub gemm_ms: f64,
    pub coll_ms: f64,
    pub h2d_ms: f64,
    pub d2h_ms: f64,
    /// The host's clock: it advances only by waiting for an event (enqueues take no time).
    pub host: f64,
}

#[cfg(test)]
impl SimBackend {
    pub(crate) fn new(gemm_ms: f64, coll_ms: f64) -> Self {
        SimBackend {
            clock: [0.0; 3],
            gemm_ms,
            coll_ms,
            h2d_ms: 0.0,
            d2h_ms: 0.0,
            host: 0.0,
        }
    }

    fn idx(s: Stream) -> usize {
        match s {
            Stream::Compute => 0,
            Stream::Comm => 1,
            Stream::Copy => 2,
        }
    }

    /// The clock of stream `s`, which cannot run work before the host enqueued it.
    fn at(&mut self, s: Stream) -> &mut f64 {
        let host = self.host;
        let c = &mut self.clock[Self::idx(s)];
        *c = c.max(host);
        c
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
        *self.at(s) += self.gemm_ms;
        Ok(())
    }
    fn collective(&mut self, s: Stream) -> Result<()> {
        *self.at(s) += self.coll_ms;
        Ok(())
    }
    fn delay(&mut self, s: Stream, us: u64) -> Result<()> {
        *self.at(s) += us as f64 / 1e3;
        Ok(())
    }
    fn copy(&mut self, s: Stream, dir: crate::backend::CopyDir) -> Result<()> {
        let ms = match dir {
            crate::backend::CopyDir::HtoD => self.h2d_ms,
            crate::backend::CopyDir::DtoH => self.d2h_ms,
        };
        *self.at(s) += ms;
        Ok(())
    }
    fn record(&mut self, s: Stream) -> Result<f64> {
        Ok(*self.at(s))
    }
    fn host_wait(&mut self, ev: &f64) -> Result<()> {
        self.host = self.host.max(*ev);
        Ok(())
    }
    fn host_ms(&self) -> f64 {
        self.host
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
        self.host = self.clock.iter().fold(self.host, |h, &c| h.max(c));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::CopyDir;
    use crate::config::{test_config, test_copy_config, Direction};

    fn sim() -> SimBackend {
        let mut b = SimBackend::new(1.0, 1.5);
        b.clock = [100.0; 3];
        b
    }

    #[test]
    fn overlapped_schedule() {
        let cfg = test_config(); // 2 GEMMs, 1 collective, 1 warm-up, 3 iters
        let its = run(&mut sim(), &cfg.schedule()).unwrap().iters;
        assert_eq!(its.len(), 3);
        assert_eq!(its[0].start_ms, 0.0);
        // GEMMs 0-1, 1-2; collective 0-1.5 alongside; iteration 2 ms.
        let it = &its[1];
        assert_eq!((it.start_ms, it.end_ms), (2.0, 4.0));
        let coll = it.ops.iter().find(|o| o.kind == Op::Collective).unwrap();
        assert_eq!((coll.start_ms, coll.end_ms), (2.0, 3.5));
        assert_eq!(coll.stream, Stream::Comm);
        assert_eq!(it.ops.len(), 3);
    }

    #[test]
    fn serial_schedule() {
        let mut cfg = test_config();
        cfg.serial = true;
        let its = run(&mut sim(), &cfg.schedule()).unwrap().iters;
        let it = &its[0];
        let coll = it.ops.iter().find(|o| o.kind == Op::Collective).unwrap();
        assert_eq!((coll.start_ms, coll.end_ms), (2.0, 3.5));
        assert_eq!(it.end_ms, 3.5);
    }

    #[test]
    fn the_straggler_stall_delays_the_collectives_not_the_gemms() {
        let mut cfg = test_config();
        cfg.rank = 1;
        cfg.slow = Some(crate::config::Slow { rank: 1, ms: 2.5 });
        let its = run(&mut sim(), &cfg.schedule()).unwrap().iters;
        // GEMMs 0-1, 1-2; the comm stream stalls 0-2.5, then the collective 2.5-4.0; the
        // iteration ends with the comm stream, at 4.0 (was 2.0 without the stall).
        let it = &its[1];
        assert_eq!((it.start_ms, it.end_ms), (4.0, 8.0));
        let at = |k: Op| {
            let o = it.ops.iter().find(|o| o.kind == k).unwrap();
            (o.stream, o.start_ms - it.start_ms, o.end_ms - it.start_ms)
        };
        assert_eq!(at(Op::Delay(2500)), (Stream::Comm, 0.0, 2.5));
        assert_eq!(at(Op::Collective), (Stream::Comm, 2.5, 4.0));
        assert_eq!(at(Op::Gemm), (Stream::Compute, 0.0, 1.0));
    }

    #[test]
    fn copies_both_directions_on_the_copy_stream() {
        let mut cfg = test_copy_config(); // 3 GEMMs, 1 warm-up, 2 iters
        cfg.direction = Direction::Both;
        let mut b = sim();
        (b.h2d_ms, b.d2h_ms) = (0.5, 0.25);
        let its = run(&mut b, &cfg.schedule(false)).unwrap().iters;
        // GEMMs 0-3; H2D 0-0.5 then D2H 0.5-0.75 on the copy stream; iteration 3 ms.
        let it = &its[1];
        assert_eq!((it.start_ms, it.end_ms), (3.0, 6.0));
        let copies: Vec<_> = it
            .ops
            .iter()
            .filter(|o| o.stream == Stream::Copy)
            .map(|o| (o.kind, o.start_ms, o.end_ms))
            .collect();
        assert_eq!(
            copies,
            vec![
                (Op::Copy(CopyDir::HtoD), 3.0, 3.5),
                (Op::Copy(CopyDir::DtoH), 3.5, 3.75)
            ]
        );
        // Serial: copies after the GEMMs, iteration 3.75 ms.
        let its = run(&mut b, &cfg.schedule(true)).unwrap().iters;
        assert_eq!(its[1].end_ms - its[1].start_ms, 3.75);
        assert_eq!(its[1].ops[3].start_ms - its[1].start_ms, 3.0);
    }
}
