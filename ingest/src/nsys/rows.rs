//! Export tables to rows: kernels, copies and sets (one query, in start order, so each
//! stream's activities reach the sink in order) to `gpu_activities`; runtime calls and NVTX
//! ranges to `cpu_ops`. Every row goes to the sink of its process's rank.

use rusqlite::Connection;
use rustc_hash::FxHashMap;

use super::has_table;
use super::ranks::{pid_of, Group};
use super::steps::{Steps, NVTX_TYPES};
use super::Meta;
use crate::classify::{Category, Kind};
use crate::error::IngestError;
use crate::file::{FileJob, FileOutcome};
use crate::rows::{Batch, CpuCategory, CpuRow, GpuRow, StepSource};
use crate::sink::{Parts, Sink};

/// Rows gathered per rank before they go to its sink.
const BATCH_ROWS: usize = 1 << 16;

#[derive(Debug)]
pub(super) enum Error {
    Sql(rusqlite::Error),
    Ingest(IngestError),
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Sql(e)
    }
}

impl From<IngestError> for Error {
    fn from(e: IngestError) -> Self {
        Error::Ingest(e)
    }
}

/// One rank's output.
struct Out {
    group: Group,
    parts: Parts,
    sink: Sink,
    batch: Batch,
    events: u64,
}

pub(super) struct Router<'j> {
    job: &'j FileJob,
    outs: Vec<Out>,
    of_pid: FxHashMap<i64, usize>,
    base: i64,
    steps: Steps,
}

/// The name Kineto gives a CUDA copy of this `copyKind` (CUPTI's enum).
fn memcpy_name(kind: Option<i64>) -> &'static str {
    const NAMES: [&str; 14] = [
        "Memcpy",
        "Memcpy HtoD",
        "Memcpy DtoH",
        "Memcpy HtoA",
        "Memcpy AtoH",
        "Memcpy AtoA",
        "Memcpy AtoD",
        "Memcpy DtoA",
        "Memcpy DtoD",
        "Memcpy HtoH",
        "Memcpy PtoP",
        "Memcpy HtoD (unified)",
        "Memcpy DtoH (unified)",
        "Memcpy DtoD (unified)",
    ];
    kind.and_then(|k| NAMES.get(usize::try_from(k).ok()?))
        .unwrap_or(&NAMES[0])
}

