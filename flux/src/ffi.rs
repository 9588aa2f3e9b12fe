//! The parts of flux-core's plugin and shell interfaces the plugin uses (`flux/core.h`,
//! `flux/shell.h`, checked against flux-core 0.88.0), and safe wrappers that pass text. The
//! symbols are flux-shell's own and libflux-core's, resolved when the shell loads the plugin.
//!
//! Every call here is made from flux-shell's single thread, in a callback of the shell's or in
//! the task's process between fork and exec (`task.exec`).

use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// `flux_plugin_t`.
#[repr(C)]
pub struct RawPlugin {
    _opaque: [u8; 0],
}

/// `flux_plugin_arg_t`.
#[repr(C)]
pub struct RawArgs {
    _opaque: [u8; 0],
}

#[repr(C)]
struct RawShell {
    _opaque: [u8; 0],
}

#[repr(C)]
struct RawTask {
    _opaque: [u8; 0],
}

#[repr(C)]
struct RawCmd {
    _opaque: [u8; 0],
}

/// `flux_plugin_f`.
pub type Handler =
    unsafe extern "C" fn(*mut RawPlugin, *const c_char, *mut RawArgs, *mut c_void) -> c_int;

const ARG_IN: c_int = 0;
/// libflux-taskmap's `TASKMAP_ENCODE_WRAPPED`: RFC 34 with its version wrapper.
const TASKMAP_ENCODE_WRAPPED: c_int = 1;
const ARG_OUT: c_int = 1;

/// `FLUX_SHELL_WARN`.
pub const WARN: c_int = 4;
/// `FLUX_SHELL_DEBUG`: shown with `flux run -o verbose`.
pub const DEBUG: c_int = 6;

extern "C" {
    fn flux_plugin_set_name(p: *mut RawPlugin, name: *const c_char) -> c_int;
    fn flux_plugin_add_handler(
        p: *mut RawPlugin,
        topic: *const c_char,
        cb: Handler,
        arg: *mut c_void,
    ) -> c_int;
    fn flux_plugin_get_conf(p: *mut RawPlugin) -> *const c_char;
    fn flux_plugin_arg_get(args: *mut RawArgs, flags: c_int, json: *mut *mut c_char) -> c_int;
    fn flux_plugin_arg_set(args: *mut RawArgs, flags: c_int, json: *const c_char) -> c_int;
    fn flux_plugin_get_shell(p: *mut RawPlugin) -> *mut RawShell;
    fn flux_shell_getopt(
        shell: *mut RawShell,
        name: *const c_char,
        json: *mut *mut c_char,
    ) -> c_int;
    fn flux_shell_setopt(shell: *mut RawShell, name: *const c_char, json: *const c_char) -> c_int;
    fn flux_shell_getenv(shell: *mut RawShell, name: *const c_char) -> *const c_char;
    fn flux_shell_get_environ(shell: *mut RawShell, json: *mut *mut c_char) -> c_int;
    fn flux_shell_get_hwloc_xml(shell: *mut RawShell, xml: *mut *const c_char) -> c_int;
    fn flux_shell_get_info(shell: *mut RawShell, json: *mut *mut c_char) -> c_int;
    fn flux_shell_get_rank_info(shell: *mut RawShell, rank: c_int, json: *mut *mut c_char)
        -> c_int;
    fn flux_shell_get_taskmap(shell: *mut RawShell) -> *const c_void;
    fn taskmap_encode(map: *const c_void, flags: c_int) -> *mut c_char;
    fn flux_shell_current_task(shell: *mut RawShell) -> *mut RawTask;
    fn flux_shell_task_get_info(task: *mut RawTask, json: *mut *mut c_char) -> c_int;
    fn flux_shell_task_cmd(task: *mut RawTask) -> *mut RawCmd;
    fn flux_cmd_setenvf(
        cmd: *mut RawCmd,
        overwrite: c_int,
        name: *const c_char,
        fmt: *const c_char,
        ...
    ) -> c_int;
    fn flux_cmd_unsetenv(cmd: *mut RawCmd, name: *const c_char);
    fn flux_shell_log(
        component: *const c_char,
        level: c_int,
        file: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    );
    fn flux_shell_fatal(
        component: *const c_char,
        file: *const c_char,
        line: c_int,
        errnum: c_int,
        exit_code: c_int,
        fmt: *const c_char,
        ...
    );
}

const NAME: &CStr = c"lama";
const PERCENT_S: &CStr = c"%s";

/// Text for C, with any NUL (which C would take for the end) made visible.
fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

