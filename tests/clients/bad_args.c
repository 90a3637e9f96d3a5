/* bad_args: the driver's error paths, called directly (dlopen + dlsym of the versioned names):
 * calls before cuInit, NULL out-pointers, calls without a context (also on a fresh thread), bad
 * handles, unknown or too-new cuGetProcAddress lookups, the stream-capture rule, and the
 * FAKECUDA_FAIL_RESULT pass-through of an unknown CUresult. Prints "<what>: rc=<n>" per call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_abi.h"

static int unexpected;
static void *libcuda;

static void *sym(const char *name) {
    void *p = dlsym(libcuda, name);
    if (!p) {
        fprintf(stderr, "missing export %s\n", name);
        exit(2);
    }
    return p;
}

static void check(const char *what, int rc, int want) {
    printf("%s: rc=%d\n", what, rc);
    if (rc != want) {
        fprintf(stderr, "UNEXPECTED: %s returned %d, expected %d\n", what, rc, want);
        unexpected++;
    }
}

#define FN(ret, name, args) ret(*name) args = (ret(*) args)sym(#name)

static CUresult (*p_cuMemAlloc_v2)(CUdeviceptr *, size_t);
static CUresult (*p_cuCtxGetDevice)(CUdevice *);
static CUresult (*p_cuCtxGetCurrent)(CUcontext *);
static CUresult (*p_cuMemGetInfo_v2)(size_t *, size_t *);
static CUresult (*p_cuThreadExchangeStreamCaptureMode)(int *);

static long used_mib(void) {
    size_t f = 0, t = 0;
    return p_cuMemGetInfo_v2(&f, &t) ? -1 : (long)((t - f) / MiB);
}

/* A thread that never set a context. */
static void *no_context_thread(void *arg) {
    (void)arg;
    CUdeviceptr p = 0;
    CUdevice d = -1;
    CUcontext c = (CUcontext)1;
    size_t f, t;
    check("fresh thread cuMemAlloc_v2", p_cuMemAlloc_v2(&p, MiB), CUDA_ERROR_INVALID_CONTEXT);
    check("fresh thread cuCtxGetDevice", p_cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    check("fresh thread cuMemGetInfo_v2", p_cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    check("fresh thread cuCtxGetCurrent", p_cuCtxGetCurrent(&c), 0);
    printf("fresh thread current context is NULL: %d\n", c == NULL);
    return NULL;
}

static CUcontext shared_ctx;
/* Another thread in GLOBAL (default) mode while the main thread captures: refused. */
static void *other_thread_alloc(void *arg) {
    CUresult (*set_current)(CUcontext) = (CUresult(*)(CUcontext))arg;
    CUdeviceptr p = 0;
    set_current(shared_ctx);
    int *rc = malloc(sizeof *rc);
    *rc = p_cuMemAlloc_v2(&p, MiB);
    return rc;
}

int main(void) {
    libcuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!libcuda) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    FN(CUresult, cuInit, (unsigned));
    FN(CUresult, cuDriverGetVersion, (int *));
    FN(CUresult, cuDeviceGet, (CUdevice *, int));
    FN(CUresult, cuDeviceGetCount, (int *));
    FN(CUresult, cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice));
    FN(CUresult, cuCtxSetCurrent, (CUcontext));
    FN(CUresult, cuMemFree_v2, (CUdeviceptr));
    FN(CUresult, cuMemAllocPitch_v2, (CUdeviceptr *, size_t *, size_t, size_t, unsigned));
    FN(CUresult, cuMemCreate, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long));
    FN(CUresult, cuMemRelease, (CUmemGenericAllocationHandle));
    FN(CUresult, cuGetErrorName, (CUresult, const char **));
    FN(CUresult, cuIpcGetMemHandle, (CUipcMemHandle *, CUdeviceptr));
    FN(CUresult, cuIpcOpenMemHandle_v2, (CUdeviceptr *, CUipcMemHandle, unsigned));
    FN(CUresult, cuStreamCreate, (CUstream *, unsigned));
    FN(CUresult, cuStreamBeginCapture_v2, (CUstream, int));
    FN(CUresult, cuStreamEndCapture, (CUstream, CUgraph *));
    FN(CUresult, cuStreamIsCapturing, (CUstream, int *));
    FN(CUresult, cuGraphDestroy, (CUgraph));
    PFN_cuGetProcAddress_v2 gpa = (PFN_cuGetProcAddress_v2)sym("cuGetProcAddress_v2");
    p_cuMemAlloc_v2 = (CUresult(*)(CUdeviceptr *, size_t))sym("cuMemAlloc_v2");
    p_cuCtxGetDevice = (CUresult(*)(CUdevice *))sym("cuCtxGetDevice");
    p_cuCtxGetCurrent = (CUresult(*)(CUcontext *))sym("cuCtxGetCurrent");
    p_cuMemGetInfo_v2 = (CUresult(*)(size_t *, size_t *))sym("cuMemGetInfo_v2");
    p_cuThreadExchangeStreamCaptureMode = (CUresult(*)(int *))sym("cuThreadExchangeStreamCaptureMode");

    CUdeviceptr p = 0;
    int n = 0, version = 0;
    check("cuMemAlloc_v2 before cuInit", p_cuMemAlloc_v2(&p, MiB), CUDA_ERROR_NOT_INITIALIZED);
    check("cuDeviceGetCount before cuInit", cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    check("cuDriverGetVersion before cuInit", cuDriverGetVersion(&version), 0);
    printf("driver version: %d\n", version);
    check("cuDriverGetVersion(NULL)", cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
    check("cuInit(1)", cuInit(1), CUDA_ERROR_INVALID_VALUE);
    check("cuInit(0)", cuInit(0), 0);
    CUdevice dev = -1;
    check("cuDeviceGet(NULL, 0)", cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    check("cuDeviceGet(&d, 99)", cuDeviceGet(&dev, 99), CUDA_ERROR_INVALID_DEVICE);
    check("cuMemAlloc_v2 without a context", p_cuMemAlloc_v2(&p, MiB), CUDA_ERROR_INVALID_CONTEXT);
    check("cuCtxGetDevice without a context", p_cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    check("cuDevicePrimaryCtxRetain(NULL, 0)", cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&shared_ctx, 0), 0);
    check("cuCtxSetCurrent", cuCtxSetCurrent(shared_ctx), 0);

    size_t total = 0, pitch = 0;
    CUdeviceptr q = 0;
    check("cuMemAlloc_v2(NULL, 1MiB)", p_cuMemAlloc_v2(NULL, MiB), CUDA_ERROR_INVALID_VALUE);
    check("cuMemAlloc_v2(&p, 0)", p_cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
    check("cuMemGetInfo_v2(NULL, &total)", p_cuMemGetInfo_v2(NULL, &total), CUDA_ERROR_INVALID_VALUE);
    check("cuCtxGetDevice(NULL)", p_cuCtxGetDevice(NULL), CUDA_ERROR_INVALID_VALUE);
    check("cuMemFree_v2(unknown address)", cuMemFree_v2(0x1234000), CUDA_ERROR_INVALID_VALUE);
    check("cuMemRelease(unknown handle)", cuMemRelease(12345), CUDA_ERROR_INVALID_HANDLE);
    check("cuMemAllocPitch_v2 element size 3", cuMemAllocPitch_v2(&q, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp prop = {0};
    CUmemGenericAllocationHandle h = 0;
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    check("cuMemCreate 3MiB (not a granularity multiple)", cuMemCreate(&h, 3 * MiB, &prop, 0),
          CUDA_ERROR_INVALID_VALUE);
    check("cuMemCreate(NULL prop)", cuMemCreate(&h, 2 * MiB, NULL, 0), CUDA_ERROR_INVALID_VALUE);

    pthread_t t;
    pthread_create(&t, NULL, no_context_thread, NULL);
    pthread_join(t, NULL);

    void *fn = (void *)1;
    int status = -1;
    check("cuGetProcAddress_v2(cuNoSuchFunction)", gpa("cuNoSuchFunction", &fn, 13000, 0, &status),
          CUDA_ERROR_NOT_FOUND);
    printf("  status=%d pfn_null=%d\n", status, fn == NULL);
    fn = (void *)1;
    check("cuGetProcAddress_v2(cuMemAllocAsync, 11000)", gpa("cuMemAllocAsync", &fn, 11000, 0, &status),
          CUDA_ERROR_NOT_FOUND);
    printf("  status=%d pfn_null=%d\n", status, fn == NULL);
    check("cuGetProcAddress_v2(cuMemAlloc, pfn NULL)", gpa("cuMemAlloc", NULL, 13000, 0, &status),
          CUDA_ERROR_INVALID_VALUE);
    const char *name = (const char *)1;
    check("cuGetErrorName(12345)", cuGetErrorName(12345, &name), CUDA_ERROR_INVALID_VALUE);
    printf("  name_null=%d\n", name == NULL);
    check("cuGetErrorName(900)", cuGetErrorName(900, &name), 0);
    printf("  name=%s\n", name);

    /* Legacy IPC: a process cannot open its own handle. */
    CUipcMemHandle ipc;
    CUdeviceptr opened = 0;
    check("cuMemAllocPitch_v2 1000x10", cuMemAllocPitch_v2(&q, &pitch, 1000, 10, 4), 0);
    printf("  pitch=%zu\n", pitch);
    check("cuIpcGetMemHandle", cuIpcGetMemHandle(&ipc, q), 0);
    check("cuIpcOpenMemHandle_v2 own handle", cuIpcOpenMemHandle_v2(&opened, ipc, 1), CUDA_ERROR_INVALID_CONTEXT);
    check("cuMemFree_v2 pitched", cuMemFree_v2(q), 0);

    /* The capture rule. */
    CUstream s = NULL;
    CUgraph g = NULL;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED, capturing = -1;
    check("cuStreamCreate", cuStreamCreate(&s, 0), 0);
    check("cuStreamBeginCapture_v2 legacy stream", cuStreamBeginCapture_v2(NULL, 0),
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    check("cuStreamBeginCapture_v2 GLOBAL", cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
    int *other_rc = NULL;
    pthread_create(&t, NULL, other_thread_alloc, (void *)cuCtxSetCurrent);
    pthread_join(t, (void **)&other_rc);
    check("other GLOBAL-mode thread cuMemAlloc_v2 during GLOBAL capture", *other_rc,
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    free(other_rc);
    check("cuStreamIsCapturing", cuStreamIsCapturing(s, &capturing), 0);
    printf("  status=%d\n", capturing);
    check("cuStreamEndCapture (invalidated)", cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    check("cuStreamBeginCapture_v2 GLOBAL again", cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
    check("capturing thread cuMemAlloc_v2 in GLOBAL mode", p_cuMemAlloc_v2(&p, MiB),
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    check("cuStreamEndCapture (invalidated)", cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    check("cuStreamBeginCapture_v2 GLOBAL third", cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
    check("cuThreadExchangeStreamCaptureMode RELAXED", p_cuThreadExchangeStreamCaptureMode(&mode), 0);
    printf("  previous mode=%d\n", mode);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    check("RELAXED cuMemCreate 2MiB during capture", cuMemCreate(&h, 2 * MiB, &prop, 0), 0);
    check("RELAXED cuMemRelease", cuMemRelease(h), 0);
    check("cuThreadExchangeStreamCaptureMode restore", p_cuThreadExchangeStreamCaptureMode(&mode), 0);
    check("cuStreamEndCapture", cuStreamEndCapture(s, &g), 0);
    check("cuGraphDestroy", cuGraphDestroy(g), 0);
    check("cuStreamBeginCapture_v2 THREAD_LOCAL", cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), 0);
    pthread_create(&t, NULL, other_thread_alloc, (void *)cuCtxSetCurrent);
    pthread_join(t, (void **)&other_rc);
    check("other thread cuMemAlloc_v2 during THREAD_LOCAL capture", *other_rc,
          getenv("FAKECUDA_FAIL_RESULT") ? atoi(getenv("FAKECUDA_FAIL_RESULT")) : 0);
    free(other_rc);
    check("cuStreamEndCapture THREAD_LOCAL", cuStreamEndCapture(s, &g), 0);

    /* Contexts: a created context takes memory on its device, becomes current, and its
     * destruction gives both back. */
    CUcontext created = NULL, popped = NULL;
    FN(CUresult, cuCtxCreate_v4, (CUcontext *, void *, unsigned, CUdevice));
    FN(CUresult, cuCtxDestroy_v2, (CUcontext));
    FN(CUresult, cuCtxPopCurrent_v2, (CUcontext *));
    FN(CUresult, cuCtxPushCurrent_v2, (CUcontext));
    check("cuCtxCreate_v4 on device 1", cuCtxCreate_v4(&created, NULL, 0, 1), 0);
    check("cuCtxGetDevice", p_cuCtxGetDevice(&dev), 0);
    printf("  device=%d used=%ldMiB\n", dev, used_mib());
    check("cuCtxPopCurrent_v2", cuCtxPopCurrent_v2(&popped), 0);
    printf("  popped the created context: %d\n", popped == created);
    check("cuCtxPushCurrent_v2", cuCtxPushCurrent_v2(created), 0);
    check("cuCtxDestroy_v2", cuCtxDestroy_v2(created), 0);
    check("cuCtxGetDevice after destroy", p_cuCtxGetDevice(&dev), 0);
    printf("  device=%d\n", dev);
    check("cuCtxDestroy_v2 again", cuCtxDestroy_v2(created), CUDA_ERROR_INVALID_CONTEXT);
    check("cuCtxDestroy_v2 of a primary context", cuCtxDestroy_v2(shared_ctx), CUDA_ERROR_INVALID_CONTEXT);

    /* VMM refcounts: memory stays while a handle reference or a mapping remains. */
    FN(CUresult, cuMemAddressReserve, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long));
    FN(CUresult, cuMemAddressFree, (CUdeviceptr, size_t));
    FN(CUresult, cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long));
    FN(CUresult, cuMemUnmap, (CUdeviceptr, size_t));
    FN(CUresult, cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *, void *));
    FN(CUresult, cuMemExportToShareableHandle, (void *, CUmemGenericAllocationHandle, unsigned, unsigned long long));
    FN(CUresult, cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle *, void *, unsigned));
    long base = used_mib();
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h2 = 0, h3 = 0;
    check("vmm cuMemCreate 4MiB", cuMemCreate(&h, 4 * MiB, &prop, 0), 0);
    check("vmm cuMemAddressReserve 8MiB", cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), 0);
    check("vmm cuMemMap", cuMemMap(va, 4 * MiB, 0, h, 0), 0);
    check("vmm cuMemRelease while mapped", cuMemRelease(h), 0);
    printf("  delta=%ldMiB\n", used_mib() - base);
    check("vmm cuMemRetainAllocationHandle", cuMemRetainAllocationHandle(&h2, (void *)(va + MiB)), 0);
    printf("  same handle: %d\n", h2 == h);
    check("vmm cuMemUnmap", cuMemUnmap(va, 4 * MiB), 0);
    printf("  delta=%ldMiB\n", used_mib() - base);
    check("vmm cuMemRelease last reference", cuMemRelease(h2), 0);
    printf("  delta=%ldMiB\n", used_mib() - base);
    check("vmm cuMemRelease again", cuMemRelease(h2), CUDA_ERROR_INVALID_HANDLE);
    check("vmm cuMemAddressFree", cuMemAddressFree(va, 8 * MiB), 0);
    int fd = -1;
    check("vmm cuMemCreate 2MiB (POSIX_FD)", cuMemCreate(&h, 2 * MiB, &prop, 0), 0);
    check("vmm cuMemExportToShareableHandle", cuMemExportToShareableHandle(&fd, h, 1, 0), 0);
    check("vmm cuMemImportFromShareableHandle", cuMemImportFromShareableHandle(&h3, (void *)(long)fd, 1), 0);
    printf("  new handle: %d delta=%ldMiB\n", h3 != h, used_mib() - base);
    check("vmm cuMemRelease exported", cuMemRelease(h), 0);
    printf("  delta=%ldMiB\n", used_mib() - base);
    check("vmm cuMemRelease imported", cuMemRelease(h3), 0);
    printf("  delta=%ldMiB\n", used_mib() - base);
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    check("vmm cuMemCreate HOST_NUMA 4MiB", cuMemCreate(&h, 4 * MiB, &prop, 0), 0);
    printf("  delta=%ldMiB\n", used_mib() - base);
    check("vmm cuMemRelease HOST_NUMA", cuMemRelease(h), 0);

    /* FAKECUDA_FAIL_RESULT: an unknown CUresult passes through unchanged. */
    const char *fail = getenv("FAKECUDA_FAIL_RESULT");
    int want = fail ? atoi(fail) : 0;
    int rc = p_cuMemAlloc_v2(&p, MiB);
    check("fail_result cuMemAlloc_v2", rc, want);
    if (rc == 0) cuMemFree_v2(p);
    name = NULL;
    printf("fail_result name lookup: rc=%d\n", cuGetErrorName(rc, &name));

    printf("bad_args: %s\n", unexpected ? "FAILED" : "ok");
    return unexpected ? 1 : 0;
}
