/* vllm_tp_like RANK WORLD DIR [UTIL]: one tensor-parallel worker of vLLM 0.26 (V2 model runner),
 * shaped for the fake driver. It prints the worker's lines with write(2) as vLLM does (prefix
 * "(Worker pid=N) " until the groups exist, then "(Worker_TPr pid=N) "), creates an NCCL
 * communicator (VMM buffers from libnccl.so.2), exchanges custom all-reduce buffers with its peer
 * through CUDA IPC (handles passed as files in DIR), takes the init snapshot, loads "weights" and
 * profiles through the caching allocator (libc10_cuda.so), grows non-torch memory (a cuBLAS
 * workspace), computes vLLM's budget from its own cuMemGetInfo readings, agrees the block count
 * with its peer (the minimum, as the EngineCore does), allocates the KV cache per layer, captures
 * a graph, and prints the after-capture summary with vLLM's --kv-cache-memory integers. Rank 0
 * also prints the EngineCore's "GPU KV cache size" and the settings lines. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define LAYERS 8
#define PAGE 32768LL /* 2 × block 16 × 4 kv heads per rank × head 128 × 2 bytes */
#define BLOCK 16
#define MAX_LEN 4096

typedef struct {
    char reserved[64];
} ipc_handle;

static int rank;
static char prefix[64];
static long long reserved_bytes; /* this client's live c10 segments (2 MiB multiples) */

static void say(const char *file, const char *fmt, ...) {
    char msg[1024], line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof line, "%sINFO 12-01 09:43:26 [%s] %s\n", prefix, file, msg);
    if (write(1, line, (size_t)n) != n) unexpected++;
}

static long long ceil_ll(double x) {
    long long i = (long long)x;
    return i + (x > (double)i);
}

/* vLLM's format_gib: str(round(b / 2^30, 2)) (no libm: half away from zero is close enough). */
static const char *gib(long long b, char *buf) {
    double x = (double)b / GiB * 100.0;
    double r = (double)(long long)(x + (x < 0 ? -0.5 : 0.5)) / 100.0;
    snprintf(buf, 32, "%.2f", r);
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '0' && buf[n - 2] != '.') buf[--n] = 0;
    return buf;
}

static void *c10(size_t size) {
    void *p = c10_alloc(size);
    if (!p) {
        fprintf(stderr, "UNEXPECTED: c10_alloc(%zu) failed\n", size);
        unexpected++;
        exit(finish("vllm_tp_like"));
    }
    reserved_bytes += (long long)((size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB));
    return p;
}

static void mem(size_t *free_b, size_t *total_b) {
    if (cudaMemGetInfo(free_b, total_b)) {
        fprintf(stderr, "UNEXPECTED: cudaMemGetInfo failed\n");
        unexpected++;
    }
}

/* Writes `len` bytes to DIR/NAME atomically; reads the peer's file (waits up to 20 s). */
static void put(const char *dir, const char *name, const void *data, size_t len) {
    char tmp[512], path[512];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) || rename(tmp, path)) unexpected++;
}

