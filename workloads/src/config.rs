//! Workload parameters and their validation (no GPU needed).
//!
//! Checked here, before any GPU call, so that a bad flag is one clear line rather than an
//! error code from deep inside cuBLAS or NCCL.

use crate::backend::{CopyDir, Op, Stream};
use crate::bench::Schedule;
use crate::error::{bail_config, Result};
use clap::ValueEnum;

/// Element type of the GEMM operands and the collective buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Dtype {
    /// bfloat16 (2 bytes).
    Bf16,
    /// IEEE half precision (2 bytes).
    Fp16,
    /// IEEE single precision (4 bytes).
    Fp32,
}

impl Dtype {
    pub(crate) fn size(self) -> usize {
        match self {
            Dtype::Bf16 | Dtype::Fp16 => 2,
            Dtype::Fp32 => 4,
        }
    }
    /// The lower-case name the flags take and the console line prints (`bf16`, `fp16`, `fp32`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp32 => "fp32",
        }
    }
    /// The name PyTorch's profiler writes in a collective's `args.dtype`, so that `aorta
    /// compare` matches these collectives with a PyTorch run's.
    pub(crate) fn torch_name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "BFloat16",
            Dtype::Fp16 => "Half",
            Dtype::Fp32 => "Float",
        }
    }
}

/// The collective on the comm stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Collective {
    /// Every rank ends with the sum over ranks of the whole tensor.
    AllReduce,
    /// Every rank contributes one shard (`--bytes` / WORLD_SIZE) and receives the whole tensor.
    AllGather,
    /// Every rank contributes the whole tensor and receives the sum of one shard.
    ReduceScatter,
}

impl Collective {
    /// Trace name, shaped like NCCL's device kernels so the rule table classifies it as comm.
    pub(crate) fn kernel_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "ncclDevKernel_AllReduce",
            Collective::AllGather => "ncclDevKernel_AllGather",
            Collective::ReduceScatter => "ncclDevKernel_ReduceScatter",
        }
    }
    /// `args["Collective name"]`, as PyTorch's profiler writes it.
    pub(crate) fn collective_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "allreduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
        }
    }
    /// `op` arg and JSONL range tag.
    pub fn op(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
        }
    }
    /// The Python aorta stream name the collective is logged on.
    pub(crate) fn stream_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "allreduce",
            Collective::ReduceScatter => "reducescatter",
            Collective::AllGather => "aux",
        }
    }
}

/// The GEMM both workloads run: column-major `C = A·B`, `A` m×k, `B` k×n.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// Element type of A, B and C.
    pub dtype: Dtype,
}

impl GemmShape {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.m == 0 || self.n == 0 || self.k == 0 {
            bail_config!("--m, --n and --k must be > 0");
        }
        if [self.m, self.n, self.k]
            .iter()
            .any(|&d| d > i32::MAX as usize)
        {
            bail_config!("--m, --n and --k must fit in a 32-bit int (cuBLAS, hipBLAS)");
        }
        Ok(())
    }

    /// Trace name, e.g. `gemm_bf16_8192x8192x8192` (classified as `gemm`).
    pub fn name(&self) -> String {
        format!(
            "gemm_{}_{}x{}x{}",
            self.dtype.name(),
            self.m,
            self.n,
            self.k
        )
    }

    /// Bytes the GEMM reads and writes (A, B and C once each).
    pub(crate) fn bytes(&self) -> usize {
        (self.m * self.k + self.k * self.n + self.m * self.n) * self.dtype.size()
    }

    /// Floating-point operations of one GEMM.
    pub(crate) fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// Checks shared by both workloads: iteration count and the rank within the world.
fn validate_run(iters: usize, rank: usize, world_size: usize) -> Result<()> {
    if iters == 0 {
        bail_config!("--iters must be > 0");
    }
    if world_size == 0 {
        bail_config!("WORLD_SIZE must be > 0");
    }
    if rank >= world_size {
        bail_config!("RANK {rank} must be < WORLD_SIZE {world_size}");
    }
    Ok(())
}

