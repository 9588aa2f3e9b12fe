//! Binding the calling task to CPUs and its memory to NUMA nodes.

use std::io;

use lama::memory::MemPolicy;

/// A kernel bit mask of `ids`, sized to the largest; `None` for no id.
fn mask_of(ids: &[u32]) -> Option<Vec<libc::c_ulong>> {
    let max = *ids.iter().max()?;
    let bits = libc::c_ulong::BITS as usize;
    let mut mask: Vec<libc::c_ulong> = vec![0; max as usize / bits + 1];
    for &i in ids {
        mask[i as usize / bits] |= 1 << (i as usize % bits);
    }
    Some(mask)
}

/// The set bits of a kernel mask, ascending.
fn bits_of(mask: &[libc::c_ulong]) -> Vec<u32> {
    let bits = libc::c_ulong::BITS as usize;
    let mut out = Vec::new();
    for (w, &word) in mask.iter().enumerate() {
        for b in 0..bits {
            if word >> b & 1 == 1 {
                out.push((w * bits + b) as u32);
            }
        }
    }
    out
}

/// Asks the kernel for a mask, from 1,024 bits up to `most_words` words, doubling while it
/// answers `EINVAL` (its mask is larger than ours): `get` fills the mask it is given and
/// returns the system call's result.
fn read_mask(
    most_words: usize,
    mut get: impl FnMut(&mut [libc::c_ulong]) -> libc::c_long,
) -> Result<Vec<u32>, String> {
    let mut words = 1024 / libc::c_ulong::BITS as usize;
    loop {
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        if get(&mut mask) == 0 {
            return Ok(bits_of(&mask));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) || words >= most_words {
            return Err(e.to_string());
        }
        words *= 2;
    }
}

/// The result of a libc call that sets `errno`.
fn checked(rc: libc::c_long) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error().to_string())
    }
}

/// Binds the calling process to `cpus` (OS indexes). The mask is sized to the largest CPU, so
/// machines beyond glibc's fixed 1024-CPU set work too.
pub fn bind(cpus: &[u32]) -> Result<(), String> {
    let mask = mask_of(cpus).ok_or("no CPUs to bind to")?;
    let bytes = std::mem::size_of_val(mask.as_slice());
    // SAFETY: the kernel reads `bytes` bytes from a live buffer of exactly that size.
    checked(
        unsafe { libc::sched_setaffinity(0, bytes, mask.as_ptr().cast::<libc::cpu_set_t>()) }
            .into(),
    )
}

/// The CPUs the calling process may run on (OS indexes, ascending).
pub fn allowed() -> Result<Vec<u32>, String> {
    read_mask(1 << 16, |mask| {
        let bytes = std::mem::size_of_val(mask);
        // SAFETY: the kernel writes at most `bytes` bytes into a live buffer of that size.
        unsafe { libc::sched_getaffinity(0, bytes, mask.as_mut_ptr().cast::<libc::cpu_set_t>()) }
            .into()
    })
}

