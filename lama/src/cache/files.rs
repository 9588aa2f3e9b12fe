//! The cache's files: written atomically, read only when whoever could have written them is
//! trusted (root for slurmd's cache; root or the job's user for the Flux shell's own), and
//! named for what they describe.

use std::io::Write;
use std::path::Path;

use super::{decode, encode, CacheError, Node, System};
use crate::idset::in_table;
use crate::locality::Locality;
use crate::topology::NodeTopology;

/// Who may have written a cache besides root: nobody (slurmd's cache, read by slurmstepd as
/// root), or the one user whose processes keep it (the Flux shell's cache, kept per user).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// Only root.
    Root,
    /// Root or this user id.
    User(u32),
}

impl Writer {
    fn trusts(self, uid: u32) -> bool {
        uid == 0 || self == Writer::User(uid)
    }

    fn who(self) -> String {
        match self {
            Writer::Root | Writer::User(0) => "root".into(),
            Writer::User(u) => format!("root or uid {u}"),
        }
    }
}

/// Writes `node`, its devices `loc` and, for slurmd's cache, what it learned of the `system`
/// to `path`, readable by everyone, replacing any older file in one step (a step starting
/// meanwhile reads the old file or the new one, never a mix).
pub fn write(
    path: &Path,
    node: &NodeTopology,
    loc: &Locality,
    system: Option<&System>,
    writer: Writer,
) -> Result<(), CacheError> {
    let io = |reason: String| CacheError::Io {
        path: path.display().to_string(),
        reason,
    };
    let text = encode(node, Some(loc), None, system).map_err(io)?;
    let dir = path
        .parent()
        .ok_or_else(|| io("no parent directory".into()))?;
    let name = path
        .file_name()
        .ok_or_else(|| io("no file name".into()))?
        .to_string_lossy();
    // A folder another user owns or may write to would let them plant or swap the file, or
    // point the folder somewhere root then writes.
    trusted_folder(dir, writer).map_err(io)?;
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let written = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e.to_string())
    })
}

/// Reads a cache written by [`write`], checking that it describes a sane machine; with its
/// NUMA nodes or devices as `detail` says. Only a file `writer` wrote is read: the file and its folder must be
/// owned by root (or the user `writer` names), writable by no one else, and neither may be a
/// symbolic link. A file or folder that does not exist is [`CacheError::Missing`], found
/// without a `stat` of its own (each step reads the cache).
pub fn read(
    path: &Path,
    detail: impl Into<super::Detail>,
    writer: Writer,
) -> Result<Node, CacheError> {
    let p = path.display().to_string();
    let io = |reason: String| CacheError::Io {
        path: p.clone(),
        reason,
    };
    let dir = path
        .parent()
        .ok_or_else(|| io("no parent directory".into()))?;
    let missing = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match dir.symlink_metadata() {
        Err(e) if missing(&e) => return Err(CacheError::Missing { path: p }),
        Err(e) => return Err(io(format!("the folder {}: {e}", dir.display()))),
        Ok(meta) => check_folder(&meta, dir, writer).map_err(io)?,
    }
    let text = match open_trusted(path) {
        Err(e) if missing(&e) => return Err(CacheError::Missing { path: p }),
        Err(e) => return Err(io(open_error(e))),
        Ok(f) => read_opened(f, crate::limits::MAX_CACHE_BYTES, writer).map_err(io)?,
    };
    decode(&text, &p, detail)
}

/// A key for where a cache's machine came from (the `HWLOC_XMLFILE` a slurmd was told to read):
/// FNV-1a of its bytes, stable across builds and releases.
pub fn source_key(source: &std::ffi::OsStr) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    source
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h: u64, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// A key for a node's hwloc XML (the Flux shell's cache is named by it): its length and a
/// 64-bit hash of its bytes, read 32 at a time in four independent lanes (a 335 kB XML in some
/// 15 µs), stable across builds and releases. Not a defence against a forged file: only the
/// folder's owner can write there ([`Writer`]).
pub fn xml_key(xml: &[u8]) -> String {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(K).rotate_left(29);
    let word = |c: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        u64::from_le_bytes(w)
    };
    let mut lanes = [0xcbf2_9ce4_8422_2325_u64 ^ xml.len() as u64, 1, 2, 3];
    let mut blocks = xml.chunks_exact(32);
    for b in &mut blocks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = mix(*lane, word(&b[i * 8..i * 8 + 8]));
        }
    }
    let mut h = lanes.iter().fold(0, |h, &l| mix(h, l));
    for &b in blocks.remainder() {
        h = mix(h, u64::from(b));
    }
    // A final mix, so that nearby inputs differ in every bit.
    h ^= h >> 32;
    h = h.wrapping_mul(K);
    h ^= h >> 29;
    format!("{}-{h:016x}", xml.len())
}

