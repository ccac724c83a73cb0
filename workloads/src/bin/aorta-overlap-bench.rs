//! `aorta-overlap-bench`: GEMMs on a compute stream, NCCL collectives on a comm stream, one
//! process per GPU; writes a Chrome trace and the Python aorta JSONL per rank.
//!
//! ```sh
//! RANK=0 WORLD_SIZE=2 aorta-overlap-bench --rendezvous /tmp/id --out out &
//! RANK=1 WORLD_SIZE=2 aorta-overlap-bench --rendezvous /tmp/id --out out
//! # rank 1 arrives 5 ms late at every iteration's collectives (same flags on every rank):
//! RANK=0 WORLD_SIZE=2 aorta-overlap-bench --rendezvous /tmp/id --slow-rank 1 --slow-ms 5 &
//! RANK=1 WORLD_SIZE=2 aorta-overlap-bench --rendezvous /tmp/id --slow-rank 1 --slow-ms 5
//! ```

// Built with no backend at all, only the error path remains.
#![cfg_attr(not(any(feature = "cuda", feature = "rocm")), allow(dead_code))]

use anyhow::{bail, Result};
use aorta_workloads::config::{BenchConfig, Collective, Slow};
use aorta_workloads::launch::{self, GemmArgs, PlaceArgs, Runtime};
use aorta_workloads::{bench, output, rendezvous, Backend};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "aorta-overlap-bench",
    version,
    about = "GEMMs on a compute stream overlapped with NCCL collectives on a comm stream; \
             one process per GPU (env RANK, WORLD_SIZE, optional LOCAL_RANK)"
)]
struct Args {
    #[command(flatten)]
    gemm: GemmArgs,
    /// Collective message size in bytes (the full tensor; all-gather output, reduce-scatter input).
    #[arg(long, default_value_t = 64 << 20)]
    bytes: usize,
    #[arg(long, value_enum, default_value_t = Collective::AllReduce)]
    collective: Collective,
    /// Timed iterations.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Untimed iterations first.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// GEMMs per iteration.
    #[arg(long, default_value_t = 4)]
    gemms_per_iter: usize,
    /// Collectives per iteration.
    #[arg(long, default_value_t = 2)]
    collectives_per_iter: usize,
    /// Start the collectives only after the iteration's GEMMs (overlap ≈ 0).
    #[arg(long)]
    serial: bool,
    /// Make this rank the straggler: before each iteration's collectives its comm stream
    /// stalls --slow-ms, and the other ranks' collectives wait for it. Give every rank the
    /// same flags (each writes them into its trace).
    #[arg(long, requires = "slow_ms")]
    slow_rank: Option<usize>,
    /// How long the straggler stalls, ms (with --slow-rank).
    #[arg(long, requires = "slow_rank")]
    slow_ms: Option<f64>,
    /// Output directory (rank{r}.trace.json, rank_{r:02}_metrics.jsonl).
    #[arg(long, default_value = "overlap-bench-out")]
    out: PathBuf,
    /// File through which rank 0 hands the NCCL unique id to the others (must not exist yet;
    /// rank 0 removes it once all ranks joined). Required when WORLD_SIZE > 1.
    #[arg(long)]
    rendezvous: Option<PathBuf>,
    /// Seconds a rank waits for the rendezvous file.
    #[arg(long, default_value_t = 120)]
    timeout_s: u64,
    #[command(flatten)]
    place: PlaceArgs,
}

fn main() -> ExitCode {
    launch::exit("aorta-overlap-bench", real_main())
}

fn real_main() -> Result<()> {
    let args = Args::parse();
    let (rank, world_size) = launch::rank_and_world()?;
    let cfg = BenchConfig {
        gemm: args.gemm.shape(),
        bytes: args.bytes,
        collective: args.collective,
        iters: args.iters,
        warmup: args.warmup,
        gemms_per_iter: args.gemms_per_iter,
        collectives_per_iter: args.collectives_per_iter,
        serial: args.serial,
        rank,
        world_size,
        slow: args
            .slow_rank
            .zip(args.slow_ms)
            .map(|(rank, ms)| Slow { rank, ms }),
    };
    cfg.validate()?;
    if cfg.world_size > 1 && args.rendezvous.is_none() {
        bail!("WORLD_SIZE > 1 needs --rendezvous FILE (a path all ranks can see)");
    }
    match launch::choose(args.place.backend, |rt| launch::probe(rt, true))? {
        Runtime::Cuda => run_cuda(&cfg, &args),
        Runtime::Rocm => run_rocm(&cfg, &args),
    }
}

