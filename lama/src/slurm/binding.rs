//! Slurm's own `--cpu-bind` and `--mem-bind` beside lama's placement: what the step asked of
//! Slurm, as srun exports it (`SLURM_CPU_BIND_TYPE`, `SLURM_MEM_BIND_TYPE`,
//! `SLURM_MEM_BIND_PREFER`; srun writes them from its own options before it launches the step,
//! so they are the step's, not the job's), and which of the two wins.
//!
//! The rule, the same in srun and on every node:
//! - a granularity (`threads`, `cores`, `sockets`, `ldoms`) or `verbose` alone is Slurm's
//!   default binding, which lama's placement replaces;
//! - an explicit binding (`--cpu-bind=none`, `map_cpu`, `mask_cpu`, `rank_ldom`, `map_ldom`,
//!   `mask_ldom`; `--mem-bind=map_mem`, `mask_mem`) is the user's word: it beats a placement
//!   the site made the default (lama then leaves the step to Slurm and says so), and beside a
//!   placement the user asked of lama it is refused, naming both options;
//! - `--mem-bind=local` and `rank` (with or without `prefer`) depend on the CPUs: lama follows
//!   them, binding each task's memory to the NUMA nodes of the CPUs lama gave it.

use crate::memory::MemPolicy;
use crate::spec::Limit;
use crate::Level;

/// What the step does beside Slurm's binding options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Beside {
    /// lama places; the tasks' memory follows their CPUs with this policy when Slurm's
    /// `--mem-bind` asked for a binding that depends on the CPUs.
    Place(Option<MemPolicy>),
    /// The site's default placement yields to the user's own Slurm binding: the note says so.
    LeaveToSlurm(String),
    /// The user asked both lama and Slurm to bind: the message names both options.
    Refuse(String),
}

/// `--cpu-bind` types that choose the CPUs themselves (as `SLURM_CPU_BIND_TYPE` spells them).
const EXPLICIT_CPU: [&str; 7] = [
    "none",
    "map_cpu:",
    "mask_cpu:",
    "rank_ldom",
    "map_ldom:",
    "mask_ldom:",
    "rank",
];

/// The explicit part of a `SLURM_CPU_BIND_TYPE` (`cores,map_cpu:` gives `map_cpu`), if any.
pub fn explicit_cpu_bind(cpu_type: Option<&str>) -> Option<&'static str> {
    let words = cpu_type?.split(',').map(str::trim);
    for w in words {
        if let Some(e) = EXPLICIT_CPU.iter().find(|e| **e == w) {
            return Some(e.trim_end_matches(':'));
        }
    }
    None
}

/// Decides, for a step lama is to place, what Slurm's own binding options change.
/// `cpu_type`, `mem_type` and `mem_prefer` are `SLURM_CPU_BIND_TYPE`, `SLURM_MEM_BIND_TYPE` and
/// `SLURM_MEM_BIND_PREFER`; `asked` names the user's lama placement option (`--lama-map`, ...)
/// when the user gave one, `None` when the placement is the site's default; `lama_mem` says
/// whether `--lama-mem=local` binds the memory too.
pub fn beside(
    cpu_type: Option<&str>,
    mem_type: Option<&str>,
    mem_prefer: Option<&str>,
    asked: Option<&str>,
    lama_mem: bool,
) -> Beside {
    let mem = mem_type
        .map(|t| t.trim().trim_end_matches(':'))
        .filter(|t| !t.is_empty());
    let prefer = mem_prefer.is_some_and(|p| p.trim() == "prefer");
    let explicit = explicit_cpu_bind(cpu_type)
        .map(|c| (format!("--cpu-bind={c}"), "both choose the tasks' CPUs"))
        .or_else(|| {
            mem.filter(|m| matches!(*m, "map_mem" | "mask_mem")).map(|m| {
                let why = "the first fixes the tasks' NUMA nodes for the CPUs Slurm would give them, the second moves the CPUs";
                (format!("--mem-bind={m}"), why)
            })
        });
    if let Some((slurm, why)) = explicit {
        return match asked {
            Some(lama) => Beside::Refuse(format!(
                "{slurm} and {lama} cannot be used together: {why}; drop one of them (--lama-off leaves the step to Slurm)"
            )),
            None => Beside::LeaveToSlurm(super::site_default::stand_aside_note(&slurm)),
        };
    }
    let follow = match mem {
        Some("local" | "rank") if prefer => MemPolicy::Preferred,
        Some("local" | "rank") => MemPolicy::Bind,
        _ => return Beside::Place(None),
    };
    if lama_mem && follow == MemPolicy::Preferred {
        return Beside::Refuse(
            "--mem-bind=prefer and --lama-mem=local ask for different memory policies (preferred, bound): drop one of them".into(),
        );
    }
    // --lama-mem=local binds as --mem-bind=local does: one binding, lama's.
    Beside::Place((!lama_mem).then_some(follow))
}

