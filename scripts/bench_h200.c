/*
 * Cost of a cuMemAlloc_v2 + cuMemFree_v2 pair (2 MiB), with or without libvramledger.so.
 *
 * No CUDA header: the driver is opened with dlopen("libcuda.so.1") and every entry point is
 * taken with dlsym(handle, name). libvramledger.so hooks dlsym, so under LD_PRELOAD the
 * pointers handed out are its wrappers and the hooked path is what gets timed.
 *
 * Build: gcc -O2 -o bench_h200 bench_h200.c -ldl
 * Run:   ./bench_h200 [pairs=20000] [bytes=2097152]   -> prints "pair_ns=<float>"
 * The same source is used against the fake driver (scripts/bench_fake.c includes it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

#ifndef BENCH_LABEL
#define BENCH_LABEL "h200"
#endif

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

typedef CUresult (*cuInit_t)(unsigned int);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext *, CUdevice);
typedef CUresult (*cuDevicePrimaryCtxRelease_t)(CUdevice);
typedef CUresult (*cuCtxCreate_t)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext);
typedef CUresult (*cuMemAlloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*cuMemFree_t)(CUdeviceptr);

static void *sym(void *h, const char *name, int required) {
    void *p = dlsym(h, name);
    if (!p && required) {
        fprintf(stderr, "bench: dlsym(%s) failed: %s\n", name, dlerror());
        exit(3);
    }
    return p;
}

#define CHECK(call)                                                              \
    do {                                                                         \
        CUresult r_ = (call);                                                    \
        if (r_ != 0) {                                                           \
            fprintf(stderr, "bench: %s failed with %d\n", #call, r_);            \
            return 4;                                                            \
        }                                                                        \
    } while (0)

int main(int argc, char **argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 20000;
    size_t bytes = argc > 2 ? (size_t)atoll(argv[2]) : (size_t)2 << 20;
    if (pairs <= 0) pairs = 20000;
    long warmup = pairs / 10 < 1000 ? pairs / 10 : 1000;

    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "bench: dlopen(libcuda.so.1): %s\n", dlerror());
        return 2;
    }
    cuInit_t cuInit = (cuInit_t)sym(h, "cuInit", 1);
    cuDeviceGet_t cuDeviceGet = (cuDeviceGet_t)sym(h, "cuDeviceGet", 1);
    cuDevicePrimaryCtxRetain_t retain =
        (cuDevicePrimaryCtxRetain_t)sym(h, "cuDevicePrimaryCtxRetain", 0);
    cuDevicePrimaryCtxRelease_t release =
        (cuDevicePrimaryCtxRelease_t)sym(h, "cuDevicePrimaryCtxRelease_v2", 0);
    cuCtxSetCurrent_t cuCtxSetCurrent = (cuCtxSetCurrent_t)sym(h, "cuCtxSetCurrent", 0);
    cuMemAlloc_t cuMemAlloc_v2 = (cuMemAlloc_t)sym(h, "cuMemAlloc_v2", 1);
    cuMemFree_t cuMemFree_v2 = (cuMemFree_t)sym(h, "cuMemFree_v2", 1);

    CUdevice dev = 0;
    CUcontext ctx = NULL;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    if (retain && cuCtxSetCurrent) {
        CHECK(retain(&ctx, dev));
        CHECK(cuCtxSetCurrent(ctx));
    } else {
        /* A driver without primary contexts (some fakes): fall back to cuCtxCreate_v2. */
        cuCtxCreate_t create = (cuCtxCreate_t)sym(h, "cuCtxCreate_v2", 1);
        CHECK(create(&ctx, 0, dev));
        release = NULL;
    }

    CUdeviceptr p = 0;
    for (long i = 0; i < warmup; i++) {
        CHECK(cuMemAlloc_v2(&p, bytes));
        CHECK(cuMemFree_v2(p));
    }
    double t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        CHECK(cuMemAlloc_v2(&p, bytes));
        CHECK(cuMemFree_v2(p));
    }
    double t1 = now_ns();
    if (release) release(dev);

    printf("bench=%s pairs=%ld bytes=%zu warmup=%ld\n", BENCH_LABEL, pairs, bytes, warmup);
    printf("pair_ns=%.1f\n", (t1 - t0) / (double)pairs);
    return 0;
}
