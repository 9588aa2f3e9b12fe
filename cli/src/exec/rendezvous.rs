//! The node's ranks of one launch check that they agree, without talking to each other: each
//! claims a file named for its launch, the node's size it read and its local rank, in a folder
//! of the user's (`/dev/shm/lama-exec-UID`, else the temporary folder's), and reads which the
//! others claimed. A size another rank read differently, or a local rank claimed twice by
//! processes still running, is refused. The launch is named by the launcher's job id and the ranks' parent process (the
//! launcher's daemon on the node: orted or prted, Hydra's proxy, torchrun's agent, slurmstepd,
//! the Flux shell), so that no other launch, earlier or beside, shares the name; ranks started
//! through a shell of their own each have another parent, and are not compared. The last rank
//! to arrive removes the launch's files; a file whose rank's process is gone is removed by the
//! next rank that looks.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::affinity;

/// The folder, created private to the user; `None` when it cannot be trusted (another owner,
/// a link, open to others) or made: then nothing is compared.
fn folder() -> Option<PathBuf> {
    let uid = affinity::user_id();
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("lama-exec-{uid}"));
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let m = fs::symlink_metadata(&dir).ok()?;
    (m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0).then_some(dir)
}

/// The parent process and when it started (clock ticks since boot), which no other process
/// shares even after its id is reused.
fn parent() -> Option<(u32, u64)> {
    let ppid = std::os::unix::process::parent_id();
    let stat = fs::read_to_string(format!("/proc/{ppid}/stat")).ok()?;
    // The fields after the command's closing parenthesis; start time is the 22nd field.
    let rest = stat.rsplit_once(')')?.1;
    let start = rest.split_whitespace().nth(19)?.parse().ok()?;
    Some((ppid, start))
}

/// One claimed file: `PPID-KEY-SIZE-RANK-PID` (PID: the rank's process, which runs on as the
/// command).
fn parse(name: &str) -> Option<(u32, &str, u32, u32, u32)> {
    let mut p = name.split('-');
    let ppid = p.next()?.parse().ok()?;
    let key = p.next()?;
    let size = p.next()?.parse().ok()?;
    let rank = p.next()?.parse().ok()?;
    let pid = p.next()?.parse().ok()?;
    Some((ppid, key, size, rank, pid))
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Claims `rank` of `size` for the launch named `key`, read from `size_from` (for messages);
/// `Err` says why the ranks disagree. A claim whose process has ended is gone: a rank that runs
/// lama exec again after its first command ended claims anew.
pub fn check(key: Option<&str>, rank: u32, size: u32, size_from: &str) -> Result<(), String> {
    let (Some(dir), Some((ppid, start))) = (folder(), parent()) else {
        return Ok(());
    };
    let name = format!("{}:{ppid}:{start}", key.unwrap_or("parent"));
    let launch = format!(
        "{:016x}",
        lama::cache::source_key(std::ffi::OsStr::new(&name))
    );
    let pid = std::process::id();
    let mine = dir.join(format!("{ppid}-{launch}-{size}-{rank}-{pid}"));
    let claimed = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&mine);
    if claimed.is_err() {
        return Ok(());
    }
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(());
    };
    let mut ours = Vec::new();
    for e in entries.flatten() {
        let file = e.file_name();
        let Some((p, k, s, r, other)) = file.to_str().and_then(parse) else {
            continue;
        };
        if !alive(other) {
            let _ = fs::remove_file(e.path());
            continue;
        }
        if p != ppid || k != launch {
            continue;
        }
        let why = if s != size {
            format!(
                "the ranks of this launch disagree on how many ranks this node runs: this one (local rank {rank}) read {size} from {size_from}, local rank {r} read {s}"
            )
        } else if r == rank && other != pid {
            format!(
                "local rank {rank} is claimed by two ranks of this launch on this node: the launcher's variables ({size_from}) or --local-rank give two ranks the same number"
            )
        } else {
            ours.push(e.path());
            continue;
        };
        let _ = fs::remove_file(&mine);
        return Err(why);
    }
    if ours.len() as u32 >= size {
        for f in ours {
            let _ = fs::remove_file(f);
        }
    }
    Ok(())
}
