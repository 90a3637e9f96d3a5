/*
 * Cost of the stdout/stderr tap for a write that matches nothing: in one process, alternating
 * blocks of write(1, line) (through libc's write, which libvramledger.so interposes) and
 * syscall(SYS_write, 1, line) (never interposed), stdout redirected to /dev/null.
 * Run with and without LD_PRELOAD; the tap's cost is the difference of the two differences.
 *
 * Build: gcc -O2 -o bench_tap bench_tap.c
 * Run:   ./bench_tap [blocks] [writes per block] [line 0|1] [serving] >/dev/null
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 40;
    long n = argc > 2 ? atol(argv[2]) : 20000;
    int which = argc > 3 ? atoi(argv[3]) : 0;
    /* Ordinary serving-time lines that mention no stage: an HTTP access line (capital-heavy,
     * the prefilter's worst case) and SGLang's own decode-progress line. */
    const char *lines[] = {
        "INFO:     127.0.0.1:52344 - \"POST /generate HTTP/1.1\" 200 OK (request 8841, 412 tokens)\n",
        "[2025-06-01 10:02:11 TP0] Decode batch. #running-req: 12, #token: 3301, token usage: 0.01, "
        "gen throughput (token/s): 812.44\n",
    };
    const char *line = lines[which == 1];
    if (argc > 4 && strcmp(argv[4], "serving") == 0) {
        /* SGLang's summary line: the engine is serving, and the grammar-only tap steps aside. */
        const char *summary = "[2025-06-01 10:00:21 TP0] max_total_num_tokens=444500, chunked_prefill_size=8192, "
                              "max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, "
                              "available_gpu_mem=7.28 GB\n";
        (void)!write(1, summary, strlen(summary));
    }
    size_t len = strlen(line);
    double *d = calloc(blocks, sizeof *d);
    for (int b = 0; b < blocks; b++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) (void)!write(1, line, len);
        double t1 = now_ns();
        for (long i = 0; i < n; i++) (void)!syscall(SYS_write, 1, line, len);
        double t2 = now_ns();
        d[b] = ((t1 - t0) - (t2 - t1)) / n;
    }
    qsort(d, blocks, sizeof *d, cmp);
    fprintf(stderr, "write_minus_syscall_ns=%.1f\n", d[blocks / 2]);
    return 0;
}
