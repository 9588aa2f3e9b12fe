//! Every message lama's library, plugin and CLI can print is in the catalogue,
//! `docs/messages.md`, with its cause and fix.
//!
//! Messages are the string literals given to `#[error(...)]`, `eprintln!`, the plugin's log, and
//! the error constructors (`bad`, `alloc_err`, `Err(format!(...))`, `SpecError::new`, ...). Each
//! is cut at its placeholders; every piece of at least three words must appear in the catalogue
//! word for word.

use std::path::Path;

#[path = "common/sources.rs"]
mod common;
use common::sources;

const MARKERS: [&str; 10] = [
    "#[error(",
    "eprintln!(",
    "bad(",
    "alloc_err(",
    "Err(",
    "map_err(|e| format!(",
    "spank_log(",
    "SpecError::new(",
    "ok_or_else(|| format!(",
    "e(format!(",
];

/// The first string literal within `window` (the text after a marker, up to its statement's end).
fn first_literal(window: &str) -> Option<&str> {
    let start = window.find('"')? + 1;
    let len = window[start..].find('"')?;
    Some(&window[start..start + len])
}

/// The pieces of a message between placeholders, kept when they have three words or more.
fn pieces(message: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    for c in message.chars() {
        match c {
            '{' => {
                depth += 1;
                out.push(std::mem::take(&mut cur));
            }
            '}' => depth -= 1,
            _ if depth == 0 => cur.push(c),
            _ => {}
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|p| {
            p.replace("\\n", " ")
                .replace("\\\"", "\"")
                .trim()
                .to_string()
        })
        .filter(|p| p.split_whitespace().count() >= 3)
        .collect()
}

#[test]
fn every_message_is_in_the_catalogue() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let catalogue =
        std::fs::read_to_string(root.join("docs/messages.md")).expect("docs/messages.md");
    let mut files = Vec::new();
    for dir in ["lama/src", "spank/src", "probe/src", "flux/src", "cli/src"] {
        sources(&root.join(dir), &mut files);
    }
    let mut missing = Vec::new();
    let mut found = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source");
        // Unit tests inside a source file are not messages.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for marker in MARKERS {
            for (at, _) in text.match_indices(marker) {
                let rest = &text[at + marker.len()..];
                let end = rest.find(";\n").unwrap_or(rest.len()).min(400);
                let Some(lit) = first_literal(&rest[..end]) else {
                    continue;
                };
                for p in pieces(lit) {
                    found += 1;
                    if !catalogue.contains(&p) {
                        missing.push(format!("{}: {p}", f.display()));
                    }
                }
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        found > 100,
        "only {found} messages found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "{} message(s) missing from docs/messages.md:\n{}",
        missing.len(),
        missing.join("\n")
    );
}
