#!/usr/bin/env bash
# The ingest benchmark behind docs/PERFORMANCE.md.
#
#   bench/run.sh            # generate the 1 GiB trace if missing, then time aorta on it
#   HTA=1 bench/run.sh      # also time Holistic Trace Analysis (≈10 min, ≈6 GB RAM)
#
# Every configuration runs once to warm the page cache, then RUNS times; the table shows the
# median wall time, MB/s of *decompressed* JSON, and the largest peak RSS (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${AORTA_BENCH_DATA:-bench/out}
RUNS=${RUNS:-3}
mkdir -p "$DATA"
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }

plain=$DATA/kineto_1g.json
if [ ! -f "$plain" ] || [ ! -f "$plain.gz" ]; then
  python3 bench/gen_kineto.py --size-mb 1024 --out "$plain" --gzip --gzip-level 6
fi
bytes=$(stat -c %s "$plain")

# The ingest library behind `aorta ingest`, driven by a thin example binary: the `aorta`
# binary also links polars (for `aorta overlap`), a 36-minute release build on 2 cores,
# while this builds in about two minutes. Same code path: `aorta_ingest::ingest`.
cargo build --release --quiet -p aorta-ingest --example bench_ingest
bench=target/release/examples/bench_ingest
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run LABEL CMD... : median wall seconds and max RSS over $RUNS runs
run() {
  local label=$1; shift
  if [ "$RUNS" -gt 1 ]; then "$@" >/dev/null 2>&1 || true; fi
  local walls=() rss=0
  for _ in $(seq "$RUNS"); do
    local t
    /usr/bin/time -o "$out/time" -f "%e %M" "$@" >/dev/null 2>&1
    t=$(tail -1 "$out/time")
    walls+=("${t% *}")
    [ "${t#* }" -gt "$rss" ] && rss=${t#* }
  done
  local med
  med=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  awk -v l="$label" -v w="$med" -v b="$bytes" -v r="$rss" -v all="${walls[*]}" \
    'BEGIN { printf "| %s | %.2f | %.0f | %.0f | %s |\n", l, w, b/1e6/w, r/1024, all }'
}

echo "| configuration | wall s (median) | MB/s | peak RSS MB | all runs (s) |"
echo "|---|---|---|---|---|"
run "aorta ingest, plain, 2 cores" $bench "$plain"
run "aorta ingest, plain, 1 core (taskset -c 0)" taskset -c 0 $bench --jobs 1 "$plain"
run "aorta ingest, .gz, 2 cores" $bench "$plain.gz"
run "aorta ingest, .gz, 1 core (taskset -c 0)" taskset -c 0 $bench --jobs 1 "$plain.gz"
AORTA_TIMING=1 $bench "$plain" 2>&1 | sed 's/^/    stages: /'

if [ "${HTA:-0}" = 1 ]; then
  venv=$DATA/hta-venv
  [ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q holistictraceanalysis; }
  RUNS=1 run "HTA TraceAnalysis + comm/comp overlap, plain" "$venv/bin/python" bench/hta_parse.py "$plain"
  RUNS=1 run "Python json.loads only, plain" python3 bench/json_load_count.py "$plain"
fi