/// `aorta-overlap-bench`: everything a run needs, validated.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The GEMM on the compute stream.
    pub gemm: GemmShape,
    /// Collective message size: the full (unsharded) tensor in bytes.
    pub bytes: usize,
    /// The collective on the comm stream.
    pub collective: Collective,
    /// Measured iterations (at least 1).
    pub iters: usize,
    /// Iterations run and synchronized before the measured ones, and not recorded.
    pub warmup: usize,
    /// GEMMs per iteration on the compute stream.
    pub gemms_per_iter: usize,
    /// Collectives per iteration on the comm stream.
    pub collectives_per_iter: usize,
    /// The comm stream starts only after the iteration's last GEMM: the no-overlap baseline.
    pub serial: bool,
    /// This process's rank (`RANK`), `< world_size`.
    pub rank: usize,
    /// Number of ranks in the collective (`WORLD_SIZE`).
    pub world_size: usize,
    /// One rank made the straggler (`--slow-rank`, `--slow-ms`), if any.
    pub slow: Option<Slow>,
}

/// The straggler a run injects: before each iteration's collectives, rank `rank`'s comm stream
/// stalls `ms` (a host function in stream order sleeps), so the other ranks' collectives wait
/// that long for it. Every rank is given the same flags and writes them into its trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slow {
    /// The rank that arrives late.
    pub rank: usize,
    /// How late, ms.
    pub ms: f64,
}

/// The longest stall `--slow-ms` takes: a minute. Much longer and the other ranks would
/// meet NCCL's and the launcher's timeouts instead of waiting.
const MAX_SLOW_MS: f64 = 60_000.0;

impl BenchConfig {
    /// Reject what would fail (or mean nothing) on the GPU, with one clear message.
    pub fn validate(&self) -> Result<()> {
        self.gemm.validate()?;
        validate_run(self.iters, self.rank, self.world_size)?;
        if self.gemms_per_iter == 0 && self.collectives_per_iter == 0 {
            bail_config!("nothing to run: --gemms-per-iter and --collectives-per-iter are both 0");
        }
        let el = self.gemm.dtype.size();
        let unit = match self.collective {
            Collective::AllReduce => el,
            _ => el * self.world_size,
        };
        if let Some(slow) = self.slow {
            if slow.rank >= self.world_size {
                bail_config!(
                    "--slow-rank {} must be < WORLD_SIZE {}",
                    slow.rank,
                    self.world_size
                );
            }
            if !(slow.ms > 0.0 && slow.ms <= MAX_SLOW_MS) {
                bail_config!("--slow-ms {} must be > 0 and <= {MAX_SLOW_MS}", slow.ms);
            }
            if self.collectives_per_iter == 0 {
                bail_config!("--slow-rank delays collectives: --collectives-per-iter is 0");
            }
        }
        if self.bytes == 0 || self.bytes % unit != 0 {
            let times = if unit == el { "" } else { " times WORLD_SIZE" };
            bail_config!(
                "--bytes {} must be a positive multiple of {unit} ({} elements{times})",
                self.bytes,
                self.gemm.dtype.name(),
            );
        }
        Ok(())
    }

    /// (send, receive) buffer sizes in bytes for one collective on this rank.
    pub(crate) fn collective_buffers(&self) -> (usize, usize) {
        let shard = self.bytes / self.world_size;
        match self.collective {
            Collective::AllReduce => (self.bytes, self.bytes),
            Collective::AllGather => (shard, self.bytes),
            Collective::ReduceScatter => (self.bytes, shard),
        }
    }

    /// The benchmark loop's schedule: collectives on the comm stream.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            gemms: self.gemms_per_iter,
            side: vec![Op::Collective; self.collectives_per_iter],
            side_stream: Stream::Comm,
            serial: self.serial,
            delay_us: match self.slow {
                Some(s) if s.rank == self.rank => (s.ms * 1e3).round() as u64,
                _ => 0,
            },
            iters: self.iters,
            warmup: self.warmup,
        }
    }
}

/// `--direction` of `aorta-copy-overlap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Direction {
    /// Host (pinned) → device.
    H2d,
    /// Device → host (pinned).
    D2h,
    /// Each copy slot is one host→device then one device→host copy.
    Both,
}

