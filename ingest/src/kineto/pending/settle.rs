//! Reading the spill files back: every row settled (its step and absolute times) and handed
//! to the sinks in file order, on the pool where it has several threads (see `Replay`).

use std::io::Read;
use std::path::Path;

use bytemuck::Pod;
use rayon::prelude::*;

use super::*;
use crate::kineto::launches::LaunchSteps;
use crate::kineto::links::{Links, StepCache};

/// Reads the spilled batches back in file order, gives every row its step and absolute
/// times (`base` added), and writes them through two sinks, one per table, side by side.
///
/// `links` has its spans sorted (`Links::finish_spans`), and `launches` are the launches it
/// took out: their lookup is built here (and kept in `links`), on many cores beside the CPU
/// rows, which do not need it (`groups`). The build runs on this thread alone (see
/// `LaunchSteps::build`): while the CPU table's row groups fill the pool, a build split into
/// tasks waited for them, and the GPU table waited for the build.
pub(crate) fn settle(
    s: Spilled,
    links: &mut Links,
    launches: crate::kineto::launches::LaunchLog,
    base: i64,
    parts: &Parts,
) -> Result<SinkOut> {
    let timing = std::env::var_os("AORTA_TIMING").is_some();
    let t0 = std::time::Instant::now();
    // Every string is interned by now: the settle and the sinks only look ids up.
    let s = Spilled {
        strings: s.strings.into_lookup(),
        ..s
    };
    if groups::fits() {
        let (out, steps) = settle_in_groups(s, links, launches, base, parts)?;
        links.set_launch_steps(steps);
        return Ok(out);
    }
    // The pool waits for it: the build may use this file's share of the pool.
    let steps = links.launch_steps(launches, pool_share());
    links.set_launch_steps(steps.map_err(|e| IngestError::io(&s.dir, e))?);
    if timing {
        eprintln!("launch lookup {:.2?}", t0.elapsed());
    }
    settle_in_sinks(s, links, base, parts)
}

/// The settle on many cores (`groups`): the GPU table once the launches' lookup is built
/// (serially, on the thread that runs the join's first half), the CPU table meanwhile.
fn settle_in_groups(
    s: Spilled,
    links: &Links,
    launches: crate::kineto::launches::LaunchLog,
    base: i64,
    parts: &Parts,
) -> Result<(SinkOut, LaunchSteps)> {
    let Spilled {
        gpu,
        cpu,
        dir,
        strings,
        diag,
        comm_ops,
        index,
        ..
    } = s;
    let (gpu, cpu) = (
        groups::Records::new(gpu, index.0, &dir),
        groups::Records::new(cpu, index.1, &dir),
    );
    let (comm_ops, strings) = (&comm_ops, &strings);
    let t0 = std::time::Instant::now();
    let threads = (pool_share() / 4).clamp(1, 4);
    let (g, c) = rayon::join(
        || {
            let steps = links.launch_steps(launches, threads);
            let steps = steps.map_err(|e| IngestError::io(&dir, e))?;
            let t_steps = t0.elapsed();
            let table = |cx: &groups::Ctx| groups::gpu_table(gpu, cx);
            let out = in_ctx(links, &steps, base, comm_ops, strings, parts, table)?;
            Ok::<_, IngestError>((out, steps, t_steps, t0.elapsed()))
        },
        || {
            // CPU rows ask no launch.
            let none = LaunchSteps::default();
            let table = |cx: &groups::Ctx| groups::cpu_table(cpu, cx, diag);
            let out = in_ctx(links, &none, base, comm_ops, strings, parts, table);
            (out, t0.elapsed())
        },
    );
    let (g, steps, t_steps, t_gpu) = g?;
    if std::env::var_os("AORTA_TIMING").is_some() {
        eprintln!(
            "settle: gpu_activities {t_gpu:.2?} (launch lookup {t_steps:.2?} first), cpu_ops {:.2?}",
            c.1
        );
    }
    let mut out = g.merge(c.0?);
    out.vendor_hint = crate::sink::vendor_hint(strings);
    Ok((out, steps))
}

