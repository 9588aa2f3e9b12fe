//! OpenMP threads inside a task: how many, and one place per thread drawn from the task's own
//! binding, exported as `OMP_NUM_THREADS`, `OMP_PLACES` and `OMP_PROC_BIND`.
//!
//! A place is a core (the task's hardware threads of that core) while there are at least as many
//! cores as threads, else a single hardware thread. There are exactly as many places as threads,
//! so the runtime puts thread `i` on place `i` under either binding policy; the policy decides
//! which of the binding's cores or hardware threads become places:
//!
//! - `spread`: evenly over the binding (cores `0, C/N, 2C/N, ...` in hwloc's order, so NUMA
//!   domains and caches inside the binding get equal shares); with hardware-thread places, the
//!   first thread of every core before any second thread.
//! - `close`: the first cores, or the hardware threads core by core.
//!
//! More threads than hardware threads in the binding is an error: threads are never stacked.

use thiserror::Error;

use crate::level::Level;
use crate::topology::NodeTopology;

/// Most threads a task may ask for.
pub const MAX_THREADS: u32 = 4096;

/// How many threads each task runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// One per core of the task's binding.
    Auto,
    /// This many.
    Count(u32),
}

/// Which of the binding's cores or hardware threads the places are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProcBind {
    /// Evenly over the binding (the default).
    #[default]
    Spread,
    /// Packed from the start of the binding.
    Close,
}

/// A thread request that cannot be met, in words for the user.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ThreadError {
    /// A malformed value.
    #[error("invalid {option} '{}': {reason}; valid: {valid}", crate::quote::cut(.value))]
    Invalid {
        /// The option as the user wrote it (`--lama-threads`, `threads`).
        option: String,
        /// The value given.
        value: String,
        /// What is wrong.
        reason: String,
        /// What would be valid.
        valid: &'static str,
    },
    /// More threads than the binding has hardware threads.
    #[error("{threads} OpenMP threads per task asked for, but task {rank}'s binding (cpus {cpus}) has {pus} hardware thread(s): bind it wider (--lama-bind) or ask for fewer threads")]
    TooMany {
        /// Threads asked for.
        threads: u32,
        /// The task.
        rank: u32,
        /// Its binding, as a cpulist.
        cpus: String,
        /// Hardware threads in it.
        pus: usize,
    },
}

const THREADS_VALID: &str = "auto (one per core of the task's binding) or 1 to 4096";
const BIND_VALID: &str = "spread or close";

impl Threads {
    /// Parses `auto` or a count; `option` names the option in errors.
    pub fn parse(option: &str, value: &str) -> Result<Threads, ThreadError> {
        let v = value.trim();
        if v.eq_ignore_ascii_case("auto") {
            return Ok(Threads::Auto);
        }
        let bad = |reason: &str| ThreadError::Invalid {
            option: option.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            valid: THREADS_VALID,
        };
        match v.parse::<u32>() {
            Ok(0) => Err(bad("at least one thread")),
            Ok(n) if n <= MAX_THREADS => Ok(Threads::Count(n)),
            Ok(_) => Err(bad("too many threads")),
            Err(_) => Err(bad("not a number of threads")),
        }
    }
}

impl ProcBind {
    /// Parses `spread` or `close`; `option` names the option in errors.
    pub fn parse(option: &str, value: &str) -> Result<ProcBind, ThreadError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "spread" => Ok(ProcBind::Spread),
            "close" => Ok(ProcBind::Close),
            _ => Err(ThreadError::Invalid {
                option: option.to_string(),
                value: value.to_string(),
                reason: "unknown binding policy".into(),
                valid: BIND_VALID,
            }),
        }
    }

    /// The `OMP_PROC_BIND` word.
    pub fn name(self) -> &'static str {
        match self {
            ProcBind::Spread => "spread",
            ProcBind::Close => "close",
        }
    }
}

/// One task's OpenMP threads: place `i` is thread `i`'s (with more threads than places, the
/// runtime shares the places out among them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPlan {
    /// Each place's CPUs (OS indexes, ascending).
    pub places: Vec<Vec<u32>>,
    /// The policy the places were chosen by.
    pub bind: ProcBind,
    /// More threads than places, when the automatic policy could not give the task a hardware
    /// thread for each ([`ThreadPlan::crowded`]).
    pub extra: usize,
}

