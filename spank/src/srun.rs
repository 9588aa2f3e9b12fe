//! srun's side of a step: its own options, what the user asked Slurm's own binding for, and
//! `local_user_init` once the step exists (the layout's order, the site default beside Slurm's
//! binding, `--thread-spec`, Slurm's `--cpu-bind`/`--mem-bind` beside lama's placement).

use lama::plugin::Placing;
use lama::slurm::Beside;
use slurm_spank::{Context, LogLevel, SpankHandle};

use crate::{auto, fail, log, room, step_order, Lama};

/// What the user asked Slurm's own binding for on srun's command line or in its input
/// variables (`lama::slurm::site_default`). srun's alone: kept out of `init_post_opt`, which
/// every slurmstepd runs too (spank/hot.ld).
#[inline(never)]
pub(crate) fn binding_asked(spank: &SpankHandle) -> Option<String> {
    let options = own_options(spank, Context::Local);
    lama::slurm::slurm_binding_asked(&options, |k| std::env::var(k).ok())
}

/// Whether the step runs in pyxis containers and pyxis runs after lama (its image's variables
/// would then replace lama's in the tasks).
fn containers_after_lama(options: &[String]) -> bool {
    lama::slurm::containers::pyxis_container_asked(options, |k| std::env::var(k).ok())
        && crate::containers::pyxis_after_lama()
}

/// srun's, sbatch's or salloc's own options: its command line, less srun's program and its
/// arguments (sbatch's and salloc's programs are not told apart).
pub(crate) fn own_options(spank: &SpankHandle, ctx: Context) -> Vec<String> {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let program = match ctx {
        Context::Local => spank.job_argv_os().map(|a| a.len()).unwrap_or(0),
        _ => 0,
    };
    let keep = args.len().saturating_sub(program);
    args.into_iter().take(keep).collect()
}

/// Passes the job's `--thread-spec` (from `options`, else the input variable `var`) on to its
/// steps in [`lama::slurm::THREAD_SPEC_VAR`]: Slurm tells SPANK plugins nothing of it. Set in
/// the command's own environment, which Slurm copies into the job's (sbatch, srun) or hands its
/// program (salloc) after this hook.
pub(crate) fn pass_thread_spec<S: AsRef<str>>(options: &[S], var: &str) {
    let env = std::env::var(var).ok();
    if let Some(n) = lama::slurm::thread_spec_asked(options, env.as_deref()) {
        std::env::set_var(lama::slurm::THREAD_SPEC_VAR, n.to_string());
    }
}

impl Lama {
    pub(crate) fn step_created(
        &mut self,
        spank: &SpankHandle,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let wanted = self.settings.taskmap && !self.user.off;
        let step = (spank.job_id(), spank.job_stepid(), spank.job_nnodes());
        let step = match step {
            (Ok(job), Ok(step), Ok(nodes)) if wanted => Some((job, step, nodes)),
            _ => None,
        };
        if let Some(why) = step_order::pass(step) {
            log(LogLevel::Verbose, &format!("lama: {why}"));
        }
        std::env::remove_var(room::STEP_SLURM_BINDING);
        // srun's options (init_post_opt has checked their values).
        let options = &own_options(spank, Context::Local);
        if !self.user.off && containers_after_lama(options) {
            log(
                LogLevel::Info,
                &format!("lama: {}", lama::slurm::containers::pyxis_order_note()),
            );
        }
        // MPI launcher daemons (started with --cpu-bind=none) are left alone on the nodes.
        if matches!(
            self.settings.placing(&self.user, None),
            Ok(Placing::LeftAlone) | Err(_)
        ) || room::launcher_daemon().is_some()
        {
            return Ok(());
        }
        // What the user asked of Slurm stands beside the site's default placement.
        if let Some(asked) = self.slurm_asked.as_ref().filter(|_| !self.user.any()) {
            let note = lama::slurm::stand_aside_note(asked);
            log(LogLevel::Info, &format!("lama: {note}"));
            std::env::set_var(room::STEP_SLURM_BINDING, asked);
            return Ok(());
        }
        // An srun that made its own job: its --thread-spec is the job's (inside an allocation
        // Slurm ignores a step's).
        if self.allocating {
            pass_thread_spec(options, "SLURM_THREAD_SPEC");
        }
        if lama::slurm::threads_per_core_dropped(options) {
            // srun's own environment, which it merges into the step's right after this hook
            // (spank_setenv is slurmstepd's only); srun itself set the step's variables the
            // same way, from this thread.
            std::env::set_var(room::STEP_THREADS, "all");
        }
        let lama_mem = matches!(self.settings.mem(&self.user), Ok(Some(_)));
        let get = |k: &str| std::env::var(k).ok();
        match auto::slurm_binding(&self.user, lama_mem, get) {
            Beside::Place(_) => Ok(()),
            Beside::LeaveToSlurm(note) => {
                log(LogLevel::Info, &format!("lama: {note}"));
                Ok(())
            }
            Beside::Refuse(why) => Err(fail(&why)),
        }
    }
}
