//! Every parse error the contract lists, with the precedence it defines.

use lama::spec::{Expert, Request, Simple, SpecError};

fn expert(
    map: Option<&str>,
    bind: Option<&str>,
    mppr: Option<&str>,
    order: Option<&str>,
) -> Result<Request, SpecError> {
    Request::expert(
        &Expert {
            map,
            bind,
            mppr,
            order,
        },
        None,
        false,
    )
}

fn reason(r: Result<Request, SpecError>) -> (String, String, Option<usize>) {
    let e = r.expect_err("should be rejected");
    (e.input.name().to_string(), e.reason.clone(), e.position)
}

#[test]
fn map_errors() {
    let m = |s| reason(expert(Some(s), Some("1c"), None, None));
    assert_eq!(
        m("csbnL"),
        ("map".into(), "cache level missing number".into(), Some(5))
    );
    assert_eq!(
        m("csbnhx"),
        (
            "map".into(),
            "unknown mapping level at position 6".into(),
            Some(6)
        )
    );
    assert_eq!(
        m("cL4sbnh"),
        (
            "map".into(),
            "unknown mapping level at position 2".into(),
            Some(2)
        )
    );
    assert_eq!(
        m("ccsbnh"),
        (
            "map".into(),
            "duplicate mapping levels at position 1 and 2".into(),
            Some(2)
        )
    );
    assert_eq!(
        m("csscbnh").1,
        "duplicate mapping levels at position 2 and 3"
    );
    assert_eq!(m("csbh").1, "missing required 'n' mapping token");
    assert_eq!(m("csbn").1, "missing required 'h' mapping token");
    assert!(m("sbnh")
        .1
        .starts_with("missing required mapping token for the current binding level"));
    // Unknown before duplicate, duplicate before missing, n before h.
    assert_eq!(m("ccx").1, "unknown mapping level at position 3");
    assert_eq!(m("cc").1, "duplicate mapping levels at position 1 and 2");
    assert_eq!(m("c").1, "missing required 'n' mapping token");
    // L3 is one token: positions count tokens.
    assert_eq!(
        m("L3L3nch").1,
        "duplicate mapping levels at position 1 and 2"
    );
}

#[test]
fn bind_errors() {
    let b = |s| reason(expert(Some("csbnh"), Some(s), None, None)).1;
    assert_eq!(b(""), "binding specification is empty");
    assert_eq!(b("c"), "missing digit(s) before binding level token");
    assert_eq!(b("1234c"), "too many digits");
    assert_eq!(b("1cs"), "only one binding level may be specified");
    assert_eq!(b("1x"), "unknown binding level");
    assert_eq!(b("0x"), "unknown binding level");
    assert_eq!(b("0c"), "binding width must be at least 1");
    assert_eq!(b("2n"), "binding width above 1 is not allowed at level n");
    assert_eq!(b("1L"), "cache level missing number");
    assert!(expert(Some("csbnh"), Some("1n"), None, None).is_ok());
    assert!(expert(Some("L2csbnh"), Some("999L2"), None, None).is_ok());
    // The binding is checked before the map.
    assert_eq!(reason(expert(Some("xx"), Some("0c"), None, None)).0, "bind");
}

#[test]
fn mppr_errors() {
    let p = |s| reason(expert(Some("csbnh"), Some("1c"), Some(s), None));
    assert_eq!(
        p("1:c,"),
        ("mppr".into(), "empty entry at position 2".into(), Some(2))
    );
    assert_eq!(p("c").1, "missing digit(s) before resource specification");
    assert_eq!(p("1234:c").1, "too many digits");
    assert_eq!(p("1c").1, "expected ':' between count and resource type");
    assert_eq!(p("1:").1, "resource type not specified");
    assert_eq!(p("1:L").1, "cache level missing number");
    assert_eq!(p("1:c,2:x").1, "unknown resource type at position 2");
    assert_eq!(p("1::c").1, "unknown resource type at position 1");
    assert_eq!(
        p("1:cs").1,
        "only one resource type may be listed per specification"
    );
    assert_eq!(
        p("1:c2").1,
        "only one resource type may be listed per specification"
    );
    assert_eq!(p("0:c").1, "count must be at least 1");
    assert_eq!(
        p("1:c,2:c").1,
        "duplicate resource types at position 1 and 2"
    );
    // Entry by entry: an invalid later entry beats an earlier duplicate.
    assert_eq!(p("1:c,1:c,0:s").1, "count must be at least 1");
    // Blanks around each part are fine; MPPR levels need not be in the map.
    let ok = expert(Some("csbnh"), Some("1c"), Some(" 1 : c , 2:L3 "), None).expect("valid");
    assert_eq!(ok.mppr_string(), "1:c,2:L3");
}

