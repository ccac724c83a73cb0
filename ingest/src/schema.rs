//! The dataset schema, defined once.
//!
//! Ingest writes these tables and transform reads them; docs/SCHEMA.md is generated from
//! this module (`aorta schema --markdown`) and a test fails when the two drift. Every table is
//! hive-partitioned as `<out>/<table>/run=<label>/rank=<r>/part-<hash>.parquet`: `run` and
//! `rank` live in the path, not in the files, so pandas, DuckDB and polars all read the
//! dataset without being told about duplicate columns.

use arrow_schema::DataType;

mod memory;
mod perf;
pub(crate) use memory::MEMORY;
pub use perf::{OP_PERF, PERF_STEPS};

/// Bumped whenever a column is added, removed, renamed or changes meaning.
pub const SCHEMA_VERSION: u32 = 6;

/// The physical type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    /// 64-bit signed integer (times, counts, ids).
    Int64,
    /// 64-bit float (ratios, rates).
    Float64,
    /// UTF-8 text.
    Utf8,
}

impl ColType {
    pub(crate) fn arrow(self) -> DataType {
        match self {
            ColType::Int64 => DataType::Int64,
            ColType::Float64 => DataType::Float64,
            ColType::Utf8 => DataType::Utf8,
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            ColType::Int64 => "int64",
            ColType::Float64 => "float64",
            ColType::Utf8 => "string",
        }
    }
}

/// One column of a table, as docs/SCHEMA.md lists it.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The column name in the Parquet files.
    pub name: &'static str,
    /// Its physical type.
    pub ty: ColType,
    /// Whether it may hold nulls.
    pub nullable: bool,
    pub(crate) doc: &'static str,
}

/// One table of the dataset: its name (the directory under the dataset root) and its columns,
/// in file order.
#[derive(Debug)]
pub struct Table {
    /// The table's name, and its directory under the dataset root.
    pub name: &'static str,
    pub(crate) doc: &'static str,
    /// The columns, in the order every part holds them (partition columns excluded).
    pub columns: &'static [Column],
}

impl Table {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }
}

const fn req(name: &'static str, ty: ColType, doc: &'static str) -> Column {
    Column {
        name,
        ty,
        nullable: false,
        doc,
    }
}

const fn opt(name: &'static str, ty: ColType, doc: &'static str) -> Column {
    Column {
        name,
        ty,
        nullable: true,
        doc,
    }
}

use ColType::{Float64 as F64, Int64 as I64, Utf8 as S};

/// The hive partition keys, present in every table's path.
pub const PARTITION_COLUMNS: &[Column] = &[
    req(
        "run",
        S,
        "Run label: one job. The path under the ingest root of the directory holding the file, `<dir>/<name>` for files of a directory that cannot be one job, or `--label`.",
    ),
    req(
        "rank",
        I64,
        "Global rank of the process that wrote the file.",
    ),
];