/// The pool's threads this file has to itself (the files being read share it), which the
/// launches' lookup is built on (`LaunchSteps::build`, on threads of its own). Beside the CPU
/// table, whose row groups fill the pool, it gets a quarter of them, one to four: the GPU
/// table waits for the lookup, which took 30–55 ms of a 1 GiB file on one thread of 16
/// busy cores; 16 files on 16 cores build 16 lookups at once, each on one thread (on four
/// each, they held ~80 MB more at the peak, at the same speed).
fn pool_share() -> usize {
    (rayon::current_num_threads() / crate::window::files_at_once()).max(1)
}

/// Runs one table's settle in groups, its launches answered from `launches`.
fn in_ctx<R>(
    links: &Links,
    launches: &LaunchSteps,
    base: i64,
    comm_ops: &[&'static str],
    strings: &Interner,
    parts: &Parts,
    table: impl FnOnce(&groups::Ctx) -> R,
) -> R {
    let settler = Settler {
        links,
        launches,
        base,
        comm_ops,
    };
    table(&groups::Ctx {
        settler: &settler,
        strings,
        parts,
    })
}

/// The settle on one thread (or in the fuzzer, which encodes nothing): two sinks fed batch by
/// batch (`Replay`).
fn settle_in_sinks(s: Spilled, links: &Links, base: i64, parts: &Parts) -> Result<SinkOut> {
    let Spilled {
        gpu,
        cpu,
        dir,
        strings,
        diag,
        comm_ops,
        batches,
        ..
    } = s;
    let settler = Settler {
        links,
        launches: links.launches(),
        base,
        comm_ops: &comm_ops,
    };
    let strings = Arc::new(strings);
    let mut gpu_sink = Sink::with_strings(parts, strings.clone());
    let mut cpu_sink = Sink::with_strings(parts, strings.clone());
    cpu_sink.diag.merge(diag);
    let st = &settler;
    let strings = &*strings;
    // On the current rayon pool, not on threads of their own: the sinks encode their columns
    // on it too (`writer::Open`), and `--jobs` bounds all of it.
    let t0 = std::time::Instant::now();
    let (g, c) = rayon::join(
        || {
            let file = Replay::new(gpu, batches, &dir);
            let res = file.run(&mut gpu_sink, strings, |c, r, s, d| st.gpu(c, r, s, d));
            let out = res.and_then(|()| gpu_sink.finish());
            (out, t0.elapsed())
        },
        || {
            let file = Replay::new(cpu, batches, &dir);
            let res = file.run(&mut cpu_sink, strings, |c, r, s, d| st.cpu(c, r, s, d));
            let out = res.and_then(|()| cpu_sink.finish());
            (out, t0.elapsed())
        },
    );
    if std::env::var_os("AORTA_TIMING").is_some() {
        eprintln!("settle: gpu_activities {:.2?}, cpu_ops {:.2?}", g.1, c.1);
    }
    Ok(g.0?.merge(c.0?))
}

/// A row type of the sink, and how a batch of it is added.
trait SinkRow: Sized {
    fn add(sink: &mut Sink, rows: Vec<Self>, diag: Diagnostics) -> Result<()>;
}

impl SinkRow for GpuRow {
    fn add(sink: &mut Sink, rows: Vec<Self>, diag: Diagnostics) -> Result<()> {
        sink.add_rows(rows, Vec::new(), diag)
    }
}

impl SinkRow for CpuRow {
    fn add(sink: &mut Sink, rows: Vec<Self>, diag: Diagnostics) -> Result<()> {
        sink.add_rows(Vec::new(), rows, diag)
    }
}

/// Records of consecutive batches settled at once (about 12,000 CPU rows, 5,000 GPU rows):
/// a few batches to spread over the pool, few enough that what waits (two groups of records
/// per table, and of GPU rows) stays small: 32 Ki-row groups cost 45 MB of peak RSS.
/// (The tests settle in groups of 64 KiB, so that small traces make many.)
const GROUP_BYTES: usize = if cfg!(test) { 1 << 16 } else { 1 << 20 };

/// One spill file being read back, batch by batch.
struct Replay<'a> {
    file: SpillFile,
    /// Batches not read yet.
    left: u64,
    dir: &'a Path,
}

/// The rows of one batch, settled, with the findings settling them gave.
type Settled<T> = (Vec<T>, Diagnostics);

