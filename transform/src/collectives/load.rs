//! A run's communication kernels, read a chunk of ranks at a time and numbered into
//! instances as they arrive.
//!
//! A 1,000-rank job holds millions of comm kernels. Holding them as a polars frame (strings
//! and all) would take gigabytes, so each rank's partition is read on its own, turned into
//! 32-byte `Kernel`s keyed by an instance index, and dropped before the next is read.

use std::collections::HashMap;
use std::path::Path;

use aorta_ingest::classify::Classifier;
use aorta_ingest::schema::GPU_ACTIVITIES;
use polars::prelude::*;
use rustc_hash::FxHashMap;

use crate::dataset::{self, DatasetError};
use crate::nccl::{message_bytes, ranks_in_list};
use crate::rows::{ints, strs};
use crate::sweep::comm_op_index;

/// `Kernel::step` for a kernel outside every step.
pub const NO_STEP: i64 = i64::MIN;

/// One communication kernel of one rank.
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    pub start: i64,
    pub end: i64,
    pub step: i64,
    /// Index into `Loaded::instances`.
    pub inst: u32,
    /// `COMM_OPS` index.
    pub kind: u8,
}

/// A rank's comm kernels, in launch order.
#[derive(Debug, Default)]
pub struct RankKernels {
    pub rank: i64,
    pub kernels: Vec<Kernel>,
}

/// What the members of an instance agree on (or not), gathered while loading.
#[derive(Debug, Clone)]
pub struct InstanceKey {
    pub group: u32,
    pub seq: i64,
    /// The kind of the lowest-ranked member.
    pub kind: u8,
    pub kind_mismatch: bool,
    pub members: u32,
    pub bytes: Option<i64>,
}

/// A process group as the kernels name it.
#[derive(Debug, Clone)]
pub struct Group {
    pub key: String,
    /// Members the group has: `Group size`, the ranks list, else the run's world size.
    pub size: Option<i64>,
    /// Ranks of the run with at least one kernel of the group.
    pub present: u32,
    last_rank: Option<i64>,
}

/// A run's comm kernels, numbered into instances.
#[derive(Debug, Default)]
pub struct Loaded {
    pub ranks: Vec<RankKernels>,
    pub groups: Vec<Group>,
    pub instances: Vec<InstanceKey>,
    /// Comm kernels whose kind came from the launching `c10d::` operator.
    pub kinds_from_ops: u64,
    group_idx: HashMap<String, u32>,
    inst_idx: FxHashMap<(u32, i64), u32>,
}

/// The `gpu_activities` columns read (the Kineto `Seq` too, where the schema has it).
fn columns() -> Vec<&'static str> {
    let mut c = vec![
        "category",
        "start_ns",
        "end_ns",
        "step",
        "comm_op",
        "correlation",
        "in_msg_nelems",
        "out_msg_nelems",
        "dtype",
        "group_size",
        "process_group",
        "process_group_ranks",
    ];
    if GPU_ACTIVITIES.column("collective_seq").is_some() {
        c.push("collective_seq");
    }
    c
}

/// Ranks read in parallel at a time: enough to keep every core busy, few enough that their
/// frames stay small.
const RANKS_PER_BATCH: usize = 64;

/// Reads the comm kernels of `ranks` (sorted) of `run`: each rank's partition is read on
/// its own (in parallel), then numbered into instances in rank order.
pub fn load(
    root: &Path,
    run: &str,
    ranks: &[i64],
    world_size: Option<i64>,
) -> Result<Loaded, DatasetError> {
    let mut out = Loaded::default();
    for batch in ranks.chunks(RANKS_PER_BATCH) {
        let read = crate::par::map(batch, |&rank| read_rank(root, run, rank))?;
        for (&rank, (df, kinds)) in batch.iter().zip(&read) {
            out.kinds_from_ops += kinds.len() as u64;
            out.add_rank(rank, &Cols::of(df), kinds, world_size);
        }
    }
    Ok(out)
}

