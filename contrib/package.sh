#!/usr/bin/env bash
# Builds lama's packages into target/package/.
#
# Usage: contrib/package.sh deb    a Debian package for the distribution's Slurm (dpkg-deb), checked
#                                  with lintian: the plugin in Slurm's plugin directory, lama in
#                                  /usr/bin, manual pages, completions, documentation, and a
#                                  commented plugstack.conf.d snippet (installing enables nothing)
#        contrib/package.sh crates the cargo -p options of the crates the packages ship
#        contrib/package.sh rpm    an RPM for EL sites that build Slurm themselves, from
#                                  contrib/lama-slurm.spec with rpmbuild
# The plugin is built against the headers SLURM_INCLUDE_DIR names (default: the installed
# Slurm's), and each package requires that Slurm major.minor release. LAMA_PACKAGE_DIR puts the
# packages elsewhere (default target/package), e.g. one built for another release.
# The packages name as maintainer whoever builds them, as Debian's tools do: DEBFULLNAME and
# DEBEMAIL, else git's user.name and user.email, else the author of the tree's last commit
# (lama has no public home yet, so no Homepage or URL is written).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
kind=${1:-}
# The crates a package ships, built together (their dependencies' features unified as shipped).
# `contrib/package.sh crates` prints them for other release builds of the plugin (tests/harness.sh).
crates=(-p lama-spank -p lama-probe -p lama-cli -p lama-flux)
[ "$kind" != crates ] || { echo "${crates[*]}"; exit 0; }
# Where cargo builds (CARGO_TARGET_DIR, as cargo reads it; default target).
bin=${CARGO_TARGET_DIR:-$top/target}/release
out=${LAMA_PACKAGE_DIR:-$top/target/package}
die() { echo "package: $*" >&2; exit 1; }

