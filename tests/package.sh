#!/usr/bin/env bash
# The packages as an admin uses them: builds the Debian package, installs it with dpkg -i, runs
# the sandbox cluster with the installed plugin and the installed lama (nothing from the build
# tree), reads the manual pages, removes the package and checks that nothing it installed
# remains; builds the RPM and checks what it requires; builds a package for Slurm 24.11 and checks
# that dpkg refuses it here. Debian's Slurm (the package's) must be
# installed; LAMA_SANDBOX and LAMA_SANDBOX_PORT name the cluster, which this script stops.
# Usage: tests/package.sh   (from the repository, as root)
# Prints one "ok - ..." or "not ok - ..." line per check.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
contrib/deps.sh man-db
work=$(mktemp -d)
trap 'dpkg -P lama-slurm >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
source "$top/tests/tap.sh"
# dpkg ARGS: dpkg, waiting (LAMA_APT_LOCK_WAIT seconds, as contrib/deps.sh) while another apt-get or
# dpkg holds its lock: dpkg itself gives up at once, and unattended upgrades may run at any time.
dpkg() {
  local waited=0 rc
  while :; do
    command dpkg "$@" 2>"$work/dpkg.err"; rc=$?
    grep -q 'lock.*another process\|locked by another' "$work/dpkg.err" && [ "$waited" -lt "${LAMA_APT_LOCK_WAIT:-1200}" ] || break
    [ "$waited" -gt 0 ] || echo "# dpkg's lock is held by another apt-get or dpkg (unattended upgrades?): waiting up to ${LAMA_APT_LOCK_WAIT:-1200} s" >&2
    sleep 5; waited=$((waited + 5))
  done
  cat "$work/dpkg.err" >&2
  return $rc
}

deb=$(contrib/package.sh deb 2>"$work/build.err" | tail -n 1)
if [ -f "$deb" ]; then ok "Debian package built, lintian reports no errors: $(basename "$deb")"
else not_ok "Debian package" "$(tail -n 30 "$work/build.err")"; exit 0; fi
depends=$(dpkg-deb -f "$deb" Depends)
slurm=$(dpkg-query -W -f='${Version}' slurm-client | sed 's/-.*//')
mm=${slurm%.*}
if grep -q "slurm-client (>= $mm)" <<<"$depends" && grep -q "slurm-client (<< ${mm%.*}.$(printf '%02d' $((10#${mm#*.} + 1)))~)" <<<"$depends" \
  && grep -q 'libhwloc15' <<<"$depends"; then
  ok "the package requires hwloc and Slurm $mm (this machine's $slurm, or any other $mm.x), not another release: $depends"
else not_ok "package dependencies" "$depends"; fi

if ! dpkg -i "$deb" >"$work/install.log" 2>&1; then not_ok "dpkg -i" "$(cat "$work/install.log")"; exit 0; fi
dpkg -L lama-slurm > "$work/files"
plugin=$(grep '/slurm-wlm/lama\.so$' "$work/files")
ok "dpkg -i installed $(wc -l < "$work/files") paths, the plugin as $plugin"
snippet=/etc/slurm/plugstack.conf.d/lama.conf
if [ -f "$snippet" ] && ! grep -qv '^#' "$snippet" && grep -q "^#required $plugin$" "$snippet"; then
  ok "the plugstack.conf.d snippet is installed commented out (nothing enabled)"
else not_ok "plugstack.conf.d snippet" "$(cat "$snippet" 2>&1)"; fi
luad=/etc/flux/shell/lua.d/lama.lua
fluxso=$(grep '/lama/flux-lama\.so$' "$work/files")
if [ -n "$fluxso" ] && [ -f "$luad" ] && ! grep -qv '^--' "$luad" && grep -q "^-- plugin.load { file = \"$fluxso\"" "$luad"; then
  ok "the Flux shell plugin is installed as $fluxso, with its lua.d file commented out (nothing enabled)"
