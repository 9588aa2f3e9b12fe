#!/usr/bin/env bash
# SchedMD's own regression tests (the expect and Python tests of a Slurm release's testsuite) run
# three times on a running cluster: without lama, with lama as the admin guide installs it (no arguments: TASK_MAP
# only), and with a site's `policy=auto`. Each test's outcome (pass, fail, skip, with Slurm's
# reason) is compared across the three runs:
#   - a test that passes without lama and fails with lama's default arguments is a lama defect;
#   - under policy=auto a test may differ only where the admin guide's section "Slurm's own tests
#     with lama loaded" names it (lama's documented placement replacing Slurm's default binding).
# A test's three runs follow each other (PLUGSTACK rewritten between them: srun and
# slurmstepd read it anew for every step), so a slow moment of the machine falls on one test, not
# on one of the three runs. A run that differs is run once more, in the same order, before it
# counts: a test that agrees on the second try is listed as unsteady, not as a difference.
#
# Usage: tests/schedmd/differential.sh TESTSUITE PLUGIN PLUGSTACK TESTS_FILE|TEST...|--all
#   TESTSUITE  SchedMD's testsuite tarball, or a folder of them (../shared/vendor/slurm-testsuite/):
#              then the one of the cluster's release, or else the newest one older than it
#              (SchedMD's 25.11 and 26.05 release tags carry no expect tests: 26.05 runs 24.11.5's)
#   PLUGIN     the lama plugin built for this Slurm
#   PLUGSTACK  the cluster's PlugStackConfig (rewritten for each run, restored at the end). When
#              it is another file than plugstack.conf beside SLURM_CONF (the file SchedMD's tests
#              edit), each run writes lama's line there and then includes the tests' file, so
#              that lama stays loaded beside the tests that replace plugstack.conf with their own
#              plugin alone (test7.21, test7.24); where it is that file, those tests skip
#              (lama would not be loaded in them).
#   TESTS_FILE a file naming tests one per line (# starts a comment), or the tests themselves:
#              testN.M for an expect test, python/tests/PATH.py for a Python test (pytest, in
#              ATF's local-config mode: a test that needs another configuration skips);
#              a name ending in "!" must run here: it must pass without lama in one of up to
#              three rounds, or the run is not ok;
#   --all      every test1.* (srun), test7.* (SPANK, prolog, environment), test15.* (salloc) and
#              test17.* (sbatch) expect test of the testsuite, and every Python test
# Environment: SLURM_CONF (the cluster's slurm.conf; PATH must find its Slurm first),
#   LAMA_SCHEDMD_ARGS (more plugin arguments for both lama runs, e.g. the sandbox's cache=DIR),
#   LAMA_SCHEDMD_OUT (keep each run's log and the table there; default a temporary folder),
#   LAMA_SCHEDMD_TIMEOUT (seconds a test may take, default 600),
#   LAMA_SCHEDMD_GUIDE (the admin guide listing the explained differences, default the tree's),
#   LAMA_SCHEDMD_WHERE (where the cluster runs, for the ok lines: sandbox, guest, ...).
# Prints one "ok - ..." or "not ok - ..." line per rule and per difference, the table as comments.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
suite=$1 plugin=$(realpath "$2") plugstack=$3
shift 3
guide=${LAMA_SCHEDMD_GUIDE:-$top/docs/admin-guide.md}
limit=${LAMA_SCHEDMD_TIMEOUT:-600}
args=${LAMA_SCHEDMD_ARGS:-}
out=${LAMA_SCHEDMD_OUT:-}
work=$(mktemp -d /tmp/lama-schedmd.XXXXXX)
[ -n "$out" ] || out=$work/out
mkdir -p "$out"
# The file SchedMD's tests edit (their get_conf_path), and whether Slurm reads lama's line from
# another one that includes it.
tests_plugstack=$(dirname "${SLURM_CONF:-/etc/slurm/slurm.conf}")/plugstack.conf
included=""
[ "$(realpath -m "$plugstack")" = "$(realpath -m "$tests_plugstack")" ] || included=$tests_plugstack
saved=$work/plugstack.saved
cp "$plugstack" "$saved" 2>/dev/null || : >"$saved"
if [ -n "$included" ]; then
  cp "$included" "$work/tests-plugstack.saved" 2>/dev/null || : >"$work/tests-plugstack.saved"
  : >"$included"
