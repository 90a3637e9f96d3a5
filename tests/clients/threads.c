/* threads N M: N threads each do M cudaMalloc/cudaFree pairs (1-4 MiB) through cudart. */
#include <pthread.h>
#include <stdlib.h>

#include "client_util.h"

static int M;
static int allocs, frees, failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
    long t = (long)arg;
    int a = 0, f = 0, bad = 0;
    for (int j = 0; j < M; j++) {
        void *p = NULL;
        if (cudaMalloc(&p, (size_t)((t + j) % 4 + 1) * MiB)) {
            bad++;
            continue;
        }
        a++;
        if (cudaFree(p)) bad++;
        else f++;
    }
    pthread_mutex_lock(&lock);
    allocs += a;
    frees += f;
    failures += bad;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    M = argc > 2 ? atoi(argv[2]) : 100;
    if (n < 1 || n > 1024 || M < 0) {
        fprintf(stderr, "usage: threads N M\n");
        return 2;
    }
    step("init cudaSetDevice(0)", cudaSetDevice(0), 0);
    long before = used_mib();
    pthread_t *tids = calloc((size_t)n, sizeof *tids);
    for (long t = 0; t < n; t++) pthread_create(&tids[t], NULL, worker, (void *)t);
    for (int t = 0; t < n; t++) pthread_join(tids[t], NULL);
    long delta = used_mib() - before;
    printf("threads: N=%d M=%d allocs=%d frees=%d failures=%d used_delta=%ldMiB\n", n, M, allocs, frees, failures,
           delta);
    expect("failures", failures, 0);
    expect("used_delta", delta, 0);
    free(tids);
    return finish("threads");
}
