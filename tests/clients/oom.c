/* oom: cudaMalloc 64 MiB buffers until the driver says OUT_OF_MEMORY (run it with a small
 * FAKECUDA_MEM_BYTES); the failed call must change nothing. */
#include "client_util.h"

#define MAX_BUFS 100000

static void *bufs[MAX_BUFS];

int main(void) {
    step("init cudaSetDevice(0)", cudaSetDevice(0), 0);
    int n = 0, rc = 0;
    long before_failure = 0;
    while (n < MAX_BUFS) {
        before_failure = used_mib();
        rc = cudaMalloc(&bufs[n], 64 * MiB);
        if (rc) break;
        n++;
    }
    printf("oom: allocated %d x 64MiB, then rc=%d\n", n, rc);
    expect("rc", rc, CUDA_ERROR_OUT_OF_MEMORY);
    expect("used after the failed call", used_mib(), before_failure);
    int free_rc = 0;
    for (int i = 0; i < n; i++) free_rc |= cudaFree(bufs[i]);
    step("oom: freed all", free_rc, 0);
    return finish("oom");
}
