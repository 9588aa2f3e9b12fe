//! Every row of the worked-example table in `docs/policy.md` is what `lama plan --policy auto`
//! prints: the docs stay true. (Each row's expected answer was worked out from the machine's
//! XML, as its "why" column says, before it was written down.)

use std::path::PathBuf;
use std::process::Command;

use lama::idset::format_list;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_worked_example_is_what_lama_plan_prints() {
    let page = std::fs::read_to_string(root().join("docs/policy.md")).expect("docs/policy.md");
    // The worked examples are the page's first table (later tables compare with mpibind).
    let rows: Vec<Vec<String>> = page
        .lines()
        .skip_while(|l| !l.starts_with("| machine"))
        .take_while(|l| l.starts_with('|'))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| machine"))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect();
    assert!(rows.len() >= 12, "the table has {} rows", rows.len());
    for row in rows {
        let [machine, tasks, options, cpus, gpus, ..] = &row[..] else {
            panic!("a short row: {row:?}");
        };
        let xml = root().join(format!("tests/topologies/{machine}.xml"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lama"));
        cmd.args([
            "plan", "--policy", "auto", "--format", "json", "--np", tasks,
        ])
        .arg("--topology")
        .arg(&xml)
        .args(options.split_whitespace());
        let out = cmd.output().expect("run lama plan");
        assert!(
            out.status.success(),
            "{row:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let ranks = v["ranks"].as_array().expect("ranks");
        let got_cpus: Vec<String> = ranks
            .iter()
            .map(|r| {
                let c: Vec<u32> = r["cpus"]
                    .as_array()
                    .expect("cpus")
                    .iter()
                    .filter_map(|c| c.as_u64().and_then(|c| u32::try_from(c).ok()))
                    .collect();
                format_list(&c)
            })
            .collect();
        let got_gpus: Vec<String> = ranks
            .iter()
            .map(|r| {
                let g: Vec<&str> = r["gpus"]
                    .as_array()
                    .expect("gpus")
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                if g.is_empty() {
                    "-".to_string()
                } else {
                    g.join(",")
                }
            })
            .collect();
        assert_eq!(
            &got_cpus.join(" ; "),
            cpus,
            "{machine} {tasks} {options}: CPUs"
        );
        assert_eq!(
            &got_gpus.join(" ; "),
            gpus,
            "{machine} {tasks} {options}: GPUs"
        );
    }
}
