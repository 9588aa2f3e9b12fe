//! Containers: where pyxis stands in the plugin stack (Slurm loads the plugins of
//! plugstack.conf one after the other, in the file's order, before calling any, so the dynamic
//! loader's list of loaded objects gives that order), and how oci.conf runs the containers of
//! an `srun --container` step.

use std::ffi::CStr;

/// Whether pyxis (`spank_pyxis.so`) was loaded after this plugin, i.e. runs after it in every
/// callback. False when pyxis is not loaded at all.
pub(crate) fn pyxis_after_lama() -> bool {
    let objects = loaded_objects();
    let Some(own) = own_object() else {
        return false;
    };
    let me = objects.iter().position(|o| *o == own);
    let pyxis = objects.iter().position(|o| o.ends_with("spank_pyxis.so"));
    matches!((me, pyxis), (Some(m), Some(p)) if p > m)
}

/// The path of the object this code was loaded from (whatever the site named the plugin).
fn own_object() -> Option<String> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the address (a function of this object) and fills `info`,
    // which is valid for writes; it returns 0 without filling it when the address is unknown.
    let found = unsafe { libc::dladdr(own_object as *const libc::c_void, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so `info` is filled.
    let name = unsafe { info.assume_init().dli_fname };
    if name.is_null() {
        return None;
    }
    // SAFETY: a non-null dli_fname is a NUL-terminated string owned by the loader for as long
    // as the object (this plugin) stays loaded.
    Some(
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The paths of the objects loaded in this process, in load order.
fn loaded_objects() -> Vec<String> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `info` for the call's duration; `data` is the
        // `Vec` handed to dl_iterate_phdr below, alive and not otherwise borrowed meanwhile.
        unsafe {
            let names = &mut *data.cast::<Vec<String>>();
            let name = (*info).dlpi_name;
            if !name.is_null() {
                names.push(CStr::from_ptr(name).to_string_lossy().into_owned());
            }
        }
        0
    }
    let mut names: Vec<String> = Vec::new();
    // SAFETY: `each` matches the callback type, never unwinds (no panicking call in it) and
    // only writes to `names`, which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(each), (&mut names as *mut Vec<String>).cast());
    }
    names
}

/// The warning node 0 gives for an `srun --container` step (`SLURM_CONTAINER` in the job's
/// environment) whose oci.conf, beside slurmd's slurm.conf, runs the containers without
/// `lama oci-run`.
pub(crate) fn oci_note() -> Option<String> {
    crate::room::var("SLURM_CONTAINER").filter(|b| !b.is_empty())?;
    // slurmd puts the path of the slurm.conf it reads into its environment, which slurmstepd has.
    let conf = std::env::var_os("SLURM_CONF")?;
    let oci = std::path::Path::new(&conf).with_file_name("oci.conf");
    let text = lama::limits::read_text(&oci, 1 << 20).ok()?;
    match lama::slurm::containers::oci_runtime(&text) {
        lama::slurm::containers::OciRuntime::Other(line) => {
            Some(lama::slurm::containers::oci_runtime_note(&line))
        }
        _ => None,
    }
}
