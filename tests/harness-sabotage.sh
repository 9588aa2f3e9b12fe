#!/usr/bin/env bash
# The test command's accounting (tests/harness.sh, tests/tap.sh) against sabotaged runs: each
# sabotage runs the real script whose accounting is at stake, with only the component below it
# replaced by a stand-in that fails the way the real one can, and its lines are then totalled as
# the test command totals them. Each must end in a `not ok` and a non-zero exit:
#   a guest killed half-way         tests/guest/run.sh, the guest's ssh cut after two checks
#   a suite that exits early        a suite that stops without done_testing (or is killed, or
#                                   cannot start, under the test command's set -e)
#   a flux start that fails         tests/flux/hardware.sh with a flux whose `start` fails
#   differential.sh dying           tests/schedmd/sandbox.sh, differential.sh killed before its verdict
#   the control's run dying         tests/schedmd/sandbox.sh, the control's differential.sh killed after its not ok
#   a fuzz target with no input     contrib/fuzz.sh with a cargo-fuzz that runs nothing
#   a failed release build          release_plugin with a cargo that fails, an old plugin left
# And the control: a suite that runs to its end with a skip totals `1 passed, 0 failed, 1 skipped`,
# exits 0, and its recap names the skip and no failure. No cluster, guest or build is needed: a few seconds.
# Usage: tests/harness-sabotage.sh
set -uo pipefail
real=$(cd "$(dirname "$0")/.." && pwd)
source "$real/tests/tap.sh"
source "$real/tests/harness.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A tree with the real scripts named and stand-ins for the rest: mktree NAME FILE... (paths in
# the repository, copied), its stand-ins written after.
mktree() {
  local t=$work/$1 f
  shift
  for f in tests/tap.sh tests/harness.sh "$@"; do
    mkdir -p "$t/$(dirname "$f")"
    cp "$real/$f" "$t/$f"
  done
  echo "$t"
}
stub() { mkdir -p "$(dirname "$1")"; cat > "$1"; chmod +x "$1"; }

# sabotaged NAME COMMAND...: the command's lines, totalled; the sabotage is caught when they
# hold a `not ok`, the total exits non-zero and the recap names that `not ok` again.
sabotaged() {
  local name=$1 out total rc first
  shift
  out=$work/$name.log
  "$@" >"$out" 2>&1
  total=$(tally "$out"); rc=$?
  first=$(grep -m1 '^not ok - ' "$out" | cut -c1-300)
  # grep reads the whole recap (no -q): with pipefail, a grep that quits at its match can kill
  # recap with SIGPIPE, and the pipeline fails though the line was there (a flaky verdict).
  if [ $rc != 0 ] && [ -n "$first" ] && recap "$out" | grep -xF "#   $first" >/dev/null; then
    ok "sabotage caught: $name ($total; $(grep -m1 '^not ok - ' "$out" | cut -c1-120))"
  else not_ok "sabotage not caught: $name (totals: $total, exit $rc)" "$(cat "$out")"; fi
}

# --- a guest killed half-way ---------------------------------------------------------------------
t=$(mktree guest tests/guest/run.sh)
stub "$t/contrib/guest.sh" <<'EOF'
#!/usr/bin/env bash
# A guest that boots, runs two checks of its suite, and dies (ssh then exits 255).
case $1 in
  start) echo tcg > "$2/accel" ;;
  ssh) echo "ok - [guest] first check"; echo "ok - [guest] second check"; exit 255 ;;
esac
EOF
stub "$t/contrib/slurm-version.sh" <<<'#!/bin/sh
echo 22.05'
mkdir -p "$work/plugins/22.05" && : > "$work/plugins/22.05/liblama_spank.so"
sabotaged "a guest killed half-way" suite "$t/tests/guest/run.sh" /bin/true "$work/plugins"

# --- a failure's evidence reaches the recap -------------------------------------------------------
stub "$work/evidence.sh" <<EOF
#!/usr/bin/env bash
source "$real/tests/tap.sh"
not_ok "a failing check" "why it failed"
done_testing
EOF
suite "$work/evidence.sh" >"$work/evidence.log" 2>&1
if recap "$work/evidence.log" | grep -xF '#     #   why it failed' >/dev/null; then
  ok "a failure's recap carries its evidence: the run's tail says why, not only what"
else not_ok "a failure's recap without its evidence" "$(recap "$work/evidence.log")"; fi

# --- a suite that exits early ----------------------------------------------------------------------
stub "$work/early.sh" <<EOF
#!/usr/bin/env bash
source "$real/tests/tap.sh"
ok "the first check"
exit 0
ok "the second check, never reached"
done_testing
EOF
sabotaged "a suite that exits early" suite "$work/early.sh"
# The same suite ending with a status of its own.
stub "$work/dies.sh" <<EOF
#!/usr/bin/env bash
source "$real/tests/tap.sh"
ok "the first check"
kill -9 \$\$
EOF
sabotaged "a suite killed" suite "$work/dies.sh"

