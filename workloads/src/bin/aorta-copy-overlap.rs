//! `aorta-copy-overlap`: the SDMA prototype. GEMMs on a low-priority compute stream and async
//! host↔device copies (pinned host memory) on a high-priority copy stream, measured serial and
//! overlapped in one run; prints both iteration times and the saving, and writes a Chrome
//! trace and the Python aorta JSONL of one mode.
//!
//! ```sh
//! aorta-copy-overlap --copy-bytes 67108864 --direction both --out out
//! ```

// Built with no backend at all, only the error path remains.
#![cfg_attr(not(any(feature = "cuda", feature = "rocm")), allow(dead_code))]

use anyhow::Result;
use aorta_workloads::config::{CopyConfig, Direction};
use aorta_workloads::launch::{self, GemmArgs, PlaceArgs, Runtime};
use aorta_workloads::{copy_overlap, output, Backend};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "aorta-copy-overlap",
    version,
    about = "GEMMs on a compute stream overlapped with async host<->device copies on a \
             high-priority copy stream; measures serial and overlapped in one run"
)]
struct Args {
    #[command(flatten)]
    gemm: GemmArgs,
    /// Bytes of one copy.
    #[arg(long, default_value_t = 64 << 20)]
    copy_bytes: usize,
    /// Copy direction (both: each copy slot is one host->device then one device->host copy).
    #[arg(long, value_enum, default_value_t = Direction::H2d)]
    direction: Direction,
    /// Copy slots per iteration.
    #[arg(long, default_value_t = 1)]
    copies_per_iter: usize,
    /// GEMMs per iteration.
    #[arg(long, default_value_t = 8)]
    gemms_per_iter: usize,
    /// Timed iterations (per mode).
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Untimed iterations before each mode.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Write the serial mode's trace and JSONL (copies wait for the GEMMs) instead of the
    /// overlapped mode's; both modes are measured and printed either way.
    #[arg(long)]
    serial: bool,
    /// Output directory (rank{r}.trace.json, rank_{r:02}_metrics.jsonl).
    #[arg(long, default_value = "copy-overlap-out")]
    out: PathBuf,
    #[command(flatten)]
    place: PlaceArgs,
}

fn main() -> ExitCode {
    launch::exit("aorta-copy-overlap", real_main())
}

fn real_main() -> Result<()> {
    let args = Args::parse();
    let (rank, world_size) = launch::rank_and_world()?;
    let cfg = CopyConfig {
        gemm: args.gemm.shape(),
        copy_bytes: args.copy_bytes,
        direction: args.direction,
        copies_per_iter: args.copies_per_iter,
        gemms_per_iter: args.gemms_per_iter,
        iters: args.iters,
        warmup: args.warmup,
        write_serial: args.serial,
        rank,
        world_size,
    };
    cfg.validate()?;
    match launch::choose(args.place.backend, |rt| launch::probe(rt, false))? {
        Runtime::Cuda => run_cuda(&cfg, &args),
        Runtime::Rocm => run_rocm(&cfg, &args),
    }
}

fn device(cfg: &CopyConfig, args: &Args, count: usize) -> Result<usize> {
    let local = launch::env_usize("LOCAL_RANK")?;
    Ok(launch::pick_device(
        args.place.device,
        local,
        cfg.rank,
        count,
    )?)
}

#[cfg(feature = "cuda")]
fn run_cuda(cfg: &CopyConfig, args: &Args) -> Result<()> {
    use aorta_workloads::cuda::{self, CudaBackend};
    let device = device(cfg, args, cuda::device_count()?)?;
    let mut b = CudaBackend::new(&cfg.gemm, device)?.with_copies(cfg.copy_bytes)?;
    drive(&mut b, cfg, args, Runtime::Cuda)
}

#[cfg(feature = "rocm")]
fn run_rocm(cfg: &CopyConfig, args: &Args) -> Result<()> {
    use aorta_workloads::rocm::{self, RocmBackend};
    let device = device(cfg, args, rocm::device_count()?)?;
    let mut b = RocmBackend::new(&cfg.gemm, device)?.with_copies(cfg.copy_bytes)?;
    drive(&mut b, cfg, args, Runtime::Rocm)
}

#[cfg(not(feature = "cuda"))]
fn run_cuda(_: &CopyConfig, _: &Args) -> Result<()> {
    anyhow::bail!("built without the `cuda` feature");
}

#[cfg(not(feature = "rocm"))]
fn run_rocm(_: &CopyConfig, _: &Args) -> Result<()> {
    anyhow::bail!("built without the `rocm` feature");
}

/// The measurement on any backend: both modes, one mode's outputs, the summary line.
fn drive<B: Backend>(b: &mut B, cfg: &CopyConfig, args: &Args, runtime: Runtime) -> Result<()> {
    let c = copy_overlap::measure(b, cfg)?;
    let mode = c.written(cfg);
    let info = output::RunInfo {
        device: b.device(),
        device_name: b.device_name(),
        base_time_ns: mode.measured.base_time_ns,
        runtime,
    };
    let (trace, jsonl) =
        output::write_outputs(&args.out, cfg, &info, &mode.measured.iters, &mode.lines)?;
    println!(
        "rank {}/{} GPU {} ({}): {} -> {} mode: {}, {}",
        cfg.rank,
        cfg.world_size,
        info.device,
        info.device_name,
        copy_overlap::report(cfg, &c),
        if mode.serial { "serial" } else { "overlapped" },
        trace.display(),
        jsonl.display(),
    );
    let name = if mode.serial { "serial" } else { "overlapped" };
    println!("{}", output::summary_json(cfg, &trace, &mode.summary, name));
    Ok(())
}
