//! Saying something once per node when any of the node's tasks may be the one to notice it.
//!
//! Every task is a separate fork of slurmstepd, so an ordinary flag set in one task is not seen
//! by the others. `user_init`, which runs before the forks, maps one shared anonymous page; the
//! tasks inherit it, and the first to claim a message there prints it.

use std::sync::atomic::{AtomicU32, Ordering};

/// Messages a node says once.
#[derive(Clone, Copy)]
pub enum Once {
    /// Why the node's tasks do not start.
    Failure = 1,
    /// Variables withheld for lack of room.
    Withheld = 2,
    /// A task's ids that disagree with the step's map.
    Mismatch = 4,
    /// GPUs the policy chose that Slurm did not leave a task.
    SlurmGpus = 8,
    /// A task lama placed away from the GPUs Slurm binds to it.
    FarGpus = 16,
}

/// A page the node's tasks share.
pub struct NodeOnce(Option<&'static AtomicU32>);

impl NodeOnce {
    /// Maps the shared page (in `user_init`, before the tasks fork). Without it (the map
    /// failed) [`NodeOnce::claim`] falls back to the node's first task.
    pub fn new() -> NodeOnce {
        // SAFETY: an anonymous shared mapping of one page, not tied to any file or existing
        // memory; it is never unmapped, so the reference below stays valid for the process.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return NodeOnce(None);
        }
        // SAFETY: the page is zeroed, aligned and live for the process; AtomicU32 has the
        // layout of u32, and every access to it goes through the atomic.
        NodeOnce(Some(unsafe { &*p.cast::<AtomicU32>() }))
    }

    /// Whether this task is the first of the node to say `what`. `first_task` tells whether
    /// this is the node's first task, asked only when the page could not be mapped.
    pub fn claim(&self, what: Once, first_task: impl FnOnce() -> bool) -> bool {
        match self.0 {
            Some(flags) => {
                let bit = what as u32;
                flags.fetch_or(bit, Ordering::AcqRel) & bit == 0
            }
            None => first_task(),
        }
    }
}

/// Ends this task before it runs the user's program, as slurmstepd does when a plugin's
/// `task_init` fails, but without its two error lines per task: the reason was said once for
/// the node, and srun reports the exit code once per node.
pub fn stop_task() -> ! {
    // SAFETY: _exit ends only this forked task; nothing of slurmstepd's runs in it afterwards.
    unsafe { libc::_exit(1) }
}