impl Direction {
    /// The copies of one copy slot, in order.
    pub(crate) fn copies(self) -> &'static [CopyDir] {
        match self {
            Direction::H2d => &[CopyDir::HtoD],
            Direction::D2h => &[CopyDir::DtoH],
            Direction::Both => &[CopyDir::HtoD, CopyDir::DtoH],
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Direction::H2d => "h2d",
            Direction::D2h => "d2h",
            Direction::Both => "both",
        }
    }
}

/// `aorta-copy-overlap`: GEMMs plus async host↔device copies, validated.
#[derive(Clone, Debug)]
pub struct CopyConfig {
    /// The GEMM on the compute stream.
    pub gemm: GemmShape,
    /// Bytes of one copy.
    pub copy_bytes: usize,
    /// Which way each copy slot copies.
    pub direction: Direction,
    /// Copy slots per iteration (each `direction.copies()`).
    pub copies_per_iter: usize,
    /// GEMMs per iteration on the compute stream.
    pub gemms_per_iter: usize,
    /// Measured iterations per mode (at least 1).
    pub iters: usize,
    /// Iterations run and synchronized before each mode's measured ones, and not recorded.
    pub warmup: usize,
    /// Which measured mode the trace and JSONL are written for (both are measured).
    pub write_serial: bool,
    /// This process's rank (`RANK`), `< world_size`; it names the output files.
    pub rank: usize,
    /// Number of ranks started together (`WORLD_SIZE`); the ranks copy independently.
    pub world_size: usize,
}

impl CopyConfig {
    /// Reject what would fail (or mean nothing) on the GPU, with one clear message.
    pub fn validate(&self) -> Result<()> {
        self.gemm.validate()?;
        validate_run(self.iters, self.rank, self.world_size)?;
        if self.gemms_per_iter == 0 || self.copies_per_iter == 0 {
            bail_config!(
                "nothing to overlap: --gemms-per-iter and --copies-per-iter must both be > 0"
            );
        }
        if self.copy_bytes == 0 {
            bail_config!("--copy-bytes must be > 0");
        }
        Ok(())
    }

    /// The benchmark loop's schedule for one mode: copies on the copy stream, waiting for the
    /// GEMMs when `serial`.
    pub(crate) fn schedule(&self, serial: bool) -> Schedule {
        let slot = self.direction.copies();
        let side = (0..self.copies_per_iter)
            .flat_map(|_| slot.iter().map(|&d| Op::Copy(d)))
            .collect();
        Schedule {
            gemms: self.gemms_per_iter,
            side,
            side_stream: Stream::Copy,
            serial,
            delay_us: 0,
            iters: self.iters,
            warmup: self.warmup,
        }
    }
}

#[cfg(test)]
pub(crate) fn test_config() -> BenchConfig {
    BenchConfig {
        gemm: GemmShape {
            m: 256,
            n: 256,
            k: 256,
            dtype: Dtype::Bf16,
        },
        bytes: 1 << 20,
        collective: Collective::AllReduce,
        iters: 3,
        warmup: 1,
        gemms_per_iter: 2,
        collectives_per_iter: 1,
        serial: false,
        rank: 0,
        world_size: 2,
        slow: None,
    }
}

