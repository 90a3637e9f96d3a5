/* server_like: an SGLang-shaped server startup for the demo (scripts/demo.sh), on the fake
 * driver. It prints SGLang's own log lines with write(2), which libvramledger.so reads to mark
 * the stages, and allocates the way the real server does in each of them:
 *   dist_init     NCCL communicator and its internal VMM buffers          (nccl)
 *   weight_load   weights through the caching allocator                   (torch)
 *   kv_pool       the KV cache, DEMO_KV_MIB (default 1536)                 (torch)
 *   post_kv_init  cuBLAS workspace; a third-party library's buffers       (direct, vmm)
 *   graph_capture DEMO_GRAPHS captures (default 2) into private pools of
 *                 DEMO_GRAPH_MIB each (default 48); activations for warm-up
 *                 freed again with empty_cache                            (torch_graph_pool, torch)
 *   serving       after the summary line; nothing is freed before exit
 * The context (NVML-measured) comes first, in `startup`. Sizes in MiB. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_util.h"

static long env_mib(const char *name, long fallback) {
    const char *v = getenv(name);
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 ? n : fallback;
}

static double avail_gb(void) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return (double)free_b / (1024.0 * 1024.0 * 1024.0);
}

/* One SGLang log line on stdout through write(2), as Python's logging does. */
static void say3(const char *fmt, double a, double b, double c) {
    char msg[512], line[600];
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32];
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(msg, sizeof msg, fmt, a, b, c);
    int n = snprintf(line, sizeof line, "[%s TP0] %s\n", stamp, msg);
    if (n > 0 && write(1, line, (size_t)n) < 0) unexpected++;
}

static void say(const char *fmt, double a, double b) { say3(fmt, a, b, 0); }

static void pause_ms(int ms) { usleep(ms * 1000); }

/* Quiet: the program's output is its log lines; a failed step is reported on stderr. */
static void ok(const char *what, int rc, int want) {
    if (rc != want) {
        fprintf(stderr, "UNEXPECTED: %s returned %d, expected %d\n", what, rc, want);
        unexpected++;
    }
}

int main(void) {
    long kv_mib = env_mib("DEMO_KV_MIB", 1536);
    long graph_mib = env_mib("DEMO_GRAPH_MIB", 48);
    long graphs = env_mib("DEMO_GRAPHS", 2);
    setvbuf(stdout, NULL, _IONBF, 0);
    ok("cudaSetDevice(0): context", cudaSetDevice(0), 0);
    pause_ms(30);

    say("Init torch distributed begin.", 0, 0);
    double before = avail_gb();
    ncclComm_t comm = NULL;
    ok("nccl comm init", nccl_fake_comm_init(&comm, 0), 0);
    ok("nccl internal buffers 4 x 16MiB", nccl_fake_internal_buffers(4, 16 * MiB), 0);
    pause_ms(40);
    say("Init torch distributed ends. mem usage=%.2f GB", before - avail_gb(), 0);

    double load_start = avail_gb();
    say("Load weight begin. avail mem=%.2f GB", load_start, 0);
    for (int i = 0; i < 8; i++) {
        ok("weights 96MiB", c10_alloc(96 * MiB) ? 0 : c10_last_error(), 0);
        pause_ms(15);
    }
    say("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB.",
        avail_gb(), load_start - avail_gb());

    pause_ms(30);
    ok("KV cache", c10_alloc((size_t)kv_mib * MiB) ? 0 : c10_last_error(), 0);
    say3("KV Cache is allocated. #tokens: %.0f, K size: %.2f GB, V size: %.2f GB", kv_mib * 64.0,
         kv_mib / 2048.0, kv_mib / 2048.0);
    pause_ms(30);
    say("Memory pool end. avail mem=%.2f GB", avail_gb(), 0);

    ok("cuBLAS workspace 32MiB", cublas_fake_init_workspace(32 * MiB), 0);
    ok("thirdparty init", thirdparty_init(), 0);
    ok("thirdparty cuMemAlloc 24MiB", thirdparty_alloc(24 * MiB), 0);
    ok("thirdparty cuMemCreate 16MiB", thirdparty_vmm(16 * MiB), 0);
    pause_ms(40);

    say("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB", avail_gb(), 0);
    double capture_start = avail_gb();
    void *warm = c10_alloc(200 * MiB);
    ok("warm-up activations 200MiB", warm ? 0 : c10_last_error(), 0);
    for (long g = 0; g < graphs; g++) {
        ok("capture begin", c10_capture_begin(), 0);
        ok("private-pool segment", c10_capture_alloc((size_t)graph_mib * MiB) ? 0 : c10_last_error(), 0);
        ok("capture end", c10_capture_end(), 0);
        pause_ms(30);
    }
    c10_free(warm);
    ok("empty_cache (warm-up activations back to the driver)", c10_empty_cache(), 0);
    say("Capture cuda graph end. Time elapsed: 0.15 s. mem usage=%.2f GB. avail mem=%.2f GB.",
        capture_start - avail_gb(), avail_gb());
    pause_ms(30);
    say("max_total_num_tokens=%.0f, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, "
        "context_len=131072, available_gpu_mem=%.2f GB",
        kv_mib * 64.0, avail_gb());
    pause_ms(40);
    if (unexpected) fprintf(stderr, "server_like: FAILED\n");
    return unexpected ? 1 : 0;
}
