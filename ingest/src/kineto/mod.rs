//! PyTorch profiler (Kineto) traces: `.json`, `.json.gz`, `.json.zst`, and the `.tmp` a
//! crashed writer leaves (which fails with its offset).
//!
//! Two streaming passes over the file (see `links` for why): pass 1 collects metadata, step
//! spans and launches; pass 2 parses windows of events in parallel into rows.

pub mod event;
pub mod extract;
pub mod links;
pub mod stream;

use rayon::prelude::*;

use crate::error::{ParseErr, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::sink::{Parts, Sink};
use crate::source::Chunks;
use extract::Ctx;
use links::{sub_windows, LinkPass, Meta};
use stream::{Driver, Visitor};

fn drive(job: &FileJob, v: &mut impl Visitor) -> Result<stream::Shape> {
    let chunks = Chunks::open(&job.path, job.progress.clone())
        .map_err(|e| crate::error::IngestError::io(&job.path, e))?;
    Driver::new(chunks).run(v).map_err(|e| e.at(&job.path))
}

struct RowPass<'a> {
    ctx: Ctx<'a>,
    sink: Sink,
    err: Option<crate::error::IngestError>,
}

impl Visitor for RowPass<'_> {
    fn meta(&mut self, _key: &str, _raw: &[u8]) -> Result<(), ParseErr> {
        Ok(())
    }

    fn window(&mut self, w: &[u8], base: u64, splits: &[usize]) -> Result<(), ParseErr> {
        let ctx = &self.ctx;
        let batches: Vec<_> = sub_windows(w, splits)
            .into_par_iter()
            .map(|(s, off)| extract::extract(s, base + off as u64, ctx))
            .collect();
        for b in batches {
            if let Err(e) = self.sink.add(b?) {
                // Writing failed (disk full…): stop parsing and report it as is.
                self.err = Some(e);
                return Err(ParseErr::new(base, "stopped: writing the output failed"));
            }
        }
        Ok(())
    }
}

pub fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let mut pass1 = LinkPass::default();
    let shape = drive(job, &mut pass1)?;
    let links = pass1.finish();
    let mut info = RunInfo::new(job, "kineto");
    let rank = info.resolve_rank(job, links.meta.rank);
    let parts = Parts {
        root: job.staging.clone(),
        run: job.label.clone(),
        rank,
        tag: job.tag.clone(),
    };
    let mut pass2 = RowPass {
        ctx: Ctx {
            links: &links,
            classifier: &job.classifier,
            base_ns: links.meta.base_time_ns.unwrap_or(0),
        },
        sink: Sink::new(&parts),
        err: None,
    };
    let res = drive(job, &mut pass2);
    if let Some(e) = pass2.err.take() {
        return Err(e);
    }
    res?;
    let out = pass2.sink.finish()?;
    describe(&mut info, &links.meta, &out, shape.events);
    let base = links.meta.base_time_ns.unwrap_or(0);
    info.finish(job, &parts, out, (links.cpu_spans(), base))
}

/// Fills the `runs` fields that come from the trace's metadata.
fn describe(info: &mut RunInfo, meta: &Meta, out: &crate::sink::SinkOut, events: u64) {
    let counts = &out.counts;
    info.event_count = events;
    info.base_time_ns = meta.base_time_ns;
    info.world_size = meta.world_size;
    let device = counts
        .devices
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(d, _)| *d);
    info.device_index = device;
    let props = match device {
        Some(d) => meta.devices.iter().find(|p| p.0 == d),
        None => None,
    }
    .or(if meta.devices.len() == 1 {
        meta.devices.first()
    } else {
        None
    });
    info.device_name = props.map(|p| p.1.clone()).filter(|n| !n.is_empty());
    let warp = props.and_then(|p| p.2);
    info.platform = platform(
        &meta.versions,
        info.device_name.as_deref(),
        warp,
        out.vendor_hint,
    );
    if !meta.versions.is_empty() {
        let v: Vec<String> = meta
            .versions
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        info.runtime_version = Some(v.join(" "));
    }
}

/// `cuda`, `rocm` or `unknown`: version keys first, then the device name, then warp size,
/// then the runtime API names seen in the trace.
pub fn platform(
    versions: &[(String, String)],
    device: Option<&str>,
    warp: Option<i64>,
    hint: Option<&'static str>,
) -> &'static str {
    let has = |p: &str| versions.iter().any(|(k, _)| k.starts_with(p));
    if has("roctracer") || has("rocprofiler") || has("hip_") {
        return "rocm";
    }
    if has("cupti") || has("cuda_") {
        return "cuda";
    }
    let d = device.unwrap_or("").to_ascii_lowercase();
    const CUDA: &[&str] = &[
        "nvidia", "tesla", "geforce", "quadro", "a100", "h100", "h200", "v100", "b200",
    ];
    const ROCM: &[&str] = &["amd", "instinct", "radeon", "gfx", "mi2", "mi3"];
    if CUDA.iter().any(|n| d.contains(n)) {
        return "cuda";
    }
    if ROCM.iter().any(|n| d.contains(n)) {
        return "rocm";
    }
    match warp {
        Some(64) => "rocm",
        Some(32) => "cuda",
        _ => hint.unwrap_or("unknown"),
    }
}
