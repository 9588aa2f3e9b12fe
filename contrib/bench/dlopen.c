/* What loading a SPANK plugin costs before any of its code runs: dlopen() as Slurm calls it
 * (RTLD_LAZY), timed in a new process each run, and what one cpuid instruction costs here (the
 * C runtime's CPU-model constructors run a few each; in a virtual machine each one traps to the
 * hypervisor). Linked with libslurmfull, which defines the spank_* symbols a plugin imports.
 * Usage: dlopen PLUGIN.so   prints the nanoseconds dlopen took
 *        dlopen --cpuid     prints the nanoseconds one cpuid took (mean of 1000) */
#include <cpuid.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static long long now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long long start;

	if (argc != 2) {
		fprintf(stderr, "usage: dlopen PLUGIN.so | --cpuid\n");
		return 2;
	}
	if (!strcmp(argv[1], "--cpuid")) {
		unsigned a, b, c, d, sum = 0;

		start = now();
		for (int i = 0; i < 1000; i++) {
			__cpuid_count(0, 0, a, b, c, d);
			sum += a ^ b ^ c ^ d;
		}
		printf("%lld\n", (now() - start) / 1000 + (sum & 0));
		return 0;
	}
	start = now();
	if (!dlopen(argv[1], RTLD_LAZY)) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	printf("%lld\n", now() - start);
	return 0;
}
