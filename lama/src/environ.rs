//! The room in a task's environment: what one variable may hold, what `execve` accepts in all,
//! and which of the variables lama would export fit.
//!
//! Two limits apply when slurmstepd starts a task:
//! - one `NAME=VALUE` string: slurmstepd's `setenvf` refuses one of 32 × 4096 bytes or more with
//!   its NUL (`error: environment variable NAME is too long`, printed once per task, and the task
//!   starts without it); Linux's `MAX_ARG_STRLEN` is one byte more;
//! - all of the program's arguments and environment, strings and pointers: a quarter of the
//!   task's stack limit, at most 6 MiB and at least 128 KiB (Linux's `execve`); over it the
//!   program does not start at all (`E2BIG`).
//!
//! lama never exports what would break either: a variable that would not fit is withheld with its
//! group (the OpenMP variables go together, so do the CPU and the device ones), and a
//! [`Withheld`] says why, for a message shown once.

use std::fmt;

/// The longest `NAME=VALUE` string, with its terminating NUL, that slurmstepd sets in a task's
/// environment: 131,071 bytes.
pub const MAX_VARIABLE_BYTES: usize = 32 * 4096 - 1;

/// The most blocks an RFC 34 map in `TASK_MAP` can have: each takes at least ten bytes
/// (`[0,1,1,1],`), and the variable holds [`MAX_VARIABLE_BYTES`] with its name, its NUL and the
/// JSON wrapper (`TASK_MAP={"version":1,"map":[...]}`, 31 bytes with the last block's missing
/// comma). A map of more is not exported, and need not be computed to the end.
pub const MAX_TASK_MAP_BLOCKS: usize = (MAX_VARIABLE_BYTES - 31) / 10;

/// Linux's floor for a program's arguments and environment, whatever the stack limit (32 pages).
pub const MIN_EXEC_BYTES: usize = 32 * 4096;

/// Linux's ceiling: three quarters of its 8 MiB default stack.
pub const MAX_EXEC_BYTES: usize = 6 << 20;

/// What slurmstepd may still add to a task's arguments and environment after the plugin's
/// `task_init` (`TMPDIR`, the program's path resolved through `PATH`), kept free.
pub const AFTER_TASK_INIT_BYTES: usize = 8192;

/// Room kept, in a step's arguments and environment as `user_init` sees them, for what
/// slurmstepd adds to each task before `task_init` (its `SLURM_*` task variables, the GPU
/// plugin's, `SLURM_CPU_BIND_LIST`). A step that leaves less has every task measure its own.
pub const TASK_SETUP_BYTES: usize = 256 << 10;

/// Bytes `execve` counts for a pointer in the argument and environment arrays.
const POINTER_BYTES: usize = std::mem::size_of::<usize>();

/// Whether `NAME=VALUE` fits in one environment string.
pub fn variable_fits(name: &str, value: &str) -> bool {
    variable_bytes(name, value) <= MAX_VARIABLE_BYTES
}

/// `NAME=VALUE` with its NUL, as a task's environment holds it.
pub fn variable_bytes(name: &str, value: &str) -> usize {
    name.len() + value.len() + 2
}

/// What `execve` allows for a program's arguments and environment under a stack limit of
/// `stack` bytes (`None`: unlimited).
pub fn exec_limit(stack: Option<u64>) -> usize {
    let quarter = stack.map_or(usize::MAX, |s| usize::try_from(s / 4).unwrap_or(usize::MAX));
    quarter.clamp(MIN_EXEC_BYTES, MAX_EXEC_BYTES)
}

/// The stack limit a task will exec under: the smaller of this process's (`own`, `None` for
/// unlimited) and the one srun propagates in `SLURM_RLIMIT_STACK` (a number, with a `U` in
/// front when the user asked for it), which slurmstepd applies after `task_init`.
pub fn stack_limit(own: Option<u64>, propagated: Option<&str>) -> Option<u64> {
    let theirs = propagated
        .map(|v| v.trim().trim_start_matches('U'))
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&v| v != u64::MAX);
    match (own, theirs) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// This process's stack limit (`None`: unlimited; Linux's 8 MiB default when it cannot be read),