pub(crate) const RUNS: Table = Table {
    name: "runs",
    doc: "One row per ingested file.",
    columns: &[
        req("source_path", S, "Input file as given on the command line (joined with the walked path)."),
        req("format", S, "`kineto`, `chrome`, `nsys`, `jsonl`, `rocprofv3-csv`, `rocprofv3-json` or `rocpd`."),
        req("platform", S, "`cuda`, `rocm` or `unknown`: from version keys, else the device name, else warp size, else the runtime API names in the trace (`cuda*`/`hip*`)."),
        opt("device_name", S, "Name of the GPU the rank's activities ran on (deviceProperties)."),
        opt("device_index", I64, "Device index of the rank's GPU activities (Kineto GPU `pid`)."),
        opt("world_size", I64, "`distributedInfo.world_size` (or JSONL `world_size`)."),
        req("rank_source", S, "Where the rank came from: `distributed_info`, `rank_map` (`--rank-map`, by pid), `file_name`, `flag`, `record` (JSONL field), `pid_order` (one of several processes of an Nsight Systems file, numbered in pid order), `environment` (rocpd process environment `RANK`) or `default` (0, with a diagnostic)."),
        opt("runtime_version", S, "Version keys as written, e.g. `cuda_runtime_version=13000`."),
        opt("params", S, "Run parameters as a JSON object: the trace's top-level keys that Kineto does not write itself, i.e. what the user added with `prof.add_metadata_json` (aorta's own workloads put their flags and environment knobs under `aorta_params`), and one key per `aorta ingest --param KEY=VALUE` (a string; the command line wins); null when there are none. Values over 64 KiB are replaced by a note of their size."),
        opt("base_time_ns", I64, "`baseTimeNanoseconds` when the trace has relative timestamps; null when `ts` is absolute."),
        opt("clock_offset_ns", I64, "This rank's clock minus the job's reference rank's (the lowest rank present), estimated by `aorta collectives` as the median of matched collective end-time differences; null until it runs or when no collective links the rank to the reference. Aligned time = raw time − offset; raw timestamps are never rewritten."),
        opt("clock_offset_spread_ns", I64, "p90 − p10 of the per-instance end-time differences behind `clock_offset_ns`."),
        opt("clock_source", S, "`reference` (the reference rank itself), `collective_ends` (estimated from matched collectives), `none` (no collective links this rank to the reference); null until `aorta collectives` runs."),
        opt("first_ns", I64, "Earliest start of any GPU activity or CPU op (Unix epoch ns)."),
        opt("last_ns", I64, "Latest end of any GPU activity or CPU op (Unix epoch ns)."),
        req("event_count", I64, "Events in the file (every element of `traceEvents`, or JSONL lines)."),
        req("gpu_activity_count", I64, "Rows written to `gpu_activities`."),
        req("kernel_count", I64, "Of those, kernels."),
        req("cpu_op_count", I64, "Rows written to `cpu_ops`."),
        req("step_count", I64, "Rows written to `steps`."),
        req("metric_count", I64, "Rows written to `metrics`."),
        req("diagnostic_count", I64, "Total findings counted in `diagnostics`."),
        req("file_bytes", I64, "Size of the input file on disk."),
        req("content_hash", S, "xxh3-128 of the file's bytes on disk; unchanged files are skipped on re-ingest."),
        req("rules_version", S, "Version of the classification rule table, plus `+user.` and a hash of the `--rules` file with one."),
        opt("user_rules", S, "The `--rules` file's text as given to ingest; null without one. Its `[[subcategory]]` rows are applied when the subcategories are computed (docs/CLASSIFICATION.md)."),
        req("aorta_version", S, "Version of aorta that wrote the row."),
        req("schema_version", I64, "Dataset schema version (this document)."),
    ],
};

