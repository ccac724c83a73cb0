#!/usr/bin/env bash
# Regenerates docs/images/{report,compare}.png with the commands README.md documents: the
# bundled traces ingested, the report of the 2-rank FSDP2 job and the page of
# `aorta compare --reference cuda --candidate rocm`, as headless Chromium draws them.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build -q
aorta=${CARGO_TARGET_DIR:-target}/debug/aorta
$aorta ingest workloads/traces workloads/samples -o "$work/data" -q
$aorta report "$work/data" --run fsdp/fsdp_default -o "$work/report.html" >/dev/null
$aorta compare "$work/data" --reference cuda --candidate rocm -o "$work/cmp" >/dev/null
cp "$work/cmp/report.html" "$work/compare.html"
for page in report compare; do
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
    --disable-background-networking --disable-component-update --disable-sync --no-first-run \
    --virtual-time-budget=20000 --window-size=1400,2000 \
    --screenshot="$work/$page.png" "file://$work/$page.html" 2>/dev/null
  # Palette PNG keeps each image well under 500 kB.
  if command -v pngquant >/dev/null; then
    pngquant --force --quality=60-90 --output "docs/images/$page.png" "$work/$page.png"
  else
    cp "$work/$page.png" "docs/images/$page.png"
  fi
  ls -l "docs/images/$page.png"
done
