//! Slurm's GPU binding task by task beside the automatic policy: the GPU decides the domain.
//!
//! - By mask (`--gpu-bind=closest`, `single:N`, `--ntasks-per-gpu`, the same through
//!   `--tres-bind=gres/gpu:`): Slurm binds a task's GPUs next to the CPUs its own task plugin
//!   gave the task, so the domain of that mask is the task's GPU domain.
//! - By task id (`map_gpu`, `mask_gpu`, `map`, `mask`, `per_task:N` from `--gpus-per-task`):
//!   [`super::gpu_by_id`] works each local task's GPUs out by Slurm's own rule, and the task
//!   belongs in the domains near them.
//!
//! Each task sees every local task's mask (`SLURM_CPU_BIND_LIST`, in local task order) and the
//! step's binding (`SLURMD_TRES_BIND`), so every task of a node works out the same moves
//! ([`follow_domains`]), and no two end up on the same CPUs.

/// Whether the step's `SLURMD_TRES_BIND` binds GPUs task by task next to the CPUs Slurm's task
/// plugin gave each task: `closest`, and `single:N` (what `--ntasks-per-gpu` sets). Slurm writes
/// `gres/gpu:closest`, or `gpu:closest`, parts joined by `+` or `;`. `map_gpu`, `mask_gpu` and
/// `per_task` choose by task id instead, so a task's mask says nothing of its GPUs there.
pub fn binds_gpus_by_mask(tres_bind: Option<&str>) -> bool {
    tres_bind
        .and_then(crate::locality::gpu_bind_mode)
        .map(|mode| mode.strip_prefix("verbose,").unwrap_or(mode))
        .is_some_and(|mode| mode.starts_with("closest") || mode.starts_with("single:"))
}

/// The CPUs (OS indexes, ascending) of each mask of a `SLURM_CPU_BIND_LIST` (`0x3,0xC0`), in
/// its order; `None` when one cannot be read.
pub fn mask_list(list: &str) -> Option<Vec<Vec<u32>>> {
    list.split(',')
        .map(|m| {
            let hex = m
                .trim()
                .strip_prefix("0x")
                .or(m.trim().strip_prefix("0X"))?;
            if hex.is_empty() || hex.len() > 1 << 14 {
                return None;
            }
            let mut cpus = Vec::new();
            for (k, c) in hex.chars().rev().enumerate() {
                let v = c.to_digit(16)?;
                cpus.extend(
                    (0..4)
                        .filter(|b| v >> b & 1 == 1)
                        .map(|b| (k * 4 + b) as u32),
                );
            }
            Some(cpus)
        })
        .collect()
}

/// The domain (index into `domains`, each its CPUs ascending) that holds all of `cpus`; `None`
/// for a mask over several domains (Slurm's closest GPUs are then those of all of them) or none.
pub fn domain_of(cpus: &[u32], domains: &[Vec<u32>]) -> Option<usize> {
    let first = cpus.first()?;
    let d = domains
        .iter()
        .position(|d| d.binary_search(first).is_ok())?;
    cpus.iter()
        .all(|c| domains[d].binary_search(c).is_ok())
        .then_some(d)
}

/// Which of the policy's task slots each task takes (a permutation: `slots[t]` for task `t`,
/// both in the node's rank order) when task `t` should be in one of the domains `wanted[t]` and
/// slot `s` lies in domain `slot_domains[s]`. Tasks that want one domain take its slots first,
/// in rank order; then those that accept several take the first slot left in any of them; the
/// rest (no wish, or no room left) take the slots left, in order.
pub fn follow_domains(slot_domains: &[Option<usize>], wanted: &[Vec<usize>]) -> Vec<usize> {
    let n = slot_domains.len();
    let mut taken = vec![false; n];
    let mut slots: Vec<Option<usize>> = vec![None; wanted.len()];
    for single in [true, false] {
        for (t, w) in wanted.iter().enumerate() {
            if w.is_empty() || (w.len() == 1) != single || slots[t].is_some() {
                continue;
            }
            let free =
                (0..n).find(|&s| !taken[s] && slot_domains[s].is_some_and(|d| w.contains(&d)));
            if let Some(s) = free {
                taken[s] = true;
                slots[t] = Some(s);
            }
        }
    }
    let mut free = (0..n).filter(|&s| !taken[s]);
    slots
        .into_iter()
        .map(|s| s.or_else(|| free.next()).unwrap_or(0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_bindings_that_follow_slurms_masks() {
        let by_mask = |b: &str| binds_gpus_by_mask(Some(b));
        assert!(by_mask("gres/gpu:closest"));
        assert!(by_mask("gres/gpu:verbose,closest"));
        assert!(by_mask("gres/gpu:single:1"));
        assert!(by_mask("gpu:closest"));
        assert!(by_mask("gres/nic:closest+gres/gpu:closest"));
        assert!(!by_mask("gres/gpu:verbose,map_gpu:3,2"));
        assert!(!by_mask("gres/gpu:mask_gpu:0x1"));
        assert!(!by_mask("gres/gpu:per_task:1"));
        assert!(!by_mask("gres/gpu:none"));
        assert!(!by_mask("gres/nic:closest"));
        assert!(!binds_gpus_by_mask(None));
    }

    #[test]
    fn masks_as_slurm_lists_them() {
        assert_eq!(
            mask_list("0x3,0xC0,0x100").unwrap(),
            vec![vec![0, 1], vec![6, 7], vec![8]]
        );
        assert_eq!(mask_list("0x0000000F").unwrap(), vec![vec![0, 1, 2, 3]]);
        assert!(mask_list("3,0xC").is_none());
        assert!(mask_list("0xZ").is_none());
        assert!(mask_list("0x").is_none());
    }

    #[test]
    fn the_domain_holding_the_whole_mask() {
        let doms = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        assert_eq!(domain_of(&[4, 5], &doms), Some(1));
        assert_eq!(domain_of(&[0, 3], &doms), Some(0));
        assert_eq!(domain_of(&[3, 4], &doms), None);
        assert_eq!(domain_of(&[9], &doms), None);
        assert_eq!(domain_of(&[], &doms), None);
    }

    #[test]
    fn slots_follow_the_wanted_domains() {
        // The policy packs tasks 0,1 in domain 0 and 2,3 in domain 1; Slurm put tasks 0,2 on
        // socket 0 and 1,3 on socket 1 (its cyclic default): 1 and 2 swap.
        let slots = [Some(0), Some(0), Some(1), Some(1)];
        let one = |d: usize| vec![d];
        let wanted = [one(0), one(1), one(0), one(1)];
        assert_eq!(follow_domains(&slots, &wanted), vec![0, 2, 1, 3]);
        // Three want domain 0, which has two slots: the third takes the slot left.
        let wanted = [one(0), one(0), one(0), one(1)];
        assert_eq!(follow_domains(&slots, &wanted), vec![0, 1, 3, 2]);
        // Nothing wanted: the policy's own order.
        assert_eq!(follow_domains(&slots, &vec![vec![]; 4]), vec![0, 1, 2, 3]);
        // Task 0 accepts either domain, task 1 only domain 0: task 1 is served first.
        let slots = [Some(0), Some(1)];
        assert_eq!(follow_domains(&slots, &[vec![0, 1], one(0)]), vec![1, 0]);
    }
}
