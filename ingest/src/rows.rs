//! Rows as the parsers produce them, before they become Arrow columns.
//!
//! Strings (kernel names, shapes) repeat millions of times, so rows hold `u32` ids into the
//! batch's `Interner`; the sink re-maps them into its own table once per distinct string.

use std::hash::Hasher;

use hashbrown::HashTable;
use rustc_hash::{FxHashMap, FxHasher};

use crate::classify::{Category, Kind};
use crate::diag::Diagnostics;

/// Distinct strings of a batch.
#[derive(Default, Debug, Clone)]
pub(crate) struct Interner {
    /// Every string's bytes, one after the other (each was a whole `&str`, so every string
    /// in it starts and ends on a character boundary).
    ///
    /// Why one buffer, not a `Box<str>` each: many strings are one step's name each
    /// (`ProfilerStep#N`, a roctx message), and an allocation of ~20 bytes costs 32 of the
    /// heap and 16 of the box: ~48 bytes a string against its length and 8 here.
    text: String,
    /// Where string `i` ends in `text` (it starts where string `i - 1` ends).
    ends: Vec<usize>,
    /// The id of every string, found by its bytes (so a reader can look a raw JSON string up
    /// before validating it). Ids alone, hashed from `strings`: a map keyed by a copy of each
    /// string held 40 bytes and an allocation more per string, which on traces of very many
    /// steps (a `ProfilerStep#N` name each) was the largest part of what grew with the trace.
    ids: HashTable<u32>,
    /// Shape texts seen in another layout than the canonical one → the canonical text's id.
    shape_layouts: FxHashMap<Box<[u8]>, u32>,
}

/// String `i` of `text` and `ends` (an `Interner`'s), without borrowing the interner whole.
#[inline]
fn nth<'a>(text: &'a str, ends: &[usize], i: u32) -> &'a str {
    let i = i as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &text[start..ends[i]]
}

impl Interner {
    pub(crate) fn id(&mut self, s: &str) -> u32 {
        if let Some(i) = self.find(s.as_bytes()) {
            return i;
        }
        let i = self.append(s);
        let (text, ends) = (&self.text, &self.ends);
        let rehash = |&j: &u32| hash(nth(text, ends, j).as_bytes());
        self.ids.insert_unique(hash(s.as_bytes()), i, rehash);
        i
    }

    /// Adds `s` as a new string that `find` and `id` do not find: for a caller that keeps
    /// the table of ids bounded (`rocprof::messages`, whose every message may be new).
    pub(crate) fn append(&mut self, s: &str) -> u32 {
        self.text.push_str(s);
        self.ends.push(self.text.len());
        (self.ends.len() - 1) as u32
    }

    /// The id of a string already interned with these bytes (which are then valid UTF-8).
    #[inline]
    pub(crate) fn find(&self, s: &[u8]) -> Option<u32> {
        let (text, ends) = (&self.text, &self.ends);
        let same = |&j: &u32| nth(text, ends, j).as_bytes() == s;
        self.ids.find(hash(s), same).copied()
    }

