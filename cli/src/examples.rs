//! Examples and exit statuses of each subcommand, in one table: `--help` ends with them and the
//! manual pages (`lama generate`) have them as EXAMPLES and EXIT STATUS, so that the two never
//! differ. The examples' topology files are the repository's own (`tests/topologies/`).

use clap::Command;

/// One command's page: its examples (command line, what it shows) and exit statuses.
pub struct Page {
    /// The subcommand (`""` for `lama` itself).
    pub name: &'static str,
    /// Command lines and what each does.
    pub examples: &'static [(&'static str, &'static str)],
    /// Exit statuses and their meaning.
    pub exit: &'static [(&'static str, &'static str)],
}

/// Every visible command's page.
pub const PAGES: &[Page] = &[
    Page {
        name: "",
        examples: &[
            ("lstopo node.xml", "save a node's topology (hwloc's lstopo, on that node)"),
            ("lama plan --topology node.xml --np 8 --map-by package", "preview Open MPI's --map-by package on it"),
            ("lama plan --topology node.xml --np 8 --policy auto", "preview the automatic policy"),
            ("srun -n8 --lama-policy=auto --lama-verbose ./app", "run under Slurm with the plugin, each task's binding said"),
            ("lama check --jobid 1234", "where a running job's tasks really run, and what is wrong"),
        ],
        exit: &[("0", "done; nothing to report"), ("1", "the answer is no: a placement refused, a layout unsatisfiable, a query unanswerable, findings"), ("2", "usage: an invalid option, value or file"), ("3", "nothing to ask: no running job, no Slurm"), ("exec", "lama exec returns its COMMAND's status; before COMMAND runs, 2 when its rank cannot be placed, 126 and 127 as env(1)")],
    },
    Page {
        name: "plan",
        examples: &[
            ("lama plan --topology FILE.xml --np 4 --map-by core", "four ranks, one core each, Open MPI's way (FILE.xml from lstopo)"),
            ("lama plan --topology tests/topologies/32em64t-2n8c2t-pci-normalio.xml --nodes 2 -n 16 --map-by package:pe=2", "two nodes, two cores per rank, ranks filling node 0 first"),
            ("lama plan --topology tests/topologies/32em64t-2n8c2t-pci-normalio.xml --np 8 --map csbnh --bind 1c", "the expert level: pack the first package core by core"),
            ("lama plan --topology tests/topologies/power8gpudistances.xml --policy auto --np 4 --format json", "the automatic policy with GPUs, as JSON"),
            ("lama plan --from-slurm --format rankfile > rf", "inside an allocation: an Open MPI rankfile for mpirun"),
        ],
        exit: &[("0", "the plan was printed"), ("1", "the plan cannot be made (placement, devices, threads, memory)"), ("2", "an invalid option or file"), ("3", "--from-slurm found no job or Slurm to ask")],
    },
    Page {
        name: "explain",
        examples: &[
            ("lama explain --topology tests/topologies/32em64t-2n8c2t-pci-normalio.xml --np 4 --map-by package", "Open MPI's --map-by package in words, every default named, then on that node"),
            ("lama explain --topology tests/topologies/32em64t-2n8c2t-pci-normalio.xml --np 4 --map csbnh --bind 2c", "what a map string's letters and a binding mean, then the ranks"),
            ("lama explain --topology tests/topologies/power8gpudistances.xml --np 4 --policy auto", "the automatic policy's rules, then its choice on a GPU node"),
            ("lama explain --srun", "the plugin's srun options in short, with examples (what srun --lama-help prints)"),
        ],
        exit: &[("0", "explained and shown"), ("1", "the placement cannot be made (its words are still said)"), ("2", "an invalid option or file")],
    },
    Page {
        name: "exec",
        examples: &[
            ("mpirun -n 8 lama exec --map-by package -- ./app", "each Open MPI rank places and binds itself"),
            ("torchrun --nproc-per-node 4 lama exec -- python train.py", "each worker bound by the automatic policy, near its GPU"),
            ("lama exec --dry-run --local-rank 0 --local-size 2 -- true", "what rank 0 of 2 would get here, without running anything"),
        ],
        exit: &[("COMMAND's", "once the command runs"), ("2", "the rank cannot be placed (one line says why)"), ("126", "COMMAND cannot run"), ("127", "COMMAND is not found")],
    },
    Page {
        name: "oci-run",
        examples: &[
            ("RunTimeRun=\"lama oci-run crun --root=/run/crun run --bundle %b %n.%u.%j.%s.%t\"", "oci.conf: each srun --container task keeps its CPUs under crun"),
            ("RunTimeRun=\"lama oci-run runc --root=/run/runc run -b %b %n.%u.%j.%s.%t\"", "the same with runc (the container's id last)"),
        ],
        exit: &[("container's", "the container's exit status, as the runtime's run gives it (128 + signal)"), ("1", "the runtime's create or start failed"), ("2", "no `run` or no container id in the line"), ("127", "the runtime cannot be run")],
    },
    Page {
        name: "taskmap",
        examples: &[
            ("lama taskmap --to raw '[[0,2,4,1]]'", "task ids per node of an RFC 34 map"),
            ("lama taskmap --nodeid=5 \"$TASK_MAP\"", "which node runs task 5"),
            ("lama taskmap --from-slurm", "inside a step: the step's map"),
        ],
        exit: &[("0", "the answer was printed"), ("1", "a map or query that cannot be read or answered"), ("2", "an invalid option")],
    },
    Page {
        name: "hostfile",
        examples: &[
            ("lama hostfile --nodelist 'n[1-4]' --host '+n0,+n1,+e:2' > hosts", "relative host indexes to a SLURM_HOSTFILE: nodes 0 and 1, then two empty ones"),
            ("SLURM_HOSTFILE=hosts srun -m arbitrary -n4 ./app", "then run the layout"),
        ],
        exit: &[("0", "the host file was printed"), ("1", "the layout cannot be satisfied"), ("2", "an invalid layout or allocation")],
    },
    Page {
        name: "check",
        examples: &[
            ("lama check --jobid 1234", "every task of the job's newest step: CPUs, threads, memory, GPUs, and findings"),
            ("lama check", "inside an allocation: the job it runs in"),
            ("lama check --jobid 1234 --format json", "the same for scripts"),
        ],
        exit: &[("0", "nothing found"), ("1", "findings"), ("2", "an invalid option"), ("3", "nothing to check: no such running job of yours, no step, no Slurm to ask")],
    },
];

