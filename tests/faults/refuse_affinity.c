/* Fault injection for the cluster tests: preloaded into slurmd (and so into every slurmstepd and
 * task it starts), sched_setaffinity fails with EPERM while the file named by
 * LAMA_FAULT_REFUSE_AFFINITY exists, as a kernel or security module refusing it would; while
 * the file named by LAMA_FAULT_SHOW_CPUS exists, sched_getaffinity reports only the CPU number
 * written in it, or no CPU at all when it is empty (an affinity inherited from a slurmd pinned to
 * its specialized cores); and while the file named by LAMA_FAULT_ONLINE exists, opening
 * /sys/devices/system/cpu/online opens it instead (CPUs taken offline). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *mask)
{
	static int (*real)(pid_t, size_t, cpu_set_t *);
	const char *file = getenv("LAMA_FAULT_SHOW_CPUS");
	FILE *f;

	if (file && (f = fopen(file, "r"))) {
		int cpu = -1;
		if (fscanf(f, "%d", &cpu) != 1)
			cpu = -1;
		fclose(f);
		memset(mask, 0, size);
		if (cpu >= 0 && (size_t)cpu < 8 * size)
			((unsigned char *)mask)[cpu / 8] |= 1 << (cpu % 8);
		return 0;
	}
	if (!real)
		real = (int (*)(pid_t, size_t, cpu_set_t *))dlsym(RTLD_NEXT, "sched_getaffinity");
	return real ? real(pid, size, mask) : (errno = ENOSYS, -1);
}

/* The file to open in place of `path`: LAMA_FAULT_ONLINE's for the kernel's online CPU list. */
static const char *redirected(const char *path)
{
	const char *file = getenv("LAMA_FAULT_ONLINE");

	if (path && file && strcmp(path, "/sys/devices/system/cpu/online") == 0 &&
	    access(file, F_OK) == 0)
		return file;
	return path;
}

/* open64 and open (Rust's std calls the first, C code either): both redirected alike. */
#define OPEN_SHIM(name)                                                          \
	int name(const char *path, int flags, ...)                               \
	{                                                                        \
		static int (*real)(const char *, int, ...);                     \
		mode_t mode = 0;                                                 \
		va_list ap;                                                      \
		va_start(ap, flags);                                             \
		if (flags & (O_CREAT | O_TMPFILE))                               \
			mode = va_arg(ap, mode_t);                               \
		va_end(ap);                                                      \
		if (!real)                                                       \
			real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
		return real ? real(redirected(path), flags, mode) : (errno = ENOSYS, -1); \
	}

OPEN_SHIM(open64)
OPEN_SHIM(open)
