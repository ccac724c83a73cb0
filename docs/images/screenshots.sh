#!/usr/bin/env bash
# Regenerates docs/images/{report,compare}.png: the single-run report of the H200 FSDP2 corpus
# run and the page `aorta compare` writes for the H100/MI300X model pair, as
# headless Chromium draws them. Needs chromium and ../shared/data beside the checkout.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
AORTA_EXAMPLE_PAGES="$work" cargo test -q --test it -- --ignored report_browser::write_example_pages
for page in report compare; do
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
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
