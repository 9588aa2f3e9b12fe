#!/usr/bin/env python3
"""The docs' cluster examples, run by the cluster tests and compared with what the page shows.

A page marks an example with a comment on the line before its code block:

    <!-- example: slurm 32em64t-2n8c2t-pci-normalio.xml gpus=0 -->
    ```
    $ srun -N2 ... ./app
    lama: task 0 on n1 ...
    ```

The kind (slurm or flux) says which tests run it; the set-up is the hwloc XML of
tests/topologies/ the sandbox nodes (or Flux's fake hosts) are declared as, and how many fake
GPUs each has (gpus=0 when left out). `<!-- example: guest -->` marks an srun example that the
site-kernel guest runs on its own machine (tests/guest/suite.sh: `run guest none 0`). The command runs with bash in a scratch directory holding
an `./app` that does nothing, and the files the caller names. Lines compare as a multiset, since
nodes print in any order; the numbers of a "(node placed in ...)" timing are not compared; a
`...` line on the page allows more lines than it shows. `$ lama ...` examples need no mark:
cli/tests/docs.rs runs them.

`<!-- script: NAME -->` marks a block of an admin's shell lines (no `$ ` prompts) that a test
runs as written, as a script (the Debian 13 site, tests/trixie/): `examples.py script NAME`
prints it.

Usage: examples.py check                 every other `$` example is marked, every mark well formed
       examples.py setups KIND           the set-ups KIND's examples need, one "XML GPUS" per line
       examples.py run KIND XML GPUS [NAME=FILE...]
                                         run the examples of that set-up (if any), one "ok - " or
                                         "not ok - " line each; NAME=FILE copies FILE in as NAME
       examples.py script NAME           the lines of the block marked <!-- script: NAME -->
       examples.py selftest              check the comparison itself
"""
import collections
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = pathlib.Path(__file__).resolve().parent.parent
PAGES = [TOP / "README.md", TOP / "BENCHMARKS.md"] + sorted((TOP / "docs").glob("*.md"))
MARK = re.compile(r"<!-- example: (slurm|flux) (\S+)(?: gpus=(\d+))? -->|<!-- example: (guest) -->")
SCRIPT = re.compile(r"<!-- script: ([a-z0-9-]+) -->")
TIMING = re.compile(r"\(node placed in .*\)$")
# srun's own notes when the sandbox was still releasing the last job's nodes: Slurm's, about
# the moment, not the example's output.
WAITED = re.compile(r"srun: job \d+ (queued and waiting for resources|has been allocated resources)")


def blocks():
    """(page:line of the block's first line, the line before the fence, the block's lines)."""
    for page in PAGES:
        lines = page.read_text().splitlines()
        start = None
        for i, line in enumerate(lines):
            if not line.lstrip().startswith("```"):
                continue
            if start is None:
                start = i
            else:
                before = lines[start - 1].strip() if start > 0 else ""
                yield f"{page.relative_to(TOP)}:{start + 2}", before, lines[start + 1:i]
                start = None


def problems():
    """What is wrong with the marks: an unmarked cluster example, or a mark that names no XML."""
    out = []
    names = collections.Counter(name for _, name, _ in scripts())
    out += [f"script {name} is marked {n} times" for name, n in names.items() if n > 1]
    for where, before, body in blocks():
        if SCRIPT.fullmatch(before):
            if not body or any(line.startswith("$ ") for line in body):
                out.append(f"{where}: a script block holds shell lines without '$ ' prompts")
            continue
        m = MARK.fullmatch(before)
        command = body[0] if body else ""
        if not command.startswith("$ ") or command.startswith("$ lama "):
            if m:
                out.append(f"{where}: an example mark must precede a block starting with '$ '")
            continue
        kind = "flux" if command.startswith("$ flux ") else "slurm"
        if m and m.group(4) == "guest" and kind == "slurm":
            continue
        if not m or m.group(1) != kind:
            out.append(f"{where}: {command}\n  needs the line before its block to be "
                       f"<!-- example: {kind} XML [gpus=N] --> (found: {before!r})")
        elif not (TOP / "tests" / "topologies" / m.group(2)).is_file():
            out.append(f"{where}: no tests/topologies/{m.group(2)}")
    return out


def examples(kind):
    """(page:line, xml, gpus, command, shown lines) of every example of this kind; a guest
    example (run in the site-kernel guest on its own machine) has the XML "none"."""
    out = []
    for where, before, body in blocks():
        m = MARK.fullmatch(before)
        if not m or not body or not body[0].startswith("$ "):
            continue
        if m.group(4) == kind == "guest":
            out.append((where, "none", 0, body[0][2:], body[1:]))
        elif m.group(1) == kind:
            out.append((where, m.group(2), int(m.group(3) or 0), body[0][2:], body[1:]))
    return out