#[test]
fn order_errors() {
    assert_eq!(
        reason(expert(None, None, None, Some("x"))).1,
        "unsupported ordering option 'x'"
    );
    assert!(expert(None, None, None, Some("Sequential")).is_ok());
    // The MPPR is checked before the order.
    assert_eq!(reason(expert(None, None, Some("0:c"), Some("x"))).0, "mppr");
}

#[test]
fn messages_name_option_value_position_and_valid_values() {
    let e = expert(Some("csscbnh"), Some("1c"), None, None).unwrap_err();
    let m = e.message("--lama-");
    assert!(
        m.starts_with("invalid --lama-map 'csscbnh': duplicate mapping levels at position 2 and 3"),
        "{m}"
    );
    assert!(m.contains("('s')"), "{m}");
    assert!(m.contains("valid: "), "{m}");
}

#[test]
fn simple_level() {
    let s = |map_by, bind_to, rank_by| {
        Request::simple(
            &Simple {
                map_by,
                bind_to,
                rank_by,
            },
            None,
            false,
        )
    };
    // Open MPI 5's words are accepted as it spells them, socket as package's older name.
    for (m, b, r) in [
        (Some("package"), Some("core"), Some("slot")),
        (Some("socket:span"), None, Some("span")),
        (Some("ppr:2:package:pe=4"), None, None),
        (Some("core:pe=2:hwtcpus"), None, None),
        (Some("node:oversubscribe"), Some("none"), None),
        (Some("numa"), Some("l3cache:overload-allowed"), Some("fill")),
        (None, Some("package"), None),
    ] {
        let r = s(m, b, r).expect("valid");
        assert!(r.open_mpi.is_some());
    }
    assert!(
        s(Some("node:oversubscribe"), None, None)
            .expect("valid")
            .oversubscribe
    );
    // Open MPI's refusals, each named by the option at fault.
    for (bad, input, says) in [
        (
            (Some("core:pe=2"), None, None),
            "map-by",
            "a core holds one",
        ),
        (
            (Some("hwthread:pe=2"), None, None),
            "map-by",
            "a hwthread holds one",
        ),
        (
            (Some("package:pe=2"), Some("numa"), None),
            "bind-to",
            "cannot be combined",
        ),
        (
            (Some("package:pe=2"), Some("none"), None),
            "bind-to",
            "cannot be combined",
        ),
        (
            (Some("core"), Some("package"), None),
            "bind-to",
            "wider than the core",
        ),
        (
            (Some("node"), None, Some("fill")),
            "rank-by",
            "needs a mapping by an object",
        ),
        (
            (Some("slot"), None, Some("span")),
            "rank-by",
            "needs a mapping by an object",
        ),
        ((None, None, Some("package")), "rank-by", "Open MPI 4's"),
        (
            (Some("sockets"), None, None),
            "map-by",
            "did you mean 'socket'?",
        ),
        (
            (None, Some("cores"), None),
            "bind-to",
            "did you mean 'core'?",
        ),
        (
            (None, None, Some("spam")),
            "rank-by",
            "did you mean 'span'?",
        ),
        (
            (Some("core:spam"), None, None),
            "map-by",
            "did you mean 'span'?",
        ),
    ] {
        let e = s(bad.0, bad.1, bad.2).unwrap_err();
        assert_eq!(e.input.name(), input, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    for (bad, input) in [
        ((Some("board"), None, None), "map-by"),
        ((Some("seq"), None, None), "map-by"),
        ((Some("diagonal"), None, None), "map-by"),
        ((Some("ppr:0:core"), None, None), "map-by"),
        ((Some("core:pe=0"), None, None), "map-by"),
        ((None, Some("board"), None), "bind-to"),
        ((None, Some("quadrant"), None), "bind-to"),
        ((None, None, Some("diagonal")), "rank-by"),
    ] {
        let e = s(bad.0, bad.1, bad.2).unwrap_err();
        assert_eq!(e.input.name(), input, "{e}");
    }
    assert!(s(Some("board"), None, None)
        .unwrap_err()
        .reason
        .contains("expert map"));
}

#[test]
fn process_counts_have_a_limit() {
    use lama::spec::{Expert, Request, MAX_NP};
    let e = |np| {
        Request::expert(
            &Expert {
                map: Some("csbnh"),
                ..Expert::default()
            },
            Some(np),
            false,
        )
    };
    assert!(e(MAX_NP).is_ok());
    let err = e(MAX_NP + 1).unwrap_err();
    assert_eq!(err.input.name(), "np");
    assert_eq!(
        err.to_string(),
        format!("invalid --np '{}': at most 16777216 processes can be placed; valid: a whole number from 1 to 16777216", MAX_NP + 1)
    );
}
