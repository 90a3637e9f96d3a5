/* procaddr_walk: asks the driver for base names the cudart way (dlsym "cuGetProcAddress_v2",
 * then the pointer it returns for "cuGetProcAddress") for CUDA versions 11000/12000/13000 and
 * flags 0/2, and names each pointer by comparing it with dlsym(libcuda, <exported name>).
 * Line format: "<name> v=<version> flags=<flags> rc=<rc> status=<status> -> <export|NULL|<unexported>>" */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda_abi.h"

static const char *bases[] = {
    "cuInit", "cuGetProcAddress", "cuDriverGetVersion", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceTotalMem",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuCtxCreate", "cuCtxDestroy", "cuCtxSetCurrent",
    "cuCtxGetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxGetDevice", "cuCtxSynchronize", "cuMemGetInfo",
    "cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "cuMemFree", "cuMemGetAddressRange", "cuMemAllocAsync",
    "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolTrimTo",
    "cuMemPoolGetAttribute", "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool", "cuMemCreate", "cuMemRelease",
    "cuMemRetainAllocationHandle", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemAddressReserve",
    "cuMemAddressFree", "cuMemGetAllocationGranularity", "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle", "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle",
    "cuMemHostAlloc", "cuMemAllocHost", "cuMemFreeHost", "cuMemHostRegister", "cuMemHostUnregister",
    "cuStreamCreate", "cuStreamDestroy", "cuStreamBeginCapture", "cuStreamBeginCaptureToGraph",
    "cuStreamEndCapture", "cuStreamIsCapturing", "cuThreadExchangeStreamCaptureMode", "cuGraphDestroy",
    "cuDeviceGetGraphMemAttribute", "cuGetErrorName", "cuGetErrorString", "cuMulticastCreate", "cuNoSuchSymbol",
    "cuMemAlloc_v2",
};

/* Every name the real driver exports for these functions, versioned or not. */
static const char *exports[] = {
    "cuInit", "cuGetProcAddress", "cuGetProcAddress_v2", "cuDriverGetVersion", "cuDeviceGet", "cuDeviceGetCount",
    "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxCreate_v2",
    "cuCtxCreate_v3", "cuCtxCreate_v4", "cuCtxDestroy_v2", "cuCtxSetCurrent", "cuCtxGetCurrent",
    "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuCtxGetDevice", "cuCtxSynchronize", "cuMemGetInfo_v2",
    "cuMemAlloc_v2", "cuMemAllocPitch_v2", "cuMemAllocManaged", "cuMemFree_v2", "cuMemGetAddressRange_v2",
    "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz",
    "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolTrimTo",
    "cuMemPoolGetAttribute", "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool", "cuMemCreate", "cuMemRelease",
    "cuMemRetainAllocationHandle", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemAddressReserve",
    "cuMemAddressFree", "cuMemGetAllocationGranularity", "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle", "cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle",
    "cuMemHostAlloc", "cuMemAllocHost_v2", "cuMemFreeHost", "cuMemHostRegister_v2", "cuMemHostUnregister",
    "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamBeginCapture", "cuStreamBeginCapture_ptsz",
    "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCaptureToGraph",
    "cuStreamBeginCaptureToGraph_ptsz", "cuStreamEndCapture", "cuStreamEndCapture_ptsz", "cuStreamIsCapturing",
    "cuStreamIsCapturing_ptsz", "cuThreadExchangeStreamCaptureMode", "cuGraphDestroy",
    "cuDeviceGetGraphMemAttribute", "cuGetErrorName", "cuGetErrorString",
};

#define COUNT(a) (sizeof a / sizeof a[0])

static void *libcuda;

static const char *name_of(void *p) {
    if (!p) return "NULL";
    for (size_t i = 0; i < COUNT(exports); i++)
        if (dlsym(libcuda, exports[i]) == p) return exports[i];
    return "<unexported>";
}

int main(void) {
    libcuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!libcuda) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    PFN_cuGetProcAddress_v2 v2 = (PFN_cuGetProcAddress_v2)dlsym(libcuda, "cuGetProcAddress_v2"), gpa = NULL;
    int status = -1;
    int rc = v2 ? v2("cuGetProcAddress", (void **)&gpa, 13000, 0, &status) : -1;
    printf("bootstrap cuGetProcAddress v=13000 rc=%d status=%d -> %s\n", rc, status, name_of((void *)gpa));
    if (rc || !gpa) return 1;

    static const int versions[] = {11000, 12000, 13000};
    static const unsigned long long flags[] = {0, 2};
    for (size_t b = 0; b < COUNT(bases); b++)
        for (size_t v = 0; v < COUNT(versions); v++)
            for (size_t f = 0; f < COUNT(flags); f++) {
                void *fn = (void *)1;
                status = -1;
                rc = gpa(bases[b], &fn, versions[v], flags[f], &status);
                printf("%s v=%d flags=%llu rc=%d status=%d -> %s\n", bases[b], versions[v], flags[f], rc, status,
                       name_of(fn));
            }

    /* The pre-12.0 "cuGetProcAddress" is an unexported 4-argument function that still works. */
    PFN_cuGetProcAddress_v1 legacy = NULL;
    gpa("cuGetProcAddress", (void **)&legacy, 11000, 0, &status);
    void *fn = NULL;
    rc = legacy ? legacy("cuMemAlloc", &fn, 11000, 0) : -1;
    printf("legacy cuGetProcAddress(cuMemAlloc, 11000) rc=%d -> %s\n", rc, name_of(fn));

    /* Every export has its own address (as in the real driver), so a pointer names one export. */
    int distinct = 1;
    for (size_t i = 0; i < COUNT(exports); i++)
        for (size_t j = i + 1; j < COUNT(exports); j++) {
            void *a = dlsym(libcuda, exports[i]);
            if (!a || a == dlsym(libcuda, exports[j])) {
                fprintf(stderr, "%s and %s: same or no address\n", exports[i], exports[j]);
                distinct = 0;
            }
        }
    printf("exports distinct: %d\n", distinct);
    printf("procaddr_walk: ok\n");
    return 0;
}
