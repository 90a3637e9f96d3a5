/*
 * libdirectalloc.so: a "third-party library" that takes device memory behind PyTorch's back.
 *
 * It reaches the driver the way many libraries do, through dlopen("libcuda.so.1") + dlsym
 * (cuMemAlloc_v2 / cuMemFree_v2), and the runtime through the cudart that the host process
 * already loaded (cudaMalloc / cudaFree). No CUDA header is needed: the few prototypes are
 * declared here. Build: gcc -O2 -shared -fPIC -o libdirectalloc.so direct_alloc.c -ldl
 *
 * Called from examples/direct_cudamalloc.py through ctypes, after torch has initialised
 * CUDA (so a context is current on the calling thread).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef int cudaError_t;

typedef CUresult (*cuMemAlloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*cuMemFree_t)(CUdeviceptr);
typedef CUresult (*cuMemsetD8_t)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*cuMemcpyDtoH_t)(void *, CUdeviceptr, size_t);
typedef CUresult (*cuCtxGetCurrent_t)(CUcontext *);
typedef CUresult (*cuCtxSynchronize_t)(void);

typedef cudaError_t (*cudaMalloc_t)(void **, size_t);
typedef cudaError_t (*cudaFree_t)(void *);
typedef cudaError_t (*cudaMemset_t)(void *, int, size_t);
typedef cudaError_t (*cudaMemcpy_t)(void *, const void *, size_t, int);
typedef cudaError_t (*cudaDeviceSynchronize_t)(void);

#define CUDA_MEMCPY_DEVICE_TO_HOST 2
#define CHECK_BYTES (64u << 10)

static struct {
    void *libcuda, *cudart;
    cuMemAlloc_t cuMemAlloc_v2;
    cuMemFree_t cuMemFree_v2;
    cuMemsetD8_t cuMemsetD8_v2;
    cuMemcpyDtoH_t cuMemcpyDtoH_v2;
    cuCtxGetCurrent_t cuCtxGetCurrent;
    cuCtxSynchronize_t cuCtxSynchronize;
    cudaMalloc_t cudaMalloc;
    cudaFree_t cudaFree;
    cudaMemset_t cudaMemset;
    cudaMemcpy_t cudaMemcpy;
    cudaDeviceSynchronize_t cudaDeviceSynchronize;
} g;

static char last_error[512];

const char *da_error(void) { return last_error; }

static void *need(void *handle, const char *name, int *missing) {
    void *p = dlsym(handle, name);
    if (!p) {
        snprintf(last_error, sizeof last_error, "dlsym(%s) failed: %s", name, dlerror());
        *missing = 1;
    }
    return p;
}

/* Returns 0 when both the driver and cudart entry points were found. */
int da_init(const char *cudart_path) {
    int missing = 0;
    last_error[0] = 0;
    g.libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!g.libcuda) {
        snprintf(last_error, sizeof last_error, "dlopen(libcuda.so.1): %s", dlerror());
        return -1;
    }
    g.cuMemAlloc_v2 = (cuMemAlloc_t)need(g.libcuda, "cuMemAlloc_v2", &missing);
    g.cuMemFree_v2 = (cuMemFree_t)need(g.libcuda, "cuMemFree_v2", &missing);
    g.cuMemsetD8_v2 = (cuMemsetD8_t)need(g.libcuda, "cuMemsetD8_v2", &missing);
    g.cuMemcpyDtoH_v2 = (cuMemcpyDtoH_t)need(g.libcuda, "cuMemcpyDtoH_v2", &missing);
    g.cuCtxGetCurrent = (cuCtxGetCurrent_t)need(g.libcuda, "cuCtxGetCurrent", &missing);
    g.cuCtxSynchronize = (cuCtxSynchronize_t)need(g.libcuda, "cuCtxSynchronize", &missing);
    if (missing) return -2;

    if (!cudart_path || !*cudart_path) {
        snprintf(last_error, sizeof last_error, "no cudart path given");
        return -3;
    }
    g.cudart = dlopen(cudart_path, RTLD_NOW | RTLD_GLOBAL);
    if (!g.cudart) {
        snprintf(last_error, sizeof last_error, "dlopen(%s): %s", cudart_path, dlerror());
        return -3;
    }
    g.cudaMalloc = (cudaMalloc_t)need(g.cudart, "cudaMalloc", &missing);
    g.cudaFree = (cudaFree_t)need(g.cudart, "cudaFree", &missing);
    g.cudaMemset = (cudaMemset_t)need(g.cudart, "cudaMemset", &missing);
    g.cudaMemcpy = (cudaMemcpy_t)need(g.cudart, "cudaMemcpy", &missing);
    g.cudaDeviceSynchronize = (cudaDeviceSynchronize_t)need(g.cudart, "cudaDeviceSynchronize", &missing);
    if (missing) return -4;

    /* The driver calls need a current context on this thread; torch normally made the
     * primary context current already. If not, let the runtime do it (cudaFree(0)). */
    CUcontext ctx = NULL;
    if (g.cuCtxGetCurrent(&ctx) != 0 || ctx == NULL) {
        cudaError_t e = g.cudaFree(NULL);
        if (e != 0) {
            snprintf(last_error, sizeof last_error, "cudaFree(0) = %d", e);
            return -5;
        }
    }
    return 0;
}

/* Sum of the first CHECK_BYTES bytes after filling with `value`: proves the memory works. */
static unsigned long long sum_bytes(const unsigned char *buf, size_t n) {
    unsigned long long s = 0;
    for (size_t i = 0; i < n; i++) s += buf[i];
    return s;
}

int da_cu_alloc(size_t size, unsigned long long *out) {
    CUdeviceptr p = 0;
    CUresult r = g.cuMemAlloc_v2(&p, size);
    *out = (unsigned long long)p;
    return r;
}

int da_cu_fill_check(unsigned long long ptr, size_t size, unsigned int value,
                     unsigned long long *sum) {
    size_t n = size < CHECK_BYTES ? size : CHECK_BYTES;
    unsigned char *buf = malloc(n);
    if (!buf) return -1;
    CUresult r = g.cuMemsetD8_v2((CUdeviceptr)ptr, (unsigned char)value, size);
    if (r == 0) r = g.cuCtxSynchronize();
    if (r == 0) r = g.cuMemcpyDtoH_v2(buf, (CUdeviceptr)ptr, n);
    *sum = r == 0 ? sum_bytes(buf, n) : 0;
    free(buf);
    return r;
}

int da_cu_free(unsigned long long ptr) { return g.cuMemFree_v2((CUdeviceptr)ptr); }

int da_rt_alloc(size_t size, unsigned long long *out) {
    void *p = NULL;
    cudaError_t e = g.cudaMalloc(&p, size);
    *out = (unsigned long long)(size_t)p;
    return e;
}

int da_rt_fill_check(unsigned long long ptr, size_t size, unsigned int value,
                     unsigned long long *sum) {
    size_t n = size < CHECK_BYTES ? size : CHECK_BYTES;
    unsigned char *buf = malloc(n);
    if (!buf) return -1;
    cudaError_t e = g.cudaMemset((void *)(size_t)ptr, (int)value, size);
    if (e == 0) e = g.cudaDeviceSynchronize();
    if (e == 0) e = g.cudaMemcpy(buf, (const void *)(size_t)ptr, n, CUDA_MEMCPY_DEVICE_TO_HOST);
    *sum = e == 0 ? sum_bytes(buf, n) : 0;
    free(buf);
    return e;
}

int da_rt_free(unsigned long long ptr) { return g.cudaFree((void *)(size_t)ptr); }
