# Sourced by tests/guest/suite.sh and flux.sh: what each task of a --lama-mem / lama.mem step
# shows of its memory. A task runs the script tier_probe writes: "tier RANK LAMA_MEMS POLICY:NODES" and its
# heap's whole line of /proc/self/numa_maps ("heap RANK ..."). pages_where OUT prints, per task,
# the nodes its heap's pages are on (the line's N<k>= counts), and says "stray" when a page is
# off the task's LAMA_MEMS, or "lopsided" when a task of several nodes has pages on only some
# (an interleave spreads even a 10-page heap over all of them).

# tier_probe FILE RANK_VARIABLE: writes the task's script.
tier_probe() {
  cat > "$1" <<EOS
r=\$$2
l=\$(grep -m1 ' heap' /proc/self/numa_maps)
echo "tier \$r \${LAMA_MEMS:-none} \$(sed -E 's/^[0-9a-f]+ //; s/ heap.*//' <<<"\$l")"
echo "heap \$r \$l"
EOS
}

pages_where() {
  awk '
    function expand(list, out,   parts, n, i, ab, k) {
      n = split(list, parts, ",")
      for (i = 1; i <= n; i++) {
        if (split(parts[i], ab, "-") == 2) { for (k = ab[1]; k <= ab[2]; k++) out[k] = 1 }
        else out[parts[i]] = 1
      }
    }
    $1 == "tier" { mems[$2] = $3 }
    $1 == "heap" { heap[$2] = $0 }
    END {
      for (r in heap) {
        delete want; delete seen; delete on
        expand(mems[r], want)
        line = heap[r]; nodes = ""; verdict = "ok"
        while (match(line, / N[0-9]+=[0-9]+/)) {
          f = substr(line, RSTART + 2, RLENGTH - 2); split(f, kv, "=")
          seen[kv[1]] = 1; nodes = nodes (nodes == "" ? "" : ",") kv[1]
          if (!(kv[1] in want)) verdict = "stray"
          line = substr(line, RSTART + RLENGTH)
        }
        if (nodes == "") verdict = "none"
        for (k in want) if (!(k in seen) && verdict == "ok") verdict = "lopsided"
        print r, nodes, verdict
      }
    }' <<<"$1" | sort -n
}

# heap_lines OUT: each task's heap line (its address left out), as comment lines of the log.
heap_lines() {
  awk '$1 == "heap" {r = $2; $1 = $2 = $3 = ""; sub(/^ +/, ""); print "#   task " r " " $0}' <<<"$1" | sort -k3n
}
