//! GPUs named by UUID or as MIG instances (issue 65, part 3), on PRRTE's real Turin dump (4 H200,
//! each with its NVML UUID): a GPU is found by its UUID, never by its position in
//! `SLURM_STEP_GPUS`; a MIG instance or an unknown UUID is an error naming the variable. The
//! UUIDs and the `cudaN` they belong to come from the XML's own text.

use std::path::PathBuf;

use lama::cache::{decode, encode, Detail};
use lama::locality::{allowed_gpus, Locality};
use lama::NodeTopology;

fn turin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies/prrte-turin-4gpu-nvml-h200.xml")
}

/// From the XML's text: (cudaN's N, the NVIDIAUUID of the nvml device beside it under one PCI
/// device).
fn uuids() -> Vec<(u32, String)> {
    let xml = std::fs::read_to_string(turin()).expect("xml");
    let mut out = Vec::new();
    let (mut cuda, mut uuid): (Option<u32>, Option<String>) = (None, None);
    for line in xml.lines() {
        if line.contains("type=\"PCIDev\"") {
            cuda = None;
            uuid = None;
        }
        if let Some(at) = line.find("name=\"cuda") {
            let n: String = line[at + 10..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            cuda = n.parse().ok();
        }
        if let Some(at) = line.find("name=\"NVIDIAUUID\" value=\"") {
            uuid = Some(
                line[at + 25..]
                    .split('"')
                    .next()
                    .expect("a value")
                    .to_string(),
            );
        }
        if let (Some(c), Some(u)) = (cuda, uuid.clone()) {
            if !out.iter().any(|(k, _)| *k == c) {
                out.push((c, u));
            }
        }
    }
    out
}

fn load() -> Locality {
    NodeTopology::from_xml_file_with_devices(&turin(), true)
        .expect("Turin")
        .1
}

fn allowed(loc: &Locality, vars: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let get = |k: &str| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    };
    match allowed_gpus(loc, get) {
        Ok(Some(a)) => Ok(a
            .devices
            .iter()
            .map(|&d| loc.devices()[d].name.clone())
            .collect()),
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_gpu_named_by_uuid_is_found_by_its_uuid() {
    let loc = load();
    let ids = uuids();
    assert_eq!(ids.len(), 4, "the dump's four GPUs: {ids:?}");
    for (n, uuid) in &ids {
        // Slurm numbers the step's one GPU 0 in SLURM_STEP_GPUS' place of a renumbered index:
        // the UUID, not the position, decides.
        let got = allowed(
            &loc,
            &[("CUDA_VISIBLE_DEVICES", uuid), ("SLURM_STEP_GPUS", "0")],
        )
        .expect("found");
        assert_eq!(got, vec![format!("cuda{n}")], "{uuid}");
    }
    // Two of them, in Slurm's order, with the hardware indexes beside them.
    let two = format!("{},{}", ids[3].1, ids[1].1);
    let got = allowed(
        &loc,
        &[("CUDA_VISIBLE_DEVICES", &two), ("SLURM_STEP_GPUS", "0,1")],
    )
    .expect("found");
    assert_eq!(
        got,
        vec![format!("cuda{}", ids[3].0), format!("cuda{}", ids[1].0)]
    );
}

#[test]
fn mig_instances_and_unknown_uuids_are_errors() {
    let loc = load();
    let mig = "MIG-1e6e5e76-7c7b-5e4a-9f33-2b9ad2d1a0a1";
    let e = allowed(
        &loc,
        &[("CUDA_VISIBLE_DEVICES", mig), ("SLURM_STEP_GPUS", "2")],
    )
    .expect_err("a MIG instance");
    assert!(
        e.contains("CUDA_VISIBLE_DEVICES") && e.contains(mig) && e.contains("MIG"),
        "{e}"
    );
    let e = allowed(
        &loc,
        &[(
            "CUDA_VISIBLE_DEVICES",
            "GPU-00000000-1111-2222-3333-444444444444",
        )],
    )
    .expect_err("no such GPU");
    assert!(
        e.contains("GPU-00000000-1111-2222-3333-444444444444"),
        "{e}"
    );
    // The form drivers before 470.42.01 gave (Slurm writes it then): the GPU's own UUID.
    let (n, uuid) = uuids()[1].clone();
    assert_eq!(
        allowed(
            &loc,
            &[(
                "CUDA_VISIBLE_DEVICES",
                &format!("MIG-{uuid}/1/0,MIG-{uuid}/2/0")
            )]
        )
        .expect("the GPU the instances name"),
        vec![format!("cuda{n}")]
    );
    // Indexes still map through SLURM_STEP_GPUS where Slurm renumbered them.
    assert_eq!(
        allowed(
            &loc,
            &[("CUDA_VISIBLE_DEVICES", "0"), ("SLURM_STEP_GPUS", "2")]
        )
        .expect("an index"),
        vec!["cuda2".to_string()]
    );
}

#[test]
fn the_cache_keeps_the_uuids() {
    let (node, loc) = NodeTopology::from_xml_file_with_devices(&turin(), true).expect("Turin");
    let text = encode(&node, Some(&loc), None, None).expect("encode");
    let back = decode(&text, "cache", Detail::Devices)
        .expect("decode")
        .locality
        .expect("devices");
    let (n, uuid) = uuids()[2].clone();
    let got = allowed(&back, &[("CUDA_VISIBLE_DEVICES", &uuid)]).expect("found");
    assert_eq!(got, vec![format!("cuda{n}")]);
}

/// `--gpu-bind=verbose,none` binds nothing (Slurm only prints), so lama may choose among the
/// step's GPUs; `verbose,closest` and `single:1` bind task by task.
#[test]
fn verbose_none_is_no_binding() {
    use lama::locality::gpus_per_task;
    let with =
        |var: &'static str, v: &'static str| move |k: &str| (k == var).then(|| v.to_string());
    assert!(gpus_per_task(
        with("SLURMD_TRES_BIND", "gres/gpu:verbose,none"),
        "SLURMD_TRES_BIND"
    )
    .is_none());
    assert!(gpus_per_task(with("SLURM_GPU_BIND", "verbose,none"), "SLURM_GPU_BIND").is_none());
    assert!(gpus_per_task(with("SLURM_GPU_BIND", "none"), "SLURM_GPU_BIND").is_none());
    assert!(gpus_per_task(
        with("SLURMD_TRES_BIND", "gres/gpu:verbose,closest"),
        "SLURMD_TRES_BIND"
    )
    .is_some());
    assert!(gpus_per_task(with("SLURM_GPU_BIND", "single:1"), "SLURM_GPU_BIND").is_some());
}

/// The driver's folder of a node whose GPU at `bus` (minor number 3) has MIG instances, as
/// `/proc/driver/nvidia` shows it, written under a scratch folder.
fn driver_with_mig(bus: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("lama-nvidia-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let gpu = root.join("gpus").join(bus);
    std::fs::create_dir_all(&gpu).expect("scratch");
    std::fs::write(
        gpu.join("information"),
        format!("Model: \t\t NVIDIA H200\nBus Location: \t {bus}\nDevice Minor: \t 3\nGPU Excluded:\t No\n"),
    )
    .expect("write");
    std::fs::create_dir_all(root.join("capabilities/gpu3/mig/gi1/ci0")).expect("scratch");
    std::fs::create_dir_all(root.join("capabilities/gpu0/mig")).expect("scratch");
    root
}

/// On a node whose GPUs are partly split into MIG instances, Slurm's and CUDA's indexes count
/// the instances too: an index is refused with the variable and the split GPU named, while a
/// whole GPU named by UUID (gres.conf's env_uuid) is still found. The mark survives the cache.
#[test]
fn indexes_on_a_mig_node_are_refused() {
    let (node, mut loc) = NodeTopology::from_xml_file_with_devices(&turin(), true).expect("Turin");
    let (n, uuid) = uuids()[3].clone();
    let bus = loc
        .devices()
        .iter()
        .find(|d| d.name == format!("cuda{n}"))
        .and_then(|d| d.pci.clone())
        .expect("the GPU's bus id");
    let root = driver_with_mig(&bus);
    lama::locality::driver::mark_mig(&mut loc, &root);
    let _ = std::fs::remove_dir_all(&root);
    let marked: Vec<&str> = loc
        .devices()
        .iter()
        .filter(|d| d.mig)
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(
        marked,
        vec![format!("cuda{n}")],
        "only the GPU with an instance"
    );
    let text = encode(&node, Some(&loc), None, None).expect("encode");
    let back = decode(&text, "cache", Detail::Devices)
        .expect("decode")
        .locality
        .expect("devices");
    for l in [&loc, &back] {
        let e = allowed(
            l,
            &[("CUDA_VISIBLE_DEVICES", "0"), ("SLURM_STEP_GPUS", "2")],
        )
        .expect_err("an index on a MIG node");
        assert!(
            e.contains("CUDA_VISIBLE_DEVICES=0")
                && e.contains(&format!("cuda{n}"))
                && e.contains("env_uuid"),
            "{e}"
        );
        let (w, whole) = uuids()[0].clone();
        assert_eq!(
            allowed(
                l,
                &[("CUDA_VISIBLE_DEVICES", &whole), ("SLURM_STEP_GPUS", "0")]
            )
            .expect("by UUID"),
            vec![format!("cuda{w}")]
        );
        assert!(allowed(l, &[("CUDA_VISIBLE_DEVICES", &uuid)]).is_ok());
    }
}