/// Why a step's tasks do not fit its CPUs, when srun's `-c` is the cause: `-c` implies
/// `--exact` (Slurm 22.05 and later), which gives a step only the CPUs its tasks ask for (`-n`
/// × `-c`), not the job's on the node, so a wider `--lama-bind` runs out of them. `cpus_per_task`
/// is the step's `SLURM_CPUS_PER_TASK`, `tasks` and `step_cpus` the node's.
pub fn exact_note(cpus_per_task: Option<&str>, tasks: usize, step_cpus: usize) -> Option<String> {
    let c: usize = cpus_per_task?.trim().parse().ok()?;
    Some(format!(
        "this step holds {step_cpus} CPU(s) here for {tasks} task(s): srun's -c {c} implies --exact, which gives a step only the CPUs its tasks ask for (-n x -c), not the job's; ask for a -c as wide as the binding, or leave -c out to use the job's CPUs on the node"
    ))
}

/// Whether srun's own options (`options`: its command line before the program) dropped the
/// job's `--threads-per-core`, leaving a stale `SLURM_THREADS_PER_CORE` in the step's
/// environment. srun reads that variable as an option, but a `--hint` on its command line resets
/// `--threads-per-core` (Slurm's `validate_hint_option`), and srun then exports nothing to
/// replace the job's value: `srun --hint=multithread` inside `salloc --hint=nomultithread`
/// would be read as one thread per core. `nomultithread` sets the value again, and a `--hint`
/// beside `--threads-per-core`, `--ntasks-per-core`, `--cores-per-socket`,
/// `--sockets-per-node`, `-B` or a `--cpu-bind` type is ignored by Slurm.
pub fn threads_per_core_dropped<S: AsRef<str>>(options: &[S]) -> bool {
    let mut hint = None;
    let mut words = options.iter().map(AsRef::as_ref).peekable();
    while let Some(w) = words.next() {
        // The option's value, whether `--name=value` or `--name value`.
        let mut value = |name: &str| -> Option<String> {
            if let Some(v) = w.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                return Some(v.to_string());
            }
            (w == name).then(|| words.peek().map(|v| v.to_string()).unwrap_or_default())
        };
        if let Some(v) = value("--hint") {
            hint = Some(v);
        } else if let Some(v) = value("--cpu-bind") {
            if v.split(',').any(|t| !matches!(t, "verbose" | "v" | "")) {
                return false;
            }
        } else if [
            "--threads-per-core",
            "--ntasks-per-core",
            "--cores-per-socket",
            "--sockets-per-node",
            "--extra-node-info",
        ]
        .iter()
        .any(|n| w == *n || w.starts_with(&format!("{n}=")))
            || w.starts_with("-B")
        {
            return false;
        }
    }
    hint.is_some_and(|h| !h.split(',').any(|t| t == "nomultithread"))
}

/// The value a command line (`options`: srun's own, before the program) gives option `name`
/// (`--gpu-bind=closest` or `--gpu-bind closest`; the last one wins). srun takes its options
/// from variables too (`SLURM_GPU_BIND`, which salloc and sbatch export for the whole job), but
/// its own command line beats them: a step's `--gpu-bind=none` inside `salloc --gpu-bind=closest`
/// binds no GPU, while the job's variable still says `closest`.
pub fn own_option<S: AsRef<str>>(options: &[S], name: &str) -> Option<String> {
    let mut found = None;
    let mut words = options.iter().map(AsRef::as_ref);
    while let Some(w) = words.next() {
        if let Some(v) = w.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            found = Some(v.to_string());
        } else if w == name {
            found = words.next().map(str::to_string);
        } else if w == "--" {
            break;
        }
    }
    found
}

