/* Shared by the client executables: print each step with its return code and the device memory
 * in use, and count unexpected results (the exit status is non-zero if there were any). */
#ifndef CLIENT_UTIL_H
#define CLIENT_UTIL_H
#include <stdio.h>

#include "cuda_abi.h"
#include "fake_libs.h"

static int unexpected;

static inline long used_mib(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b)) return -1;
    return (long)((total_b - free_b) / MiB);
}

/* "<what>: rc=<rc> used=<n>MiB", and a complaint on stderr when rc is not `want`. */
static inline void step(const char *what, int rc, int want) {
    printf("%s: rc=%d used=%ldMiB\n", what, rc, used_mib());
    if (rc != want) {
        fprintf(stderr, "UNEXPECTED: %s returned %d, expected %d\n", what, rc, want);
        unexpected++;
    }
}

static inline void expect(const char *what, long got, long want) {
    if (got != want) {
        fprintf(stderr, "UNEXPECTED: %s is %ld, expected %ld\n", what, got, want);
        unexpected++;
    }
}

static inline int finish(const char *program) {
    fflush(stderr);
    printf("%s: %s\n", program, unexpected ? "FAILED" : "ok");
    return unexpected ? 1 : 0;
}
#endif
