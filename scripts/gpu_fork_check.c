/* gpu_fork_check: what the real driver answers in a child forked before and after cuInit
 * (tests/clients/fork_driver.c asks the fake driver the same; both must print the same).
 *   gcc -o gpu_fork_check scripts/gpu_fork_check.c -ldl && ./gpu_fork_check
 * Expected (as the fake driver answers):
 *   child forked before cuInit: cuInit=0 cuDeviceGetCount=0 cuMemAlloc=201
 *   parent: cuInit=0 cuDeviceGetCount=0 devices=N
 *   child forked after cuInit: cuInit=3 cuDeviceGetCount=3 cuMemAlloc=3
 *   parent after the child: cuDeviceGetCount=0 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

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
