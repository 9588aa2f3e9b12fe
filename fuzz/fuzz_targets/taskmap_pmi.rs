//! PMI-1 `(vector,...)` maps: decode, encode back, and decode again to the same map; any form
//! reads through `parse_any`.
#![no_main]
use lama::taskmap::{parse_any, pmi};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(map) = pmi::decode(text) {
        assert_eq!(pmi::decode(&pmi::encode(&map)).ok(), Some(map));
    }
    let _ = parse_any(text);
});
