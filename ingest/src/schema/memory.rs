//! The `memory` table: the PyTorch profiler's allocator events (`profile_memory=True`), one
//! row per allocation or free, with the device's totals after it.

use super::{opt, req, ColType::Int64 as I64, ColType::Utf8 as S, Table};

pub(crate) const MEMORY: Table = Table {
    name: "memory",
    doc: "One row per `[memory]` instant event of a Kineto trace (`profile_memory=True`): an allocation (`bytes` > 0) or a free (`bytes` < 0) by PyTorch's caching allocator, with the device's totals just after it. No part for a trace without memory events.",
    columns: &[
        req("ts_ns", I64, "When the allocator call happened (event `ts`, on the same clock as the other Kineto rows)."),
        req("device_type", S, "`args[\"Device Type\"]` as its c10 name: `cpu`, `cuda`, `hip` (ROCm builds write 6), `xpu`, `mps`, …; `type N` for a code aorta does not know."),
        req("device", I64, "`args[\"Device Id\"]` (-1 for host memory)."),
        opt("bytes", I64, "`args.Bytes`: bytes allocated (positive) or freed (negative)."),
        opt("addr", I64, "`args.Addr`: the block's address."),
        opt("total_allocated", I64, "`args[\"Total Allocated\"]`: bytes allocated on the device after this call."),
        opt("total_reserved", I64, "`args[\"Total Reserved\"]`: bytes the caching allocator holds from the device after this call (allocated plus cached)."),
        opt("step", I64, "The `ProfilerStep#N` span of the process around `ts_ns`; null outside every step."),
    ],
};
