/*
 * Whether srun's controller may lay a block step out in the network topology's order
 * (Slurm 26.05 and later), read from the configuration srun has loaded: compiled by build.rs
 * against the release's own slurm.h, so the structure's layout is that release's. See
 * spank/src/step_order.rs.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <slurm/slurm.h>

/* 1: it may (a ranking topology plugin, or a topology.yaml beside slurm.conf); 0: it cannot
 * (topology/flat without topology.yaml, or CR_NO_DIST_TOPO_BLOCK); -1: srun has no
 * configuration to read. */
int lama_topology_may_order(void)
{
	const slurm_conf_t *conf = dlsym(RTLD_DEFAULT, "slurm_conf");
	const char *plugin, *path, *slash;
	char yaml[4096];

	if (!conf || !conf->slurm_conf)
		return -1;
	if (conf->select_type_param & SELECT_NO_DIST_TOPO_BLOCK)
		return 0;
	plugin = conf->topology_plugin;
	if (plugin && *plugin && strcmp(plugin, "topology/flat") &&
	    strcmp(plugin, "topology/default"))
		return 1;
	/* topology.yaml replaces TopologyPlugin when it exists beside slurm.conf. */
	path = conf->slurm_conf;
	slash = strrchr(path, '/');
	if (!slash)
		return access("topology.yaml", F_OK) == 0;
	if (snprintf(yaml, sizeof(yaml), "%.*s/topology.yaml", (int) (slash - path), path) >=
	    (int) sizeof(yaml))
		return 1;
	return access(yaml, F_OK) == 0;
}
