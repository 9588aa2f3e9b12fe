//! Builds the plugin for one Slurm release: the headers in `SLURM_INCLUDE_DIR` (a Slurm prefix's
//! `include/`, or a folder holding `slurm/spank.h` and `slurm/slurm_version.h`; default
//! `/usr/include`).
//!
//! - `SLURM_VERSION_NUMBER` becomes the plugin's version: Slurm refuses a SPANK plugin built for
//!   another major.minor release, loudly, at load time.
//! - `slurm-spank` is compiled from its pre-generated bindings (`SKIP_SLURM_BINDINGS`, set in
//!   `.cargo/config.toml`), so the headers must declare the same SPANK interface: the item and
//!   context numbers, the error numbers (`slurm_errno.h`) and the option structure. They are the same from 22.05 to 26.05;
//!   headers that differ stop the build here instead of yielding a plugin that half works.
//! - The unwinder (for catching panics) is linked in from GCC's `libgcc_eh.a`, so the plugin does
//!   not need `libgcc_s.so.1`: see [`static_unwinder`].
//! - The code every step runs is laid out together by the linker script `hot.ld`: see
//!   [`hot_layout`].
use std::path::{Path, PathBuf};
use std::process::exit;

/// `enum spank_item`, in order (each member's value is its position).
const ITEMS: &[&str] = &[
    "S_JOB_UID",
    "S_JOB_GID",
    "S_JOB_ID",
    "S_JOB_STEPID",
    "S_JOB_NNODES",
    "S_JOB_NODEID",
    "S_JOB_LOCAL_TASK_COUNT",
    "S_JOB_TOTAL_TASK_COUNT",
    "S_JOB_NCPUS",
    "S_JOB_ARGV",
    "S_JOB_ENV",
    "S_TASK_ID",
    "S_TASK_GLOBAL_ID",
    "S_TASK_EXIT_STATUS",
    "S_TASK_PID",
    "S_JOB_PID_TO_GLOBAL_ID",
    "S_JOB_PID_TO_LOCAL_ID",
    "S_JOB_LOCAL_TO_GLOBAL_ID",
    "S_JOB_GLOBAL_TO_LOCAL_ID",
    "S_JOB_SUPPLEMENTARY_GIDS",
    "S_SLURM_VERSION",
    "S_SLURM_VERSION_MAJOR",
    "S_SLURM_VERSION_MINOR",
    "S_SLURM_VERSION_MICRO",
    "S_STEP_CPUS_PER_TASK",
    "S_JOB_ALLOC_CORES",
    "S_JOB_ALLOC_MEM",
    "S_STEP_ALLOC_CORES",
    "S_STEP_ALLOC_MEM",
    "S_SLURM_RESTART_COUNT",
    "S_JOB_ARRAY_ID",
    "S_JOB_ARRAY_TASK_ID",
];

/// `enum spank_context`, in order.
const CONTEXTS: &[&str] = &[
    "S_CTX_ERROR",
    "S_CTX_LOCAL",
    "S_CTX_REMOTE",
    "S_CTX_ALLOCATOR",
    "S_CTX_SLURMD",
    "S_CTX_JOB_SCRIPT",
];

/// The SPANK members of `slurm_errno.h`'s error enum, from `ESPANK_ERROR = 3000` on, in order
/// (25.05 appended two; members after these are allowed).
const ERRORS: &[&str] = &[
    "ESPANK_ERROR",
    "ESPANK_BAD_ARG",
    "ESPANK_NOT_TASK",
    "ESPANK_ENV_EXISTS",
    "ESPANK_ENV_NOEXIST",
    "ESPANK_NOSPACE",
    "ESPANK_NOT_REMOTE",
    "ESPANK_NOEXIST",
    "ESPANK_NOT_EXECD",
    "ESPANK_NOT_AVAIL",
    "ESPANK_NOT_LOCAL",
];

