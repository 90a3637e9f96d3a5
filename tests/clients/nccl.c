/* libnccl.so.2 (fake NCCL). Real NCCL links cudart statically, so this library does not depend
 * on libcudart: it finds the driver with dlsym(dlopen("libcuda.so.1"), "cuGetProcAddress_v2"),
 * asks that for "cuGetProcAddress" and fetches every entry point through the result.
 * - internal buffers: cuMemCreate(DEVICE, gpuDirectRDMACapable) + cuMemAddressReserve + cuMemMap +
 *   cuMemSetAccess (MINIMUM granularity), plus one HOST_NUMA cuMemCreate buffer;
 * - legacy buffers (NCCL_CUMEM_ENABLE=0): cuMemAlloc;
 * - ncclMemAlloc: the same VMM recipe with RECOMMENDED granularity and access for every device;
 * - frees use NCCL's exact sequence: cuMemRetainAllocationHandle, cuMemRelease,
 *   cuMemGetAddressRange, cuMemUnmap, cuMemRelease, cuMemAddressFree. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_abi.h"
#include "fake_libs.h"

#define ncclSuccess 0
#define ncclUnhandledCudaError 1
#define ncclInvalidArgument 4

static struct {
    CUresult (*init)(unsigned int);
    CUresult (*device_get_count)(int *);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*retain_handle)(CUmemGenericAllocationHandle *, void *);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*get_address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, int);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
} cu;

static int device = -1;

static int load_driver(void) {
    if (cu.init) return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return CUDA_ERROR_NOT_INITIALIZED;
    PFN_cuGetProcAddress_v2 v2 = (PFN_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2"), gpa = NULL;
    int status = -1;
    if (!v2 || v2("cuGetProcAddress", (void **)&gpa, 13000, 0, &status) || !gpa) return CUDA_ERROR_NOT_FOUND;
    const char *names[] = {"cuInit", "cuDeviceGetCount", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease",
                           "cuCtxSetCurrent", "cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess",
                           "cuMemRetainAllocationHandle", "cuMemRelease", "cuMemUnmap", "cuMemAddressFree",
                           "cuMemGetAddressRange", "cuMemGetAllocationGranularity", "cuMemAlloc", "cuMemFree"};
    void **slots[] = {(void **)&cu.init,          (void **)&cu.device_get_count, (void **)&cu.primary_retain,
                      (void **)&cu.primary_release, (void **)&cu.ctx_set_current, (void **)&cu.create,
                      (void **)&cu.reserve,       (void **)&cu.map,              (void **)&cu.set_access,
                      (void **)&cu.retain_handle, (void **)&cu.release,          (void **)&cu.unmap,
                      (void **)&cu.address_free,  (void **)&cu.get_address_range, (void **)&cu.granularity,
                      (void **)&cu.mem_alloc,     (void **)&cu.mem_free};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int rc = gpa(names[i], slots[i], 13000, 0, &status);
        if (rc) {
            cu.init = NULL;
            return rc;
        }
    }
    return 0;
}

struct comm {
    int device;
    CUcontext ctx;
};

/* What ncclCommInitRank's cudart does for this thread: init, primary context, current. */
int nccl_fake_comm_init(ncclComm_t *comm, int dev) {
    if (!comm) return ncclInvalidArgument;
    struct comm *c = calloc(1, sizeof *c);
    int rc = load_driver();
    if (!rc) rc = cu.init(0);
    if (!rc) rc = cu.primary_retain(&c->ctx, dev);
    if (!rc) rc = cu.ctx_set_current(c->ctx);
    if (rc) {
        fprintf(stderr, "fake nccl: init -> %d\n", rc);
        free(c);
        return ncclUnhandledCudaError;
    }
    c->device = device = dev;
    *comm = c;
    return ncclSuccess;
}

int nccl_fake_comm_destroy(ncclComm_t comm) {
    struct comm *c = comm;
    if (!c) return ncclInvalidArgument;
    int rc = cu.primary_release(c->device);
    free(c);
    return rc ? ncclUnhandledCudaError : ncclSuccess;
}

