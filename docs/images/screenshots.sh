#!/usr/bin/env bash
# Regenerates docs/images/{report,idle,memory,compare}.png from the pages the current aorta
# writes, as headless Chromium draws them at 1280 px wide:
#   report.png  the first screen of `aorta report` of the corpus's 2-rank H200 FSDP2 job
#               (the headline, then the timeline of both ranks);
#   idle.png    that page's "Compute, non-compute and idle per rank" section alone;
#   memory.png  the "Device memory over time" section of the MI300X qwen1.5-0.5b-chat report;
#   compare.png `aorta compare` of BERT-small inference, H100 (reference) vs MI300X.
# Every command runs inside a scratch folder with relative paths, so no temporary path shows
# on the pages.
#
# Usage: docs/images/screenshots.sh [CORPUS]
#   CORPUS: the trace corpus (kineto/cuda/h200_fsdp2, kineto/cuda/h100_models,
#   kineto/rocm/mi300x_models); default ../shared/data beside the checkout. It is not part
#   of the repository, so a clone passes its own copy.
# Needs chromium; pngquant, when present, keeps each image small.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
corpus=$(cd "${1:-$repo/../shared/data}" && pwd)
cd "$repo"
cargo build -q -p aorta
aorta="$repo/${CARGO_TARGET_DIR:-target}/debug/aorta"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Only the section whose heading starts with $2 (and the page title): the rest hidden.
only_section() {
  local hide="<script>window.addEventListener('load',()=>{let keep=false;for(const el of [...document.body.children]){if(el.tagName==='H2'){keep=el.textContent.startsWith('$2');}if(!keep\&\&el.tagName!=='SCRIPT'\&\&el.tagName!=='H1'){el.style.display='none';}}});</script></body>"
  sed "s|</body>|$hide|" "$1"
}

# shot PAGE.html OUT.png HEIGHT: the top HEIGHT px of the page at 1280 px wide.
shot() {
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
    --disable-background-networking --disable-component-update --disable-sync --no-first-run \
    --virtual-time-budget=20000 --window-size="1280,$3" \
    --screenshot="$work/$2" "file://$work/$1" 2>/dev/null
  if command -v pngquant >/dev/null; then
    pngquant --force --quality=60-90 --output "$repo/docs/images/$2" "$work/$2"
  else
    cp "$work/$2" "$repo/docs/images/$2"
  fi
  ls -l "$repo/docs/images/$2"
}

ln -s "$corpus" corpus
$aorta ingest corpus/kineto/cuda/h200_fsdp2 -o fsdp2 -q
$aorta collectives fsdp2 >/dev/null
$aorta overlap fsdp2 >/dev/null
$aorta report fsdp2 -o report.html >/dev/null
shot report.html report.png 1400
only_section report.html 'Compute, non-compute and idle' > idle.html
shot idle.html idle.png 720

$aorta ingest corpus/kineto/rocm/mi300x_models/qwen1.5-0.5b-chat.json.gz -o qwen -q
$aorta report qwen -o qwen.html >/dev/null
only_section qwen.html 'Device memory over time' > memory.html
shot memory.html memory.png 560

$aorta ingest corpus/kineto/cuda/h100_models/bert-small.json.gz -o models --label h100/bert-small -q
$aorta ingest corpus/kineto/rocm/mi300x_models/bert-small.json.gz -o models --label mi300x/bert-small -q
$aorta compare models --reference cuda --candidate rocm -o cmp >/dev/null
cp cmp/report.html compare.html
shot compare.html compare.png 1800
