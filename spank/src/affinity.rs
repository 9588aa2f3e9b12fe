//! Binding the calling task to CPUs.

use std::io;

/// Binds the calling process to `cpus` (OS indexes). The mask is sized to the largest CPU, so
/// machines beyond glibc's fixed 1024-CPU set work too.
pub fn bind(cpus: &[u32]) -> Result<(), String> {
    let Some(&max) = cpus.iter().max() else {
        return Err("no CPUs to bind to".into());
    };
    let bits = libc::c_ulong::BITS as usize;
    let mut mask: Vec<libc::c_ulong> = vec![0; max as usize / bits + 1];
    for &c in cpus {
        mask[c as usize / bits] |= 1 << (c as usize % bits);
    }
    let bytes = mask.len() * std::mem::size_of::<libc::c_ulong>();
    // SAFETY: the kernel reads `bytes` bytes from a live buffer of exactly that size.
    let rc = unsafe { libc::sched_setaffinity(0, bytes, mask.as_ptr().cast::<libc::cpu_set_t>()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error().to_string())
    }
}

/// The CPUs the calling process may run on (OS indexes, ascending).
pub fn allowed() -> Result<Vec<u32>, String> {
    let bits = libc::c_ulong::BITS as usize;
    let mut words = 1024 / bits;
    loop {
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        let bytes = words * std::mem::size_of::<libc::c_ulong>();
        // SAFETY: the kernel writes at most `bytes` bytes into a live buffer of that size.
        let rc = unsafe {
            libc::sched_getaffinity(0, bytes, mask.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            let mut cpus = Vec::new();
            for (w, &word) in mask.iter().enumerate() {
                for b in 0..bits {
                    if word >> b & 1 == 1 {
                        cpus.push((w * bits + b) as u32);
                    }
                }
            }
            return Ok(cpus);
        }
        let e = io::Error::last_os_error();
        // EINVAL: the kernel's mask is larger than ours.
        if e.raw_os_error() != Some(libc::EINVAL) || words >= 1 << 16 {
            return Err(e.to_string());
        }
        words *= 2;
    }
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
