//! A placement the site made the default (`policy=auto`, or `apply=always` with a map, in
//! `plugstack.conf`) beside what the user asked Slurm's own binding for.
//!
//! Sites roll a default out over thousands of existing job scripts, many of which already ask
//! Slurm to bind: the rule is that what a user asked Slurm for stands, unless the same user also
//! asked lama for something (any `--lama-*` option or `SLURM_LAMA_*` variable). Then the step is
//! Slurm's: lama neither places nor binds it, still exports `TASK_MAP`, and srun says so once.
//! What counts as asking Slurm to bind, on srun's command line (before the program) or in the
//! variables srun reads as those options:
//!
//! - `--cpu-bind` with any type (`threads`, `cores`, `sockets`, `ldoms`, `rank_ldom`, maps and
//!   masks, `none`), or `SLURM_CPU_BIND` set for srun; `verbose` and `quiet` alone ask nothing;
//! - `-m`/`--distribution` with a socket or core part (`block:cyclic`, `*:*:fcyclic`): those parts
//!   order only Slurm's own binding;
//! - `--hint=compute_bound` or `memory_bound` (or `SLURM_HINT`).
//!
//! A binding type that reaches the step from the site (a partition's `CpuBind=`,
//! `TaskPluginParam`) is not the user's and does not count: srun merges those into the step's
//! variables after reading its options, so only its own options and input variables are read.

/// The words of a `--cpu-bind` value that ask Slurm to bind (all but `verbose`/`quiet`).
fn binds(cpu_bind: &str) -> bool {
    cpu_bind
        .split(',')
        .map(str::trim)
        .any(|w| !matches!(w, "" | "v" | "verbose" | "q" | "quiet"))
}

/// Whether a `-m` value orders sockets or cores (has a non-empty part after the first `:`).
fn orders_cpus(dist: &str) -> bool {
    dist.split(':').skip(1).any(|p| !p.trim().is_empty())
}

/// Whether a `--hint` value changes Slurm's binding.
fn hints_binding(hint: &str) -> bool {
    hint.split(',')
        .any(|h| matches!(h.trim(), "compute_bound" | "memory_bound"))
}

/// The last value srun's `options` give any of `long` (`--x=v`, `--x v`) or the short `-m`
/// (`-mv`, `-m v`).
fn last_value<S: AsRef<str>>(options: &[S], long: &[&str], short: Option<&str>) -> Option<String> {
    let mut found = None;
    let mut words = options.iter().map(AsRef::as_ref);
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        for name in long {
            if let Some(v) = w.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                found = Some(v.to_string());
            } else if w == *name {
                found = words.next().map(str::to_string);
            }
        }
        if let Some(s) = short {
            if w == s {
                found = words.next().map(str::to_string);
            } else if let Some(v) = w.strip_prefix(s).filter(|v| !v.is_empty()) {
                found = Some(v.to_string());
            }
        }
    }
    found
}

/// What the user asked Slurm's own binding for, named as given (`--cpu-bind=cores`,
/// `SLURM_CPU_BIND=cores`, `-m block:cyclic`, `--hint=compute_bound`), from srun's own
/// `options` (its command line before the program) and `get` (srun's environment as it
/// started, before it writes the step's variables); `None` when nothing was asked.
pub fn slurm_binding_asked<S: AsRef<str>>(
    options: &[S],
    get: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let env = |k: &str| get(k).filter(|v| !v.trim().is_empty());
    let cpu_bind = last_value(options, &["--cpu-bind", "--cpu_bind"], None)
        .map(|v| (format!("--cpu-bind={v}"), v))
        .or_else(|| env("SLURM_CPU_BIND").map(|v| (format!("SLURM_CPU_BIND={v}"), v)));
    if let Some((named, _)) = cpu_bind.filter(|(_, v)| binds(v)) {
        return Some(named);
    }
    if let Some(d) = last_value(options, &["--distribution"], Some("-m")).filter(|d| orders_cpus(d))
    {
        return Some(format!("-m {d}"));
    }
    let hint = last_value(options, &["--hint"], None)
        .map(|v| (format!("--hint={v}"), v))
        .or_else(|| env("SLURM_HINT").map(|v| (format!("SLURM_HINT={v}"), v)));
    hint.filter(|(_, v)| hints_binding(v))
        .map(|(named, _)| named)
}

/// What srun says, once, when the site's default placement stands aside for `asked`.
pub fn stand_aside_note(asked: &str) -> String {
    format!(
        "{asked}: this step is left to Slurm's binding (the site's default placement by lama does not apply; --lama-map or --lama-policy=auto would ask for it, without {asked})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(options: &[&str], env: &[(&str, &str)]) -> Option<String> {
        slurm_binding_asked(options, |k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn each_way_of_asking_slurm_is_named_as_given() {
        assert_eq!(
            asked(&["--cpu-bind=cores"], &[]).as_deref(),
            Some("--cpu-bind=cores")
        );
        assert_eq!(
            asked(&["--cpu_bind", "ldoms"], &[]).as_deref(),
            Some("--cpu-bind=ldoms")
        );
        assert_eq!(
            asked(&[], &[("SLURM_CPU_BIND", "threads")]).as_deref(),
            Some("SLURM_CPU_BIND=threads")
        );
        assert_eq!(
            asked(&["-m", "block:cyclic"], &[]).as_deref(),
            Some("-m block:cyclic")
        );
        assert_eq!(
            asked(&["-mcyclic:block:fcyclic"], &[]).as_deref(),
            Some("-m cyclic:block:fcyclic")
        );
        assert_eq!(
            asked(&["--distribution=*:*:fcyclic"], &[]).as_deref(),
            Some("-m *:*:fcyclic")
        );
        assert_eq!(
            asked(&["--hint=memory_bound"], &[]).as_deref(),
            Some("--hint=memory_bound")
        );
        assert_eq!(
            asked(&[], &[("SLURM_HINT", "compute_bound")]).as_deref(),
            Some("SLURM_HINT=compute_bound")
        );
    }

    #[test]
    fn what_asks_nothing_of_slurms_binding() {
        for o in [
            &["--cpu-bind=verbose"][..],
            &["-m", "cyclic"],
            &["-m", "plane=2"],
            &["--hint=nomultithread"],
            &["-N2", "-n4"],
            &["--", "--cpu-bind=cores"],
        ] {
            assert_eq!(asked(o, &[]), None, "{o:?}");
        }
        // srun's own option beats the variable.
        assert_eq!(
            asked(&["--cpu-bind=verbose"], &[("SLURM_CPU_BIND", "cores")]),
            None
        );
    }
}
