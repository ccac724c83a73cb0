#!/usr/bin/env bash
# A fuzz campaign over built targets (docs/FUZZING.md): every target at once, each on its
# share of the cores, for SECONDS seconds; a process that finds a crash is restarted, so the
# campaign goes on. Prints the executions per target and lists the findings.
#
#   fuzz/campaign.sh BIN_DIR CORPUS_DIR OUT_DIR SECONDS target:procs:max_len[:seconds] ...
#
# (a target's own seconds, when given, end it earlier: a fast target that reaches its
# executions in less time.)
#
# BIN_DIR holds one libFuzzer binary per target, or the one `all` binary that runs the
# target named by AORTA_FUZZ_TARGET (cargo fuzz build; see docs/FUZZING.md), and
# CORPUS_DIR/<target>/ the seeds (fuzz/seeds.py), which grow as coverage does. Findings go
# to OUT_DIR/findings/<target>/, the libFuzzer logs to OUT_DIR/logs/.
set -uo pipefail
bin=$1 corpus=$2 out=$3 secs=$4
shift 4
mkdir -p "$out/logs"
end=$(($(date +%s) + secs))

# One fuzzing process: reruns libFuzzer until the time is up (after a crash, a hang or an
# out-of-memory, whose input libFuzzer has written under findings/).
worker() {
    local t=$1 i=$2 len=$3 stop=$end run=0 exe=$bin/$1
    [ -n "$4" ] && stop=$(($(date +%s) + $4))
    [ -x "$exe" ] || { exe=$bin/all; export AORTA_FUZZ_TARGET=$t; }
    mkdir -p "$out/findings/$t"
    while left=$((stop - $(date +%s))); [ "$left" -gt 2 ]; do
        "$exe" "$corpus/$t" -max_total_time="$left" -timeout=1 -rss_limit_mb=1024 \
            -max_len="$len" -print_final_stats=1 -seed=$((i * 1000 + run + 1)) \
            -artifact_prefix="$out/findings/$t/" >"$out/logs/$t.$i.$run.log" 2>&1
        run=$((run + 1))
    done
}

for spec in "$@"; do
    IFS=: read -r t procs len tsecs <<<"$spec"
    for i in $(seq 1 "$procs"); do worker "$t" "$i" "$len" "$tsecs" & done
done
wait

printf '%-13s %14s %6s %s\n' target executions runs findings
for spec in "$@"; do
    t=${spec%%:*}
    execs=$(cat "$out/logs/$t".*.log | sed -n 's/^stat::number_of_executed_units: *//p' |
        awk '{s += $1} END {print s + 0}')
    runs=$(ls "$out/logs/$t".*.log | wc -l)
    found=$(ls "$out/findings/$t" 2>/dev/null | tr '\n' ' ')
    printf '%-13s %14s %6s %s\n' "$t" "$execs" "$runs" "${found:-none}"
done