/* ncclCuMemAlloc / ncclCuMemHostAlloc / ncclMemAlloc: create, reserve, map, set access. */
static CUresult cumem_alloc(CUdeviceptr *ptr, size_t size, unsigned int loc_type, int option, int all_peers) {
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = loc_type;
    prop.location.id = loc_type == CU_MEM_LOCATION_TYPE_DEVICE ? device : 0; /* NUMA node 0 */
    prop.allocFlags.gpuDirectRDMACapable = loc_type == CU_MEM_LOCATION_TYPE_DEVICE;
    size_t gran = 0;
    CUmemGenericAllocationHandle h = 0;
    CUresult rc = cu.granularity(&gran, &prop, option);
    if (rc) return rc;
    size = (size + gran - 1) / gran * gran;
    if ((rc = cu.create(&h, size, &prop, 0))) return rc;
    if ((rc = cu.reserve(ptr, size, gran, 0, 0))) return rc;
    if ((rc = cu.map(*ptr, size, 0, h, 0))) return rc;
    int ndev = 1;
    if (all_peers && (rc = cu.device_get_count(&ndev))) return rc;
    CUmemAccessDesc desc[16];
    for (int i = 0; i < ndev && i < 16; i++) {
        desc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc[i].location.id = all_peers ? i : device;
        desc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return cu.set_access(*ptr, size, desc, ndev < 16 ? ndev : 16);
}

/* ncclCuMemFree: NCCL's exact sequence. */
static CUresult cumem_free(CUdeviceptr ptr) {
    CUmemGenericAllocationHandle h = 0;
    size_t size = 0;
    CUresult rc;
    if ((rc = cu.retain_handle(&h, (void *)ptr))) return rc;
    if ((rc = cu.release(h))) return rc;
    if ((rc = cu.get_address_range(NULL, &size, ptr))) return rc;
    if ((rc = cu.unmap(ptr, size))) return rc;
    if ((rc = cu.release(h))) return rc;
    return cu.address_free(ptr, size);
}

#define MAX_BUFFERS 256
static CUdeviceptr cumem_buffers[MAX_BUFFERS];
static int ncumem;
static CUdeviceptr legacy_buffers[MAX_BUFFERS];
static int nlegacy;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int nccl_fake_internal_buffers(int n, size_t size) {
    if (device < 0 || n < 0 || ncumem + n + 1 > MAX_BUFFERS) return ncclInvalidArgument;
    pthread_mutex_lock(&lock);
    CUresult rc = 0;
    for (int i = 0; !rc && i <= n; i++) {
        /* n device buffers, then one host-NUMA buffer (NCCL_CUMEM_HOST_ENABLE): not VRAM. */
        unsigned int loc = i < n ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST_NUMA;
        rc = cumem_alloc(&cumem_buffers[ncumem], size, loc, CU_MEM_ALLOC_GRANULARITY_MINIMUM, 0);
        if (!rc) ncumem++;
    }
    pthread_mutex_unlock(&lock);
    if (rc) fprintf(stderr, "fake nccl: internal buffer -> %d\n", rc);
    return rc ? ncclUnhandledCudaError : ncclSuccess;
}

int nccl_fake_legacy_buffer(size_t size) {
    if (device < 0 || nlegacy == MAX_BUFFERS) return ncclInvalidArgument;
    pthread_mutex_lock(&lock);
    CUresult rc = cu.mem_alloc(&legacy_buffers[nlegacy], size);
    if (!rc) nlegacy++;
    pthread_mutex_unlock(&lock);
    return rc ? ncclUnhandledCudaError : ncclSuccess;
}

int nccl_fake_free_all(void) {
    CUresult rc = 0;
    pthread_mutex_lock(&lock);
    while (!rc && ncumem > 0)
        if (!(rc = cumem_free(cumem_buffers[ncumem - 1]))) ncumem--;
    while (!rc && nlegacy > 0)
        if (!(rc = cu.mem_free(legacy_buffers[nlegacy - 1]))) nlegacy--;
    pthread_mutex_unlock(&lock);
    if (rc) fprintf(stderr, "fake nccl: free -> %d\n", rc);
    return rc ? ncclUnhandledCudaError : ncclSuccess;
}

int ncclMemAlloc(void **ptr, size_t size) {
    if (!ptr || size == 0 || device < 0) return ncclInvalidArgument;
    CUdeviceptr p = 0;
    CUresult rc = cumem_alloc(&p, size, CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, 1);
    if (rc) {
        fprintf(stderr, "fake nccl: ncclMemAlloc -> %d\n", rc);
        return ncclUnhandledCudaError;
    }
    *ptr = (void *)p;
    return ncclSuccess;
}

int ncclMemFree(void *ptr) {
    if (!ptr) return ncclSuccess;
    return cumem_free((CUdeviceptr)ptr) ? ncclUnhandledCudaError : ncclSuccess;
}

/* Registration is an edge, not an allocation: a record on the host, no device memory. */
struct registration {
    void *buff;
    size_t size;
};

int ncclCommRegister(ncclComm_t comm, void *buff, size_t size, void **handle) {
    CUdeviceptr base = 0;
    size_t len = 0;
    if (!comm || !buff || !handle) return ncclInvalidArgument;
    if (cu.get_address_range(&base, &len, (CUdeviceptr)buff)) return ncclInvalidArgument;
    struct registration *r = malloc(sizeof *r);
    r->buff = buff;
    r->size = size;
    *handle = r;
    return ncclSuccess;
}

int ncclCommDeregister(ncclComm_t comm, void *handle) {
    if (!comm || !handle) return ncclInvalidArgument;
    free(handle);
    return ncclSuccess;
}

/* Symmetric-memory window: a big VA reservation holding a second mapping of the user's buffer
 * (its retained handle, no new memory) and a 2 MiB signal buffer NCCL creates itself. */
struct window {
    CUdeviceptr va;
    size_t va_size, user_size;
    CUmemGenericAllocationHandle user, signal;
};

int ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
    (void)winFlags;
    if (!comm || !buff || !win) return ncclInvalidArgument;
    struct window *w = calloc(1, sizeof *w);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t gran = 0;
    CUresult rc = cu.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    w->user_size = (size + gran - 1) / gran * gran;
    w->va_size = 4 * w->user_size + gran;
    if (!rc) rc = cu.retain_handle(&w->user, buff);
    if (!rc) rc = cu.reserve(&w->va, w->va_size, gran, 0, 0);
    if (!rc) rc = cu.map(w->va, w->user_size, 0, w->user, 0);
    if (!rc) rc = cu.create(&w->signal, gran, &prop, 0);
    if (!rc) rc = cu.map(w->va + 4 * w->user_size, gran, 0, w->signal, 0);
    CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, device}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (!rc) rc = cu.set_access(w->va, w->user_size, &desc, 1);
    if (!rc) rc = cu.set_access(w->va + 4 * w->user_size, gran, &desc, 1);
    if (rc) {
        fprintf(stderr, "fake nccl: window register -> %d\n", rc);
        free(w);
        return ncclUnhandledCudaError;
    }
    *win = w;
    return ncclSuccess;
}

int ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
    struct window *w = win;
    if (!comm || !w) return ncclInvalidArgument;
    size_t gran = w->va_size - 4 * w->user_size;
    CUresult rc = cu.unmap(w->va, w->user_size);
    if (!rc) rc = cu.release(w->user);
    if (!rc) rc = cu.unmap(w->va + 4 * w->user_size, gran);
    if (!rc) rc = cu.release(w->signal);
    if (!rc) rc = cu.address_free(w->va, w->va_size);
    free(w);
    return rc ? ncclUnhandledCudaError : ncclSuccess;
}
