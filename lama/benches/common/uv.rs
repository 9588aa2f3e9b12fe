//! The SGI UV of `tests/topologies/` (384 PUs, 24 NUMA nodes, 7 NICs) as the plugin meets it in
//! a step: its cache written as slurmd writes it, and a step of 192 tasks, one per core
//! (`--lama-map=csbnh --lama-bind=1c`). Shared by `benches/node.rs` and `examples/node_path.rs`,
//! which time and count the same per-node work.

use std::path::PathBuf;

use lama::cache::{self, Node};
use lama::locality::Locality;
use lama::plugin::{choose_devices, cores_to_cpus, place_node, NodeDevices, TaskBinding};
use lama::spec::{Expert, Request};
use lama::NodeTopology;

/// The UV's cache in a temporary folder (removed on drop) and the step's request.
pub struct Uv {
    /// The cache file, as `n1`'s.
    pub file: PathBuf,
    dir: PathBuf,
    all: Vec<u32>,
    req: Request,
    ranks: Vec<u32>,
}

impl Uv {
    /// Reads the UV with hwloc and writes its cache; `tag` names the temporary folder.
    pub fn new(tag: &str) -> Uv {
        let xml = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/topologies/192em64t-12gr2n8c2t.xml");
        let (topo, loc) =
            NodeTopology::from_xml_file_with_devices(&xml, true).expect("UV topology");
        let topo = topo.with_name("n1");
        let dir = std::env::temp_dir().join(format!("lama-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("topology-n1.json");
        cache::write(&file, &topo, &loc, None, cache::Writer::Root).expect("cache");
        let e = Expert {
            map: Some("csbnh"),
            bind: Some("1c"),
            mppr: None,
            order: None,
        };
        Uv {
            file,
            dir,
            all: topo.cpus(),
            req: Request::expert(&e, Some(192), false).expect("request"),
            ranks: (0..192).collect(),
        }
    }

    /// What `user_init` does after reading the cache: checks it, turns the step's cores (all of
    /// them) into CPUs and places the tasks.
    pub fn place(&self, n: &Node) -> Vec<TaskBinding> {
        cache::check_fresh(&n.topology, "n1", &self.all).expect("fresh");
        let cpus = cores_to_cpus(&n.topology, "0-191", None).expect("cores");
        place_node(&n.topology, &cpus, &self.req, &self.ranks, false).expect("place")
    }

    /// A NIC for each placed task (`--lama-nics=1`).
    pub fn choose(loc: &Locality, tasks: &[TaskBinding]) -> NodeDevices {
        choose_devices(loc, tasks, (1, 0), None, |_| None).expect("nics")
    }
}

impl Drop for Uv {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
