//! `lama plan --format svg`: an lstopo-like picture of each distinct node shape. Boxes nest as
//! the node's objects do (boards, packages, NUMA nodes, caches, cores); each hardware thread is
//! filled with the colour of the rank bound to it; NICs and GPUs sit in the box of their
//! locality with the ranks that use them; a legend lists the ranks.

use lama::{Level, NodeTopology};

/// One node to draw: its shape, the ranks on it and the devices they use.
pub struct Drawing<'a> {
    pub node: &'a NodeTopology,
    pub title: String,
    /// Each rank on the node and its CPUs (OS indexes).
    pub ranks: Vec<(usize, Vec<u32>)>,
    /// Each device used: name, the CPUs of its locality, the ranks using it.
    pub devices: Vec<(String, Vec<u32>, Vec<usize>)>,
}

const PU_W: u32 = 30;
const PU_H: u32 = 20;
const PAD: u32 = 4;
const LABEL: u32 = 14;
const DEV_H: u32 = 18;
const MAX_ROW: u32 = 1500;

/// Levels drawn as boxes, outermost first when two have the same CPUs.
const BOXES: [(Level, &str); 7] = [
    (Level::Board, "Group"),
    (Level::Socket, "Package"),
    (Level::Numa, "NUMA"),
    (Level::L3, "L3"),
    (Level::L2, "L2"),
    (Level::L1, "L1"),
    (Level::Core, "Core"),
];

