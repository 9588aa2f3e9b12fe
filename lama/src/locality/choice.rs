//! Which devices each task gets: the nearest of a kind, least loaded first, then a pass that
//! moves a task off a shared device onto an idle one as near.

use super::weights::Weights;
use super::{Kind, Locality, LocalityError, Scratch};

/// Gives each task `per_task` devices among `candidates`, nearest first. `dist[t][d]` is task
/// `t`'s distance to device `d` (indexes into the node's devices).
///
/// Ties go to the least loaded device, then the earliest; afterwards, while some device serves
/// two tasks and another serves none that is as near for one of them, that task moves.
pub fn assign<R: AsRef<[u64]>>(
    dist: &[R],
    candidates: &[usize],
    per_task: usize,
) -> Vec<Vec<usize>> {
    let n_dev = dist.first().map_or(0, |r| r.as_ref().len());
    let mut load = vec![0usize; n_dev];
    let mut out: Vec<Vec<usize>> = Vec::with_capacity(dist.len());
    for row in dist {
        let row = row.as_ref();
        let mut mine: Vec<usize> = Vec::with_capacity(per_task);
        for _ in 0..per_task.min(candidates.len()) {
            let best = candidates
                .iter()
                .copied()
                .filter(|d| !mine.contains(d))
                .min_by_key(|&d| (row[d], load[d], d));
            if let Some(d) = best {
                load[d] += 1;
                mine.push(d);
            }
        }
        out.push(mine);
    }
    loop {
        let mut moved = false;
        'tasks: for (t, mine) in out.iter_mut().enumerate() {
            for slot in 0..mine.len() {
                let d = mine[slot];
                if load[d] < 2 {
                    continue;
                }
                let idle = candidates
                    .iter()
                    .copied()
                    .filter(|&e| {
                        load[e] == 0
                            && dist[t].as_ref()[e] <= dist[t].as_ref()[d]
                            && !mine.contains(&e)
                    })
                    .min_by_key(|&e| (dist[t].as_ref()[e], e));
                if let Some(e) = idle {
                    load[d] -= 1;
                    load[e] += 1;
                    mine[slot] = e;
                    moved = true;
                    break 'tasks;
                }
            }
        }
        if !moved {
            break;
        }
    }
    // Nearest first within each task.
    for (t, mine) in out.iter_mut().enumerate() {
        mine.sort_by_key(|&d| (dist[t].as_ref()[d], d));
    }
    out
}

/// What one node hands its tasks: per task, the NICs and GPUs (device indexes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskDevices {
    /// NICs, nearest first.
    pub nics: Vec<usize>,
    /// GPUs, nearest first.
    pub gpus: Vec<usize>,
}

/// Places `nics` NICs and `gpus` GPUs per task for tasks running on `task_cpus`.
pub fn choose<C: AsRef<[u32]>>(
    loc: &Locality,
    task_cpus: &[C],
    nics: usize,
    gpus: usize,
    allowed_gpus: Option<&[usize]>,
    weights: Option<&Weights>,
) -> Result<Vec<TaskDevices>, LocalityError> {
    let mut out = vec![TaskDevices::default(); task_cpus.len()];
    if nics == 0 && gpus == 0 {
        return Ok(out);
    }
    // One matrix, a row per task: this runs in every step that asks for devices, with up to a
    // task per hardware thread.
    let n = loc.devices.len();
    let mut flat = Vec::with_capacity(task_cpus.len() * n);
    let mut scratch = Scratch::default();
    for c in task_cpus {
        loc.distances_into(c.as_ref(), weights, &mut scratch, &mut flat);
    }
    let dist: Vec<&[u64]> = (0..task_cpus.len())
        .map(|t| &flat[t * n..(t + 1) * n])
        .collect();
    for (kind, want, label) in [(Kind::Nic, nics, "NIC(s)"), (Kind::Gpu, gpus, "GPU(s)")] {
        if want == 0 {
            continue;
        }
        let cand = loc.candidates(
            kind,
            if kind == Kind::Gpu {
                allowed_gpus
            } else {
                None
            },
        );
        if cand.len() < want {
            let total = loc.devices.iter().filter(|d| d.kind == kind).count();
            let what = if kind == Kind::Gpu && allowed_gpus.is_some() {
                format!("the job was given {} of this node's {total}", cand.len())
            } else {
                format!("this node has {}", cand.len())
            };
            return Err(LocalityError::TooFew {
                kind: label,
                wanted: want,
                what,
            });
        }
        for (t, picks) in assign(&dist, &cand, want).into_iter().enumerate() {
            match kind {
                Kind::Nic => out[t].nics = picks,
                Kind::Gpu => out[t].gpus = picks,
            }
        }
    }
    Ok(out)
}
