//! The admin's side: reading `plugstack.conf`'s `key=value` arguments into [`Settings`], each
//! value checked as the option it stands for, so that a bad site default fails in slurmd's log
//! and in every step rather than silently.

use std::path::PathBuf;

use super::extras::device_count;
use super::{
    build, catalogue::OPTIONS, catalogue::SETTINGS, policy, Apply, GpuVisibility, InitFailure,
    Settings,
};
use crate::openmp::{ProcBind, Threads};
use crate::plugin::error::StepError;

/// The keys of [`SETTINGS`], for messages.
pub(crate) fn setting_keys() -> String {
    SETTINGS
        .iter()
        .map(|s| s.key)
        .collect::<Vec<_>>()
        .join(", ")
}

fn yes_no(key: &str, value: &str) -> Result<bool, StepError> {
    match value {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(StepError::Setting(format!(
            "invalid {key}={}; valid: yes or no",
            crate::quote::cut(value)
        ))),
    }
}

fn init_failure(value: &str) -> Result<InitFailure, StepError> {
    match value {
        "node" => Ok(InitFailure::Node),
        "job" => Ok(InitFailure::Job),
        _ => Err(StepError::Setting(format!(
            "invalid init-failure={}; valid: node (drain the node, Slurm's default) or job (fail the job, keep the node)",
            crate::quote::cut(value)
        ))),
    }
}

impl Settings {
    /// The `init-failure=` argument alone, read before the others so that it holds when they
    /// are what is broken; [`InitFailure::Node`] unless one valid value is given (the last wins).
    pub fn init_failure_of<S: AsRef<str>>(args: &[S]) -> InitFailure {
        args.iter()
            .filter_map(|a| a.as_ref().strip_prefix("init-failure="))
            .filter_map(|v| init_failure(v).ok())
            .last()
            .unwrap_or_default()
    }

    /// Reads the plugin's `plugstack.conf` arguments (`key=value` words) and checks the default
    /// option values.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Settings, StepError> {
        let mut s = Settings::default();
        for arg in args {
            let arg = arg.as_ref();
            let (key, value) = arg.split_once('=').ok_or_else(|| {
                StepError::Setting(format!(
                    "argument '{arg}' is not key=value; valid keys: {}",
                    setting_keys()
                ))
            })?;
            match key {
                "oversubscribe" => s.defaults.oversubscribe = yes_no(key, value)?,
                "apply" => {
                    s.apply = match value {
                        "requested" => Apply::Requested,
                        "always" => Apply::Always,
                        _ => {
                            return Err(StepError::Setting(format!(
                                "invalid apply={value}; valid: requested (only steps given a --lama option) or always"
                            )))
                        }
                    }
                }
                "taskmap" => s.taskmap = yes_no(key, value)?,
                "init-failure" => s.init_failure = init_failure(value)?,
                "verbose" => s.verbose = yes_no(key, value)?,
                "topology" if !value.is_empty() => s.topology = Some(PathBuf::from(value)),
                "topology" => {
                    return Err(StepError::Setting(
                        "topology= needs the path of an hwloc XML file".into(),
                    ))
                }
                "cache" if value == "none" => s.cache = None,
                "cache" if value.starts_with('/') => s.cache = Some(PathBuf::from(value)),
                "cache" => {
                    return Err(StepError::Setting(format!(
                        "invalid cache={value}; valid: an absolute directory path, or none"
                    )))
                }
                "weights" if !value.is_empty() => s.weights = Some(PathBuf::from(value)),
                "weights" => {
                    return Err(StepError::Setting(
                        "weights= needs the path of a device weights file".into(),
                    ))
                }
                "nics" | "gpus" => {
                    device_count(key, value).map_err(StepError::Setting)?;
                    s.defaults.set(key, Some(value));
                }
                "threads" => {
                    Threads::parse(key, value).map_err(|e| StepError::Setting(e.to_string()))?;
                    s.defaults.set(key, Some(value));
                }
                "omp-bind" => {
                    ProcBind::parse(key, value).map_err(|e| StepError::Setting(e.to_string()))?;
                    s.defaults.set(key, Some(value));
                }
                "gpu-visibility" => {
                    GpuVisibility::parse(key, value).map_err(StepError::Setting)?;
                    s.defaults.set(key, Some(value));
                }
                "omp-override" => s.defaults.omp_override = yes_no(key, value)?,
                "policy" => {
                    policy::policy_value(key, value).map_err(StepError::Setting)?;
                    s.defaults.set(key, Some(value));
                }
                "mem" => {
                    policy::mem_value(key, value).map_err(StepError::Setting)?;
                    s.defaults.set(key, Some(value));
                }
                _ => {
                    let is_value_option = OPTIONS.iter().any(|o| o.name == key && o.arg.is_some());
                    if !is_value_option {
                        return Err(StepError::Setting(format!(
                            "unknown argument '{key}'; valid keys: {}",
                            setting_keys()
                        )));
                    }
                    s.defaults.set(key, Some(value));
                }
            }
        }
        let d = &s.defaults;
        if !d.expert_names().is_empty() && !d.simple_names().is_empty() {
            return Err(StepError::Setting(format!(
                "defaults mix the expert keys ({}) with the simple ones ({}); give one kind",
                d.expert_names().join(", "),
                d.simple_names().join(", ")
            )));
        }
        build(d, None).map_err(|e| StepError::Setting(e.message("")))?;
        policy::check_defaults(d)?;
        Ok(s)
    }
}