/// Takes a string the shell allocated for us (`malloc`), and frees it.
///
/// # Safety
/// `p` is null or a NUL-terminated string from `malloc`, used by no one else.
unsafe fn take(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: allocated with malloc by flux (jansson's json_dumps or strdup), freed once here.
    unsafe { libc::free(p.cast()) };
    Some(s)
}

/// The plugin handle flux-shell passes to `flux_plugin_init` and to each callback.
#[derive(Clone, Copy)]
pub struct Plugin(*mut RawPlugin);

impl Plugin {
    /// Wraps the handle given by the shell.
    ///
    /// # Safety
    /// `p` is the live plugin handle flux-shell passed to this call.
    pub unsafe fn new(p: *mut RawPlugin) -> Plugin {
        Plugin(p)
    }

    /// Names the plugin (`lama`) in the shell's messages.
    pub fn set_name(self) {
        // SAFETY: a live handle and a static C string, which flux copies.
        unsafe { flux_plugin_set_name(self.0, NAME.as_ptr()) };
    }

    /// Registers `cb` for `topic`.
    pub fn add_handler(self, topic: &CStr, cb: Handler) -> Result<(), String> {
        // SAFETY: a live handle; flux copies the topic; `cb` has the flux_plugin_f signature.
        let rc =
            unsafe { flux_plugin_add_handler(self.0, topic.as_ptr(), cb, std::ptr::null_mut()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!(
                "cannot register the {} callback",
                topic.to_string_lossy()
            ))
        }
    }

    /// The plugin's `conf` from `plugin.load`, as JSON text.
    pub fn conf(self) -> Option<String> {
        // SAFETY: a live handle; the string (or null) belongs to the plugin handle.
        let p = unsafe { flux_plugin_get_conf(self.0) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string owned by the handle, copied here.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// The shell this plugin runs in.
    pub fn shell(self) -> Option<Shell> {
        // SAFETY: a live handle.
        let s = unsafe { flux_plugin_get_shell(self.0) };
        (!s.is_null()).then_some(Shell(s))
    }
}

/// A callback's arguments.
pub struct Args(pub *mut RawArgs);

impl Args {
    /// The input arguments, as JSON text.
    pub fn input(&self) -> Option<String> {
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: live arguments from the shell; `out` receives a malloc'd string or stays null.
        let rc = unsafe { flux_plugin_arg_get(self.0, ARG_IN, &mut out) };
        // SAFETY: a string flux allocated for us.
        let s = unsafe { take(out) };
        (rc == 0).then_some(s).flatten()
    }

    /// Sets the output arguments from JSON text.
    pub fn set_output(&self, json: &str) -> Result<(), String> {
        let j = c_text(json);
        // SAFETY: live arguments; flux parses and keeps its own copy of the text.
        let rc = unsafe { flux_plugin_arg_set(self.0, ARG_OUT, j.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err("cannot hand the shell the new task map".into())
        }
    }
}

/// The job shell.
#[derive(Clone, Copy)]
pub struct Shell(*mut RawShell);

fn json_call(f: impl FnOnce(*mut *mut c_char) -> c_int) -> Option<String> {
    let mut out: *mut c_char = std::ptr::null_mut();
    let rc = f(&mut out);
    // SAFETY: each caller passes a flux call that stores a malloc'd string in `out` or nothing.
    let s = unsafe { take(out) };
    (rc >= 0).then_some(s).flatten()
}

impl Shell {
    /// A shell option (`-o NAME=...`) as JSON text; `None` when the job has none.
    pub fn getopt(self, name: &CStr) -> Option<String> {
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: a live shell; `out` receives a malloc'd string when the option is set.
        let rc = unsafe { flux_shell_getopt(self.0, name.as_ptr(), &mut out) };
        // SAFETY: a string flux allocated for us, or null.
        let s = unsafe { take(out) };
        (rc == 1).then_some(s).flatten()
    }

    /// Sets a shell option to a JSON value, for the shell's own plugins to read.
    pub fn setopt(self, name: &CStr, json: &CStr) -> bool {
        // SAFETY: a live shell; flux copies both strings.
        unsafe { flux_shell_setopt(self.0, name.as_ptr(), json.as_ptr()) == 0 }
    }

    /// A variable of the job's environment.
    pub fn getenv(self, name: &str) -> Option<String> {
        let n = c_text(name);
        // SAFETY: a live shell; the value (or null) belongs to the shell's environment.
        let p = unsafe { flux_shell_getenv(self.0, n.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string, copied at once.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// The job's environment as a JSON object.
    pub fn environ(self) -> Option<String> {
        // SAFETY: a live shell.
        json_call(|out| unsafe { flux_shell_get_environ(self.0, out) })
    }

    /// The shell's copy of its node's hwloc XML.
    pub fn hwloc_xml(self) -> Option<String> {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: a live shell; the XML belongs to the shell.
        let rc = unsafe { flux_shell_get_hwloc_xml(self.0, &mut p) };
        if rc < 0 || p.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string owned by the shell, copied here.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// The shell's info (`jobid`, `rank`, `size`, `ntasks`, ...) as JSON text.
    pub fn info(self) -> Option<String> {
        // SAFETY: a live shell.
        json_call(|out| unsafe { flux_shell_get_info(self.0, out) })
    }

    /// Shell rank `rank`'s info (`taskids`, `resources`), as JSON text.
    pub fn rank_info(self, rank: i32) -> Option<String> {
        // SAFETY: a live shell; flux checks the rank.
        json_call(|out| unsafe { flux_shell_get_rank_info(self.0, rank, out) })
    }

    /// The job's task map as Flux encodes it (RFC 34, wrapped): what `flux job taskmap` prints.
    pub fn taskmap(self) -> Option<String> {
        // SAFETY: a live shell; the map (or null) belongs to the shell.
        let map = unsafe { flux_shell_get_taskmap(self.0) };
        if map.is_null() {
            return None;
        }
        // SAFETY: a live map; taskmap_encode returns a malloc'd string or null, which `take`
        // frees.
        unsafe { take(taskmap_encode(map, TASKMAP_ENCODE_WRAPPED)) }
    }

    /// The task being set up or started, and its info (`localid`, `rank`) as JSON text.
    pub fn current_task(self) -> Option<Task> {
        // SAFETY: a live shell.
        let t = unsafe { flux_shell_current_task(self.0) };
        if t.is_null() {
            return None;
        }
        // SAFETY: a live task of this shell.
        let info = json_call(|out| unsafe { flux_shell_task_get_info(t, out) })?;
        Some(Task { raw: t, info })
    }
}

/// One task of the shell.
pub struct Task {
    raw: *mut RawTask,
    /// Its info as JSON text.
    pub info: String,
}

impl Task {
    /// Sets a variable in the task's environment (before it is started: `task.init`).
    pub fn setenv(&self, name: &str, value: &str) -> Result<(), String> {
        // SAFETY: a live task; the command (or null) belongs to it.
        let cmd = unsafe { flux_shell_task_cmd(self.raw) };
        if cmd.is_null() {
            return Err(format!("cannot set {name}: the task has no command"));
        }
        let (n, v) = (c_text(name), c_text(value));
        // SAFETY: a live command; "%s" takes the one C string passed, which flux copies.
        let rc = unsafe { flux_cmd_setenvf(cmd, 1, n.as_ptr(), PERCENT_S.as_ptr(), v.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("cannot set {name} in the task's environment"))
        }
    }

    /// Removes a variable from the task's environment.
    pub fn unsetenv(&self, name: &str) {
        // SAFETY: a live task.
        let cmd = unsafe { flux_shell_task_cmd(self.raw) };
        if !cmd.is_null() {
            let n = c_text(name);
            // SAFETY: a live command; flux reads the name.
            unsafe { flux_cmd_unsetenv(cmd, n.as_ptr()) };
        }
    }
}

/// Logs a message through the shell (shown by `flux run` as `flux-shell[R]: ...`); `msg` names
/// lama itself, as the job exception's text must (the shell's component prefix is not in it).
pub fn log(level: c_int, msg: &str) {
    let m = c_text(&lama::quote::for_log(msg));
    // SAFETY: static strings and one C string for "%s"; the shell formats and copies them.
    unsafe {
        flux_shell_log(
            std::ptr::null(),
            level,
            c"lama".as_ptr(),
            0,
            PERCENT_S.as_ptr(),
            m.as_ptr(),
        )
    };
}

/// Fails the job: the shell logs `msg`, raises a fatal `exec` exception with it (which `flux run`
/// prints), kills any task and exits. Nothing of the job runs after this.
pub fn fatal(msg: &str) -> ! {
    let m = c_text(&lama::quote::for_log(msg));
    // SAFETY: static strings and one C string for "%s"; flux_shell_fatal does not return.
    unsafe {
        flux_shell_fatal(
            std::ptr::null(),
            c"lama".as_ptr(),
            0,
            0,
            1,
            PERCENT_S.as_ptr(),
            m.as_ptr(),
        )
    };
    // flux_shell_fatal exits; should it not, neither may the job go on.
    std::process::exit(1)
}
