#!/usr/bin/env bash
# Two `bench_ingest` builds on one file on many cores, and on many files (issue 33;
# docs/PERFORMANCE.md "One file on many cores").
#
#   bench/many_cores.sh BEFORE AFTER [LOG]
#
# Generates a 1 GiB fsdp2 and a 1 GiB rocm trace and 16 copies of a ~100 MB trace (SIZE and
# MSIZE, in MiB; one directory each) under $DATA (default /tmp/many_cores). First it measures
# what the machine itself gives on its $N cores (default: all), since lease machines differ
# and some run their vCPUs on shared physical cores: a compute-only loop on one core and on
# every core at once, and the 16 files as 16 processes of one job each, one per core, with
# AFTER (the most that any scheduling inside one process could reach). Then it runs BEFORE and
# AFTER alternating, twice each, --jobs $JOBS (default 1 2 4 8 16) on each 1 GiB file and, on
# the 16 files, --jobs 1 on one core (taskset -c 0: the issue's "one-core speed") and
# --jobs 16, the files put back into the page cache before every run; prints MB/s, walk and
# settle (AORTA_TIMING=1), and wall, user, sys and peak RSS (KB); then checks that both builds
# write the same Parquet files at 16 jobs: the same bytes (cmp), else the same values
# (bench/same_dataset.py, where python3 has pyarrow). Needs the corpus traces gen_kineto.py scales
# (--source: set FSDP2_SRC and ROCM_SRC where the corpus is elsewhere).
#
# CPUS=LIST (for example 0-15, or 0,2,4,...): on a larger host, every run is confined to those
# processors (N defaults to how many there are; the one-core runs take the first). Give one
# processor per physical core to measure 16 real cores where the host has more vCPUs.
set -uo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2 log=${3:-/dev/stdout}
D=${DATA:-/tmp/many_cores}
JOBS=${JOBS:-"1 2 4 8 16"} SIZE=${SIZE:-1024} MSIZE=${MSIZE:-100}
src=(${FSDP2_SRC:+--source "$FSDP2_SRC"})
rsrc=(${ROCM_SRC:+--source "$ROCM_SRC"})
mkdir -p "$D/m"
if [ -n "${CPUS:-}" ]; then
  mapfile -t cpu < <(python3 -c 'import sys
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    print(*range(int(a), int(b or a) + 1), sep="\n")' "$CPUS")
  N=${N:-${#cpu[@]}}
else
  N=${N:-$(nproc)}
  mapfile -t cpu < <(seq 0 $((N - 1)))
fi
all=$(IFS=,; echo "${cpu[*]:0:N}")
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
ceiling() { # build: the compute loop, then the 16 files as separate processes
  local s i f
  printf 's = 0\nfor i in range(10_000_000):\n    s += i * i\n' > "$D/loop.py"
  s=$(date +%s%N); taskset -c "${cpu[0]}" python3 "$D/loop.py"; echo "   loop on 1 core: $(ms "$s") ms"
  s=$(date +%s%N)
  for i in $(seq 0 $((N - 1))); do taskset -c "${cpu[i]}" python3 "$D/loop.py" & done; wait
  echo "   loop on $N cores at once: $(ms "$s") ms"
  cat "$D"/m/d*/k.json > /dev/null
  s=$(date +%s%N); i=0
  for f in "$D"/m/d*/k.json; do taskset -c "${cpu[i % N]}" "$1" --jobs 1 "$f" > /dev/null 2>&1 & i=$((i + 1)); done
  wait; echo "   16 files as 16 processes of one job: $(ms "$s") ms"
}
one() { # build jobs files...
  local b=$1 j=$2 f
  shift 2
  for f in "$@"; do cat "$f" > /dev/null; done
  AORTA_TIMING=1 /usr/bin/time -f "TIME %e %U %S %M" taskset -c "${PIN:-$all}" "$b" --jobs "$j" "$@" 2>&1 |
    grep -E "${PAT:-walk|settle:|TIME|MB/s}" | sed -e 's/^files.*time/time/' -e 's/^/   /'
}
{
  nproc; uptime; echo "cores used: $all"
  python3 bench/gen_kineto.py "${src[@]}" --size-mb "$SIZE" --out "$D/fsdp2.json" | tail -1
  python3 bench/gen_kineto.py --mix rocm "${rsrc[@]}" --size-mb "$SIZE" --out "$D/rocm.json" | tail -1
  python3 bench/gen_kineto.py "${src[@]}" --size-mb "$MSIZE" --out "$D/m/k.json" | tail -1
  for i in $(seq -w 1 16); do mkdir -p "$D/m/d$i"; cp "$D/m/k.json" "$D/m/d$i/k.json"; done
  for r in 1 2; do echo "== ceiling run $r"; ceiling "$after"; done
  for f in fsdp2 rocm; do for j in $JOBS; do for r in 1 2; do for b in before after; do
    echo "== $f jobs $j run $r $b"; one "${!b}" "$j" "$D/$f.json"
  done; done; done; done
  for j in 1 16; do for r in 1 2; do for b in before after; do
    pin=; [ "$j" = 1 ] && pin=${cpu[0]}
    echo "== 16 files jobs $j${pin:+ on core $pin} run $r $b"
    PIN=$pin PAT="TIME|MB/s" one "${!b}" "$j" "$D"/m/d*/k.json
  done; done; done
  for f in fsdp2 rocm; do
    for b in before after; do
      rm -rf "$D/keep_$b"; "${!b}" --jobs 16 --keep "$D/keep_$b" "$D/$f.json" > /dev/null
    done
    (cd "$D/keep_before" && find . -name '*.parquet' | sort | while read -r p; do
      cmp -s "$p" "../keep_after/$p" && echo "same $f $p" || echo "bytes differ: $f $p"
    done) | tee "$D/cmp_$f"
    # Two builds may encode the same values in other bytes (pages cut elsewhere, another
    # zstd frame): then the values decide, where pyarrow is at hand.
    if grep -q '^bytes differ' "$D/cmp_$f"; then
      if python3 -c 'import pyarrow' 2>/dev/null; then
        python3 bench/same_dataset.py "$D/keep_before" "$D/keep_after" | sed "s/^/   $f values: /"
      else
        echo "   $f: no pyarrow here; compare the values with bench/same_dataset.py"
      fi
    fi
  done
} 2>&1 | tee "$log"
