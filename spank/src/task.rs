//! Each task, just before it runs the user's program (`task_init`): bind it, choose its devices,
//! and export what fits of `TASK_MAP`, `LAMA_CPUS`, the device and the OpenMP variables.
//!
//! The usual step, `TASK_MAP` only, does not come here: `slurm_spank_task_init` (exports.rs)
//! hands Slurm the map `user_init` offered. Slurm's items are read only where something needs
//! them. (`TASK_MAP` is written in each task, not once into the step's environment in
//! `user_init`: Slurm's setenv allocates a 256 KiB buffer, and the first one in the
//! multithreaded slurmstepd costs an mmap and munmap, about 80 us more in `user_init` here,
//! against about 25 us in each task's own process, in parallel.)
//!
//! What goes wrong is said once per node, by the first task to see it (`crate::once`), and a
//! task that must not run ends quietly, so a step of thousands of tasks prints a line per node,
//! not three per task.

use lama::environ::{fit, ExecSize, Group};
use lama::idset::format_list;
use lama::plugin::{placed_in, verbose_extras, verbose_mems};
use lama::slurm::gpu_bind::{binds_gpus_by_mask, domain_of, follow_domains, mask_list};
use lama::slurm::gpu_by_id::by_id;
use lama::slurm::{check_task, cpu_bind_env, cpu_bind_line, cpu_bind_verbose};
use slurm_spank::{LogLevel, SpankHandle};

use crate::once::{stop_task, Once};
use crate::room;
use crate::{affinity, Result, Step};

/// A note or warning for the step: on the task's stderr when the user asked lama for anything
/// (an option, `SLURM_LAMA_*`), else in Slurm's log only. A step that asked nothing of lama (the
/// site's `TASK_MAP`, or its `policy=auto`) keeps its output as Slurm alone gives it: SchedMD's
/// own tests read labelled task output line by line (test1.59), and so do users' scripts.
macro_rules! tell {
    ($st:expr, $($arg:tt)*) => {
        if $st.asked {
            say!($($arg)*);
        } else {
            crate::log(LogLevel::Info, &format!($($arg)*));
        }
    };
}

