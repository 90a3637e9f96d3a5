/* libcudart.so.13 (fake CUDA runtime). It reaches the driver exactly like the real cudart:
 * dlopen("libcuda.so.1"), dlsym(handle, "cuGetProcAddress_v2"), ask that for "cuGetProcAddress"
 * and use the returned pointer for every later lookup. Initialisation is lazy (first call):
 * cuInit(0), then each thread binds the retained primary context of its device. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h"
#include "fake_libs.h"

#define CUDART_VERSION 13000
#define MAX_DEVICES 16

static PFN_cuGetProcAddress_v2 get_proc; /* what the driver handed out for "cuGetProcAddress" */

static struct {
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGetPCIBusId)(char *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream); /* per-thread default stream */
    CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned int);
    CUresult (*cuMemAllocHost)(void **, size_t);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemHostRegister)(void *, size_t, unsigned int);
    CUresult (*cuMemHostUnregister)(void *);
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamBeginCapture)(CUstream, int);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuThreadExchangeStreamCaptureMode)(int *);
    CUresult (*cuGraphDestroy)(CUgraph);
    CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);
    CUresult (*cuMemPoolTrimTo)(CUmemoryPool, size_t);
    CUresult (*cuMemPoolGetAttribute)(CUmemoryPool, int, void *);
    /* Looked up (as the real cudart does) but not used by this fake. */
    void *cuMemCreate, *cuMemRelease, *cuMemMap, *cuMemAddressReserve, *cuMemAllocFromPoolAsync, *cuMemAllocPitch,
        *cuMemPoolCreate, *cuCtxCreate;
} drv;

