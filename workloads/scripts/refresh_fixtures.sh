#!/usr/bin/env bash
# Copy the output of gpu_runs.sh and torch_runs.sh into workloads/traces/ as the committed
# fixtures (gzip -9), with their console logs: the runs docs/WORKLOADS.md and docs/PERF.md
# describe, whose printed GEMM rates tests/it/perf/truth.rs holds `aorta perf` to.
# Usage (repository root): workloads/scripts/refresh_fixtures.sh OB_DIR GPU_LOG FSDP_DIR TORCH_LOG
#   e.g. workloads/scripts/refresh_fixtures.sh /tmp/ob /tmp/gpu_runs.log /tmp/fsdp /tmp/torch_runs.log
set -eu
OB=$1 GPU_LOG=$2 FSDP=$3 TORCH_LOG=$4
T=workloads/traces
for run in allreduce_overlap allreduce_serial allgather_overlap reducescatter_overlap fsdp_shapes; do
  rm -f "$T/overlap-bench/$run"/*
  mkdir -p "$T/overlap-bench/$run"
  for f in "$OB/$run"/rank*.trace.json "$OB/$run"/rank_*_metrics.jsonl; do
    gzip -9c "$f" > "$T/overlap-bench/$run/$(basename "$f").gz"
  done
done
for run in copy_h2d copy_both copy_both_serial; do
  rm -f "$T/copy-overlap/$run"/*
  mkdir -p "$T/copy-overlap/$run"
  for f in "$OB/$run"/rank*.trace.json "$OB/$run"/rank_*_metrics.jsonl; do
    gzip -9c "$f" > "$T/copy-overlap/$run/$(basename "$f").gz"
  done
done
for run in fsdp_default fsdp_no_prefetch fsdp_no_limit_fp16_ga2; do
  rm -f "$T/fsdp/$run"/*
  mkdir -p "$T/fsdp/$run"
  # The profiler already wrote .json.gz; keep its bytes, gzip the JSONL.
  cp "$FSDP/$run"/rank*_trace_step*.json.gz "$T/fsdp/$run/"
  for f in "$FSDP/$run"/rank_*_metrics.jsonl; do
    gzip -9c "$f" > "$T/fsdp/$run/$(basename "$f").gz"
  done
done
cp "$GPU_LOG" "$T/gpu_runs.log"
cp "$TORCH_LOG" "$T/fsdp/torch_runs.log"
du -sh "$T"
