/*
 * Where an MPI rank and its OpenMP threads run, as the MPI library and the OpenMP runtime see it.
 * Built by tests/slurm/mpi.sh with Debian's mpicc for Open MPI and for MPICH (-fopenmp).
 *
 * Prints one "rank" line per rank, then with argument "omp" one "thread" line per OpenMP thread:
 *   rank R procid P nodeid N host H size S before CPUS after CPUS local L/LS members LIST map M
 *   places R N {CPUS},{CPUS},...      (every place of the runtime's list, as OMP_PLACES writes it)
 *   thread R T of NT place PL placecpus CPUS cpu C
 * and rank 0 one "library" line: the first line of MPI_Get_library_version.
 * "before" is the rank's CPU affinity before MPI_Init, "after" after it; "local" and "members"
 * come from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). Each rank writes its lines at once.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OUT 65536

/* A CPU set as a cpulist (0-3,8). */
static void cpulist(const cpu_set_t *s, char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, s))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, s))
			e++;
		len += snprintf(buf + len, n - len, "%s%d", len ? "," : "", c);
		if (e > c)
			len += snprintf(buf + len, n - len, "-%d", e);
		c = e;
		if (len >= n)
			break;
	}
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int main(int argc, char **argv)
{
	static char out[OUT];
	char before[1024], after[1024], host[256], members[4096];
	cpu_set_t set;
	size_t len = 0;

	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	cpulist(&set, before, sizeof(before));

	MPI_Init(&argc, &argv);
	int rank, size, lrank, lsize;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	cpulist(&set, after, sizeof(after));

	MPI_Comm shm;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm);
	MPI_Comm_rank(shm, &lrank);
	MPI_Comm_size(shm, &lsize);
	int *ranks = calloc((size_t)lsize, sizeof(int));
	MPI_Allgather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, shm);
	qsort(ranks, (size_t)lsize, sizeof(int), cmp_int);
	size_t m = 0;
	members[0] = '\0';
	for (int i = 0; i < lsize && m < sizeof(members); i++)
		m += snprintf(members + m, sizeof(members) - m, "%s%d", i ? "," : "", ranks[i]);
	free(ranks);
	gethostname(host, sizeof(host));

	const char *procid = getenv("SLURM_PROCID"), *nodeid = getenv("SLURM_NODEID");
	const char *map = getenv("TASK_MAP");
	len += snprintf(out + len, OUT - len,
			"rank %d procid %s nodeid %s host %s size %d before %s after %s local %d/%d members %s map %s\n",
			rank, procid ? procid : "none", nodeid ? nodeid : "none", host, size, before,
			after, lrank, lsize, members, map ? map : "none");

	if (rank == 0) {
		char lib[MPI_MAX_LIBRARY_VERSION_STRING];
		int n;
		MPI_Get_library_version(lib, &n);
		lib[strcspn(lib, "\n")] = '\0';
		len += snprintf(out + len, OUT - len, "library %s\n", lib);
	}
	if (argc > 1 && strcmp(argv[1], "omp") == 0) {
		int np = omp_get_num_places();
		len += snprintf(out + len, OUT - len, "places %d %d ", rank, np);
		for (int p = 0; p < np; p++) {
			int ids[1024], n = omp_get_place_num_procs(p);
			if (n > 1024)
				n = 0;
			omp_get_place_proc_ids(p, ids);
			qsort(ids, (size_t)n, sizeof(int), cmp_int);
			len += snprintf(out + len, OUT - len, "%s{", p ? "," : "");
			for (int i = 0; i < n; i++)
				len += snprintf(out + len, OUT - len, "%s%d", i ? "," : "", ids[i]);
			len += snprintf(out + len, OUT - len, "}");
		}
		len += snprintf(out + len, OUT - len, "\n");
#pragma omp parallel
		{
			int t = omp_get_thread_num(), nt = omp_get_num_threads();
			int place = omp_get_place_num();
			int ids[1024], n = place >= 0 ? omp_get_place_num_procs(place) : 0;
			char pcpus[1024];
			cpu_set_t ps;
			CPU_ZERO(&ps);
			if (n > 0 && n <= 1024) {
				omp_get_place_proc_ids(place, ids);
				for (int i = 0; i < n; i++)
					CPU_SET(ids[i], &ps);
			}
			cpulist(&ps, pcpus, sizeof(pcpus));
			/* Work a little so that the thread has run on its CPU. */
			volatile double x = 0;
			for (int i = 0; i < 2000000; i++)
				x += i * 0.5;
			int cpu = sched_getcpu();
#pragma omp critical
			len += snprintf(out + len, OUT - len,
					"thread %d %d of %d place %d placecpus %s cpu %d\n", rank, t,
					nt, place, pcpus[0] ? pcpus : "none", cpu);
		}
	}
	fputs(out, stdout);
	fflush(stdout);
	MPI_Comm_free(&shm);
	MPI_Finalize();
	return 0;
}