static int get(const char *dir, const char *name, void *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(data, 1, len, f);
            fclose(f);
            if (got == len) return 0;
        }
        usleep(10000);
    }
    fprintf(stderr, "UNEXPECTED: no %s from the peer\n", path);
    unexpected++;
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    rank = atoi(argv[1]);
    int world = atoi(argv[2]);
    const char *dir = argv[3];
    double util = argc > 4 ? atof(argv[4]) : 0.5;
    int pid = (int)getpid(), peer = (rank + 1) % world;
    char a[32], b[32], c[32], d[32], e[32], f[32];

    snprintf(prefix, sizeof prefix, "(Worker pid=%d) ", pid);
    step("cudaSetDevice", cudaSetDevice(rank), 0);
    if (rank == 0) {
        say("core.py:116",
            "Initializing a V1 LLM engine (v0.26.0) with config: model='/tmp/tp-model', dtype=torch.bfloat16, "
            "max_seq_len=%d, tensor_parallel_size=%d, kv_cache_dtype=auto, seed=0",
            MAX_LEN, world);
        say("api_utils.py:273", "non-default args: {'max_model_len': %d, 'gpu_memory_utilization': %g, "
            "'tensor_parallel_size': %d, 'model': '/tmp/tp-model'}", MAX_LEN, util, world);
    }
    say("parallel_state.py:1615",
        "world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://127.0.0.1:29500 backend=nccl", world,
        rank, rank);
    /* NCCL communicator (VMM buffers) and the custom all-reduce buffers over IPC. */
    void *comm = NULL;
    step("nccl comm init", nccl_fake_comm_init(&comm, rank), 0);
    step("nccl buffers 4 x 8MiB", nccl_fake_internal_buffers(4, 8 * MiB), 0);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    int (*get_handle)(ipc_handle *, CUdeviceptr) = cuda ? (int (*)(ipc_handle *, CUdeviceptr))dlsym(cuda, "cuIpcGetMemHandle") : NULL;
    int (*open_handle)(CUdeviceptr *, ipc_handle, unsigned) =
        cuda ? (int (*)(CUdeviceptr *, ipc_handle, unsigned))dlsym(cuda, "cuIpcOpenMemHandle_v2") : NULL;
    if (!get_handle || !open_handle) {
        fprintf(stderr, "UNEXPECTED: no IPC entry points\n");
        return 1;
    }
    void *ar = c10(16 * MiB);
    ipc_handle mine, theirs;
    char name[32];
    step("cuIpcGetMemHandle", get_handle(&mine, (CUdeviceptr)ar), 0);
    snprintf(name, sizeof name, "ipc-%d", rank);
    put(dir, name, &mine, sizeof mine);
    snprintf(name, sizeof name, "ipc-%d", peer);
    CUdeviceptr peer_ptr = 0;
    if (get(dir, name, &theirs, sizeof theirs) == 0)
        step("cuIpcOpenMemHandle peer buffer", open_handle(&peer_ptr, theirs, 1), 0);
    snprintf(prefix, sizeof prefix, "(Worker_TP%d pid=%d) ", rank, pid);

    /* init_snapshot, then the weights (torch's allocated bytes = its segments here). */
    size_t free0, total;
    mem(&free0, &total);
    long long reserved0 = reserved_bytes;
    say("model_runner.py:284", "Loading model from scratch...");
    long long weights = 0;
    for (int i = 0; i < LAYERS; i++) {
        c10(96 * MiB);
        weights += 96 * MiB;
    }
    say("model_runner.py:305", "Model loading took %s GiB and 0.250000 seconds", gib(weights, a));
    /* Profile run: a 512 MiB activation peak, a cuBLAS workspace (non-torch). */
    size_t free_before, free_after;
    mem(&free_before, &total);
    long long activation = 512 * MiB;
    void *act = c10((size_t)activation);
    step("cublas workspace 32MiB", cublas_fake_init_workspace(32 * MiB), 0);
    c10_free(act);
    c10_empty_cache();
    reserved_bytes -= activation;
    mem(&free_after, &total);
    say("monitor.py:81", "Initial profiling/warmup run took 0.12 s");
    long long non_torch = ((long long)free0 - (long long)free_after) - (reserved_bytes - reserved0);
    long long requested = ceil_ll((double)total * util);
    long long non_kv = weights + activation + non_torch;
    long long available = requested - non_kv;
    say("gpu_worker.py:560", "Available KV cache memory: %s GiB", gib(available, a));
    /* The EngineCore takes the minimum block count over the workers. */
    long long blocks = available / PAGE / LAYERS, other = blocks;
    snprintf(name, sizeof name, "blocks-%d", rank);
    put(dir, name, &blocks, sizeof blocks);
    snprintf(name, sizeof name, "blocks-%d", peer);
    get(dir, name, &other, sizeof other);
    long long num_blocks = blocks < other ? blocks : other;
    if (rank == 0) {
        char saved[64];
        strcpy(saved, prefix);
        snprintf(prefix, sizeof prefix, "(EngineCore pid=%d) ", (int)getppid());
        long long per_request = (MAX_LEN + BLOCK - 1) / BLOCK;
        double concurrency = (double)num_blocks / (double)per_request;
        say("kv_cache_utils.py:2177", "GPU KV cache size: %lld tokens", (long long)(concurrency * MAX_LEN));
        say("kv_cache_utils.py:2178", "Maximum concurrency for %d tokens per request: %.2fx", MAX_LEN, concurrency);
        strcpy(prefix, saved);
    }
    for (int i = 0; i < LAYERS; i++) c10((size_t)(num_blocks * PAGE));
    /* capture_model: free memory before and after the capture. */
    size_t cap0, cap1;
    mem(&cap0, &total);
    step("capture begin", c10_capture_begin(), 0);
    if (!c10_capture_alloc(6 * MiB)) unexpected++;
    step("capture end", c10_capture_end(), 0);
    mem(&cap1, &total);
    long long graphs = (long long)cap0 - (long long)cap1;
    say("model_runner.py:747", "Graph capturing finished in 0 secs, took %.2f GiB", graphs / GiB);
    long long buffer = 150LL << 20;
    long long to_requested = requested - (weights + activation + non_torch + graphs) - buffer;
    long long to_gpu = (long long)free0 - (weights + activation + non_torch + graphs) - buffer;
    say("gpu_worker.py:857",
        "Free memory on device (%s/%s GiB) on startup. Desired GPU memory utilization is (%g, %s GiB). Actual "
        "usage is %s GiB for weight, %s GiB for peak activation, %s GiB for non-torch memory, and %s GiB for "
        "CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=%lld` (%s GiB) to fit "
        "into requested memory, or `--kv-cache-memory=%lld` (%s GiB) to fully utilize gpu memory. Current kv "
        "cache memory in use is %s GiB.",
        gib((long long)free0, a), gib((long long)total, b), util, gib(requested, c), gib(weights, d),
        gib(activation, e), gib(non_torch, f), gib(graphs, a), to_requested, gib(to_requested, b), to_gpu,
        gib(to_gpu, c), gib(available, d));
    printf("VLLM_TP_LIKE {\"rank\": %d, \"pid\": %d, \"blocks\": %lld, \"num_gpu_blocks\": %lld, "
           "\"available\": %lld, \"non_torch\": %lld, \"graphs\": %lld, \"to_requested\": %lld}\n",
           rank, pid, blocks, num_blocks, available, non_torch, graphs, to_requested);
    if (peer_ptr) {
        int (*close_handle)(CUdeviceptr) = (int (*)(CUdeviceptr))dlsym(cuda, "cuIpcCloseMemHandle");
        step("cuIpcCloseMemHandle", close_handle ? close_handle(peer_ptr) : -1, 0);
    }
    return finish("vllm_tp_like");
}
