//! `liblama_probe.so`, the SPANK plugin's hwloc helper and the only part of it that links
//! libhwloc. The plugin loads it (`dlopen`, from its own folder) only when it must read a node
//! with hwloc: slurmd writing the topology cache at start, a step on a node without a usable
//! cache, `topology=FILE`. So srun, sbatch and salloc, and every step the cache serves, never
//! load libhwloc and the libraries it pulls in.
//!
//! The interface is three C functions (its version, the probe, and freeing its answer) that pass text: the answer is the node in lama's cache
//! format ([`lama::cache::encode`]), which the plugin decodes and checks as it checks a cache
//! file, or the reason it could not be read.

use std::ffi::{c_char, c_int, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Once;

use lama::cache::{encode, PROBE_DEVICES, PROBE_WHOLE};
use lama::NodeTopology;

/// The lama release this helper belongs to, which the plugin compares with its own before it
/// calls anything else.
static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The helper's version: a NUL-terminated string, valid as long as the helper is loaded.
#[no_mangle]
pub extern "C" fn lama_probe_version() -> *const c_char {
    VERSION.as_ptr().cast()
}

/// Reads the node at the XML file `xml`, or this machine when `xml` is null, as asked by
/// `flags` ([`PROBE_DEVICES`], [`PROBE_WHOLE`]). Returns 0 and stores the node's text in `*out`, or
/// returns 1 and stores the reason; either way the string is the caller's, to give back to
/// [`lama_probe_free`]. Returns -1, storing nothing, when `out` is null.
///
/// # Safety
/// `xml` is null or a NUL-terminated string; `out` is null or points to storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn lama_probe(
    xml: *const c_char,
    flags: u32,
    out: *mut *mut c_char,
) -> c_int {
    if out.is_null() {
        return -1;
    }
    let path = if xml.is_null() {
        None
    } else {
        // SAFETY: the caller passes a NUL-terminated string that outlives this call.
        Some(unsafe { CStr::from_ptr(xml) })
    };
    quiet();
    let answer = std::panic::catch_unwind(|| {
        read(
            path.map(|p| Path::new(OsStr::from_bytes(p.to_bytes()))),
            flags,
        )
    })
    .unwrap_or_else(|_| Err("internal error in lama's hwloc probe (a bug in lama)".into()));
    // SAFETY: `out` is non-null and points to storage for a pointer (the caller's contract).
    unsafe { give(answer, out) }
}

/// Frees a string [`lama_probe`] returned; null is ignored.
///
/// # Safety
/// `s` is null or a string from [`lama_probe`], not freed before.
#[no_mangle]
pub unsafe extern "C" fn lama_probe_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: `s` came from `CString::into_raw` in `lama_probe` and is freed once.
        drop(unsafe { CString::from_raw(s) });
    }
}

/// Stores the answer's text (or the reason) in `*out` for the caller to free with
/// [`lama_probe_free`], and returns 0 for an answer, 1 for a reason.
///
/// # Safety
/// `out` is non-null and points to storage for a pointer.
unsafe fn give(answer: Result<String, String>, out: *mut *mut c_char) -> c_int {
    let (rc, text) = match answer {
        Ok(t) => (0, t),
        Err(e) => (1, e),
    };
    let text = CString::new(text.replace('\0', " ")).unwrap_or_default();
    // SAFETY: the caller's contract: `out` points to storage for a pointer.
    unsafe { *out = text.into_raw() };
    rc
}

/// A panic is reported as an error; the default hook would print into the job's output.
fn quiet() {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

fn read(xml: Option<&Path>, flags: u32) -> Result<String, String> {
    let (devices, whole) = (flags & PROBE_DEVICES != 0, flags & PROBE_WHOLE != 0);
    let text = |e: lama::TopologyError| e.to_string();
    match (xml, devices) {
        (Some(path), true) => {
            let (t, loc) = NodeTopology::from_xml_file_with_devices(path, whole).map_err(text)?;
            encode(&t, Some(&loc), None, None)
        }
        (Some(path), false) => encode(
            &NodeTopology::from_xml_file(path).map_err(text)?,
            None,
            None,
            None,
        ),
        (None, true) => {
            let (t, allowed, loc) = NodeTopology::this_machine_with_devices(whole).map_err(text)?;
            encode(&t, Some(&loc), Some(&allowed), None)
        }
        (None, false) if whole => {
            let (t, allowed) = NodeTopology::this_machine_whole().map_err(text)?;
            encode(&t, None, Some(&allowed), None)
        }
        (None, false) => {
            let t = NodeTopology::this_machine().map_err(text)?;
            let allowed = t.cpus();
            encode(&t, None, Some(&allowed), None)
        }
    }
}