/// A file the kernel writes (procfs, sysfs, cgroupfs), read whole: they are small, and it takes
/// one open and one or two reads, no `stat`, since each step reads a few.
fn read_kernel(path: &std::path::Path) -> io::Result<String> {
    use std::io::Read;
    let mut text = String::with_capacity(256);
    std::fs::File::open(path)?
        .take(1 << 16)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// [`read_kernel`], its path in the error.
fn read_system(path: &str) -> Result<String, String> {
    read_kernel(std::path::Path::new(path)).map_err(|e| format!("cannot read {path}: {e}"))
}

/// A cpulist read from `path`.
fn cpu_list(path: &std::path::Path, text: &str) -> Result<Vec<u32>, String> {
    lama::idset::parse_list(text.trim()).map_err(|e| format!("{}: {e}", path.display()))
}

/// What slurmd learns of its node at start for its steps ([`lama::cache::System`]): the CPUs
/// online and where the cpusets' cgroup hierarchy is mounted.
#[allow(dead_code)] // the Slurm plugin's, which shares this file
pub fn system() -> Result<lama::cache::System, String> {
    let online = read_system(ONLINE)?;
    let online = cpu_list(std::path::Path::new(ONLINE), &online)?;
    let cpusets = read_system("/proc/self/mountinfo")
        .ok()
        .and_then(|m| lama::cpuset::Hierarchy::find(&m));
    Ok(lama::cache::System {
        online,
        cpusets,
        slurm_cores: None,
    })
}

/// Where Linux lists the CPUs online.
const ONLINE: &str = "/sys/devices/system/cpu/online";

/// The CPUs of the calling process's cgroup cpuset that are online (OS indexes, ascending):
/// what Slurm's cgroup confinement gives the step, whatever affinity this process inherited
/// (slurmd pins itself, and so its slurmstepds, to the specialized cores under `CoreSpecCount`
/// without confinement). Every online CPU where no cpuset hierarchy is mounted. `known` is what
/// slurmd learned of the node at start (its cache's [`lama::cache::System`]): then the CPUs
/// online, the process's own `/proc/self/cpuset` and its cpuset's file are read, and the mount
/// table only when that file is not where slurmd saw the hierarchy (it moved since).
#[allow(dead_code)] // the Slurm plugin's, which shares this file
pub fn cpuset_cpus(known: Option<&lama::cache::System>) -> Result<Vec<u32>, String> {
    if let Some(sys) = known.filter(|s| s.cpusets.is_none()) {
        return Ok(sys.online.clone());
    }
    // Read once, and again rather than from the cache: this path is the rare one, and a CPU
    // taken offline since slurmd started may still be in an old kernel's cpuset file.
    let online = read_system(ONLINE)?;
    let online = cpu_list(std::path::Path::new(ONLINE), &online)?;
    // A kernel without cpusets has no /proc/self/cpuset.
    let Ok(cpuset) = read_system("/proc/self/cpuset") else {
        return Ok(online);
    };
    if let Some(h) = known.and_then(|s| s.cpusets.as_ref()) {
        if let Some(cpus) = first_cpuset(&h.files(&cpuset), &online)? {
            return Ok(cpus);
        }
    }
    // No hierarchy cached, or it moved since slurmd saw it: the mounts as they are now.
    let files = read_system("/proc/self/mountinfo")
        .map_or_else(|_| Vec::new(), |m| lama::cpuset::cpuset_files(&m, &cpuset));
    Ok(first_cpuset(&files, &online)?.unwrap_or(online))
}

/// The online CPUs of the first of `files` that exists; `None` when none does. A cgroup v2
/// without the cpuset controller has no file: its parent's set applies.
fn first_cpuset(files: &[std::path::PathBuf], online: &[u32]) -> Result<Option<Vec<u32>>, String> {
    for file in files {
        let text = match read_kernel(file) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        };
        let mut cpus = cpu_list(file, &text)?;
        cpus.retain(|c| online.binary_search(c).is_ok());
        return Ok(Some(cpus));
    }
    Ok(None)
}

/// `set_mempolicy`'s mode that allows the listed nodes only (linux/mempolicy.h).
const MPOL_BIND: libc::c_long = 2;
/// `set_mempolicy`'s mode that prefers one node and falls back to the others.
const MPOL_PREFERRED: libc::c_long = 1;
/// `set_mempolicy`'s mode that spreads pages over the listed nodes in turn.
const MPOL_INTERLEAVE: libc::c_long = 3;
/// `set_mempolicy`'s mode that prefers several nodes (Linux 5.15).
const MPOL_PREFERRED_MANY: libc::c_long = 5;
/// `get_mempolicy`'s flag for the nodes the calling process may use (its cpuset's mems).
const MPOL_F_MEMS_ALLOWED: libc::c_ulong = 1 << 2;

/// The NUMA nodes (OS indexes, ascending) the calling process may allocate from: its cgroup's
/// `cpuset.mems`, as the kernel applies it.
pub fn allowed_mems() -> Result<Vec<u32>, String> {
    read_mask(1 << 10, |mask| {
        let mut mode: libc::c_int = 0;
        let bits = (mask.len() * libc::c_ulong::BITS as usize) as libc::c_ulong;
        // SAFETY: get_mempolicy writes one int to `mode` and at most `bits` bits into `mask`,
        // both live and of those sizes; no address is passed with this flag.
        unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut mode as *mut libc::c_int,
                mask.as_mut_ptr(),
                bits,
                std::ptr::null_mut::<libc::c_void>(),
                MPOL_F_MEMS_ALLOWED,
            )
        }
    })
}

