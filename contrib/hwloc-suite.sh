#!/usr/bin/env bash
# Turns hwloc's own test machines into the XML files under tests/topologies/hwloc-2.12/, once:
# each Linux dump of tests/hwloc/linux/*.tar.bz2 (a real or fake machine's /sys and /proc) as
# this machine's hwloc reads it, restricted to what the dump's cgroup allows and whole
# (--whole-system), and each XML of tests/hwloc/xml/ that this hwloc reads, unchanged. The
# files are shipped, so the test command needs neither hwloc's repository nor this script
# (lama/tests/hwloc_suite.rs reads them); ORIGIN.md lists where each came from.
# Usage: contrib/hwloc-suite.sh HWLOC_REPO [TAG]   (TAG defaults to hwloc-2.12.2; a git clone of
#   https://github.com/open-mpi/hwloc; needs lstopo-no-graphics, from Debian's hwloc package)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=${1:?usage: contrib/hwloc-suite.sh HWLOC_REPO [TAG]}
tag=${2:-hwloc-2.12.2}
out=tests/topologies/hwloc-2.12
command -v lstopo-no-graphics >/dev/null || { echo "hwloc-suite: needs lstopo-no-graphics (apt-get install hwloc)" >&2; exit 2; }
commit=$(git -C "$repo" rev-parse --verify "$tag^{commit}") || { echo "hwloc-suite: no $tag in $repo" >&2; exit 2; }
version=$(lstopo-no-graphics --version | awk '{print $NF}')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out"
origin=$out/ORIGIN.md
{
  echo "# hwloc's test machines"
  echo
  echo "Made by \`contrib/hwloc-suite.sh\` from hwloc's repository (github.com/open-mpi/hwloc), tag"
  echo "\`$tag\` (commit \`$commit\`), with Debian's hwloc $version; hwloc's BSD licence"
  echo "(\`COPYING\` in that repository) covers them. \`lama/tests/hwloc_suite.rs\` reads every file."
  echo
  echo "| file | from | how |"
  echo "|---|---|---|"
} > "$origin"
skipped=()
for path in $(git -C "$repo" ls-tree --name-only "$tag" tests/hwloc/linux/ | grep '\.tar\.bz2$'); do
  name=$(basename "$path" .tar.bz2)
  git -C "$repo" show "$tag:$path" > "$work/$name.tar.bz2"
  mkdir -p "$work/$name"
  tar -xjf "$work/$name.tar.bz2" -C "$work/$name"
  # The dump's own folder (not always named as the tarball).
  root=$(find "$work/$name" -mindepth 1 -maxdepth 1 -type d | head -1)
  for whole in "" --whole-system; do
    file=$out/$name${whole:+.whole}.fsroot.xml
    if HWLOC_COMPONENTS=linux,pci,stop HWLOC_FSROOT=$root HWLOC_THISSYSTEM=0 \
      HWLOC_DUMPED_HWDATA_DIR=/var/run/hwloc lstopo-no-graphics $whole --of xml "$file" 2>/dev/null &&
      hwloc-info --input "$file" >/dev/null 2>&1; then
      # A dump without a cgroup gives the same file both ways: kept once.
      if [ -n "$whole" ] && cmp -s "$file" "$out/$name.fsroot.xml"; then
        rm -f "$file"
        continue
      fi
      echo "| \`$(basename "$file")\` | \`$path\` | \`HWLOC_FSROOT\` export${whole:+, \`--whole-system\`} |" >> "$origin"
    else
      rm -f "$file"
      skipped+=("$path${whole:+ ($whole)}")
    fi
  done
done
for path in $(git -C "$repo" ls-tree --name-only "$tag" tests/hwloc/xml/ | grep '\.xml$'); do
  file=$out/$(basename "$path")
  git -C "$repo" show "$tag:$path" > "$file"
  if hwloc-info --input "$file" >/dev/null 2>&1; then
    echo "| \`$(basename "$file")\` | \`$path\` | unchanged |" >> "$origin"
  else
    rm -f "$file"
    skipped+=("$path (hwloc $version cannot read it)")
  fi
done
if [ ${#skipped[@]} -gt 0 ]; then
  { echo; echo "Not made: ${skipped[*]}."; } >> "$origin"
fi
echo "hwloc-suite: $(ls "$out"/*.xml | wc -l) files in $out, $(du -sh "$out" | cut -f1)" >&2
