/* What the C benchmarks of scripts/ share: the clock, the median of blocks, a required symbol.
 * Included by bench_ab.c, bench_costs.c, bench_h200.c, bench_rt.c, bench_stdio.c, bench_tap.c
 * (scripts/gpu_prepare.sh copies it to the GPU machine with them). */
#ifndef VRAMLEDGER_BENCH_UTIL_H
#define VRAMLEDGER_BENCH_UTIL_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* qsort's order of doubles. */
static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* dlsym(h, name), or exit 3 saying which symbol of which benchmark was missing. */
static inline void *need(void *h, const char *name, const char *bench) {
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "%s: %s: %s\n", bench, name, dlerror());
        exit(3);
    }
    return p;
}

#endif
