//! The `lama` Flux shell plugin. flux-shell loads it per job (`plugin.load` in an initrc, a
//! site's `lua.d` file or a user's `-o userrc=FILE`); it reads the job's `lama` shell option
//! (`-o lama.map=csbnh -o lama.bind=1c ...`, the same names and values as the SPANK plugin's
//! `--lama-*` options) and the plugin's `conf` (the same keys as `plugstack.conf` arguments).
//!
//! | callback | what lama does there |
//! |---|---|
//! | `flux_plugin_init` | checks the options; when lama places the job, turns Flux's own `cpu-affinity` off (and `gpu-affinity` when lama chooses GPUs): their `shell.init` callbacks read the options before any plugin's runs |
//! | `taskmap.lama` | the `--taskmap=lama:MAP` scheme: the job's tasks across its nodes by a LAMA map |
//! | `shell.init` | the job's `TASK_MAP`; this node's tasks placed on the cores Flux gave the job, their devices and OpenMP places ([`node`]) |
//! | `task.init` | each task's variables, sized to fit its environment |
//! | `task.exec` | in the task's process: binding, and the `lama.verbose` line |
//!
//! Every decision is the `lama` library's (`lama::flux`, `lama::plugin`); this crate
//! only talks to Flux ([`ffi`]). A bad option or a failed placement fails the job before any
//! task starts, with the reason in a job exception; no panic reaches the shell.

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use lama::flux::{cache_folder, flux_words, settings, user_options};
use lama::plugin::{GpuVisibility, Options, Placing, Settings, ThreadRequest};

/// A line on a task's stderr, bounded like every log line (`lama::quote`).
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}", lama::quote::for_log(&format!($($arg)*)))
    };
}

#[path = "../../spank/src/affinity.rs"]
mod affinity;
mod ffi;
mod node;
mod task;

use ffi::{Args, Plugin, RawArgs, RawPlugin};

/// What `flux_plugin_init` read, for the later callbacks.
struct Config {
    settings: Settings,
    user: Options,
    /// Whether lama places this job's tasks.
    placing: bool,
    /// `lama.mem=MODE`: how each task's memory is bound (`lama::tiers`), `None` to leave it.
    mem: Option<lama::tiers::MemMode>,
    /// NICs and GPUs per task.
    devices: (usize, usize),
    threads: Option<ThreadRequest>,
    /// Which of the job's GPUs each task sees.
    visibility: GpuVisibility,
    /// Flux's `cpu-affinity` setting the user gave, which lama's placement replaces.
    replaced_affinity: Option<String>,
    /// Where this shell keeps the topologies it read (`cache=`, the user's own by default).
    cache: Option<std::path::PathBuf>,
}

/// The job as this shell sees it: its config, then what `shell.init` decided.
struct Job {
    config: Config,
    node: Option<node::Node>,
}

/// flux-shell runs one job, on one thread; the mutex only makes the global safe to share.
static JOB: Mutex<Option<Job>> = Mutex::new(None);

/// Runs `f` on the job's state, never letting a panic out: in the shell, a panic fails the job.
fn with_job<T>(f: impl FnOnce(&mut Job) -> Result<T, String>) -> Option<T> {
    let mut guard = JOB.lock().unwrap_or_else(|p| p.into_inner());
    let job = guard.as_mut()?;
    match catch_unwind(AssertUnwindSafe(|| f(job))) {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => ffi::fatal(&format!("lama: {e}")),
        Err(_) => {
            ffi::fatal("lama: internal error (a bug in lama; the job shell's log has the details)")
        }
    }
}

/// The plugin's entry point, called by flux-shell when it loads the plugin.
///
/// # Safety
/// Called by flux-shell with its live plugin handle.
#[no_mangle]
pub unsafe extern "C" fn flux_plugin_init(p: *mut RawPlugin) -> c_int {
    // SAFETY: the handle flux-shell passed to this call.
    let plugin = unsafe { Plugin::new(p) };
    match catch_unwind(AssertUnwindSafe(|| init(plugin))) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => ffi::fatal(&format!("lama: {}", flux_words(&e))),
        Err(_) => ffi::fatal("lama: internal error while reading the options (a bug in lama)"),
    }
}

