//! The automatic policy's invariants on every real machine of tests/topologies: the whole
//! machine for every task count, and random steps (proptest).

use std::path::PathBuf;

use lama::policy::{auto, domains, gpus_of, PolicyGpu};
use lama::NodeTopology;

fn xmls() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("topologies")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    v
}

/// The whole machine (some files allow only a few CPUs) and its GPUs.
fn load(path: &std::path::Path) -> (NodeTopology, Vec<PolicyGpu>) {
    let (node, loc) = NodeTopology::from_xml_file_with_devices(path, true).expect("topology");
    (node, gpus_of(&loc, None))
}

/// The machine file of `tests/topologies/` named `file`, with its GPUs.
fn machine(file: &str) -> (NodeTopology, Vec<PolicyGpu>) {
    let path = xmls().into_iter().find(|p| p.ends_with(file)).expect(file);
    load(&path)
}

/// No CPU is listed twice: on every machine the objects of each level are disjoint, so neither
/// the mapper's bindings (a span of one level's objects) nor the policy's (whole cores of its
/// domains) can name a CPU twice. On the Optane machine (hwloc's fakememinitiators) the NUMA
/// domains are its four DRAM nodes of two CPUs, not the two PMem nodes attached to each
/// package's four.
#[test]
fn no_cpu_twice_on_any_machine() {
    for path in xmls() {
        let (node, _) = load(&path);
        for level in lama::level::Level::ALL {
            let objs = node.objects(level);
            for w in objs.windows(2) {
                assert!(
                    w[0].end <= w[1].start,
                    "{}: two {} objects share CPUs",
                    path.display(),
                    level.name()
                );
            }
        }
        let pmem = path.to_string_lossy().contains("fakememinitiators");
        if pmem {
            let numa: Vec<Vec<u32>> = node
                .objects(lama::level::Level::Numa)
                .iter()
                .map(|&s| node.span_cpus(s))
                .collect();
            assert_eq!(numa, vec![vec![0, 1], vec![4, 5], vec![2, 3], vec![6, 7]]);
        }
    }
}

