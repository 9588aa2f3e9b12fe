//! The policy's choice put into words for `--lama-verbose` and `lama plan`: what it did on a
//! node ([`describe`]), and the expert request that gives the same CPUs, when one does
//! ([`equivalent`]).

use super::{domains, AutoTask, PolicyGpu};
use crate::level::Level;
use crate::mapper::plan;
use crate::spec::{Expert, Request};
use crate::topology::NodeTopology;

/// What the policy chose on a node, in words: the domains used and their tasks, the weights'
/// basis, CPUs per task and hardware threads per core, GPUs per task.
pub fn describe(node: &NodeTopology, gpus: &[PolicyGpu], tasks: &[AutoTask]) -> String {
    let doms = domains(node);
    let kind = if node.has(Level::Numa) {
        "NUMA domain"
    } else if node.has(Level::Socket) {
        "socket"
    } else {
        "node"
    };
    let mut per = vec![0usize; doms.len()];
    for t in tasks {
        for &d in &t.domains {
            per[d] += 1;
        }
    }
    let used: Vec<String> = per
        .iter()
        .filter(|&&k| k > 0)
        .map(|k| k.to_string())
        .collect();
    let basis = if gpus.is_empty() {
        "by the step's cores".to_string()
    } else {
        format!("by the step's {} GPU(s)", gpus.len())
    };
    let range = |v: Vec<usize>| match (v.iter().min(), v.iter().max()) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "0".to_string(),
    };
    // Hardware threads per core a task uses: its CPUs over the cores they belong to.
    let core_of = |c: &u32| {
        doms.iter()
            .flatten()
            .position(|core| core.contains(c))
            .unwrap_or(usize::MAX)
    };
    let smt = tasks
        .iter()
        .map(|t| {
            let mut cores: Vec<usize> = t.cpus.iter().map(core_of).collect();
            cores.sort_unstable();
            cores.dedup();
            t.cpus.len().div_ceil(cores.len().max(1))
        })
        .max()
        .unwrap_or(1);
    let widest = tasks.iter().map(|t| t.domains.len()).max().unwrap_or(1);
    // Domains left over and shared among the tasks of another (more tasks than GPU domains).
    let mut homes = vec![0usize; doms.len()];
    for t in tasks {
        if let Some(&d) = t.domains.first() {
            homes[d] += 1;
        }
    }
    let shared: Vec<usize> = (0..doms.len())
        .filter(|&d| homes[d] == 0 && per[d] > 1)
        .collect();
    let spread = if !shared.is_empty() {
        let at_home: Vec<String> = homes
            .iter()
            .filter(|&&k| k > 0)
            .map(|k| k.to_string())
            .collect();
        format!(
            "{} task(s) over {} of {} {kind}(s) {basis} ({}), the other {} shared among the tasks nearest them",
            tasks.len(),
            at_home.len(),
            doms.len(),
            at_home.join("+"),
            shared.len()
        )
    } else if widest > 1 {
        // Fewer tasks than domains: each task has a run of whole domains.
        format!(
            "{} task(s), each over {} whole {kind}(s) of {} {basis}",
            tasks.len(),
            range(tasks.iter().map(|t| t.domains.len()).collect()),
            doms.len()
        )
    } else {
        format!(
            "{} task(s) over {} of {} {kind}(s) {basis} ({})",
            tasks.len(),
            used.len(),
            doms.len(),
            used.join("+")
        )
    };
    let mut out = format!(
        "{spread}, {} CPU(s) each, {smt} hardware thread(s) per core",
        range(tasks.iter().map(|t| t.cpus.len()).collect()),
    );
    let mut all: Vec<u32> = tasks.iter().flat_map(|t| t.cpus.iter().copied()).collect();
    let bound = all.len();
    all.sort_unstable();
    all.dedup();
    if all.len() < bound {
        out.push_str(", tasks stacked on shared hardware threads (oversubscribed)");
    }
    if !gpus.is_empty() {
        out.push_str(&format!(
            ", {} GPU(s) each",
            range(tasks.iter().map(|t| t.gpus.len()).collect())
        ));
    }
    out
}

/// An expert request (`map`, `bind`, `mppr`) that gives the same CPUs to every task on `node` as
/// the policy did, when a common one does (checked by placing it).
pub fn equivalent(node: &NodeTopology, tasks: &[AutoTask]) -> Option<Request> {
    let n = tasks.len();
    let first = tasks.first()?;
    let width = first.cpus.len();
    let mut binds = vec![
        format!("{width}h"),
        format!("{width}c"),
        "1N".into(),
        "1s".into(),
    ];
    binds.dedup();
    let mut mpprs = vec![None];
    for level in ["N", "s"] {
        for k in 1..=n {
            mpprs.push(Some(format!("{k}:{level}")));
        }
    }
    for map in ["cNsbnh", "Ncsbnh", "csNbnh", "hcNsbn"] {
        for bind in &binds {
            for mppr in &mpprs {
                let Ok(req) = Request::expert(
                    &Expert {
                        map: Some(map),
                        bind: Some(bind),
                        mppr: mppr.as_deref(),
                        order: None,
                    },
                    Some(n),
                    false,
                ) else {
                    continue;
                };
                let Ok(p) = plan(&[node], &req) else { continue };
                let same = (0..n).all(|r| p.cpus(r, &[node]) == tasks[r].cpus);
                if same {
                    return Some(req);
                }
            }
        }
    }
    None
}
