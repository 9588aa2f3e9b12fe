//! How much a task's arguments and environment take, read from Slurm in place (no copy), and
//! the stack limit the task will exec under: what `lama::environ` needs to decide which of
//! lama's variables fit.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

use lama::environ::{own_stack_limit, stack_limit, ExecSize};
use lama::slurm::node_order::STEP_ORDER_VAR;
use slurm_spank::spank_sys::{self, spank_t};

/// The running callback's handle, for the items slurm-spank only hands out copied. Slurm runs
/// a process's SPANK callbacks one at a time; each hook sets it first (`enter`).
static CURRENT: AtomicPtr<spank_sys::spank_handle> = AtomicPtr::new(std::ptr::null_mut());

/// Called by each hook with the handle Slurm passed it.
pub fn enter(spank: spank_t) {
    CURRENT.store(spank, Ordering::Relaxed);
}

/// The NULL-terminated string array of `S_JOB_ENV`, or of `S_JOB_ARGV`.
fn strings(argv: bool) -> Option<*const *const c_char> {
    let raw = CURRENT.load(Ordering::Relaxed);
    if raw.is_null() {
        return None;
    }
    let mut array: *const *const c_char = std::ptr::null();
    let rc = if argv {
        let mut argc: c_int = 0;
        // SAFETY: S_JOB_ARGV takes an int* and a char***, both live locals; Slurm fills them
        // with its own array, which lives at least as long as the callback.
        unsafe {
            spank_sys::spank_get_item(
                raw,
                spank_sys::spank_item_S_JOB_ARGV,
                &mut argc as *mut c_int,
                &mut array as *mut *const *const c_char,
            )
        }
    } else {
        // SAFETY: S_JOB_ENV takes a char*** (a live local), filled as above.
        unsafe {
            spank_sys::spank_get_item(
                raw,
                spank_sys::spank_item_S_JOB_ENV,
                &mut array as *mut *const *const c_char,
            )
        }
    };
    (rc == spank_sys::ESPANK_SUCCESS && !array.is_null()).then_some(array)
}

/// Walks a NULL-terminated string array.
fn each(array: *const *const c_char, mut f: impl FnMut(&[u8])) {
    let mut i = 0;
    loop {
        // SAFETY: Slurm's arrays end with a NULL pointer; every entry before it is a
        // NUL-terminated string, and `i` stops at the NULL.
        let p = unsafe { *array.add(i) };
        if p.is_null() {
            break;
        }
        // SAFETY: a non-NULL entry is a NUL-terminated string owned by Slurm for the callback.
        f(unsafe { CStr::from_ptr(p) }.to_bytes());
        i += 1;
    }
}

/// The job's environment variable `name` (in `user_init`, the step's; in `task_init`, this
/// task's), read in place from Slurm's array: what `spank_getenv` returns, without its copy
/// into a fresh 4 KiB buffer for every variable (slurm-spank's), a dozen times per step and
/// per task. `None` when it is not set, not UTF-8, or Slurm does not say.
pub fn var(name: &str) -> Option<String> {
    let [value] = vars([name]);
    value
}

/// The variables `names` of the job's environment, as [`var`] reads each, in one pass over it.
pub fn vars<const N: usize>(names: [&str; N]) -> [Option<String>; N] {
    // Outer: seen; inner: UTF-8 (a value that is not reads as unset, as `std::env::var` has it).
    let mut found: [Option<Option<String>>; N] = std::array::from_fn(|_| None);
    let Some(env) = strings(false) else {
        return std::array::from_fn(|_| None);
    };
    let mut left = N;
    let mut i = 0;
    while left > 0 {
        // SAFETY: Slurm's array ends with a NULL pointer and `i` stops there.
        let p = unsafe { *env.add(i) };
        if p.is_null() {
            break;
        }
        for (k, name) in names.iter().enumerate() {
            if found[k].is_some() {
                continue;
            }
            if let Some(v) = value_of(p, name.as_bytes()) {
                // The first entry of a name is the one getenv returns.
                found[k] = Some(String::from_utf8(v.to_vec()).ok());
                left -= 1;
            }
        }
        i += 1;
    }
    found.map(Option::flatten)
}

/// The value in `entry` (`NAME=VALUE`, NUL-terminated) when its name is `name`; the entry is
/// read only as far as it matches, so the search never measures the strings it passes over.
fn value_of<'a>(entry: *const c_char, name: &[u8]) -> Option<&'a [u8]> {
    if name.contains(&0) {
        return None;
    }
    for (i, &b) in name.iter().enumerate() {
        // SAFETY: bytes 0..i of `entry` matched `name`, which has no NUL, so none was the
        // terminator: byte i is within the string.
        if unsafe { *entry.add(i) } as u8 != b {
            return None;
        }
    }
    // SAFETY: as above, byte `name.len()` is within the string (at worst its NUL).
    if unsafe { *entry.add(name.len()) } as u8 != b'=' {
        return None;
    }
    // SAFETY: the value starts after the `=` and ends at the entry's NUL; Slurm keeps the
    // array for the callback, longer than the caller keeps the slice.
    Some(unsafe { CStr::from_ptr(entry.add(name.len() + 1)) }.to_bytes())
}

/// One of `vars` that the environment already holds.
pub struct Held {
    /// The variable's name.
    pub name: String,
    /// `NAME=VALUE` with its NUL, as `execve` counts it.
    pub bytes: usize,
    /// Whether it already has the value lama would set: then lama does not set it again (Slurm's
    /// setenv costs a 256 KiB buffer a variable, and Slurm's own `SLURM_CPU_BIND*` often say
    /// what lama would write).
    pub same: bool,
}