fn init(plugin: Plugin) -> Result<(), String> {
    plugin.set_name();
    let shell = plugin
        .shell()
        .ok_or("the plugin was loaded outside a job shell")?;
    let settings = settings(plugin.conf().as_deref()).map_err(|e| e.to_string())?;
    let mut user = user_options(shell.getopt(c"lama").as_deref()).map_err(|e| e.to_string())?;
    // `--taskmap=lama:MAP` places each node's tasks by the same map, unless lama.map or
    // lama.map-by says otherwise.
    if let Some(map) = scheme_value(shell.getopt(c"taskmap").as_deref()) {
        if user.map.is_none() && user.map_by.is_none() && !map.is_empty() && !user.off {
            user.map = Some(map);
        }
    }
    let how = settings.placing(&user, None).map_err(|e| e.to_string())?;
    let (placing, auto) = (how != Placing::LeftAlone, how == Placing::Policy);
    let mem = settings.mem(&user).map_err(|e| e.to_string())?;
    let devices = settings.devices(&user).map_err(|e| e.to_string())?;
    let threads = settings.threads(&user).map_err(|e| e.to_string())?;
    let visibility = settings.gpu_visibility(&user).map_err(|e| e.to_string())?;
    let mut replaced_affinity = None;
    if placing {
        // Flux's own binding would fight lama's: off for this job, as its builtins read it in
        // their shell.init, after every plugin's init.
        replaced_affinity = shell
            .getopt(c"cpu-affinity")
            .map(|v| serde_json::from_str::<String>(&v).unwrap_or(v))
            .filter(|v| v != "off");
        if !shell.setopt(c"cpu-affinity", c"\"off\"") {
            return Err("cannot turn Flux's cpu-affinity off for this job".into());
        }
        if (devices.1 > 0 || auto) && !shell.setopt(c"gpu-affinity", c"\"off\"") {
            return Err("cannot turn Flux's gpu-affinity off for this job".into());
        }
    }
    let exports = settings.taskmap && !user.off;
    let config = Config {
        cache: cache_folder(&settings, affinity::user_id()),
        settings,
        user,
        placing,
        mem,
        devices,
        threads,
        visibility,
        replaced_affinity,
    };
    *JOB.lock().unwrap_or_else(|p| p.into_inner()) = Some(Job { config, node: None });
    plugin.add_handler(c"taskmap.lama", taskmap_lama)?;
    if exports || placing {
        plugin.add_handler(c"shell.init", shell_init)?;
        plugin.add_handler(c"task.init", task_init)?;
    }
    if placing {
        plugin.add_handler(c"task.exec", task_exec)?;
    }
    Ok(())
}

/// The value of a `--taskmap=lama:VALUE` option (`{"scheme":"lama","value":...}`).
fn scheme_value(json: Option<&str>) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json?).ok()?;
    (v.get("scheme")?.as_str()? == "lama").then(|| {
        v.get("value")
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string()
    })
}

/// A shell callback that runs its body on the job's state through [`with_job`].
macro_rules! callback {
    ($(#[$doc:meta])* $name:ident, |$plugin:ident, $args:ident, $job:ident| $body:expr) => {
        $(#[$doc])*
        unsafe extern "C" fn $name(
            p: *mut RawPlugin,
            _topic: *const c_char,
            args: *mut RawArgs,
            _data: *mut c_void,
        ) -> c_int {
            // SAFETY: the live handle and arguments flux-shell passed to this callback.
            let ($plugin, $args) = (unsafe { Plugin::new(p) }, Args(args));
            with_job(|$job| $body).map_or(-1, |_| 0)
        }
    };
}

callback!(
    /// `taskmap.lama`: the job's tasks across its nodes by a LAMA map.
    taskmap_lama,
    |plugin, args, job| node::scheme(plugin, &args, &job.config)
);

callback!(
    /// `shell.init`: this node's decisions.
    shell_init,
    |plugin, _args, job| {
        let shell = plugin.shell().ok_or("no job shell")?;
        job.node = Some(node::Node::decide(shell, &job.config)?);
        Ok(())
    }
);

callback!(
    /// `task.init`: the task's variables.
    task_init,
    |plugin, _args, job| {
        let shell = plugin.shell().ok_or("no job shell")?;
        match &job.node {
            Some(n) => task::init(shell, n),
            None => Ok(()),
        }
    }
);

/// `task.exec`, in the task's process just before it runs the program: a failure here ends the
/// task (the shell would only log it and run the task unbound).
unsafe extern "C" fn task_exec(
    p: *mut RawPlugin,
    _topic: *const c_char,
    _args: *mut RawArgs,
    _data: *mut c_void,
) -> c_int {
    // SAFETY: the live handle flux-shell passed to this callback.
    let plugin = unsafe { Plugin::new(p) };
    let done = catch_unwind(AssertUnwindSafe(|| {
        let guard = JOB.lock().unwrap_or_else(|p| p.into_inner());
        let node = guard.as_ref().and_then(|j| j.node.as_ref());
        match (plugin.shell(), node) {
            (Some(shell), Some(n)) => task::exec(shell, n),
            _ => Ok(()),
        }
    }));
    let msg = match done {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => e,
        Err(_) => "internal error while binding the task (a bug in lama)".into(),
    };
    say!("lama: error: {}", flux_words(&msg));
    // SAFETY: ends the forked task before exec, without running the shell's exit handlers.
    unsafe { libc::_exit(1) }
}
