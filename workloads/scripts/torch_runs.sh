#!/usr/bin/env bash
# The FSDP2 runs recorded in docs/WORKLOADS.md: workloads/torch/fsdp_overlap.py under torchrun,
# one process per GPU, with the knob settings compared there.
# Usage: workloads/scripts/torch_runs.sh OUTDIR   (NPROC=2 by default)
set -u
. "$(dirname "$0")/gpu_env.sh"
OUT=${1:-/tmp/fsdp-overlap}
NPROC=${NPROC:-2}
SCRIPT=$(dirname "$0")/../torch/fsdp_overlap.py
mkdir -p "$OUT"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

# run NAME ARGS...: one torchrun of the script into OUT/NAME; prints the command line.
run() {
  local name=$1; shift
  echo "+ torchrun --standalone --nproc-per-node $NPROC $SCRIPT $* --output-dir $OUT/$name"
  timeout 300 torchrun --standalone --nproc-per-node "$NPROC" "$SCRIPT" "$@" --output-dir "$OUT/$name"
  echo "== $name rc=$?"
}

run fsdp_default
run fsdp_no_prefetch --no-forward-prefetch --backward-prefetch BACKWARD_POST
run fsdp_no_limit_fp16_ga2 --no-limit-all-gathers --mixed-precision fp16 --gradient-accumulation 2
ls -la "$OUT"/*
