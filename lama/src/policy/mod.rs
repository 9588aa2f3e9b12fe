//! The automatic policy (`--lama-policy=auto`): a node's tasks placed with no map to write, from
//! the node's topology, the CPUs and GPUs the step has there, and how many workers (threads)
//! each task runs.
//!
//! - Tasks go to NUMA domains in proportion to the step's GPUs under each domain (jobs with GPUs)
//!   or to the step's cores in each (jobs without), largest remainders first, no domain taking
//!   more tasks than it has cores for their workers while another has room (hardware threads
//!   when the node has too few cores). Tasks the GPU domains cannot hold that way spill: cores
//!   weigh. With no more tasks than GPU domains (fewer than domains, without GPUs), each task
//!   gets a run of whole domains instead; domains left without a task are shared among the
//!   tasks of their package, so that no allowed core is idle.
//! - Inside its domain or run, a task gets consecutive whole cores, one hardware thread per
//!   core, unless its workers (`-c`, `--lama-threads`) outnumber the cores: then the fewest
//!   hardware threads per core that fit them. So every task has at least its workers' CPUs
//!   whenever the node has room for them: when no domain's part of the step holds a task's
//!   workers, the tasks take the step's threads in core order, one crossing domains if it must.
//! - Each task's GPUs are those of its domain, shared out evenly in rank order.
//!
//! Pure and deterministic: the same inputs give the same answer.

use thiserror::Error;

use crate::level::Level;
use crate::locality::{Kind, Locality};
use crate::topology::NodeTopology;

mod explain;
pub use explain::{describe, equivalent};

/// Why the policy cannot place a node's tasks.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PolicyError {
    /// More tasks than the step has hardware threads on the node.
    #[error("{tasks} tasks on a node where the step has {pus} hardware thread(s): the automatic policy stacks tasks only when asked (--lama-oversubscribe); ask for fewer tasks per node, or more CPUs")]
    TooManyTasks {
        /// Tasks on the node.
        tasks: usize,
        /// Hardware threads the step has there.
        pus: usize,
    },
}

/// A step GPU, for the policy: its device index, the CPUs of the object it hangs off and those
/// of its package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyGpu {
    /// Index into the node's devices.
    pub device: usize,
    /// OS indexes of the CPUs nearest it (its locality), ascending.
    pub cpus: Vec<u32>,
    /// OS indexes of the CPUs of the package it hangs off, ascending (empty when none): which
    /// of the GPUs near none of the step's CPUs are nearer a task.
    pub package: Vec<u32>,
}

/// The step's GPUs on a node (`given`, device indexes; every GPU of the node when `None`), with
/// the CPUs nearest each, for [`auto`].
pub fn gpus_of(loc: &Locality, given: Option<&[usize]>) -> Vec<PolicyGpu> {
    loc.candidates(Kind::Gpu, given)
        .into_iter()
        .map(|device| {
            let place = loc.devices().get(device).map(|d| d.place);
            let mut cpus = place
                .and_then(|p| loc.place(p))
                .map(|p| p.cpus.to_vec())
                .unwrap_or_default();
            cpus.sort_unstable();
            // Up from its place to the package that holds it, if any.
            let mut at = place;
            let mut package = Vec::new();
            while let Some(p) = at.and_then(|i| loc.place(i)) {
                if p.kind == "Package" {
                    package = p.cpus.to_vec();
                    break;
                }
                at = p.parent;
            }
            package.sort_unstable();
            PolicyGpu {
                device,
                cpus,
                package,
            }
        })
        .collect()
}

/// One task's placement under the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoTask {
    /// Its CPUs, OS indexes, ascending.
    pub cpus: Vec<u32>,
    /// Its GPUs (device indexes), nearest first.
    pub gpus: Vec<usize>,
    /// The domains it lies in (indexes into [`domains`]).
    pub domains: Vec<usize>,
}