/// `gpu_activities`: one row per kernel, copy and memory set (docs/SCHEMA.md).
pub const GPU_ACTIVITIES: Table = Table {
    name: "gpu_activities",
    doc: "Kernels, memcpys and memsets, one row each. Times are Unix epoch nanoseconds (rocprofv3/rocpd: the host's boot-time clock, as written).",
    columns: &[
        req("device", I64, "GPU index (Kineto GPU `pid` / `args.device`; rocprof: index among GPU agents): a device, not a rank."),
        req("stream", I64, "Stream id (`args.stream`, else `tid`)."),
        req("kind", S, "`kernel`, `memcpy` or `memset` (from the trace category)."),
        req("name", S, "Kernel or copy name as written (dictionary-encoded)."),
        req("category", S, "`comm`, `gemm`, `attention`, `memcpy`, `memset` or `other_compute` (docs/CLASSIFICATION.md)."),
        opt("comm_op", S, "For comm: `all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `send_recv`, `broadcast`, `reduce` or `other`."),
        req("start_ns", I64, "Start, exact integer ns."),
        req("end_ns", I64, "End, clipped to the next activity's start on the same stream (METRICS.md data quality)."),
        req("raw_end_ns", I64, "End as the trace wrote it (start + dur), before clipping."),
        opt("correlation", I64, "`args.correlation`: links to the launching runtime call in `cpu_ops`."),
        opt("external_id", I64, "`args[\"External id\"]`: links to the enclosing CPU op."),
        opt("step", I64, "Profiler step N of `ProfilerStep#N` (null when the trace has no steps)."),
        req("step_source", S, "`launch` (runtime call's step), `gpu_time` (fallback on the activity's own start), `arg` (the activity's own `args.step`, in a trace without `ProfilerStep#N` spans, as aorta's own workloads write it) or `none`."),
        opt("grid_x", I64, "Grid x as written (CUDA: blocks; ROCm Kineto: blocks or work-items by launch API; rocprof: work-items, so workgroups = grid / block)."),
        opt("grid_y", I64, "Grid y."),
        opt("grid_z", I64, "Grid z."),
        opt("block_x", I64, "Block x."),
        opt("block_y", I64, "Block y."),
        opt("block_z", I64, "Block z."),
        opt("bytes", I64, "Bytes moved or set (memcpy/memset)."),
        opt("collective_name", S, "`args[\"Collective name\"]` (e.g. `_allgather_base`)."),
        opt("in_msg_nelems", I64, "`args[\"In msg nelems\"]`."),
        opt("out_msg_nelems", I64, "`args[\"Out msg nelems\"]`."),
        opt("group_size", I64, "`args[\"Group size\"]`."),
        opt("dtype", S, "`args.dtype`: the collective's (PyTorch writes it on NCCL kernels) or the GEMM's (aorta's workloads write it on theirs)."),
        opt("process_group", S, "`args[\"Process Group Name\"]`."),
        opt("process_group_ranks", S, "`args[\"Process Group Ranks\"]` as text, e.g. `[0, 1]`."),
        opt("collective_seq", I64, "`args[\"Seq\"]`: the collective's sequence number in its process group (newer PyTorch)."),
        opt("comms_id", S, "`args[\"Comms Id\"]` as text (an integer id as its decimal digits; newer PyTorch)."),
        opt("gemm_m", I64, "`args.m`: the GEMM's M (rows of A and C), where the kernel says it (aorta's own workloads do; `aorta perf` takes the FLOPs from it when no CPU op has shapes)."),
        opt("gemm_n", I64, "`args.n`: the GEMM's N (columns of B and C)."),
        opt("gemm_k", I64, "`args.k`: the GEMM's K (the reduced dimension)."),
    ],
};

pub(crate) const CPU_OPS: Table = Table {
    name: "cpu_ops",
    doc: "CPU-side slices: operators, annotations, runtime/driver calls, python functions.",
    columns: &[
        req(
            "category",
            S,
            "`cpu_op`, `user_annotation`, `runtime`, `driver` or `python_function`.",
        ),
        req("name", S, "Name as written (dictionary-encoded)."),
        opt("pid", I64, "OS process id."),
        opt("tid", I64, "OS thread id."),
        req("start_ns", I64, "Start, exact integer ns."),
        req("end_ns", I64, "End (start + dur)."),
        opt(
            "correlation",
            I64,
            "`args.correlation` (runtime/driver calls).",
        ),
        opt("external_id", I64, "`args[\"External id\"]`."),
        opt(
            "step",
            I64,
            "Step whose `ProfilerStep#N` span (same process) contains the start.",
        ),
        opt(
            "input_dims",
            S,
            "`args[\"Input Dims\"]` as JSON text in one layout whatever the trace's whitespace (Kineto's: one space after each `,` and `:`, no other blank outside strings), e.g. `[[8192, 4096], [4096, 4096]]`.",
        ),
        opt("input_types", S, "`args[\"Input type\"]` as JSON text, laid out as `input_dims`."),
        opt(
            "concrete_inputs",
            S,
            "`args[\"Concrete Inputs\"]` as JSON text laid out as `input_dims`: the scalar arguments as strings, `\"\"` for tensors, e.g. `[\"\", \"\", \"\", \"0.\", \"True\"]` (SDPA's `is_causal`, a convolution's stride, padding and groups).",
        ),
        opt(
            "input_strides",
            S,
            "`args[\"Input Strides\"]` as JSON text laid out as `input_dims`, one list per argument, e.g. `[[512, 1], [1, 512]]` (a transposed operand has its unit stride first).",
        ),
    ],
};

