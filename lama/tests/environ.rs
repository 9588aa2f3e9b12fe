//! The room in a task's environment: the boundaries of one variable and of `execve`, pinned
//! against the numbers Slurm and Linux use (written out here, not taken from the crate), and
//! checked against the kernel by starting real programs.

use std::os::unix::process::CommandExt;
use std::process::Command;

use lama::environ::{exec_limit, fit, variable_fits, ExecSize, Group, Withheld};

/// Slurm's `MAX_ENV_STRLEN` (src/common/env.c): `setenvf` refuses `strlen(name) +
/// strlen(value) + 2 >= 32 * 4096`.
const SLURM_MAX_ENV_STRLEN: usize = 131_072;

#[test]
fn one_variable_just_under_and_just_over_slurms_limit() {
    let name = "TASK_MAP";
    // name + '=' + value + NUL must stay under 131,072.
    let longest = SLURM_MAX_ENV_STRLEN - 1 - name.len() - 2;
    assert!(variable_fits(name, &"x".repeat(longest)));
    assert!(!variable_fits(name, &"x".repeat(longest + 1)));
    assert!(variable_fits("A", ""));
}

#[test]
fn exec_limit_is_a_quarter_of_the_stack_between_128_kib_and_6_mib() {
    assert_eq!(exec_limit(Some(8 << 20)), 2 << 20);
    assert_eq!(exec_limit(None), 6 << 20);
    assert_eq!(exec_limit(Some(64 << 20)), 6 << 20);
    assert_eq!(exec_limit(Some(256 << 10)), 128 << 10);
    assert_eq!(exec_limit(Some(0)), 128 << 10);
    assert_eq!(exec_limit(Some(1 << 20)), 256 << 10);
}

fn vars(n: &str, len: usize) -> Vec<(String, String)> {
    vec![(n.to_string(), "v".repeat(len))]
}

#[test]
fn a_group_with_a_too_long_variable_goes_whole() {
    let mut omp = vars("OMP_PLACES", 140_000);
    omp.push(("OMP_PROC_BIND".into(), "close".into()));
    let groups = vec![
        Group::task_map("[[0,2,1,1]]".into()),
        Group::openmp(omp),
        Group::cpus(vars("LAMA_CPUS", 3)),
    ];
    let (out, withheld) = fit(groups, ExecSize::default(), |_| None, 2 << 20);
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["TASK_MAP", "LAMA_CPUS"]);
    assert_eq!(withheld.len(), 1);
    match &withheld[0] {
        Withheld::TooLong { name, bytes, .. } => {
            assert_eq!(name, "OMP_PLACES");
            assert_eq!(*bytes, "OMP_PLACES".len() + 1 + 140_000 + 1);
        }
        other => panic!("{other:?}"),
    }
    let msg = withheld[0].to_string();
    assert!(msg.starts_with("the OpenMP variables not exported: OMP_PLACES would take 140012 bytes, more than the 131071"), "{msg}");
}

/// The task's arguments and environment so far: `strings` strings of `len` bytes each.
fn env_of(strings: usize, len: usize) -> ExecSize {
    let one = vec![b'x'; len];
    ExecSize::of((0..strings).map(|_| one.as_slice()))
}

