//! The catalogue of what users and admins may say: every `--lama-*` option and every
//! `plugstack.conf` argument, with the text srun's `--help` and the manual page show.

/// One user option of the plugin, spelled `--lama-<name>` on the command line.
#[derive(Clone, Copy, Debug)]
pub struct OptionInfo {
    /// The name after `--lama-`.
    pub name: &'static str,
    /// What the value looks like, or `None` for a flag.
    pub arg: Option<&'static str>,
    /// The `--help` line.
    pub usage: &'static str,
}

/// Every user option, in `--help` order.
pub const OPTIONS: [OptionInfo; 18] = [
    OptionInfo {
        name: "policy",
        arg: Some("auto|none"),
        usage: "auto: place each node's tasks with no map to write (NUMA domains by the step's GPUs or cores, whole cores, GPUs shared out evenly, OpenMP threads); none: no policy (turns off a site default)",
    },
    OptionInfo {
        name: "map",
        arg: Some("STR"),
        usage: "LAMA map: levels to sweep, fastest first, e.g. csbnh (tokens n b N s L3 L2 L1 c h)",
    },
    OptionInfo {
        name: "bind",
        arg: Some("WL"),
        usage: "bind each task to W objects of level L, e.g. 1c, 2L2, 1s",
    },
    OptionInfo {
        name: "mppr",
        arg: Some("LIST"),
        usage: "at most K tasks per object, e.g. 1:c,2:s",
    },
    OptionInfo {
        name: "order",
        arg: Some("n|s"),
        usage: "rank order: n (natural, by the map) or s (sequential)",
    },
    OptionInfo {
        name: "map-by",
        arg: Some("X"),
        usage: "Open MPI 5's --map-by: slot, node, package, numa, l3cache, l2cache, l1cache, core, hwthread, ppr:K:object, with :pe=K, :span, :hwtcpus, :oversubscribe",
    },
    OptionInfo {
        name: "bind-to",
        arg: Some("Y"),
        usage: "Open MPI 5's --bind-to: none, package, numa, l3cache, l2cache, l1cache, core, hwthread, with :overload-allowed",
    },
    OptionInfo {
        name: "rank-by",
        arg: Some("Z"),
        usage: "Open MPI 5's --rank-by: slot, node, fill, span",
    },
    OptionInfo {
        name: "oversubscribe",
        arg: None,
        usage: "keep placing past MPPR limits instead of failing the step",
    },
    OptionInfo {
        name: "nics",
        arg: Some("N"),
        usage: "give each task its N nearest NICs (LAMA_NICS, UCX_NET_DEVICES)",
    },
    OptionInfo {
        name: "gpus",
        arg: Some("N"),
        usage: "give each task its N nearest GPUs (LAMA_GPUS, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK)",
    },
    OptionInfo {
        name: "gpu-visibility",
        arg: Some("own|all"),
        usage: "with --lama-gpus: each task sees only its own GPUs (own, default), or all the step's GPUs on its node, its own first (all: for CUDA IPC and peer-to-peer)",
    },
    OptionInfo {
        name: "threads",
        arg: Some("N|auto"),
        usage: "OpenMP threads per task, each on a place of the task's binding (OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND); auto: one per core",
    },
    OptionInfo {
        name: "omp-bind",
        arg: Some("spread|close"),
        usage: "with --lama-threads: places spread over the task's binding (default) or packed",
    },
    OptionInfo {
        name: "omp-override",
        arg: None,
        usage: "with --lama-threads: replace OMP_* variables the job already has (default: they win)",
    },
    OptionInfo {
        name: "mem",
        arg: Some("local|hbm|prefer-hbm|interleave|none"),
        usage: "local: bind each task's memory to the default-memory NUMA nodes of its CPUs (LAMA_MEMS); hbm: to its nearest high-bandwidth nodes; prefer-hbm: prefer those, spill to others; interleave: spread pages over its default-memory nodes; none: leave memory alone (default)",
    },
    OptionInfo {
        name: "verbose",
        arg: None,
        usage: "print each task's binding and node picture on stderr",
    },
    OptionInfo {
        name: "off",
        arg: None,
        usage: "no placement, binding or TASK_MAP from lama for this step",
    },
];

/// One `plugstack.conf` argument of the plugin (`key=value`).
#[derive(Clone, Copy, Debug)]
pub struct SettingInfo {
    /// The key.
    pub key: &'static str,
    /// What the value looks like.
    pub value: &'static str,
    /// What it does, for the manual page.
    pub meaning: &'static str,
}

/// Every `plugstack.conf` argument, in manual-page order.
pub const SETTINGS: [SettingInfo; 23] = [
    SettingInfo { key: "policy", value: "auto|none", meaning: "auto: every step is placed by the automatic policy unless it gives a map, --lama-policy=none or --lama-off (default none)" },
    SettingInfo { key: "mem", value: "local|hbm|prefer-hbm|interleave|none", meaning: "default --lama-mem (default none)" },
    SettingInfo { key: "map", value: "STR", meaning: "default --lama-map" },
    SettingInfo { key: "bind", value: "WL", meaning: "default --lama-bind" },
    SettingInfo { key: "mppr", value: "LIST", meaning: "default --lama-mppr" },
    SettingInfo { key: "order", value: "n|s", meaning: "default --lama-order" },
    SettingInfo { key: "map-by", value: "X", meaning: "default --lama-map-by" },
    SettingInfo { key: "bind-to", value: "Y", meaning: "default --lama-bind-to" },
    SettingInfo { key: "rank-by", value: "Z", meaning: "default --lama-rank-by" },
    SettingInfo { key: "nics", value: "N", meaning: "default --lama-nics" },
    SettingInfo { key: "gpus", value: "N", meaning: "default --lama-gpus" },
    SettingInfo { key: "gpu-visibility", value: "own|all", meaning: "default --lama-gpu-visibility (default own)" },
    SettingInfo { key: "threads", value: "N|auto", meaning: "default --lama-threads" },
    SettingInfo { key: "omp-bind", value: "spread|close", meaning: "default --lama-omp-bind" },
    SettingInfo { key: "omp-override", value: "yes|no", meaning: "lama's OMP_* variables replace the job's (default no)" },
    SettingInfo { key: "oversubscribe", value: "yes|no", meaning: "default --lama-oversubscribe (default no)" },
    SettingInfo { key: "apply", value: "requested|always", meaning: "place only steps given a --lama option (default), or every step with the defaults" },
    SettingInfo { key: "taskmap", value: "yes|no", meaning: "export TASK_MAP to every step's tasks (default yes)" },
    SettingInfo { key: "verbose", value: "yes|no", meaning: "every step reports its bindings as with --lama-verbose (default no)" },
    SettingInfo { key: "topology", value: "FILE", meaning: "place on this hwloc XML instead of the machine: CPUs are computed and exported, not bound (what-if clusters)" },
    SettingInfo { key: "cache", value: "DIR|none", meaning: "where slurmd saves the machine's topology at start for the steps to load (default /run/lama); used only when root owns the folder and the file, no one else may write to them and neither is a symbolic link; under Flux, where each job's shell keeps what it read of its node's XML (default /tmp/lama-%u, %u the user id; trusted when root or that user owns it)" },
    SettingInfo { key: "weights", value: "FILE", meaning: "device weights (OBJECT ----W---> DEVICE lines) for NIC and GPU choice" },
    SettingInfo { key: "init-failure", value: "node|job", meaning: "Slurm 25.05 and later, a required lama that cannot start in a batch job's slurmstepd (a broken plugstack.conf line): node drains the node and requeues the job (Slurm's default), job fails the job and keeps the node in service" },
];