else not_ok "Flux plugin and lua.d file" "plugin: $fluxso" "$(cat "$luad" 2>&1)"; fi
# grep without -q reads all of man's output: with pipefail, one that quits early can kill man
# with SIGPIPE and fail the check though the word was there.
if MANPAGER=cat MANWIDTH=100 man lama-spank 2>/dev/null | grep -- '--lama-threads' >/dev/null \
  && MANPAGER=cat man lama-plan 2>/dev/null | grep -- '--synthetic' >/dev/null \
  && [ -f /usr/share/bash-completion/completions/lama ] && [ -f /usr/share/zsh/vendor-completions/_lama ]; then
  ok "man lama-spank and man lama-plan work; bash and zsh completions installed"
else not_ok "manual pages or completions" "$(MANPAGER=cat man lama-spank 2>&1 | head -5)"; fi

# The sandbox with the installed plugin; expectations from the installed lama.
contrib/sandbox.sh stop >/dev/null 2>&1
LAMA_SANDBOX_PLUGIN="required $plugin" contrib/sandbox.sh start >/dev/null
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
n=$(nproc)
got=$(timeout 120 srun -N3 -n$((3 * n)) --lama-map=csbnh --lama-bind=1c bash -c \
  'echo "$SLURM_PROCID $SLURM_NODEID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) $TASK_MAP"' 2>&1 | sort -n)
want=$(/usr/bin/lama plan --this-machine --nodes 3 --map csbnh --bind 1c --np $((3 * n)) |
  awk '/^node [0-9]+ / {n = $2} /^  rank / {print $2, n, $NF} /^TASK_MAP=/ {sub("TASK_MAP=", ""); m = $0} END {print m > "/dev/stderr"}' 2>"$work/map" | sort -n)
map=$(cat "$work/map")
if [ -n "$got" ] && [ "$got" = "$(awk -v m="$map" '{print $0, m}' <<<"$want")" ]; then
  ok "installed plugin: bindings and TASK_MAP as the installed lama plan says"