/// The job's (in `user_init`, the step's; in `task_init`, this task's) arguments and
/// environment as `execve` counts them, and which of `vars` (name, value) the environment
/// already holds, in one pass, in place. `None` when Slurm does not say.
pub fn measure(vars: &[(&str, &str)]) -> Option<(ExecSize, Vec<Held>)> {
    let env = strings(false)?;
    let argv = strings(true)?;
    let mut held = Vec::new();
    let mut size = ExecSize::default();
    each(env, |s| {
        size = size.plus(ExecSize::of([s]));
        if let Some(eq) = s.iter().position(|&b| b == b'=') {
            if let Some((n, v)) = vars.iter().find(|(n, _)| n.as_bytes() == &s[..eq]) {
                held.push(Held {
                    name: n.to_string(),
                    bytes: s.len() + 1,
                    same: &s[eq + 1..] == v.as_bytes(),
                });
            }
        }
    });
    each(argv, |s| size = size.plus(ExecSize::of([s])));
    Some((size, held))
}

/// The stack limit the task will exec under: this process's soft limit, or the smaller one
/// srun propagates (`propagated`, the step's `SLURM_RLIMIT_STACK`).
pub fn task_stack_limit(propagated: Option<&str>) -> Option<u64> {
    stack_limit(own_stack_limit(), propagated)
}

/// `SLURM_LAMA_*` settings (name, value), and lama's task variables present.
pub type LamaVariables = (Vec<(String, String)>, Vec<&'static str>);

/// The step's `SLURM_LAMA_*` settings, and the names of lama's own task variables
/// ([`INHERITED`], [`STEP_THREADS`], [`STEP_ORDER_VAR`], [`STEP_SLURM_BINDING`]) it holds, read in place from its environment (`user_init`); `None`, having
/// built nothing, when it has neither (nearly every step: its path stays short).
pub fn lama_variables() -> Option<LamaVariables> {
    let env = strings(false)?;
    let mut any = false;
    each(env, |s| any |= classify(s).is_some());
    if !any {
        return None;
    }
    Some(collect_lama_variables(env))
}

/// What an environment entry (`NAME=VALUE`) is to lama.
enum Entry {
    /// A `SLURM_LAMA_*` setting.
    Setting,
    /// One of [`INHERITED`].
    Inherited(&'static str),
}

fn classify(s: &[u8]) -> Option<Entry> {
    if s.starts_with(lama::plugin::ENV_PREFIX.as_bytes()) {
        return Some(Entry::Setting);
    }
    INHERITED
        .iter()
        .chain([&STEP_THREADS, &STEP_ORDER_VAR, &STEP_SLURM_BINDING])
        .find(|n| s.len() > n.len() && s.starts_with(n.as_bytes()) && s[n.len()] == b'=')
        .map(|n| Entry::Inherited(n))
}

/// [`lama_variables`] when the step has some: kept out of the hot layout (spank/hot.ld).
#[cold]
#[inline(never)]
fn collect_lama_variables(env: *const *const c_char) -> LamaVariables {
    let mut settings = Vec::new();
    let mut inherited = Vec::new();
    each(env, |s| match classify(s) {
        Some(Entry::Setting) => {
            let text = String::from_utf8_lossy(s);
            if let Some((k, v)) = text.split_once('=') {
                settings.push((k.to_string(), v.to_string()));
            }
        }
        Some(Entry::Inherited(n)) => inherited.push(n),
        None => {}
    });
    (settings, inherited)
}

/// What lama exports into a placed task: a task that starts a step of its own passes them on,
/// where they would describe the outer task, so each step starts without them.
pub const INHERITED: [&str; 4] = ["LAMA_CPUS", "LAMA_GPUS", "LAMA_NICS", "LAMA_MEMS"];

/// Set by lama in srun for its step when srun's own `--hint` dropped the job's
/// `--threads-per-core`, so that the step's `SLURM_THREADS_PER_CORE` is the job's, stale
/// (`lama::slurm::threads_per_core_dropped`); read and removed, like [`INHERITED`], before any
/// task sees it.
pub const STEP_THREADS: &str = "LAMA_STEP_THREADS";

/// Set by lama in srun when the user asked Slurm's own binding for something and lama for
/// nothing, under a placement the site made the default (`lama::slurm::site_default`): the
/// option as the user gave it. Every node then leaves the step to Slurm; read and removed, like
/// [`INHERITED`], before any task sees it.
pub const STEP_SLURM_BINDING: &str = "LAMA_STEP_SLURM_BINDING";

/// The MPI launcher daemon the step runs (its first argument, compared in place), if any.
pub fn launcher_daemon() -> Option<&'static str> {
    let argv = strings(true)?;
    // SAFETY: Slurm's argv array ends with a NULL pointer, so entry 0 is readable.
    let p = unsafe { *argv };
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-NULL entry is a NUL-terminated string owned by Slurm for the callback.
    let argv0 = unsafe { CStr::from_ptr(p) }.to_bytes();
    lama::slurm::launcher::launcher_daemon(argv0, || {
        // SAFETY: entry 0 was not the terminating NULL, so entry 1 exists (a string or NULL).
        let q = unsafe { *argv.add(1) };
        // SAFETY: as for entry 0.
        (!q.is_null()).then(|| unsafe { CStr::from_ptr(q) }.to_bytes())
    })
}
