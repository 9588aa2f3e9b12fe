//! What NVIDIA's driver says of its GPUs that hwloc does not: which are split into MIG instances.
//!
//! The driver lists each GPU under `gpus/<bus id>/information` (with its `Device Minor`, the N of
//! `/dev/nvidiaN`), and each MIG GPU instance that exists as `capabilities/gpu<minor>/mig/gi<id>`.
//! Slurm (`AutoDetect=nvml`) and CUDA count every instance as a GPU of its own and number them
//! with the whole GPUs; lama must then not read a GPU index as hwloc's ([`super::allowed_gpus`]).
//! Read where the node's topology is read on the node itself: slurmd's probe for its cache, the
//! plugin's `topology=FILE`, `lama plan --this-machine`; never for a file of another machine.

use std::fs;
use std::path::Path;

use super::{Kind, Locality, Vendor};

/// Where the driver publishes its GPUs on a live node.
pub const DRIVER: &str = "/proc/driver/nvidia";

/// [`mark_mig`] with the driver of this node ([`DRIVER`]), for a topology read on the node itself.
pub fn mark_mig_here(loc: &mut Locality) {
    mark_mig(loc, Path::new(DRIVER));
}

/// Marks `loc`'s NVIDIA GPUs that have MIG instances under the driver folder `root`; a node
/// without the driver, or a folder that cannot be read, marks none.
pub fn mark_mig(loc: &mut Locality, root: &Path) {
    let Ok(gpus) = fs::read_dir(root.join("gpus")) else {
        return;
    };
    for gpu in gpus.flatten() {
        let bus = gpu.file_name().to_string_lossy().to_ascii_lowercase();
        let Ok(info) = fs::read_to_string(gpu.path().join("information")) else {
            continue;
        };
        let Some(minor) = field(&info, "Device Minor") else {
            continue;
        };
        if !has_instances(&root.join(format!("capabilities/gpu{minor}/mig"))) {
            continue;
        }
        for d in &mut loc.devices {
            if d.kind == Kind::Gpu
                && d.vendor == Vendor::Nvidia
                && d.pci
                    .as_deref()
                    .is_some_and(|p| p.eq_ignore_ascii_case(&bus))
            {
                d.mig = true;
            }
        }
    }
}

/// The value of a `Name: value` line of the driver's `information` file.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a GPU's `mig` capability folder holds a GPU instance (`gi1`, `gi2`, ...).
fn has_instances(mig: &Path) -> bool {
    fs::read_dir(mig).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("gi")
                .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}
