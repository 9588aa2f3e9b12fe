//! A whole-job plan with its devices and memory, in the words of launchers that bind per local
//! rank with the same lists on every node: srun without the plugin (`--cpu-bind=mask_cpu:`,
//! `--gpu-bind=map_gpu:`, `--mem-bind=map_mem:`) and Cray PALS `mpiexec` (`--cpu-bind list:`,
//! `--mem-bind list:`, each rank's GPU variable chosen by `PALS_LOCAL_RANKID`). Each is written
//! as a short shell script run as `sh FILE PROGRAM [ARGS]`.

use super::LauncherError;
use crate::idset::format_list;

/// One rank of a plan with what the launcher binds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankBinding {
    /// Its node (index into the job's hosts).
    pub node: usize,
    /// Its CPUs (OS indexes).
    pub cpus: Vec<u32>,
    /// Its GPUs, numbered among the node's GPUs as Slurm numbers them (from 0).
    pub gpus: Vec<u32>,
    /// Its GPUs' runtime variables (`CUDA_VISIBLE_DEVICES=1`), for PALS.
    pub gpu_env: Vec<(String, String)>,
    /// Its memory's NUMA nodes (OS indexes), empty when memory is left alone.
    pub mems: Vec<u32>,
}

/// What binds one local rank: CPUs, GPUs, memory, GPU variables.
type Local<'a> = (&'a [u32], &'a [u32], &'a [u32], &'a [(String, String)]);

/// Each node's ranks in rank order (nodes without ranks left out), with the node's index.
fn by_node(ranks: &[RankBinding]) -> Vec<(usize, Vec<&RankBinding>)> {
    let mut nodes: Vec<(usize, Vec<&RankBinding>)> = Vec::new();
    for r in ranks {
        match nodes.iter_mut().find(|(n, _)| *n == r.node) {
            Some((_, v)) => v.push(r),
            None => nodes.push((r.node, vec![r])),
        }
    }
    nodes.sort_by_key(|(n, _)| *n);
    nodes
}

fn local<'a>(rs: &[&'a RankBinding]) -> Vec<Local<'a>> {
    rs.iter()
        .map(|r| {
            (
                r.cpus.as_slice(),
                r.gpus.as_slice(),
                r.mems.as_slice(),
                r.gpu_env.as_slice(),
            )
        })
        .collect()
}

/// A hex mask of `ids`, as Slurm's `mask_*:` lists take them.
fn mask(ids: &[u32]) -> String {
    let top = ids.iter().max().map_or(0, |&m| m as usize / 4 + 1);
    let mut digits = vec![0u8; top.max(1)];
    for &i in ids {
        digits[i as usize / 4] |= 1 << (i % 4);
    }
    let hex: String = digits
        .iter()
        .rev()
        .map(|d| char::from_digit(u32::from(*d), 16).unwrap_or('0'))
        .collect();
    format!("0x{hex}")
}

/// `map_KIND:a,b` when every rank has one id, else `mask_KIND:0x..,0x..`; `None` when no rank
/// has any; an error when some have none.
fn ids_option(what: &str, kind: &str, lists: &[&[u32]]) -> Result<Option<String>, String> {
    if lists.iter().all(|l| l.is_empty()) {
        return Ok(None);
    }
    if lists.iter().any(|l| l.is_empty()) {
        return Err(format!(
            "some ranks of a node have {what} and others none, which srun cannot bind"
        ));
    }
    Ok(Some(if lists.iter().all(|l| l.len() == 1) {
        let ids: Vec<String> = lists.iter().map(|l| l[0].to_string()).collect();
        format!("map_{kind}:{}", ids.join(","))
    } else {
        let m: Vec<String> = lists.iter().map(|l| mask(l)).collect();
        format!("mask_{kind}:{}", m.join(","))
    }))
}

/// srun's binding options for one node shape.
fn srun_binding(shape: &[Local]) -> Result<String, String> {
    let cpus: Vec<String> = shape.iter().map(|l| mask(l.0)).collect();
    let mut s = format!("--cpu-bind=mask_cpu:{}", cpus.join(","));
    let gpus: Vec<&[u32]> = shape.iter().map(|l| l.1).collect();
    if let Some(o) = ids_option("GPUs", "gpu", &gpus)? {
        s.push_str(&format!(" --gpu-bind={o}"));
    }
    let mems: Vec<&[u32]> = shape.iter().map(|l| l.2).collect();
    if let Some(o) = ids_option("memory bound", "mem", &mems)? {
        s.push_str(&format!(" --mem-bind={o}"));
    }
    Ok(s)
}

/// Whether the plan puts rank `r` where Slurm's block (or, with `cyclic`, cyclic) distribution
/// of `per` ranks on each of `nodes` (in order) would.
fn follows(ranks: &[RankBinding], nodes: &[usize], per: usize, cyclic: bool) -> bool {
    ranks.iter().enumerate().all(|(r, p)| {
        let i = if cyclic { r % nodes.len() } else { r / per };
        nodes.get(i) == Some(&p.node)
    })
}

