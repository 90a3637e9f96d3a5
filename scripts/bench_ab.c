/*
 * In-process A/B cost of interception: cuMemAlloc_v2 + cuMemFree_v2 pairs (default 2 MiB)
 * timed in alternating blocks through two paths of the same process:
 *   hooked: pointers from dlsym(libcuda, name) — under LD_PRELOAD=libvramledger.so these are
 *           its hooks (this is how cuBLAS reaches the driver);
 *   direct: libbenchdirect.so, bound to the driver itself with RTLD_DEEPBIND (never hooked).
 * Alternating blocks in one process cancels the run-to-run drift of the driver's own cost.
 * Without the preload both paths are the driver, and the ratio shows the method's noise.
 *
 * Build: gcc -O2 -o bench_ab bench_ab.c -ldl
 * Run:   ./bench_ab <path to libbenchdirect.so> [blocks=40] [pairs per block=500] [bytes]
 * Prints per-block ns, then: hooked_ns=… direct_ns=… ratio=… added_ns=… (medians).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

typedef unsigned long long CUdeviceptr;
typedef int (*alloc_t)(CUdeviceptr *, size_t);
typedef int (*free_t)(CUdeviceptr);
typedef int (*direct_t)(long, size_t);

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_ab LIBBENCHDIRECT [blocks] [pairs] [bytes]\n");
        return 2;
    }
    int blocks = argc > 2 ? atoi(argv[2]) : 40;
    long pairs = argc > 3 ? atol(argv[3]) : 500;
    size_t bytes = argc > 4 ? (size_t)atoll(argv[4]) : (size_t)2 << 20;
    if (blocks < 2 || blocks > 10000 || pairs < 1) return 2;

    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *direct_lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!cuda || !direct_lib) {
        fprintf(stderr, "bench_ab: dlopen: %s\n", dlerror());
        return 2;
    }
    int (*init)(unsigned) = (int (*)(unsigned))need(cuda, "cuInit", "bench_ab");
    int (*retain)(void **, int) = (int (*)(void **, int))need(cuda, "cuDevicePrimaryCtxRetain", "bench_ab");
    int (*set_current)(void *) = (int (*)(void *))need(cuda, "cuCtxSetCurrent", "bench_ab");
    alloc_t alloc = (alloc_t)need(cuda, "cuMemAlloc_v2", "bench_ab");
    free_t release = (free_t)need(cuda, "cuMemFree_v2", "bench_ab");
    direct_t direct = (direct_t)need(direct_lib, "bench_direct_pairs", "bench_ab");

    void *ctx = NULL;
    if (init(0) || retain(&ctx, 0) || set_current(ctx)) {
        fprintf(stderr, "bench_ab: no context\n");
        return 4;
    }
    /* Warm both paths. */
    if (direct(pairs, bytes)) return 4;
    for (long i = 0; i < pairs; i++) {
        CUdeviceptr p;
        if (alloc(&p, bytes) || release(p)) return 4;
    }
    double *h = calloc(blocks, sizeof *h), *d = calloc(blocks, sizeof *d);
    double *r = calloc(blocks, sizeof *r);
    for (int b = 0; b < blocks; b++) {
        /* Alternate which path goes first so neither always runs on a warmer driver. */
        for (int k = 0; k < 2; k++) {
            int hooked_turn = (k == 0) == (b % 2 == 0);
            double t0 = now_ns();
            if (hooked_turn) {
                for (long i = 0; i < pairs; i++) {
                    CUdeviceptr p;
                    if (alloc(&p, bytes) || release(p)) return 4;
                }
                h[b] = (now_ns() - t0) / pairs;
            } else {
                if (direct(pairs, bytes)) return 4;
                d[b] = (now_ns() - t0) / pairs;
            }
        }
        r[b] = h[b] / d[b];
        printf("block %d hooked_ns=%.1f direct_ns=%.1f\n", b, h[b], d[b]);
    }
    double mr = median(r, blocks), mh = median(h, blocks), md = median(d, blocks);
    printf("hooked_ns=%.1f direct_ns=%.1f ratio=%.4f added_ns=%.1f\n", mh, md, mr, mh - md);
    return 0;
}
