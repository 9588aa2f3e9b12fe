//! The automatic policy and memory binding as options: `--lama-policy=auto|none` and
//! `--lama-mem=local|hbm|prefer-hbm|interleave|none`, their `plugstack.conf` defaults, and how they meet the other options.
//!
//! The policy is a third kind of placement request beside the expert and the simple options: a
//! user's map replaces a site's `policy=auto` as it replaces the site's default map, while
//! `--lama-policy=auto` given with a map on one command line is refused, since one of the two
//! would be ignored. `--lama-gpus` is refused with the policy, which shares the step's GPUs out
//! itself.

use super::{Options, Settings};
use crate::plugin::error::StepError;
use crate::tiers::MemMode;

impl Options {
    /// Which kinds of placement options are given: expert, simple, policy.
    pub(super) fn kinds(&self) -> [bool; 3] {
        [
            !self.expert_names().is_empty(),
            !self.simple_names().is_empty(),
            self.policy.is_some(),
        ]
    }

    /// The first expert or simple option given, as `--lama-NAME`.
    fn first_map_option(&self) -> Option<String> {
        let e = self.expert_names();
        let s = self.simple_names();
        e.first().or(s.first()).map(|n| format!("--lama-{n}"))
    }
}

/// Whether a `policy` value is `auto` (else `none`); `spelled` is how the caller names the
/// option in messages (`policy`, `--lama-policy`, `SLURM_LAMA_POLICY`).
pub(super) fn policy_value(spelled: &str, value: &str) -> Result<bool, String> {
    switch(
        spelled,
        value,
        "auto",
        "auto (place with no map to write) or none",
    )
}

/// The memory mode a `mem` value names (`None` for `none`), as [`policy_value`].
pub(super) fn mem_value(spelled: &str, value: &str) -> Result<Option<MemMode>, String> {
    if value.trim() == "none" {
        return Ok(None);
    }
    MemMode::parse(value).map(Some).ok_or_else(|| {
        format!(
            "invalid {spelled} '{}'; valid: local (each task's memory on the default-memory NUMA nodes of its CPUs), hbm (on its nearest high-bandwidth nodes), prefer-hbm (those preferred, spilling to others), interleave (pages spread over its default-memory nodes) or none",
            crate::quote::cut(value)
        )
    })
}

/// `on` or `none`.
fn switch(spelled: &str, value: &str, on: &str, valid: &str) -> Result<bool, String> {
    match value.trim() {
        v if v == on => Ok(true),
        "none" => Ok(false),
        _ => Err(format!(
            "invalid {spelled} '{}'; valid: {valid}",
            crate::quote::cut(value)
        )),
    }
}

/// Refuses `plugstack.conf` defaults that `policy=auto` would leave unused.
pub(super) fn check_defaults(d: &Options) -> Result<(), StepError> {
    let auto = match &d.policy {
        Some(v) => policy_value("policy", v).map_err(StepError::Setting)?,
        None => false,
    };
    if let Some(v) = &d.mem {
        mem_value("mem", v).map_err(StepError::Setting)?;
    }
    let mut others: Vec<&str> = d.expert_names();
    others.extend(d.simple_names());
    if d.gpus.is_some() {
        others.push("gpus");
    }
    if auto && !others.is_empty() {
        return Err(StepError::Setting(format!(
            "policy=auto places steps itself, so the defaults {} would never be used; give policy=auto or a default map, not both",
            others.join(", ")
        )));
    }
    Ok(())
}

impl Settings {
    /// Whether the automatic policy places this step: `--lama-policy=auto`, or the site's
    /// `policy=auto` for a step that gives no map (nor `--lama-policy=none` or `--lama-off`).
    /// Errors for a policy given with a map, or with `--lama-gpus`.
    pub fn auto(&self, user: &Options) -> Result<bool, StepError> {
        if user.off {
            return Ok(false);
        }
        let (asked, site) = match (&user.policy, &self.defaults.policy) {
            (Some(v), _) => (
                policy_value("--lama-policy", v).map_err(StepError::Option)?,
                false,
            ),
            (None, Some(v)) if user.first_map_option().is_none() => {
                (policy_value("policy", v).map_err(StepError::Setting)?, true)
            }
            _ => (false, false),
        };
        if !asked {
            return Ok(false);
        }
        if let Some(o) = user.first_map_option() {
            return Err(StepError::Option(format!(
                "--lama-policy=auto places the tasks itself and cannot be combined with {o}: give the policy or a map, not both"
            )));
        }
        if user.gpus.is_some() {
            let whose = if site {
                "this cluster places steps with the automatic policy (plugstack.conf policy=auto), which"
            } else {
                "--lama-policy=auto"
            };
            return Err(StepError::Option(format!(
                "--lama-gpus cannot be used here: {whose} shares the step's GPUs out evenly itself; drop --lama-gpus, or give a map (--lama-map) or --lama-policy=none"
            )));
        }
        Ok(true)
    }

