//! How a plan is shown: text with per-rank pictures, JSON, and the drawings for SVG.

use lama::openmp::ThreadPlan;
use lama::spec::Request;
use lama::taskmap::{rfc34, TaskMap};
use lama::{idset, NodeTopology, Plan};
use serde_json::{json, Value};

use super::{ranks_by_node, Model, RankDevices};
use crate::svg;

/// Text lines fit this many columns unless `--wide`.
pub(super) const COLUMNS: usize = 100;

/// A rank's text: `  rank R  PICTURE  REST` on one line when it fits [`COLUMNS`] (or `wide`);
/// else the rank and REST first, its OpenMP places shortened to fit (`… (N places)`), then the
/// picture below, its packages wrapped over as many lines as they need.
pub(super) fn rank_line(
    (r, width): (usize, usize),
    picture: &str,
    rest: &str,
    wide: bool,
) -> String {
    let full = format!("  rank {r:>width$}  {picture}  {rest}");
    if wide || full.chars().count() <= COLUMNS {
        return full + "\n";
    }
    let head = format!("  rank {r:>width$}  ");
    let mut out = head.clone() + &shorten_places(rest, COLUMNS - head.len());
    out.push('\n');
    let indent = " ".repeat(head.len());
    let room = COLUMNS - indent.len();
    let mut line = String::new();
    for group in picture.split_inclusive(']') {
        let group: String = if group.chars().count() > room {
            group.chars().take(room - 2).chain("…]".chars()).collect()
        } else {
            group.to_string()
        };
        if !line.is_empty() && line.chars().count() + group.chars().count() > room {
            out.push_str(&format!("{indent}{line}\n"));
            line.clear();
        }
        line.push_str(&group);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out
}

/// `text` wrapped at spaces to [`COLUMNS`], continuation lines indented by `indent` spaces;
/// as it is with `wide`. Ends with a newline.
pub(super) fn wrap(text: &str, indent: usize, wide: bool) -> String {
    if wide || text.chars().count() <= COLUMNS {
        return format!("{text}\n");
    }
    let lead = text.len() - text.trim_start().len();
    lama::quote::fold(&text[..lead], &text[lead..], indent, COLUMNS)
}

/// `rest` with its `places {..},{..}` list cut to fit `room` columns, the count said.
fn shorten_places(rest: &str, room: usize) -> String {
    let Some(at) = rest.find(" places ") else {
        return rest.to_string();
    };
    let start = at + " places ".len();
    let end = rest[start..].find("  ").map_or(rest.len(), |e| start + e);
    let (before, places, after) = (&rest[..start], &rest[start..end], &rest[end..]);
    if rest.chars().count() <= room {
        return rest.to_string();
    }
    let all: Vec<&str> = places.split("},").collect();
    let mut kept = String::new();
    for (i, p) in all.iter().enumerate() {
        let piece = if i + 1 < all.len() {
            format!("{p}}},")
        } else {
            p.to_string()
        };
        let tail = format!("… ({} places)", all.len());
        if before.len() + kept.len() + piece.len() + tail.len() + after.len() > room && i > 0 {
            return format!("{before}{kept}{tail}{after}");
        }
        kept.push_str(&piece);
    }
    format!("{before}{kept}{after}")
}

/// What ranks get besides CPUs, when asked for.
pub(super) struct Extra<'a> {
    /// Every line whole, however long (`--wide`).
    pub(super) wide: bool,
    pub(super) devices: Option<&'a [RankDevices]>,
    pub(super) places: Option<&'a [ThreadPlan]>,
    pub(super) mems: Option<&'a [super::memory::RankMemory]>,
}

/// One drawing per node shape (nodes described alike: the same XML file, synthetic description
/// or this machine): the first node of that shape, its ranks and the devices they use.
pub(super) fn drawings<'a>(
    p: &Plan,
    nodes: &[&'a NodeTopology],
    models: &[Model],
    per_node: &[usize],
    devices: Option<&[RankDevices]>,
) -> Vec<svg::Drawing<'a>> {
    let by_node: Vec<Vec<(usize, Vec<u32>)>> = ranks_by_node(p, nodes.len())
        .into_iter()
        .map(|rs| rs.into_iter().map(|r| (r, p.cpus(r, nodes))).collect())
        .collect();
    let names = |r: usize| -> Vec<String> {
        devices
            .map(|d| d[r].0.iter().chain(&d[r].1).cloned().collect())
            .unwrap_or_default()
    };
    drawings_of(nodes, models, per_node, &by_node, names)
}

/// [`drawings`] from each node's ranks with their CPUs, and each rank's devices by name (the
/// automatic policy's plans draw through here too).
pub(super) fn drawings_of<'a>(
    nodes: &[&'a NodeTopology],
    models: &[Model],
    per_node: &[usize],
    by_node: &[Vec<(usize, Vec<u32>)>],
    devices_of: impl Fn(usize) -> Vec<String>,
) -> Vec<svg::Drawing<'a>> {
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for n in 0..nodes.len() {
        let shape = nodes[n].name();
        if seen.contains(&shape) {
            continue;
        }
        seen.push(shape);
        let same = (0..nodes.len())
            .filter(|&m| nodes[m].name() == shape)
            .count();
        let loc = &models[per_node[n]].1;
        let ranks = by_node[n].clone();
        let mut used: Vec<(String, Vec<u32>, Vec<usize>)> = Vec::new();
        if let Some(loc) = loc {
            for &(r, _) in &by_node[n] {
                for name in devices_of(r) {
                    match used.iter_mut().find(|u| u.0 == name) {
                        Some(u) => u.2.push(r),
                        None => {
                            let cpus = loc
                                .devices()
                                .iter()
                                .find(|d| d.name == name)
                                .map(|d| {
                                    let mut cpus = loc
                                        .place(d.place)
                                        .map(|p| p.cpus.to_vec())
                                        .unwrap_or_default();
                                    cpus.sort_unstable();
                                    cpus
                                })
                                .unwrap_or_default();
                            used.push((name, cpus, vec![r]));
                        }
                    }
                }
            }
        }
        let more = match same {
            1 => String::new(),
            k => format!("; {} more node(s) of this shape", k - 1),
        };
        out.push(svg::Drawing {
            node: nodes[n],
            title: format!(
                "node {n} ({}): {} rank(s){more}",
                nodes[n].name(),
                ranks.len()
            ),
            ranks,
            devices: used,
        });
    }
    out
}

