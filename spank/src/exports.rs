//! The symbols Slurm looks up in the plugin: its name, type and release, and the callbacks lama
//! uses. Slurm calls a SPANK callback only when the plugin exports it; slurm-spank's
//! `SPANK_PLUGIN!` exports all twelve, and each call formats its context, reads an item from
//! Slurm and opens a tracing span, in every task (`task_init_privileged`, `task_post_fork`,
//! `task_exit`) even though lama has nothing to do there. These hooks go through the crate's own
//! dispatcher, which keeps the plugin's state and catches any panic; `slurm_spank_init` also
//! registers the options (`crate::options`).

use std::error::Error;
use std::os::raw::{c_char, c_int, c_uint};

use slurm_spank::spank_sys::spank_t;
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

macro_rules! hook {
    ($symbol:ident, $method:ident $(, $first:path)?) => {
        /// Called by Slurm; runs [`Lama`]'s callback of the same name.
        #[no_mangle]
        pub extern "C" fn $symbol(spank: spank_t, ac: c_int, argv: *const *const c_char) -> c_int {
            spank_callback_with_globals::<Lama, _>(|plugin, options, need_setup| {
                let mut handle = init_spank_handle(spank, ac, argv, options);
                if need_setup {
                    plugin.setup(&mut handle)?;
                }
                $($first(spank, &handle)?;)?
                plugin.$method(&mut handle)
            })
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
hook!(slurm_spank_user_init, user_init);
hook!(slurm_spank_task_init, task_init);