pub(crate) const STEPS: Table = Table {
    name: "steps",
    doc: "One row per profiler step per rank (one `null` step when the trace has none).",
    columns: &[
        opt(
            "step",
            I64,
            "N of `ProfilerStep#N`; null for a trace without steps.",
        ),
        opt(
            "cpu_start_ns",
            I64,
            "Start of the CPU `ProfilerStep#N` span.",
        ),
        opt("cpu_end_ns", I64, "End of the CPU span."),
        opt(
            "gpu_start_ns",
            I64,
            "First start of the step's GPU activities.",
        ),
        opt(
            "gpu_end_ns",
            I64,
            "Last (clipped) end of the step's GPU activities.",
        ),
        req(
            "gpu_activity_count",
            I64,
            "GPU activities attributed to the step.",
        ),
        req("kernel_count", I64, "Of those, kernels."),
    ],
};

pub(crate) const METRICS: Table = Table {
    name: "metrics",
    doc: "Per-iteration JSONL logs in long form: every numeric field, flattened.",
    columns: &[
        opt("step", I64, "`global_step`, else `step`, else the line's index."),
        req("key", S, "Dotted path of the field, e.g. `profile.overlap.overlap_ms.compute_comm`; list items as `ranges[3].duration_ms`."),
        req("value", F64, "The number (booleans as 0/1)."),
        req("line", I64, "1-based line in the file."),
    ],
};

pub(crate) const DIAGNOSTICS: Table = Table {
    name: "diagnostics",
    doc: "Data-quality findings per file: counted, with the first example. Nothing is fixed silently.",
    columns: &[
        req("code", S, "What was found (docs/SCHEMA.md lists the codes)."),
        req("count", I64, "How many times."),
        req("example", S, "The first occurrence, in words."),
        opt("offset", I64, "Byte offset (decompressed) or line of the first occurrence."),
    ],
};

/// The overlap metrics of one window, shared by `overlap_steps` and `overlap_ranks`
/// (docs/METRICS.md; docs/OVERLAP.md says them in words).
macro_rules! overlap_metric_columns {
    () => {
        [
            opt("window_start_ns", I64, "Window start: first start of the window's GPU activities (null for JSONL)."),
            opt("window_end_ns", I64, "Window end: last (clipped) end of the window's GPU activities (null for JSONL)."),
            opt("window_ns", I64, "`window_end_ns` − `window_start_ns`: the GPU window (JSONL: `profile.total_ms`)."),
            opt("step_ns", I64, "The step itself: its `ProfilerStep` span (the `steps` table's CPU span); null for a trace step without one, for JSONL, and for activity outside every step. Per rank: the sum over its steps. A host or dataloader stall shows here and not in `window_ns`."),
            opt("idle_before_ns", I64, "GPU idle inside the step before its first activity: the time from the span's start to the step's first activity (the whole span when the step ran no GPU activity) in which the GPU ran nothing at all, on any stream; a previous step's kernels still running there make it busy, not idle (a GPU running a step behind the CPU). Null without a span. Per rank: the sum."),
            opt("idle_after_ns", I64, "GPU idle inside the step after its last activity ends, in which the GPU ran nothing at all (0 when the GPU runs past the span's end); null without a span. Per rank: the sum. The idle between activities is `idle_ns`."),
            req("activity_count", I64, "GPU activities in the window (JSONL: 0)."),
            opt("comm_ns", I64, "Time at least one communication kernel runs: \\|U(comm)\\| across all streams."),
            opt("gemm_ns", I64, "\\|U(gemm)\\|."),
            opt("compute_ns", I64, "\\|U(compute)\\|, compute = gemm ∪ attention ∪ other_compute (JSONL: `per_stream_ms.compute`)."),
            opt("busy_ns", I64, "\\|U(any GPU activity)\\|."),
            opt("idle_ns", I64, "`window_ns` − `busy_ns`: GPU idle between the window's activities."),
            opt("memcpy_ns", I64, "\\|U(memcpy)\\|."),
            opt("gemm_comm_overlap_ns", I64, "\\|U(gemm) ∩ U(comm)\\|."),
            opt("compute_comm_overlap_ns", I64, "\\|U(compute) ∩ U(comm)\\| (JSONL: `overlap_ms.compute_comm`)."),
            opt("exposed_comm_ns", I64, "`comm_ns` − `compute_comm_overlap_ns`: communication with no compute kernel running."),
            opt("tp_overlap_ratio", F64, "`gemm_comm_overlap_ns` / min(`gemm_ns`, `comm_ns`) (TP-overlap-tuner); null when the min is 0."),
            opt("comm_hidden_pct", F64, "100 × `compute_comm_overlap_ns` / `comm_ns` (Holistic Trace Analysis); null when `comm_ns` is 0."),
            opt("compute_overlap_ratio", F64, "`compute_comm_overlap_ns` / `compute_ns` (the Python aorta report); null when `compute_ns` is 0."),
            opt("gemm_memcpy_overlap_ns", I64, "\\|U(gemm) ∩ U(memcpy)\\|."),
            opt("exposed_memcpy_ns", I64, "\\|U(memcpy)\\| − \\|U(memcpy) ∩ (U(compute) ∪ U(comm))\\|."),
            opt("comm_wait_ns", I64, "\\|U(wait parts of comm kernels)\\|: time inside collectives spent waiting for the last member to arrive (docs/COLLECTIVES.md); null when no kernel of the rank was matched across ranks."),
            opt("comm_transfer_ns", I64, "\\|U(transfer parts of comm kernels)\\|: the rest of each kernel, after the last member arrived (unmatched kernels count here)."),
            opt("exposed_transfer_ns", I64, "\\|U(transfer parts) − U(compute)\\|: the communication that better overlap can hide."),
        ]
    };
}

