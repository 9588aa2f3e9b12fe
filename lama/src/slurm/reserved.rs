//! Hardware threads a job keeps for the system (`--thread-spec=N`): Slurm leaves them in the
//! step's cores and cpuset on a node with several threads per core, and only its task/affinity's
//! automatic binding keeps tasks off them. A SPANK plugin is not told of a job's `--thread-spec`
//! (it travels in the job's credential only), so the command that made the job (srun, salloc or
//! sbatch) passes its value on in [`THREAD_SPEC_VAR`], and every step of the job reads it there.

use crate::topology::NodeTopology;
use crate::Level;

/// The variable that carries the job's `--thread-spec` from the command that made the job to its
/// steps (set in sbatch's, salloc's or srun's own environment, which the job inherits).
pub const THREAD_SPEC_VAR: &str = "LAMA_THREAD_SPEC";

/// The `--thread-spec` a command line asks for (`--thread-spec=N` or `--thread-spec N`, the last
/// one winning), else the value of `env_var` (`SBATCH_THREAD_SPEC`, `SALLOC_THREAD_SPEC`,
/// `SLURM_THREAD_SPEC`, which Slurm's commands read as the option). `None` when neither asks,
/// or for a value Slurm itself would refuse (not a number): the command then fails on its own.
pub fn thread_spec_asked<S: AsRef<str>>(options: &[S], env_value: Option<&str>) -> Option<u32> {
    super::binding::own_option(options, "--thread-spec")
        .as_deref()
        .or(env_value)
        .and_then(|v| v.trim().parse::<u32>().ok())
}

/// The hardware threads (OS indexes, ascending) that `count` reserved threads are on a node, by
/// the rule of Slurm's task/affinity: the last thread of a core first, the last core of each
/// socket, the last socket first, then the cores before them, then the threads before those;
/// never a core's first thread nor a socket's first core, so a node with one thread per core has
/// none (Slurm reserves whole cores there, which leave the step's cores instead). Sockets are
/// the node's packages and Slurm's cores the node's cores in hwloc's logical order, as in
/// [`crate::plugin::cores_to_cpus`].
pub fn reserved_threads(topo: &NodeTopology, count: u32) -> Vec<u32> {
    let cores = topo.objects(Level::Core);
    let sockets = topo.objects(Level::Socket).len().max(1);
    let per_socket = cores.len() / sockets;
    let threads = cores.iter().map(|c| c.len()).max().unwrap_or(1);
    let pus = topo.pus();
    let mut left = count as usize;
    let mut out = Vec::new();
    'all: for t in (1..threads).rev() {
        for c in (1..per_socket).rev() {
            for s in (0..sockets).rev() {
                if left == 0 {
                    break 'all;
                }
                left -= 1;
                let Some(core) = cores.get(s * per_socket + c) else {
                    continue;
                };
                if t < core.len() {
                    out.extend(pus.get(core.start as usize + t));
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// Whether a job holding the cores `job_cores` (`S_JOB_ALLOC_CORES`) holds every core of the
/// node: Slurm makes a job with a `--thread-spec` whole-node, so one that does not hold the whole
/// node is one whose `--thread-spec` Slurm ignored (`AllowSpecResourcesUsage=no`, said by srun).
pub fn job_holds_node(topo: &NodeTopology, job_cores: &str) -> bool {
    let cores = match topo.objects(Level::Core).len() {
        0 => topo.num_pus(),
        n => n,
    };
    crate::idset::parse_list(job_cores)
        .is_ok_and(|c| c.len() == cores && c.last() < Some(&(cores as u32)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_from_the_command_line_or_its_variable() {
        assert_eq!(
            thread_spec_asked(&["-n2", "--thread-spec=2"], None),
            Some(2)
        );
        assert_eq!(
            thread_spec_asked(&["--thread-spec", "1", "-n2"], Some("3")),
            Some(1)
        );
        assert_eq!(thread_spec_asked(&["-n2"], Some("3")), Some(3));
        assert_eq!(thread_spec_asked(&["-n2"], None), None);
        assert_eq!(thread_spec_asked(&["--thread-spec=x"], None), None);
        assert_eq!(
            thread_spec_asked(&["--thread-spec=1", "--thread-spec=4"], None),
            Some(4)
        );
        // The program's own arguments are not srun's.
        assert_eq!(thread_spec_asked(&["--", "--thread-spec=1"], None), None);
    }

    #[test]
    fn slurms_order_over_threads_cores_and_sockets() {
        // pack:2 core:2 pu:2: core k holds OS PUs 2k and 2k+1 (cores 0-1 socket 0, 2-3 socket 1).
        // Slurm takes thread 1 of core 1 of socket 1 (core 3: PU 7), then of socket 0 (core 1:
        // PU 3); core 0 of a socket and thread 0 of a core are never taken.
        let t = NodeTopology::from_synthetic("pack:2 core:2 pu:2").unwrap();
        assert_eq!(reserved_threads(&t, 0), Vec::<u32>::new());
        assert_eq!(reserved_threads(&t, 1), vec![7]);
        assert_eq!(reserved_threads(&t, 2), vec![3, 7]);
        assert_eq!(reserved_threads(&t, 9), vec![3, 7]);
        // pack:1 core:4 pu:4: threads 3 of cores 3, 2, 1, then threads 2 of cores 3, 2, 1.
        let t = NodeTopology::from_synthetic("pack:1 core:4 pu:4").unwrap();
        assert_eq!(reserved_threads(&t, 4), vec![7, 11, 14, 15]);
        // One thread per core: none.
        let t = NodeTopology::from_synthetic("pack:2 core:4 pu:1").unwrap();
        assert!(reserved_threads(&t, 3).is_empty());
    }

    #[test]
    fn only_a_whole_node_job_can_have_reserved_threads() {
        let t = NodeTopology::from_synthetic("pack:2 core:2 pu:2").unwrap();
        assert!(job_holds_node(&t, "0-3"));
        assert!(!job_holds_node(&t, "0-2"));
        assert!(!job_holds_node(&t, "1-4"));
        assert!(!job_holds_node(&t, "x"));
    }
}
