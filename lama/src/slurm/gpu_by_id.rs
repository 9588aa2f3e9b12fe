//! GPUs Slurm binds by task id (`--gpu-bind=map_gpu`, `mask_gpu`, `--tres-bind=gres/gpu:map:`,
//! `mask:`, `per_task:N` from `--gpus-per-task`): [`ById`] works each local task's GPUs out by
//! Slurm's own rule for its device cgroups, from the step's GPUs ([`BoundGpus`], read in
//! `user_init`), and [`domains_near`] says which domains a task belongs in beside them. The
//! moves themselves are [`super::gpu_bind::follow_domains`]'s.

use crate::locality::{Kind, Locality};

/// The step's GPUs on a node as Slurm numbers them, read in `user_init` from the step's
/// environment (each task's holds its own GPUs only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepGpus {
    /// Slurm's index of each GPU of the step on the node (its order in `gres.conf`), ascending.
    pub indexes: Vec<u32>,
    /// Whether a binding's GPU numbers count the step's GPUs rather than the node's: Slurm's
    /// local device index, under task/cgroup with `ConstrainDevices`. The step's
    /// `CUDA_VISIBLE_DEVICES` (or `ROCR_VISIBLE_DEVICES`, `ZE_AFFINITY_MASK`) then counts from 0
    /// where `SLURM_STEP_GPUS` names the node's indexes; where both agree, so do the two rules.
    pub local: bool,
}

/// The step's GPUs from `SLURM_STEP_GPUS` (`SLURM_JOB_GPUS` in a batch step), read through
/// `get` in `user_init`; `None` without them or when one is not a number.
pub fn step_gpus(get: impl Fn(&str) -> Option<String>) -> Option<StepGpus> {
    let numbers =
        |v: &str| -> Option<Vec<u32>> { v.split(',').map(|e| e.trim().parse().ok()).collect() };
    let indexes = get("SLURM_STEP_GPUS")
        .or_else(|| get("SLURM_JOB_GPUS"))
        .and_then(|v| numbers(&v))
        .filter(|v| !v.is_empty())?;
    let visible = [
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
    ]
    .iter()
    .find_map(|k| get(k));
    let local = visible
        .and_then(|v| numbers(&v))
        .is_some_and(|v| v != indexes);
    Some(StepGpus { indexes, local })
}

/// How Slurm chooses a task's GPUs by its local task id (`gres/gpu:map_gpu:`, `mask_gpu:`,
/// `map:`, `mask:`, `per_task:` in `SLURMD_TRES_BIND`), rather than by its CPU mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ById {
    /// One GPU number per entry, each entry for `.1` tasks in turn, the list repeating.
    Map(Vec<(i64, usize)>),
    /// A bit mask of GPU numbers per entry, as `Map`.
    Mask(Vec<(i64, usize)>),
    /// `N` GPUs per task (`--gpus-per-task`), each task in local order taking first the free
    /// GPUs near its CPUs (Slurm 23.11 and later).
    PerTask(usize),
    /// `N` GPUs per task, task `t` the step's GPUs `t*N` to `t*N+N-1` in order (Slurm before
    /// 23.11).
    PerTaskInOrder(usize),
}

/// The binding of `SLURMD_TRES_BIND` when it chooses GPUs by task id; `None` otherwise.
/// `nearest_first`: the release gives `per_task` GPUs near each task first (Slurm 23.11 and
/// later).
pub fn by_id(tres_bind: Option<&str>, nearest_first: bool) -> Option<ById> {
    let mode = crate::locality::gpu_bind_mode(tres_bind?)?;
    let mode = mode.strip_prefix("verbose,").unwrap_or(mode);
    // Slurm reads the list up to the next binding of another kind.
    let list = |l: &str| -> Vec<(i64, usize)> {
        l.split('+')
            .next()
            .unwrap_or_default()
            .split(',')
            .filter(|e| !e.is_empty())
            .map(|e| {
                let times = e.split_once('*').map_or(1, |(_, m)| c_atoi(m));
                (
                    c_strtol(e),
                    usize::try_from(times).ok().filter(|&t| t > 0).unwrap_or(1),
                )
            })
            .collect()
    };
    let prefixed = |p: &[&str]| p.iter().find_map(|p| mode.strip_prefix(p));
    if let Some(l) = prefixed(&["map_gpu:", "map:"]) {
        Some(ById::Map(list(l)))
    } else if let Some(l) = prefixed(&["mask_gpu:", "mask:"]) {
        Some(ById::Mask(list(l)))
    } else {
        let n = mode.strip_prefix("per_task:")?;
        let n = usize::try_from(c_atoi(n)).unwrap_or(0);
        Some(if nearest_first {
            ById::PerTask(n)
        } else {
            ById::PerTaskInOrder(n)
        })
    }
}

