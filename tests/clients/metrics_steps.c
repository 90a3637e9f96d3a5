/* metrics_steps: a program whose memory moves when the test says so, for the live outputs
 * (serve, top) to be watched while it runs. One command per stdin line; after each it prints
 * "ok <n>" (n: commands done) on stdout, flushed, so the test knows the records are written.
 *
 *   stage NAME        vramledger_stage(NAME) (found with dlsym: absent without the preload)
 *   say TEXT          TEXT and a newline through write(2), where the stdout tap reads it
 *   malloc DEV MIB    cudaMalloc on DEV                      (owner: direct)
 *   torch DEV MIB     the fake caching allocator on DEV      (owner: torch)
 *   free N            frees the N-th allocation (from 0; a torch one goes back to its cache)
 *   empty             empties the caching allocator's cache (cudaFree of unused segments)
 *   oom DEV           one allocation larger than the device  (fails: out of memory)
 *   quit              exits 0
 * Links libc10_cuda.so and libcudart.so.13 from tests/clients. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"

#define MAX_ALLOCS 1024

static struct {
    void *ptr;
    int torch;
} allocs[MAX_ALLOCS];
static int nallocs;

static int run(char *line) {
    char word[32] = {0}, text[512] = {0};
    int a = 0, b = 0;
    if (sscanf(line, "%31s", word) != 1) return 0;
    if (!strcmp(word, "stage") && sscanf(line, "%*s %511s", text) == 1) {
        void (*stage)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "vramledger_stage");
        if (stage) stage(text);
        return 0;
    }
    if (!strcmp(word, "say")) {
        const char *t = line + 3;
        while (*t == ' ') t++;
        size_t n = strcspn(t, "\n");
        char out[600];
        int len = snprintf(out, sizeof out, "%.*s\n", (int)n, t);
        return write(1, out, (size_t)len) == len ? 0 : 1;
    }
    if (!strcmp(word, "malloc") && sscanf(line, "%*s %d %d", &a, &b) == 2 && nallocs < MAX_ALLOCS) {
        if (cudaSetDevice(a)) return 1;
        if (cudaMalloc(&allocs[nallocs].ptr, (size_t)b * MiB)) return 1;
        allocs[nallocs++].torch = 0;
        return 0;
    }
    if (!strcmp(word, "torch") && sscanf(line, "%*s %d %d", &a, &b) == 2 && nallocs < MAX_ALLOCS) {
        if (cudaSetDevice(a)) return 1;
        allocs[nallocs].ptr = c10_alloc((size_t)b * MiB);
        if (!allocs[nallocs].ptr) return 1;
        allocs[nallocs++].torch = 1;
        return 0;
    }
    if (!strcmp(word, "free") && sscanf(line, "%*s %d", &a) == 1 && a >= 0 && a < nallocs) {
        if (!allocs[a].ptr) return 1;
        if (allocs[a].torch) {
            if (c10_free(allocs[a].ptr)) return 1;
        } else if (cudaFree(allocs[a].ptr))
            return 1;
        allocs[a].ptr = NULL;
        return 0;
    }
    if (!strcmp(word, "oom") && sscanf(line, "%*s %d", &a) == 1) {
        void *p = NULL;
        if (cudaSetDevice(a)) return 1;
        return cudaMalloc(&p, (size_t)1 << 50) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
    }
    if (!strcmp(word, "empty")) return c10_empty_cache();
    if (!strcmp(word, "quit")) exit(0);
    fprintf(stderr, "metrics_steps: unknown command: %s", line);
    return 1;
}

int main(void) {
    char line[1024];
    int done = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        if (run(line)) {
            printf("failed %d: %s", done, line);
            fflush(stdout);
            return 1;
        }
        printf("ok %d\n", ++done);
        fflush(stdout);
    }
    return 0;
}