/// The NCCL/RCCL id: through the rendezvous file when there is one, else made here.
fn unique_id(
    cfg: &BenchConfig,
    args: &Args,
    make: fn() -> aorta_workloads::Result<[u8; rendezvous::ID_BYTES]>,
) -> Result<[u8; rendezvous::ID_BYTES]> {
    let timeout = std::time::Duration::from_secs(args.timeout_s);
    Ok(match &args.rendezvous {
        Some(p) => rendezvous::exchange(p, cfg.rank, timeout, make)?,
        None => make()?,
    })
}

/// Rank 0 removes the rendezvous file once the communicator exists (ncclCommInitRank is
/// collective, so every rank has joined and the id is spent).
fn id_spent(cfg: &BenchConfig, args: &Args) {
    if let (0, Some(p)) = (cfg.rank, &args.rendezvous) {
        let _ = std::fs::remove_file(p);
    }
}

fn device(cfg: &BenchConfig, args: &Args, count: usize) -> Result<usize> {
    let local = launch::env_usize("LOCAL_RANK")?;
    Ok(launch::pick_device(
        args.place.device,
        local,
        cfg.rank,
        count,
    )?)
}

#[cfg(feature = "cuda")]
fn run_cuda(cfg: &BenchConfig, args: &Args) -> Result<()> {
    use aorta_workloads::cuda::{self, CudaBackend};
    let device = device(cfg, args, cuda::device_count()?)?;
    let id = unique_id(cfg, args, cuda::unique_id)?;
    let mut b = CudaBackend::new(&cfg.gemm, device)?.with_collective(cfg, id)?;
    id_spent(cfg, args);
    drive(&mut b, cfg, args, Runtime::Cuda)
}

#[cfg(feature = "rocm")]
fn run_rocm(cfg: &BenchConfig, args: &Args) -> Result<()> {
    use aorta_workloads::rocm::{self, RocmBackend};
    let device = device(cfg, args, rocm::device_count()?)?;
    let id = unique_id(cfg, args, rocm::unique_id)?;
    let mut b = RocmBackend::new(&cfg.gemm, device)?.with_collective(cfg, id)?;
    id_spent(cfg, args);
    drive(&mut b, cfg, args, Runtime::Rocm)
}

#[cfg(not(feature = "cuda"))]
fn run_cuda(_: &BenchConfig, _: &Args) -> Result<()> {
    bail!("built without the `cuda` feature");
}

#[cfg(not(feature = "rocm"))]
fn run_rocm(_: &BenchConfig, _: &Args) -> Result<()> {
    bail!("built without the `rocm` feature");
}

/// The benchmark on any backend: run, write both outputs, print the summary line.
fn drive<B: Backend>(b: &mut B, cfg: &BenchConfig, args: &Args, runtime: Runtime) -> Result<()> {
    let m = bench::run(b, &cfg.schedule())?;
    let info = output::RunInfo {
        device: b.device(),
        device_name: b.device_name(),
        base_time_ns: m.base_time_ns,
        runtime,
    };
    let lines = output::metrics_lines(cfg, &m.iters);
    let (trace, jsonl) = output::write_outputs(&args.out, cfg, &info, &m.iters, &lines)?;
    let s = output::summary(cfg, &lines, &m.iters);
    println!(
        "rank {}/{} GPU {} ({}): {} {} B {} x{} | {} x{} {}: iter {:.3} ms, compute {:.3} ms, \
         comm {:.3} ms, overlap {:.3} ms ({:.1}% of comm), GEMM {:.1} TFLOP/s, collective \
         algbw {:.1} GB/s -> {}, {}",
        cfg.rank,
        cfg.world_size,
        info.device,
        info.device_name,
        cfg.collective.op(),
        cfg.bytes,
        cfg.gemm.dtype.name(),
        cfg.collectives_per_iter,
        cfg.gemm.name(),
        cfg.gemms_per_iter,
        if cfg.serial { "serial" } else { "overlapped" },
        s.iter_ms,
        s.compute_ms,
        s.side_ms,
        s.overlap_ms,
        100.0 * s.overlap_ratio,
        s.gemm_tflops,
        s.side_gbs,
        trace.display(),
        jsonl.display(),
    );
    let mode = if cfg.serial { "serial" } else { "overlapped" };
    println!("{}", output::summary_json(cfg, &trace, &s, mode));
    Ok(())
}