impl ById {
    /// The GPUs (Slurm's indexes) Slurm lets each of `tasks` local tasks open, by its rule for
    /// the step's device cgroups: a map or mask entry names the node's GPU numbers, or the
    /// step's under `local`; a number outside what the node has, or naming no GPU of the step,
    /// gives the step's first GPU. `near(task, gpu)`, for `per_task`, says whether a GPU is
    /// close to the CPUs Slurm's task plugin bound the task to (its `gres.conf` cores).
    pub fn tasks_gpus(
        &self,
        step: &StepGpus,
        node_gpus: usize,
        tasks: usize,
        near: impl Fn(usize, u32) -> bool,
    ) -> Vec<Vec<u32>> {
        let Some(&first) = step.indexes.first() else {
            return vec![Vec::new(); tasks];
        };
        let numbered = |bits: &[usize]| -> Vec<u32> {
            let mut gpus: Vec<u32> = if step.local {
                bits.iter()
                    .filter_map(|&b| step.indexes.get(b).copied())
                    .collect()
            } else {
                bits.iter()
                    .filter_map(|&b| u32::try_from(b).ok())
                    .filter(|g| step.indexes.contains(g))
                    .collect()
            };
            if gpus.is_empty() {
                gpus.push(first);
            }
            gpus
        };
        let entry = |list: &[(i64, usize)], t: usize| -> Option<i64> {
            let total: usize = list.iter().map(|e| e.1).sum();
            let mut k = t.checked_rem(total)?;
            list.iter().find_map(|&(v, times)| {
                if k < times {
                    Some(v)
                } else {
                    k -= times;
                    None
                }
            })
        };
        match self {
            ById::Map(list) => (0..tasks)
                .map(|t| {
                    let bits = entry(list, t)
                        .and_then(|v| usize::try_from(v).ok())
                        .filter(|&v| v < node_gpus);
                    numbered(bits.as_slice())
                })
                .collect(),
            ById::Mask(list) => (0..tasks)
                .map(|t| {
                    let width = node_gpus.min(63);
                    let bits: Vec<usize> = entry(list, t)
                        .filter(|&v| v >= 1 && v < 1 << width)
                        .map(|v| (0..width).filter(|b| v >> b & 1 == 1).collect())
                        .unwrap_or_default();
                    numbered(&bits)
                })
                .collect(),
            ById::PerTaskInOrder(n) => (0..tasks)
                .map(|t| {
                    let skip = t.saturating_mul(*n);
                    let mine: Vec<u32> = step.indexes.iter().skip(skip).take(*n).copied().collect();
                    if mine.is_empty() {
                        vec![first]
                    } else {
                        mine
                    }
                })
                .collect(),
            ById::PerTask(n) => {
                let mut free = step.indexes.clone();
                (0..tasks)
                    .map(|t| {
                        let mut mine = Vec::new();
                        for closest in [true, false] {
                            while mine.len() < *n {
                                let Some(k) = free.iter().position(|&g| !closest || near(t, g))
                                else {
                                    break;
                                };
                                mine.push(free.remove(k));
                            }
                        }
                        mine.sort_unstable();
                        mine
                    })
                    .collect()
            }
        }
    }
}

/// The domains (indexes into `domains`, each its CPUs ascending) whose CPUs meet those near
/// every one of a task's GPUs (`near`, one list per GPU): where the task belongs. Empty when no
/// domain is near them all, or a GPU's CPUs are unknown.
pub fn domains_near(near: &[&[u32]], domains: &[Vec<u32>]) -> Vec<usize> {
    if near.is_empty() || near.iter().any(|c| c.is_empty()) {
        return Vec::new();
    }
    (0..domains.len())
        .filter(|&d| {
            near.iter()
                .all(|cpus| cpus.iter().any(|c| domains[d].binary_search(c).is_ok()))
        })
        .collect()
}

/// What every task of a node needs, besides the binding, to work out the GPUs Slurm binds to
/// each local task by task id ([`ById`]): read once in `user_init`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundGpus {
    /// The step's GPUs on the node.
    pub step: StepGpus,
    /// Per GPU of `step`, the CPUs nearest it (its locality; empty when the node's topology
    /// does not show it).
    pub near: Vec<Vec<u32>>,
    /// How many GPUs the node has: Slurm's bound on a binding's GPU numbers.
    pub node_gpus: usize,
}

