# Sourced by contrib/slurm-build.sh and contrib/flux-build.sh: an upstream source tarball built
# once into a prefix outside the repository, keyed by its version, with a marker written only
# after the build and its checks succeeded.
#
# The caller sets `what` (e.g. "Slurm", for messages), `stem` (the tarball's name before the
# version, e.g. "slurm"), `cache` and optionally `recipe` (a stamp that changes with the way
# the build is made, part of the prefix's name), defines die(), then calls:
#   newest_tarball GIVEN DIR   prints GIVEN when not empty, else the newest $stem-X.Y.Z tarball
#                           in ../shared/vendor/DIR beside the repository (the caller sets `top`)
#   cached_prefix TARBALL   sets tarball, version, prefix and marker; when a finished build is
#                           there, prints its prefix and exits 0
#   cached_build STEPS      unpacks the tarball into $cache/build-$version and runs the function
#                           STEPS there, its output in $log; on failure shows the log's end
#   cached_done             records the build time, writes the marker, removes the build folder
#                           and prints the prefix

newest_tarball() {
  local given=$1 dir=$top/../shared/vendor/$2 newest
  if [ -n "$given" ]; then echo "$given"; return; fi
  newest=$(ls "$dir/$stem"-[0-9]*.tar.* 2>/dev/null | grep -v subset | sort -V | tail -n 1)
  [ -n "$newest" ] || die "no tarball given and none in $dir/"
  echo "$newest"
}

cached_prefix() {
  tarball=$1
  [ -r "$tarball" ] || die "cannot read $tarball"
  local name
  name=$(basename "$tarball")
  version=${name#"$stem"-}
  version=${version%.tar.*}
  [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || die "cannot tell the version from $name (want $stem-X.Y.Z.tar.*)"
  prefix=$cache/$stem-$version${recipe:+-$recipe}
  marker=$prefix/.lama-build-complete
  if [ -f "$marker" ]; then
    echo "$prefix"
    exit 0
  fi
}

cached_build() {
  build=$cache/build-$version
  rm -rf "$build" "$prefix"
  mkdir -p "$build"
  log=$build/build.log
  started=$(date +%s)
  me=${0##*/}
  me=${me%.sh}
  echo "$me: building $what $version into $prefix (log: $log)" >&2
  tar -xf "$tarball" -C "$build" --strip-components=1
  (cd "$build" && "$1") || { tail -n 30 "$log" >&2; die "building $what $version failed (log: $log)"; }
}

cached_done() {
  echo "$(( $(date +%s) - started ))" > "$prefix/.lama-build-seconds"
  touch "$marker"
  rm -rf "$build"
  echo "$me: $what $version built in $(cat "$prefix/.lama-build-seconds") s" >&2
  echo "$prefix"
}
