/* cublas_like: the application allocates through cudart; libcublas.so.13 allocates its own
 * workspace with cuMemAlloc_v2 obtained by dlsym on libcuda. */
#include "client_util.h"

int main(void) {
    step("init cudaSetDevice(0)", cudaSetDevice(0), 0);
    step("cublas workspace 4MiB", cublas_fake_init_workspace(4 * MiB), 0);
    void *p = NULL;
    step("cudaMalloc 10MiB", cudaMalloc(&p, 10 * MiB), 0);
    step("cudaFree", cudaFree(p), 0);
    step("cublas destroy", cublas_fake_destroy(), 0);
    return finish("cublas_like");
}
