# Shared by the cluster tests: TAP-like result lines, the sandbox cluster, `lama plan` as lines.
# Needs $lama, $plugin and $top set, and LAMA_SANDBOX naming the cluster.

ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1"; shift; printf '%s\n' "$@" | sed 's/^/#   /'; }
# Rewrites the plugin's plugstack.conf line (slurmstepd and srun read it for every step).
plugstack() { echo "$*" > "$LAMA_SANDBOX/plugstack.conf"; }
# Restarts the sandbox with the plugin; arguments are extra sandbox settings (VAR=value).
cluster() {
  "$top/contrib/sandbox.sh" stop >/dev/null 2>&1
  env "$@" LAMA_SANDBOX_PLUGIN="required $plugin" "$top/contrib/sandbox.sh" start >/dev/null
}
run() { timeout 120 srun "$@"; }
# `lama plan` text as "rank node cpus" lines.
plan_lines() { "$lama" plan "$@" | awk '/^node [0-9]+ / {n = $2} /^  rank / {print $2, n, $NF}' | sort -n; }