#[test]
fn invariants_on_every_machine() {
    for path in xmls() {
        let (node, gpus) = load(&path);
        let doms = domains(&node);
        let cores: usize = doms.iter().map(Vec::len).sum();
        let pus: usize = doms.iter().flatten().map(Vec::len).sum();
        for with_gpus in [false, true] {
            let g: &[PolicyGpu] = if with_gpus { &gpus } else { &[] };
            for tasks in 1..=(2 * doms.len()).min(pus) {
                let name = format!("{} tasks={tasks} gpus={}", path.display(), g.len());
                let placed = auto(&node, g, tasks, 1, false).expect(&name);
                assert_eq!(placed.len(), tasks, "{name}");
                let mut all: Vec<u32> = placed.iter().flat_map(|t| t.cpus.clone()).collect();
                let n = all.len();
                all.sort_unstable();
                all.dedup();
                assert_eq!(all.len(), n, "{name}: CPUs shared between tasks");
                // With at least a task per domain, a task lies in its home domain and in
                // domains that are no task's home (left over, shared among the nearest tasks).
                let homes: Vec<usize> = placed
                    .iter()
                    .filter_map(|t| t.domains.first().copied())
                    .collect();
                for t in &placed {
                    assert!(!t.cpus.is_empty(), "{name}: a task without CPUs");
                    if tasks >= doms.len() {
                        assert!(
                            t.domains[1..].iter().all(|d| !homes.contains(d)),
                            "{name}: a task spans another task's home domain"
                        );
                        assert!(
                            t.cpus.iter().all(|c| t
                                .domains
                                .iter()
                                .any(|&d| doms[d].iter().flatten().any(|x| x == c))),
                            "{name}: a task outside its domains"
                        );
                    }
                    // No second hardware thread of a core while cores are free.
                    if tasks <= cores {
                        let mut seen: Vec<usize> = t
                            .cpus
                            .iter()
                            .map(|c| {
                                doms.iter()
                                    .flatten()
                                    .position(|core| core.contains(c))
                                    .expect("a known CPU")
                            })
                            .collect();
                        let k = seen.len();
                        seen.dedup();
                        assert_eq!(seen.len(), k, "{name}: two hardware threads of one core");
                    }
                    assert!(
                        t.gpus.iter().all(|d| g.iter().any(|x| x.device == *d)),
                        "{name}: a GPU that is not the step's"
                    );
                }
                if !g.is_empty() {
                    // Issue 58: the tasks of a domain share its GPUs evenly (counts differ by at
                    // most one there), and a task whose domains have GPUs has only theirs.
                    let near = |t: &lama::policy::AutoTask, dev: usize| {
                        let cpus = &g.iter().find(|x| x.device == dev).expect("a GPU").cpus;
                        t.domains.iter().any(|&d| {
                            doms[d]
                                .iter()
                                .flatten()
                                .any(|c| cpus.binary_search(c).is_ok())
                        })
                    };
                    for d in 0..doms.len() {
                        let counts: Vec<usize> = placed
                            .iter()
                            .filter(|t| t.domains == [d])
                            .map(|t| t.gpus.len())
                            .collect();
                        let (lo, hi) = (counts.iter().min(), counts.iter().max());
                        assert!(
                            hi.zip(lo).is_none_or(|(h, l)| h - l <= 1),
                            "{name}: GPUs of domain {d}'s tasks {counts:?}"
                        );
                    }
                    for t in &placed {
                        let has_near = g.iter().any(|x| near(t, x.device));
                        assert!(
                            !has_near || t.gpus.iter().all(|&dev| near(t, dev)),
                            "{name}: a far GPU for a task with near ones ({:?})",
                            t.gpus
                        );
                        assert!(!t.gpus.is_empty() || !has_near, "{name}: no GPU");
                    }
                }
            }
        }
    }
}

