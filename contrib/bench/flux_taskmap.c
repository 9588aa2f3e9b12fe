/* The flux-core side of contrib/taskmap-vs-flux.sh: times flux-core's libtaskmap on the same
 * maps and operations as lama/examples/taskmap_peer.rs, and prints the same lines:
 *
 *   SHAPE OP MEDIAN_MS CHECK
 *
 * SHAPE is block, cyclic (NODES nodes x PPN tasks) or uneven (block, node n with 1 + n % (2 PPN - 1)
 * tasks); OP is build (a map from the node of every task), encode (RFC 34 JSON), decode, nodeid (the node of every task) or
 * taskids (the tasks of every node); CHECK is a value both sides must agree on.
 * This file is lama's (BSD-3-Clause); it links libtaskmap, which the script builds outside the
 * repository from the vendored flux-core subset.
 *
 * Usage: flux_taskmap NODES PPN RUNS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <flux/idset.h>
#include "taskmap.h"

static double now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median (double *v, int n)
{
    qsort (v, n, sizeof (*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die (const char *what)
{
    fprintf (stderr, "flux_taskmap: %s failed\n", what);
    exit (1);
}

/* As flux's job shell builds its maps: one append per run of consecutive tasks on one node
 * (libtaskmap merges appends into blocks and repeats). */
static struct taskmap *build (const int *node, int ntasks)
{
    struct taskmap *map = taskmap_create ();
    if (!map)
        die ("taskmap_create");
    for (int t = 0; t < ntasks;) {
        int run = 1;
        while (t + run < ntasks && node[t + run] == node[t])
            run++;
        if (taskmap_append (map, node[t], 1, run) < 0)
            die ("taskmap_append");
        t += run;
    }
    return map;
}

static void run (const char *shape, const int *node, int nnodes, int ntasks, int runs)
{
    double *ms = calloc (runs, sizeof (*ms));
    struct taskmap *map = NULL;
    char *text = NULL;
    unsigned long long check = 0;
    if (!ms)
        die ("calloc");

    for (int r = 0; r < runs; r++) {
        double t0 = now_ms ();
        struct taskmap *m = build (node, ntasks);
        ms[r] = now_ms () - t0;
        if (map)
            taskmap_destroy (map);
        map = m;
    }
    printf ("%s build %.4f %d\n", shape, median (ms, runs), taskmap_total_ntasks (map));

    for (int r = 0; r < runs; r++) {
        double t0 = now_ms ();
        char *s = taskmap_encode (map, 0);
        ms[r] = now_ms () - t0;
        if (!s)
            die ("taskmap_encode");
        free (text);
        text = s;
    }
    printf ("%s encode %.4f %s\n", shape, median (ms, runs), text);

    for (int r = 0; r < runs; r++) {
        flux_error_t error;
        double t0 = now_ms ();
        struct taskmap *m = taskmap_decode (text, &error);
        ms[r] = now_ms () - t0;
        if (!m)
            die ("taskmap_decode");
        check = taskmap_total_ntasks (m);
        taskmap_destroy (m);
    }
    printf ("%s decode %.4f %llu\n", shape, median (ms, runs), check);

    for (int r = 0; r < runs; r++) {
        double t0 = now_ms ();
        check = 0;
        for (int t = 0; t < ntasks; t++)
            check += taskmap_nodeid (map, t);
        ms[r] = now_ms () - t0;
    }
    printf ("%s nodeid %.4f %llu\n", shape, median (ms, runs), check);

    for (int r = 0; r < runs; r++) {
        double t0 = now_ms ();
        check = 0;
        for (int n = 0; n < nnodes; n++) {
            const struct idset *ids = taskmap_taskids (map, n);
            if (!ids)
                die ("taskmap_taskids");
            check += idset_count (ids) + idset_first (ids);
        }
        ms[r] = now_ms () - t0;
    }
    printf ("%s taskids %.4f %llu\n", shape, median (ms, runs), check);

    taskmap_destroy (map);
    free (text);
    free (ms);
}

int main (int argc, char **argv)
{
    if (argc != 4) {
        fprintf (stderr, "usage: flux_taskmap NODES PPN RUNS\n");
        return 2;
    }
    int nnodes = atoi (argv[1]), ppn = atoi (argv[2]), runs = atoi (argv[3]);
    if (nnodes <= 0 || ppn <= 0 || runs <= 0)
        die ("argument parsing");
    int ntasks = nnodes * ppn;
    int *node = calloc (ntasks, sizeof (*node));
    if (!node)
        die ("calloc");
    for (int t = 0; t < ntasks; t++)
        node[t] = t / ppn;
    run ("block", node, nnodes, ntasks, runs);
    for (int t = 0; t < ntasks; t++)
        node[t] = t % nnodes;
    run ("cyclic", node, nnodes, ntasks, runs);
    free (node);
    int uneven = 0;
    for (int n = 0; n < nnodes; n++)
        uneven += 1 + n % (2 * ppn - 1);
    if (!(node = calloc (uneven, sizeof (*node))))
        die ("calloc");
    for (int n = 0, t = 0; n < nnodes; n++)
        for (int k = 0; k < 1 + n % (2 * ppn - 1); k++)
            node[t++] = n;
    run ("uneven", node, nnodes, uneven, runs);
    free (node);
    return 0;
}
