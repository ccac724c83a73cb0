#!/usr/bin/env bash
# The runs recorded in docs/WORKLOADS.md: 2 ranks (one process per GPU) of aorta-overlap-bench
# (overlapped and --serial) and of aorta-copy-overlap, on the device machine.
# Usage: workloads/scripts/gpu_runs.sh OUTDIR
set -u
. "$(dirname "$0")/gpu_env.sh"
BIN=${BIN:-./target/release/aorta-overlap-bench}
COPY_BIN=${COPY_BIN:-$(dirname "$BIN")/aorta-copy-overlap}
OUT=${1:-/tmp/overlap-bench}
WS=${WORLD_SIZE:-2}
mkdir -p "$OUT"
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1

# run NAME ARGS...: WS ranks of the bench, each on its own GPU; prints the command lines.
run() {
  local name=$1; shift
  local rdv="/tmp/aorta-rdv-$name-$$"
  rm -f "$rdv"
  local pids=() rc=0
  for ((r = 0; r < WS; r++)); do
    echo "+ RANK=$r WORLD_SIZE=$WS $BIN $* --rendezvous $rdv --out $OUT/$name"
    RANK=$r WORLD_SIZE=$WS timeout 180 "$BIN" "$@" --rendezvous "$rdv" --out "$OUT/$name" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  echo "== $name rc=$rc"
}

COMMON=(--m 4096 --n 4096 --k 4096 --dtype bf16 --iters 20 --warmup 5 --gemms-per-iter 4 --collectives-per-iter 2)
run allreduce_overlap "${COMMON[@]}" --collective all-reduce --bytes 67108864
run allreduce_serial "${COMMON[@]}" --collective all-reduce --bytes 67108864 --serial
run allgather_overlap "${COMMON[@]}" --collective all-gather --bytes 67108864
run reducescatter_overlap "${COMMON[@]}" --collective reduce-scatter --bytes 67108864
run fp16_overlap --m 4096 --n 4096 --k 4096 --dtype fp16 --iters 10 --warmup 3 --collective all-reduce --bytes 67108864
run fp32_overlap --m 2048 --n 2048 --k 2048 --dtype fp32 --iters 10 --warmup 3 --collective all-reduce --bytes 16777216
# The overlap bench with the GEMM and all-gather shapes of workloads/torch/fsdp_overlap.py's
# default run (8192 tokens x 4096 -> 16384; 268,492,800-byte bf16 all-gather), so the two
# compare collective for collective.
run fsdp_shapes --m 8192 --n 16384 --k 4096 --dtype bf16 --iters 10 --warmup 3 --gemms-per-iter 4 --collectives-per-iter 2 --collective all-gather --bytes 268492800

# run_copy NAME ARGS...: WS independent ranks of the copy bench (no NCCL), each on its GPU.
run_copy() {
  local name=$1; shift
  local pids=() rc=0
  for ((r = 0; r < WS; r++)); do
    echo "+ RANK=$r WORLD_SIZE=$WS $COPY_BIN $* --out $OUT/$name"
    RANK=$r WORLD_SIZE=$WS timeout 180 "$COPY_BIN" "$@" --out "$OUT/$name" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  echo "== $name rc=$rc"
}

COPY=(--m 8192 --n 8192 --k 8192 --dtype bf16 --gemms-per-iter 4 --iters 10 --warmup 3 --copy-bytes 268435456)
run_copy copy_h2d "${COPY[@]}" --direction h2d
run_copy copy_both "${COPY[@]}" --direction both
run_copy copy_both_serial "${COPY[@]}" --direction both --serial
ls -la "$OUT"/*