/// One rank's comm kernels and the kinds its RCCL generic kernels take from their ops.
fn read_rank(
    root: &Path,
    run: &str,
    rank: i64,
) -> Result<(DataFrame, HashMap<i64, u8>), DatasetError> {
    let polars = |source| DatasetError::Polars {
        path: dataset::partition_dir(root, "gpu_activities", run, rank),
        source,
    };
    let is_comm = |df: &DataFrame| {
        df.column("category")
            .and_then(|c| c.str().map(|s| s.equal("comm")))
    };
    // A single-GPU trace has no comm kernels: one dictionary column says so, cheaply.
    let cats = dataset::read_partition(root, "gpu_activities", run, rank, &["category"])?;
    if !is_comm(&cats).map_err(polars)?.any() {
        return Ok((DataFrame::empty(), HashMap::new()));
    }
    let df = dataset::read_partition(root, "gpu_activities", run, rank, &columns())?;
    let df = is_comm(&df).and_then(|m| df.filter(&m)).map_err(polars)?;
    let kinds = c10d_kinds(root, run, rank, &df)?;
    Ok((df, kinds))
}

impl Group {
    /// The key as people read it: whole when short, else the group name and its size (a
    /// 1,000-rank group's ranks list is kilobytes).
    pub fn label(&self) -> String {
        if self.key.len() <= 40 {
            return self.key.clone();
        }
        let name = self.key.split(' ').next().unwrap_or("?");
        let n = self.size.map_or("?".into(), |n| n.to_string());
        format!("{name} ({n} ranks)")
    }
}

impl Loaded {
    /// Numbers one rank's kernels per group in launch order (the trace's `Seq` where every
    /// kernel of the group has one) and files them under their instances.
    fn add_rank(&mut self, rank: i64, c: &Cols, kinds: &HashMap<i64, u8>, world: Option<i64>) {
        let rows = 0..c.start.len();
        let by_corr = rows.clone().all(|i| c.corr[i].is_some());
        let mut order: Vec<(u32, i64, usize)> = rows
            .map(|i| {
                let g = self.group(c, i, rank, world);
                let key = if by_corr { c.corr[i] } else { c.start[i] };
                (g, key.unwrap_or(0), i)
            })
            .collect();
        order.sort_unstable();
        let mut kernels = Vec::with_capacity(order.len());
        let mut s = 0;
        while s < order.len() {
            let g = order[s].0;
            let e = s + order[s..].iter().take_while(|o| o.0 == g).count();
            let trace_seq = order[s..e].iter().all(|o| c.seq[o.2].is_some());
            for (n, &(_, _, i)) in order[s..e].iter().enumerate() {
                let seq = if trace_seq {
                    c.seq[i].unwrap_or(0)
                } else {
                    n as i64
                };
                let kind = match (c.op[i], c.corr[i].and_then(|k| kinds.get(&k))) {
                    (Some("other") | None, Some(&k)) => k,
                    (op, _) => comm_op_index(op),
                };
                let bytes = message_bytes(c.inp[i], c.out[i], c.dtype[i]);
                let inst = self.instance(g, seq, kind, bytes);
                let (start, end) = (c.start[i].unwrap_or(0), c.end[i].unwrap_or(0));
                kernels.push(Kernel {
                    start,
                    end: end.max(start),
                    step: c.step[i].unwrap_or(NO_STEP),
                    inst,
                    kind,
                });
            }
            s = e;
        }
        kernels.sort_by_key(|k| (k.start, k.inst));
        self.ranks.push(RankKernels { rank, kernels });
    }

    /// The index of the kernel's group, created on first sight.
    fn group(&mut self, c: &Cols, i: usize, rank: i64, world: Option<i64>) -> u32 {
        // PyTorch names every process group uniquely within a job; the ranks list stands in
        // where a trace gives no name. Looked up by reference: no allocation per kernel.
        let key = c.pg[i].or(c.pg_ranks[i]).unwrap_or("default");
        let g = match self.group_idx.get(key) {
            Some(&g) => g,
            None => {
                let size = c.size[i]
                    .or_else(|| c.pg_ranks[i].and_then(ranks_in_list))
                    .or(world);
                self.groups.push(Group {
                    key: key.to_string(),
                    size,
                    present: 0,
                    last_rank: None,
                });
                let g = self.groups.len() as u32 - 1;
                self.group_idx.insert(key.to_string(), g);
                g
            }
        };
        let group = &mut self.groups[g as usize];
        if group.last_rank != Some(rank) {
            group.last_rank = Some(rank);
            group.present += 1;
            let size = c.size[i].or_else(|| c.pg_ranks[i].and_then(ranks_in_list));
            group.size = group.size.max(size);
        }
        g
    }

