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
GPUs each has. The command runs with bash in the current directory (the caller puts an `./app`
there that does nothing). Lines compare as a multiset, since nodes print in any order; the
numbers of a "(node placed in ...)" timing are not compared; a `...` line on the page allows
more lines than it shows.

Usage: examples.py setups KIND        the set-ups KIND's examples need, one "XML GPUS" per line
       examples.py run KIND XML GPUS  run the examples of that set-up (if any), one "ok - " or
                                      "not ok - " line each
       examples.py selftest           check the comparison itself
"""
import collections
import pathlib
import re
import subprocess
import sys

TOP = pathlib.Path(__file__).resolve().parent.parent
PAGES = [TOP / "README.md", TOP / "BENCHMARKS.md"] + sorted((TOP / "docs").glob("*.md"))
MARK = re.compile(r"<!-- example: (\S+) (\S+)(?: gpus=(\d+))? -->")
TIMING = re.compile(r"\(node placed in .*\)$")


def examples(kind):
    """(page:line, xml, gpus, command, shown lines) of every example of this kind."""
    out = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            m = MARK.fullmatch(line.strip())
            if not m or m.group(1) != kind:
                continue
            if i + 2 >= len(lines) or not lines[i + 1].startswith("```") or not lines[i + 2].startswith("$ "):
                sys.exit(f"{page.name}:{i + 1}: an example mark must precede a code block starting with '$ '")
            shown = []
            for body in lines[i + 3:]:
                if body.startswith("```"):
                    break
                shown.append(body)
            where = f"{page.relative_to(TOP)}:{i + 3}"
            out.append((where, m.group(2), int(m.group(3) or 0), lines[i + 2][2:], shown))
    return out


def normal(line):
    line = line.rstrip()
    return TIMING.sub(lambda m: re.sub(r"\d+(\.\d+)?", "#", m.group(0)), line)


def matches(shown, got):
    """Whether got holds exactly the shown lines, in any order (more lines when shown has '...')."""
    more = any(s.strip() == "..." for s in shown)
    want = collections.Counter(normal(s) for s in shown if s.strip() != "...")
    have = collections.Counter(normal(g) for g in got)
    return not (want - have) and (more or not (have - want))


def run(kind, xml, gpus):
    chosen = [e for e in examples(kind) if e[1] == xml and e[2] == gpus]
    for where, _, _, cmd, shown in chosen:
        name = f"docs example {where} ({xml}, {gpus} GPUs): {cmd}"
        try:
            p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
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
    ]
    bad = [what for good, what in cases if not good]
    print(f"not ok - the docs examples' comparison: {', '.join(bad)}" if bad else
          f"ok - the docs examples' comparison: {len(cases)} cases (order, missing, extra, '...', timings)")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "selftest":
        selftest()
    elif len(sys.argv) == 3 and sys.argv[1] == "setups":
        for xml, gpus in sorted({(e[1], e[2]) for e in examples(sys.argv[2])}):
            print(xml, gpus)
    elif len(sys.argv) == 5 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