    /// How each task's memory is bound (`--lama-mem=MODE`, else the site's `mem=`), `None` to
    /// leave it alone; never bound under `--lama-off`.
    pub fn mem(&self, user: &Options) -> Result<Option<MemMode>, StepError> {
        if user.off {
            return Ok(None);
        }
        match (&user.mem, &self.defaults.mem) {
            (Some(v), _) => mem_value("--lama-mem", v).map_err(StepError::Option),
            (None, Some(v)) => mem_value("mem", v).map_err(StepError::Setting),
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Options {
        let mut o = Options::default();
        for (k, v) in pairs {
            assert!(o.set(k, Some(v)), "{k}");
        }
        o
    }

    fn site(args: &[&str]) -> Settings {
        Settings::parse(args).expect("settings")
    }

    #[test]
    fn the_policy_as_an_option() {
        let none = Settings::default();
        assert_eq!(none.auto(&opts(&[("policy", "auto")])), Ok(true));
        assert_eq!(none.auto(&opts(&[("policy", "none")])), Ok(false));
        assert_eq!(none.auto(&Options::default()), Ok(false));
        let e = none.auto(&opts(&[("policy", "best")])).unwrap_err();
        assert!(
            e.to_string().contains("invalid --lama-policy 'best'"),
            "{e}"
        );
        let e = none
            .auto(&opts(&[("policy", "auto"), ("map", "csbnh")]))
            .unwrap_err();
        assert!(e.to_string().contains("--lama-map"), "{e}");
        let e = none
            .auto(&opts(&[("policy", "auto"), ("gpus", "1")]))
            .unwrap_err();
        assert!(e.to_string().contains("--lama-gpus"), "{e}");
        // The policy places: no map request.
        let auto = opts(&[("policy", "auto")]);
        assert_eq!(none.request(&auto, Some(2)), Ok(None));
    }

    #[test]
    fn the_site_default_and_what_wins() {
        let s = site(&["policy=auto"]);
        assert_eq!(s.auto(&Options::default()), Ok(true));
        assert_eq!(s.auto(&opts(&[("map", "csbnh")])), Ok(false));
        assert!(s
            .request(&opts(&[("map", "csbnh")]), Some(2))
            .is_ok_and(|r| r.is_some()));
        assert_eq!(s.auto(&opts(&[("policy", "none")])), Ok(false));
        let off = Options {
            off: true,
            ..Options::default()
        };
        assert_eq!(s.auto(&off), Ok(false));
        assert!(s.auto(&opts(&[("gpus", "1")])).is_err());
        for bad in [
            &["policy=auto", "map=csbnh"][..],
            &["policy=auto", "gpus=1"],
            &["policy=x"],
            &["mem=far"],
        ] {
            assert!(Settings::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn memory() {
        assert_eq!(
            Settings::default().mem(&opts(&[("mem", "local")])),
            Ok(Some(MemMode::Local))
        );
        assert_eq!(
            site(&["mem=local"]).mem(&Options::default()),
            Ok(Some(MemMode::Local))
        );
        assert_eq!(
            site(&["mem=interleave"]).mem(&opts(&[("mem", "prefer-hbm")])),
            Ok(Some(MemMode::PreferHbm))
        );
        assert_eq!(
            site(&["mem=local"]).mem(&opts(&[("mem", "none")])),
            Ok(None)
        );
        assert!(Settings::default().mem(&opts(&[("mem", "near")])).is_err());
    }

    #[test]
    fn the_environment_keeps_to_one_kind() {
        let env = opts(&[("policy", "auto")]);
        let merged = opts(&[("map", "csbnh")]).over_env(env.clone());
        assert_eq!(merged.policy, None);
        let merged = opts(&[("policy", "auto")]).over_env(opts(&[("map", "csbnh")]));
        assert_eq!(merged.map, None);
        let merged = opts(&[("verbose", "")]).over_env(env);
        assert_eq!(merged.policy.as_deref(), Some("auto"));
    }
}