impl<'a> Replay<'a> {
    fn new(file: SpillFile, batches: u64, dir: &'a Path) -> Replay<'a> {
        Replay {
            file,
            left: batches,
            dir,
        }
    }

    /// Settles each record with `row` and adds each batch's rows to `sink`, in file order.
    ///
    /// Why in groups: on one thread per table, reading the records back and settling them
    /// (with the sink's buffering) was most of what stayed serial of the settle on many
    /// cores. On a pool of several threads, the batches of the next group are settled (in
    /// parallel, each with a step cache of its own) while the sink takes the rows of the
    /// last one; the sink still gets every batch, in order, as its own `add_rows`, so it
    /// flushes exactly where it did.
    fn run<R: Pod + Send + Sync, T: SinkRow + Send>(
        mut self,
        sink: &mut Sink,
        strings: &Interner,
        row: impl Fn(&mut StepCache, &R, &Interner, &mut Diagnostics) -> T + Sync,
    ) -> Result<()> {
        let settle = |recs: &[R]| -> Settled<T> {
            let (mut cache, mut diag) = (StepCache::default(), Diagnostics::default());
            let rows = recs.iter().map(|r| row(&mut cache, r, strings, &mut diag));
            (rows.collect(), diag)
        };
        if rayon::current_num_threads() < 2 {
            // One thread: one batch at a time, one cache for the whole table.
            let (mut recs, mut cache) = (Vec::new(), StepCache::default());
            while self.left > 0 {
                self.read(&mut recs)?;
                let mut diag = Diagnostics::default();
                let rows = recs.iter().map(|r| row(&mut cache, r, strings, &mut diag));
                T::add(sink, rows.collect(), diag)?;
            }
            return Ok(());
        }
        let mut ready: Vec<Settled<T>> = Vec::new();
        let mut spare: Vec<Vec<R>> = Vec::new();
        loop {
            let group = self.group(&mut spare)?;
            if group.is_empty() && ready.is_empty() {
                return Ok(());
            }
            let (settled, added) = rayon::join(
                || {
                    group
                        .par_iter()
                        .map(|recs| settle(recs))
                        .collect::<Vec<_>>()
                },
                || {
                    ready
                        .drain(..)
                        .try_for_each(|(rows, diag)| T::add(sink, rows, diag))
                },
            );
            added?;
            ready = settled;
            spare = group;
        }
    }

    /// Reads the next batches, up to `GROUP_BYTES` of records (at least one batch while any is
    /// left), into the record buffers of `spare`.
    fn group<R: Pod>(&mut self, spare: &mut Vec<Vec<R>>) -> Result<Vec<Vec<R>>> {
        let mut group = Vec::new();
        let mut rows = 0;
        let cap = GROUP_BYTES / std::mem::size_of::<R>();
        while self.left > 0 && rows < cap {
            let mut recs = spare.pop().unwrap_or_default();
            self.read(&mut recs)?;
            rows += recs.len();
            group.push(recs);
        }
        Ok(group)
    }

    /// Reads the next batch's records into `recs`.
    fn read<R: Pod>(&mut self, recs: &mut Vec<R>) -> Result<()> {
        let io = |e| IngestError::io(self.dir, e);
        let mut n = 0u64;
        self.file
            .read_exact(bytemuck::bytes_of_mut(&mut n))
            .map_err(io)?;
        fit(recs, n as usize);
        self.file
            .read_exact(bytemuck::cast_slice_mut(recs))
            .map_err(io)?;
        self.left -= 1;
        Ok(())
    }
}

/// What settling a row needs (rows come in file order, so most CPU lookups land in the
/// previous row's span: the caller keeps a `StepCache` per run of rows).
pub(super) struct Settler<'a> {
    links: &'a Links,
    /// The launches' steps (CPU rows ask none).
    launches: &'a LaunchSteps,
    base: i64,
    comm_ops: &'a [&'static str],
}

