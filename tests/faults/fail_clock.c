/* Fault injection for the cluster tests: preloaded into slurmd (and so into every slurmstepd),
 * clock_gettime fails with EINVAL for calls made from the lama plugin while the file named by
 * LAMA_FAULT_FAIL_CLOCK exists. Rust's standard library panics when the monotonic clock fails
 * (Instant::now), so this makes the plugin panic inside a Slurm callback, built as it ships:
 * the panic must be caught there (no unwinding into slurmstepd) and fail the step cleanly.
 * Calls from anywhere else go to the C library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_f)(clockid_t, struct timespec *);

int clock_gettime(clockid_t clock, struct timespec *ts)
{
	static clock_gettime_f real;
	const char *file = getenv("LAMA_FAULT_FAIL_CLOCK");
	Dl_info info;

	if (file && access(file, F_OK) == 0 &&
	    dladdr(__builtin_return_address(0), &info) && info.dli_fname &&
	    strstr(info.dli_fname, "liblama_spank")) {
		errno = EINVAL;
		return -1;
	}
	if (!real)
		real = (clock_gettime_f)dlsym(RTLD_NEXT, "clock_gettime");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(clock, ts);
}