/// `Examples:` and `Exit status:` as `--help` ends.
pub fn help_text(p: &Page) -> String {
    let mut s = String::from("Examples:\n");
    for (cmd, what) in p.examples {
        s.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    s.push_str("\nExit status:\n");
    for (code, what) in p.exit {
        s.push_str(&format!("  {code:<9} {what}\n"));
    }
    s.push_str("\nMore: docs/user-guide.md, docs/reference.md, docs/messages.md");
    s
}

/// The command with every visible subcommand's `--help` ending in its examples.
pub fn with_examples(mut cmd: Command) -> Command {
    for p in PAGES {
        if p.name.is_empty() {
            cmd = cmd.after_help(help_text(p));
        } else {
            cmd = cmd.mut_subcommand(p.name, |s| s.after_help(help_text(p)));
        }
    }
    cmd
}

/// The page of a subcommand.
pub fn page(name: &str) -> Option<&'static Page> {
    PAGES.iter().find(|p| p.name == name)
}

/// The page's EXAMPLES, EXIT STATUS and SEE ALSO sections in roff, for `lama generate`.
pub fn roff_sections(p: &Page, see_also: &[String]) -> String {
    let esc = |t: &str| t.replace('\\', "\\\\").replace('-', "\\-");
    let mut s = String::from(".SH EXAMPLES\n");
    for (cmd, what) in p.examples {
        s.push_str(&format!(".TP\n.B {}\n{}\n", esc(cmd), esc(what)));
    }
    s.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in p.exit {
        s.push_str(&format!(".TP\n.B {}\n{}\n", esc(code), esc(what)));
    }
    s.push_str(".SH \"SEE ALSO\"\n");
    s.push_str(&see_also.join(",\n"));
    s.push('\n');
    s
}
