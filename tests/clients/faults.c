/* faults MODE ...: the fault-matrix workloads (tests/faults.rs), through the fake cudart.
 *   pairs N            N cudaMalloc/cudaFree pairs of 1 MiB; prints "pairs: N ok" on stdout and
 *                      "mem: rss_kb=R hwm_kb=H" (VmRSS/VmHWM from /proc/self/status) on stderr
 *   wait N [relay|threads]  N pairs, "READY", then waits for a line on stdin, then N more pairs;
 *                      with "relay", a SIGBUS handler installed after CUDA is initialised passes
 *                      every SIGBUS on as Python's faulthandler does (message, previous handler
 *                      back, raise); with "threads", the N more pairs come from 8 threads at once
 *   forkthread T N     T threads of N pairs each; a fifth of the way in, one of them forks: the
 *                      child tries cuInit and cudaMalloc (a forked child cannot use CUDA) and exits
 *   quiet N            cudaSetDevice(0) and N cudaMalloc of 8 MiB never freed, no cudaMemGetInfo
 *                      (a program that never asks for free memory), then returns from main
 *   ownbus N           the program's own SIGBUS handler (installed first, or with "late" as a third
 *                      argument after CUDA is initialised) catches N faults on a mapping of its own
 *                      truncated file and goes on (siglongjmp)
 *   raise N            N pairs, then raise(SIGBUS) with the default disposition: dies as it would
 *   errno N            N pairs with errno set to a marker before each call; prints what errno is
 *                      after the calls (a hook must leave it as the driver left it)
 *   closeall N DIR     as a daemon does: one pair, then closes every descriptor from 3 up, opens
 *                      DIR/a.dat and DIR/b.dat (the numbers the closed ones had) and writes 1 MiB
 *                      of 'D' to each, then N pairs; prints "closeall: ok" (the files must stay
 *                      1 MiB of 'D')
 *   vforkline N        N pairs, then a vfork child writes an SGLang stage line to stderr and
 *                      exits (it shares the parent's memory: the line is not the parent's)
 *   midline N          writes the start of a line to stderr, N pairs, then the line's end (a
 *                      warning the shim gives meanwhile must not land inside it)
 *   nostdio N FILE     started with stdout and stderr closed: N pairs, then write(2) of a line;
 *                      writes what it returned and errno ("write=-1 errno=9" without a preload)
 *                      into FILE */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_util.h"

static void print_mem(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long rss = -1, hwm = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmRSS:", 6)) rss = atol(line + 6);
        if (!strncmp(line, "VmHWM:", 6)) hwm = atol(line + 6);
    }
    if (f) fclose(f);
    fprintf(stderr, "mem: rss_kb=%ld hwm_kb=%ld\n", rss, hwm);
}

static int pairs(long n) {
    int bad = 0;
    for (long i = 0; i < n; i++) {
        void *p = NULL;
        if (cudaMalloc(&p, MiB)) bad++;
        else if (cudaFree(p)) bad++;
    }
    return bad;
}

static long per_thread;
static int pair_failures;

static void *pairs_worker(void *arg) {
    int bad = pairs((long)arg);
    __atomic_add_fetch(&pair_failures, bad, __ATOMIC_RELAXED);
    return NULL;
}
static int fork_status = -1;
static volatile int forked;

static void *worker(void *arg) {
    long t = (long)arg;
    for (long j = 0; j < per_thread; j++) {
        void *p = NULL;
        if (cudaMalloc(&p, (size_t)(t % 4 + 1) * MiB) == 0) cudaFree(p);
        if (t == 0 && j == per_thread / 5 && !forked) {
            forked = 1;
            pid_t pid = fork();
            if (pid == 0) {
                void *c = NULL;
                int rc = cudaMalloc(&c, MiB);
                printf("child: cudaMalloc rc=%d\n", rc);
                fflush(stdout);
                _exit(rc == CUDA_ERROR_NOT_INITIALIZED ? 0 : 1);
            }
            int st = 0;
            waitpid(pid, &st, 0);
            fork_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    }
    return NULL;
}

static struct sigaction relay_previous;

static void relay_handler(int sig) {
    static const char msg[] = "relay: SIGBUS passed on\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    sigaction(sig, &relay_previous, NULL);
    raise(sig);
}

static void install_relay(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = relay_handler;
    sa.sa_flags = SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &relay_previous);
}

static sigjmp_buf own_jump;
static volatile sig_atomic_t own_faults;

static void own_handler(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    (void)info;
    (void)ctx;
    own_faults++;
    siglongjmp(own_jump, 1);
}

static void install_own_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = own_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

