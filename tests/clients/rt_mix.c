/* rt_mix: two callers of the same runtime entry points, interleaved: PyTorch's allocator
 * (libc10_cuda's cudaMalloc/cudaFree) and the program itself (cudaMalloc/cudaFree from main).
 * Every allocation reaches the driver through libcudart, so the shim walks past the runtime to
 * tell the two apart; after a few calls it walks by the frame sizes it learned.
 *   rt_mix [rounds=300]   -> "rt_mix: R rounds ok" */
#include <stdlib.h>

#include "client_util.h"

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    step("init cudaSetDevice(0)", cudaSetDevice(0), 0);
    for (int r = 0; r < rounds; r++) {
        void *t = c10_alloc(512 << 10); /* a new 2 MiB segment: cudaMalloc from libc10_cuda */
        void *mine = NULL;
        int rc = cudaMalloc(&mine, 4 << 20);
        if (!t || rc) {
            fprintf(stderr, "UNEXPECTED: round %d: c10=%p rc=%d\n", r, t, rc);
            unexpected++;
            break;
        }
        c10_free(t);
        c10_empty_cache(); /* cudaFree from libc10_cuda */
        cudaFree(mine);
    }
    printf("rt_mix: %d rounds %s\n", rounds, unexpected ? "FAILED" : "ok");
    return unexpected ? 1 : 0;
}