# A suite that cannot even start (not executable, as tests/slurm/nvml.sh once was), under the
# test command's own set -e: the run goes on, and the suite is a failure.
stub "$work/mode.sh" <<<'#!/bin/sh'
chmod -x "$work/mode.sh"
cannot_start() { (set -euo pipefail; suite "$work/mode.sh"; echo "# the run went on"); }
sabotaged "a suite that cannot start" cannot_start
grep -q '^# the run went on' "$work/a suite that cannot start.log" && ok "a suite that cannot start does not end the run" ||
  not_ok "a suite that cannot start ended the run" "$(cat "$work/a suite that cannot start.log")"

# --- a flux start that fails ------------------------------------------------------------------------
stub "$work/flux/bin/flux" <<'EOF'
#!/bin/sh
echo "flux-start: the broker could not start" >&2
exit 1
EOF
sabotaged "a flux start that fails" suite "$real/tests/flux/hardware.sh" /bin/true /bin/true "$work/flux"

# --- differential.sh dying, in its run or in sandbox.sh's control -------------------------------------------
# schedmd_tree NAME CONTROL_END RUN: sandbox.sh with no cluster and a stand-in differential.sh.
# The control's run (a plugin that cannot load) prints what differential.sh prints for it, then
# does CONTROL_END; the run itself does RUN.
schedmd_tree() {
  local t
  t=$(mktree "$1" tests/schedmd/sandbox.sh)
  stub "$t/contrib/sandbox.sh" <<<'#!/bin/sh
exit 0'
  stub "$t/contrib/slurm-version.sh" <<<'#!/bin/sh
echo 22.05'
  {
    cat <<'EOF'
#!/usr/bin/env bash
if [[ $2 == */broken.so ]]; then
  echo "not ok - [stand-in] test1.1 passes without lama and fails with lama's default arguments: srun failed"
  echo "#     srun: error: spank: $2: Dlopen of plugin file failed"
EOF
    printf '  %s\nfi\n%s\n' "$2" "$3"
  } | stub "$t/tests/schedmd/differential.sh"
  echo "$t"
}
t=$(schedmd_tree schedmd 'echo "# done: differential.sh"; exit 0' \
  'echo "# 3 tests, each run without lama / with its defaults / under policy=auto"; kill -9 $$')
sabotaged "differential.sh dying before its verdict" suite "$t/tests/schedmd/sandbox.sh" /usr /bin/true test1.1
t=$(schedmd_tree schedmd-control 'kill -9 $$' \
  'echo "ok - [stand-in] no test that passes without lama fails with its default arguments"; echo "# done: differential.sh"')
sabotaged "the control's differential.sh dying before its end" suite "$t/tests/schedmd/sandbox.sh" /usr /bin/true test1.1

# --- a fuzz target with no input -------------------------------------------------------------------------
t=$(mktree fuzz contrib/fuzz.sh tests/fuzz.sh)
mkdir -p "$t/fuzz/fuzz_targets" && : > "$t/fuzz/fuzz_targets/placement.rs"
stub "$work/bin/cargo" <<'EOF'
#!/bin/sh
# cargo-fuzz that builds and runs nothing: no input executed, status 0.
case "$*" in *"fuzz list"*) echo placement ;; esac
exit 0
EOF
no_input() { PATH="$work/bin:$PATH" suite "$t/tests/fuzz.sh" 1; }
sabotaged "a fuzz target with no input" no_input

# --- a failed release build -----------------------------------------------------------------------------
stub "$work/failing/cargo" <<'EOF'
#!/bin/sh
echo "error: could not compile lama-spank" >&2
exit 101
EOF
old=$work/release/26.05/liblama_spank.so
mkdir -p "$(dirname "$old")" && echo "an earlier run's build" > "$old"
failed_build() { PATH="$work/failing:$PATH" release_plugin /nonexistent/include "$old"; }
sabotaged "a failed release build" failed_build
[ ! -e "$old" ] && ok "a failed release build leaves no earlier run's plugin to test" ||
  not_ok "a failed release build left $old"

# --- the control: a whole suite with a skip ------------------------------------------------------------------
stub "$work/whole.sh" <<EOF
#!/usr/bin/env bash
source "$real/tests/tap.sh"
ok "a check"
skip "a check this machine cannot make: why"
done_testing
EOF
suite "$work/whole.sh" >"$work/whole.log" 2>&1
total=$(tally "$work/whole.log"); rc=$?
told=$(recap "$work/whole.log")
# As the test command ends: recap, then tally, under set -e. A run without failures must still
# print its totals and exit 0.
ending=$(bash -c 'set -euo pipefail; source "$1/tests/harness.sh"; recap "$2" >/dev/null; tally "$2"' _ "$real" "$work/whole.log"); erc=$?
if [ $rc = 0 ] && [ "$total" = "1 passed, 0 failed, 1 skipped" ] &&
   [ $erc = 0 ] && [ "$ending" = "$total" ] &&
   [ "$told" = $'# what was skipped:\n#   skip - a check this machine cannot make: why' ]; then
  ok "a suite that runs to its end: '$total', exit 0; the skip not counted as passed, and named again"
else not_ok "the control suite" "totals: $total, exit $rc" "recap: $told" "the test command's ending (exit $erc): $ending" "$(cat "$work/whole.log")"; fi
done_testing
