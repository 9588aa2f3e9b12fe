//! What users and admins ask of the SPANK plugin: the `--lama-*` options (user), the
//! `plugstack.conf` arguments (admin), and how they merge into one step's placement request,
//! devices and OpenMP threads. Pure functions; [`crate::plugin`] re-exports everything.
//!
//! | file | concept |
//! |---|---|
//! | here | [`Options`], [`Settings`], and the step's placement [`Request`] from both |
//! | `catalogue` | every option and `plugstack.conf` key, with its help text |
//! | `plugstack` | reading `plugstack.conf`'s arguments ([`Settings::parse`]) |
//! | `extras` | NICs, GPUs, GPU visibility and OpenMP threads per task |
//! | `policy` | the automatic policy and memory binding as options |
//! | `env` | the same options from `SLURM_LAMA_*` variables |

use std::path::PathBuf;

mod catalogue;
mod env;
mod extras;
mod plugstack;
mod policy;
pub use catalogue::{OptionInfo, SettingInfo, OPTIONS, SETTINGS};
pub use env::{env_name, ENV_PREFIX};
pub use extras::{GpuVisibility, ThreadRequest, OMP_VARIABLES};
pub(crate) use plugstack::setting_keys;

use crate::plugin::error::StepError;
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

    /// The user's first option that asks lama to place the tasks or bind their memory, as
    /// typed (`--lama-map`, `--lama-policy=auto`, `--lama-mem=local`); `None` when placement and
    /// memory binding would be the site's defaults.
    pub fn asked_placement(&self) -> Option<String> {
        let named = self.expert_names().into_iter().chain(self.simple_names());
        named
            .map(|n| format!("--lama-{n}"))
            .chain(self.policy.as_ref().map(|p| format!("--lama-policy={p}")))
            .chain(self.mem.as_ref().map(|m| format!("--lama-mem={m}")))
            .next()
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

/// How a step is placed ([`Settings::placing`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placing {
    /// Not by lama: the step runs as without it (with `TASK_MAP` unless `--lama-off`).
    LeftAlone,
    /// By a map, expert or simple.
    Map(Request),
    /// By the automatic policy.
    Policy,
}

/// When placement applies (`apply=` in `plugstack.conf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Only steps given a `--lama-*` option (the default).
    Requested,
    /// Every step, with the configured defaults.
    Always,
}

/// What Slurm 25.05 and later do when the plugin cannot start in a batch job's slurmstepd
/// (`init-failure=` in `plugstack.conf`). Only a broken site configuration fails the plugin's
/// start there: users' options are checked later, and never fail it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitFailure {
    /// Drain the node and requeue the job: Slurm's default (`ESPANK_NODE_FAILURE`).
    #[default]
    Node,
    /// Fail the job and leave the node in service (`ESPANK_JOB_FAILURE`).
    Job,
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
    /// `init-failure=node|job`.
    pub init_failure: InitFailure,
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
            init_failure: InitFailure::Node,
        }
    }
}

impl Settings {
    /// How a step is placed given the user's options: by a map ([`Placing::Map`], its request),
    /// by the automatic policy ([`Settings::auto`]), or not at all (`--lama-off`,
    /// `--lama-policy=none` without a map, or no option under `apply=requested`). `np` is the
    /// number of tasks to place (`None` only checks the options, as srun does before launch).
    ///
    /// User options replace the defaults option by option when both are of the same kind
    /// (expert or simple); options of the other kind replace all the defaults.
    pub fn placing(&self, user: &Options, np: Option<usize>) -> Result<Placing, StepError> {
        if user.off {
            return Ok(Placing::LeftAlone);
        }
        // Checked only where a policy was named: the usual step stays on the short path.
        if user.policy.is_some() || self.defaults.policy.is_some() {
            if self.auto(user)? {
                return Ok(Placing::Policy);
            }
            if user.policy.is_some() && user.kinds() == [false, false, true] {
                return Ok(Placing::LeftAlone);
            }
        }
        if self.apply == Apply::Requested && !user.any() {
            return Ok(Placing::LeftAlone);
        }
        self.map_request(user, np).map(Placing::Map)
    }

    /// The map request for a step, or `None` when it is not placed by a map ([`Self::placing`]).
    pub fn request(&self, user: &Options, np: Option<usize>) -> Result<Option<Request>, StepError> {
        Ok(match self.placing(user, np)? {
            Placing::Map(r) => Some(r),
            Placing::Policy | Placing::LeftAlone => None,
        })
    }

    /// The user's map options over the site's defaults, as one request.
    fn map_request(&self, user: &Options, np: Option<usize>) -> Result<Request, StepError> {
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
            oversubscribe: self.oversubscribe(user),
            verbose: user.verbose || self.verbose,
            off: false,
        };
        let workers = user
            .threads
            .as_deref()
            .or(self.defaults.threads.as_deref())
            .and_then(|t| t.trim().parse::<u32>().ok());
        build(&merged, np)
            .and_then(|r| r.with_workers(workers))
            .map_err(|e| {
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