pub(super) fn to_json(p: &Plan, nodes: &[&NodeTopology], req: &Request, extra: &Extra) -> Value {
    let ranks: Vec<Value> = (0..p.len())
        .map(|r| {
            let coord: serde_json::Map<String, Value> = p
                .coord_by_map(r)
                .into_iter()
                .map(|(l, v)| (l.token().to_string(), json!(v)))
                .collect();
            let mut v = json!({"rank": r, "node": p.placements()[r].node, "cpus": p.cpus(r, nodes), "coord": coord});
            if let Some((nics, gpus)) = extra.devices.map(|d| &d[r]) {
                v["nics"] = json!(nics);
                v["gpus"] = json!(gpus);
            }
            if let Some(t) = extra.places.map(|t| &t[r]) {
                v["threads"] = json!(t.threads());
                v["places"] = json!(t.places);
                v["omp_proc_bind"] = json!(t.bind.name());
            }
            if let Some(m) = extra.mems.map(|m| &m[r]) {
                super::memory::add_json(&mut v, m);
            }
            v
        })
        .collect();
    let tm = TaskMap::encode(&p.node_of_ranks());
    json!({
        "schema": super::SCHEMA,
        "rule": if req.open_mpi.is_some() { "open-mpi" } else { "map" },
        "request": {
            "map": req.map_string(),
            "bind": req.bind.to_string(),
            "mppr": req.mppr_string(),
            "order": req.order.token(),
            "np": p.len(),
            "oversubscribe": req.oversubscribe,
        },
        "nesting": p.nesting.iter().map(|l| l.token()).collect::<String>(),
        "open_mpi": open_mpi_words(p, req),
        "nodes": nodes.iter().map(|n| n.name()).collect::<Vec<_>>(),
        "ranks": ranks,
        "taskmap": rfc34::to_value(&tm),
    })
}

/// The simple level's placement in Open MPI's words, every default spelt out.
fn open_mpi_words(p: &Plan, req: &Request) -> Option<String> {
    req.open_mpi
        .as_ref()
        .and_then(|o| o.resolve(p.len()).ok())
        .map(|r| r.describe())
}

pub(super) fn to_text(p: &Plan, nodes: &[&NodeTopology], req: &Request, extra: &Extra) -> String {
    if let Some(words) = open_mpi_words(p, req) {
        let head = format!(
            "{words}  (Open MPI 5's rules)  ->  {} ranks on {} node(s)\n",
            p.len(),
            nodes.len()
        );
        let rest = to_text_body(p, nodes, extra);
        return head + &rest;
    }
    let head = format!(
        "map {}  bind {}  mppr {}  order {}  ->  {} ranks on {} node(s); nesting {}\n",
        req.map_string(),
        req.bind,
        if req.mppr.is_empty() {
            "-".to_string()
        } else {
            req.mppr_string()
        },
        req.order.token(),
        p.len(),
        nodes.len(),
        p.nesting.iter().map(|l| l.token()).collect::<String>(),
    );
    head + &to_text_body(p, nodes, extra)
}

fn to_text_body(p: &Plan, nodes: &[&NodeTopology], extra: &Extra) -> String {
    let mut s = String::new();
    let by_node = ranks_by_node(p, nodes.len());
    let width = p.len().saturating_sub(1).to_string().len();
    for (n, ranks) in by_node.iter().enumerate() {
        s.push_str(&format!(
            "node {n} ({}): {} rank(s)\n",
            nodes[n].name(),
            ranks.len()
        ));
        for &r in ranks {
            let cpus = idset::format_list(&p.cpus(r, nodes));
            let dev = match extra.devices.map(|d| &d[r]) {
                Some((nics, gpus)) => {
                    let list = |v: &[String]| {
                        if v.is_empty() {
                            "-".to_string()
                        } else {
                            v.join(",")
                        }
                    };
                    format!("  nics {}  gpus {}", list(nics), list(gpus))
                }
                None => String::new(),
            };
            let omp = match extra.places.map(|t| &t[r]) {
                Some(t) => format!(
                    "  threads {} {} places {}",
                    t.threads(),
                    t.bind.name(),
                    t.omp_places()
                ),
                None => String::new(),
            };
            let mem = extra
                .mems
                .map(|m| super::memory::text(&m[r]))
                .unwrap_or_default();
            s.push_str(&rank_line(
                (r, width),
                &nodes[n].picture(p.placements()[r].span),
                &format!("cpus {cpus}{dev}{omp}{mem}"),
                extra.wide,
            ));
        }
    }
    s.push_str(&format!(
        "TASK_MAP={}\n",
        rfc34::encode_wrapped(&TaskMap::encode(&p.node_of_ranks()))
    ));
    s
}
