/* fork_driver: the driver across fork(), called directly (no cudart). A child forked before
 * cuInit initialises as any process; a child forked after it cannot use CUDA: cuInit and every
 * other call return CUDA_ERROR_NOT_INITIALIZED (3), as the real driver does. The parent is
 * unaffected either way. scripts/gpu_shim_safety.sh runs this same file on the real driver
 * (tests/fake_driver.rs asserts its lines here). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_abi.h"

static CUresult (*init)(unsigned int);
static CUresult (*count)(int *);
static CUresult (*alloc)(CUdeviceptr *, size_t);

static int child_report(const char *when) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int n = -1;
        CUresult a = init(0);
        CUresult b = count(&n);
        CUdeviceptr p = 0;
        CUresult c = alloc(&p, 1 << 20);
        printf("child forked %s: cuInit=%d cuDeviceGetCount=%d cuMemAlloc=%d\n", when, a, b, c);
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 2;
    init = (CUresult(*)(unsigned int))dlsym(h, "cuInit");
    count = (CUresult(*)(int *))dlsym(h, "cuDeviceGetCount");
    alloc = (CUresult(*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
    if (!init || !count || !alloc) return 2;
    if (child_report("before cuInit")) return 3;
    int n = -1;
    CUresult a = init(0);
    CUresult b = count(&n);
    printf("parent: cuInit=%d cuDeviceGetCount=%d devices=%d\n", a, b, n);
    if (child_report("after cuInit")) return 3;
    printf("parent after the child: cuDeviceGetCount=%d\n", count(&n));
    return 0;
}
