//! What both plugins, the SPANK plugin and the Flux shell plugin, decide on a node, as pure
//! functions: their options and the site's settings, the node's tasks placed on the CPUs the
//! resource manager gave the job, and the tasks' devices. What only one of them needs is
//! [`crate::slurm`]'s or [`crate::flux`]'s; those use this module, never the reverse, and this
//! module uses only the placement core.
//!
//! | module | what |
//! |---|---|
//! | [`options`] | the `--lama-*` options (Flux's `lama.*`) and the site's settings, merged per step |
//! | [`node`] | the node's CPUs from the cores the job was given; its tasks placed by a map or the policy; their OpenMP places; the verbose line |
//! | [`devices`] | each placed task's nearest NICs and GPUs, and their variables |
//! | [`error`] | why a node's tasks cannot be placed |
//! | [`guide`] | the short guide `srun --lama-help` prints |
//!
//! The items are re-exported here, so that a front end names them `lama::plugin::place_node`.

pub mod devices;
pub mod error;
pub mod guide;
pub mod node;
pub mod options;

pub use devices::{
    auto_devices, choose_among, choose_devices, node_devices, NodeDevices, SlurmGpus,
};
pub use error::StepError;
pub use guide::guide;
pub use node::{
    auto_threads, auto_workers, cores_to_cpus, place_auto, place_node, placed_in, policy_summary,
    usable_cpus, verbose_extras, verbose_mems, AutoPlaced, TaskBinding,
};
pub use options::{
    env_name, Apply, GpuVisibility, InitFailure, OptionInfo, Options, Placing, SettingInfo,
    Settings, ThreadRequest, ENV_PREFIX, OMP_VARIABLES, OPTIONS, SETTINGS,
};
