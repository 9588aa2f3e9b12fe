//! The docs stay true: every relative link in the Markdown pages (README, BENCHMARKS, docs/)
//! names a file that exists and, with `#anchor`, a heading of that page (GitHub's anchors);
//! and every `$ lama ...` example in a code block prints what the page shows, output then
//! messages, as a terminal shows them (a `...` line stands for any lines). Examples of other
//! commands (`srun`, `flux run`) carry a mark that the cluster tests run them by
//! (`tests/examples.py`); this test makes sure none is left without one.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Markdown pages users read.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md"), root().join("BENCHMARKS.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// A page's lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats
/// get `-1`, `-2`, ...
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    for l in prose(text) {
        let Some(h) = l.strip_prefix('#') else {
            continue;
        };
        let title = h.trim_start_matches('#').trim();
        let base: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut a = base.clone();
        let mut k = 1;
        while seen.contains(&a) {
            a = format!("{base}-{k}");
            k += 1;
        }
        seen.insert(a);
    }
    seen
}

/// The relative link targets of a page's prose: `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in prose(text) {
        // Inline code may show link-like text; it is not a link.
        let mut clean = String::new();
        let mut code = false;
        for c in l.chars() {
            if c == '`' {
                code = !code;
            } else if !code {
                clean.push(c);
            }
        }
        let mut rest = clean.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(j) = after.find(')') else { break };
            let target = &after[..j];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_string());
            }
            rest = &after[j..];
        }
    }
    out
}

#[test]
fn every_link_and_anchor_resolves() {
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        let dir = page.parent().unwrap_or(Path::new("."));
        for target in links(&text) {
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            if !path.exists() {
                bad.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            if let Some(a) = anchor {
                let t = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&t).contains(a) {
                    bad.push(format!("{}: {target}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// The `$ lama ...` examples of a page: each command with the lines shown after it.
fn examples(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut fenced = false;
    let mut current: Option<(String, Vec<String>)> = None;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            out.extend(current.take());
            continue;
        }
        if !fenced {
            continue;
        }
        if let Some(cmd) = l.strip_prefix("$ ") {
            out.extend(current.take());
            if cmd.starts_with("lama ") {
                current = Some((cmd.to_string(), Vec::new()));
            }
        } else if let Some((_, shown)) = current.as_mut() {
            shown.push(l.to_string());
        }
    }
    out
}

/// Whether `got` matches `shown`, where a `...` line stands for any number of lines.
fn matches(shown: &[String], got: &[&str]) -> bool {
    match shown.split_first() {
        None => got.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=got.len()).any(|k| matches(rest, &got[k..]))
        }
        Some((first, rest)) => got
            .split_first()
            .is_some_and(|(g, gr)| g.trim_end() == first.trim_end() && matches(rest, gr)),
    }
}

#[test]
fn every_lama_example_prints_what_the_page_shows() {
    let mut count = 0;
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        for (cmd, shown) in examples(&text) {
            count += 1;
            // The page's shell words, run from the repository's root as the pages assume.
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("\"$LAMA\" {}", &cmd["lama ".len()..]))
                .env("LAMA", env!("CARGO_BIN_EXE_lama"))
                .env_remove("SLURM_JOB_NODELIST")
                .env_remove("SLURM_JOB_ID")
                .env_remove("TASK_MAP")
                .current_dir(root())
                .output()
                .expect("run the example");
            // What a terminal shows: the output, then the messages.
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            let got: Vec<&str> = stdout.lines().collect();
            if !matches(&shown, &got) {
                bad.push(format!(
                    "{}: $ {cmd}\n--- the page shows:\n{}\n--- lama prints:\n{stdout}",
                    page.display(),
                    shown.join("\n")
                ));
            }
        }
    }
    assert!(count > 0, "no example found");
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

/// Every other example (`$ srun`, `$ flux run`, ...) follows a mark naming the cluster test that
/// runs it and the hardware its nodes are declared as (`tests/examples.py`, which the cluster
/// tests use to find and run them, says what is wrong).
#[test]
fn every_cluster_example_is_marked_for_the_cluster_tests() {
    let out = Command::new("python3")
        .arg(root().join("tests/examples.py"))
        .arg("check")
        .output()
        .expect("run python3 tests/examples.py check");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_checks_themselves() {
    let a = anchors("# A `b` c\n## Set-up: two commands\n## Set-up: two commands\n```\n# no\n```");
    for x in ["a-b-c", "set-up-two-commands", "set-up-two-commands-1"] {
        assert!(a.contains(x), "{x} in {a:?}");
    }
    assert!(!a.contains("no"));
    assert_eq!(
        links("see [x](docs/a.md#b) and `[y](z)` and [w](https://e)"),
        vec!["docs/a.md#b"]
    );
    let shown: Vec<String> = ["a", "...", "d"].iter().map(|s| s.to_string()).collect();
    assert!(matches(&shown, &["a", "b", "c", "d"]));
    assert!(matches(&shown, &["a", "d"]));
    assert!(!matches(&shown, &["a", "b"]));
}

#[test]
fn the_reference_lists_every_option_and_argument_as_the_code_says() {
    let page = std::fs::read_to_string(root().join("docs/reference.md")).expect("reference");
    let cell = |s: &str| s.replace('|', "\\|");
    for o in lama::plugin::OPTIONS {
        let env = lama::plugin::env_name(o.name);
        let opt = match o.arg {
            Some(a) => format!("`--lama-{}`=`{}`", o.name, cell(a)),
            None => format!("`--lama-{}`", o.name),
        };
        let row = format!(
            "| {opt} | `{env}` | `lama.{}` | {} |",
            o.name,
            cell(o.usage)
        );
        assert!(
            page.contains(&row),
            "docs/reference.md lacks the row\n{row}"
        );
    }
    for s in lama::plugin::SETTINGS {
        let row = format!("| `{}={}` | {} |", s.key, cell(s.value), cell(s.meaning));
        assert!(
            page.contains(&row),
            "docs/reference.md lacks the row\n{row}"
        );
    }
}

#[test]
fn the_readme_picture_is_what_lama_plan_draws() {
    let out = std::env::temp_dir().join(format!("lama-readme-picture-{}.svg", std::process::id()));
    let status = Command::new("bash")
        .arg(root().join("contrib/readme-picture.sh"))
        .arg(env!("CARGO_BIN_EXE_lama"))
        .arg(&out)
        .status()
        .expect("run contrib/readme-picture.sh");
    let drawn = std::fs::read(&out);
    let _ = std::fs::remove_file(&out);
    let committed = std::fs::read(root().join("docs/pictures/plan.svg")).expect("the picture");
    assert!(status.success(), "contrib/readme-picture.sh failed");
    assert!(
        drawn.ok() == Some(committed),
        "docs/pictures/plan.svg is not what lama plan draws now: run contrib/readme-picture.sh"
    );
}
