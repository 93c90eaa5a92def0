/* omp_stencil: a 2-D Jacobi stencil with a barrier after every sweep, on libgomp.

   The many-core benchmark (`threadbalance bench`) builds this with `cc -O2 -fopenmp` and
   runs it with OMP_NUM_THREADS=N and libgomp's default wait policy (spin a while, then
   sleep in the kernel; libgomp spins far less once there are more threads than CPUs).

     usage: omp_stencil [ROWS_PER_THREAD [COLS [SWEEPS [CORES [PASSES]]]]]
     defaults:          128              1024  2000     the online CPUs  1

   Work is weak-scaled: the grid has ROWS_PER_THREAD rows per thread (plus a fixed halo),
   and thread t always updates its own ROWS_PER_THREAD × COLS block (a static schedule),
   so every thread has the same work per sweep whatever N is, as `workload spmd` has.

   A sweep is PASSES relaxation passes over the thread's own block (5-point average, from
   one grid into the other and back), then the barrier. The rows just outside the block
   (its halo) are the neighbours' edge rows as they published them at the last barrier:
   a block-Jacobi scheme with local passes between exchanges, as domain decomposition
   codes use to exchange less often. With PASSES = 1 (the default) every pass sees its
   neighbours' latest rows, and the result is plain Jacobi, the same for every N; longer
   sweeps make the phases between barriers longer without a larger grid (2 MiB a thread
   whatever PASSES is). Each thread publishes its edge rows in one of two buffers by the
   sweep's parity, so one barrier a sweep keeps the exchange race-free: a buffer written
   in sweep s is read in sweep s + 1 and written again only in s + 2, after every reader
   passed the barrier of s + 1.

   Fair share. Each thread measures the CPU time of its own sweeps with
   CLOCK_THREAD_CPUTIME_ID, leaving out the time spent at the barrier (spinning or not):
   W_t, its useful work. No placement on CORES CPUs can finish before the busiest thread's
   work, nor before all the work spread over the CPUs, so the fair-share wall time is
       max( max_t W_t , sum_t W_t / CORES ).
   Work is measured, not assumed, so a cache refilled after a move counts as work: that
   makes the bound slightly kinder to policies that move threads; the wall time, and the
   ratio of wall times between policies, are unaffected.

   Output: one JSON line with the fields `threadbalance compare` reads from
   `threadbalance workload` (wall_s, fair_share_wall_s, fair_share_pct), plus a checksum
   that does not depend on where the threads ran. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long arg(int argc, char **argv, int i, long fallback) {
    if (argc <= i) return fallback;
    char *end = NULL;
    long v = strtol(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || v <= 0) {
        fprintf(stderr, "omp_stencil: argument %d (%s) must be a positive integer\n", i, argv[i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    long rows_per_thread = arg(argc, argv, 1, 128);
    long cols = arg(argc, argv, 2, 1024);
    long sweeps = arg(argc, argv, 3, 2000);
    long cores = arg(argc, argv, 4, sysconf(_SC_NPROCESSORS_ONLN));
    long passes = arg(argc, argv, 5, 1);
    int n = omp_get_max_threads();
    long rows = (long)n * rows_per_thread;
    long stride = cols + 2;
    size_t cells = (size_t)(rows + 2) * (size_t)stride;
    double *a = malloc(cells * sizeof(double));
    double *b = malloc(cells * sizeof(double));
    /* edges[parity][thread][0 = first row, 1 = last row][stride] */
    double *edges = calloc((size_t)2 * (size_t)n * 2 * (size_t)stride, sizeof(double));
    double *work = calloc((size_t)n, sizeof(double));
    if (!a || !b || !edges || !work) {
        fprintf(stderr, "omp_stencil: out of memory for %ld x %ld\n", rows, cols);
        return 1;
    }
#define EDGE(parity, t, which) (edges + (((size_t)(parity) * (size_t)n + (size_t)(t)) * 2 + (which)) * (size_t)stride)
    /* Fixed boundary: 1 on the top edge, 0 elsewhere. */
    for (long j = 0; j < stride; j++) {
        a[j] = b[j] = 1.0;
        a[(rows + 1) * stride + j] = b[(rows + 1) * stride + j] = 0.0;
    }
    const double *top = a, *bottom = a + (rows + 1) * stride;
    double t0 = 0, t1 = 0;
    long total_passes = sweeps * passes;
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        long lo = 1 + t * rows_per_thread, hi = lo + rows_per_thread;
        /* First touch: each thread initializes its own rows (and its edge rows start at 0,
           as calloc left them: the grid's initial values). */
        for (long i = lo; i < hi; i++)
            for (long j = 0; j < stride; j++) a[i * stride + j] = b[i * stride + j] = 0.0;
#pragma omp barrier
#pragma omp single
        t0 = omp_get_wtime();
        /* (the single's implied barrier: everyone starts together) */
        double *src = a, *dst = b, mine = 0.0;
        for (long s = 0; s < sweeps; s++) {
            double c0 = thread_cpu_s();
            int in = (int)((s + 1) & 1), out = (int)(s & 1);
            const double *above = t == 0 ? top : EDGE(in, t - 1, 1);
            const double *below = t == n - 1 ? bottom : EDGE(in, t + 1, 0);
            for (long p = 0; p < passes; p++) {
                for (long i = lo; i < hi; i++) {
                    const double *up = i == lo ? above : src + (i - 1) * stride;
                    const double *down = i == hi - 1 ? below : src + (i + 1) * stride;
                    const double *row = src + i * stride;
                    double *o = dst + i * stride;
                    for (long j = 1; j <= cols; j++)
                        o[j] = 0.25 * (up[j] + down[j] + row[j - 1] + row[j + 1]);
                }
                double *tmp = src;
                src = dst;
                dst = tmp;
            }
            /* Publish this sweep's edge rows for the neighbours' next sweep. */
            for (long j = 0; j < stride; j++) {
                EDGE(out, t, 0)[j] = src[lo * stride + j];
                EDGE(out, t, 1)[j] = src[(hi - 1) * stride + j];
            }
            mine += thread_cpu_s() - c0;
#pragma omp barrier
        }
        work[t] = mine;
    }
    t1 = omp_get_wtime();
    double *last = (total_passes % 2 == 0) ? a : b;
    double checksum = 0.0;
    for (long i = 1; i <= rows; i++)
        for (long j = 1; j <= cols; j++) checksum += last[i * stride + j];
    double total = 0.0, busiest = 0.0;
    for (int t = 0; t < n; t++) {
        total += work[t];
        if (work[t] > busiest) busiest = work[t];
    }
    double wall = t1 - t0;
    double fair = total / (double)cores;
    if (busiest > fair) fair = busiest;
    printf("{\"scenario\":\"omp-stencil\",\"threads\":%d,\"cores\":%ld,\"rows_per_thread\":%ld,"
           "\"cols\":%ld,\"sweeps\":%ld,\"passes\":%ld,\"wall_s\":%.9f,\"work_s\":%.9f,"
           "\"fair_share_wall_s\":%.9f,\"fair_share_pct\":%.3f,\"checksum\":%.9e}\n",
           n, cores, rows_per_thread, cols, sweeps, passes, wall, total, fair,
           100.0 * fair / (wall > 1e-9 ? wall : 1e-9), checksum);
    free(a);
    free(b);
    free(edges);
    free(work);
    return 0;
}
