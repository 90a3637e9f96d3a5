/*
 * libbenchdirect.so: cuMemAlloc_v2 + cuMemFree_v2 pairs through a PLT binding to the driver
 * itself. It is linked against libcuda.so.1 and loaded by bench_ab with RTLD_DEEPBIND, so its
 * own dependencies (the driver) come before the global scope where an LD_PRELOAD library
 * sits: these calls never pass through libvramledger.so, even while it is preloaded.
 *
 * Build: gcc -O2 -shared -fPIC -o libbenchdirect.so bench_direct.c -L<dir of libcuda.so.1> -l:libcuda.so.1
 */
#include <stddef.h>

typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *, size_t);
int cuMemFree_v2(CUdeviceptr);

int bench_direct_pairs(long n, size_t bytes) {
    for (long i = 0; i < n; i++) {
        CUdeviceptr p = 0;
        int rc = cuMemAlloc_v2(&p, bytes);
        if (rc) return rc;
        rc = cuMemFree_v2(p);
        if (rc) return rc;
    }
    return 0;
}
