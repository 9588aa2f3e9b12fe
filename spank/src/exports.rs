//! The symbols Slurm looks up in the plugin: its name, type and release, and the callbacks lama
//! uses. Slurm calls a SPANK callback only when the plugin exports it; slurm-spank's
//! `SPANK_PLUGIN!` exports all twelve, and each call formats its context, reads an item from
//! Slurm and opens a tracing span, in every task (`task_init_privileged`, `task_post_fork`,
//! `task_exit`) even though lama has nothing to do there. These hooks go through the crate's own
//! dispatcher, which keeps the plugin's state and catches any panic; `slurm_spank_init` also
//! registers the options (`crate::options`).
//!
//! `slurm_spank_task_init` has a short path for the usual step, where lama only exports
//! `TASK_MAP`: `user_init` leaves the map here ready as a C string, and each task hands it to
//! Slurm without taking a lock or allocating. Each task is a fresh fork of slurmstepd, where the
//! first write to any page of memory copies that page (a fault, a few microseconds here); the
//! dispatcher's locks and allocations cost a task several such copies.

use std::error::Error;
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_uint};
#[cfg(init_failure_mode)]
use std::sync::atomic::AtomicI32;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use lama::plugin::InitFailure;
use slurm_spank::spank_sys::{self, spank_t};
use slurm_spank::{init_spank_handle, spank_callback_with_globals, Context, LogLevel, SpankHandle};

use crate::{fail, Lama, SLURM_VERSION};

/// The plugin's name, as `plugstack.conf` lines and Slurm's messages show it.
#[no_mangle]
pub static plugin_name: [u8; 5] = *b"lama\0";
/// What kind of plugin this is, for Slurm's loader.
#[no_mangle]
pub static plugin_type: [u8; 6] = *b"spank\0";
/// The Slurm release the plugin was built for; Slurm refuses another major.minor release.
#[no_mangle]
pub static plugin_version: c_uint = SLURM_VERSION;

/// Runs [`Lama`]'s callback `$method` through slurm-spank's dispatcher, after `$first`.
macro_rules! dispatch {
    ($spank:ident, $ac:ident, $argv:ident, $method:ident $(, $first:path)?) => {
        spank_callback_with_globals::<Lama, _>(|plugin, options, need_setup| {
            let mut handle = init_spank_handle($spank, $ac, $argv, options);
            crate::room::enter($spank);
            if need_setup {
                plugin.setup(&mut handle)?;
            }
            $($first($spank, &handle)?;)?
            plugin.$method(&mut handle)
        })
    };
}

macro_rules! hook {
    ($symbol:ident, $method:ident $(, $first:path)?) => {
        /// Called by Slurm; runs [`Lama`]'s callback of the same name.
        #[no_mangle]
        pub extern "C" fn $symbol(spank: spank_t, ac: c_int, argv: *const *const c_char) -> c_int {
            static CALLS: AtomicUsize = AtomicUsize::new(0);
            if !first_load(&CALLS) {
                return 0;
            }
            dispatch!(spank, ac, argv, $method $(, $first)?)
        }
    };
}

/// How many `plugstack.conf` lines load lama in this process: Slurm runs `slurm_spank_init`
/// once per line. Two lines naming the same file share one copy of the plugin (dlopen), so its
/// state, and each would register the options again (Slurm then warns once per option) and act
/// on every step twice.
static LOADS: AtomicUsize = AtomicUsize::new(0);

/// Whether this call of a hook is the first load's. Slurm calls each hook once per load, in
/// the stack's order, so the calls of one hook cycle through the loads; a task, forked from
/// slurmstepd before its first task hook, starts that cycle afresh.
fn first_load(calls: &AtomicUsize) -> bool {
    let loads = LOADS.load(Ordering::Acquire).max(1);
    calls.fetch_add(1, Ordering::AcqRel).is_multiple_of(loads)
}

