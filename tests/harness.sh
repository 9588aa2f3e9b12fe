# How the test command accounts for its suites, sourced by contrib/test.sh, tests/guest/run.sh,
# tests/trixie/run.sh and tests/schedmd/sandbox.sh, and proven against sabotaged runs by
# tests/harness-sabotage.sh.
#   suite CMD [ARG...]   runs a suite, its lines on stdout as they come, then its verdict (when it
#                        failed) and its time
#   verdict NAME STATUS FILE   `not ok` when the suite NAME exited with STATUS other than 0 or its
#                        output FILE has no `# done: NAME` line (tests/tap.sh's done_testing)
#   release_plugin INCLUDE DEST   the plugin's release build against INCLUDE's headers copied to
#                        DEST, which is removed first so that no earlier run's build is ever
#                        what is tested; `not ok` when the build fails. Built with the packages'
#                        crates (contrib/package.sh), so its dependencies have the features the
#                        packaged plugin's have and one build serves both
#   tally LOG            the closing line, `N passed, N failed, N skipped`, from cargo's `test
#                        result:` lines and the suites' `ok`, `not ok` and `skip` lines; exits 1
#                        when anything failed or nothing passed
#   recap LOG            every failed and skipped test again, so that the run's tail names them

verdict() {
  local name=$1 status=$2 file=$3
  if [ "$status" != 0 ]; then
    echo "not ok - $name exited with status $status (its lines above)"
  elif ! grep -qxF "# done: $name" "$file"; then
    echo "not ok - $name ended before its end: no '# done: $name' line (its lines above)"
  fi
}

suite() {
  local name=${1##*/} started out status
  started=$(date +%s)
  out=$(mktemp)
  # In a condition, so that the caller's set -e cannot end the run before the verdict.
  if "$@" 2>&1 | tee "$out"; then status=0; else status=${PIPESTATUS[0]}; fi
  verdict "$name" "$status" "$out"
  rm -f "$out"
  echo "# $name: $(($(date +%s) - started)) s"
}

release_plugin() {
  local include=$1 dest=$2
  mkdir -p "$(dirname "$dest")"
  rm -f "$dest"
  # shellcheck disable=SC2046 # the crates' -p options, one word each
  if SLURM_INCLUDE_DIR=$include cargo build --release --quiet $("$(dirname "${BASH_SOURCE[0]}")/../contrib/package.sh" crates); then
    cp target/release/liblama_spank.so "$dest"
  else
    echo "not ok - the release plugin builds against $include"
  fi
}

tally() {
  awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
       /^ok - / { p++ } /^not ok - / { f++ } /^skip - / { s++ }
       END { printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f > 0 || p == 0) }' "$1"
}

recap() {
  local failed skipped
  # Each failure with the first lines of its evidence (the "#   " lines under it), so that a
  # run's tail alone says why, not only what. (awk, not grep: finding nothing is no error, which
  # would end a caller under set -e.)
  failed=$(awk '
    /^(not ok - |test .* \.\.\. FAILED$)/ { print; n = 12; next }
    n > 0 && /^#   / { print "  " $0; n--; next }
    { n = 0 }' "$1" | cut -c1-300)
  skipped=$(awk '/^skip - /' "$1" | cut -c1-300)
  [ -z "$failed" ] || printf '# what failed:\n%s\n' "$(sed 's/^/#   /' <<<"$failed")"
  [ -z "$skipped" ] || printf '# what was skipped:\n%s\n' "$(sed 's/^/#   /' <<<"$skipped")"
}
