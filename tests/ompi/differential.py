#!/usr/bin/env python3
"""Open MPI 5's own mapper beside lama's simple level, case by case.

For every topology file given, a grid of map-by (every object, slot, node, ppr, pe, span,
hwtcpus), bind-to (each, and none given), rank-by (each, and none given), np (none given, 1,
half, all, all+1) and one or two nodes runs `mpirun` on simulated nodes (PRRTE's ras/simulator:
it maps and starts nothing) and `lama plan` with the same words, and compares each rank's node
and CPUs. A difference, or a refusal by one side only, fails unless a row of the departures
table in docs/open-mpi.md names it (the reason is recognised here by its id). Prints one TAP line
per topology and the counts: same, each departure, both refuse.

Usage: differential.py LAMA MPIRUN DOCS TOPOLOGY.xml...
Environment: LAMA_DIFF_JOBS (parallel cases, default 2).
"""
import concurrent.futures as cf
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

lama, mpirun, docs = sys.argv[1:4]
files = sys.argv[4:]
env = dict(os.environ, PRTE_ALLOW_RUN_AS_ROOT="1", PRTE_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

# The departures table: its ids, read from the docs, so that no id is used here unnamed there.
table = set(re.findall(r"^\| `([a-z0-9-]+)` \|", open(docs).read(), re.M))


def bitmap(text):
    """An hwloc XML bitmap ("0xffffffff,0x0000000f") as a set of indexes."""
    bits, words = set(), text.split(",")
    for w, word in enumerate(reversed(words)):
        v = int(word or "0", 16)
        for b in range(32):
            if v >> b & 1:
                bits.add(w * 32 + b)
    return bits


def cores_of(path):
    """The machine's cores as lists of PU OS indexes, in hwloc's logical order, and whether
    hwloc would see hardware threads (some core with two PUs). Read from the XML itself (hwloc's
    own rules: disallowed PUs dropped, then cores left without a PU), not from lama."""
    root = ET.parse(path).getroot()
    top = root.find("object")
    allowed = bitmap(top.get("allowed_cpuset")) if top.get("allowed_cpuset") else None
    cores = []

    def walk(o, in_core):
        t = o.get("type")
        if t == "Core":
            pus = [int(p.get("os_index")) for p in o.iter("object") if p.get("type") == "PU"]
            pus = [p for p in pus if allowed is None or p in allowed]
            if pus:
                cores.append(sorted(pus))
            return
        if t == "PU" and not in_core:
            p = int(o.get("os_index"))
            if allowed is None or p in allowed:
                cores.append([p])
            return
        for c in o.findall("object"):
            walk(c, in_core)

    walk(top, False)
    return cores


case_path = [""]


def disallowed_numa(path):
    top = ET.parse(path).getroot().find("object")
    a, c = top.get("allowed_nodeset"), top.get("complete_nodeset")
    return bool(a and c and bitmap(a) != bitmap(c))


def tier_numa(path):
    sets = [o.get("cpuset") for o in ET.parse(path).getroot().iter("object")
            if o.get("type") == "NUMANode"]
    sets = [bitmap(x) if x else set() for x in sets]
    # Or one inside another (a NUMA node over a group that holds two more).
    return any(not x for x in sets) or any(
        a & b for i, a in enumerate(sets) for b in sets[i + 1:])


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return p.returncode, p.stdout + p.stderr


def ompi(path, nodes, words, cores, allpus):
    rc, out = run([mpirun, "--prtemca", "ras_simulator_num_nodes", str(nodes),
                   "--prtemca", "hwloc_use_topo_file", path, "--display", "map-devel",
                   *words, "/bin/true"])
    if rc is None or "App rank:" not in out:
        return None, out
    hwt = "Cpu Type: HWT" in out
    one_pu = all(len(c) == 1 for c in cores)
    ranks, node = {}, None
    lines = out.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"Data for node: nodeA(\d+)", line)
        if m:
            node = int(m.group(1))
        m = re.search(r"App rank: (\d+)", line)
        if m:
            rank = int(m.group(1))
            b = lines[i + 2] if i + 2 < len(lines) else ""
            if "Binding:" not in b or "UNBOUND" in b:
                cpus = allpus
            else:
                cpus = set()
                for kind, lst in re.findall(r"\[(core|hwt):L?([0-9,\-]+)\]", b):
                    for part in lst.split(","):
                        lo, _, hi = part.partition("-")
                        for x in range(int(lo), int(hi or lo) + 1):
                            if kind == "hwt" or hwt or one_pu:
                                cpus.add(x)
                            else:
                                cpus.update(cores[x])
            ranks[rank] = (node, tuple(sorted(cpus)))
    return [ranks[r] for r in sorted(ranks)], out