impl Settler<'_> {
    pub(super) fn cpu(
        &self,
        cache: &mut StepCache,
        r: &CpuRec,
        strings: &Interner,
        diag: &mut Diagnostics,
    ) -> CpuRow {
        let f = r.flags;
        let step = match get(r.step, C_STEP, f) {
            Some(n) => Some(n),
            None => self.links.step_at_cached(cache, r.pid_key, r.start),
        };
        if step.is_none() && self.links.has_steps() {
            outside(diag, r.off, r.name, strings);
        }
        CpuRow {
            category: CpuCategory::ALL[(f & 0xff) as usize],
            name: r.name,
            pid: get(r.pid_key, C_PID, f),
            tid: get(r.tid, C_TID, f),
            start: r.start + self.base,
            end: r.end + self.base,
            correlation: get(r.correlation, C_CORR, f),
            external_id: get(r.external_id, C_EXT, f),
            step,
            input_dims: get(r.input_dims, C_DIMS, f),
            input_types: get(r.input_types, C_TYPES, f),
            concrete_inputs: get(r.concrete_inputs, C_CONCRETE, f),
            input_strides: get(r.input_strides, C_STRIDES, f),
        }
    }

    pub(super) fn gpu(
        &self,
        _: &mut StepCache,
        r: &GpuRec,
        strings: &Interner,
        diag: &mut Diagnostics,
    ) -> GpuRow {
        let f = r.flags;
        let correlation = get(r.correlation, G_CORR, f);
        let (step, step_source) = self.gpu_step(r, correlation, strings, diag);
        let start = r.start + self.base;
        let raw_end = r.raw_end + self.base;
        let coll = (f & G_COLL != 0).then(|| {
            Box::new(CollArgs {
                collective_name: get(r.collective_name, G_COLL_NAME, f),
                in_msg_nelems: get(r.in_msg_nelems, G_IN, f),
                out_msg_nelems: get(r.out_msg_nelems, G_OUT, f),
                group_size: get(r.group_size, G_GROUP, f),
                dtype: get(r.dtype, G_DTYPE, f),
                process_group: get(r.process_group, G_PG, f),
                process_group_ranks: get(r.process_group_ranks, G_PG_RANKS, f),
                collective_seq: get(r.collective_seq, G_SEQ, f),
                comms_id: get(r.comms_id, G_COMMS_ID, f),
                gemm: std::array::from_fn(|i| get(r.gemm[i], G_GEMM << i, f)),
            })
        });
        GpuRow {
            device: r.device,
            stream: r.stream,
            kind: Kind::ALL[r.kind as usize],
            name: r.name,
            category: Category::ALL[r.category as usize],
            comm_op: (r.comm_op > 0).then(|| self.comm_ops[r.comm_op as usize - 1]),
            start,
            end: raw_end.max(start),
            raw_end,
            correlation,
            external_id: get(r.external_id, G_EXT, f),
            step,
            step_source,
            grid: std::array::from_fn(|i| get(r.grid[i], G_GRID << i, f)),
            block: std::array::from_fn(|i| get(r.block[i], G_BLOCK << i, f)),
            bytes: get(r.bytes, G_BYTES, f),
            coll,
        }
    }

    /// The step of the launch (by correlation), else of the GPU time, with the findings. In a
    /// trace without step spans, the activity's own `args.step` where it has one.
    fn gpu_step(
        &self,
        r: &GpuRec,
        corr: Option<i64>,
        strings: &Interner,
        diag: &mut Diagnostics,
    ) -> (Option<i64>, StepSource) {
        let links = self.links;
        let arg_step = get(r.arg_step, G_ARG_STEP, r.flags);
        let launch = corr.and_then(|c| self.launches.get(c));
        if launch.is_none() {
            diag.add_min("kernel_without_launch", Some(r.off as i64), || {
                format!("{} (correlation {corr:?})", strings.get(r.name))
            });
        }
        if !links.has_steps() {
            if arg_step.is_some() {
                return (arg_step, StepSource::Arg);
            }
            return (
                None,
                launch.map_or(StepSource::None, |_| StepSource::Launch),
            );
        }
        if let Some(step) = launch {
            if step.is_none() {
                outside(diag, r.off, r.name, strings);
            }
            return (step, StepSource::Launch);
        }
        let step = links.gpu_step_at(r.start);
        if step.is_none() {
            outside(diag, r.off, r.name, strings);
        }
        (step, StepSource::GpuTime)
    }
}

fn outside(diag: &mut Diagnostics, off: u64, name: u32, strings: &Interner) {
    diag.add_min("outside_steps", Some(off as i64), || {
        strings.get(name).to_string()
    });
}

/// Makes `buf` `n` records long for a read that overwrites them all: a buffer kept from read
/// to read (the one-thread settle's) zeroes only what it grows by, not every batch again.
pub(super) fn fit<R: Pod>(buf: &mut Vec<R>, n: usize) {
    if buf.len() > n {
        buf.truncate(n);
    } else {
        buf.resize(n, R::zeroed());
    }
}