/// Called by Slurm once per `plugstack.conf` line that loads lama: the first registers the
/// options and reads the line's arguments; any other does nothing, and the second says so.
#[no_mangle]
pub extern "C" fn slurm_spank_init(spank: spank_t, ac: c_int, argv: *const *const c_char) -> c_int {
    match LOADS.fetch_add(1, Ordering::AcqRel) {
        0 => dispatch!(spank, ac, argv, init, register_options),
        1 => {
            crate::log(
                LogLevel::Info,
                "lama: plugstack.conf loads lama more than once (a second line naming it, or plugstack.conf.d included twice); only the first line acts, with its own arguments: remove the others",
            );
            0
        }
        _ => 0,
    }
}

/// What Slurm 25.05 and later do when `slurm_spank_init` fails (`init-failure=`), read at
/// that moment; Slurm's own default until the arguments are read.
#[cfg(init_failure_mode)]
#[no_mangle]
pub static slurm_spank_init_failure_mode: AtomicI32 = AtomicI32::new(crate::INIT_FAILURE_CODES.0);

/// Sets [`slurm_spank_init_failure_mode`] from the arguments (a release without it ignores this).
pub(crate) fn set_init_failure(mode: InitFailure) {
    #[cfg(init_failure_mode)]
    slurm_spank_init_failure_mode.store(
        match mode {
            InitFailure::Node => crate::INIT_FAILURE_CODES.0,
            InitFailure::Job => crate::INIT_FAILURE_CODES.1,
        },
        Ordering::Release,
    );
    #[cfg(not(init_failure_mode))]
    let _ = mode;
}

/// Before `init`: registers the `--lama-*` options where users give them (srun, sbatch,
/// salloc) and where slurmstepd receives them.
fn register_options(spank: spank_t, handle: &SpankHandle) -> Result<(), Box<dyn Error>> {
    if matches!(
        handle.context()?,
        Context::Local | Context::Remote | Context::Allocator
    ) {
        crate::options::register(spank).map_err(|e| fail(&e))?;
    }
    if matches!(handle.context()?, Context::Local | Context::Allocator) {
        crate::options::register_help(spank).map_err(|e| fail(&e))?;
    }
    Ok(())
}

hook!(slurm_spank_init_post_opt, init_post_opt);
hook!(slurm_spank_local_user_init, local_user_init);
hook!(slurm_spank_user_init, user_init);

/// The step's `TASK_MAP`, when exporting it is all each task has to do.
static TASK_MAP: OnceLock<CString> = OnceLock::new();
/// Whether [`TASK_MAP`] belongs to the step this process runs: a second `user_init` in the same
/// process (never seen: slurmstepd runs one step) turns the short path off for good.
static TASK_MAP_ONLY: AtomicBool = AtomicBool::new(false);

/// Called by `user_init` first: until it says otherwise, tasks take the dispatcher.
pub(crate) fn withdraw_task_map() {
    TASK_MAP_ONLY.store(false, Ordering::Release);
}

/// Called by `user_init` when every task only has to export `map` (no placement, no failure
/// or warning to show, no per-task check).
pub(crate) fn offer_task_map(map: &str) {
    let Ok(map) = CString::new(map) else {
        return;
    };
    if TASK_MAP.set(map).is_ok() {
        TASK_MAP_ONLY.store(true, Ordering::Release);
    }
}

/// Called by Slurm in each task before it runs the user's program: exports `TASK_MAP` directly
/// when [`offer_task_map`] allowed it, otherwise runs [`Lama`]'s `task_init`.
#[no_mangle]
pub extern "C" fn slurm_spank_task_init(
    spank: spank_t,
    ac: c_int,
    argv: *const *const c_char,
) -> c_int {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    if !first_load(&CALLS) {
        return 0;
    }
    let map = TASK_MAP_ONLY
        .load(Ordering::Acquire)
        .then(|| TASK_MAP.get())
        .flatten();
    let Some(map) = map else {
        return dispatch!(spank, ac, argv, task_init);
    };
    // SAFETY: `spank` is the handle Slurm passed to this callback; both strings are
    // NUL-terminated and outlive the call, and Slurm copies them into the task's environment.
    let rc = unsafe { spank_sys::spank_setenv(spank, c"TASK_MAP".as_ptr(), map.as_ptr(), 1) };
    if rc == spank_sys::ESPANK_SUCCESS {
        0
    } else {
        -1
    }
}