/// A node's NUMA domains (else its sockets, else the node), each as its cores, each core as its
/// PUs (OS indexes) in the node's order. Domains without a CPU of the step are left out.
pub fn domains(node: &NodeTopology) -> Vec<Vec<Vec<u32>>> {
    let level = [Level::Numa, Level::Socket]
        .into_iter()
        .find(|&l| node.has(l));
    let spans = match level {
        Some(l) => node.objects(l).to_vec(),
        None => node.objects(Level::Node).to_vec(),
    };
    let cores = if node.has(Level::Core) {
        node.objects(Level::Core).to_vec()
    } else {
        node.objects(Level::Hwthread).to_vec()
    };
    spans
        .iter()
        .map(|d| {
            cores
                .iter()
                .filter(|c| d.contains(c))
                .map(|&c| node.span_cpus(c))
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|d: &Vec<Vec<u32>>| !d.is_empty())
        .collect()
}

/// The CPUs of each of [`domains`], ascending: what a task's CPUs are matched against to find
/// its domain.
pub fn domain_cpus(node: &NodeTopology) -> Vec<Vec<u32>> {
    domains(node)
        .into_iter()
        .map(|d| {
            let mut cpus: Vec<u32> = d.into_iter().flatten().collect();
            cpus.sort_unstable();
            cpus
        })
        .collect()
}

/// `total` shared out in proportion to `weights`, largest remainders first (ties to the first);
/// no share above its `caps` entry, the excess going on to the others the same way.
pub fn shares(total: usize, weights: &[u64], caps: &[usize]) -> Vec<usize> {
    let mut out = vec![0usize; weights.len()];
    let mut left = total;
    let mut open: Vec<usize> = (0..weights.len()).filter(|&i| caps[i] > 0).collect();
    while left > 0 && !open.is_empty() {
        let sum: u64 = open.iter().map(|&i| weights[i]).sum();
        let w = |i: usize| if sum == 0 { 1 } else { weights[i] };
        let sum = if sum == 0 { open.len() as u64 } else { sum };
        let mut given = vec![0usize; weights.len()];
        let mut rems: Vec<(u64, usize)> = Vec::new();
        let mut handed = 0;
        for &i in &open {
            let exact = left as u64 * w(i);
            given[i] = (exact / sum) as usize;
            handed += given[i];
            rems.push((exact % sum, i));
        }
        rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, i) in rems.iter().take(left - handed) {
            given[i] += 1;
        }
        let mut spilled = 0;
        for &i in &open {
            let room = caps[i] - out[i];
            let take = given[i].min(room);
            out[i] += take;
            spilled += given[i] - take;
        }
        left = spilled;
        open.retain(|&i| out[i] < caps[i]);
    }
    out
}

