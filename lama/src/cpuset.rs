//! Where a process's cgroup cpuset is, read from its `/proc/self/mountinfo` and
//! `/proc/self/cpuset`: the CPUs Slurm's cgroup confinement (`ConstrainCores`) gives a step,
//! whatever affinity its slurmstepd inherited from slurmd (which pins itself to the specialized
//! cores under `CoreSpecCount` without confinement). The files are read by the front ends;
//! the hierarchy, the node's, is learned once ([`Hierarchy`], kept in the node cache).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The cgroup hierarchy that holds a machine's cpusets, as `/proc/self/mountinfo` shows it:
/// where it is mounted and which of the kernel's cgroup versions it is. It belongs to the node,
/// not to a step, so slurmd learns it once and keeps it in its topology cache; each step then
/// reads only its own `/proc/self/cpuset` and its cpuset's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hierarchy {
    /// Where the hierarchy is mounted.
    pub point: String,
    /// The cgroup the mount shows at `point` (`/` unless a sub-tree is bind-mounted).
    pub root: String,
    /// 1 for cgroup v1's cpuset controller, 2 for the unified hierarchy.
    pub version: u8,
}

impl Hierarchy {
    /// The cpuset hierarchy of the process whose `/proc/self/mountinfo` is `mountinfo`: cgroup
    /// v1's `cpuset` where there is one (it is the one `/proc/self/cpuset` names on a hybrid
    /// machine), else the unified hierarchy; `None` when neither is mounted here (no cpuset:
    /// every online CPU).
    pub fn find(mountinfo: &str) -> Option<Hierarchy> {
        let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
        let v1 = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpuset"));
        let (m, version) = match v1 {
            Some(m) => (m, 1),
            None => (mounts.iter().find(|m| m.fstype == "cgroup2")?, 2),
        };
        Some(Hierarchy {
            point: m.point.clone(),
            root: m.root.clone(),
            version,
        })
    }

    /// The files that may hold the CPUs of the cpuset at `cpuset` (the text of
    /// `/proc/self/cpuset`), in the order to try them: the cpuset's own, then each parent's up to
    /// the hierarchy's root. cgroup v2 (`cpuset.cpus.effective`) has the file only where the
    /// cpuset controller is enabled, and the effective set of a cgroup without it is its
    /// parent's; cgroup v1 (`cpuset.effective_cpus`, older kernels `cpuset.cpus`) has it
    /// everywhere.
    pub fn files(&self, cpuset: &str) -> Vec<PathBuf> {
        let names: &[&str] = match self.version {
            1 => &["cpuset.effective_cpus", "cpuset.cpus"],
            _ => &["cpuset.cpus.effective"],
        };
        // The path is relative to the cgroup namespace's root, which is the mount's root when
        // the hierarchy is mounted inside the namespace; a bind mount of a sub-tree shows its
        // own root.
        let path = cpuset.trim();
        let rel = path
            .strip_prefix(self.root.trim_end_matches('/'))
            .filter(|r| r.is_empty() || r.starts_with('/'))
            .unwrap_or(path);
        let mut parts: Vec<&str> = rel
            .split('/')
            .filter(|p| !p.is_empty() && *p != "." && *p != "..")
            .collect();
        let mut files = Vec::new();
        loop {
            let mut dir = PathBuf::from(&self.point);
            dir.extend(&parts);
            files.extend(names.iter().map(|n| dir.join(n)));
            if parts.pop().is_none() {
                return files;
            }
        }
    }
}

/// The files that may hold the CPUs of the cpuset at `cpuset` (the text of
/// `/proc/self/cpuset`) on a machine whose mounts are `mountinfo`: [`Hierarchy::find`], then
/// [`Hierarchy::files`]. Empty when no cpuset hierarchy is mounted here.
pub fn cpuset_files(mountinfo: &str, cpuset: &str) -> Vec<PathBuf> {
    Hierarchy::find(mountinfo).map_or_else(Vec::new, |h| h.files(cpuset))
}

