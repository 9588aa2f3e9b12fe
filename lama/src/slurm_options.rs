//! What users and admins ask of the SPANK plugin: the `--lama-*` options (user), the
//! `plugstack.conf` arguments (admin), and how they merge into one step's placement request,
//! devices and OpenMP threads. Pure functions; [`crate::slurm_step`] re-exports everything.

use std::path::PathBuf;

mod catalogue;
mod env;
mod policy;
pub use catalogue::{OptionInfo, SettingInfo, OPTIONS, SETTINGS};
pub use env::{env_name, ENV_PREFIX};
pub use policy::mem_bind_conflict;

use crate::openmp::{ProcBind, Threads};
use crate::slurm_step::StepError;
use crate::spec::{Expert, Input, Request, Simple, SpecError};

/// Placement option values, from the user (`--lama-*`) or the admin (`plugstack.conf`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `policy`: `auto` or `none`
    pub policy: Option<String>,
    /// `mem`: `local` or `none`
    pub mem: Option<String>,
    /// `map`
    pub map: Option<String>,
    /// `bind`
    pub bind: Option<String>,
    /// `mppr`
    pub mppr: Option<String>,
    /// `order`
    pub order: Option<String>,
    /// `map-by`
    pub map_by: Option<String>,
    /// `bind-to`
    pub bind_to: Option<String>,
    /// `rank-by`
    pub rank_by: Option<String>,
    /// `nics`: nearest NICs per task
    pub nics: Option<String>,
    /// `gpus`: nearest GPUs per task
    pub gpus: Option<String>,
    /// `gpu-visibility`: `own` or `all`
    pub gpu_visibility: Option<String>,
    /// `threads`: OpenMP threads per task
    pub threads: Option<String>,
    /// `omp-bind`: `spread` or `close`
    pub omp_bind: Option<String>,
    /// `omp-override`: lama's OMP_* variables replace the job's
    pub omp_override: bool,
    /// `oversubscribe`
    pub oversubscribe: bool,
    /// `verbose`
    pub verbose: bool,
    /// `off`
    pub off: bool,
}

impl Options {
    /// Records one option by its name (as in [`OPTIONS`]); flags ignore `value`.
    /// Returns false for a name that is not an option.
    pub fn set(&mut self, name: &str, value: Option<&str>) -> bool {
        let v = value.map(str::to_string);
        match name {
            "policy" => self.policy = v,
            "mem" => self.mem = v,
            "map" => self.map = v,
            "bind" => self.bind = v,
            "mppr" => self.mppr = v,
            "order" => self.order = v,
            "map-by" => self.map_by = v,
            "bind-to" => self.bind_to = v,
            "rank-by" => self.rank_by = v,
            "nics" => self.nics = v,
            "gpus" => self.gpus = v,
            "gpu-visibility" => self.gpu_visibility = v,
            "threads" => self.threads = v,
            "omp-bind" => self.omp_bind = v,
            "omp-override" => self.omp_override = true,
            "oversubscribe" => self.oversubscribe = true,
            "verbose" => self.verbose = true,
            "off" => self.off = true,
            _ => return false,
        }
        true
    }

    /// The value of a placement option (`None` for `np`, which is never an option here).
    fn value(&self, input: Input) -> Option<&str> {
        match input {
            Input::Map => self.map.as_deref(),
            Input::Bind => self.bind.as_deref(),
            Input::Mppr => self.mppr.as_deref(),
            Input::Order => self.order.as_deref(),
            Input::MapBy => self.map_by.as_deref(),
            Input::BindTo => self.bind_to.as_deref(),
            Input::RankBy => self.rank_by.as_deref(),
            Input::Np => None,
        }
    }

    fn given(&self, kind: &[Input]) -> Vec<&'static str> {
        kind.iter()
            .filter(|&&i| self.value(i).is_some())
            .map(|i| i.name())
            .collect()
    }

    fn expert_names(&self) -> Vec<&'static str> {
        self.given(&EXPERT)
    }

    fn simple_names(&self) -> Vec<&'static str> {
        self.given(&SIMPLE)
    }

    /// Whether any option other than `off` was given.
    pub fn any(&self) -> bool {
        self.oversubscribe
            || self.verbose
            || self.policy.is_some()
            || self.mem.is_some()
            || self.nics.is_some()
            || self.gpus.is_some()
            || self.gpu_visibility.is_some()
            || self.threads.is_some()
            || !self.expert_names().is_empty()
            || !self.simple_names().is_empty()
    }
}

const EXPERT: [Input; 4] = [Input::Map, Input::Bind, Input::Mppr, Input::Order];
const SIMPLE: [Input; 3] = [Input::MapBy, Input::BindTo, Input::RankBy];

/// When placement applies (`apply=` in `plugstack.conf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Only steps given a `--lama-*` option (the default).
    Requested,
    /// Every step, with the configured defaults.
    Always,
}