/// Places `tasks` tasks of `workers` threads each on `node` (already restricted to the step's
/// CPUs), with the step's `gpus` on the node.
/// With `stack`, more tasks than hardware threads share them (each task one hardware thread of
/// its domain, round robin); without, that is an error.
pub fn auto(
    node: &NodeTopology,
    gpus: &[PolicyGpu],
    tasks: usize,
    workers: usize,
    stack: bool,
) -> Result<Vec<AutoTask>, PolicyError> {
    let doms = domains(node);
    let pus: usize = doms.iter().flatten().map(Vec::len).sum();
    if tasks > pus && !stack {
        return Err(PolicyError::TooManyTasks { tasks, pus });
    }
    if tasks == 0 {
        return Ok(Vec::new());
    }
    // Each GPU belongs to the domain holding most of its CPUs (none: it is far from all).
    let mut dom_gpus: Vec<Vec<usize>> = vec![Vec::new(); doms.len()];
    let mut far = Vec::new();
    for g in gpus {
        let overlap = |d: &Vec<Vec<u32>>| {
            d.iter()
                .flatten()
                .filter(|c| g.cpus.binary_search(c).is_ok())
                .count()
        };
        match (0..doms.len()).max_by_key(|&d| (overlap(&doms[d]), std::cmp::Reverse(d))) {
            Some(d) if overlap(&doms[d]) > 0 => dom_gpus[d].push(g.device),
            _ => far.push((g.device, g.package.as_slice())),
        }
    }
    // A domain's GPUs in the order of its cores: the first block of its tasks (which take its
    // cores in order) gets the GPU nearest the first cores.
    for (d, list) in dom_gpus.iter_mut().enumerate() {
        let order: Vec<u32> = doms[d].iter().flatten().copied().collect();
        let first = |dev: &usize| {
            let near = gpus.iter().find(|g| g.device == *dev).map(|g| &g.cpus);
            order
                .iter()
                .position(|c| near.is_some_and(|n| n.binary_search(c).is_ok()))
                .unwrap_or(usize::MAX)
        };
        list.sort_by_key(|dev| (first(dev), *dev));
    }
    let sockets = socket_of_domains(node, &doms);
    let workers = workers.max(1);
    let room: Vec<usize> = doms.iter().map(|d| d.iter().map(Vec::len).sum()).collect();
    let gpu_doms: Vec<usize> = (0..doms.len())
        .filter(|&d| !dom_gpus[d].is_empty())
        .collect();
    // No more tasks than GPU domains: every domain is shared out, the GPU domains first.
    if !gpu_doms.is_empty() && tasks <= gpu_doms.len() {
        let mut out = greedy(&doms, &gpu_doms, &sockets, tasks, workers);
        share_gpus(&mut out, &dom_gpus, &far, &sockets);
        return Ok(out);
    }
    // How many tasks a domain holds: with cores of their own when the node has enough for
    // every task (a task's workers on as few of a core's threads as fit), else with hardware
    // threads of their own, else as many as its hardware threads (stacked only when asked).
    let own_cores: Vec<usize> = doms
        .iter()
        .map(|d| {
            let smt = d.iter().map(Vec::len).max().unwrap_or(1).max(1);
            d.len() / workers.div_ceil(smt)
        })
        .collect();
    let own_threads: Vec<usize> = room.iter().map(|r| r / workers).collect();
    let threads_fit = own_threads.iter().sum::<usize>() >= tasks;
    let on_gpus = |caps: &[usize]| gpu_doms.iter().map(|&d| caps[d]).sum::<usize>();
    let (caps, spill): (Vec<usize>, bool) = if own_cores.iter().sum::<usize>() >= tasks {
        let spill = on_gpus(&own_cores) < tasks;
        (own_cores, spill)
    } else if threads_fit {
        let spill = on_gpus(&own_threads) < tasks;
        (own_threads, spill)
    } else {
        let spill = on_gpus(&room) < tasks.saturating_mul(workers);
        let caps = if tasks > pus {
            vec![usize::MAX; doms.len()]
        } else {
            room
        };
        (caps, spill)
    };
    // Tasks the GPU domains cannot hold that way spill into the others: then cores weigh.
    let spill = !gpu_doms.is_empty() && spill;
    let weights: Vec<u64> = if gpu_doms.is_empty() || spill {
        doms.iter().map(|d| d.len() as u64).collect()
    } else {
        dom_gpus.iter().map(|g| g.len() as u64).collect()
    };
    let used: Vec<usize> = (0..doms.len()).filter(|&d| weights[d] > 0).collect();
    if tasks < used.len() {
        let mut out = grouped(&doms, &used, tasks, workers);
        share_gpus(&mut out, &dom_gpus, &far, &sockets);
        return Ok(out);
    }
    // The node has its workers' threads for every task, but no domain's share divides into
    // them (Slurm gave the step part of a domain): tasks take the threads in core order,
    // so that each still gets its workers' CPUs, one crossing a domain when it must; never a
    // package when GPU tasks have one each (they keep to their GPU's package, fewer CPUs).
    if !threads_fit && tasks.saturating_mul(workers) <= pus {
        let out = pooled(&doms, tasks, workers);
        let own_package = !gpu_doms.is_empty() && tasks >= node.objects(Level::Socket).len();
        let spans = |t: &AutoTask| {
            t.domains
                .iter()
                .any(|&d| sockets.get(d) != sockets.get(t.domains[0]))
        };
        if !own_package || !out.iter().any(spans) {
            let mut out = out;
            share_gpus(&mut out, &dom_gpus, &far, &sockets);
            return Ok(out);
        }
    }
    let per_domain = shares(tasks, &weights, &caps);
    let mut out = Vec::with_capacity(tasks);
    for (d, &k) in per_domain.iter().enumerate() {
        if k == 0 {
            continue;
        }
        let cores = &doms[d];
        let slots = first_threads(cores, k * workers);
        for j in 0..k {
            let (a, b) = (j * slots.len() / k, (j + 1) * slots.len() / k);
            // Stacked (more tasks than slots): one hardware thread each, shared in turn.
            let (a, b) = if a == b { (a, a + 1) } else { (a, b) };
            let mut cpus = slots[a.min(slots.len() - 1)..b.min(slots.len())].to_vec();
            cpus.sort_unstable();
            out.push(AutoTask {
                cpus,
                gpus: Vec::new(),
                domains: vec![d],
            });
        }
    }
    if !spill {
        // With a task for every package, a GPU's tasks keep to its package: a package without
        // the step's GPUs is left to tasks of its own, never stretched over from another.
        let own_package = !gpu_doms.is_empty() && tasks >= node.objects(Level::Socket).len();
        extend(
            &mut out,
            &doms,
            &per_domain,
            (&sockets, own_package),
            workers,
        );
    }
    share_gpus(&mut out, &dom_gpus, &far, &sockets);
    Ok(out)
}