/// Each task's NUMA nodes for memory binding (`--lama-mem=MODE`, `lama.mem=MODE`) over the
/// node's NUMA nodes ([`lama::tiers::task_memory`]); when `bind`, only those this process's
/// cgroup allows (hwloc leaves the others out of the machine it loads). Worked out before the
/// tasks fork, so that each task only binds; a task whose mode the node cannot satisfy (`hbm`
/// without a faster tier) fails them all.
#[allow(dead_code)] // which front end calls what differs; both share this file
pub fn tasks_numa<'a>(
    numa: &[lama::locality::Numa],
    tasks: impl Iterator<Item = &'a [u32]>,
    mode: lama::tiers::MemMode,
    bind: bool,
) -> Result<Vec<Vec<u32>>, String> {
    let allowed = if bind {
        Some(
            allowed_mems()
                .map_err(|e| format!("cannot read the NUMA nodes this step may use: {e}"))?,
        )
    } else {
        None
    };
    tasks
        .map(|cpus| {
            lama::tiers::task_memory(numa, cpus, mode, allowed.as_deref())
                .map(|(nodes, _)| nodes)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Binds the calling task's memory (it must be single-threaded, as a task is before it runs the
/// user's program) to its NUMA nodes `nodes` (OS indexes), those of its CPUs `cpus` (a cpulist,
/// for the message): with [`MemPolicy::Bind`], `MPOL_BIND` over all of them (what hwloc's
/// `hwloc_set_membind` with `HWLOC_MEMBIND_BIND` does on Linux); with
/// [`MemPolicy::Preferred`], `MPOL_PREFERRED` on the first (as Slurm's `--mem-bind=prefer`);
/// [`MemPolicy::PreferredMany`], `MPOL_PREFERRED_MANY` over all, or `MPOL_PREFERRED` on the
/// first where the kernel refuses it (before Linux 5.15), so the task still spills rather than
/// fails; [`MemPolicy::Interleave`], `MPOL_INTERLEAVE` over all.
/// When not `bind` (`topology=FILE`), only checks that there are some.
pub fn bind_memory(nodes: &[u32], cpus: &str, policy: MemPolicy, bind: bool) -> Result<(), String> {
    let (mode, nodes) = match policy {
        MemPolicy::Bind => (MPOL_BIND, nodes),
        MemPolicy::Preferred => (MPOL_PREFERRED, nodes.get(..1).unwrap_or_default()),
        MemPolicy::PreferredMany => (MPOL_PREFERRED_MANY, nodes),
        MemPolicy::Interleave => (MPOL_INTERLEAVE, nodes),
    };
    if mask_of(nodes).is_none() {
        return Err(format!("no NUMA node is local to cpus {cpus}"));
    }
    if !bind {
        return Ok(());
    }
    match set_mempolicy(mode, nodes) {
        Err(e) if mode == MPOL_PREFERRED_MANY && e.raw_os_error() == Some(libc::EINVAL) => {
            set_mempolicy(MPOL_PREFERRED, nodes.get(..1).unwrap_or_default())
        }
        r => r,
    }
    .map_err(|e| e.to_string())
}

/// One `set_mempolicy` call over `nodes`.
fn set_mempolicy(mode: libc::c_long, nodes: &[u32]) -> std::io::Result<()> {
    let Some(mask) = mask_of(nodes) else {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    };
    // The kernel reads `maxnode - 1` bits.
    let maxnode = (mask.len() * libc::c_ulong::BITS as usize + 1) as libc::c_ulong;
    // SAFETY: the kernel reads `maxnode - 1` bits from a live buffer of exactly that many.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask.as_ptr(), maxnode) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The calling process's effective user id.
#[allow(dead_code)] // the Flux plugin's, which shares this file
pub fn user_id() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// This machine's host name as the task sees it (its UTS namespace's).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the live buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "?".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