const OVERLAP_METRICS: [Column; 24] = overlap_metric_columns!();

/// Two leading columns, then the overlap metrics.
const fn with_metrics(first: Column, second: Column) -> [Column; OVERLAP_METRICS.len() + 2] {
    let mut out = [first; OVERLAP_METRICS.len() + 2];
    out[1] = second;
    let mut i = 0;
    while i < OVERLAP_METRICS.len() {
        out[i + 2] = OVERLAP_METRICS[i];
        i += 1;
    }
    out
}

const STEP_COLUMNS: [Column; OVERLAP_METRICS.len() + 2] = with_metrics(
    opt("step", I64, "Step (ProfilerStep N, or the JSONL `global_step`); null for a trace without steps or activities outside every step."),
    req("source", S, "`trace` (GPU activities) or `jsonl` (the Python aorta `profile.overlap.*` metrics)."),
);

const RANK_COLUMNS: [Column; OVERLAP_METRICS.len() + 2] = with_metrics(
    req(
        "step_count",
        I64,
        "Steps in the rank's whole window; activity outside every step is not a step (0 for a trace without steps).",
    ),
    req(
        "source",
        S,
        "`trace` or `jsonl`; JSONL ranks sum their steps.",
    ),
);

/// `overlap_steps`: the overlap metrics per rank and step (docs/SCHEMA.md).
pub const OVERLAP_STEPS: Table = Table {
    name: "overlap_steps",
    doc: "Written by `aorta overlap`: the overlap metrics per rank and step. A step's window is [first start, last end] of the activities attributed to it; unions are across all streams of the rank.",
    columns: &STEP_COLUMNS,
};

/// `overlap_ranks`: the overlap metrics per rank over its whole window.
pub const OVERLAP_RANKS: Table = Table {
    name: "overlap_ranks",
    doc: "Written by `aorta overlap`: the same metrics per rank over the whole window (every step, the last one included).",
    columns: &RANK_COLUMNS,
};

/// `overlap_collectives`: communication per collective kind, per step and per rank.
pub const OVERLAP_COLLECTIVES: Table = Table {
    name: "overlap_collectives",
    doc: "Written by `aorta overlap`: communication per collective kind, per step (`level` = `step`) and per rank (`level` = `rank`).",
    columns: &[
        req("level", S, "`step` (one step's window) or `rank` (the whole window; `step` is null)."),
        opt("step", I64, "The step, for `level` = `step`."),
        req("comm_op", S, "Collective kind: `all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `send_recv`, `broadcast`, `reduce` or `other`."),
        req("activity_count", I64, "Comm activities of this kind (JSONL: 0)."),
        req("comm_ns", I64, "\\|U(comm of this kind)\\| (JSONL: `per_stream_ms` of the `allreduce`/`reducescatter` stream)."),
        req("exposed_comm_ns", I64, "`comm_ns` − \\|U(comm of this kind) ∩ U(compute)\\| (JSONL: minus `overlap_ms.compute_<stream>`)."),
    ],
};

