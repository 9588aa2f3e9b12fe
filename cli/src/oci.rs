//! `lama oci-run`: an OCI runtime's `run` for Slurm's `oci.conf` (`RunTimeRun`) that keeps the
//! task's CPUs. crun from 1.25 and runc from 1.2.7 reset the affinity a container's first
//! process inherits to every CPU of its cgroup, so a task of `srun --container` would lose the
//! CPUs lama (or Slurm's `--cpu-bind`) bound it to. The runtime resets it while creating the
//! container, before the user's program runs; so this runs the runtime's `create`, gives the
//! created (still waiting) process the CPUs this task has, then `start`s it, waits for it as
//! its reaper (`PR_SET_CHILD_SUBREAPER`) and deletes the container, returning its status as
//! `run` would. The memory policy is inherited untouched (no runtime resets it).
//!
//! Why not the bundle's cpuset (`linux.resources.cpu.cpus`): that needs the runtime to make a
//! cgroup of its own under Slurm's task cgroup, which cgroup v2 forbids for a cgroup that holds
//! processes, and sites run runtimes with `--cgroup-manager=disabled` for that reason.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

use clap::Args;

/// Run an OCI runtime's `run` so that the container keeps this task's CPUs (oci.conf's RunTimeRun)
#[derive(Args)]
pub struct OciRunArgs {
    /// The runtime's command line with `run`, as oci.conf's RunTimeRun would give it without lama,
    /// the container's id last (`crun --root=/run/crun run --bundle %b %n.%u.%j.%s.%t`; for runc
    /// `runc --root=/run/runc run -b %b %n.%u.%j.%s.%t`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "RUNTIME"
    )]
    runtime: Vec<OsString>,
}

/// The container's first process, for the signal handler to pass signals on to.
static CONTAINER: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CONTAINER.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; a stale pid is one this process has not reaped
        // yet (it reaps the container last), so it cannot name another process.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The runtime's command line split around its `run` word.
struct Runtime {
    /// The runtime and its global options.
    head: Vec<OsString>,
    /// `run`'s own options and the container's id (last).
    tail: Vec<OsString>,
}

impl Runtime {
    fn parse(words: &[OsString]) -> Result<Runtime, String> {
        let at = words
            .iter()
            .skip(1)
            .position(|w| w == "run")
            .map(|i| i + 1)
            .ok_or("no `run` in the runtime's command line (give RunTimeRun's line after `lama oci-run`)")?;
        let tail = words[at + 1..].to_vec();
        if tail.is_empty() {
            return Err("no container id after `run`".into());
        }
        Ok(Runtime {
            head: words[..at].to_vec(),
            tail,
        })
    }

    fn id(&self) -> &OsString {
        // parse() keeps at least the id in `tail`.
        &self.tail[self.tail.len() - 1]
    }

    fn command(&self, verb: &str, args: &[OsString]) -> Command {
        let mut c = Command::new(&self.head[0]);
        c.args(&self.head[1..]).arg(verb).args(args);
        c
    }
}

/// Every thread of `pid`, as listed by /proc.
fn threads(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// This process's CPUs.
fn own_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; zeroed is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the set is valid for writes of its own size.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    (rc == 0).then_some(set)
}

/// The CPUs `tid` may run on, as a cpu list (for messages and the check after start).
fn cpus_of(tid: i32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// Gives every thread of `pid` the CPUs in `set`.
fn pin(pid: i32, set: &libc::cpu_set_t) -> Result<(), String> {
    let tids = threads(pid);
    if tids.is_empty() {
        return Err(format!("process {pid} has no threads to read"));
    }
    for tid in tids {
        // SAFETY: `set` is a valid cpu_set_t of the size given; the call only reads it.
        let rc =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) };
        if rc != 0 {
            return Err(format!("thread {tid}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

fn say(msg: &str) {
    eprintln!("lama oci-run: {msg}");
}

/// Waits for `pid` (a child, or an orphan reparented here), reaping any other orphan meanwhile;
/// its exit status as a shell gives it (128 + signal).
fn wait_for(pid: i32) -> u8 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a valid int.
        let got = unsafe { libc::waitpid(-1, &mut status, 0) };
        if got == pid {
            return if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status) as u8
            } else if libc::WIFSIGNALED(status) {
                (128 + libc::WTERMSIG(status)) as u8
            } else {
                1
            };
        }
        if got < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            say(&format!(
                "cannot wait for the container's process {pid}: {e}"
            ));
            return 1;
        }
    }
}