/// From 26.05 on, a block step's tasks are numbered in the order of the cluster's network
/// topology, which only the step's layout tells; srun's lama reads it with
/// `slurm_job_step_layout_get` (spank/src/step_order.rs), through these two structures of
/// `slurm.h`, declared there as here (type and name, in order).
const TOPO_ORDER_RELEASE: u32 = 0x1a0500;
const STEP_ID_FIELDS: &[&str] = &[
    "sluid_t sluid",
    "uint32_t job_id",
    "uint32_t step_het_comp",
    "uint32_t step_id",
];
const STEP_LAYOUT_FIELDS: &[&str] = &[
    "uint16_t *cpt_compact_array",
    "uint32_t cpt_compact_cnt",
    "uint32_t *cpt_compact_reps",
    "slurm_node_alias_addrs_t *alias_addrs",
    "uint32_t node_cnt",
    "char *node_list",
    "uint16_t plane_size",
    "uint16_t start_protocol_ver",
    "uint16_t *tasks",
    "uint32_t task_cnt",
    "uint32_t task_dist",
    "uint32_t **tids",
];

/// `struct spank_option`'s members.
const OPTION_FIELDS: &[&str] = &["name", "arginfo", "usage", "has_arg", "val", "cb"];

fn die(msg: String) -> ! {
    eprintln!("lama-spank: {msg}");
    exit(1);
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        die(format!(
            "cannot read {}: {e}; install libslurm-dev (contrib/deps.sh) or set SLURM_INCLUDE_DIR to a Slurm's include folder",
            path.display()
        ))
    })
}

/// The text between `opening` and the next `}` with C comments removed.
fn body<'a>(text: &'a str, opening: &str) -> Option<&'a str> {
    let start = text.find(opening)? + opening.len();
    let rest = &text[start..];
    let open = rest.find('{')?;
    let close = rest[open..].find('}')?;
    Some(&rest[open + 1..open + close])
}

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = match rest[i..].find("*/") {
            Some(j) => &rest[i + j + 2..],
            None => "",
        };
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Enum members in order; an explicit `= N` must equal the member's position.
fn enum_members(text: &str, name: &str, header: &Path) -> Vec<String> {
    let Some(b) = body(text, &format!("enum {name}")) else {
        die(format!("{}: no enum {name}", header.display()));
    };
    let mut out = Vec::new();
    for (i, m) in strip_comments(b)
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .enumerate()
    {
        let mut parts = m.splitn(2, '=');
        let ident = parts.next().unwrap_or("").trim().to_string();
        if let Some(v) = parts.next() {
            if v.trim().parse::<usize>().ok() != Some(i) {
                die(format!(
                    "{}: enum {name} member {ident} = {} is not at its position {i}",
                    header.display(),
                    v.trim()
                ));
            }
        }
        out.push(ident);
    }
    out
}

fn struct_fields(text: &str, name: &str, header: &Path) -> Vec<String> {
    let Some(b) = body(text, &format!("struct {name} ")) else {
        die(format!("{}: no struct {name}", header.display()));
    };
    strip_comments(b)
        .split(';')
        .filter_map(|decl| {
            decl.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .rfind(|w| !w.is_empty())
                .map(str::to_string)
        })
        .collect()
}

/// The `ESPANK_*` members of `slurm_errno.h`, which must start at 3000.
fn spank_errors(text: &str, header: &Path) -> Vec<String> {
    let text = strip_comments(text);
    let mut names = Vec::new();
    for line in text.lines().map(str::trim) {
        if !line.starts_with("ESPANK_") {
            continue;
        }
        let ident: String = line
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if names.is_empty() {
            let value = line
                .split('=')
                .nth(1)
                .map(|v| v.trim().trim_end_matches(','));
            if value != Some("3000") {
                die(format!("{}: {ident} is not 3000", header.display()));
            }
        }
        names.push(ident);
    }
    names
}

/// A structure's declarations (`type name`, white space folded), from the `{` after `opening`
/// or, for a `typedef struct { ... } NAME;`, from the one before `closing`.
fn declarations(text: &str, opening: Option<&str>, closing: &str) -> Option<Vec<String>> {
    let b = match opening {
        Some(o) => body(text, o)?,
        None => {
            let end = text.find(closing)?;
            let start = text[..end].rfind("typedef struct {")? + "typedef struct {".len();
            &text[start..end]
        }
    };
    let decls = strip_comments(b)
        .split(';')
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .collect();
    Some(decls)
}

