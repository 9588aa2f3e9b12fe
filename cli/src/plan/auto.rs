//! `lama plan --policy auto`: the automatic policy's placement, node by node, as the SPANK
//! plugin and the Flux shell plugin compute it: the ranks in Slurm's block order over the nodes,
//! every GPU of a node counted as the step's, `--threads` as each task's workers.

use lama::idset::{format_list, parse_list};
use lama::locality::{Kind, Locality};
use lama::openmp::{ProcBind, ThreadPlan, Threads};
use lama::plugin::{auto_threads, auto_workers, place_auto, AutoPlaced, ThreadRequest};
use lama::policy::{gpus_of, PolicyGpu};
use lama::slurm::launcher::RankPlace;
use lama::slurm::StepEnv;
use lama::taskmap::{rfc34, TaskMap};
use lama::NodeTopology;
use serde_json::json;

use super::{Model, PlanArgs, PlanFormat};

/// One node's ranks, placed.
struct NodePlan {
    placed: AutoPlaced,
    places: Vec<ThreadPlan>,
}

/// Ranks per node, in Slurm's default block order: the first `np % nodes` nodes get one more.
pub fn block(np: usize, nodes: usize) -> Vec<Vec<u32>> {
    let mut next = 0u32;
    (0..nodes)
        .map(|n| {
            let k = np / nodes + usize::from(n < np % nodes);
            let r: Vec<u32> = (next..next + k as u32).collect();
            next += k as u32;
            r
        })
        .collect()
}

/// Ranks per node: inside a running step's task with `--from-slurm`, the step's own layout
/// (Slurm's order, with a 26.05 block step's topology order, as the plugin's `TASK_MAP`), when
/// it has these counts; else [`block`].
fn step_ranks(a: &PlanArgs, np: usize, nodes: usize) -> Vec<Vec<u32>> {
    let step = a
        .from_slurm
        .then(|| {
            let env = StepEnv {
                step_id: StepEnv::task_step_id(crate::env),
                ..StepEnv::from_lookup(crate::env)
            };
            env.taskmap_from_files().ok()
        })
        .flatten()
        .filter(|m| m.nnodes() == nodes as u64 && m.total_tasks() == np as u64);
    match step {
        Some(map) => (0..nodes as u64)
            .map(|n| {
                map.tasks_on(n)
                    .into_iter()
                    .flat_map(|(a, b)| (a as u32)..=(b as u32))
                    .collect()
            })
            .collect(),
        None => block(np, nodes),
    }
}

/// The GPUs `--step-gpus` names among the node's (all of them without it).
fn step_gpus(loc: &Locality, list: Option<&str>) -> Result<Vec<PolicyGpu>, String> {
    let chosen = match list.map(str::trim) {
        None => return Ok(gpus_of(loc, None)),
        Some("none") => Vec::new(),
        Some(l) => {
            let ids = parse_list(l).map_err(|e| format!("--step-gpus '{l}': {e}"))?;
            loc.gpus_numbered(&ids).map_err(|_| {
                format!(
                    "--step-gpus '{l}': the node has {} GPU(s), numbered from 0",
                    loc.candidates(Kind::Gpu, None).len()
                )
            })?
        }
    };
    Ok(gpus_of(loc, Some(&chosen)))
}

