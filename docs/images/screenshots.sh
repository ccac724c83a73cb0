#!/usr/bin/env bash
# Regenerates docs/images/{report,compare,idle}.png with the commands README.md documents: the
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

# The compute / non-compute / idle section of the report of the corpus's H200 FSDP2 job
# (docs/REPORTS.md): the page with every other section hidden.
$aorta ingest ../shared/data/kineto/cuda/h200_fsdp2 -o "$work/fsdp2" -q
$aorta report "$work/fsdp2" -o "$work/fsdp2.html" >/dev/null
hide="<script>window.addEventListener('load',()=>{let keep=false;for(const el of [...document.body.querySelectorAll('h2')[0].parentElement.children]){if(el.tagName==='H2'){keep=el.textContent.startsWith('Compute, non-compute and idle');}if(!keep\&\&el.tagName!=='SCRIPT'\&\&el.tagName!=='H1'){el.style.display='none';}}});</script></body>"
sed "s|</body>|$hide|" "$work/fsdp2.html" > "$work/idle.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
  --no-first-run --virtual-time-budget=20000 --window-size=1400,720 \
  --screenshot="$work/idle.png" "file://$work/idle.html" 2>/dev/null
cp "$work/idle.png" docs/images/idle.png
ls -l docs/images/idle.png
