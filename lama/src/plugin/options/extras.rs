//! What a task gets besides its CPUs, as options: its nearest NICs and GPUs, which of the
//! step's GPUs it sees, and its OpenMP threads; each merged from the user's option and the
//! site's default.

use super::{Options, Settings};
use crate::openmp::{ProcBind, Threads};
use crate::plugin::error::StepError;

/// Which of the step's GPUs a task sees (`--lama-gpu-visibility`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuVisibility {
    /// Only its own (`LAMA_GPUS`).
    #[default]
    Own,
    /// All the step's GPUs on its node, its own first.
    All,
}

impl GpuVisibility {
    /// Reads `own` or `all`; `name` is how the caller spells the option.
    pub fn parse(name: &str, value: &str) -> Result<GpuVisibility, String> {
        match value.trim() {
            "own" => Ok(GpuVisibility::Own),
            "all" => Ok(GpuVisibility::All),
            _ => Err(format!(
                "invalid {name} '{}'; valid: own (each task sees only its own GPUs) or all (every GPU of the step on the node, the task's own first)",
                crate::quote::cut(value)
            )),
        }
    }
}

/// OpenMP threads for each task of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadRequest {
    /// How many threads per task.
    pub threads: Threads,
    /// How places are chosen in the binding.
    pub bind: ProcBind,
    /// Whether lama's `OMP_*` variables replace those the job already has.
    pub replace: bool,
}

/// The OMP_* variables lama sets; when the job has any of them and the user did not ask lama to
/// replace them, lama sets none (the user's OpenMP settings stay whole).
pub const OMP_VARIABLES: [&str; 3] = ["OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND"];

/// Most devices of a kind a task may ask for.
const MAX_DEVICES: usize = 64;

pub(super) fn device_count(name: &str, value: &str) -> Result<usize, String> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| n <= MAX_DEVICES)
        .ok_or_else(|| {
            format!(
                "invalid {name} '{}': not a number of devices; valid: 0 to {MAX_DEVICES} per task",
                crate::quote::cut(value)
            )
        })
}

impl Settings {
    /// NICs and GPUs per task for a step: the user's `--lama-nics` / `--lama-gpus`, else the
    /// admin's defaults (nothing under `--lama-off`).
    pub fn devices(&self, user: &Options) -> Result<(usize, usize), StepError> {
        if user.off {
            return Ok((0, 0));
        }
        let count =
            |name: &str, u: &Option<String>, d: &Option<String>| -> Result<usize, StepError> {
                match (u, d) {
                    (Some(v), _) => {
                        device_count(&format!("--lama-{name}"), v).map_err(StepError::Option)
                    }
                    (None, Some(v)) => device_count(name, v).map_err(StepError::Setting),
                    (None, None) => Ok(0),
                }
            };
        Ok((
            count("nics", &user.nics, &self.defaults.nics)?,
            count("gpus", &user.gpus, &self.defaults.gpus)?,
        ))
    }

    /// Whether tasks may go past MPPR limits or share hardware threads: the user's
    /// `--lama-oversubscribe`, or the admin's default.
    #[inline]
    pub fn oversubscribe(&self, user: &Options) -> bool {
        user.oversubscribe || self.defaults.oversubscribe
    }

    /// Which GPUs each task sees: the user's `--lama-gpu-visibility`, else the admin's default,
    /// else only its own.
    pub fn gpu_visibility(&self, user: &Options) -> Result<GpuVisibility, StepError> {
        match (&user.gpu_visibility, &self.defaults.gpu_visibility) {
            (Some(v), _) => {
                GpuVisibility::parse("--lama-gpu-visibility", v).map_err(StepError::Option)
            }
            (None, Some(v)) => {
                GpuVisibility::parse("gpu-visibility", v).map_err(StepError::Setting)
            }
            (None, None) => Ok(GpuVisibility::Own),
        }
    }

    /// OpenMP threads for a step: the user's `--lama-threads` / `--lama-omp-bind`, else the
    /// admin's defaults, and whether lama's `OMP_*` variables replace those the job has
    /// (`None`: no threads asked for, or `--lama-off`).
    pub fn threads(&self, user: &Options) -> Result<Option<ThreadRequest>, StepError> {
        if user.off {
            return Ok(None);
        }
        let d = &self.defaults;
        let threads = match (&user.threads, &d.threads) {
            (Some(v), _) => {
                Threads::parse("--lama-threads", v).map_err(|e| StepError::Option(e.to_string()))?
            }
            (None, Some(v)) => {
                Threads::parse("threads", v).map_err(|e| StepError::Setting(e.to_string()))?
            }
            (None, None) => {
                if let Some(v) = &user.omp_bind {
                    return Err(StepError::Option(format!(
                        "--lama-omp-bind={v} needs --lama-threads (OpenMP threads per task)"
                    )));
                }
                return Ok(None);
            }
        };
        let bind = match (&user.omp_bind, &d.omp_bind) {
            (Some(v), _) => ProcBind::parse("--lama-omp-bind", v)
                .map_err(|e| StepError::Option(e.to_string()))?,
            (None, Some(v)) => {
                ProcBind::parse("omp-bind", v).map_err(|e| StepError::Setting(e.to_string()))?
            }
            (None, None) => ProcBind::default(),
        };
        Ok(Some(ThreadRequest {
            threads,
            bind,
            replace: user.omp_override || d.omp_override,
        }))
    }
}