/// Slurm's `--ntasks-per-core` and `--ntasks-per-socket` (the step's `SLURM_NTASKS_PER_CORE`
/// and `SLURM_NTASKS_PER_SOCKET`) as MPPR limits on a lama map, `N:c` and `N:s` beside the
/// user's own: Slurm gave the step cores for that many tasks per core or socket, and the limit
/// holds inside the node too (a map that packs hardware threads first would otherwise put two
/// tasks on a core where the user asked for one). `--hint=multithread`'s unlimited value
/// (65535) and anything unreadable are no limit.
pub fn task_limits(per_core: Option<&str>, per_socket: Option<&str>) -> Vec<Limit> {
    [(per_core, Level::Core), (per_socket, Level::Socket)]
        .into_iter()
        .filter_map(|(v, level)| {
            let count = v?.trim().parse::<u32>().ok()?;
            (count > 0 && count < u32::from(u16::MAX)).then_some(Limit { count, level })
        })
        .collect()
}

/// Whether the step runs under srun's `--overcommit` (`-O`): Slurm writes `SLURM_OVERCOMMIT=1`
/// into the step's environment then, and the user has allowed more tasks than CPUs, so the
/// automatic policy may stack them (issue 59: Slurm's own tests run such steps). Empty or `0`
/// is not overcommit.
pub fn overcommit(slurm_overcommit: Option<&str>) -> bool {
    slurm_overcommit.is_some_and(|v| !matches!(v.trim(), "" | "0"))
}

/// Whether the task's `SLURM_CPU_BIND` (as Slurm's task plugin left it) asks for `verbose`.
pub fn cpu_bind_verbose(slurm_cpu_bind: Option<&str>) -> bool {
    slurm_cpu_bind.is_some_and(|v| v.split(',').any(|w| w.trim() == "verbose"))
}

