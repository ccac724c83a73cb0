//! A run's communication kernels, read a chunk of ranks at a time and numbered into
//! instances as they arrive.
//!
//! A 1,000-rank job holds millions of comm kernels. Holding them as a polars frame (strings
//! and all) would take gigabytes, so each rank's partition is read on its own, turned into
//! 32-byte `Kernel`s keyed by an instance index, and dropped before the next is read.
//! Everything a rank can decide alone (its groups, seqs, kinds and sizes) is done by
//! `prepare` on the worker threads; the job-wide numbering left here is one array lookup per
//! kernel (1,000 ranks: 2.2 s of serial work before, when this file did it all).

use std::collections::HashMap;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::dataset::DatasetError;

use super::prepare::{self, Prepared, SeenGroup};

/// `Kernel::step` for a kernel outside every step.
pub const NO_STEP: i64 = i64::MIN;

/// One communication kernel of one rank.
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) step: i64,
    /// Index into `Loaded::instances`.
    pub(crate) inst: u32,
    /// `COMM_OPS` index.
    pub(crate) kind: u8,
}

/// A rank's comm kernels, in launch order.
#[derive(Debug, Default)]
pub struct RankKernels {
    pub(crate) rank: i64,
    pub(crate) kernels: Vec<Kernel>,
}

/// What the members of an instance agree on (or not), gathered while loading.
#[derive(Debug, Clone)]
pub struct InstanceKey {
    /// Index of the instance's process group in [`Job::groups`](super::Job::groups).
    pub group: u32,
    /// The kernel's number among its group's collectives, in launch order (or the trace's `Seq`).
    pub seq: i64,
    /// The kind of the lowest-ranked member.
    pub kind: u8,
    pub(crate) kind_mismatch: bool,
    pub(crate) members: u32,
    pub(crate) bytes: Option<i64>,
}

/// A process group as the kernels name it.
#[derive(Debug, Clone)]
pub struct Group {
    pub(crate) key: String,
    /// Members the group has: `Group size`, the ranks list, else the run's world size.
    pub(crate) size: Option<i64>,
    /// Ranks of the run with at least one kernel of the group.
    pub(crate) present: u32,
    /// Instance index by seq (`u32::MAX`: none yet), for the seqs counted from zero.
    seqs: Vec<u32>,
}

/// A run's comm kernels, numbered into instances.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    pub ranks: Vec<RankKernels>,
    pub groups: Vec<Group>,
    pub instances: Vec<InstanceKey>,
    /// Comm kernels whose kind came from the launching `c10d::` operator.
    pub kinds_from_ops: u64,
    group_idx: HashMap<String, u32>,
    inst_idx: FxHashMap<(u32, i64), u32>,
}

/// Ranks read in parallel at a time: enough to keep every core busy, few enough that their
/// kernels stay small.
const RANKS_PER_BATCH: usize = 64;

/// Reads the comm kernels of `ranks` (sorted) of `run`: each rank's partition is read and
/// numbered on its own (in parallel, `prepare`); only the job-wide group and instance
/// indices are assigned here, in rank order.
pub(super) fn load(
    root: &Path,
    run: &str,
    ranks: &[i64],
    world_size: Option<i64>,
) -> Result<Loaded, DatasetError> {
    let mut out = Loaded::default();
    // A one-rank run is usually a single-GPU trace without comm kernels: worth checking
    // first. Among many ranks, nearly every one has them.
    let check_first = ranks.len() == 1;
    for batch in ranks.chunks(RANKS_PER_BATCH) {
        let read = crate::par::map(batch, |&rank| prepare::rank(root, run, rank, check_first))?;
        for (&rank, p) in batch.iter().zip(read) {
            out.kinds_from_ops += p.kinds_from_ops;
            out.add_rank(rank, p, world_size);
        }
    }
    Ok(out)
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
    /// Files one rank's prepared kernels under the job's groups and instances.
    fn add_rank(&mut self, rank: i64, p: Prepared, world: Option<i64>) {
        let groups: Vec<u32> = p.groups.iter().map(|g| self.group(g, world)).collect();
        let kernels = p
            .kernels
            .iter()
            .map(|k| Kernel {
                start: k.start,
                end: k.end,
                step: k.step,
                inst: self.instance(groups[k.group as usize], k.seq, k.kind, k.bytes),
                kind: k.kind,
            })
            .collect();
        self.ranks.push(RankKernels { rank, kernels });
    }

    /// The index of a group, created on first sight; the rank adding it counts as present.
    fn group(&mut self, seen: &SeenGroup, world: Option<i64>) -> u32 {
        let g = match self.group_idx.get(seen.key.as_str()) {
            Some(&g) => g,
            None => {
                self.groups.push(Group {
                    key: seen.key.clone(),
                    size: seen.size.or(world),
                    present: 0,
                    seqs: vec![],
                });
                let g = self.groups.len() as u32 - 1;
                self.group_idx.insert(seen.key.clone(), g);
                g
            }
        };
        let group = &mut self.groups[g as usize];
        group.present += 1;
        group.size = group.size.max(seen.size);
        g
    }

    fn instance(&mut self, group: u32, seq: i64, kind: u8, bytes: Option<i64>) -> u32 {
        let n = self.instances.len() as u32;
        let idx = self.instance_slot(group, seq, n);
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

    /// The instance index of (group, seq), `new` when it has none yet. Seqs are counted from
    /// zero, so most sit in the group's dense table (one array index per kernel instead of a
    /// hash); the trace's own `Seq` may be anything and falls back to the hash.
    fn instance_slot(&mut self, group: u32, seq: i64, new: u32) -> u32 {
        const DENSE: i64 = 1 << 20;
        let seqs = &mut self.groups[group as usize].seqs;
        if (0..DENSE).contains(&seq) {
            let i = seq as usize;
            if seqs.len() <= i {
                seqs.resize(i + 1, u32::MAX);
            }
            if seqs[i] == u32::MAX {
                seqs[i] = new;
            }
            return seqs[i];
        }
        *self.inst_idx.entry((group, seq)).or_insert(new)
    }
}
