//! srun's part of a block step's node order (Slurm 26.05 and later; see
//! `lama::slurm::node_order`): once the step exists, lama in srun reads the step's layout from
//! Slurm (`slurm_job_step_layout_get`, the call `sattach` and `sstat` make) and, when its nodes
//! take their tasks in an order other than node order, writes that order into srun's
//! environment, which srun merges into the step's right after `local_user_init`. Every node
//! then reads the same order and checks it against its own tasks; the tasks keep it, for
//! `lama taskmap --from-slurm`.
//!
//! One call to the controller (or the job's step manager) per multi-node step, in srun only,
//! and only where srun's configuration can order steps at all (a topology plugin that ranks
//! nodes, or a `topology.yaml`, and no `CR_NO_DIST_TOPO_BLOCK`: `c/slurm_conf.c`, a stat at
//! most); plugins built for earlier releases, whose block steps are always in node order, make
//! none.

use lama::slurm::node_order::STEP_ORDER_VAR;

/// In srun, for the step `(job, step, nodes)` (`None` when the step's `TASK_MAP` is off): sets
/// [`STEP_ORDER_VAR`] when Slurm laid the step's tasks out node after node in an order other than
/// node order, and removes one inherited from srun's own environment (an outer step's task)
/// otherwise. Returns why the order could not be read, for srun's verbose log.
#[inline(never)]
pub fn pass(step: Option<(u32, u32, u32)>) -> Option<String> {
    // srun's own environment, which it merges into the step's right after this hook; srun set
    // the step's variables the same way, from this thread.
    std::env::remove_var(STEP_ORDER_VAR);
    let (job, step, nodes) = step?;
    // A heterogeneous step's components are laid out one by one: not read (its map is checked
    // task by task, and withheld where it does not match).
    if nodes < 2 || std::env::var("SLURM_HET_SIZE").is_ok_and(|n| n.trim() != "1") {
        return None;
    }
    match read(job, step) {
        Ok(Some(order)) => {
            std::env::set_var(STEP_ORDER_VAR, order);
            None
        }
        Ok(None) => None,
        Err(e) => Some(e),
    }
}

#[cfg(not(topo_order))]
fn read(_job: u32, _step: u32) -> Result<Option<String>, String> {
    Ok(None)
}

#[cfg(topo_order)]
extern "C" {
    /// `c/slurm_conf.c`: 1 when srun's configuration may lay block steps out in topology
    /// order, 0 when it cannot, -1 when srun has none to read.
    fn lama_topology_may_order() -> std::os::raw::c_int;
}

/// Out of line and out of the hot layout (spank/hot.ld): only multi-node steps of a cluster
/// whose configuration can order steps get this far.
#[cfg(topo_order)]
#[cold]
#[inline(never)]
fn read(job: u32, step: u32) -> Result<Option<String>, String> {
    use lama::slurm::node_order::{block_order, is_node_order, step_value};
    use std::os::raw::{c_char, c_void};

    // SAFETY: reads srun's loaded configuration (a global of libslurm) and at most stats one
    // file; no argument, nothing kept.
    if unsafe { lama_topology_may_order() } == 0 {
        return Ok(None);
    }

    /// `slurm_step_id_t`, as `slurm.h` declares it (checked by build.rs).
    #[repr(C)]
    struct StepId {
        sluid: u64,
        job_id: u32,
        step_het_comp: u32,
        step_id: u32,
    }
    /// `slurm_step_layout_t`, as `slurm.h` declares it (checked by build.rs).
    #[repr(C)]
    struct StepLayout {
        cpt_compact_array: *mut u16,
        cpt_compact_cnt: u32,
        cpt_compact_reps: *mut u32,
        alias_addrs: *mut c_void,
        node_cnt: u32,
        node_list: *mut c_char,
        plane_size: u16,
        start_protocol_ver: u16,
        tasks: *mut u16,
        task_cnt: u32,
        task_dist: u32,
        tids: *mut *mut u32,
    }
    type Get = unsafe extern "C" fn(*mut StepId) -> *mut StepLayout;
    type Free = unsafe extern "C" fn(*mut StepLayout);
    const NO_VAL: u32 = 0xffff_fffe;

    // SAFETY: dlsym with NUL-terminated names; RTLD_DEFAULT searches the symbols srun (linked
    // with libslurm) already has, and loads nothing.
    let (get, free) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"slurm_job_step_layout_get".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"slurm_job_step_layout_free".as_ptr()),
        )
    };
    if get.is_null() || free.is_null() {
        return Err("srun has no slurm_job_step_layout_get".into());
    }
    // SAFETY: both symbols are libslurm's functions of these prototypes (slurm.h).
    let (get, free) = unsafe {
        (
            std::mem::transmute::<*mut c_void, Get>(get),
            std::mem::transmute::<*mut c_void, Free>(free),
        )
    };
    let mut id = StepId {
        sluid: 0,
        job_id: job,
        step_het_comp: NO_VAL,
        step_id: step,
    };
    // SAFETY: `id` is a valid step id for the call's duration; the result is NULL or a layout
    // that we own until `free`.
    let layout = unsafe { get(&mut id) };
    if layout.is_null() {
        return Err(format!(
            "Slurm gave no layout for step {job}.{step} ({})",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: non-NULL, as Slurm filled it.
    let l = unsafe { &*layout };
    let order =
        if l.tasks.is_null() || l.tids.is_null() || l.node_cnt as usize > lama::limits::MAX_NODES {
            None
        } else {
            let n = l.node_cnt as usize;
            // SAFETY: `tasks` and `tids` hold `node_cnt` entries; `tids[i]` holds `tasks[i]` ids
            // (slurm.h), and is not read when NULL.
            let tids: Vec<&[u32]> = (0..n)
                .map(|i| unsafe {
                    let count = *l.tasks.add(i) as usize;
                    let ids = *l.tids.add(i);
                    if ids.is_null() || count == 0 {
                        &[][..]
                    } else {
                        std::slice::from_raw_parts(ids, count)
                    }
                })
                .collect();
            block_order(&tids)
        };
    // SAFETY: the layout `get` returned, freed once; `l` and `tids` are not used after.
    unsafe { free(layout) };
    // A value past what one variable may hold (Linux's limit) is not passed: the nodes then
    // withhold the map and say why.
    Ok(order
        .filter(|o| !is_node_order(o))
        .map(|o| step_value(job, step, &o))
        .filter(|v| v.len() < lama::environ::MAX_VARIABLE_BYTES))
}
