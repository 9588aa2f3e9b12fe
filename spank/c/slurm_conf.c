/*
 * What the plugin reads of the configuration Slurm has loaded (srun's, slurmd's, slurmstepd's),
 * compiled by build.rs against the release's own slurm.h so that slurm_conf_t's layout is that
 * release's.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <slurm/slurm.h>

#ifndef CONF_FLAG_OR
#define CONF_FLAG_OR CTL_CONF_OR /* 22.05 to 23.11's name */
#endif

static const slurm_conf_t *loaded(void)
{
	const slurm_conf_t *conf = dlsym(RTLD_DEFAULT, "slurm_conf");

	return (conf && conf->slurm_conf) ? conf : NULL;
}

/*
 * The path of the slurm.conf the process loaded, or NULL. slurmstepd gets its configuration from
 * slurmd without the path on 23.11 and later, and inherits slurmd's SLURM_CONF (which slurmd
 * sets to the file it read, its configless cache too); Slurm's built-in default comes last.
 */
const char *lama_slurm_conf_path(void)
{
	const slurm_conf_t *conf = loaded();
	char **builtin;
	const char *env;

	if (conf)
		return conf->slurm_conf;
	env = getenv("SLURM_CONF");
	if (env && *env)
		return env;
	builtin = dlsym(RTLD_DEFAULT, "default_slurm_config_file");
	return (builtin && *builtin) ? *builtin : NULL;
}

/* 1 with SlurmdParameters=config_overrides, 0 without or with no configuration loaded. */
int lama_config_overrides(void)
{
	const slurm_conf_t *conf = dlsym(RTLD_DEFAULT, "slurm_conf");

	return (conf && (conf->conf_flags & CONF_FLAG_OR)) ? 1 : 0;
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
/* 1: srun's controller may lay a block step out in topology order (a ranking topology plugin, or
 * a topology.yaml beside slurm.conf); 0: it cannot (topology/flat without topology.yaml, or
 * CR_NO_DIST_TOPO_BLOCK); -1: srun has no configuration to read. See spank/src/step_order.rs. */
int lama_topology_may_order(void)
{
	const slurm_conf_t *conf = loaded();
	const char *plugin, *path, *slash;
	char yaml[4096];

	if (!conf)
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
#endif
