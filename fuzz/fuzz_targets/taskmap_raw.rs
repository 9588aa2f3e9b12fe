//! Raw task maps (node-ordered idsets): decode, encode back, and decode again to the same map.
#![no_main]
use lama::taskmap::raw;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(map) = raw::decode(text) {
        assert_eq!(map.canonical(), map);
        assert_eq!(raw::decode(&raw::encode(&map)).ok(), Some(map));
    }
});
