#!/usr/bin/env bash
# Issue 32 part 2, "TP scaling, measured": workloads/torch/tp_overlap.py at TP 1, 2 and 4, each
# with --method serial and --method overlap, one process per GPU (4 GPUs needed for TP 4).
# Usage: workloads/scripts/tp_runs.sh OUTDIR   (writes OUTDIR/tp{N}_{method}/, OUTDIR/tp_runs.log)
# Each run should take ~20 s, mostly start-up (torch import, NCCL init; the timed steps are ms),
# so the six well under 4 minutes (not yet run on a GPU).
set -u
. "$(dirname "$0")/gpu_env.sh"
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
OUT=$1
HERE=$(cd "$(dirname "$0")/../torch" && pwd)
CHUNKS=${CHUNKS:-4}
mkdir -p "$OUT"

# run TP METHOD: one torchrun into OUT/tp{TP}_{METHOD}; a hung run is killed after 150 s.
run() {
  local tp=$1 method=$2 name="tp$1_$2"
  local extra=()
  [ "$method" = overlap ] && extra=(--chunks "$CHUNKS")
  echo "+ torchrun --standalone --nproc-per-node $tp tp_overlap.py --method $method${extra[*]:+ ${extra[*]}} --output-dir $OUT/$name"
  local t0=$SECONDS
  timeout -k 10 150 python3 -m torch.distributed.run --standalone --nproc-per-node "$tp" \
    "$HERE/tp_overlap.py" --method "$method" ${extra[@]+"${extra[@]}"} --output-dir "$OUT/$name"
  echo "== $name rc=$? $((SECONDS - t0)) s"
}

all() {
  date -u
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' || return 1
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null
  for tp in 1 2 4; do
    for method in serial overlap; do
      run "$tp" "$method"
    done
  done
  ls -la "$OUT"/tp*_*/
  python3 "$HERE/tp_report.py" "$OUT"
  date -u
}

all 2>&1 | tee -a "$OUT/tp_runs.log"