#[test]
fn the_whole_environment_just_under_and_just_over_execs_limit() {
    let limit = 128 << 10;
    let reserve = 8192; // what slurmstepd may add after task_init
    let now = env_of(100, 999); // 100 strings: 100,000 bytes and 800 of pointers
    assert_eq!(now.total(), 100 * 1000 + 100 * 8);
    // TASK_MAP=... adds its string, its NUL and one pointer.
    let room = limit - reserve - now.total() - 8;
    let value_len = room - "TASK_MAP".len() - 2;
    let (out, withheld) = fit(
        vec![Group::task_map("m".repeat(value_len))],
        now,
        |_| None,
        limit,
    );
    assert_eq!(
        (out.len(), withheld.len()),
        (1, 0),
        "exactly at the limit fits"
    );
    let (out, withheld) = fit(
        vec![Group::task_map("m".repeat(value_len + 1))],
        now,
        |_| None,
        limit,
    );
    assert!(out.is_empty());
    match &withheld[..] {
        [Withheld::NoRoom { need, limit: l, .. }] => {
            assert_eq!(*l, limit);
            assert_eq!(*need, limit + 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_largest_group_goes_first_and_replacing_counts_the_difference() {
    let limit = 128 << 10;
    let now = env_of(50, 1999); // 100,000 bytes + 400 of pointers
    let groups = vec![
        Group::task_map("m".repeat(15_000)),
        Group::cpus(vars("LAMA_CPUS", 5_000)),
        Group::devices(vars("CUDA_VISIBLE_DEVICES", 9_000)),
    ];
    // Room for about 22,600 more bytes: without TASK_MAP the rest fits.
    let (out, withheld) = fit(groups.clone(), now, |_| None, limit);
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["LAMA_CPUS", "CUDA_VISIBLE_DEVICES"]);
    assert!(matches!(
        &withheld[..],
        [Withheld::NoRoom {
            what: "TASK_MAP",
            ..
        }]
    ));
    // The task already has a CUDA_VISIBLE_DEVICES of 8,990 bytes: replacing it costs 10 more, so
    // everything fits.
    let existing =
        |n: &str| (n == "CUDA_VISIBLE_DEVICES").then_some("CUDA_VISIBLE_DEVICES".len() + 2 + 8_990);
    let (out, withheld) = fit(groups, now, existing, limit);
    assert_eq!((out.len(), withheld.len()), (3, 0), "{withheld:?}");
}

#[test]
fn an_environment_already_over_the_limit_gets_nothing_and_no_loop() {
    let now = env_of(200, 999);
    let (out, withheld) = fit(
        vec![
            Group::task_map("m".into()),
            Group::cpus(vars("LAMA_CPUS", 1)),
        ],
        now,
        |_| None,
        128 << 10,
    );
    assert!(out.is_empty());
    assert_eq!(withheld.len(), 2);
}

/// Runs `/bin/true` with `env` as its whole environment under a stack limit of `stack` bytes;
/// the OS error number when execve refused.
fn exec_with(env: &[(String, String)], stack: u64) -> Result<(), i32> {
    let mut cmd = Command::new("/bin/true");
    cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    // SAFETY: setrlimit is async-signal-safe; the closure touches no other state.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: stack as libc::rlim_t,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_STACK, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => panic!("/bin/true exited {s}"),
        Err(e) => Err(e.raw_os_error().unwrap_or(0)),
    }
}

#[test]
fn linux_refuses_one_string_over_the_limit() {
    // Linux's MAX_ARG_STRLEN is 32 pages with the NUL: Slurm's limit is one byte under it.
    let at = |len: usize| vec![("V".to_string(), "x".repeat(len))];
    let kernel_longest = SLURM_MAX_ENV_STRLEN - "V=".len() - 1;
    assert_eq!(exec_with(&at(kernel_longest), 64 << 20), Ok(()));
    assert_eq!(
        exec_with(&at(kernel_longest + 1), 64 << 20),
        Err(libc::E2BIG)
    );
    assert!(variable_fits("V", &"x".repeat(kernel_longest - 1)));
}

#[test]
fn what_fits_by_exec_limit_really_starts_and_a_page_more_does_not() {
    // Under a 1 MiB stack limit execve allows 256 KiB: fill it with 100,000-byte variables.
    let stack = 1u64 << 20;
    let limit = exec_limit(Some(stack));
    let program = b"/bin/true".len() + 1; // the kernel counts the program's path too
    let fill = |extra: isize| {
        let mut env = Vec::new();
        let mut left = limit as isize - program as isize - 8 /* argv[0] pointer */ - "/bin/true".len() as isize - 1
            + extra;
        let mut i = 0;
        while left > 0 {
            let name = format!("F{i}");
            // NAME=VALUE, its NUL and its pointer.
            let overhead = (name.len() + 2 + 8) as isize;
            let len = (left - overhead).clamp(0, 100_000);
            left -= len + overhead;
            env.push((name, "y".repeat(len as usize)));
            i += 1;
        }
        env
    };
    let under = fill(-4096);
    let size = ExecSize::of(
        under
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .iter()
            .map(|s| s.as_bytes()),
    );
    assert!(size.total() <= limit);
    assert_eq!(exec_with(&under, stack), Ok(()));
    assert_eq!(exec_with(&fill(4096), stack), Err(libc::E2BIG));
}

#[test]
fn the_stack_limit_is_the_smaller_of_slurmstepds_and_the_propagated_one() {
    use lama::environ::stack_limit;
    assert_eq!(stack_limit(Some(8 << 20), Some("1048576")), Some(1 << 20));
    assert_eq!(stack_limit(Some(8 << 20), Some("U1048576")), Some(1 << 20));
    assert_eq!(stack_limit(None, Some("18446744073709551615")), None);
    assert_eq!(stack_limit(None, None), None);
    assert_eq!(stack_limit(Some(1 << 20), Some("garbage")), Some(1 << 20));
    assert_eq!(stack_limit(None, Some("16777216")), Some(16 << 20));
}

#[test]
fn tasks_check_their_own_environment_only_near_the_limit() {
    use lama::environ::{export_bytes, tasks_must_check};
    let ours = export_bytes([("TASK_MAP", "[[0,64,256,1]]")]);
    assert_eq!(ours, "TASK_MAP=[[0,64,256,1]]".len() + 1 + 8);
    let step = env_of(100, 99);
    // 2 MiB (an 8 MiB stack): 256 KiB + 8 KiB kept free is plenty.
    assert!(!tasks_must_check(step, ours, 2 << 20));
    // 128 KiB: the room kept is more than the whole allowance.
    assert!(tasks_must_check(step, ours, 128 << 10));
    let limit = step.total() + ours + (256 << 10) + 8192;
    assert!(!tasks_must_check(step, ours, limit));
    assert!(tasks_must_check(step, ours + 1, limit));
}
