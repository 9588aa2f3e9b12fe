//! Reads the installed Slurm's version so that Slurm accepts the plugin: it refuses plugins built
//! for another major.minor release.
use std::path::PathBuf;
use std::process::exit;

fn main() {
    let dir = std::env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let header = PathBuf::from(dir).join("slurm/slurm_version.h");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-changed={}", header.display());
    let text = match std::fs::read_to_string(&header) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "cannot read {}: {e}; install libslurm-dev (contrib/deps.sh) or set SLURM_INCLUDE_DIR",
                header.display()
            );
            exit(1);
        }
    };
    let version = text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some("#define"), Some("SLURM_VERSION_NUMBER"), Some(v)) => {
                u32::from_str_radix(v.trim_start_matches("0x"), 16).ok()
            }
            _ => None,
        }
    });
    let Some(version) = version else {
        eprintln!("no SLURM_VERSION_NUMBER in {}", header.display());
        exit(1);
    };
    let out = match std::env::var("OUT_DIR") {
        Ok(o) => PathBuf::from(o).join("slurm_version.rs"),
        Err(_) => exit(1),
    };
    let code = format!(
        "/// The Slurm release this plugin was built against (`SLURM_VERSION_NUMBER`).\npub const SLURM_VERSION: u32 = {version:#x};\n"
    );
    if let Err(e) = std::fs::write(&out, code) {
        eprintln!("cannot write {}: {e}", out.display());
        exit(1);
    }
}