impl BoundGpus {
    /// The step's GPUs (read through `get` from the step's environment) on a node whose devices
    /// are `loc`; a GPU's Slurm index is its runtime index there, as lama reads
    /// `SLURM_STEP_GPUS` elsewhere.
    pub fn read(loc: &Locality, get: impl Fn(&str) -> Option<String>) -> Option<BoundGpus> {
        let step = step_gpus(get)?;
        let gpus: Vec<&crate::locality::Device> = loc
            .devices()
            .iter()
            .filter(|d| d.kind == Kind::Gpu)
            .collect();
        let near = step
            .indexes
            .iter()
            .map(|&i| {
                let mut cpus = gpus
                    .iter()
                    .find(|d| d.index == Some(i))
                    .and_then(|d| loc.place(d.place))
                    .map(|p| p.cpus.to_vec())
                    .unwrap_or_default();
                cpus.sort_unstable();
                cpus
            })
            .collect();
        let top = step.indexes.iter().max().map_or(0, |&m| m as usize + 1);
        Some(BoundGpus {
            node_gpus: gpus.len().max(top),
            step,
            near,
        })
    }

    /// The CPUs nearest Slurm's GPU `index` (empty when unknown).
    pub fn near(&self, index: u32) -> &[u32] {
        self.step
            .indexes
            .iter()
            .position(|&i| i == index)
            .and_then(|k| self.near.get(k))
            .map_or(&[], Vec::as_slice)
    }

    /// Each of `tasks` local tasks' GPUs under `rule`, and the domains near all of them
    /// ([`domains_near`]). `masks`, the CPUs Slurm's task plugin bound each local task to
    /// (`SLURM_CPU_BIND_LIST`), decide which GPUs are near a task for `per_task`; without them
    /// every GPU counts as near, as Slurm counts a task bound to the whole node.
    pub fn wanted(
        &self,
        rule: &ById,
        tasks: usize,
        masks: Option<&[Vec<u32>]>,
        domains: &[Vec<u32>],
    ) -> Vec<(Vec<u32>, Vec<usize>)> {
        let near = |t: usize, g: u32| {
            let cpus = self.near(g);
            match masks.and_then(|m| m.get(t)) {
                Some(mask) if !cpus.is_empty() => {
                    mask.iter().any(|c| cpus.binary_search(c).is_ok())
                }
                _ => true,
            }
        };
        rule.tasks_gpus(&self.step, self.node_gpus, tasks, near)
            .into_iter()
            .map(|gpus| {
                let near: Vec<&[u32]> = gpus.iter().map(|&g| self.near(g)).collect();
                let d = domains_near(&near, domains);
                (gpus, d)
            })
            .collect()
    }
}

