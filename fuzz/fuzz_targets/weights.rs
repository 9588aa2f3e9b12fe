//! Device weights files, parsed against a real node's places and devices (the POWER8 with four
//! GPUs and the Intel with PCI devices, from the repository's topologies).
#![no_main]
use std::path::Path;
use std::sync::OnceLock;

use lama::locality::{Locality, Weights};
use libfuzzer_sys::fuzz_target;

fn nodes() -> &'static [Locality] {
    static NODES: OnceLock<Vec<Locality>> = OnceLock::new();
    NODES.get_or_init(|| {
        ["power8gpudistances.xml", "32em64t-2n8c2t-pci-normalio.xml"]
            .iter()
            .map(|f| {
                let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../tests/topologies")
                    .join(f);
                Locality::from_xml_file(&p).expect("repository topology")
            })
            .collect()
    })
}

fuzz_target!(|text: &str| {
    for loc in nodes() {
        if let Ok(w) = Weights::parse(text, loc) {
            for d in 0..loc.devices().len() {
                if let Some(edges) = w.edges(d) {
                    assert!(edges.iter().all(|&(p, _)| p < loc.place_count()));
                }
            }
        }
    }
});
