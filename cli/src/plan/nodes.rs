//! The job's nodes for a plan: from topology files, synthetic descriptions, this machine or
//! the running Slurm job, each cut to `--restrict`, with their host names when known.

use std::path::PathBuf;

use clap::ArgMatches;
use lama::limits::MAX_NODES;
use lama::locality::Locality;
use lama::slurm::expand_hostlist;
use lama::NodeTopology;

use super::{slurm_job, PlanArgs};

/// The host names --slurm-hostfile writes, from --nodelist or the running job.
pub(super) fn job_hosts(a: &PlanArgs) -> Result<Option<Vec<String>>, String> {
    if a.slurm_hostfile.is_none() && !a.format.is_launcher() {
        if a.nodelist.is_some() {
            return Err("--nodelist names the hosts for --slurm-hostfile and the MPI launcher formats (rankfile, hydra, impi)".into());
        }
        return Ok(None);
    }
    let list = match &a.nodelist {
        Some(l) => l.clone(),
        None => crate::env("SLURM_JOB_NODELIST")
            .ok_or("--slurm-hostfile and the MPI launcher formats (rankfile, hydra, impi) need the job's host names: run inside a Slurm job or give --nodelist HOSTLIST (or --from-slurm)")?,
    };
    let hosts = expand_hostlist(&list).map_err(|e| format!("--nodelist: {e}"))?;
    if hosts.is_empty() {
        return Err(format!("--nodelist '{list}' names no host"));
    }
    Ok(Some(hosts))
}

/// Why hwloc refused an XML file, in the words of its parser (`line 4: AttValue: " or '
/// expected`): the file loaded again by `lama xml-reason` in a child process whose hwloc says
/// (HWLOC_XML_VERBOSE), as hwloc writes the reason to standard error, not to its caller.
pub(super) fn xml_reason(path: &std::path::Path) -> Option<String> {
    let me = std::env::current_exe().ok()?;
    let out = std::process::Command::new(me)
        .arg("xml-reason")
        .arg(path)
        .env("HWLOC_XML_VERBOSE", "1")
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    // libxml2: ":LINE: parser error : REASON"; hwloc's own checks: "...: REASON".
    let first = err
        .lines()
        .find(|l| l.contains("error") || l.contains("hwloc/xml"))?;
    let reason = match first.split_once(": parser error : ") {
        Some((at, why)) => format!("line {}: {why}", at.trim_start_matches(':').trim()),
        None => first.trim().to_string(),
    };
    Some(crate::quote_line(&reason))
}

pub(super) enum Source {
    Xml(PathBuf),
    Synthetic(String),
    ThisMachine,
}

/// The node sources in the order they were written on the command line.
pub(super) fn sources(a: &PlanArgs, m: Option<&ArgMatches>) -> Vec<Source> {
    let idx = |id: &str| -> Vec<usize> {
        m.and_then(|m| m.indices_of(id))
            .map(|i| i.collect())
            .unwrap_or_default()
    };
    let mut all: Vec<(usize, Source)> = Vec::new();
    let ti = idx("topology");
    for (k, p) in a.topology.iter().enumerate() {
        all.push((ti.get(k).copied().unwrap_or(k), Source::Xml(p.clone())));
    }
    let si = idx("synthetic");
    for (k, s) in a.synthetic.iter().enumerate() {
        all.push((
            si.get(k).copied().unwrap_or(k),
            Source::Synthetic(s.clone()),
        ));
    }
    if a.this_machine {
        all.push((
            idx("this_machine").first().copied().unwrap_or(0),
            Source::ThisMachine,
        ));
    }
    all.sort_by_key(|(i, _)| *i);
    let mut v: Vec<Source> = all.into_iter().map(|(_, s)| s).collect();
    if v.is_empty() {
        v.push(Source::ThisMachine);
    }
    v
}

/// A node model and, when devices were asked for, its devices (`None` for synthetic topologies,
/// which have none), read from one hwloc load.
pub(super) type Model = (NodeTopology, Option<Locality>);