/// `overlap_streams`: busy time per stream and step.
pub const OVERLAP_STREAMS: Table = Table {
    name: "overlap_streams",
    doc: "Written by `aorta overlap`: busy time per stream and step, the Python aorta `per_stream_ms`.",
    columns: &[
        opt("step", I64, "The step (as in `overlap_steps`)."),
        req("stream", S, "Stream id as text (`7`), or the Python aorta stream name (`compute`, `allreduce`, …)."),
        req("activity_count", I64, "GPU activities on the stream in the step (JSONL: 0)."),
        req("busy_ns", I64, "\\|U(activities on the stream)\\|."),
    ],
};

/// `overlap_stream_pairs`: time two streams are busy together, per step.
pub const OVERLAP_STREAM_PAIRS: Table = Table {
    name: "overlap_stream_pairs",
    doc: "Written by `aorta overlap`: time two streams are busy together, per step (the Python aorta `overlap_ms`, for every pair); pairs that never overlap are left out.",
    columns: &[
        opt("step", I64, "The step."),
        req("stream", S, "First stream (the smaller id)."),
        req("other_stream", S, "Second stream."),
        req("overlap_ns", I64, "\\|U(stream) ∩ U(other_stream)\\|."),
    ],
};

/// `collectives`: one row per communication kernel, matched into instances across ranks.
pub const COLLECTIVES: Table = Table {
    name: "collectives",
    doc: "Written by `aorta collectives`: one row per communication kernel of a rank, matched across the ranks of the run into instances (`process_group`, `seq`); docs/COLLECTIVES.md.",
    columns: &[
        req("process_group", S, "The instance's group: its `Process Group Name` (PyTorch names each group uniquely in a job), else its `Process Group Ranks` text, else `default` (every rank of the run)."),
        req("seq", I64, "The kernel's number among its group's collectives on this rank, in launch order (all kinds together), or the trace's own `Seq`."),
        req("kind", S, "Collective kind (`comm_op`; RCCL `ncclDevKernel_Generic` kernels take it from the launching `c10d::` operator)."),
        req("status", S, "`paired` (every member of the group present in the run has this instance, same kind), `single` (a one-rank group), `unpaired` (only one member of a larger group traced), `kind_mismatch`, or `missing_ranks` (a member has fewer instances: a truncated trace)."),
        opt("step", I64, "The kernel's step (as in `gpu_activities`)."),
        opt("bytes", I64, "Message size: the larger of `In msg nelems` and `Out msg nelems` × the dtype's size (as nccl-tests counts it); null when the trace does not say."),
        req("start_ns", I64, "Kernel start, raw (this rank's clock)."),
        req("end_ns", I64, "Kernel end, raw (clipped as in `gpu_activities`)."),
        opt("arrival_ns", I64, "`start_ns` − this rank's clock offset: the start on the reference rank's clock. Null when not paired."),
        opt("wait_ns", I64, "min(max(last member's arrival − this arrival, 0), duration): time this kernel ran before the last member arrived. Null when not paired."),
        opt("transfer_ns", I64, "Duration − `wait_ns`. Null when not paired."),
    ],
};

