/* Fault injection for the cluster tests: preloaded into slurmd (and so into every slurmstepd),
 * spank_get_item fails with ESPANK_ERROR for the item number written in the file named by
 * LAMA_FAULT_FAIL_ITEM while that file exists, as a Slurm that cannot answer would; when a
 * string follows the number ("27 x-"), the item succeeds with that string instead (a malformed
 * answer; for string items only). Other items go to Slurm's own spank_get_item, with up to three
 * arguments passed on: enough for every item, and harmless on x86-64 where the unused ones are
 * registers nobody reads. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

typedef spank_err_t (*get_item_f)(spank_t, spank_item_t, ...);

spank_err_t spank_get_item(spank_t spank, spank_item_t item, ...)
{
	static get_item_f real;
	static char text[64];
	const char *file = getenv("LAMA_FAULT_FAIL_ITEM");
	void *a, *b, *c;
	va_list ap;
	FILE *f;

	va_start(ap, item);
	a = va_arg(ap, void *);
	b = va_arg(ap, void *);
	c = va_arg(ap, void *);
	va_end(ap);
	if (file && (f = fopen(file, "r"))) {
		int which = -1, n = fscanf(f, "%d %63s", &which, text);
		fclose(f);
		if (n >= 1 && (int)item == which) {
			if (n == 2) {
				*(const char **)a = text;
				return ESPANK_SUCCESS;
			}
			return ESPANK_ERROR;
		}
	}
	if (!real)
		real = (get_item_f)dlsym(RTLD_NEXT, "spank_get_item");
	return real ? real(spank, item, a, b, c) : ESPANK_ERROR;
}
