//! Steps whose tasks run in containers.
//!
//! - NVIDIA's pyxis (`srun --container-image`) copies the image's environment over each task's
//!   in its `task_init`, so whatever plugin runs after it has the last word on a variable: lama
//!   must be loaded after pyxis for its `TASK_MAP`, `LAMA_*` and OpenMP variables to reach the
//!   task (docs/admin-guide.md, "Containers"). srun tells the user when the order is the other way.
//! - Slurm's own OCI containers (`srun --container`) run each task through oci.conf's
//!   `RunTimeRun`; crun from 1.25 and runc from 1.2.7 reset the container's CPU affinity, which
//!   `lama oci-run` in that line restores. Node 0 warns once per step when the line lacks it.

/// srun's options (or pyxis's input variables) that run the step's tasks in a pyxis container.
const PYXIS_OPTIONS: [&str; 2] = ["--container-image", "--container-name"];
const PYXIS_VARIABLES: [&str; 2] = ["PYXIS_CONTAINER_IMAGE", "PYXIS_CONTAINER_NAME"];

/// Whether the step's tasks run in a pyxis container: srun's own options (`options`, its
/// command line without the program) or pyxis's input variables (`env`).
pub fn pyxis_container_asked<S: AsRef<str>>(
    options: &[S],
    env: impl Fn(&str) -> Option<String>,
) -> bool {
    options.iter().any(|o| {
        let o = o.as_ref();
        PYXIS_OPTIONS
            .iter()
            .any(|p| o == *p || o.strip_prefix(p).is_some_and(|rest| rest.starts_with('=')))
    }) || PYXIS_VARIABLES
        .iter()
        .any(|v| env(v).is_some_and(|s| !s.is_empty()))
}

/// The variables lama may export to a task, for pyxis's `--container-env` (which keeps the
/// job's value of each name it lists over the image's).
pub const KEPT_OVER_IMAGE: &str =
    "TASK_MAP,LAMA_CPUS,LAMA_MEMS,OMP_NUM_THREADS,OMP_PLACES,OMP_PROC_BIND";

/// What srun says, once per step, when pyxis runs after lama on the nodes.
pub fn pyxis_order_note() -> String {
    format!(
        "pyxis is loaded after lama in plugstack.conf, so variables the container image defines replace lama's in this step's tasks (TASK_MAP, LAMA_*, OMP_*); --container-env={KEPT_OVER_IMAGE} keeps lama's, and the site's fix is to list pyxis before lama (lama's admin guide, Containers)"
    )
}

/// How oci.conf runs a task's container, as far as its binding goes.
#[derive(Debug, PartialEq, Eq)]
pub enum OciRuntime {
    /// `RunTimeRun` goes through `lama oci-run`: the container keeps the task's CPUs.
    ThroughLama,
    /// Another runtime line (`RunTimeRun` or `RunTimeCreate`), given as written.
    Other(String),
    /// Neither line is there (Slurm then refuses the step itself).
    Unknown,
}

/// Reads oci.conf's text: which line runs the containers. Keys are case-insensitive, as Slurm
/// reads them; a value may be quoted.
pub fn oci_runtime(conf: &str) -> OciRuntime {
    let value = |key: &str| {
        conf.lines().find_map(|l| {
            let (k, v) = l.trim().split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case(key)
                .then(|| v.trim().trim_matches('"').to_string())
        })
    };
    match (value("RunTimeRun"), value("RunTimeCreate")) {
        (Some(run), _) if run.split_whitespace().any(|w| w == "oci-run") => OciRuntime::ThroughLama,
        (Some(line), _) | (None, Some(line)) => OciRuntime::Other(line),
        (None, None) => OciRuntime::Unknown,
    }
}

/// What node 0 says, once per step, when lama places the tasks of an `srun --container` step
/// whose runtime line is `line`, not through `lama oci-run`.
pub fn oci_runtime_note(line: &str) -> String {
    format!(
        "this step's containers are run by oci.conf's '{}', not through `lama oci-run`: crun from 1.25 and runc from 1.2.7 give each container every CPU of its cgroup instead of its task's, and `lama check` then shows the tasks as not-as-planned (admin: RunTimeRun=\"lama oci-run <the runtime's run line>\", lama's admin guide, Containers)",
        crate::quote::cut(line)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(options: &[&str], env: &[(&str, &str)]) -> bool {
        pyxis_container_asked(options, |k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn a_container_is_asked_by_option_or_variable() {
        assert!(asked(&["-n2", "--container-image=/x.sqsh"], &[]));
        assert!(asked(&["--container-image", "/x.sqsh"], &[]));
        assert!(asked(&["--container-name=web"], &[]));
        assert!(asked(&[], &[("PYXIS_CONTAINER_IMAGE", "ubuntu")]));
        assert!(!asked(&["--container-image-save=x"], &[]));
        assert!(!asked(&["--container=/bundle"], &[]));
        assert!(!asked(&["-n2"], &[("PYXIS_CONTAINER_IMAGE", "")]));
    }

    #[test]
    fn oci_conf_lines_are_read_as_slurm_reads_them() {
        let crun = "RunTimeQuery=\"crun state %n\"\nRunTimeRun=\"crun run --bundle %b %n\"\n";
        assert_eq!(
            oci_runtime(crun),
            OciRuntime::Other("crun run --bundle %b %n".into())
        );
        let lama = "# lama keeps the CPUs\nruntimerun = \"lama oci-run crun run --bundle %b %n\"";
        assert_eq!(oci_runtime(lama), OciRuntime::ThroughLama);
        let create = "RunTimeCreate=\"runc create %n -b %b\"\nRunTimeStart=\"runc start %n\"";
        assert_eq!(
            oci_runtime(create),
            OciRuntime::Other("runc create %n -b %b".into())
        );
        assert_eq!(
            oci_runtime("IgnoreFileConfigJson=true"),
            OciRuntime::Unknown
        );
        assert!(oci_runtime_note("crun run").contains("lama oci-run"));
    }

    #[test]
    fn the_note_names_the_fix() {
        let n = pyxis_order_note();
        assert!(n.contains("--container-env=TASK_MAP,"));
        assert!(n.contains("list pyxis before lama"));
    }
}
