/* For the cluster tests: swaps two paths in one step (renameat2 with RENAME_EXCHANGE), so that
 * the faults test can turn a host file into a directory with no moment where neither exists
 * (rename(2) cannot put a directory where a file is).
 * Usage: exchange PATH1 PATH2 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: exchange PATH1 PATH2\n");
		return 2;
	}
	if (renameat2(AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE)) {
		perror("exchange: renameat2");
		return 1;
	}
	return 0;
}
