//! `lama plan --format srun` and `--format pals`: each rank's CPUs, GPUs and memory as those
//! launchers bind them ([`lama::slurm::launcher::bindings`]).

use lama::locality::{Kind, Locality, Vendor};
use lama::slurm::launcher::RankBinding;

/// One rank for srun's and PALS' lists: its GPUs (device indexes of `loc`) numbered among the
/// node's GPUs, as Slurm and `--step-gpus` number them, and named in their runtime's variable.
pub(super) fn rank_binding(
    loc: Option<&Locality>,
    node: usize,
    cpus: Vec<u32>,
    gpus: &[usize],
    mems: Vec<u32>,
) -> RankBinding {
    let mut numbers = Vec::new();
    let mut vars: Vec<(String, String)> = Vec::new();
    if let Some(loc) = loc {
        let all = loc.candidates(Kind::Gpu, None);
        for &d in gpus {
            if let Some(i) = all.iter().position(|&g| g == d) {
                numbers.push(i as u32);
            }
            let Some(dev) = loc.devices().get(d) else {
                continue;
            };
            let var = match dev.vendor {
                Vendor::Nvidia => "CUDA_VISIBLE_DEVICES",
                Vendor::Amd => "ROCR_VISIBLE_DEVICES",
                Vendor::Intel => "ZE_AFFINITY_MASK",
                Vendor::Other => continue,
            };
            let Some(index) = dev.index else { continue };
            match vars.iter_mut().find(|(k, _)| k == var) {
                Some((_, v)) => v.push_str(&format!(",{index}")),
                None => vars.push((var.into(), index.to_string())),
            }
        }
    }
    RankBinding {
        node,
        cpus,
        gpus: numbers,
        gpu_env: vars,
        mems,
    }
}

/// The device indexes of `names` on `loc`.
pub(super) fn devices_named(loc: Option<&Locality>, names: &[String]) -> Vec<usize> {
    let Some(loc) = loc else { return Vec::new() };
    names
        .iter()
        .filter_map(|n| loc.devices().iter().position(|d| &d.name == n))
        .collect()
}
