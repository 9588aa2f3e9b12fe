//! The simple level: map-by (with ppr, pe= and modifiers), bind-to and rank-by, one per line.
#![no_main]
use lama::spec::{Request, Simple};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let f: Vec<&str> = text.splitn(3, '\n').collect();
    let opts = Simple {
        map_by: f.first().copied(),
        bind_to: f.get(1).copied(),
        rank_by: f.get(2).copied(),
    };
    match Request::simple(&opts, None, false) {
        Ok(req) => {
            // The map it builds is a valid expert map with the binding's level.
            assert!(req.map.contains(&req.bind.level) || req.bind.level == lama::Level::Node);
        }
        Err(e) => assert!(e.message("--lama-").contains("valid")),
    }
});