else not_ok "installed plugin step" "got:" "$got" "want:" "$want" "TASK_MAP $map"; fi
out=$(timeout 60 srun -N1 -n1 --lama-bind=2q true 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -qF "invalid --lama-bind '2q'" <<<"$out"; then ok "installed plugin refuses a bad option in srun"
else not_ok "installed plugin, bad option (rc $rc)" "$out"; fi
contrib/sandbox.sh stop >/dev/null

# The installed Flux plugin enabled as a site does it: its lua.d line uncommented, and a Flux
# instance whose shells read /etc/flux/shell/initrc.lua (flux-core's own initrc, copied there
# when missing: a shell sources lua.d/*.lua beside its initrc), no -o userrc. flux-core is the
# test command's build (cached).
flux_prefix=$(contrib/flux-build.sh 2>/dev/null)
initrc=/etc/flux/shell/initrc.lua made_initrc=""
cp "$luad" "$work/lama.lua.orig"
sed -i 's/^-- plugin.load/plugin.load/' "$luad"
[ -e "$initrc" ] || { cp "$flux_prefix/etc/flux/shell/initrc.lua" "$initrc"; made_initrc=1; }
got=$(timeout 120 "$flux_prefix/bin/flux" start -Sconf.shell_initrc="$initrc" "$flux_prefix/bin/flux" run -n"$n" \
  -o lama.map=csbnh -o lama.bind=1c sh -c 'echo "$FLUX_TASK_RANK 0 $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) ${TASK_MAP:-none}"' 2>&1 | sort -n)
want=$(/usr/bin/lama plan --this-machine --map csbnh --bind 1c --np "$n" | awk '/^  rank / {print $2, 0, $NF}')
cp "$work/lama.lua.orig" "$luad"
[ -z "$made_initrc" ] || rm -f "$initrc"
if [ -n "$want" ] && [ "$(awk '{print $1, $2, $3}' <<<"$got")" = "$want" ] && ! grep -q ' none$' <<<"$got"; then
  ok "installed Flux plugin, enabled in its lua.d file: a flux run -o lama.map job is bound as the installed lama plan says, with TASK_MAP, without -o userrc"
else not_ok "installed Flux plugin through lua.d" "got:" "$got" "want:" "$want"; fi

# Removal: every file the package installed is gone, but the conffile, which dpkg -r keeps as
# the admin's configuration until purge.
dpkg -r lama-slurm >"$work/remove.log" 2>&1
left=$(while read -r f; do [ -f "$f" ] && echo "$f"; done < "$work/files")
if [ "$left" = "$(printf '%s\n' "$luad" "$snippet" | grep -Fxf - "$work/files")" ]; then ok "dpkg -r removed every installed file; only the conffiles $snippet and $luad stay until purge"
else not_ok "files left after dpkg -r" "$left" "$(cat "$work/remove.log")"; fi
dpkg -P lama-slurm >/dev/null 2>&1
left=$(while read -r f; do [ -e "$f" ] && [ ! -d "$f" ] && echo "$f"; done < "$work/files")
if [ -z "$left" ]; then ok "dpkg -P: nothing the package installed remains"
else not_ok "files left after purge" "$left"; fi

# The RPM for EL sites.
rpmfile=$(contrib/package.sh rpm 2>"$work/rpm.err" | tail -n 1)
if [ -f "$rpmfile" ]; then
  req=$(rpm -qp --requires "$rpmfile" 2>/dev/null)
  files=$(rpm -qpl "$rpmfile" 2>/dev/null)
  if grep -qx "slurm >= $mm" <<<"$req" && grep -q "^slurm < " <<<"$req" && grep -q '/slurm/lama.so$' <<<"$files" && grep -q '/slurm/liblama_probe.so$' <<<"$files" && grep -q '/lama/flux-lama.so$' <<<"$files" \
    && grep -q 'man8/lama-spank.8' <<<"$files" && grep -q '/usr/bin/lama$' <<<"$files"; then
    ok "RPM built with rpmbuild: $(basename "$rpmfile") requires $(grep '^slurm' <<<"$req" | tr '\n' ' ')"
  else not_ok "RPM contents" "$req" "$files"; fi
else not_ok "RPM build" "$(tail -n 30 "$work/rpm.err")"; fi

# A site on another release, Debian's or SchedMD's packages (slurm-smd-client): a package built
# against Slurm 24.11's headers requires 24.11 (any 24.11.x) under either name, and dpkg refuses it on this
# machine's 22.05 with the reason, configuring nothing.
headers=$(ls -d "${LAMA_SHARED:-$top/../shared}"/vendor/slurm-headers/24.11.* 2>/dev/null | tail -n 1)
if [ -z "$headers" ]; then not_ok "Slurm 24.11 headers in the shared vendor folder" "none found"
else
  v=${headers##*/}
  v=${v%.*}
  # Into the scratch folder: target/package keeps the package for this machine's Slurm.
  deb=$(SLURM_INCLUDE_DIR=$headers LAMA_PACKAGE_DIR=$work/package contrib/package.sh deb 2>"$work/build.err" | tail -n 1)
  depends=$(dpkg-deb -f "$deb" Depends 2>&1)
  want="slurm-client (>= $v) | slurm-smd-client (>= $v), slurm-client (<< 24.12~) | slurm-smd-client (<< 24.12~)"
  dpkg -i "$deb" >"$work/install.log" 2>&1; rc=$?
  state=$(dpkg-query -W -f='${db:Status-Abbrev}' lama-slurm 2>/dev/null)
  dpkg -P lama-slurm >/dev/null 2>&1
  if [[ $depends == *"$want"* ]] && [ $rc -ne 0 ] && grep -q "lama-slurm depends on slurm-client (>= $v) | slurm-smd-client" "$work/install.log" \
    && [ "${state:0:2}" != ii ]; then
    ok "a package built for Slurm $v requires it from Debian's or SchedMD's packages; dpkg refuses it on $slurm, saying why"
  else not_ok "package for Slurm $v (dpkg -i rc $rc, state '$state')" "$depends" "$(cat "$work/install.log" "$work/build.err" | tail -n 20)"; fi
fi
done_testing
