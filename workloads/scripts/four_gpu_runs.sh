#!/usr/bin/env bash
# The runs of docs/WORKLOADS.md "Runs on 4 GPUs": on one host with 4 GPUs, the committed
# fixtures regenerated (2 ranks, as before: gpu_runs.sh and torch_runs.sh, plus the 1-GPU FSDP2
# run), then every workload of `aorta run` at 4 ranks, clean and with rank 2 slowed by 5 ms.
# BIN_DIR holds `aorta`, `aorta-overlap-bench` and `aorta-copy-overlap` side by side (where
# `aorta run` looks for the benches). Console logs go to OUT_DIR/*.log.
# Usage (repository root): workloads/scripts/four_gpu_runs.sh BIN_DIR OUT_DIR
set -u
. "$(dirname "$0")/gpu_env.sh"
BIN=$(cd "$1" && pwd)
OUT=$2
mkdir -p "$OUT"
AORTA=$BIN/aorta
here=$(dirname "$0")
{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
} > "$OUT/device.log" 2>&1

# 1. The committed fixtures, at 2 ranks as before (workloads/scripts/refresh_fixtures.sh
#    copies them into workloads/traces).
BIN=$BIN/aorta-overlap-bench WORLD_SIZE=2 bash "$here/gpu_runs.sh" "$OUT/ob" > "$OUT/gpu_runs.log" 2>&1
NPROC=2 bash "$here/torch_runs.sh" "$OUT/fsdp" > "$OUT/torch_runs.log" 2>&1
{
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", 1)'
  echo "+ torchrun --standalone --nproc-per-node 1 workloads/torch/fsdp_overlap.py --output-dir $OUT/fsdp1/fsdp_default"
  CUDA_VISIBLE_DEVICES=0 timeout 300 torchrun --standalone --nproc-per-node 1 \
    "$here/../torch/fsdp_overlap.py" --output-dir "$OUT/fsdp1/fsdp_default"
  echo "== fsdp_default rc=$?"
} > "$OUT/torch_runs_1gpu.log" 2>&1

# 2. Every workload of `aorta run` at 4 ranks; the straggler runs slow rank 2 by 5 ms.
# arun NAME WORKLOAD ARGS...: `aorta run WORKLOAD --ranks 4 -o OUT/NAME -- ARGS`, logged.
arun() {
  local name=$1 workload=$2; shift 2
  echo "+ aorta run $workload --ranks 4 -o $OUT/$name -- $*"
  timeout 400 "$AORTA" run "$workload" --ranks 4 -o "$OUT/$name" -- "$@"
  echo "== $name rc=$?"
}
OB=(--m 4096 --n 4096 --k 4096 --dtype bf16 --iters 20 --warmup 5 --gemms-per-iter 4
    --collectives-per-iter 2 --collective all-reduce --bytes 67108864)
{
  arun ob4_clean overlap-bench "${OB[@]}"
  arun ob4_slow overlap-bench "${OB[@]}" --slow-rank 2 --slow-ms 5
  arun fsdp4_clean fsdp --steps 6 --profile-wait 1 --profile-warmup 1 --profile-active 2
  arun fsdp4_slow fsdp --steps 6 --profile-wait 1 --profile-warmup 1 --profile-active 2 --slow-rank 2 --slow-ms 5
  arun copy4 copy-overlap --m 8192 --n 8192 --k 8192 --dtype bf16 --gemms-per-iter 4 --iters 10 \
    --warmup 3 --copy-bytes 268435456 --direction both
} > "$OUT/four_ranks.log" 2>&1
ls -la "$OUT"/* > "$OUT/files.log" 2>&1
