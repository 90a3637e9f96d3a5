/* libc10_cuda.so (fake PyTorch caching allocator). Links the fake libcudart.so.13.
 * - Default allocator: cudaMalloc'd segments (2 MiB for <= 1 MiB, 20 MiB for < 10 MiB, else the
 *   size rounded to 2 MiB), cached on free and reused, returned by c10_empty_cache.
 * - CUDA-graph capture: cudaStreamBeginCapture(GLOBAL); private-pool segments are cudaMalloc'd
 *   under cudaThreadExchangeStreamCaptureMode(RELAXED), as cudaMallocMaybeCapturing does.
 * - Expandable segments: driver entry points from cudaGetDriverEntryPointByVersion; one
 *   cuMemAddressReserve of 1.125 x device memory per segment, then per page cuMemCreate(DEVICE) +
 *   cuMemMap and one cuMemSetAccess; unmap = cuMemUnmap + cuMemRelease per page. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_abi.h"
#include "fake_libs.h"

#define MAX_SEGMENTS 4096

struct segment {
    void *ptr;
    size_t size;
    int in_use;
    int private_pool; /* 1: allocated for a CUDA graph */
};

static struct segment segments[MAX_SEGMENTS];
static int nsegments;
static int last_error;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t round_size(size_t n) {
    if (n <= 1 * MiB) return 2 * MiB;
    if (n < 10 * MiB) return 20 * MiB;
    return (n + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
}

static void *add_segment(void *p, size_t size, int private_pool) {
    if (nsegments == MAX_SEGMENTS) return NULL;
    segments[nsegments++] = (struct segment){p, size, 1, private_pool};
    return p;
}

void *c10_alloc(size_t size) {
    size_t want = round_size(size);
    void *p = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nsegments; i++) {
        if (!segments[i].in_use && !segments[i].private_pool && segments[i].size == want) {
            segments[i].in_use = 1;
            p = segments[i].ptr;
            break;
        }
    }
    if (!p) {
        int rc = cudaMalloc(&p, want);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) { /* like PyTorch: free the cache and retry once */
            pthread_mutex_unlock(&lock);
            c10_empty_cache();
            pthread_mutex_lock(&lock);
            rc = cudaMalloc(&p, want);
        }
        last_error = rc;
        p = rc ? NULL : add_segment(p, want, 0);
    }
    pthread_mutex_unlock(&lock);
    return p;
}