/// Enables `cfg(topo_order)` for a release that lays block steps out in topology order, once
/// its `slurm.h` is checked to declare what `step_order.rs` reads as that file declares it.
fn topo_order(include: &Path, version: u32) {
    println!("cargo:rustc-check-cfg=cfg(topo_order)");
    if version < TOPO_ORDER_RELEASE {
        return;
    }
    let slurm_h = include.join("slurm/slurm.h");
    println!("cargo:rerun-if-changed={}", slurm_h.display());
    let text = read(&slurm_h);
    for (what, opening, closing, want) in [
        (
            "slurm_step_id_t",
            None,
            "} slurm_step_id_t;",
            STEP_ID_FIELDS,
        ),
        (
            "struct slurm_step_layout",
            Some("typedef struct slurm_step_layout "),
            "",
            STEP_LAYOUT_FIELDS,
        ),
    ] {
        let got = declarations(&text, opening, closing).unwrap_or_default();
        if got.iter().map(String::as_str).ne(want.iter().copied()) {
            die(format!(
                "{} declares {what} as [{}], but spank/src/step_order.rs reads it as [{}]: update both together",
                slurm_h.display(),
                got.join("; "),
                want.join("; ")
            ));
        }
    }
    println!("cargo:rustc-cfg=topo_order");
}

/// Compiles `c/slurm_conf.c` against the release's `slurm.h` (its `slurm_conf_t` is too large
/// to declare twice): what the plugin reads of the configuration Slurm has loaded (where
/// `slurm.conf` is, `config_overrides`, and on 26.05 whether srun's controller may lay a step out
/// in topology order).
fn slurm_conf_reader(include: &Path) {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let src = PathBuf::from(dir).join("c/slurm_conf.c");
    println!("cargo:rerun-if-changed={}", src.display());
    let Ok(out) = std::env::var("OUT_DIR").map(PathBuf::from) else {
        die("cargo did not set OUT_DIR".into());
    };
    let obj = out.join("slurm_conf.o");
    let lib = out.join("liblama_slurm_conf.a");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let run = |cmd: &mut std::process::Command, what: &str| match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => die(format!("{what} failed ({s})")),
        Err(e) => die(format!("cannot run {what}: {e}")),
    };
    run(
        std::process::Command::new(&cc)
            .args(["-c", "-O2", "-fPIC", "-Wall", "-Werror", "-I"])
            .arg(include)
            .arg(&src)
            .arg("-o")
            .arg(&obj),
        &format!("{cc} on {}", src.display()),
    );
    let _ = std::fs::remove_file(&lib);
    run(
        std::process::Command::new("ar")
            .arg("crs")
            .arg(&lib)
            .arg(&obj),
        "ar",
    );
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=lama_slurm_conf");
}

fn check(what: &str, got: &[String], want: &[&str], header: &Path, prefix: bool) {
    let n = if prefix {
        want.len().min(got.len())
    } else {
        got.len()
    };
    if n != want.len() || got[..n].iter().map(String::as_str).ne(want.iter().copied()) {
        die(format!(
            "{} declares {what} as [{}], but this plugin's SPANK bindings are [{}]: they were checked for Slurm 22.05 to 26.05; a release that changed them needs new bindings (see docs/admin-guide.md, Installing on a site)",
            header.display(),
            got.join(" "),
            want.join(" ")
        ));
    }
}

/// What cargo says of the target: `target("OS")` is `CARGO_CFG_TARGET_OS`.
fn target(what: &str) -> String {
    std::env::var(format!("CARGO_CFG_TARGET_{what}")).unwrap_or_default()
}