/// One line of `/proc/self/mountinfo`: `ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - TYPE
/// SOURCE SUPER_OPTIONS`.
struct Mount {
    root: String,
    point: String,
    fstype: String,
    options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let fstype = right.next()?.to_string();
        let options = right.nth(1).unwrap_or("").to_string();
        Some(Mount {
            root: unescape(left.get(3)?),
            point: unescape(left.get(4)?),
            fstype,
            options,
        })
    }
}

/// The kernel writes a space, tab, newline and backslash in a mount's paths as octal escapes.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).filter(|d| {
            b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)) && d[0] <= b'3'
        });
        match oct {
            Some(d) => {
                out.push(d.iter().fold(0u8, |v, c| v * 8 + (c - b'0')));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2: &str = "\
22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    const V1: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
33 25 0:29 / /sys/fs/cgroup/cpu\\040set rw,nosuid shared:14 - cgroup cgroup rw,cpuset
34 25 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory
";

    fn paths(files: Vec<PathBuf>) -> Vec<String> {
        files.iter().map(|p| p.display().to_string()).collect()
    }

    #[test]
    fn v2_walks_from_the_step_up_to_the_root() {
        let got = paths(cpuset_files(
            V2,
            "/system.slice/slurmstepd.scope/job_5/step_0/slurm\n",
        ));
        assert_eq!(got.len(), 6);
        assert_eq!(
            got[0],
            "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_5/step_0/slurm/cpuset.cpus.effective"
        );
        assert_eq!(
            got[1],
            "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_5/step_0/cpuset.cpus.effective"
        );
        assert_eq!(got[5], "/sys/fs/cgroup/cpuset.cpus.effective");
    }

    #[test]
    fn v1_cpuset_wins_over_a_hybrid_v2_and_its_escaped_path_is_read() {
        let got = paths(cpuset_files(V1, "/slurm/uid_0/job_7/step_0"));
        assert_eq!(
            got[0],
            "/sys/fs/cgroup/cpu set/slurm/uid_0/job_7/step_0/cpuset.effective_cpus"
        );
        assert_eq!(
            got[1],
            "/sys/fs/cgroup/cpu set/slurm/uid_0/job_7/step_0/cpuset.cpus"
        );
        assert_eq!(got.last().unwrap(), "/sys/fs/cgroup/cpu set/cpuset.cpus");
    }

    #[test]
    fn a_bind_mounted_subtree_and_hostile_paths_stay_under_the_mount() {
        let mi = "40 1 0:23 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let got = paths(cpuset_files(mi, "/docker/abc/inner"));
        assert_eq!(got[0], "/sys/fs/cgroup/inner/cpuset.cpus.effective");
        let got = paths(cpuset_files(mi, "/docker/abcdef"));
        assert_eq!(got[0], "/sys/fs/cgroup/docker/abcdef/cpuset.cpus.effective");
        let got = paths(cpuset_files(V2, "/../../etc/x"));
        assert!(
            got.iter().all(|p| p.starts_with("/sys/fs/cgroup/")),
            "{got:?}"
        );
    }

    #[test]
    fn the_hierarchy_is_found_once_and_gives_each_step_its_files() {
        let h = Hierarchy::find(V1).expect("v1");
        assert_eq!(
            (h.point.as_str(), h.root.as_str(), h.version),
            ("/sys/fs/cgroup/cpu set", "/", 1)
        );
        let h2 = Hierarchy::find(V2).expect("v2");
        assert_eq!((h2.point.as_str(), h2.version), ("/sys/fs/cgroup", 2));
        // What a step computes from the kept hierarchy is what it computed from the mounts.
        for (mi, h) in [(V1, &h), (V2, &h2)] {
            for path in [
                "/",
                "/slurm/uid_0/job_7/step_0",
                "/system.slice/x/job_5/step_0/slurm\n",
            ] {
                assert_eq!(h.files(path), cpuset_files(mi, path), "{path}");
            }
        }
        assert_eq!(
            Hierarchy::find("22 1 0:21 / /proc rw - proc proc rw\n"),
            None
        );
    }

    #[test]
    fn no_cpuset_hierarchy_no_files() {
        let mi = "22 1 0:21 / /proc rw - proc proc rw\nbroken line\n";
        assert!(cpuset_files(mi, "/").is_empty());
        assert!(cpuset_files("", "").is_empty());
    }
}
