/* sglang_startup MODEL_PATH MFS WEIGHT_MIB CHUNK: an SGLang 0.5.5 startup on one GPU, as the
 * engine prints it. First the `server_args=ServerArgs(...)` line (about 10 KiB, with an api_key
 * that must never reach a journal), written with write(2) CHUNK bytes at a time; then the weight
 * load, SGLang's own profile_max_num_token on the free memory this process reads
 * (rest = available - pre * (1 - MFS), tokens = rest * 2^30 // cell, Python float floor
 * division), the KV pool of that many tokens, and the summary line. The model is Llama-shaped:
 * 8 layers, 8 KV heads, head_dim 128, bf16, so the cell is 32768 B at TP 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"

#define CELL (8ull * 128ull * 8ull * 2ull * 2ull)
#define GIB_F ((double)(1ull << 30))

static void put(const char *text, size_t chunk) {
    size_t n = strlen(text);
    for (size_t off = 0; off < n;) {
        size_t want = n - off < chunk ? n - off : chunk;
        ssize_t w = write(2, text + off, want);
        if (w <= 0) exit(3);
        off += (size_t)w;
    }
}

/* CPython's float floor division (floatobject.c float_floor_div). */
static double py_floordiv(double vx, double wx) {
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod) {
        if ((wx < 0) != (mod < 0)) div -= 1.0;
    }
    if (div) {
        double floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
        return floordiv;
    }
    return copysign(0.0, vx / wx);
}

static double free_gib(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b)) exit(4);
    return (double)free_b / GIB_F;
}

int main(int argc, char **argv) {
    if (argc < 5) return 2;
    const char *model = argv[1];
    double mfs = atof(argv[2]);
    size_t weight_bytes = (size_t)atoll(argv[3]) * MiB;
    size_t chunk = (size_t)atoll(argv[4]);
    if (chunk == 0) return 2;

    static char line[16384];
    int at = snprintf(line, sizeof line,
                      "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='%s', "
                      "tokenizer_path='%s', api_key='sk-test-SECRET-0123456789abcdef', "
                      "dtype='auto', kv_cache_dtype='auto', mem_fraction_static=%g, "
                      "max_running_requests=None, max_total_tokens=None, chunked_prefill_size=2048, "
                      "max_prefill_tokens=16384, page_size=1, tp_size=1, pp_size=1, dp_size=1",
                      model, model, mfs);
    for (int i = 0; i < 400 && at < (int)sizeof line - 64; i++)
        at += snprintf(line + at, sizeof line - at, ", padding_setting_%03d=%d", i, i);
    snprintf(line + at, sizeof line - at, ", context_length=None)\n");
    put(line, chunk);

    if (cudaSetDevice(0)) return 5;
    char buf[512];
    double pre = free_gib();
    snprintf(buf, sizeof buf, "[2026-01-01 00:00:01 TP0] Load weight begin. avail mem=%.2f GB\n", pre);
    put(buf, chunk);
    void *weights = NULL;
    if (cudaMalloc(&weights, weight_bytes)) return 6;
    double avail = free_gib();
    snprintf(buf, sizeof buf,
             "[2026-01-01 00:00:02 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
             "avail mem=%.2f GB, mem usage=%.2f GB.\n",
             avail, pre - avail);
    put(buf, chunk);

    double rest = avail - pre * (1 - mfs);
    long long tokens = (long long)py_floordiv(rest * GIB_F, (double)CELL);
    if (tokens <= 0) return 7;
    double kv_gib = (double)tokens * CELL / 2 / GIB_F;
    snprintf(buf, sizeof buf,
             "[2026-01-01 00:00:02 TP0] KV Cache is allocated. #tokens: %lld, K size: %.2f GB, V size: %.2f GB\n",
             tokens, kv_gib, kv_gib);
    put(buf, chunk);
    void *pool = NULL;
    if (cudaMalloc(&pool, (size_t)tokens * CELL)) return 8;
    snprintf(buf, sizeof buf, "[2026-01-01 00:00:02 TP0] Memory pool end. avail mem=%.2f GB\n", free_gib());
    put(buf, chunk);
    snprintf(buf, sizeof buf,
             "[2026-01-01 00:00:03 TP0] max_total_num_tokens=%lld, chunked_prefill_size=2048, "
             "max_prefill_tokens=16384, max_running_requests=2048, context_len=8192, "
             "available_gpu_mem=%.2f GB\n",
             tokens, free_gib());
    put(buf, chunk);
    printf("tokens %lld\n", tokens);
    cudaFree(pool);
    cudaFree(weights);
    return 0;
}