/// srun command lines for the plan (`hosts` in node order): one step when every node has the
/// same ranks with the same bindings (block or cyclic order by `-m`, any other by `-m arbitrary`
/// with the nodes listed rank by rank), else one step per node shape, run side by side, each its
/// own job step (and MPI world).
pub fn srun_script(ranks: &[RankBinding], hosts: &[String]) -> Result<String, LauncherError> {
    let err = |e: String| LauncherError::Srun(e);
    let nodes = by_node(ranks);
    let host = |n: usize| hosts.get(n).map_or("?", String::as_str);
    let mut shapes: Vec<(Vec<Local>, Vec<usize>)> = Vec::new();
    for (n, rs) in &nodes {
        let l = local(rs);
        match shapes.iter_mut().find(|(s, _)| *s == l) {
            Some((_, v)) => v.push(*n),
            None => shapes.push((l, vec![*n])),
        }
    }
    let mut out = format!(
        "# srun for lama's plan: {} ranks on {} node(s), bound by srun's own options (no lama plugin)\n# run inside the allocation as: sh THIS_FILE PROGRAM [ARGS]\n",
        ranks.len(),
        nodes.len()
    );
    if let [(shape, ns)] = shapes.as_slice() {
        let per = shape.len();
        let names: Vec<&str> = ns.iter().map(|&n| host(n)).collect();
        let layout = if follows(ranks, ns, per, false) {
            format!("--nodelist={} -m block", names.join(","))
        } else if follows(ranks, ns, per, true) {
            format!("--nodelist={} -m cyclic", names.join(","))
        } else {
            let each: Vec<&str> = ranks.iter().map(|r| host(r.node)).collect();
            format!("--nodelist={} -m arbitrary", each.join(","))
        };
        out.push_str(&format!(
            "exec srun -N {} -n {} --ntasks-per-node={per} {layout} {} \"$@\"\n",
            ns.len(),
            ranks.len(),
            srun_binding(shape).map_err(err)?
        ));
        return Ok(out);
    }
    out.push_str("# the nodes' bindings differ: one step per node shape, side by side, each its own step (and MPI world); one step for all needs the plugin or lama exec\n");
    for (shape, ns) in &shapes {
        let names: Vec<&str> = ns.iter().map(|&n| host(n)).collect();
        out.push_str(&format!(
            "srun -N {} -n {} --ntasks-per-node={} --nodelist={} -m block {} \"$@\" &\n",
            ns.len(),
            ns.len() * shape.len(),
            shape.len(),
            names.join(","),
            srun_binding(shape).map_err(err)?
        ));
    }
    out.push_str("wait\n");
    Ok(out)
}

/// A Cray PALS `mpiexec` script for the plan: PALS starts `--ppn` ranks on each node in turn,
/// binds each local rank to its entry of `--cpu-bind list:` and `--mem-bind list:`, and a small
/// `sh -c` sets each rank's GPU variables by `PALS_LOCAL_RANKID` before it runs the program.
/// Every node must run the same number of ranks, in rank blocks, with alike bindings.
pub fn pals_script(ranks: &[RankBinding], hosts: &[String]) -> Result<String, LauncherError> {
    let err = |e: String| LauncherError::Pals(e);
    let nodes = by_node(ranks);
    let host = |n: usize| hosts.get(n).map_or("?", String::as_str);
    let Some((first, rs)) = nodes.first() else {
        return Err(err("the plan has no rank".into()));
    };
    let shape = local(rs);
    let per = shape.len();
    for (n, rs) in &nodes {
        if local(rs) != shape {
            return Err(err(format!(
                "node {} runs other ranks or bindings than node {} (PALS binds every node alike)",
                host(*n),
                host(*first)
            )));
        }
    }
    let order: Vec<usize> = nodes.iter().map(|(n, _)| *n).collect();
    if !follows(ranks, &order, per, false) {
        return Err(err(format!(
            "PALS starts --ppn {per} ranks on each node in turn, and this plan's ranks are in another order (choose a map that fills a node before the next, or use lama exec)"
        )));
    }
    let list = |f: &dyn Fn(&Local) -> String| shape.iter().map(f).collect::<Vec<_>>().join(":");
    let mut line = format!(
        "exec mpiexec -n {} --ppn {per} --hosts {} --cpu-bind list:{}",
        ranks.len(),
        order.iter().map(|&n| host(n)).collect::<Vec<_>>().join(","),
        list(&|l| format_list(l.0))
    );
    if shape.iter().any(|l| !l.2.is_empty()) {
        if shape.iter().any(|l| l.2.is_empty()) {
            return Err(err(
                "some ranks of a node have their memory bound and others not".into(),
            ));
        }
        line.push_str(&format!(" --mem-bind list:{}", list(&|l| format_list(l.2))));
    }
    let cases: Vec<String> = shape
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.3.is_empty())
        .map(|(i, l)| {
            let vars: Vec<String> = l.3.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{i}) export {};;", vars.join(" "))
        })
        .collect();
    if cases.is_empty() {
        line.push_str(" \"$@\"");
    } else {
        line.push_str(&format!(
            " \\\n  /bin/sh -c 'case $PALS_LOCAL_RANKID in {} esac; exec \"$@\"' lama-gpus \"$@\"",
            cases.join(" ")
        ));
    }
    Ok(format!(
        "# Cray PALS mpiexec for lama's plan: {} ranks, {per} per node on {} node(s)\n# run inside the job as: sh THIS_FILE PROGRAM [ARGS]\n{line}\n",
        ranks.len(),
        nodes.len()
    ))
}
