#!/usr/bin/env bash
# `lama plan --format svg` as a person sees it: two real-machine plans rendered by headless
# Chromium to PNG; each image must be non-trivial and show every rank's colour (from the SVG's
# legend), and the number of ranks drawn must be the plan's.
# Usage: tests/pictures.sh LAMA_BINARY [OUT_DIR]   (OUT_DIR keeps the PNGs; default: a scratch
#   directory). Installs Debian's chromium when missing. Prints one "ok - ..." line per picture.
set -uo pipefail
lama=$(realpath "$1")
top=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "$out" ] || out=$work
mkdir -p "$out"
"$top/contrib/deps.sh" chromium >/dev/null
topo=$top/tests/topologies

# picture NAME NRANKS PLAN_ARGS...
picture() {
  local name=$1 np=$2 svg=$work/$1.svg png=$out/$1.png w h colours drawn missing=""
  shift 2
  if ! "$lama" plan "$@" --np "$np" --format svg --output "$svg" 2>"$work/err"; then
    echo "not ok - $name: lama plan --format svg failed"; sed 's/^/#   /' "$work/err"; return
  fi
  w=$(grep -o 'width="[0-9]*"' "$svg" | head -n 1 | tr -dc 0-9)
  h=$(grep -o 'height="[0-9]*"' "$svg" | head -n 1 | tr -dc 0-9)
  # The window is padded: its viewport is shorter than --window-size. Flags as this workplace's checks start Chromium (no network, a fresh profile).
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile-$name" --hide-scrollbars --window-size="$((w + 40)),$((h + 200))" \
    --screenshot="$png" "file://$svg" >/dev/null 2>&1
  [ -s "$png" ] || { echo "not ok - $name: Chromium made no PNG"; return; }
  # The ranks' colours, as the legend draws them (one swatch per rank).
  mapfile -t colours < <(grep -o '<rect x="[0-9]*" y="[0-9]*" width="16" height="14" fill="#[0-9a-f]*"' "$svg" | grep -o '#[0-9a-f]*')
  python3 "$top/tests/pictures/png_colors.py" "$png" "${colours[@]}" > "$work/counts"
  read -r _ pw ph < <(grep '^size ' "$work/counts")
  distinct=$(awk '/^colours / {print $2}' "$work/counts")
  # Each rank's colour covers at least its legend swatch and one PU box in the image.
  drawn=$(awk '/^#/ && $2 >= 400' "$work/counts" | wc -l)
  missing=$(awk '/^#/ && $2 < 400 {print $1}' "$work/counts" | tr '\n' ' ')
  if [ "${#colours[@]}" -eq "$np" ] && [ "$drawn" -eq "$np" ] && [ "$(sort -u <<<"$(printf '%s\n' "${colours[@]}")" | wc -l)" -eq "$np" ] \
    && [ "$pw" -ge 300 ] && [ "$ph" -ge 100 ] && [ "$distinct" -gt "$np" ]; then
    echo "ok - $name: ${pw}x$ph PNG from Chromium, $distinct colours, all $np rank colours drawn"
  else
    echo "not ok - $name: $drawn of $np rank colours drawn (${#colours[@]} in the legend), ${pw:-?}x${ph:-?}, $distinct colours; missing: $missing"
    sed 's/^/#   /' "$work/counts"
  fi
}

picture intel-2x8x2-nics-gpus 8 --topology "$topo/32em64t-2n8c2t-pci-normalio.xml" --map sbnch --bind 2c --nics 1 --gpus 1
picture sgi-uv-384 48 --topology "$topo/192em64t-12gr2n8c2t.xml" --map scbnh --bind 1c --nics 1
picture two-pus 2 --synthetic "pack:1 core:1 pu:2" --map hcsbn --bind 1h
# The automatic policy's plan, as most users run it (refused before issue 75).
picture policy-intel-gpus 4 --topology "$topo/32em64t-2n8c2t-pci-normalio.xml" --policy auto
echo "# done: pictures.sh"