version=$(awk -F'"' '/^\[workspace.package\]/ {w = 1} w && $1 ~ /^version/ {print $2; exit}' Cargo.toml)
include=${SLURM_INCLUDE_DIR:-/usr/include}
# Set either way: the plugin's build script reruns when this variable changes, even from unset
# to its default, so a build that names it (tests/harness.sh's release_plugin) reuses this one.
export SLURM_INCLUDE_DIR=$include
slurm=$(contrib/slurm-version.sh "$include") || die "cannot tell the Slurm release of $include"
# Slurm checks a SPANK plugin's major.minor only: the package requires that release, any
# maintenance version (a plugin built on 24.11.7's headers loads on Debian's 24.11.5). Every
# later release sorts at or above major.(minor+1)~: the plugin must not be loaded by one.
minor=${slurm#*.}
minor=${minor%%.*}
release=${slurm%%.*}.$minor
next=$(printf '%s.%02d' "${slurm%%.*}" $((10#$minor + 1)))
name=${DEBFULLNAME:-$(git config user.name 2>/dev/null || git log -1 --format=%an 2>/dev/null || true)}
email=${DEBEMAIL:-$(git config user.email 2>/dev/null || git log -1 --format=%ae 2>/dev/null || true)}
[ -n "$name" ] && [ -n "$email" ] || die "who builds these packages? set DEBFULLNAME and DEBEMAIL (the packages' maintainer)"
maintainer="$name <$email>"

build() {
  contrib/deps.sh
  cargo build --release --quiet "${crates[@]}"
  rm -rf "$out/gen"
  "$bin/lama" generate "$out/gen"
}

deb() {
  contrib/deps.sh dpkg-dev lintian
  build
  local arch multiarch root doc
  arch=$(dpkg --print-architecture)
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  root=$out/deb-root
  doc=$root/usr/share/doc/lama-slurm
  rm -rf "$root"
  install -d -m 0755 "$root/DEBIAN" "$doc" "$root/usr/bin" "$root/usr/lib/$multiarch/slurm-wlm" \
    "$root/usr/share/man/man1" "$root/usr/share/man/man8" "$root/etc/slurm/plugstack.conf.d" \
    "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/lib/$multiarch/lama" "$root/etc/flux/shell/lua.d"
  install -m 0755 -s "$bin/lama" "$root/usr/bin/lama"
  # Slurm's own plugins are 0644 shared objects in its plugin directory.
  install -m 0644 -s "$bin/liblama_spank.so" "$root/usr/lib/$multiarch/slurm-wlm/lama.so"
  # The plugin's hwloc helper, which it loads from its own folder when it must read a node.
  install -m 0644 -s "$bin/liblama_probe.so" "$root/usr/lib/$multiarch/slurm-wlm/liblama_probe.so"
  # The Flux shell plugin, outside Flux's plugin folder (whose every .so each job loads): the
  # lua.d file below loads it once uncommented.
  install -m 0644 -s "$bin/liblama_flux.so" "$root/usr/lib/$multiarch/lama/flux-lama.so"
  sed "s#@PLUGIN@#/usr/lib/$multiarch/lama/flux-lama.so#" contrib/packaging/flux-lama.lua \
    > "$root/etc/flux/shell/lua.d/lama.lua"
  chmod 0644 "$root/etc/flux/shell/lua.d/lama.lua"
  for page in "$out"/gen/man1/*.1 "$out"/gen/man8/*.8; do
    local sect=${page##*.}
    gzip -9n -c "$page" > "$root/usr/share/man/man$sect/$(basename "$page").gz"
  done
  install -m 0644 "$out/gen/completions/lama.bash" "$root/usr/share/bash-completion/completions/lama"
  install -m 0644 "$out/gen/completions/_lama" "$root/usr/share/zsh/vendor-completions/_lama"
  gzip -9n -c README.md > "$doc/README.md.gz"
  # The guides the README links to (user, admin, reference, messages, architecture).
  mkdir -p "$doc/docs"
  for page in docs/*.md; do gzip -9n -c "$page" > "$doc/docs/$(basename "$page").gz"; done
  install -m 0644 plugstack.conf.example "$doc/plugstack.conf.example"
  sed "s#@PLUGIN@#/usr/lib/$multiarch/slurm-wlm/lama.so#" contrib/packaging/plugstack-lama.conf \
    > "$root/etc/slurm/plugstack.conf.d/lama.conf"
  chmod 0644 "$root/etc/slurm/plugstack.conf.d/lama.conf"
  install -m 0644 contrib/packaging/copyright "$doc/copyright"
  sed "s/@VERSION@/$version/; s/@SLURM@/$slurm/; s|@MAINTAINER@|$maintainer|" contrib/packaging/changelog | gzip -9n > "$doc/changelog.gz"
  printf '%s\n' /etc/slurm/plugstack.conf.d/lama.conf /etc/flux/shell/lua.d/lama.lua > "$root/DEBIAN/conffiles"
  # Shared-library dependencies as Debian computes them, plus the Slurm release the plugin was
  # built for: a Slurm upgrade to another major.minor cannot leave this plugin loaded.
  local shlibs tmp
  tmp=$(mktemp -d)
  mkdir -p "$tmp/debian"
  printf 'Source: lama\n\nPackage: lama-slurm\nArchitecture: any\n' > "$tmp/debian/control"
  shlibs=$(cd "$tmp" && dpkg-shlibdeps -O "$root/usr/bin/lama" "$root/usr/lib/$multiarch/slurm-wlm/lama.so" "$root/usr/lib/$multiarch/slurm-wlm/liblama_probe.so" "$root/usr/lib/$multiarch/lama/flux-lama.so" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
  rm -rf "$tmp"
  [ -n "$shlibs" ] || die "dpkg-shlibdeps found no dependencies"
  local size
  size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  cat > "$root/DEBIAN/control" <<EOF
Package: lama-slurm
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $shlibs, slurm-client (>= $release) | slurm-smd-client (>= $release), slurm-client (<< $next~) | slurm-smd-client (<< $next~)
Enhances: slurmd
Section: admin
Priority: optional
Description: topology-aware task placement for Slurm and Flux (LAMA)
 A Slurm SPANK plugin that places the tasks of each job step on the
 hardware of its nodes with LAMA, the Locality Aware Mapping Algorithm,
 binds them, gives them their nearest NICs and GPUs and OpenMP thread
 places, and exports the step's task map (Flux RFC 34) as TASK_MAP.
 .
 Built for Slurm $release ($slurm's headers); enable it in plugstack.conf (see
 /etc/slurm/plugstack.conf.d/lama.conf). Also ships the lama command,
 which previews placements and converts task maps, and a Flux shell
 plugin with the same placement (see /etc/flux/shell/lua.d/lama.lua).
EOF
  (cd "$root" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
  local deb=$out/lama-slurm_${version}_$arch.deb
  rm -f "$deb"
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
  echo "$deb"
  # lintian: errors fail the build; its warnings are printed.
  if ! lintian --fail-on error --suppress-tags-from-file contrib/packaging/lintian-overrides "$deb" >&2; then
    die "lintian reports errors for $deb"
  fi
}

rpm_pkg() {
  contrib/deps.sh rpm
  build
  local topdir=$out/rpm
  rm -rf "$topdir"
  mkdir -p "$topdir"/{SOURCES,SPECS,BUILD,RPMS,SRPMS}
  # The binaries built above are packaged as they are (the spec's %build reuses the tree's
  # target directory); --nodeps: this Debian machine's rpm database has no slurm package.
  rpmbuild -bb --nodeps --quiet \
    --define "_topdir $topdir" --define "lama_version $version" --define "lama_tree $top" --define "lama_prebuilt 1" --define "lama_maintainer $maintainer" \
    --define "slurm_version $slurm" --define "slurm_release $release" --define "slurm_next $next" --define "__brp_compress /bin/true" \
    contrib/lama-slurm.spec >&2
  find "$topdir/RPMS" -name '*.rpm' -print
}

case "$kind" in
  deb) deb ;;
  rpm) rpm_pkg ;;
  *) die "usage: $0 deb|rpm" ;;
esac