/// C's `strtol(s, NULL, 0)`, as Slurm reads a map or mask entry: leading blanks, a sign, then
/// hexadecimal after `0x`, octal after `0`, else decimal, up to the first other character.
fn c_strtol(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = match s.get(..2) {
        Some("0x" | "0X") if s[2..].starts_with(|c: char| c.is_ascii_hexdigit()) => (16, &s[2..]),
        _ if s.starts_with('0') => (8, s),
        _ => (10, s),
    };
    let mut v: i64 = 0;
    for c in digits.chars().map_while(|c| c.to_digit(radix)) {
        v = v
            .saturating_mul(i64::from(radix))
            .saturating_add(i64::from(c));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// C's `atoi`: decimal only.
fn c_atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    let v = digits
        .chars()
        .map_while(|c| c.to_digit(10))
        .fold(0i64, |v, c| {
            v.saturating_mul(10).saturating_add(i64::from(c))
        });
    if t.starts_with('-') {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(indexes: &[u32], local: bool) -> StepGpus {
        StepGpus {
            indexes: indexes.to_vec(),
            local,
        }
    }

    #[test]
    fn bindings_by_task_id() {
        let rule = |b: &str| by_id(Some(b), true);
        assert_eq!(
            rule("gres/gpu:verbose,map_gpu:3,0x1*2"),
            Some(ById::Map(vec![(3, 1), (1, 2)]))
        );
        assert_eq!(
            rule("gres/gpu:mask:0x3,010+gres/nic:closest"),
            Some(ById::Mask(vec![(3, 1), (8, 1)]))
        );
        assert_eq!(rule("gpu:per_task:2"), Some(ById::PerTask(2)));
        // A repetition count of 0 is 1 in Slurm.
        assert_eq!(rule("gres/gpu:map:2*0"), Some(ById::Map(vec![(2, 1)])));
        assert_eq!(rule("gres/gpu:closest"), None);
        assert_eq!(rule("gres/gpu:single:1"), None);
        assert_eq!(rule("gres/gpu:none"), None);
        assert_eq!(by_id(None, true), None);
        assert_eq!(
            by_id(Some("gpu:per_task:1"), false),
            Some(ById::PerTaskInOrder(1))
        );
    }

    #[test]
    fn map_and_mask_as_slurm_reads_them() {
        let all = step(&[0, 1, 2, 3], false);
        let near = |_: usize, _: u32| true;
        // Entries by local task id, each repeated, the list starting over.
        let map = ById::Map(vec![(3, 1), (1, 2)]);
        assert_eq!(
            map.tasks_gpus(&all, 4, 5, near),
            vec![vec![3], vec![1], vec![1], vec![3], vec![1]]
        );
        // A GPU the node lacks, or one not the step's: the step's first GPU.
        let part = step(&[2, 3], false);
        let map = ById::Map(vec![(9, 1), (0, 1), (3, 1)]);
        assert_eq!(
            map.tasks_gpus(&part, 4, 3, near),
            vec![vec![2], vec![2], vec![3]]
        );
        // Under ConstrainDevices the numbers count the step's GPUs.
        let local = step(&[2, 3], true);
        let map = ById::Map(vec![(1, 1), (0, 1), (2, 1)]);
        assert_eq!(
            map.tasks_gpus(&local, 4, 3, near),
            vec![vec![3], vec![2], vec![2]]
        );
        // Masks: bits of the node's GPUs, or of the step's; a bit beyond the node: the first.
        let mask = ById::Mask(vec![(0xC, 1), (0x3, 1), (0x11, 1)]);
        assert_eq!(
            mask.tasks_gpus(&all, 4, 3, near),
            vec![vec![2, 3], vec![0, 1], vec![0]]
        );
        assert_eq!(
            mask.tasks_gpus(&local, 4, 2, near),
            vec![vec![2], vec![2, 3]]
        );
    }

    #[test]
    fn per_task_takes_the_free_gpus_near_each_task_first() {
        // GPUs 0,1 near socket 0, 2,3 near socket 1; Slurm's cyclic masks put tasks 0,2 on
        // socket 0 and 1,3 on socket 1.
        let near = |t: usize, g: u32| t.is_multiple_of(2) == (g < 2);
        let all = step(&[0, 1, 2, 3], false);
        assert_eq!(
            ById::PerTask(1).tasks_gpus(&all, 4, 4, near),
            vec![vec![0], vec![2], vec![1], vec![3]]
        );
        // Two each: task 1 finds socket 1's GPUs; task 0 took socket 0's.
        assert_eq!(
            ById::PerTask(2).tasks_gpus(&all, 4, 2, near),
            vec![vec![0, 1], vec![2, 3]]
        );
        // Before Slurm 23.11: the step's GPUs in turn, the first one past the end.
        assert_eq!(
            ById::PerTaskInOrder(1).tasks_gpus(&all, 4, 5, near),
            vec![vec![0], vec![1], vec![2], vec![3], vec![0]]
        );
        assert_eq!(
            ById::PerTaskInOrder(3).tasks_gpus(&all, 4, 2, near),
            vec![vec![0, 1, 2], vec![3]]
        );
        // Near GPUs run out: the free ones in order.
        let near0 = |_: usize, g: u32| g == 0;
        assert_eq!(
            ById::PerTask(1).tasks_gpus(&all, 4, 3, near0),
            vec![vec![0], vec![1], vec![2]]
        );
    }

    #[test]
    fn the_steps_gpus_and_their_numbering() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.to_string())
        };
        assert_eq!(
            step_gpus(env(&[
                ("SLURM_STEP_GPUS", "1,2"),
                ("CUDA_VISIBLE_DEVICES", "0,1")
            ])),
            Some(step(&[1, 2], true))
        );
        assert_eq!(
            step_gpus(env(&[
                ("SLURM_STEP_GPUS", "1,2"),
                ("CUDA_VISIBLE_DEVICES", "1,2")
            ])),
            Some(step(&[1, 2], false))
        );
        assert_eq!(step_gpus(env(&[("SLURM_STEP_GPUS", "0,x")])), None);
        assert_eq!(step_gpus(env(&[])), None);
    }

    #[test]
    fn domains_near_every_gpu_of_a_task() {
        let doms = vec![vec![0, 1], vec![2, 3], vec![4, 5]];
        assert_eq!(domains_near(&[&[2, 3]], &doms), vec![1]);
        // A GPU hanging off a package of two domains: either.
        assert_eq!(domains_near(&[&[0, 1, 2, 3]], &doms), vec![0, 1]);
        assert_eq!(domains_near(&[&[0, 1, 2, 3], &[2]], &doms), vec![1]);
        assert!(domains_near(&[&[0], &[4]], &doms).is_empty());
        assert!(domains_near(&[], &doms).is_empty());
    }

    #[test]
    fn numbers_as_c_reads_them() {
        assert_eq!(c_strtol("0x1F*2"), 31);
        assert_eq!(c_strtol("017"), 15);
        assert_eq!(c_strtol(" 12abc"), 12);
        assert_eq!(c_strtol("-3"), -3);
        assert_eq!(c_strtol("x"), 0);
        assert_eq!(c_strtol("0x"), 0);
        assert_eq!(c_atoi("3x"), 3);
        assert_eq!(c_atoi("-2"), -2);
    }
}