fi
trap 'cp "$saved" "$plugstack"; [ -z "$included" ] || cp "$work/tests-plugstack.saved" "$included"
  scancel -u "$(id -un)" >/dev/null 2>&1
  ! declare -F salloc_race >/dev/null || salloc_race >/dev/null; rm -rf "$work"' EXIT

if ! release=$(srun --version 2>&1) || [ -z "$release" ]; then
  echo "not ok - srun --version answers (SLURM_CONF=$SLURM_CONF)"
  sed 's/^/#   /' <<<"$release"
  exit 0
fi
release=$(awk '{print $2; exit}' <<<"$release")
release=${release%%-*}
reads=$(scontrol show config 2>/dev/null | sed -nE 's/^PlugStackConfig +=  *//p')
if [ "$(realpath -m "$reads")" != "$(realpath -m "$plugstack")" ]; then
  echo "not ok - Slurm reads its SPANK plugins from ${reads:-a file scontrol does not name}, not from $plugstack, which this run would write"
  exit 0
fi
# The daemons' log files (a name pattern such as slurmd-%n.log as a glob): what they and the
# kernel said during a failed run goes with its evidence (a daemon's error, a command's crash).
daemon_logs=$(scontrol show config 2>/dev/null | sed -nE 's/^Slurm(ctld|d)LogFile += *//p' | sed -E 's/%[a-zA-Z]/*/g')
if [ -d "$suite" ] && [ ! -d "$suite/testsuite" ]; then
  for t in $(ls "$suite"/slurm-*-testsuite.tar.* 2>/dev/null | sort -V); do
    v=$(sed -E 's/.*slurm-([0-9.]+)-testsuite.*/\1/' <<<"$t")
    [ "$(printf '%s\n%s\n' "$v" "$release" | sort -V | head -n 1)" != "$v" ] || chosen=$t
  done
  [ -n "${chosen:-}" ] || { echo "not ok - SchedMD's testsuite of Slurm $release or older in $suite"; exit 0; }
  suite=$chosen
fi

# The testsuite, unpacked where its tests may write (each makes testN.M.dir beside itself).
if [ -d "$suite" ]; then
  cp -r "$suite" "$work/slurm"
else
  mkdir "$work/slurm" && tar -xf "$suite" -C "$work/slurm" --strip-components=1 ||
    { echo "not ok - SchedMD's testsuite unpacks ($suite)"; exit 0; }