#[cfg(test)]
pub(crate) fn test_copy_config() -> CopyConfig {
    CopyConfig {
        gemm: GemmShape {
            m: 128,
            n: 64,
            k: 32,
            dtype: Dtype::Fp16,
        },
        copy_bytes: 1 << 20,
        direction: Direction::H2d,
        copies_per_iter: 1,
        gemms_per_iter: 3,
        iters: 2,
        warmup: 1,
        write_serial: false,
        rank: 0,
        world_size: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_default() {
        test_config().validate().unwrap();
        test_copy_config().validate().unwrap();
    }

    #[test]
    fn rejects_bad_values() {
        let bad = |f: &dyn Fn(&mut BenchConfig)| {
            let mut c = test_config();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.gemm.m = 0).contains("--m"));
        assert!(bad(&|c| c.iters = 0).contains("--iters"));
        assert!(bad(&|c| c.rank = 2).contains("RANK"));
        assert!(bad(&|c| c.bytes = 3).contains("multiple of 2"));
        assert!(bad(&|c| {
            c.collective = Collective::AllGather;
            c.bytes = 6;
        })
        .contains("multiple of 4"));
        assert!(bad(&|c| {
            c.gemms_per_iter = 0;
            c.collectives_per_iter = 0;
        })
        .contains("nothing to run"));
        let slow = |rank, ms| Some(Slow { rank, ms });
        assert!(bad(&|c| c.slow = slow(2, 5.0)).contains("--slow-rank 2 must be < WORLD_SIZE 2"));
        assert!(bad(&|c| c.slow = slow(1, 0.0)).contains("--slow-ms 0 must be > 0"));
        assert!(bad(&|c| c.slow = slow(1, f64::NAN)).contains("--slow-ms NaN"));
        assert!(bad(&|c| c.slow = slow(1, 60_001.0)).contains("<= 60000"));
        assert!(bad(&|c| {
            c.slow = slow(1, 5.0);
            c.collectives_per_iter = 0;
        })
        .contains("--collectives-per-iter is 0"));
    }

    #[test]
    fn only_the_slow_rank_stalls() {
        let mut c = test_config();
        c.slow = Some(Slow { rank: 1, ms: 2.5 });
        c.validate().unwrap();
        assert_eq!(c.schedule().delay_us, 0, "rank 0 is not the straggler");
        c.rank = 1;
        assert_eq!(c.schedule().delay_us, 2500);
        c.slow = None;
        assert_eq!(c.schedule().delay_us, 0);
    }

    #[test]
    fn rejects_bad_copy_values() {
        let bad = |f: &dyn Fn(&mut CopyConfig)| {
            let mut c = test_copy_config();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert_eq!(bad(&|c| c.copy_bytes = 0), "--copy-bytes must be > 0");
        assert_eq!(bad(&|c| c.iters = 0), "--iters must be > 0");
        assert_eq!(bad(&|c| c.rank = 1), "RANK 1 must be < WORLD_SIZE 1");
        assert!(bad(&|c| c.copies_per_iter = 0).starts_with("nothing to overlap"));
        assert!(bad(&|c| c.gemms_per_iter = 0).starts_with("nothing to overlap"));
        assert!(bad(&|c| c.gemm.k = 1 << 31).contains("32-bit"));
    }

    #[test]
    fn buffers_and_names() {
        let mut c = test_config();
        assert_eq!(c.gemm.name(), "gemm_bf16_256x256x256");
        assert_eq!(c.collective_buffers(), (1 << 20, 1 << 20));
        c.collective = Collective::AllGather;
        assert_eq!(c.collective_buffers(), (1 << 19, 1 << 20));
        c.collective = Collective::ReduceScatter;
        assert_eq!(c.collective_buffers(), (1 << 20, 1 << 19));
        assert_eq!(c.gemm.bytes(), 3 * 256 * 256 * 2);
        let g = test_copy_config().gemm;
        // A 128x32, B 32x64, C 128x64, 2 bytes each.
        assert_eq!(g.bytes(), (4096 + 2048 + 8192) * 2);
        assert_eq!(g.flops(), 2.0 * 128.0 * 64.0 * 32.0);
    }

    #[test]
    fn copy_schedules() {
        let mut c = test_copy_config();
        c.copies_per_iter = 2;
        c.direction = Direction::Both;
        let s = c.schedule(true);
        let (h, d) = (Op::Copy(CopyDir::HtoD), Op::Copy(CopyDir::DtoH));
        assert_eq!(s.side, vec![h, d, h, d]);
        assert_eq!((s.gemms, s.side_stream, s.serial), (3, Stream::Copy, true));
        c.direction = Direction::D2h;
        assert_eq!(c.schedule(false).side, vec![d, d]);
        let b = test_config().schedule();
        assert_eq!(b.side, vec![Op::Collective]);
        assert_eq!(b.side_stream, Stream::Comm);
    }
}
