#!/usr/bin/env bash
# The sweeps of docs/SWEEPS.md on one host with 4 GPUs: the overlap-bench grid (2 ranks,
# 12 points x 3 repeats) and the NCCL channel sweep (4 ranks, with an unread RCCL knob).
# BIN_DIR holds `aorta` and `aorta-overlap-bench` side by side. Each sweep's console goes to
# OUT_DIR/<name>.log, its output to OUT_DIR/<name>/.
# Usage (repository root): bash workloads/scripts/sweep_runs.sh BIN_DIR OUT_DIR
set -u
. "$(dirname "$0")/gpu_env.sh"
BIN=$(cd "$1" && pwd)
OUT=$2
mkdir -p "$OUT"
here=$(dirname "$0")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.log" 2>&1
for name in overlap_grid nccl_channels; do
  start=$SECONDS
  timeout 280 "$BIN/aorta" sweep "$here/../sweeps/$name.toml" -o "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? wall=$((SECONDS - start)) s" >> "$OUT/$name.log"
done
