//! Options from the environment: `SLURM_LAMA_MAP=csbnh` does what `--lama-map=csbnh` does, as
//! srun's own `SLURM_CPU_BIND` does for `--cpu-bind`. The command line wins over the
//! environment, which wins over the `plugstack.conf` defaults.
//!
//! The names begin with `SLURM_` so that they reach the tasks (and a nested srun there) even
//! under `--export=NONE`, and differ from what lama exports into tasks (`LAMA_CPUS`,
//! `LAMA_GPUS`, ...): a task's outputs are never read back as a nested step's inputs.

use super::extras::device_count;
use super::{build, GpuVisibility, Options, OPTIONS};
use crate::openmp::{ProcBind, Threads};
use crate::plugin::error::StepError;

/// What every option's variable begins with.
pub const ENV_PREFIX: &str = "SLURM_LAMA_";

/// The variable of an option: `map-by` is `SLURM_LAMA_MAP_BY`.
pub fn env_name(option: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        option.to_ascii_uppercase().replace('-', "_")
    )
}

impl Options {
    /// The options set by the `SLURM_LAMA_*` variables among `vars` (name, value), checked, with
    /// errors that name the variable; `None` when there are none (what nearly every step finds,
    /// at no cost). A flag's variable takes `1`, `yes` or `true` (set) and `0`, `no` or `false`
    /// (not set); empty counts as unset. A variable that names no option is an error, not a typo
    /// silently ignored.
    pub fn from_env(vars: &[(String, String)]) -> Result<Option<Options>, StepError> {
        let ours = || vars.iter().filter(|(k, _)| k.starts_with(ENV_PREFIX));
        if ours().next().is_none() {
            return Ok(None);
        }
        if let Some((k, _)) = ours().find(|(k, _)| !OPTIONS.iter().any(|o| env_name(o.name) == *k))
        {
            let names: Vec<String> = OPTIONS.iter().map(|o| env_name(o.name)).collect();
            return Err(StepError::Option(format!(
                "unknown variable {k}; lama reads {}",
                names.join(", ")
            )));
        }
        let get = |name: &str| ours().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut o = Options::default();
        for info in OPTIONS {
            let name = env_name(info.name);
            let Some(value) = get(&name).filter(|v| !v.trim().is_empty()) else {
                continue;
            };
            let value = value.trim();
            if info.arg.is_some() {
                o.set(info.name, Some(value));
                continue;
            }
            match value {
                "1" | "yes" | "true" => {
                    o.set(info.name, None);
                }
                "0" | "no" | "false" => {}
                _ => {
                    return Err(StepError::Option(format!(
                    "invalid {name}={}; valid: 1, yes or true (as --lama-{}), or 0, no or false",
                    crate::quote::cut(value),
                    info.name
                )))
                }
            }
        }
        o.check_env()?;
        Ok(Some(o))
    }

