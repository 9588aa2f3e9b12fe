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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use slurm_spank::spank_sys::{self, spank_t};
use slurm_spank::{init_spank_handle, spank_callback_with_globals, Context, SpankHandle};

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
            dispatch!(spank, ac, argv, $method $(, $first)?)
        }
    };
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
    Ok(())
}

hook!(slurm_spank_init, init, register_options);
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
