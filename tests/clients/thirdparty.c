/* libthirdparty.so: some other library that links libcuda directly (-lcuda): cuMemAlloc_v2
 * through a plain exported-symbol link, and cuMemCreate through cuGetProcAddress_v2. */
#include <stdio.h>

#include "cuda_abi.h"
#include "fake_libs.h"

CUresult cuInit(unsigned int flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, int *status);

static CUdeviceptr linear[64];
static int nlinear;
static struct {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle h;
} vmm_bufs[64];
static int nvmm;

static struct {
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*address_free)(CUdeviceptr, size_t);
} vmm;

int thirdparty_init(void) {
    CUcontext ctx = NULL;
    CUresult rc = cuInit(0);
    if (!rc) rc = cuDevicePrimaryCtxRetain(&ctx, 0);
    if (!rc) rc = cuCtxSetCurrent(ctx);
    const char *names[] = {"cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess",
                           "cuMemUnmap", "cuMemRelease", "cuMemAddressFree"};
    void **slots[] = {(void **)&vmm.create, (void **)&vmm.reserve, (void **)&vmm.map, (void **)&vmm.set_access,
                      (void **)&vmm.unmap, (void **)&vmm.release, (void **)&vmm.address_free};
    for (int i = 0; !rc && i < 7; i++) {
        int status = -1;
        rc = cuGetProcAddress_v2(names[i], slots[i], 12000, 0, &status);
    }
    return rc;
}

int thirdparty_alloc(size_t size) {
    if (nlinear == 64) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cuMemAlloc_v2(&linear[nlinear], size);
    if (!rc) nlinear++;
    return rc;
}

int thirdparty_vmm(size_t size) {
    if (nvmm == 64 || !vmm.create) return CUDA_ERROR_INVALID_VALUE;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size = (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUresult rc = vmm.create(&vmm_bufs[nvmm].h, size, &prop, 0);
    if (!rc) rc = vmm.reserve(&vmm_bufs[nvmm].va, size, 0, 0, 0);
    if (!rc) rc = vmm.map(vmm_bufs[nvmm].va, size, 0, vmm_bufs[nvmm].h, 0);
    if (!rc) rc = vmm.set_access(vmm_bufs[nvmm].va, size, &desc, 1);
    if (!rc) vmm_bufs[nvmm++].size = size;
    return rc;
}

int thirdparty_free_all(void) {
    CUresult rc = 0;
    while (!rc && nlinear > 0)
        if (!(rc = cuMemFree_v2(linear[nlinear - 1]))) nlinear--;
    while (!rc && nvmm > 0) {
        int i = nvmm - 1;
        rc = vmm.unmap(vmm_bufs[i].va, vmm_bufs[i].size);
        if (!rc) rc = vmm.release(vmm_bufs[i].h);
        if (!rc) rc = vmm.address_free(vmm_bufs[i].va, vmm_bufs[i].size);
        if (!rc) nvmm--;
    }
    return rc;
}
