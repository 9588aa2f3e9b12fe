//! The job's environment as it concerns devices: the GPUs Slurm gave the step (read from the
//! variables its GPU plugin writes), and the variables each task gets for its own devices.

use super::{Device, Kind, Locality, LocalityError, TaskDevices, Vendor};
use crate::idset::join_commas;

/// The GPUs a job was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedGpus {
    /// Device indexes.
    pub devices: Vec<usize>,
    /// Per device, how its vendor's variable wrote it (Slurm's own numbering).
    pub entries: Vec<(usize, String)>,
}

/// The GPU part of a TRES binding (`SLURMD_TRES_BIND`, `SLURM_TRES_BIND`): Slurm writes
/// `gres/gpu:closest` or `gpu:closest`, parts joined by `+` or `;`.
pub fn gpu_bind_mode(bind: &str) -> Option<&str> {
    bind.split(['+', ';']).map(str::trim).find_map(|b| {
        b.strip_prefix("gres/gpu:")
            .or_else(|| b.strip_prefix("gpu:"))
    })
}

/// Why lama cannot choose among a step's GPUs when Slurm gives or binds them task by task, read
/// through `get`: `--gpus-per-task` (`SLURM_GPUS_PER_TASK`, or a GPU in `SLURM_TRES_PER_TASK`) or
/// a GPU binding other than `none` in `bind_var` (`SLURMD_TRES_BIND` in a task; srun reads
/// `SLURM_TRES_BIND` and `SLURM_GPU_BIND` from its environment). `None` when neither is set.
pub fn gpus_per_task(get: impl Fn(&str) -> Option<String>, bind_var: &str) -> Option<String> {
    let per_task = get("SLURM_TRES_PER_TASK").is_some_and(|t| t.contains("gpu"))
        || get("SLURM_GPUS_PER_TASK").is_some_and(|t| !t.trim().is_empty());
    if per_task {
        return Some("Slurm gives this step's GPUs task by task (--gpus-per-task or --ntasks-per-gpu), and its variables in each task then do not name the step's GPUs reliably, so lama cannot choose among them; ask for GPUs per node or per step (--gres=gpu:N, --gpus-per-node=N, --gpus=N), or leave GPUs to Slurm (no --lama-gpus)".into());
    }
    let bind = get(bind_var)?;
    let gpu =
        gpu_bind_mode(&bind).or_else(|| (bind_var == "SLURM_GPU_BIND").then_some(bind.trim()));
    // `verbose` only prints the binding: `verbose,none` binds nothing.
    let how = gpu.filter(|h| {
        let mut parts = h
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != "verbose");
        parts.next().is_some_and(|p| !p.starts_with("none"))
    })?;
    Some(format!(
        "Slurm binds GPUs task by task in this step (gpu:{how}, from --gpu-bind, --gpus-per-task or --ntasks-per-gpu), so lama cannot choose among them; ask for GPUs per node or per step (--gres=gpu:N, --gpus-per-node=N, --gpus=N) without --gpu-bind, or leave GPUs to Slurm (no --lama-gpus)"
    ))
}

/// The variables [`allowed_gpus`] reads to learn whether a step has GPUs at all; see
/// [`may_name_gpus`].
pub const GPU_VARIABLES: [&str; 7] = [
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "SLURM_GPUS_ON_NODE",
    "SLURM_TRES_PER_TASK",
    "SLURM_GPUS_PER_TASK",
    "SLURMD_TRES_BIND",
];

/// Whether [`allowed_gpus`], reading the same variables through `get`, could name a GPU or
/// fail. When it says no, `allowed_gpus` returns `Ok(None)` whatever the node's devices: a
/// step can then be placed without reading them (a quarter of a placed node's cost in the
/// plugin).
pub fn may_name_gpus(get: impl Fn(&str) -> Option<String>) -> bool {
    GPU_VARIABLES[..3].iter().any(|v| get(v).is_some())
        || get("SLURM_GPUS_ON_NODE")
            .and_then(|v| v.trim().parse::<u32>().ok())
            .is_some_and(|n| n > 0)
        || gpus_per_task(&get, "SLURMD_TRES_BIND").is_some()
}