/// The plan's text, JSON or launcher words (for the job's `hosts`, whose launcher daemons may
/// use `usable` PUs on each node), or why there is none.
pub fn render(
    a: &PlanArgs,
    models: &[Model],
    per_node: &[usize],
    threads: Option<(Threads, ProcBind)>,
    (hosts, usable): (&[String], &[Vec<u32>]),
) -> Result<String, (String, String)> {
    let nodes: Vec<&NodeTopology> = per_node.iter().map(|&i| &models[i].0).collect();
    let domains = |t: &NodeTopology| lama::policy::domains(t).len();
    let np =
        a.np.unwrap_or_else(|| nodes.iter().map(|t| domains(t)).sum());
    let threads = threads.map(|(threads, bind)| ThreadRequest {
        threads,
        bind,
        replace: false,
    });
    let plans = plan_nodes(a, models, per_node, np, threads.as_ref())?;
    // Rank by rank: a running step's ranks need not follow node order (step_ranks).
    let mut by_rank: Vec<(u32, usize, &[u32])> = plans
        .iter()
        .enumerate()
        .flat_map(|(n, p)| {
            p.placed
                .tasks
                .iter()
                .map(move |t| (t.rank, n, t.cpus.as_slice()))
        })
        .collect();
    by_rank.sort_unstable_by_key(|&(r, _, _)| r);
    let node_of: Vec<u32> = by_rank.iter().map(|&(_, n, _)| n as u32).collect();
    if matches!(a.format, PlanFormat::Srun | PlanFormat::Pals) {
        return binding_ranks(a, models, per_node, &plans).and_then(|ranks| {
            super::launchers::binding_script(a.format, &ranks, hosts)
                .map_err(|e| ("launcher".to_string(), e))
        });
    }
    if a.format.is_launcher() {
        let ranks: Vec<RankPlace> = by_rank
            .iter()
            .map(|&(_, node, cpus)| RankPlace {
                node,
                cpus: cpus.to_vec(),
            })
            .collect();
        return super::launchers::launcher_text(a.format, &ranks, hosts, usable)
            .map_err(|e| ("launcher".to_string(), e));
    }
    let map = TaskMap::encode(&node_of);
    let mems = match &a.mem {
        Some(mode) => {
            let ranks = plans.iter().enumerate().flat_map(|(n, p)| {
                p.placed
                    .tasks
                    .iter()
                    .map(move |t| (n, per_node[n], t.cpus.as_slice()))
            });
            Some(
                super::memory::rank_memory(mode, models, ranks)
                    .map_err(|e| ("memory".to_string(), e))?,
            )
        }
        None => None,
    };
    let mem_of = |r: usize| mems.as_ref().and_then(|m| m.get(r));
    // Each node's devices by name.
    let names: Vec<Vec<String>> = per_node
        .iter()
        .map(|&m| {
            models[m]
                .1
                .as_ref()
                .map(|l| l.devices().iter().map(|d| d.name.clone()).collect())
                .unwrap_or_default()
        })
        .collect();
    let gpu_names = |n: usize, g: &[usize]| -> Vec<String> {
        g.iter().filter_map(|&d| names[n].get(d).cloned()).collect()
    };
    if a.format == PlanFormat::Svg {
        // Each node's ranks with their CPUs, and each rank's GPUs, drawn as a map's are.
        let mut by_node: Vec<Vec<(usize, Vec<u32>)>> = vec![Vec::new(); plans.len()];
        let mut gpus_of: Vec<Vec<String>> = vec![Vec::new(); by_rank.len()];
        for (n, p) in plans.iter().enumerate() {
            for (t, g) in p.placed.tasks.iter().zip(&p.placed.gpus) {
                by_node[n].push((t.rank as usize, t.cpus.clone()));
                if let Some(slot) = gpus_of.get_mut(t.rank as usize) {
                    *slot = gpu_names(n, g);
                }
            }
        }
        let drawings = super::output::drawings_of(&nodes, models, per_node, &by_node, |r| {
            gpus_of.get(r).cloned().unwrap_or_default()
        });
        return Ok(crate::svg::svg(&drawings));
    }
    if a.format == PlanFormat::Json {
        let mut ranks = Vec::new();
        for (n, p) in plans.iter().enumerate() {
            for (i, t) in p.placed.tasks.iter().enumerate() {
                let mut v = json!({
                    "rank": t.rank,
                    "node": n,
                    "cpus": t.cpus,
                    "gpus": gpu_names(n, &p.placed.gpus[i]),
                    "threads": p.places[i].threads(),
                    "places": p.places[i].places,
                    "omp_proc_bind": p.places[i].bind.name(),
                });
                if let Some(m) = mem_of(ranks.len()) {
                    super::memory::add_json(&mut v, m);
                }
                ranks.push(v);
            }
        }
        let v = json!({
            "schema": super::SCHEMA,
            "rule": "policy",
            "policy": "auto",
            "policy_by_default": a.default_policy,
            "nodes": nodes.iter().map(|n| n.name()).collect::<Vec<_>>(),
            "summary": plans.iter().map(|p| json!(p.placed.summary)).collect::<Vec<_>>(),
            "ranks": ranks,
            "taskmap": rfc34::to_value(&map),
        });
        return Ok(format!("{v}\n"));
    }
    let mut s = format!(
        "policy auto{}  ->  {np} ranks on {} node(s)\n",
        if a.default_policy {
            " (the default: no placement option given)"
        } else {
            ""
        },
        nodes.len()
    );
    let width = np.saturating_sub(1).to_string().len();
    // Ranks in the order rank_memory was given them.
    let mut k = 0;
    for (n, p) in plans.iter().enumerate() {
        s.push_str(&super::output::wrap(
            &format!(
                "node {n} ({}): {}",
                nodes[n].name(),
                lama::exec::exec_words(&p.placed.summary)
            ),
            2,
            a.wide,
        ));
        s.push_str(&borrowed_memory(nodes[n], models[per_node[n]].1.as_ref()));
        if let Some(c) = p.places.iter().find(|c| c.extra > 0) {
            s.push_str(&format!(
                "  {} OpenMP threads per task share as few as {} hardware threads: the node cannot give each thread its own\n",
                c.threads(),
                c.places.len()
            ));
        }
        for (i, t) in p.placed.tasks.iter().enumerate() {
            let gpus = gpu_names(n, &p.placed.gpus[i]);
            let gpus = if gpus.is_empty() {
                "-".to_string()
            } else {
                gpus.join(",")
            };
            let omp = &p.places[i];
            let mem = mem_of(k).map(super::memory::text).unwrap_or_default();
            k += 1;
            s.push_str(&super::output::rank_line(
                (t.rank as usize, width),
                t.picture.as_deref().unwrap_or_default(),
                &format!(
                    "cpus {}  gpus {gpus}  threads {} {} places {}{mem}",
                    format_list(&t.cpus),
                    omp.threads(),
                    omp.bind.name(),
                    omp.omp_places()
                ),
                a.wide,
            ));
        }
    }
    s.push_str(&format!("TASK_MAP={}\n", rfc34::encode_wrapped(&map)));
    Ok(s)
}

