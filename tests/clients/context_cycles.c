/*
 * context_cycles N: a program that makes and destroys its CUDA context N times (a test
 * harness, a tool that opens the device per job), each time holding 256 MiB while it lives,
 * with a stage mark per cycle. Free memory comes back after each destroy: books that add a
 * context's bytes at each creation and never take them back would grow by a context a cycle.
 *
 * Prints the device's free memory around each step (cuMemGetInfo) on stdout. Reaches the
 * driver as a library does (dlopen("libcuda.so.1") + dlsym); no CUDA header needed.
 * Build: gcc -O2 -o context_cycles tests/clients/context_cycles.c -ldl
 * (scripts/gpu_shim_safety.sh runs it on the real driver, tests/shim.rs on the fake one.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

typedef CUresult (*cuInit_t)(unsigned);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuCtxCreate_t)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*cuCtxDestroy_t)(CUcontext);
typedef CUresult (*cuMemAlloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*cuMemFree_t)(CUdeviceptr);
typedef CUresult (*cuMemGetInfo_t)(size_t *, size_t *);
typedef void (*stage_t)(const char *);

static void *need(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "context_cycles: %s not found\n", name);
        exit(2);
    }
    return p;
}

#define CHECK(call)                                                                            \
    do {                                                                                       \
        CUresult rc_ = (call);                                                                 \
        if (rc_ != 0) {                                                                        \
            fprintf(stderr, "context_cycles: %s = %d\n", #call, rc_);                          \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv) {
    int cycles = argc > 1 ? atoi(argv[1]) : 3;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        fprintf(stderr, "context_cycles: %s\n", dlerror());
        return 2;
    }
    cuInit_t cuInit = (cuInit_t)need(lib, "cuInit");
    cuDeviceGet_t cuDeviceGet = (cuDeviceGet_t)need(lib, "cuDeviceGet");
    cuCtxCreate_t cuCtxCreate = (cuCtxCreate_t)need(lib, "cuCtxCreate_v2");
    cuCtxDestroy_t cuCtxDestroy = (cuCtxDestroy_t)need(lib, "cuCtxDestroy_v2");
    cuMemAlloc_t cuMemAlloc = (cuMemAlloc_t)need(lib, "cuMemAlloc_v2");
    cuMemFree_t cuMemFree = (cuMemFree_t)need(lib, "cuMemFree_v2");
    cuMemGetInfo_t cuMemGetInfo = (cuMemGetInfo_t)need(lib, "cuMemGetInfo_v2");
    /* vramledger's stage mark when the preload is there; nothing otherwise. */
    stage_t stage = (stage_t)dlsym(RTLD_DEFAULT, "vramledger_stage");
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    for (int c = 0; c < cycles; c++) {
        char name[32];
        snprintf(name, sizeof name, "cycle_%d", c);
        if (stage) stage(name);
        CUcontext ctx;
        CHECK(cuCtxCreate(&ctx, 0, dev));
        size_t free_b, total;
        CHECK(cuMemGetInfo(&free_b, &total));
        printf("%s: context made, free %zu\n", name, free_b);
        CUdeviceptr p;
        CHECK(cuMemAlloc(&p, 256u << 20));
        CHECK(cuMemGetInfo(&free_b, &total));
        printf("%s: 256 MiB held, free %zu\n", name, free_b);
        CHECK(cuMemFree(p));
        CHECK(cuCtxDestroy(ctx));
    }
    if (stage) stage("after_cycles");
    /* A last context, so that the free memory after the cycles can be read. */
    CUcontext ctx;
    CHECK(cuCtxCreate(&ctx, 0, dev));
    size_t free_b, total;
    CHECK(cuMemGetInfo(&free_b, &total));
    printf("after %d cycles: free %zu (with one context)\n", cycles, free_b);
    CHECK(cuCtxDestroy(ctx));
    printf("context_cycles: ok\n");
    return 0;
}