/// The kernel/memcpy/memset query: `kind, start, end, deviceId, streamId, correlationId,
/// globalPid, name, grid xyz, block xyz, bytes, copyKind`, over the tables that exist.
fn gpu_query(conn: &Connection) -> Option<String> {
    let dims = "NULL, NULL, NULL, NULL, NULL, NULL";
    let common = "start, end, deviceId, streamId, correlationId, globalPid";
    let mut parts = Vec::new();
    if has_table(conn, "CUPTI_ACTIVITY_KIND_KERNEL") {
        parts.push(
            "SELECT 0, k.start, k.end, k.deviceId, k.streamId, k.correlationId, k.globalPid, \
             s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, NULL, NULL \
             FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.demangledName"
                .to_string(),
        );
    }
    if has_table(conn, "CUPTI_ACTIVITY_KIND_MEMCPY") {
        parts.push(format!(
            "SELECT 1, {common}, NULL, {dims}, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ));
    }
    if has_table(conn, "CUPTI_ACTIVITY_KIND_MEMSET") {
        parts.push(format!(
            "SELECT 2, {common}, NULL, {dims}, bytes, NULL FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ));
    }
    (!parts.is_empty()).then(|| format!("{} ORDER BY 2", parts.join(" UNION ALL ")))
}

impl<'j> Router<'j> {
    pub(super) fn new(
        job: &'j FileJob,
        groups: Vec<Group>,
        meta: &Meta,
        steps: Steps,
    ) -> Router<'j> {
        let mut of_pid = FxHashMap::default();
        let outs = groups
            .into_iter()
            .enumerate()
            .map(|(i, group)| {
                for &p in &group.pids {
                    of_pid.insert(p, i);
                }
                let parts = Parts {
                    root: job.staging.clone(),
                    run: job.label.clone(),
                    rank: group.rank,
                    tag: group.info.tag(job),
                };
                Out {
                    sink: Sink::new(&parts),
                    parts,
                    group,
                    batch: Batch::default(),
                    events: 0,
                }
            })
            .collect();
        Router {
            job,
            outs,
            of_pid,
            base: meta.base_ns.unwrap_or(0),
            steps,
        }
    }

    /// The output of process `pid` (every pid was assigned; 0 is the fallback).
    fn out(&mut self, pid: i64) -> &mut Out {
        let i = self.of_pid.get(&pid).copied().unwrap_or(0);
        &mut self.outs[i]
    }

    fn row_added(&mut self, pid: i64) -> Result<(), Error> {
        let out = self.out(pid);
        out.events += 1;
        if out.batch.gpu.len() + out.batch.cpu.len() >= BATCH_ROWS {
            out.sink.add(std::mem::take(&mut out.batch))?;
        }
        Ok(())
    }

    pub(super) fn read_all(&mut self, conn: &Connection) -> Result<(), Error> {
        if let Some(q) = gpu_query(conn) {
            self.gpu(conn, &q)?;
        }
        if has_table(conn, "CUPTI_ACTIVITY_KIND_RUNTIME") {
            self.runtime(conn)?;
        }
        if has_table(conn, "NVTX_EVENTS") {
            self.nvtx(conn)?;
        }
        Ok(())
    }

    fn gpu(&mut self, conn: &Connection, q: &str) -> Result<(), Error> {
        let mut st = conn.prepare(q)?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let kind = match r.get::<_, i64>(0)? {
                0 => Kind::Kernel,
                1 => Kind::Memcpy,
                _ => Kind::Memset,
            };
            let name = match kind {
                Kind::Kernel => r.get::<_, Option<String>>(7)?.unwrap_or_default(),
                Kind::Memcpy => memcpy_name(r.get(15)?).to_string(),
                Kind::Memset => "Memset".to_string(),
            };
            let start: i64 = r.get(1)?;
            let raw_end: i64 = r.get(2)?;
            let corr: Option<i64> = r.get(5)?;
            let pid = pid_of(r.get(6)?);
            let dim = |i: usize| r.get::<_, Option<i64>>(i);
            let (category, op) = self.job.classifier.classify(kind, &name);
            let (step, step_source) = self.gpu_step(pid, corr, start, &name);
            let base = self.base;
            let b = &mut self.out(pid).batch;
            if raw_end < start {
                let d = raw_end.saturating_sub(start);
                b.diag
                    .add("negative_duration", None, || format!("{name}: {d} ns"));
            }
            overflow(&mut b.diag, &name, &[start, raw_end]);
            let row = GpuRow {
                device: r.get(3)?,
                stream: r.get(4)?,
                kind,
                name: b.strings.id(&name),
                category,
                comm_op: (category == Category::Comm).then(|| op.unwrap_or("other")),
                start: base.saturating_add(start),
                end: base.saturating_add(raw_end.max(start)),
                raw_end: base.saturating_add(raw_end),
                correlation: corr,
                external_id: None,
                step,
                step_source,
                grid: [dim(8)?, dim(9)?, dim(10)?],
                block: [dim(11)?, dim(12)?, dim(13)?],
                bytes: r.get(14)?,
                coll: None,
            };
            b.gpu.push(row);
            self.row_added(pid)?;
        }
        Ok(())
    }

    /// The step of a GPU activity: its launch's, else (with a finding) its own start's.
    fn gpu_step(
        &mut self,
        pid: i64,
        corr: Option<i64>,
        start: i64,
        name: &str,
    ) -> (Option<i64>, StepSource) {
        // Steps are per process: one without `ProfilerStep#N` ranges has none to miss.
        let has_steps = self.steps.has_steps_in(pid);
        if let Some(step) = corr.and_then(|c| self.steps.launch(pid, c)) {
            if step.is_none() && has_steps {
                self.outside(pid, name);
            }
            return (step, StepSource::Launch);
        }
        self.out(pid)
            .batch
            .diag
            .add("kernel_without_launch", None, || {
                format!("{name} (correlation {corr:?})")
            });
        if !has_steps {
            return (None, StepSource::None);
        }
        let step = self.steps.at(pid, start);
        if step.is_none() {
            self.outside(pid, name);
        }
        (step, StepSource::GpuTime)
    }

    fn outside(&mut self, pid: i64, name: &str) {
        let diag = &mut self.out(pid).batch.diag;
        diag.add("outside_steps", None, || name.to_string());
    }

    fn runtime(&mut self, conn: &Connection) -> Result<(), Error> {
        let mut st = conn.prepare(
            "SELECT r.start, r.end, r.globalTid, r.correlationId, s.value \
             FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId \
             ORDER BY r.start",
        )?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let name: Option<String> = r.get(4)?;
            let cpu = self.cpu_row(CpuCategory::Runtime, name, r.get(0)?, r.get(1)?, r.get(2)?);
            let pid = cpu.1;
            let mut row = cpu.0;
            row.correlation = r.get(3)?;
            self.out(pid).batch.cpu.push(row);
            self.row_added(pid)?;
        }
        Ok(())
    }

    fn nvtx(&mut self, conn: &Connection) -> Result<(), Error> {
        let q = format!(
            "SELECT n.start, n.end, n.globalTid, COALESCE(n.text, s.value) FROM NVTX_EVENTS n \
             LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN {NVTX_TYPES} \
             ORDER BY n.start"
        );
        let mut st = conn.prepare(&q)?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let name: Option<String> = r.get(3)?;
            let cat = CpuCategory::UserAnnotation;
            let (row, pid) = self.cpu_row(cat, name, r.get(0)?, r.get(1)?, r.get(2)?);
            self.out(pid).batch.cpu.push(row);
            self.row_added(pid)?;
        }
        Ok(())
    }

    /// A `cpu_ops` row (times made absolute, step resolved) and its pid.
    fn cpu_row(
        &mut self,
        category: CpuCategory,
        name: Option<String>,
        start: i64,
        end: Option<i64>,
        global_tid: Option<i64>,
    ) -> (CpuRow, i64) {
        let pid = pid_of(global_tid);
        let name = name.unwrap_or_default();
        let step = match self.job.step_marker.step(name.as_bytes()) {
            Some(n) if category == CpuCategory::UserAnnotation => Some(n),
            _ => self.steps.at(pid, start),
        };
        if step.is_none() && self.steps.has_steps_in(pid) {
            self.outside(pid, &name);
        }
        let base = self.base;
        let b = &mut self.out(pid).batch;
        if end.is_some_and(|e| e < start) {
            b.diag.add("negative_duration", None, || {
                format!("{name}: end before start")
            });
        }
        overflow(&mut b.diag, &name, &[start, end.unwrap_or(start)]);
        let row = CpuRow {
            category,
            name: b.strings.id(&name),
            pid: global_tid.map(|_| pid),
            tid: global_tid.map(|g| g & 0xFF_FFFF),
            start: base.saturating_add(start),
            end: base.saturating_add(end.unwrap_or(start).max(start)),
            correlation: None,
            external_id: None,
            step,
            input_dims: None,
            input_types: None,
            concrete_inputs: None,
            input_strides: None,
        };
        (row, pid)
    }

    /// Closes every rank's sink and writes its `runs`, `steps` and `diagnostics`.
    pub(super) fn finish(self, meta: &Meta) -> crate::error::Result<FileOutcome> {
        // A launch the lookup could not read back was answered "none": the rows are wrong.
        if let Some(e) = self.steps.take_read_error() {
            return Err(crate::error::IngestError::io(&self.job.staging, e));
        }
        let mut total = FileOutcome::default();
        for (i, mut out) in self.outs.into_iter().enumerate() {
            out.sink.add(out.batch)?;
            let sunk = out.sink.finish()?;
            let mut info = out.group.info;
            info.event_count = out.events;
            info.platform = "cuda";
            info.base_time_ns = meta.base_ns;
            info.runtime_version = meta.version.clone();
            let device = sunk.counts.devices.iter().max_by_key(|(_, n)| **n);
            info.device_index = device.map(|(d, _)| *d);
            info.device_name = device.and_then(|(d, _)| meta.gpus.get(d).cloned());
            let spans = self.steps.spans_of(&out.group.pids);
            let o = info.finish(self.job, &out.parts, sunk, (&spans, self.base))?;
            if i == 0 {
                total.run = o.run.clone();
                total.rank = o.rank;
                total.content_hash = o.content_hash.clone();
            }
            total.parts.extend(o.parts);
            for (t, n) in o.rows {
                *total.rows.entry(t).or_default() += n;
            }
            total.events += o.events;
            total.warnings += o.warnings;
        }
        Ok(total)
    }
}

/// A `time_overflow` finding for a row whose times are past `json::TIME_LIMIT_NS`: SQLite
/// holds any int64, and adding the session's base to such a time would overflow (the sums
/// saturate instead, and the finding says the row's times are not to be trusted).
fn overflow(diag: &mut crate::diag::Diagnostics, name: &str, times: &[i64]) {
    if let Some(t) = times.iter().find(|&&t| !crate::json::usable_time(t)) {
        diag.add("time_overflow", None, || format!("{name}: {t} ns"));
    }
}
