//! Benchmark parameters and their validation (no GPU needed).

use crate::error::{bail_config, Result};
use clap::ValueEnum;

/// Element type of the GEMM operands and the collective buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Dtype {
    Bf16,
    Fp16,
    Fp32,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::Bf16 | Dtype::Fp16 => 2,
            Dtype::Fp32 => 4,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp32 => "fp32",
        }
    }
}

/// The collective on the comm stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
}

impl Collective {
    /// Trace name, shaped like NCCL's device kernels so the rule table classifies it as comm.
    pub fn kernel_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "ncclDevKernel_AllReduce",
            Collective::AllGather => "ncclDevKernel_AllGather",
            Collective::ReduceScatter => "ncclDevKernel_ReduceScatter",
        }
    }
    /// `args["Collective name"]`, as PyTorch's profiler writes it.
    pub fn collective_name(self) -> &'static str {
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
    pub fn stream_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "allreduce",
            Collective::ReduceScatter => "reducescatter",
            Collective::AllGather => "aux",
        }
    }
}

/// Everything a run needs, validated.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Collective message size: the full (unsharded) tensor in bytes.
    pub bytes: usize,
    pub dtype: Dtype,
    pub collective: Collective,
    pub iters: usize,
    pub warmup: usize,
    pub gemms_per_iter: usize,
    pub collectives_per_iter: usize,
    pub serial: bool,
    pub rank: usize,
    pub world_size: usize,
}

impl BenchConfig {
    /// Reject what would fail (or mean nothing) on the GPU, with one clear message.
    pub fn validate(&self) -> Result<()> {
        if self.m == 0 || self.n == 0 || self.k == 0 {
            bail_config!("--m, --n and --k must be > 0");
        }
        if [self.m, self.n, self.k]
            .iter()
            .any(|&d| d > i32::MAX as usize)
        {
            bail_config!("--m, --n and --k must fit in a 32-bit int (cuBLAS)");
        }
        if self.iters == 0 {
            bail_config!("--iters must be > 0");
        }
        if self.gemms_per_iter == 0 && self.collectives_per_iter == 0 {
            bail_config!("nothing to run: --gemms-per-iter and --collectives-per-iter are both 0");
        }
        if self.world_size == 0 {
            bail_config!("WORLD_SIZE must be > 0");
        }
        if self.rank >= self.world_size {
            bail_config!(
                "RANK {} must be < WORLD_SIZE {}",
                self.rank,
                self.world_size
            );
        }
        let unit = match self.collective {
            Collective::AllReduce => self.dtype.size(),
            _ => self.dtype.size() * self.world_size,
        };
        if self.bytes == 0 || self.bytes % unit != 0 {
            bail_config!(
                "--bytes {} must be a positive multiple of {unit} ({} elements{})",
                self.bytes,
                self.dtype.name(),
                if unit == self.dtype.size() {
                    ""
                } else {
                    " times WORLD_SIZE"
                }
            );
        }
        Ok(())
    }

    /// Trace name of the GEMM, e.g. `gemm_bf16_8192x8192x8192` (classified as `gemm`).
    pub fn gemm_name(&self) -> String {
        format!(
            "gemm_{}_{}x{}x{}",
            self.dtype.name(),
            self.m,
            self.n,
            self.k
        )
    }

    /// Bytes the GEMM reads and writes (A, B and C once each).
    pub fn gemm_bytes(&self) -> usize {
        (self.m * self.k + self.k * self.n + self.m * self.n) * self.dtype.size()
    }

    /// Floating-point operations of one GEMM.
    pub fn gemm_flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// (send, receive) buffer sizes in bytes for one collective on this rank.
    pub fn collective_buffers(&self) -> (usize, usize) {
        let shard = self.bytes / self.world_size;
        match self.collective {
            Collective::AllReduce => (self.bytes, self.bytes),
            Collective::AllGather => (shard, self.bytes),
            Collective::ReduceScatter => (self.bytes, shard),
        }
    }
}

#[cfg(test)]
pub(crate) fn test_config() -> BenchConfig {
    BenchConfig {
        m: 256,
        n: 256,
        k: 256,
        bytes: 1 << 20,
        dtype: Dtype::Bf16,
        collective: Collective::AllReduce,
        iters: 3,
        warmup: 1,
        gemms_per_iter: 2,
        collectives_per_iter: 1,
        serial: false,
        rank: 0,
        world_size: 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_default() {
        test_config().validate().unwrap();
    }

    #[test]
    fn rejects_bad_values() {
        let bad = |f: &dyn Fn(&mut BenchConfig)| {
            let mut c = test_config();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.m = 0).contains("--m"));
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
    }

    #[test]
    fn buffers_and_names() {
        let mut c = test_config();
        assert_eq!(c.gemm_name(), "gemm_bf16_256x256x256");
        assert_eq!(c.collective_buffers(), (1 << 20, 1 << 20));
        c.collective = Collective::AllGather;
        assert_eq!(c.collective_buffers(), (1 << 19, 1 << 20));
        c.collective = Collective::ReduceScatter;
        assert_eq!(c.collective_buffers(), (1 << 20, 1 << 19));
        assert_eq!(c.gemm_bytes(), 3 * 256 * 256 * 2);
    }
}