def lama_plan(path, nodes, opts, allpus):
    import json
    # lama plan shows a file's whole machine; Open MPI keeps to the CPUs the file allows.
    rc, out = run([lama, "plan", "--topology", path, "--nodes", str(nodes), "--format", "json",
                   "--restrict", ",".join(map(str, allpus)), *opts])
    if rc != 0:
        return None, out
    try:
        d = json.loads(out)
    except ValueError:
        return None, out
    return [(r["node"], tuple(r["cpus"])) for r in d["ranks"]], out


def grid(ncores):
    """The cases for a node of ncores cores: (nodes, map-by, bind-to, rank-by, np)."""
    maps = [None, "slot", "node", "package", "socket", "numa", "l3cache", "l2cache",
            "l1cache", "core", "hwthread", "ppr:1:package", "ppr:2:numa", "ppr:1:node",
            "package:pe=2", "numa:pe=2", "slot:pe=2", "package:span", "core:hwtcpus",
            "core:pe=2:hwtcpus"]
    binds = [None, "none", "package", "numa", "l3cache", "core", "hwthread"]
    ranks = [None, "slot", "node", "fill", "span"]
    nps = [None, 1, max(1, ncores // 2), ncores, ncores + 1]
    out = []
    # Every map-by with each np and node count; every bind-to and rank-by with a few maps.
    for nodes in (1, 2):
        # (No option at all is lama's own default, not the simple level: not compared.)
        for mp in maps[1:]:
            for np in nps:
                out.append((nodes, mp, None, None, np))
        for b in binds[1:]:
            for mp in (None, "slot", "package", "core", "node"):
                out.append((nodes, mp, b, None, max(1, ncores // 2)))
        for r in ranks[1:]:
            for mp in ("package", "numa", "core", "slot", "node"):
                out.append((nodes, mp, None, r, max(1, ncores // 2) + 1))
    return out


def departure(case, o, l, cores):
    """The departures-table id that explains a difference, or None."""
    nodes, mp, b, r, np = case
    mp = mp or ""
    # Open MPI 5.0.11 maps K per object past -n (fixed on PRRTE's master in 2026).
    if mp.startswith("ppr") and np is not None and o is not None and len(o) > np:
        return "ppr-past-np"
    # A file whose allowed NUMA nodes leave some allowed CPUs without one (a cgroup's
    # cpuset.mems): hwloc drops those NUMA nodes for Open MPI; lama keeps the file's domains.
    if disallowed_numa(case_path[0]):
        return "disallowed-numa"
    # NUMA nodes that share CPUs with another (HBM, CXL, PMem beside DRAM; one NUMA node over
    # others) or have none:
    # Open MPI counts each as a NUMA object to map by and bind to; lama's NUMA domains are the
    # CPUs' own (docs/memory-tiers and the automatic policy), one per set of CPUs.
    words = " ".join(str(x) for x in case if x is not None)
    default_numa = b is None and (mp in ("slot", "node", "ppr:1:node") or mp.startswith("slot"))
    if tier_numa(case_path[0]) and ("numa" in words or default_numa):
        return "numa-tiers"
    smt = any(len(c) > 1 for c in cores)
    # --bind-to hwthread without hardware-thread CPUs: 5.0.11 skips SMT cores or fails.
    if b == "hwthread" and "hwtcpus" not in mp and smt:
        return "bind-hwthread-smt"
    # :hwtcpus: the simulator keeps one slot per core; lama counts a slot per hardware thread,
    # as Open MPI does on a real node.
    if "hwtcpus" in mp and smt:
        return "hwtcpus-slots"
    return None


def one(path, case, cores, allpus):
    nodes, mp, b, r, np = case
    words, opts = [], []
    if np is not None:
        words += ["-n", str(np)]
        opts += ["--np", str(np)]
    for flag, v in (("--map-by", mp), ("--bind-to", b), ("--rank-by", r)):
        if v:
            words += [flag, v]
            opts += [flag, v]
    o, oout = ompi(path, nodes, words, cores, allpus)
    l, lout = lama_plan(path, nodes, opts, allpus)
    if o is None and l is None:
        return "both refuse", None
    if o is not None and l is not None and o == l:
        return "same", None
    d = departure(case, o, l, cores)
    if d:
        return d, None
    what = ("lama refuses" if l is None else "Open MPI refuses" if o is None else "differ")
    detail = f"{what}: mpirun {' '.join(words)} (nodes {nodes})"
    if o is not None and l is not None:
        first = next(i for i in range(max(len(o), len(l)))
                     if i >= len(o) or i >= len(l) or o[i] != l[i])
        detail += (f"; rank {first}: Open MPI {o[first] if first < len(o) else '-'}"
                   f" lama {l[first] if first < len(l) else '-'}")
    elif l is None:
        detail += "; lama: " + lout.strip().splitlines()[-1][:200] if lout.strip() else ""
    else:
        msg = [x for x in oout.splitlines() if x.strip() and not x.startswith("=")]
        detail += "; Open MPI: " + " ".join(msg[:6])[:300]
    return "fail", detail


def main():
    counts, failures, unread = {}, 0, []
    jobs = int(os.environ.get("LAMA_DIFF_JOBS", "2"))
    for path in files:
        name = os.path.basename(path)
        cores = cores_of(path)
        allpus = tuple(sorted(p for c in cores for p in c))
        probe, out = ompi(path, 1, ["-n", "1"], cores, allpus)
        if probe is None:
            unread.append(name)
            said = [x.strip() for x in out.splitlines()
                    if x.strip() and not x.startswith("-") and "as root" not in x]
            print(f"skip - {name}: Open MPI 5 maps no rank on it, so there is nothing to compare "
                  f"({(said or ['no output'])[0][:120]})")
            continue
        cases = grid(len(cores))
        # The full grid with LAMA_TEST_FULL=1; else every fifth case, a different fifth on each
        # topology, so that every case still runs on some machines (about two minutes).
        if os.environ.get("LAMA_TEST_FULL") != "1":
            k = files.index(path)
            cases = [c for i, c in enumerate(cases) if (i + k) % 5 == 0]
        case_path[0] = path
        bad = []
        with cf.ThreadPoolExecutor(jobs) as ex:
            for verdict, detail in ex.map(lambda c: one(path, c, cores, allpus), cases):
                counts[verdict] = counts.get(verdict, 0) + 1
                if verdict == "fail":
                    bad.append(detail)
                elif verdict not in ("same", "both refuse") and verdict not in table:
                    bad.append(f"departure '{verdict}' is not in the table of {docs}")
        failures += len(bad)
        print(("not ok" if bad else "ok") + f" - {name}: {len(cases)} cases as Open MPI 5 maps them"
              + (f", {len(bad)} differ" if bad else ""))
        for d in bad[:8]:
            print(f"#   {d}")
    total = sum(counts.values())
    print(f"# {total} cases on {len(files) - len(unread)} topologies: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if failures else 0


sys.exit(main())