/// Issue 48, case 2: `salloc -n1 -c8` on 2 sockets x 2 cores x 2 threads over two NUMA nodes.
/// One task runs over both domains and needs both threads of each core for its 8 workers; two
/// tasks of 4 take one domain each, both threads; four tasks of 2 take one core each.
#[test]
fn workers_decide_threads_per_core_below_the_domain_count() {
    let node = NodeTopology::from_synthetic("numa:2 core:2 pu:2").expect("synthetic");
    let cpus = |tasks, workers| -> Vec<Vec<u32>> {
        auto(&node, &[], tasks, workers, false)
            .expect("place")
            .into_iter()
            .map(|t| t.cpus)
            .collect()
    };
    // hwloc numbers the PUs in order: core k holds PUs 2k and 2k+1.
    assert_eq!(cpus(1, 8), [vec![0, 1, 2, 3, 4, 5, 6, 7]]);
    assert_eq!(cpus(1, 4), [vec![0, 2, 4, 6]]);
    assert_eq!(cpus(1, 5), [vec![0, 1, 2, 3, 4, 5, 6, 7]]);
    assert_eq!(cpus(2, 4), [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(cpus(4, 2), [vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    // Three tasks of two: the domains have room for two each, so no task is cut to one CPU.
    assert!(cpus(3, 2).iter().all(|c| c.len() >= 2));
}

/// Slurm 25.11 and later give `srun -n2 -c3` on an exclusive POWER8 node of two-thread cores
/// three cores (6 CPUs), two of package 0 and one of package 1: each task still gets its three
/// workers' CPUs, whole cores first, the second crossing into package 1 (CPU-only). With a GPU
/// of each package the tasks keep to their packages instead.
#[test]
fn workers_get_their_cpus_when_the_step_has_part_of_a_domain() {
    let (node, gpus) = machine("power8gpudistances.xml");
    let step = node.restrict(&[0, 1, 8, 9, 80, 81]).expect("restrict");
    let cpus = |g: &[PolicyGpu]| -> Vec<Vec<u32>> {
        auto(&step, g, 2, 3, false)
            .expect("place")
            .into_iter()
            .map(|t| t.cpus)
            .collect()
    };
    assert_eq!(cpus(&[]), [vec![0, 1, 8], vec![9, 80, 81]]);
    assert_eq!(cpus(&gpus), [vec![0, 1, 8, 9], vec![80, 81]]);
}

/// The `-c` rule on every machine for task counts below, at and above its domain count: a task
/// has at least its workers' CPUs whenever the node has room for all of them (a task over a run
/// of domains, their hardware threads when fewer), even when no domain's room divides into them.
#[test]
fn workers_get_their_cpus_on_every_machine() {
    for (name, node, _) in machines() {
        let doms = domains(node);
        let room: Vec<usize> = doms.iter().map(|d| d.iter().map(Vec::len).sum()).collect();
        let pus: usize = room.iter().sum();
        for workers in [1usize, 2, 3, 4, 8, 16] {
            for tasks in 1..=(2 * doms.len() + 1).min(pus) {
                let placed = auto(node, &[], tasks, workers, false).expect(name);
                let fits = tasks * workers <= pus;
                for t in &placed {
                    let has: usize = t.domains.iter().map(|&d| room[d]).sum();
                    let want = if tasks < doms.len() {
                        workers.min(has)
                    } else if fits {
                        workers
                    } else {
                        1
                    };
                    assert!(
                        t.cpus.len() >= want,
                        "{name} tasks={tasks} workers={workers}: a task has {:?}",
                        t.cpus
                    );
                }
            }
        }
    }
}

#[test]
fn same_answer_every_time() {
    let (node, gpus) = machine("nvidiaDGX2.xml");
    // The file's CPU side is trimmed to 4 PUs: 4 tasks fill it (8 would stack tasks).
    let a = auto(&node, &gpus, 4, 1, false).expect("place");
    let b = auto(&node, &gpus, 4, 1, false).expect("place");
    assert_eq!(a, b);
}

/// Every machine, read once.
fn machines() -> &'static [(String, NodeTopology, Vec<PolicyGpu>)] {
    static ALL: std::sync::OnceLock<Vec<(String, NodeTopology, Vec<PolicyGpu>)>> =
        std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        xmls()
            .into_iter()
            .map(|p| {
                let (node, gpus) = load(&p);
                (p.display().to_string(), node, gpus)
            })
            .collect()
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// The invariants on a random step: a subset of each machine's cores (as Slurm gives
    /// whole cores) and of its GPUs, 1 to 2 × its NUMA domains tasks, 1 to 4 workers each.
    #[test]
    fn invariants_on_random_steps(
        m in 0usize..18,
        core_bits in proptest::collection::vec(proptest::bool::weighted(0.7), 512),
        gpu_bits in proptest::collection::vec(proptest::bool::ANY, 32),
        t in 1usize..64,
        workers in 1usize..=4,
    ) {
        let all = machines();
        let (name, node, gpus) = &all[m % all.len()];
        // The step's CPUs: the PUs of the kept cores.
        let whole = domains(node);
        let mut cpus: Vec<u32> = whole
            .iter()
            .flatten()
            .enumerate()
            .filter(|(i, _)| core_bits[i % core_bits.len()])
            .flat_map(|(_, c)| c.clone())
            .collect();
        if cpus.is_empty() {
            cpus = whole[0][0].clone();
        }
        cpus.sort_unstable();
        let step = node.restrict(&cpus).expect("restrict");
        let doms = domains(&step);
        let tasks = 1 + t % (2 * doms.len());
        let g: Vec<PolicyGpu> = gpus
            .iter()
            .enumerate()
            .filter(|(i, _)| gpu_bits[i % gpu_bits.len()])
            .map(|(_, x)| x.clone())
            .collect();
        let pus: usize = doms.iter().flatten().map(Vec::len).sum();
        let name = format!("{name} cpus={} tasks={tasks} gpus={} workers={workers}",
            lama::idset::format_list(&cpus), g.len());
        let placed = match auto(&step, &g, tasks, workers, false) {
            Ok(p) => p,
            Err(e) => {
                proptest::prop_assert!(tasks > pus, "{name}: {e}");
                return Ok(());
            }
        };
        proptest::prop_assert_eq!(&placed, &auto(&step, &g, tasks, workers, false).expect("again"));
        proptest::prop_assert_eq!(placed.len(), tasks, "{}", name);
        // Disjoint, inside the step.
        let mut seen: Vec<u32> = placed.iter().flat_map(|t| t.cpus.clone()).collect();
        let n = seen.len();
        seen.sort_unstable();
        seen.dedup();
        proptest::prop_assert_eq!(seen.len(), n, "{}: CPUs shared", name);
        proptest::prop_assert!(seen.iter().all(|c| cpus.binary_search(c).is_ok()), "{name}: outside the step");
        // The domains' weights: GPUs under each (a GPU belongs where most of its CPUs are), or
        // cores when the step's GPUs are under none.
        let under: Vec<usize> = doms
            .iter()
            .map(|d| {
                g.iter()
                    .filter(|x| {
                        let overlap = |d: &Vec<Vec<u32>>| d.iter().flatten().filter(|c| x.cpus.contains(c)).count();
                        let best = doms.iter().map(overlap).max().unwrap_or(0);
                        best > 0 && overlap(d) == best
                            && doms.iter().position(|e| overlap(e) == best) == doms.iter().position(|e| std::ptr::eq(e, d))
                    })
                    .count()
            })
            .collect();
        // Issue 65: no more tasks than GPU domains: each task takes runs of whole domains
        // (mpibind's greedy). Otherwise tasks the GPU domains cannot hold on cores of their own
        // (threads of their own, or hardware threads for every worker, when the node has no
        // such room) spill into the others (cores weigh).
        let gpu_doms = under.iter().filter(|&&w| w > 0).count();
        let greedy = gpu_doms > 0 && tasks <= gpu_doms;
        let room: Vec<usize> = doms.iter().map(|d| d.iter().map(Vec::len).sum()).collect();
        let own_cores: Vec<usize> = doms
            .iter()
            .map(|d| d.len() / workers.div_ceil(d.iter().map(Vec::len).max().unwrap_or(1)))
            .collect();
        let own_threads: Vec<usize> = room.iter().map(|r| r / workers).collect();
        let on_gpus = |c: &[usize]| c.iter().zip(&under).filter(|(_, &w)| w > 0).map(|(c, _)| c).sum::<usize>();
        let (caps, spill) = if own_cores.iter().sum::<usize>() >= tasks {
            (own_cores.clone(), on_gpus(&own_cores) < tasks)
        } else if own_threads.iter().sum::<usize>() >= tasks {
            (own_threads.clone(), on_gpus(&own_threads) < tasks)
        } else {
            (room.clone(), on_gpus(&room) < tasks * workers)
        };
        let spill = gpu_doms > 0 && spill;
        let weights: Vec<usize> = if gpu_doms == 0 || spill {
            doms.iter().map(Vec::len).collect()
        } else {
            under.clone()
        };
        let used = if greedy { usize::MAX } else { weights.iter().filter(|&&w| w > 0).count() };
        // No domain's room divides into the workers, though the node has them all: the tasks
        // take the step's threads in core order, a task over two domains when it must.
        // GPU tasks with a package each keep to it instead (fewer CPUs rather than two packages).
        let poolable = tasks >= used && own_threads.iter().sum::<usize>() < tasks && tasks * workers <= pus;
        let own_package = gpu_doms > 0 && tasks >= step.objects(lama::level::Level::Socket).len();
        let used = if poolable { usize::MAX } else { used };
        let pooled = poolable && !own_package;
        // Each task's home domain (its first), and how many tasks have each.
        let mut count = vec![0usize; doms.len()];
        for t in &placed {
            count[t.domains[0]] += 1;
        }
        for t in &placed {
            if tasks >= used {
                // Beside its home, only domains that are no task's home (left over).
                proptest::prop_assert!(
                    t.domains.len() == 1 || (!spill && t.domains[1..].iter().all(|&d| count[d] == 0)),
                    "{}: a task spans another task's domain", name
                );
            }
            proptest::prop_assert!(
                t.cpus.iter().all(|c| t.domains.iter().any(|&d| doms[d].iter().flatten().any(|x| x == c))),
                "{name}: a task outside its domains"
            );
            proptest::prop_assert!(t.gpus.iter().all(|d| g.iter().any(|x| x.device == *d)), "{name}: a GPU not the step's");
        }
        // The -c rule: each task has its workers' CPUs whenever the node has room for them, a
        // task over several domains all their hardware threads when they have fewer.
        let fit_workers = tasks * workers <= pus;
        for t in &placed {
            let has: usize = t.domains.iter().map(|&d| room[d]).sum();
            // GPU tasks kept to their packages share what the packages have.
            let want = if pooled { workers } else if poolable { 1 } else if tasks < used { workers.min(has) } else if fit_workers { workers } else { 1 };
            proptest::prop_assert!(t.cpus.len() >= want, "{name}: a task of {workers} worker(s) has {} CPU(s)", t.cpus.len());
        }
        // Tasks per domain within one of their share, where no domain is full (a domain is full
        // at as many tasks as it has hardware threads for their workers, when the node has room).
        let total: usize = weights.iter().sum();
        let fits = (0..doms.len()).all(|d| (tasks * weights[d]).div_ceil(total) <= caps[d]);
        if tasks >= used && fits {
            for d in 0..doms.len() {
                let exact = tasks * weights[d];
                proptest::prop_assert!(
                    count[d] * total + total > exact && count[d] * total < exact + total,
                    "{name}: domain {d} has {} tasks for weight {} of {total}", count[d], weights[d]
                );
            }
        }
        // No second hardware thread of a core while the domain's cores are not all taken.
        if tasks >= used {
            for (d, dom) in doms.iter().enumerate() {
                if count[d] * workers <= dom.len() {
                    for t in placed.iter().filter(|t| t.domains[0] == d) {
                        let mut cores: Vec<usize> = t.cpus.iter().filter_map(|c| dom.iter().position(|k| k.contains(c))).collect();
                        let k = cores.len();
                        cores.dedup();
                        proptest::prop_assert_eq!(cores.len(), k, "{}: two hardware threads of one core", name);
                    }
                }
            }
        }
        if !g.is_empty() {
            // Every task has a GPU; the tasks of one domain share its GPUs evenly.
            let counts: Vec<usize> = placed.iter().map(|t| t.gpus.len()).collect();
            proptest::prop_assert!(counts.iter().all(|&k| k >= 1), "{name}: GPUs {counts:?}");
            for (d, &w) in under.iter().enumerate() {
                let here: Vec<usize> = placed
                    .iter()
                    .filter(|t| t.domains[0] == d && w > 0)
                    .map(|t| t.gpus.len())
                    .collect();
                let (lo, hi) = (here.iter().min(), here.iter().max());
                proptest::prop_assert!(
                    hi.zip(lo).is_none_or(|(h, l)| h - l <= 1),
                    "{name}: GPUs of domain {d}'s tasks {here:?}"
                );
            }
        }
    }
}

proptest::proptest! {
    /// Following the domains Slurm bound the tasks' GPUs in (`lama::slurm::gpu_bind`) moves the
    /// policy's tasks between its slots and never makes new ones: every task gets one slot, no
    /// slot two tasks, and a task that wants one domain lands in it whenever that domain has a
    /// slot for each task that wants only it; a task that accepts several lands in one of them
    /// whenever they have room for every task that wants any of them.
    #[test]
    fn following_slurms_gpu_domains_is_a_permutation(
        slots in proptest::collection::vec(proptest::option::of(0..3usize), 0..12),
        seed in proptest::collection::vec(proptest::collection::btree_set(0..3usize, 0..3), 12),
    ) {
        use lama::slurm::gpu_bind::follow_domains;
        let wanted: Vec<Vec<usize>> = seed[..slots.len()].iter().map(|w| w.iter().copied().collect()).collect();
        let got = follow_domains(&slots, &wanted);
        let mut sorted = got.clone();
        sorted.sort_unstable();
        proptest::prop_assert_eq!(sorted, (0..slots.len()).collect::<Vec<_>>());
        for (t, w) in wanted.iter().enumerate() {
            if w.is_empty() {
                continue;
            }
            let room = slots.iter().filter(|s| s.is_some_and(|d| w.contains(&d))).count();
            let want = if w.len() == 1 {
                wanted.iter().filter(|x| *x == w).count()
            } else {
                wanted.iter().filter(|x| x.iter().any(|d| w.contains(d))).count()
            };
            if want <= room {
                let d = slots[got[t]];
                proptest::prop_assert!(d.is_some_and(|d| w.contains(&d)), "task {} wants {:?}, got {:?}", t, w, d);
            }
        }
    }
}

/// Issue 58: `lama check`'s `far-gpu` agrees with the policy: no step the policy placed, on any
/// machine with GPUs, for any task count up to twice its domains, gives a task a GPU farther
/// from its CPUs than one of the step's.
#[test]
fn lama_check_finds_no_far_gpu_in_what_the_policy_placed() {
    use lama::check::{judge_node, FindingKind, NodeSeen, TaskSeen};
    for path in xmls() {
        let (node, loc) = NodeTopology::from_xml_file_with_devices(&path, true).expect("topology");
        let gpus = gpus_of(&loc, None);
        if gpus.is_empty() {
            continue;
        }
        let number = |dev: usize| loc.devices()[dev].index.expect("a numbered GPU");
        let seen = NodeSeen {
            host: "n1".into(),
            index: 0,
            allocated: node.cpus(),
            numa: loc.numa().to_vec(),
            locality: Some(loc.clone()),
            job_gpus: gpus.iter().map(|g| number(g.device)).collect(),
        };
        // The whole machine, its first domain, and its first core (Lassen's `--restrict 8-11`).
        let whole = domains(&node);
        let steps = [
            node.clone(),
            node.restrict(&whole[0].concat()).expect("a domain"),
            node.restrict(&whole[0][0]).expect("a core"),
        ];
        for (node, tasks) in steps.iter().flat_map(|n| {
            let doms = domains(n);
            let pus: usize = doms.iter().flatten().map(Vec::len).sum();
            (1..=(2 * doms.len() + 1).min(pus)).map(move |k| (n, k))
        }) {
            let placed = auto(node, &gpus, tasks, 1, false).expect("placed");
            let tasks_seen: Vec<TaskSeen> = placed
                .iter()
                .enumerate()
                .map(|(r, t)| TaskSeen {
                    rank: r as u32,
                    cpus: t.cpus.clone(),
                    gpus: t.gpus.iter().map(|&d| number(d)).collect(),
                    ..TaskSeen::default()
                })
                .collect();
            let refs: Vec<&TaskSeen> = tasks_seen.iter().collect();
            let far: Vec<_> = judge_node(&seen, &refs)
                .into_iter()
                .filter(|f| f.kind == FindingKind::FarGpu)
                .collect();
            assert!(
                far.is_empty(),
                "{} tasks={tasks}: {:?}",
                path.display(),
                far
            );
        }
    }
}
