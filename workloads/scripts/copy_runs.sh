#!/usr/bin/env bash
# aorta-copy-overlap on one GPU: each run measures serial and overlapped and prints both; the
# written trace/JSONL is the overlapped mode, or the serial one for the *_serial runs.
# Usage: workloads/scripts/copy_runs.sh OUTDIR   (BIN=... to use another binary)
set -u
. "$(dirname "$0")/gpu_env.sh"
BIN=${BIN:-./target/release/aorta-copy-overlap}
OUT=${1:-/tmp/copy-overlap}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1

# run NAME ARGS...: one process on GPU 0; prints the command line and its exit status.
run() {
  local name=$1; shift
  echo "+ $BIN $* --out $OUT/$name"
  RANK=0 WORLD_SIZE=1 timeout 180 "$BIN" "$@" --out "$OUT/$name"
  echo "== $name rc=$?"
}

COMMON=(--m 4096 --n 4096 --k 4096 --dtype bf16 --gemms-per-iter 8 --iters 20 --warmup 5)
run h2d_overlap "${COMMON[@]}" --copy-bytes 67108864 --direction h2d
run h2d_serial "${COMMON[@]}" --copy-bytes 67108864 --direction h2d --serial
run d2h_overlap "${COMMON[@]}" --copy-bytes 67108864 --direction d2h
run both_overlap "${COMMON[@]}" --copy-bytes 67108864 --direction both
run both_serial "${COMMON[@]}" --copy-bytes 67108864 --direction both --serial
ls -la "$OUT"/*