    /// How many strings there are (ids are `0..len`).
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Every string, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.ends.len() as u32).map(|i| self.get(i))
    }

    /// The id of a shape column's raw JSON text (`Input Dims`…), interned in its canonical
    /// layout (`json::canonical`); `None` when it is not UTF-8. A raw text met before is
    /// one hash lookup, whatever its layout. The second value says whether the string
    /// interned is `raw` itself (the trace wrote it in the canonical layout).
    #[inline]
    pub(crate) fn shape_as_written(&mut self, raw: &[u8]) -> Option<(u32, bool)> {
        if let Some(i) = self.find(raw) {
            return Some((i, true));
        }
        if let Some(&i) = self.shape_layouts.get(raw) {
            return Some((i, false));
        }
        let text = std::str::from_utf8(raw).ok()?;
        match crate::json::canonical::canonical(text) {
            std::borrow::Cow::Borrowed(t) => Some((self.id(t), true)),
            std::borrow::Cow::Owned(t) => {
                let i = self.id(&t);
                self.shape_layouts.insert(raw.into(), i);
                Some((i, false))
            }
        }
    }

    pub(crate) fn get(&self, i: u32) -> &str {
        nth(&self.text, &self.ends, i)
    }

    /// The length in bytes of string `i` (`get(i).len()` without slicing the text).
    #[inline]
    pub(crate) fn byte_len(&self, i: u32) -> usize {
        let i = i as usize;
        self.ends[i] - if i == 0 { 0 } else { self.ends[i - 1] }
    }

    /// The bytes of every string together.
    pub(crate) fn text_len(&self) -> usize {
        self.text.len()
    }

    /// The strings by id alone, without the maps that find an id (`get` answers, `find`
    /// does not): what a settle needs once every string is interned, at about half the
    /// memory, which on traces of very many steps (a `ProfilerStep#N` name each) was most
    /// of what grew (docs/PERFORMANCE.md, "Peak RSS at any file size").
    pub(crate) fn into_lookup(mut self) -> Interner {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        Interner {
            text: self.text,
            ends: self.ends,
            ..Interner::default()
        }
    }
}

/// The hash the interner finds a string's id by.
#[inline]
fn hash(s: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(s);
    h.finish()
}

/// How a GPU activity got its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepSource {
    Launch,
    GpuTime,
    /// The activity's own `args.step`, in a trace without step spans.
    Arg,
    None,
}

impl StepSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StepSource::Launch => "launch",
            StepSource::GpuTime => "gpu_time",
            StepSource::Arg => "arg",
            StepSource::None => "none",
        }
    }
}

/// Kernel args only some kernels carry (rare: boxed): the collective metadata Kineto copies
/// onto NCCL/RCCL kernels, and the GEMM shape aorta's own workloads write on theirs.
#[derive(Debug, Clone, Default)]
pub(crate) struct CollArgs {
    pub collective_name: Option<u32>,
    pub in_msg_nelems: Option<i64>,
    pub out_msg_nelems: Option<i64>,
    pub group_size: Option<i64>,
    pub dtype: Option<u32>,
    pub process_group: Option<u32>,
    pub process_group_ranks: Option<u32>,
    /// `args["Seq"]`: the collective's sequence number in its process group.
    pub collective_seq: Option<i64>,
    /// `args["Comms Id"]` as text.
    pub comms_id: Option<u32>,
    /// `args.m`, `args.n`, `args.k`: a GEMM's shape as a workload wrote it.
    pub gemm: [Option<i64>; 3],
}

#[derive(Debug, Clone)]
pub(crate) struct GpuRow {
    pub device: i64,
    pub stream: i64,
    pub kind: Kind,
    pub name: u32,
    pub category: Category,
    pub comm_op: Option<&'static str>,
    pub start: i64,
    /// Clipped end (set by the sink).
    pub end: i64,
    pub raw_end: i64,
    pub correlation: Option<i64>,
    pub external_id: Option<i64>,
    pub step: Option<i64>,
    pub step_source: StepSource,
    pub grid: [Option<i64>; 3],
    pub block: [Option<i64>; 3],
    pub bytes: Option<i64>,
    pub coll: Option<Box<CollArgs>>,
}

/// What a CPU-side slice is (the `category` column of `cpu_ops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CpuCategory {
    /// A framework operator (`aten::mm`, Kineto `cpu_op`).
    CpuOp,
    /// A user range (`record_function`, NVTX, roctx; Kineto `user_annotation`).
    UserAnnotation,
    /// A GPU runtime call (`cudaLaunchKernel`, `hipMemcpyAsync`).
    Runtime,
    /// A GPU driver call (`cuLaunchKernel`).
    Driver,
    /// A Python function frame (Kineto's `python_function`, with stack tracing on).
    PythonFunction,
}