static const struct {
    const char *name;
    unsigned long long flags;
    void **slot;
    int required;
} lookups[] = {
    {"cuInit", 0, (void **)&drv.cuInit, 1},
    {"cuDeviceGetCount", 0, (void **)&drv.cuDeviceGetCount, 1},
    {"cuDeviceGetPCIBusId", 0, (void **)&drv.cuDeviceGetPCIBusId, 1},
    {"cuDevicePrimaryCtxRetain", 0, (void **)&drv.cuDevicePrimaryCtxRetain, 1},
    {"cuDevicePrimaryCtxRelease", 0, (void **)&drv.cuDevicePrimaryCtxRelease, 1},
    {"cuCtxSetCurrent", 0, (void **)&drv.cuCtxSetCurrent, 1},
    {"cuCtxSynchronize", 0, (void **)&drv.cuCtxSynchronize, 1},
    {"cuMemAlloc", 0, (void **)&drv.cuMemAlloc, 1},
    {"cuMemFree", 0, (void **)&drv.cuMemFree, 1},
    {"cuMemAllocAsync", 0, (void **)&drv.cuMemAllocAsync, 1},
    {"cuMemAllocAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void **)&drv.cuMemAllocAsync, 1},
    {"cuMemFreeAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void **)&drv.cuMemFreeAsync, 1},
    {"cuMemAllocManaged", 0, (void **)&drv.cuMemAllocManaged, 1},
    {"cuMemGetInfo", 0, (void **)&drv.cuMemGetInfo, 1},
    {"cuMemHostAlloc", 0, (void **)&drv.cuMemHostAlloc, 1},
    {"cuMemAllocHost", 0, (void **)&drv.cuMemAllocHost, 1},
    {"cuMemFreeHost", 0, (void **)&drv.cuMemFreeHost, 1},
    {"cuMemHostRegister", 0, (void **)&drv.cuMemHostRegister, 1},
    {"cuMemHostUnregister", 0, (void **)&drv.cuMemHostUnregister, 1},
    {"cuStreamCreate", 0, (void **)&drv.cuStreamCreate, 1},
    {"cuStreamDestroy", 0, (void **)&drv.cuStreamDestroy, 1},
    {"cuStreamBeginCapture", 0, (void **)&drv.cuStreamBeginCapture, 1},
    {"cuStreamEndCapture", 0, (void **)&drv.cuStreamEndCapture, 1},
    {"cuThreadExchangeStreamCaptureMode", 0, (void **)&drv.cuThreadExchangeStreamCaptureMode, 1},
    {"cuGraphDestroy", 0, (void **)&drv.cuGraphDestroy, 1},
    {"cuDeviceGetDefaultMemPool", 0, (void **)&drv.cuDeviceGetDefaultMemPool, 1},
    {"cuMemPoolTrimTo", 0, (void **)&drv.cuMemPoolTrimTo, 1},
    {"cuMemPoolGetAttribute", 0, (void **)&drv.cuMemPoolGetAttribute, 1},
    {"cuMemCreate", 0, &drv.cuMemCreate, 0},
    {"cuMemRelease", 0, &drv.cuMemRelease, 0},
    {"cuMemMap", 0, &drv.cuMemMap, 0},
    {"cuMemAddressReserve", 0, &drv.cuMemAddressReserve, 0},
    {"cuMemAllocFromPoolAsync", 0, &drv.cuMemAllocFromPoolAsync, 0},
    {"cuMemAllocPitch", 0, &drv.cuMemAllocPitch, 0},
    {"cuMemPoolCreate", 0, &drv.cuMemPoolCreate, 0},
    {"cuCtxCreate", 0, &drv.cuCtxCreate, 0},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cudaError_t init_error;
static int device_count;
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[MAX_DEVICES];
static __thread int thread_device = -1;

/* FAKECUDART_EXIT_TEARDOWN=early|late: like a runtime that releases its primary contexts at
 * exit, from an atexit handler registered when it initialises ("early", before any context
 * exists) or at the first allocation ("late", after the context was retained). */
static void teardown(void) {
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (primary[d]) {
            drv.cuDevicePrimaryCtxRelease(d);
            primary[d] = NULL;
        }
    }
}

static int teardown_when(const char *when) {
    const char *v = getenv("FAKECUDART_EXIT_TEARDOWN");
    return v && !strcmp(v, when);
}

static void global_init(void) {
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!libcuda) {
        fprintf(stderr, "fake cudart: dlopen(libcuda.so.1): %s\n", dlerror());
        init_error = 35; /* cudaErrorInsufficientDriver */
        return;
    }
    PFN_cuGetProcAddress_v2 v2 = (PFN_cuGetProcAddress_v2)dlsym(libcuda, "cuGetProcAddress_v2");
    int status = -1;
    if (!v2 || v2("cuGetProcAddress", (void **)&get_proc, CUDART_VERSION, 0, &status) != CUDA_SUCCESS || !get_proc) {
        fprintf(stderr, "fake cudart: no cuGetProcAddress (status %d)\n", status);
        init_error = 35;
        return;
    }
    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++) {
        CUresult rc = get_proc(lookups[i].name, lookups[i].slot, CUDART_VERSION, lookups[i].flags, &status);
        if (rc != CUDA_SUCCESS && lookups[i].required) {
            fprintf(stderr, "fake cudart: cuGetProcAddress(%s) -> %d (status %d)\n", lookups[i].name, rc, status);
            init_error = 35;
            return;
        }
    }
    CUresult rc = drv.cuInit(0);
    if (rc == CUDA_SUCCESS) rc = drv.cuDeviceGetCount(&device_count);
    init_error = rc;
    if (rc == CUDA_SUCCESS && teardown_when("early")) atexit(teardown);
}

/* Bind the calling thread to `dev`'s primary context (retained once per process). */
static cudaError_t bind_device(int dev) {
    if (dev < 0 || dev >= device_count || dev >= MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&primary_lock);
    if (!primary[dev]) rc = drv.cuDevicePrimaryCtxRetain(&primary[dev], dev);
    pthread_mutex_unlock(&primary_lock);
    if (rc == CUDA_SUCCESS) rc = drv.cuCtxSetCurrent(primary[dev]);
    if (rc == CUDA_SUCCESS) thread_device = dev;
    return rc;
}

/* Every API call starts here: global init once, then this thread's context. */
static cudaError_t lazy_init(void) {
    pthread_once(&once, global_init);
    if (init_error) return init_error;
    if (thread_device < 0) return bind_device(0);
    return CUDA_SUCCESS;
}

#define INIT_OR_RETURN()                                                                                               \
    do {                                                                                                               \
        cudaError_t e_ = lazy_init();                                                                                  \
        if (e_) return e_;                                                                                             \
    } while (0)