/// Domains left without a task (GPU domains held every task, each on cores of its own): each
/// goes to the tasks of a domain that has some ([`balanced`]), its cores shared among them in
/// rank order, so that no allowed core is idle. A task keeps its GPUs: its home domain's. With
/// `own_package` (a GPU job with a task for every package) a domain goes only to tasks of its
/// own package, and stays idle when its package has none: no task spans two packages.
fn extend(
    out: &mut [AutoTask],
    doms: &[Vec<Vec<u32>>],
    per_domain: &[usize],
    (sockets, own_package): (&[usize], bool),
    workers: usize,
) {
    let homes: Vec<usize> = (0..doms.len()).filter(|&d| per_domain[d] > 0).collect();
    let mut given = vec![0usize; doms.len()];
    for d in (0..doms.len()).filter(|&d| per_domain[d] == 0) {
        let Some(&e) = homes
            .iter()
            .filter(|&&e| !own_package || sockets.get(e) == sockets.get(d))
            .min_by_key(|&&e| (balanced(sockets, d, e, given[e]), e))
        else {
            continue;
        };
        given[e] += doms[d].len();
        let sharers: Vec<usize> = (0..out.len())
            .filter(|&j| out[j].domains.first() == Some(&e))
            .collect();
        let k = sharers.len();
        let slots = first_threads(&doms[d], k * workers);
        for (i, &j) in sharers.iter().enumerate() {
            let (a, b) = (i * slots.len() / k, (i + 1) * slots.len() / k);
            if a == b {
                continue;
            }
            out[j].cpus.extend_from_slice(&slots[a..b]);
            out[j].cpus.sort_unstable();
            out[j].domains.push(d);
        }
    }
}

/// The socket (package) of each domain, by its first CPU; 0 where the node has no sockets.
fn socket_of_domains(node: &NodeTopology, doms: &[Vec<Vec<u32>>]) -> Vec<usize> {
    let sockets: Vec<Vec<u32>> = node
        .objects(Level::Socket)
        .iter()
        .map(|&s| {
            let mut c = node.span_cpus(s);
            c.sort_unstable();
            c
        })
        .collect();
    doms.iter()
        .map(|d| {
            let first = d.first().and_then(|c| c.first());
            sockets
                .iter()
                .position(|s| first.is_some_and(|f| s.binary_search(f).is_ok()))
                .unwrap_or(0)
        })
        .collect()
}

/// Which of the domains with tasks takes a domain `a` left over: one of the same socket first,
/// then the one whose tasks have the fewest cores so far (`cores`), then fewer domains apart.
/// Inside a socket the NUMA domains of today's machines (SNC, NPS) are nearly equally near one
/// another, and even shares matter more.
fn balanced(sockets: &[usize], a: usize, b: usize, cores: usize) -> (bool, usize, usize) {
    (sockets.get(a) != sockets.get(b), cores, a.abs_diff(b))
}

/// How near domain `b` is to domain `a`: the same socket first, then fewer domains apart.
fn nearness(sockets: &[usize], a: usize, b: usize) -> (bool, usize) {
    (sockets.get(a) != sockets.get(b), a.abs_diff(b))
}

