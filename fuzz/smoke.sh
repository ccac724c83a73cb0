#!/usr/bin/env bash
# The instrumented smoke run (docs/FUZZING.md): builds every fuzz target and runs each for
# SECONDS (default 10) on the committed seeds plus, when the trace corpus is beside the
# checkout, its excerpts. Not run by .ci/run: its cold build alone is ~11 minutes on the
# 2-core CI machine; CI replays the same seeds and crashers in the ingest test binary.
#
#   fuzz/smoke.sh [SECONDS]     (needs cargo-fuzz: cargo install cargo-fuzz)
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-10}
target=${CARGO_TARGET_DIR:-target}/fuzz
RUSTC_WRAPPER=$PWD/rustc-wrapper.sh cargo fuzz build -O -a --sanitizer none --target-dir "$target"
bin=$target/x86_64-unknown-linux-gnu/release
if ! python3 seeds.py >/dev/null 2>&1; then # no corpus beside the checkout: the seeds alone
    mkdir -p corpus
    cp -rn seeds/. corpus/
fi
for t in kineto chrome jsonl rocprof_csv rocprof_json rocpd nsys rank_map rules; do
    mkdir -p corpus/$t artifacts/$t
    "$bin/$t" corpus/$t -max_total_time="$secs" -timeout=1 -rss_limit_mb=1024 -max_len=65536 \
        -artifact_prefix=artifacts/$t/ -print_final_stats=1 2>&1 |
        sed -n "s/^stat::number_of_executed_units: */$t: /p"
done