/// which the tasks it starts inherit.
pub fn own_stack_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into a live local.
    if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut lim) } == 0 {
        (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
    } else {
        Some(8 << 20)
    }
}

/// Whether each task must measure its own environment before lama exports `ours` (the most
/// any task gets, in bytes as `execve` counts them: see [`export_bytes`]) into a step whose
/// arguments and environment are `step` in `user_init`, under an allowance of `limit`.
pub fn tasks_must_check(step: ExecSize, ours: usize, limit: usize) -> bool {
    step.total() + ours + TASK_SETUP_BYTES + AFTER_TASK_INIT_BYTES > limit
}

/// What exporting `vars` adds, in bytes as `execve` counts them (a string and a pointer each).
pub fn export_bytes<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> usize {
    vars.into_iter()
        .map(|(n, v)| variable_bytes(n, v) + POINTER_BYTES)
        .sum()
}

/// A program's arguments and environment as `execve` counts them: each string with its NUL, and
/// a pointer per string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecSize {
    /// Bytes of the strings, NULs included.
    pub bytes: usize,
    /// How many strings.
    pub strings: usize,
}

impl ExecSize {
    /// The size of these strings (each without its NUL).
    pub fn of<'a>(strings: impl IntoIterator<Item = &'a [u8]>) -> ExecSize {
        let mut size = ExecSize::default();
        for s in strings {
            size.bytes += s.len() + 1;
            size.strings += 1;
        }
        size
    }

    /// This and `other` together.
    pub fn plus(self, other: ExecSize) -> ExecSize {
        ExecSize {
            bytes: self.bytes + other.bytes,
            strings: self.strings + other.strings,
        }
    }

    /// What `execve` counts against [`exec_limit`].
    pub fn total(&self) -> usize {
        self.bytes + self.strings * POINTER_BYTES
    }
}

/// Variables lama would export that must go together (the OpenMP ones, or a device's
/// variables): exporting some of them without the rest would mislead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// What the group is, for messages (`TASK_MAP`, `the OpenMP variables`).
    pub what: &'static str,
    /// What the task can do without it, for messages.
    pub instead: &'static str,
    /// The variables.
    pub vars: Vec<(String, String)>,
}

impl Group {
    /// The group of `TASK_MAP` alone.
    pub fn task_map(map: String) -> Group {
        Group {
            what: "TASK_MAP",
            instead: "inside a task, `lama taskmap --from-slurm` prints the step's map",
            vars: vec![("TASK_MAP".into(), map)],
        }
    }

    /// The same group with another hint for the task (the Flux plugin's, for `TASK_MAP`).
    pub fn with_hint(self, instead: &'static str) -> Group {
        Group { instead, ..self }
    }

    /// Why this group cannot be exported at all: one of its variables is too long for one
    /// environment string. `None` when each fits.
    pub fn too_long(&self) -> Option<Withheld> {
        let (name, value) = self.vars.iter().find(|(n, v)| !variable_fits(n, v))?;
        Some(Withheld::TooLong {
            what: self.what,
            instead: self.instead,
            name: name.clone(),
            bytes: variable_bytes(name, value),
        })
    }

    /// The task's CPUs: `LAMA_CPUS` and lama's `SLURM_CPU_BIND*` (the binding itself is made
    /// whether or not they are exported).
    pub fn cpus(vars: Vec<(String, String)>) -> Group {
        Group {
            what: "LAMA_CPUS",
            instead: "the task is bound all the same: /proc/self/status shows its CPUs (Cpus_allowed_list)",
            vars,
        }
    }

    /// The OpenMP variables of `--lama-threads`.
    pub fn openmp(vars: Vec<(String, String)>) -> Group {
        Group {
            what: "the OpenMP variables",
            instead: "OpenMP threads then follow the runtime's defaults inside the task's binding",
            vars,
        }
    }

    /// The device variables of `--lama-gpus` and `--lama-nics`.
    pub fn devices(vars: Vec<(String, String)>) -> Group {
        Group {
            what: "the device variables",
            instead: "the task sees the GPUs and NICs Slurm gave it",
            vars,
        }
    }
}

