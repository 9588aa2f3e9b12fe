//! The `--lama-*` options, registered with Slurm directly and collected by one callback into a
//! fixed table. slurm-spank's option helpers build three C strings and a map entry per option
//! and look values up by formatted name; srun and every slurmstepd register all eighteen options (srun, sbatch and salloc also `--lama-help`)
//! once per step, so that work is paid on every launch. Slurm copies what is registered, so the
//! strings here live only for the call.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

use lama::plugin::{Options, OPTIONS};
use slurm_spank::spank_sys::{self, spank_t};

/// What Slurm handed the callback, by option: `None` not given, `Some(None)` a flag given,
/// `Some(Some(bytes))` a value (the last one when given twice).
type Given = [Option<Option<Vec<u8>>>; OPTIONS.len()];

static GIVEN: Mutex<Given> = Mutex::new([const { None }; OPTIONS.len()]);

fn given() -> std::sync::MutexGuard<'static, Given> {
    // A poisoned lock only means a panic elsewhere; the table itself is always whole.
    GIVEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Slurm's option callback: `val` is the option's index in [`OPTIONS`].
extern "C" fn option_given(val: c_int, optarg: *const c_char, _remote: c_int) -> c_int {
    let stored = std::panic::catch_unwind(|| {
        let i = usize::try_from(val).ok().filter(|&i| i < OPTIONS.len())?;
        let value = (!optarg.is_null()).then(|| {
            // SAFETY: Slurm passes a NUL-terminated string that lives for this call, or NULL
            // (checked above) for a flag.
            unsafe { CStr::from_ptr(optarg) }.to_bytes().to_vec()
        });
        given()[i] = Some(value);
        Some(())
    });
    match stored {
        Ok(Some(())) => 0,
        _ => -1,
    }
}

/// Registers every `--lama-*` option with Slurm (srun, sbatch, salloc and slurmstepd; only
/// during `slurm_spank_init`). The error names the option Slurm refused, and Slurm's reason.
pub fn register(spank: spank_t) -> Result<(), String> {
    // One buffer of NUL-terminated strings per option: "lama-NAME", the usage, the argument.
    let mut text = Vec::with_capacity(256);
    for (i, info) in OPTIONS.iter().enumerate() {
        text.clear();
        text.extend_from_slice(b"lama-");
        text.extend_from_slice(info.name.as_bytes());
        text.push(0);
        let usage = text.len();
        text.extend_from_slice(info.usage.as_bytes());
        text.push(0);
        let arg = text.len();
        text.extend_from_slice(info.arg.unwrap_or_default().as_bytes());
        text.push(0);
        let mut opt = spank_sys::spank_option {
            name: text.as_ptr().cast(),
            usage: text[usage..].as_ptr().cast(),
            arginfo: if info.arg.is_some() {
                text[arg..].as_ptr().cast()
            } else {
                std::ptr::null()
            },
            has_arg: c_int::from(info.arg.is_some()),
            // At most OPTIONS.len() (eighteen), so always within c_int.
            val: i as c_int,
            cb: Some(option_given),
        };
        // SAFETY: `spank` is the handle Slurm passed to the running slurm_spank_init; every
        // string in `opt` is NUL-terminated (the names and usages are Rust literals without
        // NUL bytes) and outlives the call, and Slurm copies them.
        let rc = unsafe { spank_sys::spank_option_register(spank, &mut opt) };
        if rc != spank_sys::ESPANK_SUCCESS {
            return Err(refused(info.name, rc));
        }
    }
    Ok(())
}

/// `--lama-help` in srun, sbatch or salloc: prints the short guide and exits 0 before anything
/// is asked of Slurm, as their own `--help` does. Never in slurmstepd (`remote`), where it is
/// not registered and could not arrive: the command that took it has exited.
extern "C" fn help_given(_val: c_int, _optarg: *const c_char, remote: c_int) -> c_int {
    if remote != 0 {
        return 0;
    }
    let _ = std::panic::catch_unwind(|| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(lama::plugin::guide().as_bytes());
        let _ = out.flush();
    });
    std::process::exit(0)
}

/// Registers `--lama-help` (srun, sbatch and salloc only).
pub fn register_help(spank: spank_t) -> Result<(), String> {
    let mut opt = spank_sys::spank_option {
        name: c"lama-help".as_ptr().cast_mut(),
        usage: c"print a short guide to lama's options, with examples, and exit"
            .as_ptr()
            .cast_mut(),
        arginfo: std::ptr::null_mut(),
        has_arg: 0,
        val: 0,
        cb: Some(help_given),
    };
    // SAFETY: `spank` is the handle Slurm passed to the running slurm_spank_init; the strings
    // are static NUL-terminated literals, and Slurm copies them.
    let rc = unsafe { spank_sys::spank_option_register(spank, &mut opt) };
    if rc == spank_sys::ESPANK_SUCCESS {
        Ok(())
    } else {
        Err(refused("help", rc))
    }
}

/// Why Slurm refused to register `--lama-NAME`, in Slurm's words.
fn refused(name: &str, rc: spank_sys::spank_err_t) -> String {
    // SAFETY: spank_strerror returns NULL (checked) or a static NUL-terminated string.
    let why = unsafe {
        let p = spank_sys::spank_strerror(rc);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
    .unwrap_or_else(|| format!("SPANK error {rc}"));
    format!("cannot register --lama-{name}: {why}")
}

/// The options the user gave: on the command line, as Slurm handed them to [`option_given`]
/// (srun, sbatch and salloc after parsing the command line; slurmstepd from the launch message,
/// before `init_post_opt`), over those of the `SLURM_LAMA_*` variables among `env`.
pub fn user_options(env: &[(String, String)]) -> Result<Options, String> {
    let cmd = command_line()?;
    match Options::from_env(env).map_err(|e| e.to_string())? {
        Some(from_env) => Ok(cmd.over_env(from_env)),
        None => Ok(cmd),
    }
}

fn command_line() -> Result<Options, String> {
    let mut o = Options::default();
    for (info, value) in OPTIONS.iter().zip(given().iter()) {
        match value {
            None => {}
            Some(None) => {
                o.set(info.name, None);
            }
            Some(Some(bytes)) => {
                let v = std::str::from_utf8(bytes)
                    .map_err(|_| format!("invalid --lama-{}: the value is not UTF-8", info.name))?;
                o.set(info.name, Some(v));
            }
        }
    }
    Ok(o)
}
