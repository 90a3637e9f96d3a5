/* mem_latency: how long one dependent load takes over a buffer of BYTES (a random cycle through
 * it, so no prefetcher helps). Run it before timing the replay: the books walk is bound by its
 * table's loads on a machine whose caches are slow (BENCHMARKS.md, issue 15's tenth round).
 *   gcc -O2 -o /tmp/mem_latency scripts/mem_latency.c
 *   for b in 16384 262144 4194304 33554432; do /tmp/mem_latency $b; done */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 2 || atol(argv[1]) < 16) {
        fprintf(stderr, "usage: mem_latency BYTES (at least 16)\n");
        return 2;
    }
    size_t n = (size_t)atol(argv[1]) / sizeof(size_t);
    size_t *next = malloc(n * sizeof(size_t));
    if (!next) {
        fprintf(stderr, "mem_latency: cannot allocate %s bytes\n", argv[1]);
        return 1;
    }
    /* One cycle through every slot (Sattolo's shuffle). */
    for (size_t i = 0; i < n; i++) next[i] = i;
    srand(1);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rand() % i, t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
    const long steps = 20000000;
    struct timespec a, b;
    size_t p = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < steps; i++) p = next[p];
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / steps;
    printf("%s bytes: %.2f ns a dependent load (end %zu)\n", argv[1], ns, p);
    free(next);
    return 0;
}
