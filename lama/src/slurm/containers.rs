//! Steps whose tasks run in containers that a SPANK plugin starts: NVIDIA's pyxis
//! (`srun --container-image`). pyxis copies the image's environment over each task's in its
//! `task_init`, so whatever plugin runs after it has the last word on a variable: lama must be
//! loaded after pyxis for its `TASK_MAP`, `LAMA_*` and OpenMP variables to reach the task
//! (docs/admin-guide.md, "Containers"). srun tells the user when the order is the other way.

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
    fn the_note_names_the_fix() {
        let n = pyxis_order_note();
        assert!(n.contains("--container-env=TASK_MAP,"));
        assert!(n.contains("list pyxis before lama"));
    }
}
