//! One rank's comm kernels, read and numbered on a worker thread.
//!
//! Everything that needs no other rank is decided here: the kernel's group (by its key),
//! its seq in that group, its kind (RCCL generic kernels take theirs from the launching
//! `c10d::` operator) and its message size. `load` then only maps the rank's groups and
//! seqs to the job's instances.

use std::collections::HashMap;
use std::path::Path;

use aorta_ingest::classify::Classifier;
use aorta_ingest::schema::GPU_ACTIVITIES;
use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::nccl::{message_bytes, ranks_in_list};
use crate::rows::{ints, strs};
use crate::sweep::comm_op_index;

use super::load::NO_STEP;

/// A process group as one rank's kernels name it.
#[derive(Debug)]
pub(super) struct SeenGroup {
    /// The `Process Group Name`, else the ranks list, else `default`.
    pub key: String,
    /// `Group size`, else the ranks list's length, of the group's first kernel.
    pub size: Option<i64>,
}

/// A comm kernel with everything but its job-wide instance.
#[derive(Debug, Clone, Copy)]
pub(super) struct PreKernel {
    pub start: i64,
    pub end: i64,
    pub step: i64,
    pub seq: i64,
    pub bytes: Option<i64>,
    /// Index into `Prepared::groups`.
    pub group: u32,
    /// `COMM_OPS` index.
    pub kind: u8,
}

/// One rank's comm kernels, sorted by start.
#[derive(Debug, Default)]
pub(super) struct Prepared {
    pub groups: Vec<SeenGroup>,
    pub kernels: Vec<PreKernel>,
    /// Kernels whose kind came from the launching `c10d::` operator.
    pub kinds_from_ops: u64,
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

/// Reads and numbers the comm kernels of one rank of `run`. With `check_first`, the
/// `category` column is read alone first, and nothing more when it has no `comm` (a
/// single-GPU trace: one dictionary column says so, cheaply).
pub(super) fn rank(
    root: &Path,
    run: &str,
    rank: i64,
    check_first: bool,
) -> Result<Prepared, DatasetError> {
    let polars = |source| DatasetError::Polars {
        path: dataset::partition_dir(root, "gpu_activities", run, rank),
        source,
    };
    let is_comm = |df: &DataFrame| {
        df.column("category")
            .and_then(|c| c.str().map(|s| s.equal("comm")))
            .map_err(polars)
    };
    if check_first {
        let cats = dataset::read_partition(root, "gpu_activities", run, rank, &["category"])?;
        if !is_comm(&cats)?.any() {
            return Ok(Prepared::default());
        }
    }
    let df = dataset::read_partition(root, "gpu_activities", run, rank, &columns())?;
    let df = df.filter(&is_comm(&df)?).map_err(polars)?;
    if df.height() == 0 {
        return Ok(Prepared::default());
    }
    let kinds = c10d_kinds(root, run, rank, &df)?;
    Ok(number(&Cols::of(&df), &kinds))
}

/// Groups the kernels, numbers each group's in launch order (correlation, else start; the
/// trace's `Seq` where every kernel of the group has one) and sorts them by start.
fn number(c: &Cols, kinds: &HashMap<i64, u8>) -> Prepared {
    let rows = 0..c.start.len();
    let by_corr = rows.clone().all(|i| c.corr[i].is_some());
    let mut p = Prepared::default();
    let mut index: HashMap<&str, u32> = HashMap::new();
    let mut order: Vec<(u32, i64, usize)> = rows
        .map(|i| {
            let key = c.pg[i].or(c.pg_ranks[i]).unwrap_or("default");
            let g = *index.entry(key).or_insert_with(|| {
                p.groups.push(SeenGroup {
                    key: key.to_string(),
                    size: c.size[i].or_else(|| c.pg_ranks[i].and_then(ranks_in_list)),
                });
                p.groups.len() as u32 - 1
            });
            let at = if by_corr { c.corr[i] } else { c.start[i] };
            (g, at.unwrap_or(0), i)
        })
        .collect();
    order.sort_unstable();
    p.kernels.reserve(order.len());
    for run in order.chunk_by(|a, b| a.0 == b.0) {
        let trace_seq = run.iter().all(|o| c.seq[o.2].is_some());
        for (n, &(g, _, i)) in run.iter().enumerate() {
            let seq = if trace_seq {
                c.seq[i].unwrap_or(0)
            } else {
                n as i64
            };
            let from_op = c.corr[i].and_then(|k| kinds.get(&k));
            let kind = match (c.op[i], from_op) {
                (Some("other") | None, Some(&k)) => k,
                (op, _) => comm_op_index(op),
            };
            let (start, end) = (c.start[i].unwrap_or(0), c.end[i].unwrap_or(0));
            p.kernels.push(PreKernel {
                start,
                end: end.max(start),
                step: c.step[i].unwrap_or(NO_STEP),
                seq,
                bytes: message_bytes(c.inp[i], c.out[i], c.dtype[i]),
                group: g,
                kind,
            });
        }
    }
    p.kinds_from_ops = kinds.len() as u64;
    p.kernels
        .sort_unstable_by_key(|k| (k.start, k.group, k.seq));
    p
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
    // Driver calls first: a runtime call with the same correlation replaces one (`launch`).
    let mut order: Vec<usize> = (0..cpu.height())
        .filter(|&i| crate::launch::is_launch_category(c.cat[i]))
        .collect();
    order.sort_by_key(|&i| c.cat[i] == Some("runtime"));
    let launches: HashMap<i64, usize> = order
        .into_iter()
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