/// lama's binding of one task in the form of Slurm's `--cpu-bind=verbose` line, printed after
/// Slurm's own (which shows the mask lama replaced): `cpu-bind=LAMA - n1, task  1  1 [4242]:
/// mask 0x2 set`. `bound` is false where lama only computes (`topology=FILE`).
pub fn cpu_bind_line(
    host: &str,
    rank: u32,
    local: u32,
    pid: u32,
    cpus: &[u32],
    bound: bool,
) -> String {
    let action = if bound {
        "set"
    } else {
        "computed, not set (topology=FILE)"
    };
    format!(
        "cpu-bind=LAMA - {host}, task {rank:2} {local:2} [{pid}]: mask {} {action}",
        crate::idset::hex_mask(cpus)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overcommit_is_slurms_variable_set() {
        assert!(overcommit(Some("1")));
        assert!(overcommit(Some(" yes ")));
        assert!(!overcommit(Some("0")));
        assert!(!overcommit(Some("")));
        assert!(!overcommit(None));
    }

    #[test]
    fn the_exact_note_only_with_cpus_per_task() {
        assert_eq!(exact_note(None, 8, 4), None);
        assert_eq!(exact_note(Some("x"), 8, 4), None);
        let n = exact_note(Some("1"), 8, 4).expect("note");
        assert!(n.starts_with(
            "this step holds 4 CPU(s) here for 8 task(s): srun's -c 1 implies --exact"
        ));
    }

    #[test]
    fn a_hint_on_sruns_command_line_drops_the_jobs_threads_per_core() {
        let dropped = |a: &[&str]| threads_per_core_dropped(a);
        assert!(dropped(&["-n2", "--hint=multithread", "-c4"]));
        assert!(dropped(&["--hint", "compute_bound"]));
        assert!(dropped(&["--hint=multithread", "--cpu-bind=verbose"]));
        assert!(!dropped(&["--hint=nomultithread"]));
        assert!(!dropped(&["-n2", "-c4"]));
        // Slurm ignores --hint beside these, and keeps the job's value.
        assert!(!dropped(&["--hint=multithread", "--threads-per-core=2"]));
        assert!(!dropped(&["--hint=multithread", "--threads-per-core", "2"]));
        assert!(!dropped(&["--hint=multithread", "-B", "2:4:1"]));
        assert!(!dropped(&["--hint=multithread", "--cpu-bind=cores"]));
        assert!(!dropped(&["--hint=multithread", "--ntasks-per-core=1"]));
    }

    #[test]
    fn srun_options_from_its_own_command_line() {
        let o = [
            "-n2",
            "--gpu-bind=none",
            "--tres-bind",
            "gres/gpu:closest",
            "--gpu-bind=map_gpu:1",
        ];
        assert_eq!(own_option(&o, "--gpu-bind").as_deref(), Some("map_gpu:1"));
        assert_eq!(
            own_option(&o, "--tres-bind").as_deref(),
            Some("gres/gpu:closest")
        );
        assert_eq!(own_option(&o, "--gpus-per-task"), None);
        assert_eq!(own_option(&["--", "--gpu-bind=none"], "--gpu-bind"), None);
    }

    #[test]
    fn slurms_tasks_per_core_and_socket_are_limits() {
        let l = task_limits(Some("1"), Some("2"));
        assert_eq!(
            l.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["1:c", "2:s"]
        );
        assert!(task_limits(Some("65535"), None).is_empty());
        assert!(task_limits(Some("0"), Some("x")).is_empty());
        assert!(task_limits(None, None).is_empty());
    }

    #[test]
    fn the_verbose_line_reads_as_slurms() {
        assert!(cpu_bind_verbose(Some("verbose,cores")));
        assert!(cpu_bind_verbose(Some("verbose,mask_cpu:0x1,0x2")));
        assert!(!cpu_bind_verbose(Some("quiet,cores")));
        assert!(!cpu_bind_verbose(None));
        // Slurm: "cpu-bind=MASK - %s, task %2u %2u [%u]: mask 0x%s set".
        assert_eq!(
            cpu_bind_line("n1", 1, 0, 4242, &[4, 5], true),
            "cpu-bind=LAMA - n1, task  1  0 [4242]: mask 0x30 set"
        );
        assert_eq!(
            cpu_bind_line("n1", 12, 3, 7, &[0], false),
            "cpu-bind=LAMA - n1, task 12  3 [7]: mask 0x1 computed, not set (topology=FILE)"
        );
    }

    #[test]
    fn granularity_and_verbose_are_replaced() {
        for t in ["cores", "threads", "sockets", "ldoms", "", "cores,"] {
            assert_eq!(
                beside(Some(t), None, None, Some("--lama-map"), false),
                Beside::Place(None),
                "{t}"
            );
        }
        assert_eq!(
            beside(None, Some("none"), None, None, false),
            Beside::Place(None)
        );
    }

    #[test]
    fn explicit_bindings_beat_the_site_and_are_refused_beside_the_user() {
        for (t, name) in [
            ("none", "none"),
            ("map_cpu:", "map_cpu"),
            ("cores,mask_cpu:", "mask_cpu"),
            ("rank_ldom", "rank_ldom"),
            ("sockets,map_ldom:", "map_ldom"),
            ("mask_ldom:", "mask_ldom"),
        ] {
            let Beside::LeaveToSlurm(n) = beside(Some(t), None, None, None, false) else {
                panic!("{t}: not left to Slurm");
            };
            assert!(n.starts_with(&format!("--cpu-bind={name}:")), "{n}");
            let Beside::Refuse(m) = beside(Some(t), None, None, Some("--lama-bind"), false) else {
                panic!("{t}: not refused");
            };
            assert!(
                m.contains(&format!("--cpu-bind={name} and --lama-bind")),
                "{m}"
            );
        }
        for m in ["map_mem:", "mask_mem:"] {
            let Beside::Refuse(msg) = beside(None, Some(m), None, Some("--lama-policy"), false)
            else {
                panic!("{m}");
            };
            assert!(msg.starts_with(&format!(
                "--mem-bind={} and --lama-policy",
                &m[..m.len() - 1]
            )));
        }
    }

    #[test]
    fn memory_that_depends_on_the_cpus_follows_lamas() {
        let b = |t, p, m| beside(Some("cores"), Some(t), p, Some("--lama-map"), m);
        assert_eq!(
            b("local", None, false),
            Beside::Place(Some(MemPolicy::Bind))
        );
        assert_eq!(b("rank", None, false), Beside::Place(Some(MemPolicy::Bind)));
        assert_eq!(
            b("local", Some("prefer"), false),
            Beside::Place(Some(MemPolicy::Preferred))
        );
        assert_eq!(b("local", None, true), Beside::Place(None));
        assert!(matches!(
            b("local", Some("prefer"), true),
            Beside::Refuse(_)
        ));
        // prefer without a type binds nothing in Slurm.
        assert_eq!(b("", Some("prefer"), false), Beside::Place(None));
    }
}
