/* A SPANK plugin that fails its slurm_spank_init in slurmstepd, for tests/slurm/failures.sh: the
 * case of another site plugin failing beside lama. Its plugstack.conf argument chooses the
 * failure: "node" (ESPANK_NODE_FAILURE: drain the node, requeue the job) or "job"
 * (ESPANK_JOB_FAILURE: fail the job, keep the node), from Slurm 25.05; before, both are
 * ESPANK_ERROR, Slurm's one failure. */
#include <string.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>
#include <slurm/spank.h>

SPANK_PLUGIN(lama_test_fail, 1);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (!spank_remote(sp))
		return ESPANK_SUCCESS;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
	if (ac > 0 && strcmp(av[0], "node") == 0)
		return ESPANK_NODE_FAILURE;
	return ESPANK_JOB_FAILURE;
#else
	(void)ac;
	(void)av;
	return ESPANK_ERROR;
#endif
}
