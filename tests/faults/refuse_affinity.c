/* Fault injection for the cluster tests: preloaded into slurmd (and so into every slurmstepd and
 * task it starts), sched_setaffinity fails with EPERM while the file named by
 * LAMA_FAULT_REFUSE_AFFINITY exists, as a kernel or security module refusing it would. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
	static int (*real)(pid_t, size_t, const cpu_set_t *);
	const char *flag = getenv("LAMA_FAULT_REFUSE_AFFINITY");

	if (flag && access(flag, F_OK) == 0) {
		errno = EPERM;
		return -1;
	}
	if (!real)
		real = (int (*)(pid_t, size_t, const cpu_set_t *))dlsym(RTLD_NEXT, "sched_setaffinity");
	return real ? real(pid, size, mask) : (errno = ENOSYS, -1);
}