/// `collective_instances`: one row per collective instance of a run, with its arrivals.
pub const COLLECTIVE_INSTANCES: Table = Table {
    name: "collective_instances",
    doc: "Written by `aorta collectives`: one row per collective instance (`process_group`, `seq`) of a run, partitioned under the run's reference rank (the lowest rank present).",
    columns: &[
        req("process_group", S, "As in `collectives`."),
        req("seq", I64, "As in `collectives`."),
        req("kind", S, "The members' kind (the reference member's when they disagree)."),
        req("status", S, "`paired`, `single`, `unpaired`, `kind_mismatch` or `missing_ranks` (see `collectives`); only `paired` and `single` instances have the arrival columns."),
        req("ranks", I64, "Members present in the run."),
        opt("group_size", I64, "Members the group has (`Group size`, the `Process Group Ranks` list, else the run's world size): more than `ranks` when only some ranks were traced."),
        opt("step", I64, "The step of the last member's kernel."),
        opt("bytes", I64, "Message size (see `collectives`)."),
        opt("first_arrival_ns", I64, "Earliest aligned arrival."),
        opt("last_arrival_ns", I64, "Latest aligned arrival."),
        opt("skew_ns", I64, "`last_arrival_ns` − `first_arrival_ns`."),
        opt("last_rank", I64, "The member that arrived last (ties: the lowest rank)."),
        opt("caused_ns", I64, "Last arrival − the second-to-last: the delay the last rank alone imposed (0 for one member)."),
        opt("transfer_ns", I64, "The minimum transfer time over the members: the collective's own latency, without waiting."),
        opt("algbw_gbps", F64, "`bytes` / `transfer_ns` (GB/s)."),
        opt("busbw_gbps", F64, "`algbw_gbps` × the NCCL bus factor of the kind over `group_size` members (all_reduce 2(n−1)/n; all_gather, reduce_scatter (n−1)/n; others 1)."),
        opt("late_category", S, "What the last rank's GPU did in the `caused_ns` before its arrival, for late arrivals (`caused_ns` ≥ 50 µs): the category with the most time, or `idle` when the GPU was mostly idle (the host was late)."),
        opt("late_busy_ns", I64, "GPU-busy time of the last rank in that window (union over streams)."),
        opt("late_ops", S, "The top launching operators (else kernel names) in that window with their time, e.g. `aten::mm 1.20 ms; aten::add_ 0.31 ms`."),
    ],
};

/// `collective_ranks`: stragglers per rank, over the run and per step.
pub const COLLECTIVE_RANKS: Table = Table {
    name: "collective_ranks",
    doc: "Written by `aorta collectives`: stragglers, per rank over the run (`level` = `run`) and per step (`level` = `step`).",
    columns: &[
        req("level", S, "`run` (every instance) or `step`."),
        opt("step", I64, "The step, for `level` = `step`."),
        req("instances", I64, "Paired instances with this rank as a member."),
        req("times_last", I64, "Of those, instances where it arrived last."),
        req("caused_ns", I64, "Sum over those of (its arrival − the second-to-last arrival)."),
        req("wait_ns", I64, "Sum of `wait_ns` of its kernels (paired ones)."),
        req("transfer_ns", I64, "Sum of `transfer_ns` of its kernels (paired ones)."),
        req("straggler_rank", I64, "1 for the rank that caused the most delay in this run or step, 2 for the next, …: by `caused_ns`, then `times_last`, then rank."),
    ],
};

/// Every table, in the order docs/SCHEMA.md lists them.
pub const TABLES: &[&Table] = &[
    &RUNS,
    &GPU_ACTIVITIES,
    &CPU_OPS,
    &STEPS,
    &METRICS,
    &DIAGNOSTICS,
    &MEMORY,
];

/// Tables computed from the ingested ones (`aorta overlap`, `aorta collectives`, `aorta
/// perf`), written in the same layout.
pub const DERIVED_TABLES: &[&Table] = &[
    &OVERLAP_STEPS,
    &OVERLAP_RANKS,
    &OVERLAP_COLLECTIVES,
    &OVERLAP_STREAMS,
    &OVERLAP_STREAM_PAIRS,
    &COLLECTIVES,
    &COLLECTIVE_INSTANCES,
    &COLLECTIVE_RANKS,
    &OP_PERF,
    &PERF_STEPS,
];

/// The directory of one run of a table, relative to the dataset root: `<table>/run=<label>`,
/// the label percent-encoded (`encode_value`). Every dataset path aorta reads or writes is
/// built here or in `partition_dir`.
pub fn run_dir(table: &str, run: &str) -> std::path::PathBuf {
    std::path::Path::new(table).join(format!("run={}", encode_value(run)))
}