/// The GPUs: each task shares its domains' GPUs with the other tasks there, in blocks of
/// neighbours in rank order (evenly, counts differing by at most one, when there are enough);
/// a task whose domains have none takes its nearest domain's the same way (the same socket
/// first). A GPU of another domain, or of none (far: `(device, its package's CPUs)`), is never
/// a task's while its own domains have one: those GPUs stay with the tasks near them, and far
/// GPUs go only to tasks with no GPU domain at all, those of their own package first.
fn share_gpus(
    tasks: &mut [AutoTask],
    dom_gpus: &[Vec<usize>],
    far: &[(usize, &[u32])],
    sockets: &[usize],
) {
    if tasks.is_empty() || (far.is_empty() && dom_gpus.iter().all(Vec::is_empty)) {
        return;
    }
    let blocks = |gpus: &[usize], sharers: &[usize], tasks: &mut [AutoTask]| {
        let (g, k) = (gpus.len(), sharers.len());
        for (i, &j) in sharers.iter().enumerate() {
            if g >= k {
                tasks[j]
                    .gpus
                    .extend_from_slice(&gpus[i * g / k..(i + 1) * g / k]);
            } else {
                tasks[j].gpus.push(gpus[i * g / k]);
            }
        }
    };
    // Each task's home domain: its first one with GPUs, else the nearest domain with some.
    let with: Vec<usize> = (0..dom_gpus.len())
        .filter(|&d| !dom_gpus[d].is_empty())
        .collect();
    let mut by_home: Vec<Vec<usize>> = vec![Vec::new(); dom_gpus.len()];
    let mut homeless = Vec::new();
    for (j, t) in tasks.iter().enumerate() {
        let own: Vec<usize> = t
            .domains
            .iter()
            .copied()
            .filter(|&d| !dom_gpus[d].is_empty())
            .collect();
        if own.len() > 1 {
            // A task over several whole domains (fewer tasks than domains) has their GPUs.
            for d in own {
                by_home[d].push(j);
            }
            continue;
        }
        let home = own.first().copied().or_else(|| {
            let d = t.domains.first().copied()?;
            with.iter()
                .copied()
                .min_by_key(|&e| (nearness(sockets, d, e), e))
        });
        match home {
            Some(d) => by_home[d].push(j),
            None => homeless.push(j),
        }
    }
    for (d, sharers) in by_home.iter().enumerate() {
        if !sharers.is_empty() {
            blocks(&dom_gpus[d], sharers, tasks);
        }
    }
    // No task near a GPU: each shares the far GPUs of its own package when there are some,
    // else all of them.
    let mut groups: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for j in homeless {
        let mine: Vec<usize> = far
            .iter()
            .filter(|(_, package)| {
                tasks[j]
                    .cpus
                    .iter()
                    .any(|c| package.binary_search(c).is_ok())
            })
            .map(|&(d, _)| d)
            .collect();
        let pick = if mine.is_empty() {
            far.iter().map(|&(d, _)| d).collect()
        } else {
            mine
        };
        match groups.iter_mut().find(|(g, _)| *g == pick) {
            Some((_, sharers)) => sharers.push(j),
            None => groups.push((pick, vec![j])),
        }
    }
    for (gpus, sharers) in groups {
        if !gpus.is_empty() {
            blocks(&gpus, &sharers, tasks);
        }
    }
}

/// The first hardware threads of each of `cores`, as few per core as give `need` of them (all
/// of them when even that is too few): one per core until workers outnumber cores. Cores of a
/// step may differ in threads (Slurm can give part of a core), so the threads are counted.
fn first_threads(cores: &[Vec<u32>], need: usize) -> Vec<u32> {
    let most = cores.iter().map(Vec::len).max().unwrap_or(1);
    let count = |s: usize| cores.iter().map(|c| c.len().min(s)).sum::<usize>();
    let smt = (1..=most).find(|&s| count(s) >= need).unwrap_or(most);
    cores
        .iter()
        .flat_map(|c| c.iter().take(smt).copied())
        .collect()
}