/// The GPUs a job may use, from what Slurm's GPU allocation exported: `CUDA_VISIBLE_DEVICES`
/// (NVIDIA), `ROCR_VISIBLE_DEVICES` (AMD), `ZE_AFFINITY_MASK` (Intel), read through `get`.
///
/// Returns `None` when none is set (every GPU of the node counts), else the allowed devices and,
/// per device, the entry to export for it (Slurm may number the GPUs it gives from 0:
/// then `SLURM_STEP_GPUS` / `SLURM_JOB_GPUS` name the hardware indexes, entry by entry).
/// When `SLURM_GPUS_ON_NODE` says Slurm gave GPUs but no vendor variable names them (as with
/// `--gpu-bind=none` on 22.05), lama cannot tell which GPUs are the step's: that is an error.
/// So is a step whose GPUs Slurm gives or binds task by task (`--gpus-per-task`, seen in
/// `SLURM_TRES_PER_TASK` or `SLURM_GPUS_PER_TASK`; `--gpu-bind`, in `SLURMD_TRES_BIND`): each
/// task's variables then describe at most its own GPUs, and under `--gpus-per-task` Slurm 26.05's
/// `SLURM_STEP_GPUS` was seen naming a GPU the task's device cgroup did not allow.
pub fn allowed_gpus(
    loc: &Locality,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<AllowedGpus>, LocalityError> {
    if let Some(why) = gpus_per_task(&get, "SLURMD_TRES_BIND") {
        return Err(LocalityError::Allowed(why));
    }
    named_gpus(loc, get)
}

/// The GPUs the variables read through `get` name, as [`allowed_gpus`] reads them, whether or
/// not Slurm binds them task by task: in `user_init`, the step's environment names all the
/// step's GPUs even then (each task's names its own).
pub fn named_gpus(
    loc: &Locality,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<AllowedGpus>, LocalityError> {
    let mut allowed = Vec::new();
    let mut names = Vec::new();
    let mut any = false;
    let slurm = get("SLURM_STEP_GPUS")
        .or_else(|| get("SLURM_JOB_GPUS"))
        .filter(|v| !v.trim().is_empty());
    for (var, vendor) in [
        ("CUDA_VISIBLE_DEVICES", Vendor::Nvidia),
        ("ROCR_VISIBLE_DEVICES", Vendor::Amd),
        ("ZE_AFFINITY_MASK", Vendor::Intel),
    ] {
        let Some(value) = get(var) else { continue };
        any = true;
        let entries: Vec<&str> = value
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        // Slurm's hardware indexes stand beside the variable's entries only where those are
        // indexes Slurm renumbered: a UUID or MIG entry is never matched by position.
        let all_indexes = entries.iter().all(|e| gpu_index(e).is_some());
        let hw: Vec<&str> = match &slurm {
            Some(s) if all_indexes && s.split(',').count() == entries.len() => {
                s.split(',').map(str::trim).collect()
            }
            _ => entries.clone(),
        };
        // MIG instances are numbered with the whole GPUs, by Slurm and by CUDA alike.
        let split = |d: &&Device| d.mig && d.vendor == vendor;
        let any_split = loc.devices.iter().any(|d| split(&d));
        for (entry, hw) in entries.iter().zip(hw) {
            let d = match gpu_index(hw) {
                Some(_) if any_split => {
                    let names: Vec<&str> = loc
                        .devices
                        .iter()
                        .filter(split)
                        .map(|d| d.name.as_str())
                        .collect();
                    return Err(LocalityError::Allowed(format!(
                        "{var}={value}: this node's GPU(s) {} are split into MIG instances, which Slurm and CUDA number together with the whole GPUs, so the index '{entry}' does not tell lama which GPU (and so which CPUs) it is; name GPUs by UUID (Flags=env_uuid in gres.conf), or leave GPUs to Slurm (no --lama-gpus)",
                        names.join(", ")
                    )));
                }
                Some(idx) => loc.devices.iter().position(|d| {
                    d.kind == Kind::Gpu && d.vendor == vendor && d.index == Some(idx)
                }),
                None => Some(by_uuid(loc, vendor, var, &value, entry)?),
            };
            if let Some(d) = d {
                if !allowed.contains(&d) {
                    allowed.push(d);
                    names.push((d, entry.to_string()));
                }
            }
        }
    }
    if !any {
        let given = get("SLURM_GPUS_ON_NODE").and_then(|v| v.trim().parse::<u32>().ok());
        if let Some(n) = given.filter(|&n| n > 0) {
            return Err(LocalityError::Allowed(format!(
                "Slurm gave the step {n} GPU(s) on this node but did not say which (no CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or ZE_AFFINITY_MASK, as with --gpu-bind=none on Slurm 22.05), so lama cannot choose among them; drop --gpu-bind=none, or leave GPUs to Slurm (no --lama-gpus)"
            )));
        }
    }
    Ok(any.then_some(AllowedGpus {
        devices: allowed,
        entries: names,
    }))
}

/// A GPU index entry (`3`; a Level Zero sub-device `0.1` belongs to device 0).
fn gpu_index(entry: &str) -> Option<u32> {
    let whole = entry.split('.').next()?;
    (!whole.is_empty() && whole.bytes().all(|b| b.is_ascii_digit()))
        .then(|| whole.parse().ok())
        .flatten()
}

/// The GPU an entry names by UUID (`GPU-8932f937-...`, or an AMD unique id), matched against
/// the UUIDs hwloc reported (slurmd's cache keeps them), and a MIG instance in the form that
/// names its GPU (`MIG-GPU-<uuid>/1/0`) by its GPU; a MIG instance named by its own UUID
/// (`MIG-<uuid>`) or a UUID no GPU of the node has is an error naming the variable and the entry,
/// never a guess.
fn by_uuid(
    loc: &Locality,
    vendor: Vendor,
    var: &str,
    value: &str,
    entry: &str,
) -> Result<usize, LocalityError> {
    // Before driver 470.42.01 a MIG instance was named after its GPU: MIG-GPU-<uuid>/<gi>/<ci>.
    let entry = match entry.strip_prefix("MIG-") {
        Some(parent) if parent.starts_with("GPU-") && parent.contains('/') => {
            parent.split('/').next().unwrap_or(parent)
        }
        Some(_) => {
            return Err(LocalityError::Allowed(format!(
                "{var}={value}: '{entry}' is an NVIDIA MIG instance named by its own UUID, which hwloc does not list, so lama cannot tell which GPU (and so which CPUs) it belongs to; leave GPUs to Slurm (no --lama-gpus)"
            )))
        }
        None => entry,
    };
    let plain = |u: &str| u.trim_start_matches("GPU-").to_ascii_lowercase();
    loc.devices
        .iter()
        .position(|d| {
            d.kind == Kind::Gpu
                && d.vendor == vendor
                && d.uuid.as_deref().is_some_and(|u| plain(u) == plain(entry))
        })
        .ok_or_else(|| {
            LocalityError::Allowed(format!(
                "{var}={value}: '{entry}' is neither a GPU index nor the UUID of a GPU of this node as hwloc reports them; leave GPUs to Slurm (no --lama-gpus), or restart slurmd so that its topology cache records the GPUs' UUIDs"
            ))
        })
}

/// The environment one task gets for its devices: `LAMA_NICS`, `UCX_NET_DEVICES`, `LAMA_GPUS`, and
/// `CUDA_VISIBLE_DEVICES` / `ROCR_VISIBLE_DEVICES` / `ZE_AFFINITY_MASK` for the vendors it got.
/// `gpu_entry` overrides how a GPU is written in its vendor's variable. With `also_visible`
/// (`--lama-gpu-visibility=all`), the runtimes' variables list those GPUs too, after the task's
/// own, so that device 0 in the task is still its nearest; `LAMA_GPUS` names its own only.
pub fn task_env(
    loc: &Locality,
    picks: &TaskDevices,
    want_nics: bool,
    want_gpus: bool,
    gpu_entry: &[(usize, String)],
    also_visible: Option<&[usize]>,
) -> Vec<(String, String)> {
    let devs = &loc.devices;
    // Values are written straight from the device names: every task of a step builds its own.
    let mut env = Vec::with_capacity(usize::from(want_nics) * 2 + usize::from(want_gpus) * 2);
    if want_nics {
        let nics = || picks.nics.iter().map(|&d| &devs[d]);
        env.push((
            "LAMA_NICS".into(),
            join_commas(nics().map(|d| d.name.as_str())),
        ));
        env.push((
            "UCX_NET_DEVICES".into(),
            join_commas(nics().filter_map(|d| d.ucx.as_deref())),
        ));
    }
    if want_gpus {
        env.push((
            "LAMA_GPUS".into(),
            join_commas(picks.gpus.iter().map(|&d| devs[d].name.as_str())),
        ));
        for (var, vendor) in [
            ("CUDA_VISIBLE_DEVICES", Vendor::Nvidia),
            ("ROCR_VISIBLE_DEVICES", Vendor::Amd),
            ("ZE_AFFINITY_MASK", Vendor::Intel),
        ] {
            let others = also_visible
                .unwrap_or_default()
                .iter()
                .filter(|d| !picks.gpus.contains(d));
            let entries: Vec<String> = picks
                .gpus
                .iter()
                .chain(others)
                .filter(|&&d| devs[d].kind == Kind::Gpu && devs[d].vendor == vendor)
                .filter_map(|&d| {
                    gpu_entry
                        .iter()
                        .find(|(g, _)| *g == d)
                        .map(|(_, e)| e.clone())
                        .or_else(|| devs[d].index.map(|i| i.to_string()))
                })
                .collect();
            if !entries.is_empty() {
                env.push((var.into(), join_commas(&entries)));
            }
        }
    }
    env
}
