//! Each placed task's nearest NICs and GPUs on a node, among those the job was given, and the
//! variables that name them.

use crate::locality::{
    allowed_gpus, choose, task_env, AllowedGpus, Kind, Locality, LocalityError, TaskDevices,
    Weights,
};

use super::error::StepError;
use super::node::TaskBinding;
use super::options::GpuVisibility;

/// What a node hands its placed tasks: per task (in the order of `tasks`), its devices, and how
/// to write them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeDevices {
    picks: Vec<TaskDevices>,
    /// How Slurm numbered the GPUs it gave, per device.
    entries: Vec<(usize, String)>,
    nics: bool,
    gpus: bool,
    /// The step's GPUs on the node.
    step_gpus: Vec<usize>,
    /// Whether every task also sees all of [`Self::step_gpus`] (`--lama-gpu-visibility=all`).
    share_all: bool,
}

impl NodeDevices {
    /// Whether a task may get other devices than this choice gave it: GPUs are chosen among
    /// those Slurm wrote into each task's environment, so a step with GPUs chooses again per
    /// task; NICs do not depend on it.
    pub fn depends_on_task_env(&self) -> bool {
        self.gpus
    }

    /// Task `i`'s device environment (`LAMA_NICS`, `UCX_NET_DEVICES`, `LAMA_GPUS` and the GPU
    /// runtimes' variables); empty for a task that does not exist.
    pub fn env(&self, loc: &Locality, i: usize) -> Vec<(String, String)> {
        match self.picks.get(i) {
            Some(p) => task_env(
                loc,
                p,
                self.nics,
                self.gpus,
                &self.entries,
                self.share_all.then_some(self.step_gpus.as_slice()),
            ),
            None => Vec::new(),
        }
    }

    /// Task `i`'s devices as [`Self::env`] gives them, unless Slurm left the task fewer GPUs
    /// than this choice gave it (Slurm binds GPUs task by task: `--gpu-bind`,
    /// `--ntasks-per-gpu`, `--gpus-per-task`, which leave each task's `CUDA_VISIBLE_DEVICES`
    /// and the like, read through `task_get`, to the task's own GPUs, or mark the step so).
    /// Then the task keeps Slurm's GPU variables and gets lama's NICs alone ([`SlurmGpus`]).
    pub fn env_within_task_gpus(
        &self,
        loc: &Locality,
        i: usize,
        task_get: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, SlurmGpus> {
        let mine = self.picks.get(i).map_or(&[][..], |p| p.gpus.as_slice());
        if !self.gpus || mine.is_empty() {
            return Ok(self.env(loc, i));
        }
        let why = match allowed_gpus(loc, task_get) {
            Err(e) => e.to_string(),
            Ok(Some(own)) if !mine.iter().all(|g| own.devices.contains(g)) => format!(
                "Slurm left this task {} of the step's GPUs, not the {} lama chose",
                own.devices.len(),
                mine.len()
            ),
            Ok(_) => return Ok(self.env(loc, i)),
        };
        let nics = NodeDevices {
            gpus: false,
            share_all: false,
            ..self.clone()
        };
        Err(SlurmGpus {
            env: nics.env(loc, i),
            why,
        })
    }

    /// Which of the step's GPUs each task sees besides its own.
    pub fn sharing(mut self, v: GpuVisibility) -> NodeDevices {
        self.share_all = v == GpuVisibility::All;
        self
    }
}

/// A task whose GPUs Slurm bound itself ([`NodeDevices::env_within_task_gpus`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmGpus {
    /// The task's device variables without lama's GPUs (its NICs, when asked for).
    pub env: Vec<(String, String)>,
    /// Why Slurm's GPUs stay.
    pub why: String,
}

/// The devices of each placed task: the node's tasks in rank order share the node's devices as
/// [`crate::locality::choose`] decides. `get` reads the step's environment (the GPUs Slurm gave
/// the job).
pub fn choose_devices(
    loc: &Locality,
    tasks: &[TaskBinding],
    (nics, gpus): (usize, usize),
    weights: Option<&Weights>,
    get: impl Fn(&str) -> Option<String>,
) -> Result<NodeDevices, StepError> {
    let given = if gpus > 0 {
        allowed_gpus(loc, get).map_err(|e| StepError::Devices(e.to_string()))?
    } else {
        None
    };
    choose_among(loc, tasks, (nics, gpus), weights, given)
}

/// [`choose_devices`] with the GPUs the job was given already known (`None`: every GPU of the
/// node), as the Flux shell knows them from the job's resources.
pub fn choose_among(
    loc: &Locality,
    tasks: &[TaskBinding],
    (nics, gpus): (usize, usize),
    weights: Option<&Weights>,
    given: Option<AllowedGpus>,
) -> Result<NodeDevices, StepError> {
    let err = |e: LocalityError| StepError::Devices(e.to_string());
    let cpus: Vec<&[u32]> = tasks.iter().map(|t| t.cpus.as_slice()).collect();
    let picks = choose(
        loc,
        &cpus,
        nics,
        gpus,
        given.as_ref().map(|g| g.devices.as_slice()),
        weights,
    )
    .map_err(err)?;
    let step_gpus = loc.candidates(Kind::Gpu, given.as_ref().map(|g| g.devices.as_slice()));
    Ok(NodeDevices {
        picks,
        entries: given.map(|g| g.entries).unwrap_or_default(),
        nics: nics > 0,
        gpus: gpus > 0,
        step_gpus,
        share_all: false,
    })
}

/// The devices of tasks the automatic policy placed: its GPUs (`gpus`, per task), and the
/// `nics` nearest NICs chosen as [`choose_among`] does. `given` are the GPUs Slurm gave the step.
pub fn auto_devices(
    loc: &Locality,
    tasks: &[TaskBinding],
    gpus: &[Vec<usize>],
    nics: usize,
    weights: Option<&Weights>,
    given: Option<AllowedGpus>,
) -> Result<NodeDevices, StepError> {
    let mut d = choose_among(loc, tasks, (nics, 0), weights, given)?;
    for (p, g) in d.picks.iter_mut().zip(gpus) {
        p.gpus = g.clone();
    }
    d.gpus = gpus.iter().any(|g| !g.is_empty());
    Ok(d)
}

/// Each placed task's device environment ([`NodeDevices::env`]), in the order of `tasks`.
pub fn node_devices(
    loc: &Locality,
    tasks: &[TaskBinding],
    counts: (usize, usize),
    weights: Option<&Weights>,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Vec<(String, String)>>, StepError> {
    let d = choose_devices(loc, tasks, counts, weights, get)?;
    Ok((0..tasks.len()).map(|i| d.env(loc, i)).collect())
}
