/* fork_child: the parent allocates and forks; the child tries to allocate, which fails as it does
 * with the real driver (a child forked after CUDA was initialised cannot use it: every call
 * returns CUDA_ERROR_NOT_INITIALIZED, cudart's "initialization error"), and exits; the parent
 * waits and allocates again, unaffected by the child. */
#include <sys/wait.h>
#include <unistd.h>

#include "client_util.h"

int main(void) {
    void *a = NULL, *b = NULL, *c = NULL;
    step("parent init", cudaSetDevice(0), 0);
    step("parent cudaMalloc 8MiB", cudaMalloc(&a, 8 * MiB), 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        step("child cudaMalloc 4MiB", cudaMalloc(&b, 4 * MiB), CUDA_ERROR_NOT_INITIALIZED);
        fflush(stdout);
        _exit(unexpected ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("parent: child exited status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    expect("child status", WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
    step("parent cudaMalloc 8MiB after child", cudaMalloc(&c, 8 * MiB), 0);
    step("parent cudaFree both", cudaFree(a) | cudaFree(c), 0);
    return finish("fork_child");
}