/// A key for an XML file (`topology=FILE`) that needs no reading of it: the file's identity
/// and state (device, inode, size, modification time), which a change of its content changes.
pub fn file_key(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "f{:x}-{}-{}-{}.{:09}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec()
    )
}

/// Creates the cache's folder when it is missing (mode 0755 for root's, 0700 for a user's) and
/// checks it as [`write`] and [`read`] do.
pub fn prepare_folder(dir: &Path, writer: Writer) -> Result<(), CacheError> {
    use std::os::unix::fs::DirBuilderExt;
    let io = |reason: String| CacheError::Io {
        path: dir.display().to_string(),
        reason,
    };
    if dir.symlink_metadata().is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(if writer == Writer::Root { 0o755 } else { 0o700 })
            .create(dir)
            .map_err(|e| io(e.to_string()))?;
    }
    trusted_folder(dir, writer).map_err(io)
}

/// Whether `meta` (of `what`, a folder or a file) could only have been written by `writer`.
fn check_owner(meta: &std::fs::Metadata, what: &str, writer: Writer) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if meta.file_type().is_symlink() {
        return Err(format!(
            "the {what} is a symbolic link; lama follows none in its cache"
        ));
    }
    if !writer.trusts(meta.uid()) {
        return Err(format!(
            "the {what} is owned by uid {}, not {}; lama trusts only a cache {} wrote",
            meta.uid(),
            writer.who(),
            writer.who()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "the {what} is writable by others than {} (mode {:o}); lama trusts only a cache no one else can change",
            writer.who(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Checks the cache's folder itself, without following a symbolic link.
fn trusted_folder(dir: &Path, writer: Writer) -> Result<(), String> {
    let meta = dir
        .symlink_metadata()
        .map_err(|e| format!("the folder {}: {e}", dir.display()))?;
    check_folder(&meta, dir, writer)
}

/// [`trusted_folder`] on the folder's `meta`, read already.
fn check_folder(meta: &std::fs::Metadata, dir: &Path, writer: Writer) -> Result<(), String> {
    check_owner(meta, "folder", writer)?;
    if !meta.is_dir() {
        return Err(format!("{} is not a folder", dir.display()));
    }
    Ok(())
}

/// Opens a cache file without following a symbolic link or blocking.
fn open_trusted(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Why [`open_trusted`] failed, in words.
fn open_error(e: std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ELOOP) => "the file is a symbolic link; lama follows none in its cache".into(),
        _ => e.to_string(),
    }
}

/// Reads a cache file of at most `max` bytes that [`open_trusted`] opened, checked as
/// [`check_owner`] says on the file it opened.
fn read_opened(mut f: std::fs::File, max: u64, writer: Writer) -> Result<String, String> {
    use std::io::Read;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    check_owner(&meta, "file", writer)?;
    if !meta.is_file() || meta.len() > max {
        return Err(format!("not a regular file of at most {max} bytes"));
    }
    let mut text = String::with_capacity(meta.len() as usize);
    std::io::Read::by_ref(&mut f)
        .take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > max {
        return Err(format!("the file grew beyond {max} bytes"));
    }
    Ok(text)
}

/// Whether a cache describes the node it is read on: written by this host (a copied file is
/// another machine's), and naming every CPU the reader may use (a CPU brought online since the
/// cache was written is not in it). `allowed` is ascending.
pub fn check_fresh(t: &NodeTopology, host: &str, allowed: &[u32]) -> Result<(), String> {
    if t.name() != host {
        return Err(format!(
            "the topology cache was written by host '{}', not by {host}",
            t.name()
        ));
    }
    // A table by CPU number rather than a sorted copy: this runs in every step.
    let known = t.cpu_table();
    if let Some(c) = allowed.iter().find(|&&c| !in_table(&known, c)) {
        return Err(format!(
            "the topology cache does not know CPU {c}, which this step may use (CPUs changed since slurmd started)"
        ));
    }
    Ok(())
}