/// Links GCC's unwinder statically, so that the plugin does not load `libgcc_s.so.1` into srun,
/// sbatch and salloc (slurmstepd usually has it already). Loading it runs its CPU-model
/// constructor: a dozen `cpuid` instructions, each a trap to the hypervisor in a virtual machine.
/// That costs 0.13 ms per srun on the KVM guest of BENCHMARKS.md and more under nested
/// virtualisation, four times what dlopen of the rest of the plugin costs. The whole archive is
/// needed: it comes before std's objects on the link line, so nothing would be taken from it
/// otherwise; rustc's `--as-needed` then drops `libgcc_s`. The symbols stay local to the plugin
/// (the cdylib exports only Slurm's symbols). Without the archive (another C library or
/// compiler), the plugin links `libgcc_s` as Rust does by default.
fn static_unwinder() {
    if target("OS") != "linux" || target("ENV") != "gnu" {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    println!("cargo:rerun-if-env-changed=CC");
    let found = std::process::Command::new(&cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| PathBuf::from(s.trim()))
        .filter(|p| p.is_absolute() && p.is_file());
    match found.as_deref().and_then(Path::parent) {
        Some(lib) => {
            println!("cargo:rustc-link-search=native={}", lib.display());
            println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
        }
        None => println!(
            "cargo:warning={cc} knows no libgcc_eh.a: the plugin will load libgcc_s.so.1 (slower to load in a virtual machine)"
        ),
    }
}

/// Lays the plugin's hot code out together (`hot.ld`, which says why). Linux only: the script
/// is for GNU ld and LLD on ELF.
fn hot_layout() {
    if target("OS") != "linux" {
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let script = PathBuf::from(dir).join("hot.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", script.display());
}

fn main() {
    static_unwinder();
    hot_layout();
    // Slurm unloads every plugin just before srun and slurmstepd exit; unmapping it then costs
    // a TLB shootdown per mapping in a multithreaded slurmstepd (IPIs: hypervisor traps in a
    // virtual machine) and saves nothing. A loaded lama stays loaded: slurmd picks up a new
    // build when it restarts (docs/admin-guide.md, Installing on a site).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    let dir = std::env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let version_h = PathBuf::from(&dir).join("slurm/slurm_version.h");
    let spank_h = PathBuf::from(&dir).join("slurm/spank.h");
    let errno_h = PathBuf::from(&dir).join("slurm/slurm_errno.h");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-changed={}", version_h.display());
    println!("cargo:rerun-if-changed={}", spank_h.display());
    println!("cargo:rerun-if-changed={}", errno_h.display());

    let version = read(&version_h).lines().find_map(|l| {
        let mut w = l.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some("#define"), Some("SLURM_VERSION_NUMBER"), Some(v)) => {
                u32::from_str_radix(v.trim_start_matches("0x"), 16).ok()
            }
            _ => None,
        }
    });
    let Some(version) = version else {
        die(format!(
            "no SLURM_VERSION_NUMBER in {}",
            version_h.display()
        ));
    };

    topo_order(Path::new(&dir), version);
    slurm_conf_reader(Path::new(&dir));
    // 23.11 and later number a core's threads by the hardware's threads per core.
    println!("cargo:rustc-check-cfg=cfg(hw_thread_numbering)");
    if version >= 0x170b00 {
        println!("cargo:rustc-cfg=hw_thread_numbering");
    }
    let spank = read(&spank_h);
    check(
        "enum spank_item",
        &enum_members(&spank, "spank_item", &spank_h),
        ITEMS,
        &spank_h,
        false,
    );
    check(
        "enum spank_context",
        &enum_members(&spank, "spank_context", &spank_h),
        CONTEXTS,
        &spank_h,
        false,
    );
    let errors = spank_errors(&read(&errno_h), &errno_h);
    check("the SPANK error codes", &errors, ERRORS, &errno_h, true);
    // 25.05 and later read `slurm_spank_init_failure_mode` (ESPANK_NODE_FAILURE or
    // ESPANK_JOB_FAILURE) when a required plugin's `slurm_spank_init` fails.
    let code_of = |name: &str| errors.iter().position(|e| e == name).map(|i| 3000 + i);
    let modes = match (
        code_of("ESPANK_NODE_FAILURE"),
        code_of("ESPANK_JOB_FAILURE"),
    ) {
        (Some(node), Some(job)) if spank.contains("slurm_spank_init_failure_mode") => {
            println!("cargo:rustc-cfg=init_failure_mode");
            format!("/// `ESPANK_NODE_FAILURE` and `ESPANK_JOB_FAILURE` of these headers.\npub const INIT_FAILURE_CODES: (i32, i32) = ({node}, {job});\n")
        }
        _ => String::new(),
    };
    println!("cargo:rustc-check-cfg=cfg(init_failure_mode)");
    check(
        "struct spank_option",
        &struct_fields(&spank, "spank_option", &spank_h),
        OPTION_FIELDS,
        &spank_h,
        false,
    );

    let Ok(out) = std::env::var("OUT_DIR") else {
        die("cargo did not set OUT_DIR".into());
    };
    let out = PathBuf::from(out).join("slurm_version.rs");
    let code = format!(
        "/// The Slurm release this plugin was built against (`SLURM_VERSION_NUMBER`).\npub const SLURM_VERSION: u32 = {version:#x};\n{modes}"
    );
    if let Err(e) = std::fs::write(&out, code) {
        die(format!("cannot write {}: {e}", out.display()));
    }
}
