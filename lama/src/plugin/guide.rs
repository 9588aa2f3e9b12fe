//! The short guide `srun --lama-help` prints (and `lama explain --srun`, the same text): the
//! three ways to place, every option from [`OPTIONS`], examples, where to read more. Built from
//! the catalogue, so it never lists an option the plugin lacks or misses one it has.

use super::options::OPTIONS;

/// Where the usage text starts, and the width it is folded to.
const COLUMN: usize = 34;
const WIDTH: usize = 100;

/// Command lines, and what each shows.
const EXAMPLES: [(&str, &str); 5] = [
    (
        "srun -n8 --lama-policy=auto --lama-verbose ./app",
        "each task's binding said on stderr",
    ),
    (
        "srun -n8 --lama-map-by=package --lama-bind-to=core ./app",
        "as mpirun --map-by package",
    ),
    (
        "srun -N2 -n8 --lama-map=csbnh --lama-bind=1c ./app",
        "pack each node core by core",
    ),
    (
        "srun -n4 -c8 --lama-policy=auto --lama-mem=local ./omp",
        "4 tasks of 8 OpenMP threads",
    ),
    (
        "lama explain --topology node.xml --np 8 --map-by package",
        "what a request means, on a node",
    ),
];

/// The guide, lines of at most 100 columns, ending in a newline.
pub fn guide() -> String {
    let mut out = String::from(
        "lama: task placement for srun (the lama SPANK plugin)\n\
         \n\
         Choose one way to place a step, or none to leave it to Slurm:\n\
         \x20 --lama-policy=auto                lama chooses: NUMA domains, whole cores, GPUs, OpenMP\n\
         \x20 --lama-map-by=X --lama-bind-to=Y  Open MPI's words, Open MPI 5's placement\n\
         \x20 --lama-map=STR --lama-bind=WL     LAMA's map: levels to sweep, fastest first\n\
         \n\
         Options (each also a SLURM_LAMA_<NAME> variable, e.g. SLURM_LAMA_MAP_BY):\n",
    );
    for o in OPTIONS {
        let head = match o.arg {
            Some(arg) => format!("  --lama-{}={arg}", o.name),
            None => format!("  --lama-{}", o.name),
        };
        fold(&mut out, &head, o.usage);
    }
    out.push_str("\nExamples:\n");
    let wide = EXAMPLES.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    for (command, what) in EXAMPLES {
        out.push_str(&format!("  {command:<wide$}  {what}\n"));
    }
    out.push_str(
        "\nA bad value stops srun before any task runs, naming the option and what is valid.\n\
         More: man lama-spank, lama --help, docs/user-guide.md\n",
    );
    out
}

/// `head`, then `text` from [`COLUMN`] folded to [`WIDTH`] (a head too long for the column
/// has a line of its own).
fn fold(out: &mut String, head: &str, text: &str) {
    let start = if head.chars().count() < COLUMN {
        format!("{head:<COLUMN$}")
    } else {
        out.push_str(head);
        out.push('\n');
        " ".repeat(COLUMN)
    };
    out.push_str(&crate::quote::fold(&start, text, COLUMN, WIDTH));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_once_and_every_line_fits() {
        let g = guide();
        let listed = g.split("\nOptions").nth(1).expect("an Options part");
        for o in OPTIONS {
            let head = format!("  --lama-{}", o.name);
            let count = listed
                .lines()
                .filter(|l| l.starts_with(&head) && l[head.len()..].starts_with([' ', '=']))
                .count();
            assert_eq!(count, 1, "--lama-{} listed {count} times", o.name);
        }
        for l in g.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        // Every word of each usage text is kept, in order.
        let words: Vec<&str> = g.split_whitespace().collect();
        for o in OPTIONS {
            let want: Vec<&str> = o.usage.split_whitespace().collect();
            assert!(
                words.windows(want.len()).any(|w| w == want.as_slice()),
                "--lama-{}'s usage cut",
                o.name
            );
        }
    }
}