/// Bytes a partition value keeps as they are: letters, digits and `-_.~`.
const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A partition value as one path segment: every other ASCII byte (`/`, `=`, `%`, blanks,
/// control characters, punctuation) percent-encoded, as Hive and Spark write them; other
/// characters as they are (UTF-8). A label is data, not a path: `../x` stays inside its
/// table, and polars, pyarrow, DuckDB and Spark read the original label back from the `run`
/// column. Non-ASCII stays unencoded because Spark decodes each `%XX` into one character, not
/// into a byte of UTF-8 (`tests/it/notebooks.rs` reads hostile labels back with all four).
pub(crate) fn encode_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut buf = [0u8; 4];
    for c in v.chars() {
        if c.is_ascii() {
            out.extend(percent_encoding::utf8_percent_encode(
                c.encode_utf8(&mut buf),
                KEEP,
            ));
        } else {
            out.push(c);
        }
    }
    out
}

/// One (run, rank) partition of a table, relative to the dataset root:
/// `<table>/run=<label>/rank=<r>`.
pub fn partition_dir(table: &str, run: &str, rank: i64) -> std::path::PathBuf {
    run_dir(table, run).join(format!("rank={rank}"))
}

/// A part path (`<table>/run=<old>/rank=<r>/<file>`, relative to the dataset root) moved to
/// run `run`: the same table, rank and file name.
pub fn relabel_part(rel: &std::path::Path, run: &str) -> std::path::PathBuf {
    let mut parts = rel.iter();
    let table = parts
        .next()
        .map(|t| t.to_string_lossy())
        .unwrap_or_default();
    let _old = parts.next();
    let mut out = run_dir(&table, run);
    out.extend(parts);
    out
}

/// The table (ingested or derived) called `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES
        .iter()
        .chain(DERIVED_TABLES)
        .copied()
        .find(|t| t.name == name)
}

/// The column-by-column reference, as docs/SCHEMA.md carries it.
pub fn markdown() -> String {
    let mut s = format!(
        "# aorta dataset schema v{SCHEMA_VERSION}\n\n\
         Generated from `ingest/src/schema.rs` by `aorta schema --markdown`; a test fails if \
         this file drifts.\n\n\
         Layout: `<out>/<table>/run=<label>/rank=<r>/part-<hash>.parquet`, one part per input \
         file and table, zstd-compressed, string columns dictionary-encoded (a column chunk whose \
         dictionary reaches 1 MiB goes on in plain pages, as arrow-rs writes it). `<out>/manifest.json` \
         records the schema version and every input (path, hash, label, rank, parts and each part's \
         size and content hash, its findings per diagnostic code); an ingest in shards (`--shard I/N`) \
         keeps each shard's entries in `<out>/shards/<I>-of-<N>/manifest.json`, which readers \
         merge (docs/SCALE.md). The label \
         is percent-encoded in the path as Hive writes partition values (`a/b` is `run=a%2Fb`; \
         ASCII punctuation and blanks only, other characters stay UTF-8, as Spark reads them): \
         any label is one directory, and readers decode it back into the `run` column.\n\n\
         Partition columns (in the path, not in the files; every reader adds them with hive \
         partitioning):\n\n"
    );
    push_columns(&mut s, PARTITION_COLUMNS);
    for t in TABLES {
        s.push_str(&format!("\n## `{}`\n\n{}\n\n", t.name, t.doc));
        push_columns(&mut s, t.columns);
    }
    s.push_str(
        "\n# Derived tables\n\nWritten by `aorta overlap`, `aorta collectives` and `aorta perf` \
         into the same dataset and layout \
         (`<out>/<table>/run=<label>/rank=<r>/part-overlap.parquet`), replaced run by run. \
         docs/OVERLAP.md, docs/COLLECTIVES.md and docs/PERF.md explain the metrics.\n",
    );
    for t in DERIVED_TABLES {
        s.push_str(&format!("\n## `{}`\n\n{}\n\n", t.name, t.doc));
        push_columns(&mut s, t.columns);
    }
    s.push_str("\n## Diagnostic codes\n\n");
    for (code, what) in crate::diag::CODES {
        s.push_str(&format!("- `{code}`: {what}\n"));
    }
    s
}

fn push_columns(s: &mut String, cols: &[Column]) {
    s.push_str("| column | type | null | meaning |\n|---|---|---|---|\n");
    for c in cols {
        let null = if c.nullable { "yes" } else { "no" };
        s.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            c.name,
            c.ty.label(),
            null,
            c.doc
        ));
    }
}

#[cfg(test)]
mod partition_tests;
