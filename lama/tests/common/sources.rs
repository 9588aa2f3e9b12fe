//! The Rust sources under a folder, for the tests that read the code itself.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth, appended to `out`.
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source folder") {
        let p = entry.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}
