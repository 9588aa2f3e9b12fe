/* Preloaded into srun by tests/slurm/faults.sh: when srun closes the file named by
 * LAMA_FAULT_SWAP_PATH (it has read the host file), the file LAMA_FAULT_SWAP_WITH takes its
 * place, once: a directory by exchanging the two paths (renameat2 RENAME_EXCHANGE), anything
 * else by rename. srun goes on to launch the step only after that, so every slurmstepd finds the
 * replacement. (A watcher reacting to srun's read raced the slurmstepds, and lost once they
 * started fast enough.) Only srun is armed (the preload also passes through `timeout`), and the
 * three variables are taken out of its environment at load, so the tasks do not inherit them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[PATH_MAX], with[PATH_MAX];
static int armed;

__attribute__((constructor)) static void arm(void)
{
	const char *p = getenv("LAMA_FAULT_SWAP_PATH"), *w = getenv("LAMA_FAULT_SWAP_WITH");

	if (strcmp(program_invocation_short_name, "srun"))
		return;
	if (p && w && strlen(p) < sizeof(path) && strlen(w) < sizeof(with)) {
		strcpy(path, p);
		strcpy(with, w);
		armed = 1;
	}
	unsetenv("LAMA_FAULT_SWAP_PATH");
	unsetenv("LAMA_FAULT_SWAP_WITH");
	unsetenv("LD_PRELOAD");
}

int fclose(FILE *fp)
{
	static int (*real)(FILE *);
	char link[64], target[PATH_MAX];
	ssize_t n = -1;
	struct stat st;
	int rc;

	if (!real)
		real = (int (*)(FILE *))dlsym(RTLD_NEXT, "fclose");
	if (armed && fp) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fileno(fp));
		n = readlink(link, target, sizeof(target) - 1);
	}
	rc = real(fp);
	if (n > 0) {
		target[n] = '\0';
		if (!strcmp(target, path)) {
			armed = 0;
			if (!stat(with, &st) && S_ISDIR(st.st_mode))
				renameat2(AT_FDCWD, with, AT_FDCWD, path, RENAME_EXCHANGE);
			else
				rename(with, path);
		}
	}
	return rc;
}