fi
expect_dir=$work/slurm/testsuite/expect
[ -f "$expect_dir/globals" ] || { echo "not ok - no expect/globals in $suite"; exit 0; }
suite_version=$(sed -nE 's/.*slurm-([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' <<<"$(basename "$suite")")
if [ $# -eq 1 ] && [ "$1" = --all ]; then
  mapfile -t tests < <(ls "$expect_dir" | grep -E '^test(1|7|15|17)\.[0-9]+$' | sort -V
    cd "$work/slurm/testsuite" && find python/tests -name 'test_*.py' | sort -V)
elif [ $# -eq 1 ] && [ -e "$1" ] && [ ! -d "$1" ]; then
  mapfile -t tests < <(sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$1")
else
  tests=("$@")
fi
[ ${#tests[@]} -gt 0 ] || { echo "not ok - no SchedMD test named"; exit 0; }
# Tests that must pass without lama here: those named with a trailing "!".
declare -A must=()
for i in "${!tests[@]}"; do
  [[ ${tests[$i]} == *! ]] || continue
  tests[$i]=${tests[$i]%!}
  must[${tests[$i]}]=1
done
"$top/contrib/deps.sh" --schedmd >/dev/null

# The installed Slurm, seen through a prefix of its own: Debian's commands answer --version with
# "slurm-wlm 22.05.8", which tests that compare versions (test1.3, test7.11, ...) cannot parse,
# so there the prefix's commands say "slurm 22.05.8" for --version and -V and are Slurm's
# own for everything else (exec, so signals and exit codes are untouched; bash, not dash, which
# would drop variables such as test1.28's TEST_ENV_1.28 whose names are not a shell's).
real=$(dirname "$(dirname "$(command -v srun)")")
prefix=$work/prefix
mkdir -p "$prefix/bin"
for d in sbin include lib lib64 share etc; do [ -e "$real/$d" ] && ln -s "$real/$d" "$prefix/$d"; done
debian=$(srun --version | grep -c '^slurm-wlm ')
for name in sacct sacctmgr salloc sattach sbatch sbcast scancel scontrol scrontab scrun sdiag \
  sinfo sprio squeue sreport srun sshare sstat strigger; do
  cmd=$real/bin/$name
  [ -x "$cmd" ] || continue
  if [ "$debian" -gt 0 ]; then
    printf '#!/bin/bash\ncase "$*" in -V|--version|-V\\ *|--version\\ *) "%s" "$@" | sed "s/^slurm-wlm /slurm /"; exit ;; esac\nexec "%s" "$@"\n' "$cmd" "$cmd" >"$prefix/bin/$name"
    chmod +x "$prefix/bin/$name"
  else
    ln -s "$cmd" "$prefix/bin/$name"
  fi
done
# Test programs that include the build tree's config.h (test1.89, test1.91) use nothing from
# it: an empty one stands in for a build tree an installed Slurm does not have.
mkdir -p "$work/build" && echo '/* no build tree: nothing of it is used */' >"$work/build/config.h"
printf 'SlurmInstallDir=%s\nSlurmBuildDir=%s\nSlurmConfigDir=%s\n' "$prefix" "$work/build" "$(dirname "$SLURM_CONF")" >"$work/testsuite.conf"
export SLURM_TESTSUITE_CONF=$work/testsuite.conf
# No colours in the logs, and Slurm's cleanup even after a failure; the MPI tests (test1.88,
# test1.116, ...) use this machine's mpicc, not /usr/local/bin's.
# expect's own wait for a line is 10 s unless a test sets another (SchedMD's globals leave it
# commented out, "cset timeout $max_job_delay"), while their helpers (run_command, wait_for) give
# a command 60 s. The older tests' bare expect blocks then fail a command that is merely slow:
# test7.11's `salloc --help` ("salloc not responding") and sbatch's job id ("Batch submit
# failure") in the Debian 13 guest's one TCG thread beside the sandbox suites, where `scontrol
# reconfigure` alone took 16 s. The helpers' 60 s, for all three runs alike: a test that hangs
# still fails, a minute later.
printf 'set testsuite_colorize false\nset testsuite_cleanup_on_failure true\nset timeout 60\n' >"$expect_dir/globals.local"
! command -v mpicc >/dev/null || echo "set mpicc $(command -v mpicc)" >>"$expect_dir/globals.local"
label="Slurm $release, SchedMD's $suite_version tests${LAMA_SCHEDMD_WHERE:+, $LAMA_SCHEDMD_WHERE}"

modes=(none default auto)
line_of() {
  case $1 in
    none) : ;;
    default) echo "required $plugin $args" ;;
    auto) echo "required $plugin policy=auto $args" ;;
  esac
  [ -z "$included" ] || echo "include $included"
}
# Whether SchedMD's test writes plugstack.conf anew with its own plugin alone (`echo ... >
# $new_spank_conf`, then cp over it: test7.21 and test7.24 of both testsuites), where the others
# append theirs (`>>`: test7.11, test38.6). Read from the test itself.
replaces_plugstack() {
  grep -qE '[^>]>[[:space:]]*\$(new_spank_conf|spank_conf_file)\b' "$expect_dir/$1" 2>/dev/null
}
# A log line as its message alone: no time stamp, level or call stack.
clean='s/^\[[^]]*\] +[A-Za-z]+ +//; s/ \([a-z_]+@[^)]*\)$//; s/^Command "([^ "]*\/)?([^ "]+)[^"]*" failed/\2 failed/'
# A log's line that says the test failed: a (sub)test's failure, or the testsuite's own error.
failure='\((fail|subfail)@|^\[[^]]*\] (Fatal|Error) '
# Every test starts on a cluster at rest: every node idle, no job. SchedMD's tests skip
# themselves without an idle node, and the last test's cancelled jobs may still be completing,
# or a node not yet answering, on a loaded machine (a fresh run here skipped test1.49 and
# test1.54 in all nine runs so). Waits up to 60 s, 300 s in all; a longer wait is said on
# stderr (the harness's log), with the nodes' states.
# (Kept in a file: each run is in a subshell of its own.)
echo 0 >"$work/settled"
settle() {
  local t0=$SECONDS busy settle_spent
  settle_spent=$(cat "$work/settled")
  while :; do
    busy=$(sinfo -h -N -o '%N %T' 2>&1 | awk '$2 != "idle"' | sort -u | paste -sd' ' -)
    [ -z "$busy" ] && [ -z "$(squeue -h 2>/dev/null)" ] && break
    [ $((SECONDS - t0)) -lt 60 ] && [ $((settle_spent + SECONDS - t0)) -lt 300 ] || break
    sleep 0.5
  done
  echo $((settle_spent + SECONDS - t0)) >"$work/settled"
  [ $((SECONDS - t0)) -lt 5 ] || echo "# waited $((SECONDS - t0)) s for the nodes to be idle before $1 ($2): ${busy:-jobs left}" >&2
}
# Slurm's salloc forks its command, then makes it the terminal's foreground process group
# (salloc.c: _fork_command, then tcsetpgrp). An interactive bash that looks at the terminal
# before that stops itself with SIGTTIN, as bash does when it is not in the foreground, and
# salloc, which waits with WUNTRACED and takes a stopped command for a running one, waits for
# ever: the test times out ("salloc not responding"). A loaded machine widens the window; it
# was seen here without lama as with it. Kills what a run left of salloc (every salloc started
# under this testsuite's configuration: its job is cancelled by then) and prints how many of
# them were waiting on a stopped command.
salloc_race() {
  local p n=0
  for p in $(pgrep -x salloc); do
    grep -qzxF "SLURM_TESTSUITE_CONF=$SLURM_TESTSUITE_CONF" "/proc/$p/environ" 2>/dev/null || continue
    ! ps -o stat= --ppid "$p" | grep -q '^T' || n=$((n + 1))
    pkill -KILL -P "$p"
    kill -KILL "$p" 2>/dev/null
  done
  echo "$n"
}
races=$work/races
: >"$races"
# test7.24's own SPANK plugin prints its lines from slurmstepd and from the task, and srun can
# write one of them into the middle of another (`Fou[Job: 493] Looking for ...nd`): subtest 90
# then misses the line it looks for. Slurm's race, seen without lama as with it; a loaded
# machine widens it. Told by what the log shows, not by the subtest alone: a line of the
# plugin's glued to the end of another's beginning.
spank_output_race() {
  [ "$1" = test7.24 ] && grep -q 'verify SPANK plugin printed debug logs' <<<"$2" &&
    grep -qE '[^ ]\[Job: [0-9]+\] (Found|Looking for) \(' "$(log_of "$1" "$3")" 2>/dev/null
}
# The reason a run gives when that race spoiled every try: Slurm's, whatever lama does.
race_reason="Slurm's SPANK output race (test7.24's plugin lines interleaved by srun) in every try"
# A subtest whose command SchedMD's test gives a few seconds timed out (test7.11 runs salloc,
# sbatch and srun with a bad option of its own SPANK plugin under `-timeout 2`): on a loaded
# machine, or in the Debian 13 guest's one TCG thread beside the sandbox suites, start-up alone
# can take that long. Seen there once in six runs under policy=auto (salloc, which lama's
# plugin leaves at its option callbacks), never twice in a row. Not the whole test's timeout:
# a test that hangs is not run again.
# (The reason is cut to 200 characters: the log says which command timed out.)
short_timeout() {
  [[ $2 != python/* ]] && grep -q '^Subtest .*Command "' <<<"$(sed -n 2p <<<"$1")" &&
    grep -qE 'Command "[^"]*" timed out after [0-9]+ seconds' "$(log_of "$2" "$3")" 2>/dev/null
}
# SchedMD's test7.11 waits for sbatch's "Submitted batch job" with expect's default (10 s before
# globals.local above made it 60 s): its `-re timeout` branch matches the word, not expect's
# timeout, so running out of time is silent and the test fails with "Batch submit failure"
# although the job was submitted and ran. Seen in
# the Debian 13 guest's one TCG thread beside the sandbox suites (in 2 of 7 runs of the test
# command, both times its third run of test7.11, under policy=auto), where slurmctld alone took
# 5.2 s over the submission. Told by the daemons' log: slurmctld accepted a batch job during the
# run whose id the test's log never shows.
# (LOG is the run's log; the daemons' lines are beside it.)
late_submit() {
  local id
  grep -q 'Batch submit failure' "$1" 2>/dev/null || return 1
  for id in $(grep -oE '_slurm_rpc_submit_batch_job: JobId=[0-9]+' "${1%.log}.daemons" 2>/dev/null | sed 's/.*=//'); do
    grep -qE "Submitted batch job $id\b" "$1" || return 0
  done
  return 1
}
# The log of TEST's run in MODE (a Python test's path made one file name).
log_of() {
  echo "$out/$(tr / _ <<<"${1#python/tests/}").$2.log"
}
# One run of TEST in MODE: prints "pass", "fail" or "skip", then Slurm's reason. A run that
# failed on salloc's race, a subtest's short timeout or test7.11's wait for its job id above is
# run again, at most twice, one that failed on test7.24's output race at most four times (it
# came three times in a row in a loaded run); each is counted in $races, and each failed try's
# log kept beside the last.
run_one() {
  local try r stopped race log keep tries=3
  log=$(log_of "$1" "$2")
  for try in 1 2 3 4 5; do
    r=$(run_once "$1" "$2")
    # Every run's leftover salloc is killed, whatever its outcome.
    stopped=$(salloc_race)
    race=""
    if [ "$(head -n 1 <<<"$r")" = fail ]; then
      if [ "$stopped" -gt 0 ]; then
        race=salloc
      elif spank_output_race "$1" "$r" "$2"; then
        race=spank-output tries=5
      elif short_timeout "$r" "$1" "$2"; then
        race=short-timeout
      elif late_submit "$log"; then
        race=late-submit
      fi
    fi
    [ -n "$race" ] && [ "$try" -lt "$tries" ] || break
    echo "$1 $2 $race" >>"$races"
    # (run_one runs in a subshell of its own: the name is made unique here, not counted.)
    mv "$log" "$(mktemp --suffix=.log "${log%.log}.failed.XXXX")"
  done
  if [ "$race" = spank-output ]; then
    r=$(printf 'fail\n%s' "$race_reason")
  fi
  echo "$r"
  # A failed run's log, kept for its evidence (the next run of the mode writes over the log).
  if [ "$(head -n 1 <<<"$r")" = fail ] && [ -f "$log" ]; then
    keep=$(mktemp --suffix=.log "${log%.log}.fail.XXXX") && cp "$log" "$keep" && echo "$keep"
    [ ! -s "${log%.log}.daemons" ] || cp "${log%.log}.daemons" "${keep%.log}.daemons"
  fi
}
# What a failed run's log shows up to its first failure: the lines before it (an expect test's
# command and output), or a pytest run's last lines; as comments.
evidence() {
  local n
  [ -n "$1" ] && [ -f "$1" ] || return 0
  n=$(grep -m 1 -nE "$failure" "$1" | cut -d: -f1)
  if [ -n "$n" ]; then sed -n "$((n > 15 ? n - 15 : 1)),${n}p" "$1"; else tail -n 15 "$1"; fi |
    sed -E "$clean" | cut -c1-300 | sed 's/^/#     /'
  [ ! -s "${1%.log}.daemons" ] || { echo "#     -- the daemons' and the kernel's logs during that run:"; cut -c1-300 "${1%.log}.daemons" | sed 's/^/#     /'; }
}
# Adds run_one's answer R for MODE to the test's history: its outcome, and for a failure its
# reason and (the first failure's) log.
tally() {
  local mode=$1 outcome
  outcome=$(head -n 1 <<<"$2")
  hist[$mode]+="${hist[$mode]:+ }$outcome"
  [ "$outcome" = pass ] || seen[$mode]+="$(sed -n 2p <<<"$2")"$'\n' evid[$mode]=${evid[$mode]:-$(sed -n 3p <<<"$2")}
}
# Where each daemon's log and the kernel's log stand now: "FILE SIZE" lines ("dmesg LINES").
log_marks() {
  local g f
  for g in $daemon_logs; do
    for f in $g; do [ ! -f "$f" ] || echo "$f $(stat -c %s "$f")"; done
  done
  echo "dmesg $(dmesg 2>/dev/null | wc -l)"
}
# What they said since MARKS that reads as trouble, the last few lines of each; and the batch
# jobs slurmctld accepted meanwhile, which tell a command that ended before its job was
# submitted from one whose job was submitted but whose last lines the test never read.
log_news() {
  local f n news
  while read -r f n; do
    if [ "$f" = dmesg ]; then news=$(dmesg 2>/dev/null | tail -n +$((n + 1)) | sed 's/^/kernel: /')
    else news=$(tail -c +$((n + 1)) "$f" 2>/dev/null | sed "s|^|${f##*/}: |"); fi
    grep -iE 'error|fatal|segfault|signal|killed|oom|core dump' <<<"$news" | tail -n 6
    grep -E '_slurm_rpc_submit_batch_job: JobId=' <<<"$news" | tail -n 3
  done <<<"$1"
}
run_once() {
  local test=$1 mode=$2 log rc reason marks
  log=$(log_of "$1" "$2")
  settle "$test" "$mode"
  line_of "$mode" >"$plugstack"
  marks=$(log_marks)
  # (Beside the log, not in it: the retry rules read the test's own lines.)
  rm -f "${log%.log}.daemons"
  if [[ $test == python/* ]]; then
    # ATF runs Slurm's commands from PATH; COLUMNS keeps pytest's summary lines whole.
    (cd "$work/slurm/testsuite/python" && PATH=$prefix/bin:$PATH COLUMNS=400 timeout -k 10 "$limit" \
      pytest-3 -q -rsfE -p no:cacheprovider "${test#python/}") >"$log" 2>&1 </dev/null
    rc=$?
    scancel -u "$(id -un)" >/dev/null 2>&1
    [ "$rc" = 0 ] || log_news "$marks" >"${log%.log}.daemons"
    python_outcome "$log" "$rc"
    return
  fi
  (cd "$expect_dir" && timeout -k 10 "$limit" expect "$test") >"$log" 2>&1 </dev/null
  rc=$?
  scancel -u "$(id -un)" >/dev/null 2>&1
  [ "$rc" = 0 ] || [ "$rc" = 255 ] || log_news "$marks" >"${log%.log}.daemons"
  case $rc in
    0) echo pass; return ;;
    255)
      reason=$(grep -E '\((skip|subskip)@' "$log" | sed -E "$clean; s/^Subtest +[0-9]+ skipped +: +//; s/^Skipping testproc [0-9]+: +//" |
        sort -u | head -n 2 | paste -sd';' -)
      echo skip ;;
    124 | 137) echo fail; echo "timed out after $limit s"; return ;;
    *) reason=$(grep -m 1 -E "$failure" "$log"); echo fail ;;
  esac
  [ -n "$reason" ] || reason=$(grep -m 1 -E 'INCOMPLETE: |exception|error' "$log")
  sed -E "$clean" <<<"${reason:-exit status $rc}" | cut -c1-200
}

# A pytest run's outcome from its summary line ("1 failed, 3 passed, 2 skipped in 9.1s"): fail
# when anything failed or erred, pass when something passed, else skip; then the reason.
python_outcome() {
  local log=$1 rc=$2 summary
  summary=$(tail -n 1 "$log")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo fail; echo "timed out after $limit s"
  elif [[ $summary =~ [0-9]+\ (failed|error) ]] || ! [[ $summary =~ [0-9]+\ (passed|skipped) ]]; then
    echo fail
    grep -m 1 -E '^(FAILED|ERROR) ' "$log" | sed -E 's/^(FAILED|ERROR) [^ ]+ - //' | cut -c1-200 | grep . || tail -n 1 "$log" | cut -c1-200
  elif [[ $summary =~ [0-9]+\ passed ]]; then
    echo pass
  else
    echo skip
    grep -E '^SKIPPED ' "$log" | sed -E 's/^SKIPPED \[[0-9]+\] [^ ]+: //' | sort -u | head -n 2 | paste -sd';' - | cut -c1-200
  fi
}

table=$out/table.tsv
: >"$table"
# The tests the admin guide explains under policy=auto.
explained=$(awk '/^## Slurm.s own tests with lama loaded/ { on = 1; next } /^## / { on = 0 }
  on && /^\| `test[0-9]/ { gsub(/[`| ]/, "", $2); print $2 }' FS='|' "$guide" | sort -u)

# Tests of the list this testsuite does not have (a list may name both releases' Python tests).
absent=()
started=$(date +%s)
for t in "${tests[@]}"; do
  [ -f "$expect_dir/$t" ] || [ -f "$work/slurm/testsuite/$t" ] || { absent+=("$t"); continue; }
  if [ -z "$included" ] && replaces_plugstack "$t"; then
    w="$t writes plugstack.conf anew with its own plugin alone, so lama would not be loaded in it: it runs only where PlugStackConfig is another file (tests/schedmd/sandbox.sh)"
    printf '%s\tskip\tskip\tskip\t0\t%s|%s|%s|\t none default auto\tyes\t|skip|\n' "$t" "$w" "$w" "$w" >>"$table"
    # This script's own choice, not the test's: a line of its own, counted as a skip.
    echo "skip - [$label] $w"
    continue
  fi
  t0=$(date +%s)
  declare -A got=() why=() hist=() seen=() evid=()
  # Up to three rounds of the three runs, while they differ: a difference counts only when it
  # is steady (below).
  for round in 1 2 3; do
    # Earlier rounds' logs stay beside the last one's.
    [ "$round" = 1 ] || for m in "${modes[@]}"; do l=$(log_of "$t" "$m"); mv "$l" "${l%.log}.round$((round - 1)).log"; done
    for m in "${modes[@]}"; do
      r=$(run_one "$t" "$m")
      got[$m]=$(head -n 1 <<<"$r") why[$m]=$(sed -n 2p <<<"$r")
      tally "$m" "$r"
    done
    # Another round only for a difference that would count: one the admin guide explains
    # under policy=auto counts as agreement.
    [ "${got[none]}" != "${got[default]}" ] ||
      { [ "${got[none]}" != "${got[auto]}" ] && ! grep -qxF "$t" <<<"$explained"; } ||
      { [ -n "${must[$t]:-}" ] && [ "${got[none]}" != pass ]; } || break
  done
  # Passed in every round without lama, failed in some but not all with lama (its defaults, or
  # policy=auto where the admin guide does not explain a difference): a lama defect that fails
  # now and then, or a test unsteady either way. Four more rounds of both decide: it is lama's
  # unless a run without lama fails too, for a reason also seen with lama.
  flaky=""
  for m in default auto; do
    [ "$m" = default ] || ! grep -qxF "$t" <<<"$explained" || continue
    [ "$(tr ' ' '\n' <<<"${hist[none]}" | sort -u)" = pass ] || continue
    [[ " ${hist[$m]} " == *" fail "* && " ${hist[$m]} " == *" pass "* ]] || continue
    for _ in 1 2 3 4; do
      for mm in none "$m"; do
        tally "$mm" "$(run_one "$t" "$mm")"
      done
    done
    same=""
    while IFS= read -r w; do
      [ -z "$w" ] || { [ "$w" != "$race_reason" ] && ! grep -qxF -- "$w" <<<"${seen[none]:-}"; } || same=1
    done <<<"${seen[$m]:-}"
    [ -n "$same" ] || flaky+=" $m"
  done
  # A run's outcome is steady when every round gave it; an outcome under lama that failed for a
  # reason also seen without lama is not lama's.
  steady=""
  for m in "${modes[@]}"; do
    [ "$(tr ' ' '\n' <<<"${hist[$m]}" | sort -u | wc -l)" = 1 ] || continue
    [ "$m" = none ] || [ "${got[$m]}" = pass ] || { [ "${why[$m]}" != "$race_reason" ] && ! grep -qxF -- "${why[$m]}" <<<"${seen[none]:-}"; } || continue
    steady+=" $m"
  done
  note=""
  said=""
  for m in $steady; do
    case $m in none) m="without lama" ;; default) m=defaults ;; auto) m=policy=auto ;; esac
    said+="${said:+, }$m"
  done
  [ "$round" = 1 ] || note="rounds (without lama / defaults / policy=auto): ${hist[none]} / ${hist[default]} / ${hist[auto]}; steady: ${said:-nothing}"
  # A test that must run and never passed without lama: its reason, for the summary below.
  ran=yes
  [ -z "${must[$t]:-}" ] || [[ " ${hist[none]} " == *" pass "* ]] || ran=no
  printf '%s\t%s\t%s\t%s\t%s\t%s|%s|%s|%s\t%s\t%s\t%s|%s|%s|%s|%s\n' "$t" "${got[none]}" "${got[default]}" "${got[auto]}" \
    $(($(date +%s) - t0)) "${why[none]}" "${why[default]}" "${why[auto]}" "$note" "$steady" "$ran" \
    "$flaky" "${hist[none]}" "$(sed -n 1p <<<"${seen[default]:-}${seen[auto]:-}")" "${evid[default]:-}" "${evid[auto]:-}" >>"$table"
done
took=$(($(date +%s) - started))

count() { awk -F'\t' -v c="$1" -v o="$2" '$c == o' "$table" | wc -l; }
[ ${#absent[@]} -eq 0 ] || echo "# not in SchedMD's $suite_version tests: ${absent[*]}"
echo "# $label: $(wc -l <"$table") tests, each run without lama / with lama's defaults / under policy=auto, in $took s"
for o in pass fail skip; do
  printf '#   %s: %d / %d / %d\n' "$o" "$(count 2 $o)" "$(count 3 $o)" "$(count 4 $o)"
done
bad=0
if [ ! -s "$table" ]; then
  bad=1
  echo "not ok - [$label] none of the ${#tests[@]} tests named is in SchedMD's $suite_version tests"
fi
while IFS=$'\t' read -r t none def auto secs reasons steady ran unsteady; do
  IFS='|' read -r rn rd ra note <<<"$reasons"
  IFS='|' read -r flaky hn wl ed ea <<<"$unsteady"
  for m in $flaky; do
    bad=1
    case $m in default) m="lama's default arguments" ;; auto) m="policy=auto" ;; esac
    echo "not ok - [$label] $t passes in every run without lama ($(wc -w <<<"$hn")) and fails now and then with $m, never for a reason seen without it: $wl"
    if [ "$m" = policy=auto ]; then evidence "$ea"; else evidence "$ed"; fi
  done
  [ -z "$note" ] || echo "#   $t: $note"
  if [ "$ran" = no ]; then
    bad=1
    echo "not ok - [$label] $t must run here, and without lama it never passed: $rn"
  fi
  # Only steady runs count: without lama, and the run compared with it.
  [[ " $steady " == *" none "* ]] || continue
  if [ "$none" = pass ] && [ "$def" != pass ] && [[ " $steady " == *" default "* ]]; then
    bad=1
    echo "not ok - [$label] $t passes without lama and ${def}s with lama's default arguments: $rd"
    evidence "$ed"
  fi
  if [ "$none" != "$auto" ] && [[ " $steady " == *" auto "* ]]; then
    if grep -qxF "$t" <<<"$explained"; then
      echo "ok - [$label] $t: $none without lama, $auto under policy=auto, as the admin guide explains${ra:+ ($ra)}"
    else
      bad=1
      echo "not ok - [$label] $t: $none without lama, $auto under policy=auto, which the admin guide does not explain: ${ra:-$rn}"
      evidence "$ea"
    fi
  fi
done <"$table"
retried=""
[ ! -s "$races" ] || retried="; $(wc -l <"$races") run(s) retried for Slurm's races (salloc's job-control race, test7.24's SPANK output race), a subtest's short timeout or test7.11's wait for sbatch's job id (tests/schedmd/differential.sh): $(sort "$races" | uniq -c |
  awk '{ m = $3 == "none" ? "without lama" : $3 == "default" ? "defaults" : "policy=auto"; printf "%s%s %s %s %d", s, $2, m, $4, $1; s = ", " }')"
if [ $bad = 0 ] && [ "$(count 2 pass)" = 0 ] && [ "$(count 2 fail)" = 0 ]; then
  # Every test skipped: nothing was compared.
  echo "skip - [$label] no test ran here, so none was compared ($(count 2 skip) skipped without lama$retried)"
elif [ $bad = 0 ]; then
  echo "ok - [$label] no test that passes without lama fails with lama's default arguments or differs unexplained under policy=auto ($(count 2 pass) pass, $(count 2 fail) fail, $(count 2 skip) skip without lama$retried)"
else
  [ -z "$retried" ] || echo "# ${retried#; }"
fi
# What does not pass even without lama, with Slurm's reason.
awk -F'\t' '$2 != "pass" { split($6, r, "|"); printf "#   %s: %s without lama, %s with its defaults, %s under policy=auto: %s\n", $1, $2, $3, $4, r[1] }' "$table"
echo "# done: differential.sh"