int c10_free(void *ptr) {
    int rc = -1;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nsegments; i++) {
        if (segments[i].ptr == ptr && segments[i].in_use) {
            segments[i].in_use = 0;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* cudaFree the private-pool segments, or the unused default-pool ones (caller holds the lock). */
static int release_segments(int private_pool) {
    int rc = 0, kept = 0;
    for (int i = 0; i < nsegments; i++) {
        struct segment s = segments[i];
        int drop = private_pool ? s.private_pool : (!s.private_pool && !s.in_use);
        if (drop) {
            int r = cudaFree(s.ptr);
            if (r && !rc) rc = r;
        } else {
            segments[kept++] = s;
        }
    }
    nsegments = kept;
    return rc;
}

int c10_empty_cache(void) {
    pthread_mutex_lock(&lock);
    int rc = release_segments(0);
    pthread_mutex_unlock(&lock);
    return rc;
}

int c10_segment_count(void) {
    pthread_mutex_lock(&lock);
    int n = nsegments;
    pthread_mutex_unlock(&lock);
    return n;
}

int c10_last_error(void) { return last_error; }

/* ---- CUDA graph capture with a private pool ---- */

static cudaStream_t capture_stream;
static cudaGraph_t graph;

int c10_capture_begin(void) {
    if (!capture_stream) {
        int rc = cudaStreamCreate(&capture_stream);
        if (rc) return rc;
    }
    return cudaStreamBeginCapture(capture_stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

void *c10_capture_alloc(size_t size) {
    void *p = NULL;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED; /* CUDAStreamCaptureModeGuard{Relaxed} */
    int rc = cudaThreadExchangeStreamCaptureMode(&mode);
    if (!rc) {
        rc = cudaMalloc(&p, round_size(size));
        int restore = mode;
        cudaThreadExchangeStreamCaptureMode(&restore);
    }
    last_error = rc;
    if (rc) return NULL;
    pthread_mutex_lock(&lock);
    p = add_segment(p, round_size(size), 1);
    pthread_mutex_unlock(&lock);
    return p;
}

int c10_capture_end(void) {
    cudaGraph_t g = NULL;
    int rc = cudaStreamEndCapture(capture_stream, &g);
    if (!rc) graph = g;
    return rc;
}

int c10_graph_reset(void) {
    int rc = 0;
    if (graph) rc = cudaGraphDestroy(graph);
    graph = NULL;
    pthread_mutex_lock(&lock);
    int r = release_segments(1);
    pthread_mutex_unlock(&lock);
    return rc ? rc : r;
}

/* ---- Expandable segments ---- */

static struct {
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
} vmm;

struct expandable {
    size_t page;
    CUdeviceptr base;
    size_t max_pages;
    size_t mapped;
    CUmemGenericAllocationHandle *handles;
};

static struct expandable large = {20 * MiB, 0, 0, 0, NULL};
static struct expandable small = {2 * MiB, 0, 0, 0, NULL};

/* DriverAPI::get(): entry points through cudart, by version. */
static int load_driver_api(void) {
    if (vmm.reserve) return 0;
    static const char *names[] = {"cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease",
                                  "cuMemMap", "cuMemUnmap", "cuMemSetAccess"};
    void **slots[] = {(void **)&vmm.reserve, (void **)&vmm.address_free, (void **)&vmm.create,
                      (void **)&vmm.release, (void **)&vmm.map, (void **)&vmm.unmap, (void **)&vmm.set_access};
    for (int i = 0; i < 7; i++) {
        int status = -1;
        int rc = cudaGetDriverEntryPointByVersion(names[i], slots[i], 13000, 0, &status);
        if (rc) return rc;
    }
    return 0;
}

static int ensure_reserved(struct expandable *e) {
    if (e->base) return 0;
    int rc = load_driver_api();
    size_t free_b, total_b;
    if (!rc) rc = cudaMemGetInfo(&free_b, &total_b);
    if (rc) return rc;
    e->max_pages = (total_b + total_b / 8 + e->page - 1) / e->page; /* 1 1/8 of device memory */
    e->handles = calloc(e->max_pages, sizeof *e->handles);
    if (!e->handles) return CUDA_ERROR_OUT_OF_MEMORY;
    return vmm.reserve(&e->base, e->max_pages * e->page, 0, 0, 0);
}

static int map_pages(struct expandable *e, size_t bytes) {
    int dev = 0;
    int rc = ensure_reserved(e);
    if (!rc) rc = cudaGetDevice(&dev);
    if (rc) return rc;
    size_t want = (bytes + e->page - 1) / e->page, first = e->mapped;
    if (want > e->max_pages) return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    for (size_t i = first; i < want; i++) {
        rc = vmm.create(&e->handles[i], e->page, &prop, 0);
        if (rc) return rc;
        rc = vmm.map(e->base + i * e->page, e->page, 0, e->handles[i], 0);
        if (rc) return rc;
        e->mapped = i + 1;
    }
    if (want <= first) return 0;
    CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return vmm.set_access(e->base + first * e->page, (want - first) * e->page, &desc, 1);
}

int c10_expandable_map(size_t bytes) { return map_pages(&large, bytes); }
int c10_expandable_map_small(size_t bytes) { return map_pages(&small, bytes); }

static int unmap_all(struct expandable *e) {
    if (!e->mapped) return 0;
    int rc = cudaDeviceSynchronize();
    while (!rc && e->mapped > 0) {
        size_t i = e->mapped - 1;
        rc = vmm.unmap(e->base + i * e->page, e->page);
        if (!rc) rc = vmm.release(e->handles[i]);
        if (!rc) e->mapped = i;
    }
    return rc;
}

int c10_expandable_unmap(void) {
    int rc = unmap_all(&large);
    return rc ? rc : unmap_all(&small);
}

int c10_expandable_release(void) {
    int rc = c10_expandable_unmap();
    struct expandable *all[] = {&large, &small};
    for (int i = 0; !rc && i < 2; i++) {
        if (!all[i]->base) continue;
        rc = vmm.address_free(all[i]->base, all[i]->max_pages * all[i]->page);
        all[i]->base = 0;
        free(all[i]->handles);
        all[i]->handles = NULL;
    }
    return rc;
}
