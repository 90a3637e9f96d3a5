/* sigkill K: allocate K buffers of 8 MiB, print READY, then sleep so a test can kill -9 it. */
#include <stdlib.h>
#include <unistd.h>

#include "client_util.h"

int main(int argc, char **argv) {
    int k = argc > 1 ? atoi(argv[1]) : 4;
    step("init cudaSetDevice(0)", cudaSetDevice(0), 0);
    for (int i = 0; i < k; i++) {
        void *p = NULL;
        if (cudaMalloc(&p, 8 * MiB)) {
            fprintf(stderr, "cudaMalloc %d failed\n", i);
            return 1;
        }
    }
    printf("allocated %d x 8MiB used=%ldMiB\n", k, used_mib());
    printf("READY\n");
    fflush(stdout);
    sleep(60);
    return 0;
}
