/* Keeps every OpenMP thread busy: for the seconds given (default 30), the load lama check samples
 * (tests/slurm/check.sh); or, with "work" after a number N, for N million iterations per thread,
 * printing the seconds that took (contrib/bench/check-beside.sh). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	double n = argc > 1 ? atof(argv[1]) : 30;
	int work = argc > 2 && strcmp(argv[2], "work") == 0;
	double start = omp_get_wtime(), end = start + n;
	volatile unsigned long sink = 0;
#pragma omp parallel
	{
		if (work) {
			for (long i = 0; i < (long)(n * 1e6); i++)
				sink += i;
		} else {
			while (omp_get_wtime() < end)
				for (int i = 0; i < 100000; i++)
					sink += i;
		}
	}
	if (work)
		printf("%.3f\n", omp_get_wtime() - start);
	return 0;
}