/// `lama oci-run RUNTIME... run ... ID`.
pub fn run(a: OciRunArgs) -> ExitCode {
    let rt = match Runtime::parse(&a.runtime) {
        Ok(r) => r,
        Err(e) => {
            say(&e);
            return ExitCode::from(2);
        }
    };
    let Some(cpus) = own_cpus() else {
        say("cannot read this task's CPUs; running the runtime's `run` as it is");
        return exec_run(&rt);
    };
    // The container's first process outlives the runtime's `create`: as its reaper this
    // process gets its exit status, as `run` would.
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag and changes only this
    // process's attribute.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        say("cannot become the container's reaper; running the runtime's `run` as it is");
        return exec_run(&rt);
    }
    let pid_file = pid_file_path();
    let mut create_args = vec![
        OsString::from("--pid-file"),
        pid_file.clone().into_os_string(),
    ];
    create_args.extend(rt.tail.iter().cloned());
    match rt.command("create", &create_args).status() {
        Ok(s) if s.success() => {}
        Ok(s) => {
            let _ = std::fs::remove_file(&pid_file);
            return ExitCode::from(s.code().unwrap_or(1).clamp(1, 255) as u8);
        }
        Err(e) => {
            say(&format!("cannot run {}: {e}", rt.head[0].to_string_lossy()));
            return ExitCode::from(127);
        }
    }
    let pid = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let _ = std::fs::remove_file(&pid_file);
    let Some(pid) = pid.filter(|&p| p > 0) else {
        say("the runtime wrote no process id; deleting the container");
        delete(&rt);
        return ExitCode::from(1);
    };
    CONTAINER.store(pid, Ordering::Relaxed);
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGCONT,
    ] {
        // SAFETY: `forward` is an extern "C" fn that only calls kill (async-signal-safe).
        unsafe { libc::signal(sig, forward as *const () as libc::sighandler_t) };
    }
    let wanted = cpus_of(std::process::id() as i32);
    if let Err(e) = pin(pid, &cpus) {
        say(&format!(
            "cannot give the container this task's CPUs ({}): {e}; it may run on other CPUs",
            wanted.as_deref().unwrap_or("?")
        ));
    }
    match rt.command("start", std::slice::from_ref(rt.id())).status() {
        Ok(s) if s.success() => {}
        _ => {
            say("the runtime's `start` failed; deleting the container");
            // SAFETY: kill on the container's own process, which this process reaps below.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait_for(pid);
            delete(&rt);
            return ExitCode::from(1);
        }
    }
    // What the runtime did after `start`: a binding it widened is said, never kept silently.
    if let (Some(want), Some(got)) = (wanted.as_ref(), cpus_of(pid)) {
        if *want != got {
            say(&format!(
                "the runtime moved the container off this task's CPUs after start: {got}, not {want}"
            ));
        }
    }
    let status = wait_for(pid);
    delete(&rt);
    ExitCode::from(status)
}

/// Where the runtime writes the created process's id: this task's own file.
fn pid_file_path() -> PathBuf {
    let dir = std::env::var_os("TMPDIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    dir.join(format!("lama-oci-run.{}.pid", std::process::id()))
}

fn delete(rt: &Runtime) {
    let _ = rt
        .command("delete", &[OsString::from("--force"), rt.id().clone()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The runtime's own `run`, when lama cannot stand between (its status returned as is).
fn exec_run(rt: &Runtime) -> ExitCode {
    match rt.command("run", &rt.tail).status() {
        Ok(s) => ExitCode::from(s.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => {
            say(&format!("cannot run {}: {e}", rt.head[0].to_string_lossy()));
            ExitCode::from(127)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn the_run_word_splits_the_line() {
        let rt = Runtime::parse(&words("crun --root=/r run --bundle /b n1.0.5.0.0")).unwrap();
        assert_eq!(rt.head, words("crun --root=/r"));
        assert_eq!(rt.tail, words("--bundle /b n1.0.5.0.0"));
        assert_eq!(rt.id(), "n1.0.5.0.0");
        let rt = Runtime::parse(&words("runc --root=/r run -b /b n1.0.5.0.0")).unwrap();
        assert_eq!(rt.tail, words("-b /b n1.0.5.0.0"));
        assert_eq!(rt.id(), "n1.0.5.0.0");
        assert!(Runtime::parse(&words("crun --root=/r create x")).is_err());
        assert!(Runtime::parse(&words("crun run")).is_err());
        assert!(Runtime::parse(&words("run run x")).is_ok());
    }
}