cudaError_t cudaSetDevice(int device) {
    pthread_once(&once, global_init);
    if (init_error) return init_error;
    return bind_device(device);
}

cudaError_t cudaGetDevice(int *device) {
    INIT_OR_RETURN();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = thread_device;
    return 0;
}

cudaError_t cudaDeviceSynchronize(void) {
    INIT_OR_RETURN();
    return drv.cuCtxSynchronize();
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
    INIT_OR_RETURN();
    return drv.cuDeviceGetPCIBusId(pciBusId, len, device);
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
    INIT_OR_RETURN();
    if (!devPtr) return CUDA_ERROR_INVALID_VALUE;
    if (size == 0) { /* cudaMalloc(0) succeeds with NULL without calling the driver */
        *devPtr = NULL;
        return 0;
    }
    static int late_registered;
    if (!late_registered && teardown_when("late")) {
        late_registered = 1;
        atexit(teardown);
    }
    CUdeviceptr p = 0;
    CUresult rc = drv.cuMemAlloc(&p, size);
    *devPtr = rc == CUDA_SUCCESS ? (void *)p : NULL;
    return rc;
}

cudaError_t cudaFree(void *devPtr) {
    INIT_OR_RETURN();
    if (!devPtr) return 0;
    return drv.cuMemFree((CUdeviceptr)devPtr);
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
    INIT_OR_RETURN();
    if (!devPtr) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = 0;
    CUresult rc = drv.cuMemAllocAsync(&p, size, (CUstream)stream);
    *devPtr = rc == CUDA_SUCCESS ? (void *)p : NULL;
    return rc;
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
    INIT_OR_RETURN();
    return drv.cuMemFreeAsync((CUdeviceptr)devPtr, (CUstream)stream);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
    INIT_OR_RETURN();
    if (!devPtr) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = 0;
    CUresult rc = drv.cuMemAllocManaged(&p, size, flags);
    *devPtr = rc == CUDA_SUCCESS ? (void *)p : NULL;
    return rc;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
    INIT_OR_RETURN();
    return drv.cuMemAllocHost(ptr, size);
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
    INIT_OR_RETURN();
    return drv.cuMemHostAlloc(ptr, size, flags);
}

cudaError_t cudaFreeHost(void *ptr) {
    INIT_OR_RETURN();
    return drv.cuMemFreeHost(ptr);
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    INIT_OR_RETURN();
    return drv.cuMemHostRegister(ptr, size, flags);
}

cudaError_t cudaHostUnregister(void *ptr) {
    INIT_OR_RETURN();
    return drv.cuMemHostUnregister(ptr);
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
    INIT_OR_RETURN();
    return drv.cuMemGetInfo(free, total);
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    INIT_OR_RETURN();
    return drv.cuStreamCreate((CUstream *)stream, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    INIT_OR_RETURN();
    return drv.cuStreamDestroy((CUstream)stream);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, int mode) {
    INIT_OR_RETURN();
    return drv.cuStreamBeginCapture((CUstream)stream, mode);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    INIT_OR_RETURN();
    return drv.cuStreamEndCapture((CUstream)stream, (CUgraph *)graph);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(int *mode) {
    INIT_OR_RETURN();
    return drv.cuThreadExchangeStreamCaptureMode(mode);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    INIT_OR_RETURN();
    return drv.cuGraphDestroy((CUgraph)graph);
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
    INIT_OR_RETURN();
    return drv.cuDeviceGetDefaultMemPool((CUmemoryPool *)pool, device);
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t minBytesToKeep) {
    INIT_OR_RETURN();
    return drv.cuMemPoolTrimTo((CUmemoryPool)pool, minBytesToKeep);
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, int attr, void *value) {
    INIT_OR_RETURN();
    return drv.cuMemPoolGetAttribute((CUmemoryPool)pool, attr, value);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, int *driverStatus) {
    INIT_OR_RETURN();
    int status = -1;
    CUresult rc = get_proc(symbol, funcPtr, (int)cudaVersion, flags, &status);
    if (driverStatus) *driverStatus = status;
    return rc;
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags, int *driverStatus) {
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}
