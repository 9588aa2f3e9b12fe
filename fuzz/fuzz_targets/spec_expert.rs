//! The expert strings: map, bind, MPPR and order (one per line), alone and as a request. A
//! request that parses prints back to strings that parse to the same request.
#![no_main]
use lama::spec::{parse_bind, parse_map, parse_mppr, parse_order, Expert, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let f: Vec<&str> = text.splitn(4, '\n').collect();
    let field = |i: usize| f.get(i).copied();
    for s in &f {
        let _ = parse_mppr(s);
        let _ = parse_order(s);
        if let Ok(b) = parse_bind(s) {
            assert_eq!(parse_bind(&b.to_string()).ok(), Some(b));
            let _ = parse_map(text, &b);
        }
    }
    let opts = Expert {
        map: field(0),
        bind: field(1),
        mppr: field(2),
        order: field(3),
    };
    if let Ok(req) = Request::expert(&opts, None, false) {
        let map = req.map_string();
        let bind = req.bind.to_string();
        let mppr = req.mppr_string();
        let again = Expert {
            map: Some(&map),
            bind: Some(&bind),
            mppr: (!mppr.is_empty()).then_some(mppr.as_str()),
            order: Some(req.order.token()),
        };
        let back = Request::expert(&again, None, false).expect("a printed request parses");
        assert_eq!(back, req);
    } else if let Err(e) = Request::expert(&opts, None, false) {
        assert!(!e.message("--lama-").is_empty());
    }
});
