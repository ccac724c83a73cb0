//! The tables `aorta perf` writes: one row per operator instance with its FLOPs, bytes and
//! roofline, and one per rank and step with the MFU (docs/PERF.md has the formulas).

use super::{opt, req, ColType::Float64 as F64, ColType::Int64 as I64, ColType::Utf8 as S, Table};

/// `op_perf`: one row per operator instance, with its FLOPs, bytes and roofline.
pub const OP_PERF: Table = Table {
    name: "op_perf",
    doc: "Written by `aorta perf`: one row per operator instance, i.e. the CPU operator that launched kernels (the innermost one, as Kineto links them) together with its kernels; a kernel no operator launched is an instance of its own. Communication kernels, copies and sets are left out. docs/PERF.md.",
    columns: &[
        opt("step", I64, "The step of the instance's first kernel."),
        req("op", S, "Operator name (`aten::mm`), or `(no CPU op)`."),
        opt("input_dims", S, "`Input Dims` of the operator, compact JSON (`[[8192, 4096], [4096, 4096]]`)."),
        opt("input_types", S, "`Input type` of the operator, compact JSON."),
        req("kernel", S, "Name of the instance's longest kernel."),
        req("kernel_count", I64, "Kernels the instance launched."),
        req("start_ns", I64, "First kernel start."),
        req("end_ns", I64, "Last kernel end (clipped)."),
        req("gpu_ns", I64, "Summed duration of its kernels: the time its FLOPs and bytes are divided by."),
        opt("model", S, "The performance model that applied: `gemm`, `attention`, `attention_bwd`, `conv`, `conv_bwd` (FLOPs and bytes), `elementwise`, `reduction` (bytes only); null when none did (see `note`)."),
        opt("dtype", S, "The dtype its FLOPs run in, which picks the peak: `bf16`, `fp16`, `fp32`, `fp64`, `fp8`, `fp4`."),
        opt("flops", I64, "Floating-point operations from the shapes: GEMM 2·M·N·K × batch; attention 4·B·H·Sq·Sk·D forward, 2.5× backward, half when causal; convolution 2·N·K·(C/groups)·R·S·P·Q per pass. Null for bytes-only models and when the shapes are missing (counted in `perf_steps.unmodelled_count`), never guessed."),
        opt("bytes", I64, "Bytes of every tensor argument read once plus the outputs written once."),
        opt("tflops", F64, "`flops` / `gpu_ns` (TFLOP/s)."),
        opt("tbps", F64, "`bytes` / `gpu_ns` (TB/s)."),
        opt("intensity", F64, "Arithmetic intensity, `flops` / `bytes` (FLOP per byte)."),
        opt("bound", S, "`compute` when `intensity` ≥ `peak_tflops` / `peak_tbps` (the ridge point), else `memory`; bytes-only models are `memory`. Null without a known device."),
        opt("roof_pct", F64, "100 × achieved ÷ the roof at this intensity, min(`peak_tflops`, `intensity` × `peak_tbps`); for bytes-only models 100 × `tbps` / `peak_tbps`."),
        opt("peak_pct", F64, "100 × `tflops` / `peak_tflops`."),
        opt("device", S, "The device-peak table's entry for the rank's GPU (`H100 SXM`); null for an unknown device (see `note`)."),
        opt("peak_tflops", F64, "Dense peak of `dtype` on that device (TFLOP/s)."),
        opt("peak_tbps", F64, "HBM bandwidth of that device (TB/s)."),
        opt("source", S, "Where the shapes came from: `cpu_op` (the operator's `Input Dims`) or `kernel_args` (a workload's `m`, `n`, `k` on the kernel)."),
        opt("note", S, "Why a number is null: no model for the operator, shapes missing or not fitting, an unknown device or a dtype without a peak."),
    ],
};

/// `perf_steps`: model FLOPs and MFU per rank and step, and per rank.
pub const PERF_STEPS: Table = Table {
    name: "perf_steps",
    doc: "Written by `aorta perf`: model FLOPs and MFU per rank and step (`level` = `step`) and per rank over its steps (`level` = `rank`). docs/PERF.md.",
    columns: &[
        req("level", S, "`step` or `rank` (the sums over the rank's steps)."),
        opt("step", I64, "The step, for `level` = `step` (null for a trace without steps)."),
        opt("window_ns", I64, "The step's GPU window, [first start, last end] of its activities (`steps`); for `rank`, the sum over its steps."),
        req("kernel_ns", I64, "Summed GPU time of the instances (compute kernels)."),
        req("instances", I64, "Operator instances."),
        req("model_flops", I64, "FLOPs of the instances with a FLOPs model (GEMM, attention, convolution)."),
        req("gemm_flops", I64, "Of those, GEMMs."),
        req("attention_flops", I64, "Attention, forward and backward."),
        req("conv_flops", I64, "Convolutions, forward and backward."),
        opt("dtype", S, "The dominant dtype: the one with the most GEMM FLOPs (all model FLOPs when there are no GEMMs)."),
        opt("device", S, "The device-peak table's entry for the rank's GPU."),
        opt("peak_tflops", F64, "Dense peak of `dtype` on that device."),
        opt("mfu_pct", F64, "Model FLOPs utilization: 100 × `model_flops` / (`window_ns` × `peak_tflops`)."),
        req("gemm_busy_ns", I64, "\\|U(kernels of the GEMM instances)\\|: time at least one modelled GEMM runs."),
        opt("gemm_tflops", F64, "`gemm_flops` / `gemm_busy_ns`: GEMM TFLOP/s while GEMMs run."),
        req("unmodelled_count", I64, "Instances with neither FLOPs nor bytes: no model, or shapes missing (`op_perf.note` says which)."),
        req("unmodelled_ns", I64, "Their GPU time."),
        opt("note", S, "Why MFU is null: an unknown device, or a dtype without a peak."),
    ],
};