/// A rank's colour: hues a golden angle apart, so neighbours differ and none repeats soon.
pub fn rank_color(rank: usize) -> String {
    let h = (rank as f64 * 137.507_764) % 360.0;
    let (s, l) = (0.65, if rank.is_multiple_of(2) { 0.55 } else { 0.45 });
    let c = (1.0 - (2.0 * l - 1.0_f64).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let m = l - c / 2.0;
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// A box of the tree: a span of PU positions, its label, its children (none for a PU).
struct Node {
    start: u32,
    end: u32,
    label: String,
    leaf: bool,
    children: Vec<Node>,
    /// Devices whose locality is this box (the smallest holding their CPUs).
    devices: Vec<usize>,
}

fn tree(topo: &NodeTopology) -> Node {
    let mut objects: Vec<(u32, u32, usize, String)> = Vec::new();
    for (order, (level, name)) in BOXES.iter().enumerate() {
        for (i, s) in topo.objects(*level).iter().enumerate() {
            let label = match level {
                Level::L3 | Level::L2 | Level::L1 => name.to_string(),
                _ => format!("{name} {i}"),
            };
            objects.push((s.start, s.end, order, label));
        }
    }
    // Outer boxes first: by start, then the widest, then the outermost level.
    objects.sort_by_key(|&(a, b, order, _)| (a, std::cmp::Reverse(b), order));
    let pus = topo.pus();
    let mut root = Node {
        start: 0,
        end: pus.len() as u32,
        label: "Machine".into(),
        leaf: false,
        children: Vec::new(),
        devices: Vec::new(),
    };
    for (a, b, _, label) in objects {
        insert(&mut root, a, b, label, false);
    }
    for (p, os) in pus.iter().enumerate() {
        insert(&mut root, p as u32, p as u32 + 1, format!("PU {os}"), true);
    }
    root
}

/// Puts a box in the smallest box holding it; a box with the same CPUs as its parent joins the
/// parent's label (`Package 0 · L3`), as lstopo would draw them one inside the other.
fn insert(parent: &mut Node, a: u32, b: u32, label: String, leaf: bool) {
    if !leaf && parent.start == a && parent.end == b {
        parent.label = format!("{} · {label}", parent.label);
        return;
    }
    if let Some(c) = parent
        .children
        .iter_mut()
        .find(|c| !c.leaf && c.start <= a && b <= c.end)
    {
        return insert(c, a, b, label, leaf);
    }
    parent.children.push(Node {
        start: a,
        end: b,
        label,
        leaf,
        children: Vec::new(),
        devices: Vec::new(),
    });
}

/// Attaches device `d` to the smallest box holding all its locality's PU positions.
fn attach(node: &mut Node, span: (u32, u32), d: usize) {
    match node
        .children
        .iter_mut()
        .find(|c| !c.leaf && c.start <= span.0 && span.1 <= c.end)
    {
        Some(c) => attach(c, span, d),
        None => node.devices.push(d),
    }
}

struct Ctx<'a> {
    topo: &'a NodeTopology,
    /// Per PU position, the ranks bound to it.
    owners: Vec<Vec<usize>>,
    devices: &'a [(String, Vec<u32>, Vec<usize>)],
    out: String,
}

fn size(n: &Node, wrap: bool) -> (u32, u32) {
    if n.leaf {
        return (PU_W, PU_H);
    }
    let (rows, w) = rows(n, wrap);
    let h: u32 = rows.iter().map(|r| r.1).sum::<u32>() + PAD * (rows.len() as u32 - 1);
    let dev = if n.devices.is_empty() {
        0
    } else {
        PAD + DEV_H * n.devices.len() as u32
    };
    (
        w.max(label_width(&n.label)) + 2 * PAD,
        LABEL + h + dev + 2 * PAD,
    )
}

fn label_width(s: &str) -> u32 {
    s.chars().count() as u32 * 6 + 4
}

/// Children in rows (the machine's children wrap at MAX_ROW): each row's children and height,
/// and the widest row's width.
fn rows(n: &Node, wrap: bool) -> (Vec<(Vec<&Node>, u32)>, u32) {
    let mut rows: Vec<(Vec<&Node>, u32, u32)> = Vec::new();
    for c in &n.children {
        let (w, h) = size(c, false);
        match rows.last_mut() {
            Some(last) if !(wrap && last.1 + PAD + w > MAX_ROW) => {
                last.1 += PAD + w;
                last.2 = last.2.max(h);
                last.0.push(c);
            }
            _ => rows.push((vec![c], w, h)),
        }
    }
    if rows.is_empty() {
        rows.push((Vec::new(), 0, 0));
    }
    let width = rows.iter().map(|r| r.1).max().unwrap_or(0);
    (rows.into_iter().map(|(c, _, h)| (c, h)).collect(), width)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn draw(ctx: &mut Ctx, n: &Node, x: u32, y: u32, wrap: bool) {
    let (w, h) = size(n, wrap);
    if n.leaf {
        let owners = &ctx.owners[n.start as usize];
        let fill = owners
            .first()
            .map_or("#ffffff".to_string(), |&r| rank_color(r));
        let os = ctx.topo.pus()[n.start as usize];
        let text = match owners.len() {
            0 => String::new(),
            1 => owners[0].to_string(),
            k => format!("{}+{}", owners[0], k - 1),
        };
        let who: Vec<String> = owners.iter().map(|r| r.to_string()).collect();
        ctx.out.push_str(&format!(
            "<g><title>PU {os}: rank {}</title><rect x=\"{x}\" y=\"{y}\" width=\"{PU_W}\" height=\"{PU_H}\" fill=\"{fill}\" stroke=\"#333\"/><text x=\"{}\" y=\"{}\" class=\"pu\">{text}</text></g>\n",
            if who.is_empty() { "none".to_string() } else { who.join(",") },
            x + PU_W / 2,
            y + 14
        ));
        return;
    }
    ctx.out.push_str(&format!(
        "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" class=\"box\"/><text x=\"{}\" y=\"{}\" class=\"label\">{}</text>\n",
        x + PAD,
        y + LABEL - 3,
        esc(&n.label)
    ));
    let (rows, _) = rows(n, wrap);
    let mut cy = y + PAD + LABEL;
    for (row, rh) in &rows {
        let mut cx = x + PAD;
        for c in row {
            draw(ctx, c, cx, cy, false);
            cx += size(c, false).0 + PAD;
        }
        cy += rh + PAD;
    }
    for &d in &n.devices {
        let (name, _, users) = &ctx.devices[d];
        let who: Vec<String> = users.iter().map(|r| r.to_string()).collect();
        let text = format!(
            "{name} ← ranks {}",
            if who.is_empty() {
                "none".into()
            } else {
                who.join(",")
            }
        );
        ctx.out.push_str(&format!(
            "<rect x=\"{}\" y=\"{cy}\" width=\"{}\" height=\"{}\" rx=\"4\" class=\"dev\"/><text x=\"{}\" y=\"{}\" class=\"label\">{}</text>\n",
            x + PAD,
            w - 2 * PAD,
            DEV_H - 2,
            x + 2 * PAD,
            cy + 12,
            esc(&text)
        ));
        cy += DEV_H;
    }
}

/// The whole picture: one drawing per node shape, then the legend of ranks.
pub fn svg(drawings: &[Drawing]) -> String {
    let mut body = String::new();
    let mut y = 10;
    let mut width = 400;
    let mut legend: Vec<(usize, Vec<u32>)> = Vec::new();
    for d in drawings {
        let mut root = tree(d.node);
        for (i, (_, cpus, _)) in d.devices.iter().enumerate() {
            let pos: Vec<u32> = d
                .node
                .pus()
                .iter()
                .enumerate()
                .filter(|(_, os)| cpus.contains(os))
                .map(|(p, _)| p as u32)
                .collect();
            let span = match (pos.first(), pos.last()) {
                (Some(&a), Some(&b)) => (a, b + 1),
                _ => (root.start, root.end),
            };
            attach(&mut root, span, i);
        }
        let mut owners = vec![Vec::new(); d.node.pus().len()];
        for (rank, cpus) in &d.ranks {
            for (p, os) in d.node.pus().iter().enumerate() {
                if cpus.contains(os) {
                    owners[p].push(*rank);
                }
            }
            legend.push((*rank, cpus.clone()));
        }
        body.push_str(&format!(
            "<text x=\"10\" y=\"{}\" class=\"title\">{}</text>\n",
            y + 14,
            esc(&d.title)
        ));
        y += 22;
        let mut ctx = Ctx {
            topo: d.node,
            owners,
            devices: &d.devices,
            out: String::new(),
        };
        draw(&mut ctx, &root, 10, y, true);
        let (w, h) = size(&root, true);
        body.push_str(&ctx.out);
        width = width.max(w + 20);
        y += h + 16;
    }
    legend.sort_by_key(|(r, _)| *r);
    let per_row = ((width - 20) / 170).max(1) as usize;
    body.push_str(&format!(
        "<text x=\"10\" y=\"{}\" class=\"title\">ranks</text>\n",
        y + 14
    ));
    y += 22;
    for (i, (rank, cpus)) in legend.iter().enumerate() {
        let (lx, ly) = (
            10 + (i % per_row) as u32 * 170,
            y + (i / per_row) as u32 * 20,
        );
        body.push_str(&format!(
            "<rect x=\"{lx}\" y=\"{ly}\" width=\"16\" height=\"14\" fill=\"{}\" stroke=\"#333\"/><text x=\"{}\" y=\"{}\" class=\"legend\">rank {rank}: cpus {}</text>\n",
            rank_color(*rank),
            lx + 20,
            ly + 11,
            esc(&lama::idset::format_list(cpus))
        ));
    }
    y += legend.len().div_ceil(per_row) as u32 * 20 + 10;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{y}\" viewBox=\"0 0 {width} {y}\" font-family=\"sans-serif\">\n<style>.box{{fill:#f2f2f2;stroke:#555}}.dev{{fill:#fff7d6;stroke:#a08000}}.label{{font-size:10px}}.pu{{font-size:9px;text-anchor:middle}}.title{{font-size:13px;font-weight:bold}}.legend{{font-size:10px}}</style>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n{body}</svg>\n"
    )
}
