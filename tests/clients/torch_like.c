/* torch_like: a PyTorch-shaped process. Default caching allocator through libc10_cuda (which
 * cudaMallocs through libcudart), a refused and a proper CUDA-graph capture with a private-pool
 * segment, expandable segments (VMM from libc10_cuda), a cudaMallocAsync pair (pool cached until
 * trimmed), managed memory, pinned host memory, host registration, and NVML readings. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"

typedef struct {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvml_process;

static void nvml_report(void) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "UNEXPECTED: no libnvidia-ml.so.1\n");
        unexpected++;
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*by_index)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    int (*by_bus)(const char *, void **) = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    int (*meminfo)(void *, nvml_memory *) = (int (*)(void *, nvml_memory *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    int (*procs)(void *, unsigned *, nvml_process *) =
        (int (*)(void *, unsigned *, nvml_process *))dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    int (*shutdown)(void) = (int (*)(void))dlsym(h, "nvmlShutdown");
    void *dev = NULL, *dev_by_bus = NULL;
    char bus[32] = {0};
    nvml_memory mem = {0};
    nvml_process info[4] = {{0}};
    unsigned count = 0;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaDeviceGetPCIBusId(bus, sizeof bus, 0);
    expect("nvmlInit_v2", init(), 0);
    expect("nvmlDeviceGetHandleByIndex_v2", by_index(0, &dev), 0);
    expect("nvmlDeviceGetHandleByPciBusId_v2", by_bus(bus, &dev_by_bus), 0);
    expect("nvmlDeviceGetMemoryInfo", meminfo(dev, &mem), 0);
    int sizing = procs(dev, &count, NULL); /* count 0: asks how many */
    printf("nvml: sizing call rc=%d count=%u\n", sizing, count);
    count = 4;
    expect("nvmlDeviceGetComputeRunningProcesses_v3", procs(dev, &count, info), 0);
    printf("nvml: bus=%s same_device=%d total_minus_cuda_total=%llu free_matches=%d processes=%u pid_matches=%d "
           "process_used=%lluMiB\n",
           bus, dev == dev_by_bus, mem.total - (unsigned long long)total_b, mem.free == free_b, count,
           count > 0 && info[0].pid == (unsigned)getpid(), count > 0 ? info[0].usedGpuMemory / MiB : 0);
    shutdown();
}

int main(void) {
    step("init cudaSetDevice(0)", cudaSetDevice(0), 0);

    /* Default caching allocator: segments are cached and reused. */
    void *a = c10_alloc(512 * 1024), *b = c10_alloc(5 * MiB), *c = c10_alloc(100 * MiB);
    step("c10_alloc 512KiB+5MiB+100MiB", a && b && c ? 0 : c10_last_error(), 0);
    c10_free(b);
    void *d = c10_alloc(6 * MiB);
    step("c10_free 5MiB then c10_alloc 6MiB (cached segment reused)", d == b ? 0 : -1, 0);
    printf("segments: %d\n", c10_segment_count());

    /* A capture in GLOBAL mode refuses an unrelaxed cudaMalloc and is invalidated by it. */
    step("capture#1 begin", c10_capture_begin(), 0);
    void *x = NULL;
    step("capture#1 cudaMalloc without RELAXED", cudaMalloc(&x, MiB), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    step("capture#1 end", c10_capture_end(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* PyTorch's way: the private-pool segment is allocated under RELAXED mode. */
    step("capture#2 begin", c10_capture_begin(), 0);
    void *g = c10_capture_alloc(64 * MiB);
    step("capture#2 private-pool segment 64MiB", g ? 0 : c10_last_error(), 0);
    step("capture#2 end", c10_capture_end(), 0);

    /* Expandable segments. */
    step("expandable map 64MiB (4 x 20MiB pages)", c10_expandable_map(64 * MiB), 0);
    step("expandable small map 3MiB (2 x 2MiB pages)", c10_expandable_map_small(3 * MiB), 0);
    step("expandable unmap", c10_expandable_unmap(), 0);

    /* Stream-ordered allocation: the pool keeps its 32 MiB chunk after the free. */
    void *q = NULL;
    cudaMemPool_t pool = NULL;
    unsigned long long reserved = 0, used = 0;
    step("cudaMallocAsync 1MiB", cudaMallocAsync(&q, MiB, NULL), 0);
    step("cudaFreeAsync", cudaFreeAsync(q, NULL), 0);
    cudaDeviceGetDefaultMemPool(&pool, 0);
    cudaMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    cudaMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
    printf("pool: reserved=%lluMiB used=%llu\n", reserved / MiB, used);
    step("cudaMemPoolTrimTo 0", cudaMemPoolTrimTo(pool, 0), 0);

    /* Managed and host memory take no device memory. */
    void *m = NULL, *pinned = NULL;
    step("cudaMallocManaged 256MiB", cudaMallocManaged(&m, 256 * MiB, 1), 0);
    step("cudaFree managed", cudaFree(m), 0);
    step("cudaHostAlloc 16MiB", cudaHostAlloc(&pinned, 16 * MiB, 0), 0);
    memset(pinned, 0, 16 * MiB);
    step("cudaFreeHost", cudaFreeHost(pinned), 0);
    void *host = malloc(MiB);
    step("cudaHostRegister 1MiB", cudaHostRegister(host, MiB, 0), 0);
    step("cudaHostUnregister", cudaHostUnregister(host), 0);
    free(host);

    nvml_report();

    c10_free(a);
    c10_free(c);
    c10_free(d);
    step("graph reset (private pool freed)", c10_graph_reset(), 0);
    step("c10_empty_cache", c10_empty_cache(), 0);
    step("expandable release", c10_expandable_release(), 0);
    printf("segments: %d\n", c10_segment_count());
    return finish("torch_like");
}
