/* two_devices: one process allocating on both devices of the fake driver, switching with
 * cudaSetDevice between allocations: 4 MiB on device 0, 8 MiB on device 1, each round.
 *   two_devices [rounds=100]   -> "two_devices: R rounds ok" */
#include <stdlib.h>

#include "client_util.h"

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    for (int r = 0; r < rounds; r++) {
        void *a = NULL, *b = NULL;
        int rc = cudaSetDevice(0);
        rc |= cudaMalloc(&a, 4 << 20);
        rc |= cudaSetDevice(1);
        rc |= cudaMalloc(&b, 8 << 20);
        rc |= cudaFree(b);
        rc |= cudaSetDevice(0);
        rc |= cudaFree(a);
        if (rc) {
            fprintf(stderr, "UNEXPECTED: round %d rc=%d\n", r, rc);
            unexpected++;
            break;
        }
    }
    printf("two_devices: %d rounds %s\n", rounds, unexpected ? "FAILED" : "ok");
    return unexpected ? 1 : 0;
}