/// Every domain's cores in turn, cut into `tasks` runs of `workers` hardware threads (whole
/// cores first, as [`first_threads`] orders them); each task lies in the domains it touches.
fn pooled(doms: &[Vec<Vec<u32>>], tasks: usize, workers: usize) -> Vec<AutoTask> {
    let cores: Vec<Vec<u32>> = doms.iter().flatten().cloned().collect();
    let slots = first_threads(&cores, tasks * workers);
    let domain_of = |cpu: &u32| {
        doms.iter()
            .position(|d| d.iter().flatten().any(|c| c == cpu))
    };
    (0..tasks)
        .map(|j| {
            let run = &slots[(j * workers).min(slots.len())..((j + 1) * workers).min(slots.len())];
            let mut domains: Vec<usize> = run.iter().filter_map(domain_of).collect();
            domains.dedup();
            let mut cpus = run.to_vec();
            cpus.sort_unstable();
            AutoTask {
                cpus,
                gpus: Vec::new(),
                domains,
            }
        })
        .collect()
}

/// Fewer tasks than domains: each task takes a run of neighbouring domains, whole, with as many
/// hardware threads per core as its `workers` need; the first tasks take the longer runs (as
/// Slurm's block distribution gives the first nodes the extra tasks).
fn grouped(doms: &[Vec<Vec<u32>>], used: &[usize], tasks: usize, workers: usize) -> Vec<AutoTask> {
    let bound = |j: usize| (j * used.len()).div_ceil(tasks);
    (0..tasks)
        .map(|j| whole(doms, used[bound(j)..bound(j + 1)].to_vec(), workers))
        .collect()
}

/// A task over the whole domains `run`.
fn whole(doms: &[Vec<Vec<u32>>], run: Vec<usize>, workers: usize) -> AutoTask {
    let cores: Vec<Vec<u32>> = run.iter().flat_map(|&d| doms[d].clone()).collect();
    let mut cpus = first_threads(&cores, workers);
    cpus.sort_unstable();
    AutoTask {
        cpus,
        gpus: Vec::new(),
        domains: run,
    }
}

/// Fewer tasks than GPU domains (mpibind's "greedy"): the GPU domains go to the tasks in runs
/// of neighbours, then each other domain to the task with the nearest GPU domain (the same
/// socket first, then fewer domains apart, then the earlier task), so that every domain of the
/// step is some task's.
fn greedy(
    doms: &[Vec<Vec<u32>>],
    gpu_doms: &[usize],
    sockets: &[usize],
    tasks: usize,
    workers: usize,
) -> Vec<AutoTask> {
    let bound = |j: usize| (j * gpu_doms.len()).div_ceil(tasks);
    let mut owner: Vec<Option<usize>> = vec![None; doms.len()];
    for j in 0..tasks {
        for &d in &gpu_doms[bound(j)..bound(j + 1)] {
            owner[d] = Some(j);
        }
    }
    // Each other domain to a task with a GPU domain of the same socket, the one with the fewest
    // cores so far first ([`balanced`]).
    let mut cores = vec![0usize; tasks];
    for &d in gpu_doms {
        if let Some(j) = owner[d] {
            cores[j] += doms[d].len();
        }
    }
    for d in 0..doms.len() {
        if owner[d].is_none() {
            owner[d] = gpu_doms
                .iter()
                .filter_map(|&e| owner[e].map(|j| (e, j)))
                .min_by_key(|&(e, j)| (balanced(sockets, d, e, cores[j]), j))
                .map(|(_, j)| j);
            if let Some(j) = owner[d] {
                cores[j] += doms[d].len();
            }
        }
    }
    (0..tasks)
        .map(|j| {
            let run: Vec<usize> = (0..doms.len()).filter(|&d| owner[d] == Some(j)).collect();
            whole(doms, run, workers)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::shares;

    #[test]
    fn largest_remainders_then_caps() {
        // 7 over weights 1:1:2 is 1.75, 1.75, 3.5: floors 1,1,3, the two .75 remainders win.
        assert_eq!(shares(7, &[1, 1, 2], &[9, 9, 9]), vec![2, 2, 3]);
        // Ties go to the first.
        assert_eq!(shares(1, &[1, 1], &[9, 9]), vec![1, 0]);
        // A full domain hands its excess on in proportion.
        assert_eq!(shares(6, &[4, 1, 1], &[2, 9, 9]), vec![2, 2, 2]);
        // No weight anywhere: evenly.
        assert_eq!(shares(4, &[0, 0], &[9, 9]), vec![2, 2]);
    }
}