/// Each rank (in rank order) with its CPUs, the policy's GPUs and, with `--mem`, its memory.
fn binding_ranks(
    a: &PlanArgs,
    models: &[Model],
    per_node: &[usize],
    plans: &[NodePlan],
) -> Result<Vec<lama::slurm::launcher::RankBinding>, (String, String)> {
    let mode = match &a.mem {
        Some(m) => Some(lama::tiers::MemMode::parse(m).ok_or_else(|| {
            (
                "invalid-option".to_string(),
                format!("--mem: invalid mode '{m}'"),
            )
        })?),
        None => None,
    };
    let mut out = Vec::new();
    for (n, p) in plans.iter().enumerate() {
        let loc = models[per_node[n]].1.as_ref();
        for (i, t) in p.placed.tasks.iter().enumerate() {
            let mems = match (mode, loc) {
                (Some(mode), Some(loc)) => {
                    lama::tiers::task_memory(loc.numa(), &t.cpus, mode, None)
                        .map_err(|e| {
                            (
                                "memory".to_string(),
                                format!("--mem: rank {} on node {n}: {e}", t.rank),
                            )
                        })?
                        .0
                }
                _ => Vec::new(),
            };
            let b = super::bindings::rank_binding(loc, n, t.cpus.clone(), &p.placed.gpus[i], mems);
            out.push((t.rank, b));
        }
    }
    out.sort_by_key(|(r, _)| *r);
    Ok(out.into_iter().map(|(_, b)| b).collect())
}

/// One line per NUMA node whose memory CPUs of `node` borrow (their own node is missing or not
/// allowed): they are in its domain.
fn borrowed_memory(node: &NodeTopology, loc: Option<&Locality>) -> String {
    let Some(loc) = loc else {
        return String::new();
    };
    let mut cpus = node.cpus();
    cpus.sort_unstable();
    loc.numa()
        .iter()
        .filter_map(|n| {
            let lent: Vec<u32> = n
                .borrowed
                .iter()
                .copied()
                .filter(|c| cpus.binary_search(c).is_ok())
                .collect();
            (!lent.is_empty()).then(|| {
                format!(
                    "  CPUs {} have no memory of their own: NUMA node {}\n",
                    format_list(&lent),
                    n.os_index
                )
            })
        })
        .collect()
}

/// Each node's ranks ([`step_ranks`]) placed by the policy, with their OpenMP places.
fn plan_nodes(
    a: &PlanArgs,
    models: &[Model],
    per_node: &[usize],
    np: usize,
    threads: Option<&ThreadRequest>,
) -> Result<Vec<NodePlan>, (String, String)> {
    let workers = auto_workers(threads, a.cpus_per_task.map(|c| c as usize));
    let mut plans = Vec::new();
    for (n, ranks) in step_ranks(a, np, per_node.len()).into_iter().enumerate() {
        let (node, loc) = &models[per_node[n]];
        let gpus = match loc.as_ref() {
            Some(loc) => step_gpus(loc, a.step_gpus.as_deref())
                .map_err(|e| ("invalid-option".to_string(), e))?,
            None => Vec::new(),
        };
        let placed = place_auto(
            node,
            &node.cpus(),
            &gpus,
            &ranks,
            (workers, a.oversubscribe),
            true,
            true,
        )
        .map_err(|e| ("placement".to_string(), format!("node {n}: {e}")))?;
        let places = auto_threads(
            node,
            &placed.tasks,
            threads,
            a.cpus_per_task.map(|c| c as usize),
        )
        .map_err(|e| ("threads".to_string(), e.to_string()))?;
        plans.push(NodePlan { placed, places });
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::block;

    #[test]
    fn block_order_puts_the_extra_ranks_first() {
        assert_eq!(block(5, 2), vec![vec![0, 1, 2], vec![3, 4]]);
        assert_eq!(block(2, 3), vec![vec![0], vec![1], vec![]]);
    }
}