    fn check_env(&self) -> Result<(), StepError> {
        let bad = |e: String| StepError::Option(e);
        let (e, s) = (self.expert_names(), self.simple_names());
        if let (Some(e), Some(s)) = (e.first(), s.first()) {
            return Err(bad(format!(
                "{} cannot be combined with {}: set the expert variables ({}_MAP, _BIND, _MPPR, _ORDER) or the simple ones (_MAP_BY, _BIND_TO, _RANK_BY), not both",
                env_name(e),
                env_name(s),
                ENV_PREFIX.trim_end_matches('_')
            )));
        }
        if let Err(e) = build(self, None) {
            let option = format!("--lama-{}", e.input.name());
            return Err(bad(e.message("--lama-").replacen(
                &option,
                &env_name(e.input.name()),
                1,
            )));
        }
        for (key, v) in [("nics", &self.nics), ("gpus", &self.gpus)] {
            if let Some(v) = v {
                device_count(&env_name(key), v).map_err(bad)?;
            }
        }
        if let Some(v) = &self.threads {
            Threads::parse(&env_name("threads"), v).map_err(|e| bad(e.to_string()))?;
        }
        if let Some(v) = &self.omp_bind {
            ProcBind::parse(&env_name("omp-bind"), v).map_err(|e| bad(e.to_string()))?;
        }
        if let Some(v) = &self.gpu_visibility {
            GpuVisibility::parse(&env_name("gpu-visibility"), v).map_err(bad)?;
        }
        if let Some(v) = &self.policy {
            super::policy::policy_value(&env_name("policy"), v).map_err(bad)?;
        }
        if let Some(v) = &self.mem {
            super::policy::mem_value(&env_name("mem"), v).map_err(bad)?;
        }
        if self.policy.is_some() && (!e.is_empty() || !s.is_empty()) {
            return Err(bad(format!(
                "{} cannot be combined with the map variables ({}): set one or the other",
                env_name("policy"),
                e.iter()
                    .chain(&s)
                    .map(|n| env_name(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(())
    }

    /// These options (the command line's) over `env`'s, option by option. Placement options of
    /// the other kind (expert or simple) than the command line's are dropped, as the
    /// `plugstack.conf` defaults are. `SLURM_LAMA_OFF` holds only when the command line gives no
    /// option: `--lama-map` on the command line places even where the environment says off.
    pub fn over_env(self, env: Options) -> Options {
        // The environment's placement options stay when the command line gives none, or only
        // options of the kinds (expert, simple, policy) the environment's are of.
        let (c, e) = (self.kinds(), env.kinds());
        let keep = c == [false; 3] || (0..3).all(|k| c[k] || !e[k]);
        let placement = |c: Option<String>, e: Option<String>| if keep { c.or(e) } else { c };
        let off = self.off || (env.off && !self.any());
        Options {
            policy: placement(self.policy, env.policy),
            mem: self.mem.or(env.mem),
            map: placement(self.map, env.map),
            bind: placement(self.bind, env.bind),
            mppr: placement(self.mppr, env.mppr),
            order: placement(self.order, env.order),
            map_by: placement(self.map_by, env.map_by),
            bind_to: placement(self.bind_to, env.bind_to),
            rank_by: placement(self.rank_by, env.rank_by),
            nics: self.nics.or(env.nics),
            gpus: self.gpus.or(env.gpus),
            gpu_visibility: self.gpu_visibility.or(env.gpu_visibility),
            threads: self.threads.or(env.threads),
            omp_bind: self.omp_bind.or(env.omp_bind),
            omp_override: self.omp_override || env.omp_override,
            oversubscribe: self.oversubscribe || env.oversubscribe,
            verbose: self.verbose || env.verbose,
            off,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_follow_the_options() {
        assert_eq!(env_name("map"), "SLURM_LAMA_MAP");
        assert_eq!(env_name("gpu-visibility"), "SLURM_LAMA_GPU_VISIBILITY");
        // Never one of the variables lama exports into tasks.
        for o in OPTIONS {
            assert!(![
                "LAMA_CPUS",
                "LAMA_GPUS",
                "LAMA_NICS",
                "LAMA_MEMS",
                "TASK_MAP"
            ]
            .contains(&env_name(o.name).as_str()));
        }
    }

    #[test]
    fn values_and_flags_are_read_and_checked() {
        let o = Options::from_env(&env(&[
            ("SLURM_LAMA_MAP", "csbnh"),
            ("SLURM_LAMA_BIND", "2c"),
            ("SLURM_LAMA_VERBOSE", "yes"),
            ("SLURM_LAMA_OVERSUBSCRIBE", "0"),
            ("SLURM_LAMA_THREADS", ""),
            ("SLURM_JOB_ID", "7"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(Options::from_env(&env(&[("SLURM_JOB_ID", "7")])), Ok(None));
        assert_eq!(o.map.as_deref(), Some("csbnh"));
        assert_eq!(o.bind.as_deref(), Some("2c"));
        assert!(o.verbose && !o.oversubscribe && o.threads.is_none());
        for (var, value, says) in [
            ("SLURM_LAMA_MAP", "csbnq", "invalid SLURM_LAMA_MAP 'csbnq'"),
            (
                "SLURM_LAMA_OFF",
                "maybe",
                "invalid SLURM_LAMA_OFF=maybe; valid: 1, yes or true",
            ),
            ("SLURM_LAMA_GPUS", "many", "invalid SLURM_LAMA_GPUS 'many'"),
            ("SLURM_LAMA_THREADS", "x", "SLURM_LAMA_THREADS"),
            (
                "SLURM_LAMA_GPU_VISIBILITY",
                "some",
                "invalid SLURM_LAMA_GPU_VISIBILITY 'some'",
            ),
        ] {
            let e = Options::from_env(&env(&[(var, value)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{var}={value}: {e}");
        }
        let mixed = Options::from_env(&env(&[
            ("SLURM_LAMA_MAP", "csbnh"),
            ("SLURM_LAMA_BIND_TO", "core"),
        ]));
        assert!(mixed
            .unwrap_err()
            .to_string()
            .contains("SLURM_LAMA_MAP cannot be combined with SLURM_LAMA_BIND_TO"));
    }

    #[test]
    fn the_command_line_wins() {
        let from = |vars: &[(&str, &str)]| Options::from_env(&env(vars)).unwrap().unwrap();
        let mut cmd = Options::default();
        cmd.set("bind", Some("1c"));
        let o = cmd.clone().over_env(from(&[
            ("SLURM_LAMA_MAP", "nbsch"),
            ("SLURM_LAMA_BIND", "2c"),
        ]));
        assert_eq!(
            (o.map.as_deref(), o.bind.as_deref()),
            (Some("nbsch"), Some("1c"))
        );
        // The other kind on the command line replaces every placement variable.
        let mut simple = Options::default();
        simple.set("map-by", Some("core"));
        let o = simple.over_env(from(&[
            ("SLURM_LAMA_MAP", "nbsch"),
            ("SLURM_LAMA_GPUS", "1"),
        ]));
        assert_eq!(
            (o.map, o.map_by.as_deref(), o.gpus.as_deref()),
            (None, Some("core"), Some("1"))
        );
        // Off from the environment, unless the command line asks for something.
        let off = from(&[("SLURM_LAMA_OFF", "1")]);
        assert!(Options::default().over_env(off.clone()).off);
        assert!(!cmd.over_env(off).off);
    }
}