def scripts():
    """(page:line, name, lines) of every block marked as a script."""
    for where, before, body in blocks():
        m = SCRIPT.fullmatch(before)
        if m:
            yield where, m.group(1), body


def normal(line):
    line = line.rstrip()
    return TIMING.sub(lambda m: re.sub(r"\d+(\.\d+)?", "#", m.group(0)), line)


def matches(shown, got):
    """Whether got holds exactly the shown lines, in any order (more lines when shown has '...')."""
    more = any(s.strip() == "..." for s in shown)
    want = collections.Counter(normal(s) for s in shown if s.strip() != "...")
    have = collections.Counter(normal(g) for g in got if not WAITED.fullmatch(g.strip()))
    return not (want - have) and (more or not (have - want))


def settled():
    """Waits (up to 30 s) until every sandbox node is idle and no job is left: a node still
    releasing the last example's job would send this one to other nodes than the page shows."""
    for _ in range(60):
        try:
            states = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True,
                                    text=True, timeout=30)
            jobs = subprocess.run(["squeue", "-h"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return
        if set(states.stdout.split()) == {"idle"} and not jobs.stdout.strip():
            return
        time.sleep(0.5)


def run(kind, xml, gpus, files):
    chosen = [e for e in examples(kind) if e[1] == xml and e[2] == gpus]
    with tempfile.TemporaryDirectory() as scratch:
        app = pathlib.Path(scratch) / "app"
        app.write_text("#!/bin/sh\nexit 0\n")
        app.chmod(0o755)
        for spec in files:
            name, _, path = spec.partition("=")
            shutil.copy(path, pathlib.Path(scratch) / name)
        for where, _, _, cmd, shown in chosen:
            if kind == "slurm":
                settled()
            name = f"docs example {where} ({xml}, {gpus} GPUs): {cmd}"
            try:
                p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                                   timeout=120, cwd=scratch, stdin=subprocess.DEVNULL)
                got = (p.stdout + p.stderr).splitlines()
            except subprocess.TimeoutExpired:
                got = ["(timed out after 120 s)"]
            if matches(shown, got):
                print(f"ok - {name}: prints what the page shows")
            else:
                print(f"not ok - {name}")
                for line in ["the page shows:"] + shown + ["it printed:"] + got:
                    print(f"#   {line}")


def selftest():
    t = "lama: task 0 on n1 (node 0): computed cpus 0 (node placed in 1.50 ms: topology (hwloc) 1.2)"
    u = t.replace("1.50", "0.75").replace("1.2)", "0.6)")
    cases = [
        (matches(["a", "b"], ["b", "a"]), "lines in another order match"),
        (not matches(["a", "b"], ["a"]), "a missing line fails"),
        (not matches(["a"], ["a", "b"]), "an extra line fails"),
        (matches(["a", "..."], ["a", "b"]), "'...' allows more lines"),
        (not matches(["a", "a"], ["a", "b"]), "a line shown twice must be printed twice"),
        (matches([t], [u]), "timings may differ"),
        (not matches([t], [u.replace("cpus 0", "cpus 1")]), "the rest of a timed line may not"),
        (matches(["a"], ["srun: job 2 queued and waiting for resources", "a",
                         "srun: job 2 has been allocated resources"]), "srun's waiting notes are not output"),
        (not matches(["a"], ["a", "srun: job 2 failed"]), "srun's other lines are"),
    ]
    bad = [what for good, what in cases if not good]
    print(f"not ok - the docs examples' comparison: {', '.join(bad)}" if bad else
          f"ok - the docs examples' comparison: {len(cases)} cases (order, missing, extra, '...', timings, srun's waiting notes)")


def main():
    args = sys.argv[1:]
    if args == ["selftest"]:
        selftest()
    elif args == ["check"]:
        found = problems()
        print("\n".join(found))
        sys.exit(1 if found or not examples("slurm") else 0)
    elif len(args) == 2 and args[0] == "script":
        found = [body for _, name, body in scripts() if name == args[1]]
        if len(found) != 1:
            sys.exit(f"examples.py: {len(found)} blocks are marked <!-- script: {args[1]} -->")
        print("\n".join(found[0]))
    elif len(args) == 2 and args[0] == "setups":
        for xml, gpus in sorted({(e[1], e[2]) for e in examples(args[1])}):
            print(xml, gpus)
    elif len(args) >= 4 and args[0] == "run":
        run(args[1], args[2], int(args[3]), args[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