    fn instance(&mut self, group: u32, seq: i64, kind: u8, bytes: Option<i64>) -> u32 {
        let n = self.instances.len() as u32;
        let idx = *self.inst_idx.entry((group, seq)).or_insert(n);
        if idx == n {
            self.instances.push(InstanceKey {
                group,
                seq,
                kind,
                kind_mismatch: false,
                members: 0,
                bytes,
            });
        }
        let inst = &mut self.instances[idx as usize];
        inst.members += 1;
        inst.kind_mismatch |= inst.kind != kind;
        inst.bytes = inst.bytes.or(bytes);
        idx
    }
}

/// The chunk's columns as plain vectors.
struct Cols<'a> {
    start: Vec<Option<i64>>,
    end: Vec<Option<i64>>,
    step: Vec<Option<i64>>,
    corr: Vec<Option<i64>>,
    seq: Vec<Option<i64>>,
    inp: Vec<Option<i64>>,
    out: Vec<Option<i64>>,
    size: Vec<Option<i64>>,
    op: Vec<Option<&'a str>>,
    dtype: Vec<Option<&'a str>>,
    pg: Vec<Option<&'a str>>,
    pg_ranks: Vec<Option<&'a str>>,
}

impl<'a> Cols<'a> {
    fn of(df: &'a DataFrame) -> Cols<'a> {
        Cols {
            start: ints(df, "start_ns"),
            end: ints(df, "end_ns"),
            step: ints(df, "step"),
            corr: ints(df, "correlation"),
            seq: ints(df, "collective_seq"),
            inp: ints(df, "in_msg_nelems"),
            out: ints(df, "out_msg_nelems"),
            size: ints(df, "group_size"),
            op: strs(df, "comm_op"),
            dtype: strs(df, "dtype"),
            pg: strs(df, "process_group"),
            pg_ranks: strs(df, "process_group_ranks"),
        }
    }
}

/// Kinds of comm kernels the name does not tell (RCCL's `ncclDevKernel_Generic`), from the
/// `c10d::` operator around their launch: correlation → `COMM_OPS` index.
fn c10d_kinds(
    root: &Path,
    run: &str,
    rank: i64,
    comm: &DataFrame,
) -> Result<HashMap<i64, u8>, DatasetError> {
    let (op, corr) = (strs(comm, "comm_op"), ints(comm, "correlation"));
    let wanted: Vec<i64> = (0..comm.height())
        .filter(|&i| matches!(op[i], Some("other") | None))
        .filter_map(|i| corr[i])
        .collect();
    let mut out = HashMap::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    let names = [
        "category",
        "name",
        "tid",
        "start_ns",
        "end_ns",
        "correlation",
    ];
    let cpu = dataset::read_partition(root, "cpu_ops", run, rank, &names)?;
    let classifier = Classifier::builtin();
    let c = CpuCols::of(&cpu);
    let launches: HashMap<i64, usize> = (0..cpu.height())
        .filter(|&i| c.cat[i] == Some("runtime"))
        .filter_map(|i| Some((c.corr[i]?, i)))
        .collect();
    let ops: Vec<usize> = (0..cpu.height())
        .filter(|&i| c.cat[i] == Some("cpu_op"))
        .filter(|&i| c.name[i].is_some_and(|n| n.starts_with("c10d::")))
        .collect();
    for w in wanted {
        let Some(&l) = launches.get(&w) else { continue };
        // The innermost c10d op of the launching thread around the launch.
        let around = ops
            .iter()
            .filter(|&&o| c.tid[o] == c.tid[l])
            .filter(|&&o| c.start[o] <= c.start[l] && c.start[l] <= c.end[o])
            .max_by_key(|&&o| c.start[o]);
        let kind = around.and_then(|&o| {
            let name = c.name[o]?
                .trim_start_matches("c10d::")
                .trim_end_matches('_');
            classifier.collective_op(name)
        });
        if let Some(k) = kind {
            out.insert(w, comm_op_index(Some(k)));
        }
    }
    Ok(out)
}

struct CpuCols<'a> {
    cat: Vec<Option<&'a str>>,
    name: Vec<Option<&'a str>>,
    tid: Vec<Option<i64>>,
    start: Vec<Option<i64>>,
    end: Vec<Option<i64>>,
    corr: Vec<Option<i64>>,
}

impl<'a> CpuCols<'a> {
    fn of(df: &'a DataFrame) -> CpuCols<'a> {
        CpuCols {
            cat: strs(df, "category"),
            name: strs(df, "name"),
            tid: ints(df, "tid"),
            start: ints(df, "start_ns"),
            end: ints(df, "end_ns"),
            corr: ints(df, "correlation"),
        }
    }
}
