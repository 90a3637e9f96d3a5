/*
 * In-process A/B cost of interception through the CUDA runtime: cudaMalloc + cudaFree pairs
 * (default 2 MiB) timed in alternating blocks through two copies of libcudart:
 *   hooked: the runtime loaded normally: under LD_PRELOAD=libvramledger.so its driver calls
 *           reach vramledger's hooks (cudart finds the driver with dlsym + cuGetProcAddress),
 *           and each hook walks the stack past the runtime to find the caller (this program);
 *   direct: a copy of the same file under another name, loaded with RTLD_DEEPBIND: its own
 *           dlsym is libc's, so it gets the driver's functions and never passes the preload.
 * Without the preload both are the runtime and the ratio shows the method's noise.
 *
 * Build: gcc -O2 -o bench_rt bench_rt.c -ldl
 * Run:   ./bench_rt <libcudart> <copy of libcudart> [blocks=40] [pairs=500] [bytes] [hooked-only]
 * Prints per-block ns, then: hooked_ns=… direct_ns=… ratio=… added_ns=… (medians). With a 6th
 * argument only the hooked path runs (for instruction counts under callgrind).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

typedef int (*malloc_t)(void **, size_t);
typedef int (*free_t)(void *);
typedef int (*setdev_t)(int);

struct rt {
    malloc_t alloc;
    free_t release;
};

static struct rt open_rt(const char *path, int flags) {
    void *h = dlopen(path, flags);
    if (!h) {
        fprintf(stderr, "bench_rt: dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    struct rt r = {(malloc_t)need(h, "cudaMalloc", "bench_rt"), (free_t)need(h, "cudaFree", "bench_rt")};
    setdev_t set = (setdev_t)need(h, "cudaSetDevice", "bench_rt");
    if (set(0)) {
        fprintf(stderr, "bench_rt: cudaSetDevice(0) failed in %s\n", path);
        exit(4);
    }
    return r;
}

static int pairs_of(struct rt r, long n, size_t bytes) {
    for (long i = 0; i < n; i++) {
        void *p = NULL;
        if (r.alloc(&p, bytes) || r.release(p)) return 4;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_rt LIBCUDART COPY [blocks] [pairs] [bytes] [hooked-only]\n");
        return 2;
    }
    int blocks = argc > 3 ? atoi(argv[3]) : 40;
    long pairs = argc > 4 ? atol(argv[4]) : 500;
    size_t bytes = argc > 5 ? (size_t)atoll(argv[5]) : (size_t)2 << 20;
    int hooked_only = argc > 6;
    if (blocks < 2 || blocks > 10000 || pairs < 1) return 2;

    struct rt hooked = open_rt(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (hooked_only) {
        if (pairs_of(hooked, pairs, bytes)) return 4;
        printf("hooked_pairs=%ld\n", pairs);
        return 0;
    }
    struct rt direct = open_rt(argv[2], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    /* Warm both paths (the hooked one learns its way past the runtime here). */
    if (pairs_of(hooked, pairs, bytes) || pairs_of(direct, pairs, bytes)) return 4;
    double *h = calloc(blocks, sizeof *h), *d = calloc(blocks, sizeof *d);
    double *r = calloc(blocks, sizeof *r);
    for (int b = 0; b < blocks; b++) {
        for (int k = 0; k < 2; k++) {
            int hooked_turn = (k == 0) == (b % 2 == 0);
            double t0 = now_ns();
            if (pairs_of(hooked_turn ? hooked : direct, pairs, bytes)) return 4;
            (hooked_turn ? h : d)[b] = (now_ns() - t0) / pairs;
        }
        r[b] = h[b] / d[b];
        printf("block %d hooked_ns=%.1f direct_ns=%.1f\n", b, h[b], d[b]);
    }
    double mr = median(r, blocks), mh = median(h, blocks), md = median(d, blocks);
    printf("hooked_ns=%.1f direct_ns=%.1f ratio=%.4f added_ns=%.1f\n", mh, md, mr, mh - md);
    return 0;
}
