"""Where an mpi4py rank runs, as tests/mpi/probe.c reports it for C (the same "rank" and
"library" lines), for the MPI that mpi4py loads. Run by tests/slurm/mpi.sh with each MPI wheel's
Python: affinity is read before `from mpi4py import MPI` (which calls MPI_Init) and after it."""
import os
import socket


def cpulist(cpus):
    """A CPU set as a cpulist (0-3,8)."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


before = cpulist(os.sched_getaffinity(0))
from mpi4py import MPI  # noqa: E402  (initialises MPI)

world = MPI.COMM_WORLD
after = cpulist(os.sched_getaffinity(0))
shm = world.Split_type(MPI.COMM_TYPE_SHARED)
members = ",".join(str(r) for r in sorted(shm.allgather(world.rank)))
env = os.environ.get
lines = [
    f"rank {world.rank} procid {env('SLURM_PROCID', 'none')} nodeid {env('SLURM_NODEID', 'none')} "
    f"host {socket.gethostname()} size {world.size} before {before} after {after} "
    f"local {shm.rank}/{shm.size} members {members} map {env('TASK_MAP', 'none')}"
]
if world.rank == 0:
    lines.append("library " + MPI.Get_library_version().splitlines()[0].strip())
print("\n".join(lines), flush=True)
shm.Free()