/* Maps a file of its own, truncates it, and touches the vanished page n times. */
static int own_faults_on_own_file(long n) {
    char path[] = "/tmp/faults-ownbus-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    unlink(path);
    long pg = sysconf(_SC_PAGESIZE);
    if (ftruncate(fd, 2 * pg)) return -1;
    volatile char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return -1;
    if (ftruncate(fd, pg)) return -1;
    for (long i = 0; i < n; i++) {
        if (sigsetjmp(own_jump, 1) == 0) m[pg + 8] = 1; /* past the end of the file: SIGBUS */
    }
    m[0] = 1; /* still mapped */
    close(fd);
    return (int)own_faults;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *mode = argv[1];
    long n = atol(argv[2]);
    int late = argc > 3 && !strcmp(argv[3], "late");
    if (!strcmp(mode, "ownbus") && !late) install_own_handler();
    if (!strcmp(mode, "midline")) { /* before any CUDA call */
        const char *a = "PROGRAM-LINE-START ", *b = "PROGRAM-LINE-END\n";
        (void)!write(2, a, strlen(a));
        int bad = cudaSetDevice(0) != 0 || pairs(n);
        (void)!write(2, b, strlen(b));
        printf("midline: %s\n", bad ? "FAILED" : "ok");
        return bad ? 1 : 0;
    }
    if (cudaSetDevice(0)) return 3;
    if (!strcmp(mode, "ownbus")) {
        if (late) install_own_handler();
        int bad = pairs(10);
        int caught = own_faults_on_own_file(n);
        bad += pairs(10);
        printf("ownbus: caught %d of %ld %s\n", caught, n, bad ? "FAILED" : "ok");
        return caught == n && !bad ? 0 : 1;
    }
    if (!strcmp(mode, "raise")) {
        int bad = pairs(n);
        printf("raise: %ld %s\n", n, bad ? "FAILED" : "ok");
        fflush(stdout);
        raise(SIGBUS);
        return 9; /* not reached */
    }
    if (!strcmp(mode, "closeall") && argc > 3) {
        int bad = pairs(1);
        for (int fd = 3; fd < 1024; fd++) close(fd);
        static char data[1 << 20];
        memset(data, 'D', sizeof data);
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/a.dat", argv[3]);
        snprintf(b, sizeof b, "%s/b.dat", argv[3]);
        int fa = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644);
        int fb = open(b, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fa < 0 || fb < 0 || write(fa, data, sizeof data) != sizeof data ||
            write(fb, data, sizeof data) != sizeof data)
            return 4;
        bad += pairs(n);
        printf("closeall: %s\n", bad ? "FAILED" : "ok");
        return bad ? 1 : 0;
    }
    if (!strcmp(mode, "vforkline")) {
        int bad = pairs(n);
        pid_t child = vfork();
        if (child == 0) {
            const char *line = "[2025-06-01 10:00:00 TP0] Init torch distributed begin.\n";
            (void)!write(2, line, strlen(line));
            _exit(0);
        }
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child || status != 0) bad = 1;
        bad += pairs(n);
        printf("vforkline: %s\n", bad ? "FAILED" : "ok");
        return bad ? 1 : 0;
    }
    if (!strcmp(mode, "nostdio") && argc > 3) {
        int bad = pairs(n);
        errno = 0;
        ssize_t w = write(2, "line\n", 5);
        int e = errno;
        int out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char msg[64];
        int len = snprintf(msg, sizeof msg, "write=%zd errno=%d%s\n", w, e, bad ? " FAILED" : "");
        if (out < 0 || write(out, msg, (size_t)len) != len) return 4;
        return bad ? 1 : 0;
    }
    if (!strcmp(mode, "errno")) {
        int changed = 0;
        for (long i = 0; i < n; i++) {
            void *p = NULL;
            errno = 1000 + (int)i;
            cudaMalloc(&p, MiB);
            if (errno != 1000 + (int)i) changed++;
            errno = 2000 + (int)i;
            cudaFree(p);
            if (errno != 2000 + (int)i) changed++;
        }
        printf("errno: %ld pairs, changed %d times\n", n, changed);
        return 0;
    }
    if (!strcmp(mode, "pairs")) {
        int bad = pairs(n);
        printf("pairs: %ld %s\n", n, bad ? "FAILED" : "ok");
        print_mem();
        return bad ? 1 : 0;
    }
    if (!strcmp(mode, "wait")) {
        int bad = pairs(n);
        if (argc > 3 && !strcmp(argv[3], "relay")) install_relay();
        printf("READY\n");
        fflush(stdout);
        char buf[16];
        if (!fgets(buf, sizeof buf, stdin)) return 4;
        if (argc > 3 && !strcmp(argv[3], "threads")) {
            pthread_t tids[8];
            for (int i = 0; i < 8; i++) pthread_create(&tids[i], NULL, pairs_worker, (void *)(n / 8));
            for (int i = 0; i < 8; i++) pthread_join(tids[i], NULL);
            bad += pair_failures + (int)(n % 8 ? pairs(n % 8) : 0);
        } else {
            bad += pairs(n);
        }
        printf("wait: %ld %s\n", 2 * n, bad ? "FAILED" : "ok");
        return bad ? 1 : 0;
    }
    if (!strcmp(mode, "forkthread") && argc > 3) {
        int t = atoi(argv[2]);
        per_thread = atol(argv[3]);
        pthread_t tids[256];
        if (t < 1 || t > 256) return 2;
        for (long i = 0; i < t; i++) pthread_create(&tids[i], NULL, worker, (void *)i);
        for (int i = 0; i < t; i++) pthread_join(tids[i], NULL);
        printf("forkthread: %d x %ld child=%d\n", t, per_thread, fork_status);
        return fork_status == 0 ? 0 : 1;
    }
    if (!strcmp(mode, "quiet")) {
        for (long i = 0; i < n; i++) {
            void *p = NULL;
            if (cudaMalloc(&p, 8 * MiB)) return 5;
        }
        printf("quiet: %ld x 8MiB held\n", n);
        return 0;
    }
    return 2;
}
