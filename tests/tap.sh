# The result lines every suite prints, and how a suite says it ran to its end. Sourced by the
# suites (through tests/slurm/lib.sh and tests/flux/lib.sh, or directly).
#   ok NAME, not_ok NAME [DETAIL...], skip NAME-AND-REASON: one check each. A skip is a check this
#   run cannot make, with why; the totals count it as skipped, never as passed.
#   done_testing: the suite's last act. The harness (tests/harness.sh) counts a suite that ends
#   without its `# done:` line, or with a non-zero status, as one more `not ok`, naming it.
#   skip_all REASON: a suite that cannot run here at all says why and ends, as ended.
# tap_prefix (optional) goes before every check's name; tap_name (default: the script's file
# name) names the suite in its `# done:` line.
ok() { echo "ok - ${tap_prefix:-}$1"; }
not_ok() { echo "not ok - ${tap_prefix:-}$1"; shift; printf '%s\n' "$@" | sed 's/^/#   /'; }
skip() { echo "skip - ${tap_prefix:-}$1"; }
done_testing() { echo "# done: ${tap_name:-${0##*/}}"; }
skip_all() { skip "$1"; done_testing; exit 0; }
