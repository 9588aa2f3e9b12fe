//! Reading a node with hwloc through the helper `liblama_probe.so` (the `lama-probe` crate),
//! loaded from the plugin's own folder on first use and kept for the life of the process. The
//! plugin itself does not link libhwloc: srun, sbatch, salloc and the steps the topology cache
//! serves never load it.

use std::ffi::{c_char, c_int, c_void, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use lama::cache::{decode, Detail, Node, PROBE_DEVICES, PROBE_WHOLE};

/// The helper's file name, in the plugin's folder.
pub const FILE: &str = "liblama_probe.so";

type ProbeFn = unsafe extern "C" fn(*const c_char, u32, *mut *mut c_char) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_char);
type VersionFn = unsafe extern "C" fn() -> *const c_char;

struct Helper {
    probe: ProbeFn,
    free: FreeFn,
}

static HELPER: OnceLock<Result<Helper, String>> = OnceLock::new();

/// The node at `xml`, or this machine (every CPU, with the ones this process may use) when
/// `xml` is `None`; with its NUMA nodes or devices as `detail` says.
pub fn node(xml: Option<&Path>, detail: Detail) -> Result<Node, String> {
    let devices = detail != Detail::Topology;
    let flags =
        if devices { PROBE_DEVICES } else { 0 } | if xml.is_none() { PROBE_WHOLE } else { 0 };
    let text = call(xml, |helper, path, out| {
        // SAFETY: the helper's version matched ours (checked in `load`), so `probe` has this
        // signature; `path` is null or a live C string, `out` a live pointer slot.
        unsafe { (helper.probe)(path, flags, out) }
    })?;
    decode(&text, "lama's hwloc helper's answer", detail).map_err(|e| e.to_string())
}

/// Calls one of the helper's functions with the topology file's path (null for this machine)
/// and a slot for its answer, and returns the answer, or the reason it gave.
fn call(
    xml: Option<&Path>,
    f: impl FnOnce(&Helper, *const c_char, *mut *mut c_char) -> c_int,
) -> Result<String, String> {
    let helper = HELPER.get_or_init(load).as_ref().map_err(Clone::clone)?;
    let path = xml
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .transpose()
        .map_err(|_| "the topology file's path contains a NUL byte".to_string())?;
    let mut out: *mut c_char = std::ptr::null_mut();
    let rc = f(
        helper,
        path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
        &mut out,
    );
    if out.is_null() {
        return Err(format!(
            "lama's hwloc helper returned nothing (status {rc})"
        ));
    }
    // SAFETY: the helper stored a NUL-terminated string it allocated, which we free below.
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `out` came from the helper and is freed once, by the helper.
    unsafe { (helper.free)(out) };
    if rc != 0 {
        return Err(text);
    }
    Ok(text)
}

/// This plugin's folder, from the dynamic loader.
fn own_folder() -> Result<PathBuf, String> {
    // SAFETY: an all-zero Dl_info is a valid value (null pointers) for dladdr to fill.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = own_folder as *const c_void;
    // SAFETY: dladdr reads nothing at `here` and only writes `info`.
    let found = unsafe { libc::dladdr(here, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return Err("cannot tell which file the lama plugin was loaded from".into());
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader while the plugin is loaded.
    let file = unsafe { CStr::from_ptr(info.dli_fname) };
    let file = Path::new(OsStr::from_bytes(file.to_bytes()));
    Ok(file.parent().unwrap_or(Path::new("/")).to_path_buf())
}

/// The loader's last error message.
fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated, read at once.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn load() -> Result<Helper, String> {
    let path = own_folder()?.join(FILE);
    let cannot = |why: String| {
        format!(
            "cannot use lama's hwloc helper {}: {why} (it is installed beside the plugin, from the same build)",
            path.display()
        )
    };
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| cannot("NUL in path".into()))?;
    // SAFETY: a live C string; RTLD_NOW resolves every symbol now, so a broken helper fails
    // here and not in the middle of a call. It is never closed: a Rust library cannot be
    // unloaded safely (its thread-local destructors).
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(cannot(dl_error()));
    }
    let symbol = |name: &CStr| {
        // SAFETY: a live handle and a C string.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if p.is_null() {
            Err(cannot(format!("no symbol {}", name.to_string_lossy())))
        } else {
            Ok(p)
        }
    };
    // SAFETY: every lama-probe release exports lama_probe_version with this signature.
    let version: VersionFn = unsafe { std::mem::transmute(symbol(c"lama_probe_version")?) };
    // SAFETY: it returns a static NUL-terminated string.
    let theirs = unsafe { CStr::from_ptr(version()) }
        .to_string_lossy()
        .into_owned();
    let ours = env!("CARGO_PKG_VERSION");
    if theirs != ours {
        return Err(cannot(format!(
            "it is from lama {theirs}, the plugin from {ours}"
        )));
    }
    // SAFETY: the same release as this plugin, whose lama_probe and lama_probe_free have these
    // signatures.
    let (probe, free) = unsafe {
        (
            std::mem::transmute::<*mut c_void, ProbeFn>(symbol(c"lama_probe")?),
            std::mem::transmute::<*mut c_void, FreeFn>(symbol(c"lama_probe_free")?),
        )
    };
    Ok(Helper { probe, free })
}
