/* libcublas.so.13 (fake cuBLAS). Like the real one it looks up driver symbols itself with
 * dlsym(dlopen("libcuda.so.1"), "cuMemAlloc_v2") and "cuMemGetInfo_v2" (and cuGetProcAddress_v2)
 * and allocates its own workspace: memory the framework above never sees. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "cuda_abi.h"
#include "fake_libs.h"

static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static CUresult (*mem_get_info)(size_t *, size_t *);
static void *get_proc_address;
static CUdeviceptr workspace;

static int load(void) {
    if (mem_alloc) return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return CUDA_ERROR_NOT_INITIALIZED;
    mem_alloc = (CUresult(*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
    mem_free = (CUresult(*)(CUdeviceptr))dlsym(h, "cuMemFree_v2");
    mem_get_info = (CUresult(*)(size_t *, size_t *))dlsym(h, "cuMemGetInfo_v2");
    get_proc_address = dlsym(h, "cuGetProcAddress_v2");
    return mem_alloc && mem_free && mem_get_info && get_proc_address ? 0 : CUDA_ERROR_NOT_FOUND;
}

int cublas_fake_init_workspace(size_t size) {
    int rc = load();
    size_t free_b = 0, total_b = 0;
    if (!rc) rc = mem_get_info(&free_b, &total_b);
    if (!rc && size > free_b) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!rc) rc = mem_alloc(&workspace, size);
    return rc;
}

int cublas_fake_destroy(void) {
    if (!workspace) return 0;
    int rc = mem_free(workspace);
    if (!rc) workspace = 0;
    return rc;
}