impl ThreadPlan {
    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.places.len() + self.extra
    }

    /// The plan of [`plan_threads`] for `threads` threads on a binding with fewer hardware
    /// threads: every hardware thread a place, the threads shared out over them by the
    /// runtime. The automatic policy's answer when a node cannot hold every task's workers.
    pub fn crowded(
        node: &NodeTopology,
        rank: u32,
        binding: &[u32],
        threads: usize,
        bind: ProcBind,
    ) -> Result<ThreadPlan, ThreadError> {
        let pus = binding_cores(node, binding)
            .iter()
            .map(Vec::len)
            .sum::<usize>();
        let mut plan = plan_threads(node, rank, binding, Threads::Count(pus as u32), bind)?;
        plan.extra = threads.saturating_sub(plan.places.len());
        Ok(plan)
    }

    /// `OMP_PLACES` as an explicit list: `{0,16},{1,17}`.
    pub fn omp_places(&self) -> String {
        self.places
            .iter()
            .map(|p| {
                let cpus: Vec<String> = p.iter().map(u32::to_string).collect();
                format!("{{{}}}", cpus.join(","))
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The task's variables: `OMP_NUM_THREADS`, `OMP_PLACES`, `OMP_PROC_BIND`.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("OMP_NUM_THREADS".into(), self.threads().to_string()),
            ("OMP_PLACES".into(), self.omp_places()),
            ("OMP_PROC_BIND".into(), self.bind.name().into()),
        ]
    }
}

/// The cores of `node` that hold CPUs of `binding` (sorted OS indexes), each as its CPUs in the
/// binding, in hwloc's logical order. A machine without cores counts each PU as one.
fn binding_cores(node: &NodeTopology, binding: &[u32]) -> Vec<Vec<u32>> {
    let pus = node.pus();
    let spans: Vec<(usize, usize)> = if node.has(Level::Core) {
        node.objects(Level::Core)
            .iter()
            .map(|s| (s.start as usize, s.end as usize))
            .collect()
    } else {
        (0..pus.len()).map(|i| (i, i + 1)).collect()
    };
    spans
        .into_iter()
        .filter_map(|(a, b)| {
            let mut cpus: Vec<u32> = pus
                .get(a..b)
                .unwrap_or_default()
                .iter()
                .copied()
                .filter(|c| binding.binary_search(c).is_ok())
                .collect();
            cpus.sort_unstable();
            (!cpus.is_empty()).then_some(cpus)
        })
        .collect()
}

/// `n` of `0..of` spread evenly: `0, of/n, 2·of/n, ...` (`n <= of`).
fn spread(n: usize, of: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| i * of / n)
}

/// The places of task `rank`, bound to `binding` (OS indexes, ascending) on `node`.
pub fn plan_threads(
    node: &NodeTopology,
    rank: u32,
    binding: &[u32],
    threads: Threads,
    bind: ProcBind,
) -> Result<ThreadPlan, ThreadError> {
    let cores = binding_cores(node, binding);
    let npus: usize = cores.iter().map(Vec::len).sum();
    let n = match threads {
        Threads::Auto => cores.len(),
        Threads::Count(n) => n as usize,
    };
    if n == 0 || n > npus {
        return Err(ThreadError::TooMany {
            threads: n as u32,
            rank,
            cpus: crate::idset::format_list(binding),
            pus: npus,
        });
    }
    let places = if n <= cores.len() {
        match bind {
            ProcBind::Spread => spread(n, cores.len()).map(|i| cores[i].clone()).collect(),
            ProcBind::Close => cores[..n].to_vec(),
        }
    } else {
        // Hardware-thread places: `close` goes core by core, `spread` takes the k-th thread of
        // every core before any (k+1)-th.
        let order: Vec<u32> = match bind {
            ProcBind::Close => cores.iter().flatten().copied().collect(),
            ProcBind::Spread => {
                let deepest = cores.iter().map(Vec::len).max().unwrap_or(0);
                (0..deepest)
                    .flat_map(|k| cores.iter().filter_map(move |c| c.get(k).copied()))
                    .collect()
            }
        };
        order.into_iter().take(n).map(|c| vec![c]).collect()
    };
    Ok(ThreadPlan {
        places,
        bind,
        extra: 0,
    })
}
