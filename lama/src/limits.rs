//! The largest sizes lama accepts from a user, a file or Slurm, in one place.
//!
//! Every count a caller supplies is checked against these before memory is reserved for it, so a
//! typo such as `--np 999999999999` is an error that names the limit instead of an allocation
//! failure, and the memory used stays proportional to the real work. The limits sit far above
//! what Slurm itself runs (its own job size limits are lower) and low enough that the largest
//! request still plans in about a second and a gigabyte.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Tasks (ranks) in one plan, step, task map, host list or host file: 16,777,216.
pub const MAX_TASKS: usize = 1 << 24;

/// Nodes in one plan, step layout or task map: 1,048,576.
pub const MAX_NODES: usize = 1 << 20;

/// Hardware threads in an hwloc synthetic description: hwloc needs about 0.6 s and 30 MB for
/// this many, and much more (tens of seconds) at eight times as many. Real nodes have at most a
/// few thousand.
pub const MAX_SYNTHETIC_PUS: u64 = 8192;

/// Bytes read from a host file (`SLURM_HOSTFILE`, `lama hostfile` input): room for the largest
/// task count with long host names.
pub const MAX_HOSTFILE_BYTES: u64 = 256 << 20;

/// Bytes read from a device weights file.
pub const MAX_WEIGHTS_BYTES: u64 = 16 << 20;

/// Bytes read from an hwloc XML file (the largest real machines export a few megabytes).
pub const MAX_XML_BYTES: u64 = 256 << 20;

/// Bytes read from the node's topology cache.
pub const MAX_CACHE_BYTES: u64 = 64 << 20;

/// Reads a regular file of at most `max` bytes as UTF-8 text.
///
/// The file is opened without blocking, so a FIFO or a device named where a file is expected is
/// refused instead of hanging the reader (inside slurmstepd that would hang the step). The error
/// is a sentence for the user, without the path (callers add it).
pub fn read_text(path: &Path, max: u64) -> Result<String, String> {
    let mut f = open_regular(path, max)?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut text = String::with_capacity(len as usize);
    // `take` also bounds a file that grows while it is read.
    f.by_ref()
        .take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > max {
        return Err(format!(
            "the file grew beyond the {max} bytes lama reads from such a file"
        ));
    }
    Ok(text)
}

/// Opens a regular file of at most `max` bytes for reading, without blocking (see
/// [`read_text`]); the reader must still stop at `max + 1` bytes, as the file may grow.
pub fn open_regular(path: &Path, max: u64) -> Result<std::fs::File, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max {
        return Err(format!(
            "{} bytes is more than the {max} bytes lama reads from such a file",
            meta.len()
        ));
    }
    Ok(f)
}

/// Checks the size of an hwloc synthetic description before hwloc builds it: the product of its
/// level arities (`pack:2 core:4 pu:2` is 16 hardware threads) must not exceed
/// [`MAX_SYNTHETIC_PUS`].
pub fn check_synthetic(desc: &str) -> Result<(), String> {
    let mut product: u64 = 1;
    let mut depth = 0i32;
    let mut token = String::new();
    let mut tokens = Vec::new();
    // Split at spaces outside parentheses and brackets (attributes and memory children).
    for c in desc.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if c.is_whitespace() && depth == 0 {
            if !token.is_empty() {
                tokens.push(std::mem::take(&mut token));
            }
        } else if depth == 0 && c != ')' && c != ']' {
            token.push(c);
        }
    }
    if !token.is_empty() {
        tokens.push(token);
    }
    for t in &tokens {
        let arity = t.rsplit(':').next().unwrap_or(t);
        let n: u64 = arity.parse().map_err(|_| {
            format!("'{t}' is not a synthetic level such as core:4 (a type, ':', a count)")
        })?;
        product = product.saturating_mul(n.max(1));
        if product > MAX_SYNTHETIC_PUS {
            return Err(format!(
                "it describes more than {MAX_SYNTHETIC_PUS} hardware threads, the most lama builds from a synthetic description"
            ));
        }
    }
    Ok(())
}