impl CpuCategory {
    pub(crate) const ALL: [CpuCategory; 5] = [
        CpuCategory::CpuOp,
        CpuCategory::UserAnnotation,
        CpuCategory::Runtime,
        CpuCategory::Driver,
        CpuCategory::PythonFunction,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CpuCategory::CpuOp => "cpu_op",
            CpuCategory::UserAnnotation => "user_annotation",
            CpuCategory::Runtime => "runtime",
            CpuCategory::Driver => "driver",
            CpuCategory::PythonFunction => "python_function",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CpuRow {
    pub category: CpuCategory,
    pub name: u32,
    pub pid: Option<i64>,
    pub tid: Option<i64>,
    pub start: i64,
    pub end: i64,
    pub correlation: Option<i64>,
    pub external_id: Option<i64>,
    pub step: Option<i64>,
    pub input_dims: Option<u32>,
    pub input_types: Option<u32>,
    pub concrete_inputs: Option<u32>,
    pub input_strides: Option<u32>,
}

/// What one parser worker produced from one sub-window.
#[derive(Default, Debug)]
pub(crate) struct Batch {
    pub strings: Interner,
    pub gpu: Vec<GpuRow>,
    pub cpu: Vec<CpuRow>,
    pub diag: Diagnostics,
}

impl Batch {
    /// The heap bytes its rows and strings take (not the interner's maps): what it costs
    /// while it waits for the writer.
    pub(crate) fn heap_bytes(&self) -> usize {
        let strings = &self.strings;
        self.gpu.capacity() * std::mem::size_of::<GpuRow>()
            + self.cpu.capacity() * std::mem::size_of::<CpuRow>()
            + strings.text.capacity()
            + strings.ends.capacity() * std::mem::size_of::<usize>()
    }

    /// Re-maps this batch's string ids into `into` and returns the rows.
    pub(crate) fn remap(self, into: &mut Interner) -> (Vec<GpuRow>, Vec<CpuRow>, Diagnostics) {
        let map: Vec<u32> = self.strings.iter().map(|s| into.id(s)).collect();
        let m = |i: u32| map[i as usize];
        let mo = |i: Option<u32>| i.map(m);
        let mut gpu = self.gpu;
        for r in &mut gpu {
            r.name = m(r.name);
            if let Some(c) = r.coll.as_deref_mut() {
                c.collective_name = mo(c.collective_name);
                c.dtype = mo(c.dtype);
                c.process_group = mo(c.process_group);
                c.process_group_ranks = mo(c.process_group_ranks);
                c.comms_id = mo(c.comms_id);
            }
        }
        let mut cpu = self.cpu;
        for r in &mut cpu {
            r.name = m(r.name);
            r.input_dims = mo(r.input_dims);
            r.input_types = mo(r.input_types);
            r.concrete_inputs = mo(r.concrete_inputs);
            r.input_strides = mo(r.input_strides);
        }
        (gpu, cpu, self.diag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings laid out one after the other come back whole, by id and in id order, found
    /// by their bytes (empty and multi-byte ones too), before and after `into_lookup`.
    #[test]
    fn interned_strings_come_back_whole() {
        let words = ["ProfilerStep#1", "", "ä→b", "ProfilerStep#10", "x"];
        let mut s = Interner::default();
        let ids: Vec<u32> = words.iter().map(|w| s.id(w)).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        // Met again: the same ids, nothing added.
        assert_eq!(s.id("ä→b"), 2);
        assert_eq!(s.id(""), 1);
        assert_eq!(s.len(), words.len());
        assert_eq!(s.find("ProfilerStep#1".as_bytes()), Some(0));
        assert_eq!(s.find(b"ProfilerStep#"), None);
        assert_eq!(s.iter().collect::<Vec<_>>(), words);
        let l = s.into_lookup();
        assert_eq!((0..5).map(|i| l.get(i)).collect::<Vec<_>>(), words);
    }
}
