# Order statistics shared by the benchmark scripts (awk -f contrib/bench/stats.awk -f PROGRAM).
# Samples are kept as c[KIND] (count) and v[KIND, i] (the i-th sample, one per round).

# Sorts a[1..m] in place (insertion sort: the sample counts are small).
function sort(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
# The median of a sorted a[1..m].
function median(a, m) { return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
# The median of the per-round ratios v[x, i] / v[y, i] and its 95% interval, distribution free:
# order statistics k and m+1-k.
function ratio(x, y,   i, m, r, k) {
  m = c[x]; for (i = 1; i <= m; i++) r[i] = v[x, i] / v[y, i]
  sort(r, m); k = int((m - 1.96 * sqrt(m)) / 2); if (k < 1) k = 1
  return sprintf("%.3f [%.3f, %.3f]", median(r, m), r[k], r[m + 1 - k])
}
