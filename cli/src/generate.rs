//! `lama generate DIR`: the manual pages and shell completions, made from the command's own
//! definitions and the plugin's option tables so that they cannot drift from what the code
//! accepts. Used by `contrib/package.sh`; hidden from `lama --help`.
//!
//! Writes `DIR/man1/lama.1`, `lama-plan.1`, `lama-taskmap.1`, `lama-hostfile.1`,
//! `DIR/man8/lama-spank.8`, `DIR/completions/lama.bash`, `DIR/completions/_lama` (zsh) and
//! `DIR/plugstack.conf.example` (the repository's copy is checked against it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Command};
use lama::plugin::{OPTIONS, SETTINGS};

/// Write the manual pages and shell completions.
#[derive(Args)]
pub struct GenerateArgs {
    /// Where to write man1/, man8/ and completions/.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// The plugin's page, with its option and argument lists filled in from the code.
const SPANK_PAGE: &str = include_str!("../../docs/lama-spank.8.in");

/// Roff text with its special characters escaped.
fn roff(s: &str) -> String {
    s.replace('\\', "\\\\").replace('-', "\\-")
}

/// `lama-spank(8)`: the template with `@OPTIONS@`, `@SETTINGS@` and `@VERSION@` filled in.
pub fn spank_page() -> String {
    let options: String = OPTIONS
        .iter()
        .map(|o| {
            let arg = o
                .arg
                .map(|a| format!("=\\fI{}\\fP", roff(a)))
                .unwrap_or_default();
            format!(
                ".TP\n.B \\-\\-lama\\-{}{arg}\n{}\n",
                roff(o.name),
                roff(o.usage)
            )
        })
        .collect();
    let settings: String = SETTINGS
        .iter()
        .map(|s| {
            format!(
                ".TP\n.B {}=\\fI{}\\fP\n{}\n",
                roff(s.key),
                roff(s.value),
                roff(s.meaning)
            )
        })
        .collect();
    SPANK_PAGE
        .replace("@OPTIONS@\n", &options)
        .replace("@SETTINGS@\n", &settings)
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
}

/// `plugstack.conf.example`: every argument the plugin reads, from the table it parses them
/// with, each described once, wrapped to fit 100 columns (the repository's copy is checked
/// against this).
pub fn plugstack_example() -> String {
    let mut s = String::from(
        "# plugstack.conf for the lama SPANK plugin: every argument it reads (made by `lama generate`
# from the plugin's own table; docs/reference.md describes each, docs/admin-guide.md installs it).
#
# \"required\": if the plugin cannot load, no step starts (\"optional\" runs steps without it).
# Arguments are key=value words; a bad one fails every srun with a message naming it, once.
# The plugin's path is Debian's Slurm plugin directory, where the package installs it.
#
",
    );
    for st in SETTINGS {
        let head = format!("#   {}={}", st.key, st.value);
        let mut line = if head.len() < 32 {
            format!("{head:<32}")
        } else {
            s.push_str(&head);
            s.push('\n');
            format!("#{:31}", "")
        };
        for word in st.meaning.split_whitespace() {
            if line.len() + 1 + word.len() > 100 && line.len() > 36 {
                s.push_str(line.trim_end());
                s.push('\n');
                line = format!("#{:31}", "");
            }
            line.push(' ');
            line.push_str(word);
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s.push_str(
        "#
# Users turn the plugin off for one step with --lama-off.

required /usr/lib/x86_64-linux-gnu/slurm-wlm/lama.so apply=requested taskmap=yes
",
    );
    s
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A command's page: clap's sections (its `--help` text without the examples, which follow as
/// EXAMPLES), then EXAMPLES, EXIT STATUS and SEE ALSO from [`crate::examples`].
fn man(
    cmd: Command,
    page: Option<&crate::examples::Page>,
    see_also: &[String],
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let cmd = cmd.after_help("").disable_help_subcommand(true);
    let m = clap_mangen::Man::new(cmd.clone());
    let err = |e: std::io::Error| format!("cannot render a manual page: {e}");
    m.render_title(&mut out).map_err(err)?;
    m.render_name_section(&mut out).map_err(err)?;
    m.render_synopsis_section(&mut out).map_err(err)?;
    m.render_description_section(&mut out).map_err(err)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        m.render_options_section(&mut out).map_err(err)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        m.render_subcommands_section(&mut out).map_err(err)?;
    }
    if let Some(p) = page {
        out.extend_from_slice(crate::examples::roff_sections(p, see_also).as_bytes());
    }
    if cmd.get_version().is_some() {
        m.render_version_section(&mut out).map_err(err)?;
    }
    Ok(out)
}

/// Every page's name in SEE ALSO form, `lama-plan(1)`, but `name`'s own.
fn see_also(pages: &[String], name: &str) -> Vec<String> {
    pages
        .iter()
        .filter(|p| !p.starts_with(&format!("{name}(")))
        .map(|p| {
            let (name, sec) = (&p[..p.len() - 3], &p[p.len() - 2..p.len() - 1]);
            format!(".BR {} ({sec})", name.replace('-', "\\-"))
        })
        .collect()
}

/// Writes everything under `a.dir`; `cmd` is the whole `lama` command.
pub fn run(a: GenerateArgs, mut cmd: Command) -> ExitCode {
    // No help subcommand on the pages: lama(1) would name a lama-help(1) that is not written.
    cmd = cmd.disable_help_subcommand(true);
    let result = (|| -> Result<(), String> {
        cmd.build();
        let man1 = a.dir.join("man1");
        let subs: Vec<Command> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .cloned()
            .collect();
        let mut pages: Vec<String> = vec!["lama(1)".into()];
        pages.extend(subs.iter().map(|s| format!("lama-{}(1)", s.get_name())));
        pages.push("lama-spank(8)".into());
        let top = crate::examples::page("");
        write(
            &man1.join("lama.1"),
            &man(cmd.clone(), top, &see_also(&pages, "lama"))?,
        )?;
        for sub in subs {
            let name = format!("lama-{}", sub.get_name());
            let p = crate::examples::page(sub.get_name());
            let page = sub
                .clone()
                .name(name.clone())
                .bin_name(format!("lama {}", sub.get_name()));
            write(
                &man1.join(format!("{name}.1")),
                &man(page, p, &see_also(&pages, &name))?,
            )?;
        }
        write(&a.dir.join("man8/lama-spank.8"), spank_page().as_bytes())?;
        write(
            &a.dir.join("plugstack.conf.example"),
            plugstack_example().as_bytes(),
        )?;
        for (shell, file) in [
            (clap_complete::Shell::Bash, "lama.bash"),
            (clap_complete::Shell::Zsh, "_lama"),
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd.clone(), "lama", &mut out);
            write(&a.dir.join("completions").join(file), &out)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lama generate: {e}");
            ExitCode::from(2)
        }
    }
}