/// The admin's `plugstack.conf` arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Default option values (`map=`, `bind=`, ..., `oversubscribe=yes`).
    pub defaults: Options,
    /// `apply=requested|always`
    pub apply: Apply,
    /// `taskmap=yes|no`: export `TASK_MAP` into every step's tasks.
    pub taskmap: bool,
    /// `verbose=yes|no`: every step reports its bindings as with `--lama-verbose`.
    pub verbose: bool,
    /// `topology=FILE`: place on this hwloc XML instead of the machine; bindings are then
    /// computed and exported but not applied.
    pub topology: Option<PathBuf>,
    /// `cache=DIR|none`: where slurmd saves the machine's topology and devices at start-up
    /// ([`crate::cache`]) so that each step reads them instead of probing the machine with hwloc
    /// (default `/run/lama`).
    pub cache: Option<PathBuf>,
    /// `weights=FILE`: device weights (`OBJECT ----W---> DEVICE` lines) for NIC and GPU choice.
    pub weights: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            defaults: Options::default(),
            apply: Apply::Requested,
            taskmap: true,
            verbose: false,
            topology: None,
            cache: Some(PathBuf::from("/run/lama")),
            weights: None,
        }
    }
}

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
                "invalid {name} '{value}'; valid: own (each task sees only its own GPUs) or all (every GPU of the step on the node, the task's own first)"
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

/// The keys of [`SETTINGS`], for messages.
fn setting_keys() -> String {
    SETTINGS
        .iter()
        .map(|s| s.key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Most devices of a kind a task may ask for.
const MAX_DEVICES: usize = 64;

fn device_count(name: &str, value: &str) -> Result<usize, String> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| n <= MAX_DEVICES)
        .ok_or_else(|| format!("invalid {name} '{value}': not a number of devices; valid: 0 to {MAX_DEVICES} per task"))
}

fn yes_no(key: &str, value: &str) -> Result<bool, StepError> {
    match value {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(StepError::Setting(format!(
            "invalid {key}={value}; valid: yes or no"
        ))),
    }
}

impl Settings {
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
                "policy" | "mem" => {
                    policy::check_value(key, value).map_err(StepError::Setting)?;
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

    /// The request for a step given the user's options, or `None` when lama leaves the step
    /// alone (`--lama-off`, or no option under `apply=requested`). `np` is the number of tasks
    /// to place (`None` only checks the options, as srun does before launch).
    ///
    /// User options replace the defaults option by option when both are of the same kind
    /// (expert or simple); options of the other kind replace all the defaults.
    ///
    /// `None` too when the automatic policy places the step ([`Settings::auto`]).
    pub fn request(&self, user: &Options, np: Option<usize>) -> Result<Option<Request>, StepError> {
        if user.off || (self.apply == Apply::Requested && !user.any()) {
            return Ok(None);
        }
        // Checked only where a policy was named: the usual step stays on the short path.
        if user.policy.is_some() || self.defaults.policy.is_some() {
            // `--lama-policy=none` without a map: no placement, as without lama.
            if self.auto(user)? || (user.policy.is_some() && user.kinds() == [false, false, true]) {
                return Ok(None);
            }
        }
        let (ue, us) = (user.expert_names(), user.simple_names());
        if let (Some(e), Some(s)) = (ue.first(), us.first()) {
            return Err(StepError::Option(format!(
                "--lama-{e} cannot be combined with --lama-{s}: use the expert options (--lama-map, --lama-bind, --lama-mppr, --lama-order) or the simple ones (--lama-map-by, --lama-bind-to, --lama-rank-by), not both"
            )));
        }
        let d = &self.defaults;
        let same_kind = (ue.is_empty() && us.is_empty())
            || (!ue.is_empty() && d.simple_names().is_empty())
            || (!us.is_empty() && d.expert_names().is_empty());
        let base = if same_kind {
            d.clone()
        } else {
            Options::default()
        };
        let pick = |u: &Option<String>, b: &Option<String>| u.clone().or_else(|| b.clone());
        let merged = Options {
            policy: None,
            mem: None,
            map: pick(&user.map, &base.map),
            bind: pick(&user.bind, &base.bind),
            mppr: pick(&user.mppr, &base.mppr),
            order: pick(&user.order, &base.order),
            map_by: pick(&user.map_by, &base.map_by),
            bind_to: pick(&user.bind_to, &base.bind_to),
            rank_by: pick(&user.rank_by, &base.rank_by),
            nics: None,
            gpus: None,
            gpu_visibility: None,
            threads: None,
            omp_bind: None,
            omp_override: false,
            oversubscribe: user.oversubscribe || d.oversubscribe,
            verbose: user.verbose || self.verbose,
            off: false,
        };
        build(&merged, np).map(Some).map_err(|e| {
            let mut msg = e.message("--lama-");
            let used: Vec<String> = EXPERT
                .iter()
                .chain(&SIMPLE)
                .filter(|&&i| user.value(i).is_none())
                .filter_map(|&i| merged.value(i).map(|v| format!("{}={v}", i.name())))
                .collect();
            if !used.is_empty() {
                msg.push_str(&format!(
                    " (this cluster's defaults from plugstack.conf: {})",
                    used.join(" ")
                ));
            }
            if e.input != Input::Np && user.value(e.input).is_none() {
                msg = msg.replacen("--lama-", "plugstack.conf default ", 1);
            }
            StepError::Option(msg)
        })
    }
}

fn build(o: &Options, np: Option<usize>) -> Result<Request, SpecError> {
    if !o.simple_names().is_empty() {
        Request::simple(
            &Simple {
                map_by: o.map_by.as_deref(),
                bind_to: o.bind_to.as_deref(),
                rank_by: o.rank_by.as_deref(),
            },
            np,
            o.oversubscribe,
        )
    } else {
        Request::expert(
            &Expert {
                map: o.map.as_deref(),
                bind: o.bind.as_deref(),
                mppr: o.mppr.as_deref(),
                order: o.order.as_deref(),
            },
            np,
            o.oversubscribe,
        )
    }
}
