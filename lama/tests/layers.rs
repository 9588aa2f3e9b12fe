//! The crate's layers, as `lib.rs` maps them: the placement core uses neither `plugin` nor the
//! adapters, `plugin` uses no adapter, and the adapters (`slurm`, `flux`, `exec`) do not use each
//! other; and no two
//! modules import each other. Read from the sources' `crate::` and `super::` paths in code
//! (comments, where a module may point a reader anywhere, aside), so that a new import across a
//! layer fails here rather than in a reader's head.

use std::path::{Path, PathBuf};

#[path = "common/sources.rs"]
mod common;
use common::sources;

/// A source file without its comments.
fn code(f: &Path) -> String {
    std::fs::read_to_string(f)
        .expect("source")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The layer of a source file: its first folder under `src/`, or "core".
fn layer(src: &Path, file: &Path) -> &'static str {
    let rel = file.strip_prefix(src).expect("under src");
    match rel.components().next().and_then(|c| c.as_os_str().to_str()) {
        Some("plugin") => "plugin",
        Some("slurm") => "slurm",
        Some("flux") => "flux",
        Some("exec") => "exec",
        _ => "core",
    }
}

/// The layers a source file names through `crate::LAYER`, and `super::` from a layer's top.
fn used(text: &str) -> Vec<&'static str> {
    ["plugin", "slurm", "flux", "exec"]
        .into_iter()
        .filter(|l| text.contains(&format!("crate::{l}")))
        .collect()
}

#[test]
fn each_layer_uses_only_the_layers_above_it() {
    let src = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 30, "the sources: {files:?}");
    let allowed = |from: &str, to: &str| match from {
        "core" => false,
        "plugin" => to == "plugin",
        "slurm" | "flux" | "exec" => to == "plugin" || to == from,
        _ => unreachable!(),
    };
    let mut wrong = Vec::new();
    for f in &files {
        let text = code(f);
        let from = layer(&src, f);
        if f.ends_with("lib.rs") {
            continue; // the map names every layer
        }
        for to in used(&text) {
            if !allowed(from, to) {
                wrong.push(format!("{} ({from}) uses crate::{to}", f.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports across layers:\n{}",
        wrong.join("\n")
    );
}

/// A file's module path: `crate::a::b` for src/a/b.rs or src/a/b/mod.rs.
fn module_of(src: &Path, f: &Path) -> Vec<String> {
    let rel = f.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Vec<String> = vec!["crate".into()];
    parts.extend(
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Every path a file names from `crate::` or `super::`, as absolute segments.
fn paths_named(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        for (i, _) in text.match_indices(start) {
            if text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path: Vec<String> = if start == "crate::" {
                vec!["crate".into()]
            } else {
                // `super` of a/b.rs and of a/b/mod.rs alike is `a`.
                module[..module.len().saturating_sub(1)].to_vec()
            };
            let rest = &text[i + start.len()..];
            for seg in rest.split("::") {
                let name: String = seg
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() || name == "super" {
                    break;
                }
                let whole = name.len() == seg.len();
                path.push(name);
                if !whole {
                    break;
                }
            }
            out.push(path);
        }
    }
    out
}

/// No two modules import each other (a module and the module that declares it aside: Rust's
/// `super::` is how a child reads its parent's items).
#[test]
fn no_two_modules_import_each_other() {
    let src = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut files = Vec::new();
    sources(&src, &mut files);
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| !f.ends_with("lib.rs") && !f.ends_with("tests.rs"))
        .collect();
    let modules: Vec<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
    // For each file, the modules it names: the longest known module each path starts with.
    let uses: Vec<Vec<usize>> = files
        .iter()
        .zip(&modules)
        .map(|(f, m)| {
            let text = code(f);
            let mut named: Vec<usize> = paths_named(m, &text)
                .iter()
                .filter_map(|p| {
                    (0..modules.len())
                        .filter(|&k| p.starts_with(&modules[k]))
                        .max_by_key(|&k| modules[k].len())
                })
                .collect();
            named.sort_unstable();
            named.dedup();
            named
        })
        .collect();
    let nested = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let mut loops = Vec::new();
    for a in 0..files.len() {
        for &b in &uses[a] {
            if b > a && uses[b].contains(&a) && !nested(&modules[a], &modules[b]) {
                loops.push(format!(
                    "{} <-> {}",
                    modules[a].join("::"),
                    modules[b].join("::")
                ));
            }
        }
    }
    assert!(
        loops.is_empty(),
        "modules that import each other:\n{}",
        loops.join("\n")
    );
}
