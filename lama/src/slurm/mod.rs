//! The Slurm adapters: what only the SPANK plugin (and `lama plan --from-slurm`) reads from
//! Slurm, on top of [`crate::plugin`] and the placement core, which never use this module.
//!
//! | module | what |
//! |---|---|
//! | [`hostlist`] | hostlist expressions, `SLURM_STEP_TASKS_PER_NODE` counts, host files, read within limits |
//! | [`distribution`] | `SLURM_DISTRIBUTION`: block, cyclic, plane, arbitrary |
//! | [`layout`] | which task runs on which node, as Slurm lays a step out; the step's values (`StepEnv`) |
//! | [`node_conf`] | which hardware threads Slurm means by a node's core `c` (nodes declared with `CPUs=` alone, or fewer threads than they have) |
//! | [`node_order`] | the topology order of a block step's nodes (Slurm 26.05), passed from srun |
//! | [`step_map`] | a step's task map without one entry per task (what every node computes) |
//! | [`binding`] | Slurm's own `--cpu-bind` and `--mem-bind` beside lama's placement: which wins |
//! | [`gpu_bind`] | Slurm's GPU binding task by task beside the automatic policy: the GPU decides the domain |
//! | [`gpu_by_id`] | GPUs Slurm binds by task id (`map_gpu`, `mask_gpu`, `per_task`): each local task's, by Slurm's rule |
//! | [`site_default`] | a placement the site made the default beside what the user asked Slurm's binding for |
//! | [`reserved`] | hardware threads a job keeps for the system (`--thread-spec`) |
//! | [`checks`] | the task map against Slurm's items on a node; `SLURM_CPU_BIND*` for lama's binding |
//! | [`hostfile`] | host files for Slurm's arbitrary distribution, written from a LAMA map |
//! | [`containers`] | steps in pyxis containers: which plugin has the last word on the task's variables |
//! | [`launcher`] | MPI launchers in an allocation: their daemon steps, Open MPI rankfiles, Hydra and Intel MPI arguments |
//!
//! The most used items are re-exported here (`lama::slurm::StepEnv`).

pub mod binding;
pub mod checks;
pub mod containers;
pub mod distribution;
pub mod gpu_bind;
pub mod gpu_by_id;
pub mod hostfile;
pub mod hostlist;
pub mod launcher;
pub mod layout;
pub mod node_conf;
pub mod node_order;
pub mod reserved;
pub mod site_default;
pub mod step_map;

pub use binding::{
    beside, cpu_bind_line, cpu_bind_verbose, exact_note, overcommit, own_option, task_limits,
    threads_per_core_dropped, Beside,
};
pub use checks::{check_node, check_step_map, check_task, cpu_bind_env, MapCheck};
pub use distribution::Distribution;
pub use hostlist::{
    each_host, expand_counts, expand_counts_within, expand_hostlist, expand_hostlist_within,
    read_hostfile, read_hostfile_text, read_hostfile_within, LayoutError, MAX_HOST_NAME_BYTES,
};
pub use layout::{layout, step_taskmap, StepEnv};
pub use reserved::{job_holds_node, reserved_threads, thread_spec_asked, THREAD_SPEC_VAR};
pub use site_default::{slurm_binding_asked, stand_aside_note};