/// Runs in each task that does more than export `TASK_MAP`.
pub fn init(st: &Step, spank: &SpankHandle) -> Result {
    // The node's first task speaks for it where no shared page says who was first.
    let first_task = || spank.task_id().map(|id| id == 0).unwrap_or(false);
    let claim = |what: Once| match &st.once {
        Some(o) => o.claim(what, first_task),
        None => first_task(),
    };
    if let Some(f) = &st.failure {
        if claim(Once::Failure) {
            say!(
                "lama: error: {f} (node {} {}: no task of this step was started there)",
                st.nodeid,
                st.host
            );
        }
        stop_task();
    }
    if let Some(w) = &st.warning {
        if first_task() {
            tell!(st, "lama: warning: {w}");
        }
    }
    let mut groups = Vec::new();
    if st.manage_taskmap {
        // slurmstepd has written this task's SLURM_PROCID and SLURM_NODEID by now.
        let checked = match &st.per_task_map {
            Some(map) => {
                let var = |k: &str| crate::room::var(k).unwrap_or_default();
                check_task(map, &var("SLURM_PROCID"), &var("SLURM_NODEID"))
            }
            None => Ok(()),
        };
        match (&st.taskmap, checked) {
            (Some(m), Ok(())) => groups.push(Group::task_map(m.clone())),
            (Some(_), Err(e)) => {
                if claim(Once::Mismatch) {
                    tell!(
                        st,
                        "lama: warning: TASK_MAP not exported: {e} (node {} {}; said once per node)",
                        st.nodeid,
                        st.host
                    );
                }
            }
            (None, _) => {}
        }
    }
    let placed = if st.placing {
        Some(place(st, spank, &claim, &mut groups)?)
    } else {
        None
    };
    // Measured only where user_init found the step near the limit (or lama places).
    let measured = if st.check_room {
        let wanted: Vec<(&str, &str)> = groups
            .iter()
            .flat_map(|g| g.vars.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .collect();
        room::measure(&wanted)
    } else {
        None
    };
    let (now, held) = measured.unzip();
    let held = held.unwrap_or_default();
    let (vars, withheld) = match now {
        Some(now) => {
            let existing = |n: &str| held.iter().find(|h| h.name == n).map(|h| h.bytes);
            fit(groups, now, existing, st.exec_limit)
        }
        // Not measured: each variable is still checked against the one-string limit.
        None => fit(groups, ExecSize::default(), |_| None, usize::MAX),
    };
    if !withheld.is_empty() && claim(Once::Withheld) {
        let rank = spank.task_global_id().unwrap_or_default();
        for w in &withheld {
            tell!(
                st,
                "lama: warning: {w} (first seen in task {rank} on node {} {}; said once per node)",
                st.nodeid,
                st.host
            );
        }
    }
    for (k, v) in &vars {
        if !held.iter().any(|h| h.same && h.name == *k) {
            spank.setenv(k, v, true)?;
        }
    }
    if st.manage_taskmap && !vars.iter().any(|(k, _)| k == "TASK_MAP") {
        // A map inherited from the job's environment would describe another step.
        spank.unsetenv("TASK_MAP")?;
    }
    if let Some(p) = placed {
        if let Some(policy) = st.policy.as_ref().filter(|_| first_task()) {
            say!(
                "lama: policy auto on {} (node {}): {policy}",
                st.host,
                st.nodeid
            );
        }
        if st.verbose {
            verbose(st, spank, &p, &vars, first_task());
        }
    }
    Ok(())
}

/// What `place` leaves for the verbose line.
struct Placed {
    rank: u32,
    /// Index of the task in `st.tasks`.
    index: usize,
    /// The CPUs Slurm's task plugin had bound the task to, when lama replaced them.
    before: Option<Vec<u32>>,
}

/// Binds the task and adds its CPU, device and OpenMP variables to `groups`. A task that cannot
/// be placed or bound ends here.
fn place(
    st: &Step,
    spank: &SpankHandle,
    claim: &dyn Fn(Once) -> bool,
    groups: &mut Vec<Group>,
) -> std::result::Result<Placed, Box<dyn std::error::Error>> {
    let rank = spank.task_global_id()?;
    let fatal = |msg: String| -> ! {
        if claim(Once::Failure) {
            say!("lama: error: {msg} (said once per node; the node's tasks were not started)");
        }
        stop_task()
    };
    let Ok(i) = st.tasks.binary_search_by_key(&rank, |t| t.rank) else {
        fatal(format!("task {rank} was not placed on node {}", st.host));
    };
    let domains = st.gpu_domains.as_deref();
    let far = || far_from_gpus(st, domains?, &st.tasks[i].cpus, spank);
    if let Some(why) = st.slot_domains.is_none().then(far).flatten() {
        if claim(Once::FarGpus) {
            say!(
                "lama: note: {why}; --lama-gpus lets lama choose each task's GPUs beside its CPUs, or a map such as scbnh follows Slurm's order over sockets (said once per node)"
            );
        }
    }
    // Where Slurm binds GPUs task by task, the policy's slots follow them; every task of the
    // node works the same moves out from the same variables.
    let slots = (st.slot_domains.as_deref().zip(domains))
        .and_then(|(slot_domains, domains)| follow_slots(slot_domains, domains, st));
    let slot_of = |j: usize| slots.as_ref().and_then(|s| s.get(j).copied()).unwrap_or(j);
    let slot = slot_of(i);
    let t = &st.tasks[slot];
    let list = format_list(&t.cpus);
    let mut cpus = vec![("LAMA_CPUS".to_string(), list.clone())];
    // Set when Slurm's task plugin bound the task (task/affinity); lama's binding replaces it.
    let slurm_bind = crate::room::var("SLURM_CPU_BIND");
    // Its `verbose` word is Slurm's --cpu-bind=verbose (read here, before lama rewrites it).
    let slurm_verbose = cpu_bind_verbose(slurm_bind.as_deref());
    let before = if st.verbose && st.bind && slurm_bind.is_some() {
        affinity::allowed().ok()
    } else {
        None
    };
    if st.bind {
        if let Err(e) = affinity::bind(&t.cpus) {
            fatal(format!(
                "cannot bind task {rank} on {} to cpus {list}: {e}",
                st.host
            ));
        }
        if let Some(previous) = slurm_bind {
            let local: Vec<&[u32]> = st
                .local_ranks
                .iter()
                .filter_map(|r| st.tasks.binary_search_by_key(r, |t| t.rank).ok())
                .map(|j| st.tasks[slot_of(j)].cpus.as_slice())
                .collect();
            cpus.extend(cpu_bind_env(&previous, &local));
        }
    }
    // After Slurm's own `--cpu-bind=verbose` line (its task plugin printed the mask lama
    // replaced), the one lama set, in the same form.
    if slurm_verbose {
        let local = spank
            .task_id()
            .ok()
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or_default();
        say!(
            "{}",
            cpu_bind_line(&st.host, rank, local, std::process::id(), &t.cpus, st.bind)
        );
    }
    if let Some(nodes) = st.mems.get(slot) {
        match affinity::bind_memory(nodes, &list, st.mem_policy.unwrap_or_default(), st.bind) {
            Ok(()) => cpus.push(("LAMA_MEMS".to_string(), format_list(nodes))),
            Err(e) => fatal(format!(
                "cannot bind the memory of task {rank} on {} to the NUMA nodes of cpus {list}: {e}",
                st.host
            )),
        }
    }
    groups.push(Group::cpus(cpus));
    if let Some(d) = &st.devices {
        match d.for_policy_task(slot) {
            Some(Ok(v)) => groups.push(Group::devices(v)),
            // Never a GPU the task may not open: Slurm's GPUs stay, said once per node.
            Some(Err(kept)) => {
                if claim(Once::SlurmGpus) {
                    let follows = if slots.is_some() {
                        ", and places each task in a domain next to the GPUs Slurm bound it"
                    } else {
                        ""
                    };
                    tell!(st, "lama: note: the automatic policy leaves the GPUs to Slurm, which binds them task by task here{follows}: {} (first seen in task {rank} on node {} {}; said once per node)",
                            kept.why, st.nodeid, st.host);
                }
                groups.push(Group::devices(kept.env));
            }
            None => match d.for_task(&st.tasks, i) {
                Ok(v) => groups.push(Group::devices(v)),
                Err(e) => fatal(format!("task {rank} on {}: {e}", st.host)),
            },
        }
    }
    let mut omp = st.omp.get(slot).cloned().unwrap_or_default();
    if !omp.is_empty() && !st.omp_replace {
        let set = &st.job_omp;
        if !set.is_empty() {
            if spank.task_id().map(|id| id == 0).unwrap_or(false) {
                tell!(st, "lama: note: the job sets {}, so lama's OpenMP places are not exported (--lama-omp-override replaces them)",
                        set.join(", "));
            }
            omp.clear();
        }
    }
    if !omp.is_empty() {
        groups.push(Group::openmp(omp));
    }
    Ok(Placed {
        rank,
        index: slot,
        before,
    })
}

/// The policy slot each of the node's tasks takes (rank order) where Slurm binds GPUs task by
/// task: each task goes to a domain near the GPUs Slurm bound it ([`slurm_wants`]). `None`
/// where Slurm does not bind GPUs task by task, or lama cannot tell how.
fn follow_slots(
    slot_domains: &[Option<usize>],
    domains: &[Vec<u32>],
    st: &Step,
) -> Option<Vec<usize>> {
    let local = slurm_wants(st, domains)?;
    if local.wants.len() != st.local_ranks.len() || slot_domains.len() != st.tasks.len() {
        return None;
    }
    let wanted: Vec<Vec<usize>> = st
        .tasks
        .iter()
        .map(|t| {
            st.local_ranks
                .iter()
                .position(|&r| r == t.rank)
                .and_then(|l| local.wants.get(l))
                .map(|w| w.0.clone())
                .unwrap_or_default()
        })
        .collect();
    Some(follow_domains(slot_domains, &wanted))
}

/// Where Slurm binds GPUs to each local task (`SLURMD_TRES_BIND`, the same in every task of the
/// node), per local task the domains near its GPUs, and what decided them.
struct Wants {
    /// Per local task: its domains, and the CPUs of Slurm's mask (`by_mask`) or its GPUs.
    wants: Vec<(Vec<usize>, Vec<u32>)>,
    /// Slurm chose each task's GPUs next to its own CPU mask (`closest`, `single:N`), rather
    /// than by task id (`map_gpu`, `mask_gpu`, `per_task`).
    by_mask: bool,
}

/// How Slurm binds the step's GPUs task by task, worked out alike in every task of the node:
/// next to the CPUs its task plugin bound each local task to (`SLURM_CPU_BIND_LIST`, read
/// before lama rewrites it), or by task id from the step's GPUs (`Step::bound_gpus`).
fn slurm_wants(st: &Step, domains: &[Vec<u32>]) -> Option<Wants> {
    let get = |k: &str| crate::room::var(k);
    let tres = get("SLURMD_TRES_BIND");
    let masks = || get("SLURM_CPU_BIND_LIST").and_then(|l| mask_list(&l));
    if binds_gpus_by_mask(tres.as_deref()) {
        let wants = masks()?
            .into_iter()
            .map(|m| (domain_of(&m, domains).into_iter().collect(), m))
            .collect();
        return Some(Wants {
            wants,
            by_mask: true,
        });
    }
    let rule = by_id(tres.as_deref(), crate::SLURM_VERSION >= PER_TASK_NEAREST)?;
    let bound = st.bound_gpus.as_ref()?;
    let masks = masks();
    let wants = bound
        .wanted(&rule, st.local_ranks.len(), masks.as_deref(), domains)
        .into_iter()
        .map(|(gpus, d)| (d, gpus))
        .collect();
    Some(Wants {
        wants,
        by_mask: false,
    })
}

/// Slurm 23.11, the first release whose `per_task` GPU binding gives each task the free GPUs
/// near it first (`SLURM_VERSION_NUM(23, 11, 0)`).
const PER_TASK_NEAREST: u32 = 23 << 16 | 11 << 8;

/// For a map step that leaves GPUs to Slurm: why this task, placed on `cpus`, is away from the
/// GPUs Slurm binds to it (in domains none of `cpus` lie in).
fn far_from_gpus(
    st: &Step,
    domains: &[Vec<u32>],
    cpus: &[u32],
    spank: &SpankHandle,
) -> Option<String> {
    let local = usize::try_from(spank.task_id().ok()?).ok()?;
    let all = slurm_wants(st, domains)?;
    let (near, what) = all.wants.get(local)?;
    let meets = |d: &usize| cpus.iter().any(|c| domains[*d].binary_search(c).is_ok());
    if near.is_empty() || near.iter().any(meets) {
        return None;
    }
    let mut there: Vec<u32> = near
        .iter()
        .flat_map(|&d| domains[d].iter().copied())
        .collect();
    there.sort_unstable();
    let how = if all.by_mask {
        format!(
            "--gpu-bind, --ntasks-per-gpu: next to the cpus {} Slurm's own binding gave it",
            format_list(what)
        )
    } else {
        format!(
            "--gpu-bind=map_gpu or mask_gpu, --gpus-per-task: GPU {} by its task id",
            format_list(what)
        )
    };
    Some(format!(
        "lama placed task {} on cpus {}, away from cpus {} where Slurm bound its GPUs ({how})",
        spank.task_global_id().ok()?,
        format_list(cpus),
        format_list(&there),
    ))
}

/// The `--lama-verbose` line of a placed task; the node's first task adds the node's cost.
fn verbose(st: &Step, spank: &SpankHandle, p: &Placed, vars: &[(String, String)], first: bool) {
    let t = &st.tasks[p.index];
    let list = format_list(&t.cpus);
    let how = if st.bind { "bound to" } else { "computed" };
    let mems = st.mems.get(p.index).map(Vec::as_slice);
    let shown = verbose_extras(vars) + &verbose_mems(mems, st.mem_policy);
    let cost = if first {
        placed_in(st.elapsed, &st.phases)
    } else {
        String::new()
    };
    let replaced = match &p.before {
        Some(b) if *b != t.cpus => format!(" (replaces Slurm's cpus {})", format_list(b)),
        _ => String::new(),
    };
    // In a heterogeneous step, the ids the task sees span every component.
    let id = |k: &str, own: u32| match spank.getenv(k) {
        Ok(Some(v)) if st.het => v,
        _ => own.to_string(),
    };
    say!(
        "lama: task {} on {} (node {}): {how} cpus {list} {}{shown}{replaced}{cost}",
        id("SLURM_PROCID", p.rank),
        st.host,
        id("SLURM_NODEID", st.nodeid),
        t.picture.as_deref().unwrap_or_default()
    );
}