/// Why a group of variables was not exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Withheld {
    /// One of its variables is longer than one environment string may be.
    TooLong {
        /// The group.
        what: &'static str,
        /// Its hint.
        instead: &'static str,
        /// The variable.
        name: String,
        /// Its `NAME=VALUE` bytes with the NUL.
        bytes: usize,
    },
    /// `TASK_MAP` would have more than [`MAX_TASK_MAP_BLOCKS`] blocks; it was not computed to
    /// the end.
    MapTooLong {
        /// The blocks when computing stopped.
        blocks: usize,
    },
    /// The task's arguments and environment would pass what `execve` allows.
    NoRoom {
        /// The group.
        what: &'static str,
        /// Its hint.
        instead: &'static str,
        /// The arguments and environment with the group, in bytes as `execve` counts them.
        need: usize,
        /// What `execve` allows.
        limit: usize,
    },
}

impl fmt::Display for Withheld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Withheld::TooLong {
                what,
                instead,
                name,
                bytes,
            } => write!(
                f,
                "{what} not exported: {name} would take {bytes} bytes, more than the {MAX_VARIABLE_BYTES} one environment variable may hold (Slurm's and Linux's limit); {instead}"
            ),
            Withheld::MapTooLong { blocks } => write!(
                f,
                "TASK_MAP not exported: the step's map has more than {blocks} blocks, more than the {MAX_VARIABLE_BYTES} bytes one environment variable may hold (Slurm's and Linux's limit); inside a task, `lama taskmap --from-slurm` prints the step's map"
            ),
            Withheld::NoRoom {
                what,
                instead,
                need,
                limit,
            } => write!(
                f,
                "{what} not exported: with it the task's arguments and environment would take {need} bytes, more than the {limit} execve allows here (a quarter of the stack limit, at most {MAX_EXEC_BYTES}); {instead}"
            ),
        }
    }
}

/// Which `groups` to export into a task whose arguments and environment are `now` (without them),
/// under an `execve` allowance of `limit` (from [`exec_limit`]), keeping
/// [`AFTER_TASK_INIT_BYTES`] free. `existing(name)` is the `NAME=VALUE` size of a variable the
/// task already has (an export replaces it).
///
/// A group with a variable too long for one string is withheld; then, while the whole would not
/// fit, the largest group left is withheld (in practice `TASK_MAP`). Returns the variables to
/// export, in the groups' order, and what was withheld.
pub fn fit(
    groups: Vec<Group>,
    now: ExecSize,
    existing: impl Fn(&str) -> Option<usize>,
    limit: usize,
) -> (Vec<(String, String)>, Vec<Withheld>) {
    let mut withheld = Vec::new();
    let mut kept: Vec<(Group, isize, isize)> = Vec::new();
    for g in groups {
        if let Some(w) = g.too_long() {
            withheld.push(w);
            continue;
        }
        // What the group adds: its strings, less those it replaces.
        let (mut bytes, mut strings) = (0isize, 0isize);
        for (n, v) in &g.vars {
            match existing(n) {
                Some(old) => bytes += variable_bytes(n, v) as isize - old as isize,
                None => {
                    bytes += variable_bytes(n, v) as isize;
                    strings += 1;
                }
            }
        }
        kept.push((g, bytes, strings));
    }
    let need = |kept: &[(Group, isize, isize)]| {
        let (b, s) = kept
            .iter()
            .fold((0isize, 0isize), |(b, s), k| (b + k.1, s + k.2));
        let total = now.total() as isize + b + s * POINTER_BYTES as isize;
        total.max(0) as usize
    };
    let room = limit.saturating_sub(AFTER_TASK_INIT_BYTES);
    while need(&kept) > room {
        let largest = kept
            .iter()
            .enumerate()
            .max_by_key(|(_, k)| k.1 + k.2 * POINTER_BYTES as isize)
            .map(|(i, _)| i);
        let Some(i) = largest.filter(|&i| kept[i].1 > 0) else {
            break;
        };
        let total = need(&kept);
        let (g, _, _) = kept.remove(i);
        withheld.push(Withheld::NoRoom {
            what: g.what,
            instead: g.instead,
            need: total + AFTER_TASK_INIT_BYTES,
            limit,
        });
    }
    let vars = kept.into_iter().flat_map(|(g, _, _)| g.vars).collect();
    (vars, withheld)
}
