//! Help in the tool: every subcommand's `--help` ends with examples and exit statuses, the
//! examples that need no cluster and no file of the user's run as written, and the manual pages
//! have EXAMPLES, EXIT STATUS and SEE ALSO naming only pages that exist.

mod common;

use common::{lama, stdout};

const SUBCOMMANDS: [&str; 6] = ["plan", "explain", "exec", "taskmap", "hostfile", "check"];

#[test]
fn every_help_ends_with_examples_and_exit_statuses() {
    for sub in SUBCOMMANDS
        .iter()
        .map(|s| vec![*s, "--help"])
        .chain([vec!["--help"]])
    {
        let out = stdout(&lama(&sub, &[]));
        assert!(out.contains("\nExamples:\n"), "{sub:?}: {out}");
        assert!(out.contains("\nExit status:\n"), "{sub:?}");
    }
}

#[test]
fn the_examples_run_as_written() {
    let top = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut ran = 0;
    for sub in SUBCOMMANDS {
        let out = stdout(&lama(&[sub, "--help"], &[]));
        let examples = out.split("\nExamples:\n").nth(1).unwrap_or_default();
        let examples = examples.split("\nExit status:").next().unwrap_or_default();
        for line in examples.lines().filter(|l| l.starts_with("  lama ")) {
            // Those that need the user's file, a job, a launcher or a shell's quoting are read only.
            if ["FILE", "--from-slurm", "lama check", "$", ">", "'"]
                .iter()
                .any(|w| line.contains(w))
            {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().skip(1).collect();
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_lama"))
                .args(&words)
                .current_dir(top)
                .output()
                .expect("run lama");
            assert!(
                o.status.success(),
                "{line}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 4, "only {ran} examples ran");
}

#[test]
fn manual_pages_have_examples_exit_status_and_real_see_also() {
    let dir = std::env::temp_dir().join(format!("lama-help-man-{}", std::process::id()));
    let o = lama(&["generate", dir.to_str().expect("utf-8")], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let man1 = dir.join("man1");
    let pages: Vec<String> = std::fs::read_dir(&man1)
        .expect("man1")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    for p in &pages {
        let text = std::fs::read_to_string(man1.join(p)).expect("page");
        assert!(text.contains(".SH EXAMPLES"), "{p}");
        assert!(
            !text.contains("lama\\-help (1)") && !text.contains("lama\\-help(1)"),
            "{p} names a lama-help page"
        );
        assert!(text.contains(".SH \"EXIT STATUS\""), "{p}");
        assert!(text.contains(".SH \"SEE ALSO\""), "{p}");
        // Every page SEE ALSO names exists (lama(1) once named a lama-help(1) that did not).
        let see = text.split(".SH \"SEE ALSO\"").nth(1).unwrap_or_default();
        for line in see.lines().filter(|l| l.starts_with(".BR ")) {
            let mut w = line.split_whitespace().skip(1);
            let (name, sec) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
            let sec = sec.trim_matches(|c| c == '(' || c == ')' || c == ',');
            let file = dir
                .join(format!("man{sec}"))
                .join(format!("{}.{sec}", name.replace("\\-", "-")));
            assert!(
                file.exists(),
                "{p}: SEE ALSO names {name}({sec}), which is not written"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn explain_says_what_a_request_means_then_shows_it() {
    let t = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/topologies/32em64t-2n8c2t-pci-normalio.xml"
    );
    let o = lama(
        &[
            "explain",
            "--topology",
            t,
            "--np",
            "4",
            "--map-by",
            "package",
        ],
        &[],
    );
    assert!(o.status.success());
    let out = stdout(&o);
    // Open MPI's defaults for --map-by package, named: binding to the package, fill ranking.
    assert!(
        out.contains("bind-to package") && out.contains("rank-by fill"),
        "{out}"
    );
    assert!(out.contains("  rank 3 "), "the plan follows: {out}");
    let o = lama(
        &[
            "explain",
            "--topology",
            t,
            "--np",
            "4",
            "--map",
            "csbnh",
            "--bind",
            "2c",
        ],
        &[],
    );
    let out = stdout(&o);
    assert!(
        out.contains("leftmost turning fastest") && out.contains("2 neighbouring cores"),
        "{out}"
    );
    let o = lama(&["explain", "--topology", t, "--np", "2"], &[]);
    assert!(
        stdout(&o).starts_with("The automatic policy"),
        "no option: the policy is explained"
    );
}

/// `lama explain --srun` (what `srun --lama-help` prints: tests/slurm/beside.sh compares them)
/// lists every option of the reference's table, written by hand, and fits 100 columns; it takes
/// no other option.
#[test]
fn explain_srun_lists_every_option_of_the_reference() {
    let o = lama(&["explain", "--srun"], &[]);
    assert!(o.status.success());
    let guide = stdout(&o);
    let reference =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference.md"))
            .expect("docs/reference.md");
    let mut listed = 0;
    for row in reference.lines().filter(|l| l.starts_with("| `--lama-")) {
        let option = row[3..].split('`').next().unwrap_or_default();
        let head = format!("  {option}");
        assert!(
            guide
                .lines()
                .any(|l| l.starts_with(&head) && l[head.len()..].starts_with([' ', '='])),
            "{option} missing from lama explain --srun"
        );
        listed += 1;
    }
    assert!(
        listed >= 18,
        "only {listed} options in the reference's table"
    );
    assert!(guide.lines().all(|l| l.chars().count() <= 100), "{guide}");
    assert!(!lama(&["explain", "--srun", "--np", "2"], &[])
        .status
        .success());
}

#[test]
fn plugstack_example_lists_every_argument_as_the_plugin_reads_them() {
    // The repository's example is what `lama generate` makes from the plugin's argument table:
    // every argument, each described once (it once lacked policy=, mem=, threads= and more).
    let dir = std::env::temp_dir().join(format!("lama-help-plugstack-{}", std::process::id()));
    let o = lama(&["generate", dir.to_str().expect("utf-8")], &[]);
    assert!(o.status.success());
    let made = std::fs::read_to_string(dir.join("plugstack.conf.example")).expect("made");
    let kept = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../plugstack.conf.example"
    ))
    .expect("kept");
    assert_eq!(
        kept, made,
        "plugstack.conf.example differs from `lama generate`'s: copy it over"
    );
    for key in [
        "policy=",
        "mem=",
        "threads=",
        "omp-bind=",
        "omp-override=",
        "gpu-visibility=",
        "init-failure=",
    ] {
        assert!(kept.contains(&format!("#   {key}")), "{key} missing");
    }
    assert!(
        kept.lines().all(|l| l.len() <= 100),
        "a line over 100 columns"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