pub(super) fn load(a: &PlanArgs, m: Option<&ArgMatches>) -> Result<Vec<Model>, String> {
    let devices = a.nics > 0
        || a.gpus > 0
        || a.device_weights.is_some()
        || a.policy.is_some()
        || a.mem.is_some();
    let mut models = Vec::new();
    for s in sources(a, m) {
        let file = match &s {
            Source::Xml(p) => Some(p.clone()),
            _ => None,
        };
        let (t, loc) = match s {
            Source::Xml(p) if devices => {
                NodeTopology::from_xml_file_with_devices(&p, false).map(|(t, l)| (t, Some(l)))
            }
            Source::Xml(p) => NodeTopology::from_xml_file(&p).map(|t| (t, None)),
            Source::Synthetic(d) => NodeTopology::from_synthetic(&d).map(|t| (t, None)),
            Source::ThisMachine if devices => {
                NodeTopology::this_machine_with_devices(false).map(|(t, _, l)| (t, Some(l)))
            }
            Source::ThisMachine => NodeTopology::this_machine().map(|t| (t, None)),
        }
        .map_err(|e| match file.as_deref().and_then(xml_reason) {
            Some(why) => format!("{e}: {why}"),
            None => e.to_string(),
        })?;
        let t = match &a.restrict {
            Some(list) => {
                // A CPU the node lacks is a typo to say, not a CPU to drop in silence.
                let wanted =
                    lama::idset::parse_list(list).map_err(|e| format!("--restrict: {e}"))?;
                let have = t.cpus();
                let missing: Vec<u32> = wanted
                    .iter()
                    .copied()
                    .filter(|c| !have.contains(c))
                    .collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "--restrict '{list}': node {} has no CPU {} (its CPUs are {})",
                        t.name(),
                        lama::idset::format_list(&missing),
                        lama::idset::format_list(&have)
                    ));
                }
                t.restrict_to_list(list)
                    .map_err(|e| format!("--restrict: {e}"))?
            }
            None => t,
        };
        models.push((t, loc));
    }
    Ok(models)
}

/// Node models and, per node of the job, which model it uses.
///
/// One topology without `--nodes` stands for every host of `hosts` when they are known.
pub(super) fn job_nodes(
    a: &PlanArgs,
    m: Option<&ArgMatches>,
    hosts: Option<&[String]>,
) -> Result<(Vec<Model>, Vec<usize>), String> {
    let models = load(a, m)?;
    let nodes = a.nodes.or(hosts.map(|h| h.len()));
    let per_node = match (models.len(), nodes) {
        (1, Some(0)) => return Err("--nodes must be at least 1".into()),
        (_, Some(n)) if n > MAX_NODES => {
            return Err(format!(
                "invalid --nodes {n}: at most {MAX_NODES} nodes can be planned"
            ))
        }
        (1, Some(n)) => vec![0; n],
        (k, Some(n)) if n != k => {
            return Err(format!("--nodes {n} does not match the {k} topologies given (give one topology for N identical nodes)"))
        }
        (k, _) => (0..k).collect(),
    };
    if let Some(h) = hosts.filter(|h| h.len() < per_node.len()) {
        return Err(format!(
            "the plan has {} nodes but the job's node list has {} host(s)",
            per_node.len(),
            h.len()
        ));
    }
    Ok((models, per_node))
}

/// The job's hosts (when known), each node's model index, the models, and per model the PUs an
/// MPI launcher's daemon may use there (OS indexes, logical order).
pub(super) type JobNodes = (Option<Vec<String>>, Vec<usize>, Vec<Model>, Vec<Vec<u32>>);

/// The running Slurm job's nodes (`--from-slurm`), else those the options describe. Errors
/// carry their kind.
pub(super) fn the_nodes(
    a: &PlanArgs,
    m: Option<&ArgMatches>,
    devices_wanted: bool,
) -> Result<JobNodes, (&'static str, String)> {
    if a.from_slurm {
        // One model per host, in the job's order.
        let (h, models, usable) =
            slurm_job::job_models(devices_wanted).map_err(|e| ("slurm", e))?;
        return Ok((Some(h), (0..models.len()).collect(), models, usable));
    }
    let hosts = job_hosts(a).map_err(|e| ("invalid-option", e))?;
    let (models, per_node) =
        job_nodes(a, m, hosts.as_deref()).map_err(|e| ("invalid-option", e))?;
    // A described node's daemon may use every PU the description leaves (after --restrict).
    let usable = models.iter().map(|(t, _)| t.pus().to_vec()).collect();
    Ok((hosts, per_node, models, usable))
}
