/* A SPANK plugin that does nothing: contrib/overhead.sh's floor for what any SPANK plugin costs
 * a step (Slurm loading it in srun and in every slurmstepd and calling its callbacks), against
 * which lama's own cost is read. */
#include <slurm/spank.h>

SPANK_PLUGIN(noop, 1);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    return 0;
}
