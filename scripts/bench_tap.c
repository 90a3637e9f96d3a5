/*
 * Cost of the stdout/stderr tap for a write that matches nothing: in one process, alternating
 * blocks of write(1, line) (the symbol the program links to, which libvramledger.so
 * interposes), libc's own write (looked up in libc.so.6 itself, which the preload never
 * reaches) and syscall(SYS_write, 1, line), stdout redirected to /dev/null. Prints the median
 * over blocks of
 *   tap_added_ns            interposed write − libc's write: what the tap adds, measured in
 *                           one process (without the preload both are libc's: the noise);
 *   write_minus_syscall_ns  interposed write − raw syscall (the older figure: run with and
 *                           without LD_PRELOAD and subtract, noisier across processes);
 *   where_ran               the CPU it ended on and where the interposed write, the line and
 *                           the stack lie (scripts/bench_tap_bands.sh: what a run's band goes with).
 *
 * Build: gcc -O2 -o bench_tap bench_tap.c
 * Run:   ./bench_tap [blocks] [writes per block] [line 0|1|2|N] [serving] >/dev/null
 *        (N >= 3: a line of N bytes, the decode line's text cut or repeated, then '\n')
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 40;
    long n = argc > 2 ? atol(argv[2]) : 20000;
    int which = argc > 3 ? atoi(argv[3]) : 0;
    /* Ordinary serving-time lines that mention no stage: an HTTP access line (capital-heavy,
     * the prefilter's worst case), SGLang's own decode-progress line and a short line
     * (uvicorn's, 24 bytes: shorter than one 32-byte window). */
    const char *lines[] = {
        "INFO:     127.0.0.1:52344 - \"POST /generate HTTP/1.1\" 200 OK (request 8841, 412 tokens)\n",
        "[2025-06-01 10:02:11 TP0] Decode batch. #running-req: 12, #token: 3301, token usage: 0.01, "
        "gen throughput (token/s): 812.44\n",
        "INFO:     Shutting down\n",
    };
    const char *line = lines[which >= 0 && which <= 2 ? which : 0];
    static char sized[4096];
    if (which >= 3 && which < (int)sizeof sized) {
        size_t text = strlen(lines[1]) - 1;
        for (int i = 0; i < which - 1; i++) sized[i] = lines[1][i % text];
        sized[which - 1] = '\n';
        line = sized;
    }
    if (argc > 4 && strcmp(argv[4], "serving") == 0) {
        /* SGLang's summary line: the engine is serving, and the grammar-only tap steps aside. */
        const char *summary = "[2025-06-01 10:00:21 TP0] max_total_num_tokens=444500, chunked_prefill_size=8192, "
                              "max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, "
                              "available_gpu_mem=7.28 GB\n";
        (void)!write(1, summary, strlen(summary));
    }
    size_t len = strlen(line);
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    typedef ssize_t (*write_fn)(int, const void *, size_t);
    write_fn libc_write = libc ? (write_fn)dlsym(libc, "write") : NULL;
    if (!libc_write) {
        fprintf(stderr, "bench_tap: libc's own write not found\n");
        return 1;
    }
    double *d = calloc(blocks, sizeof *d), *tap = calloc(blocks, sizeof *tap);
    for (int b = 0; b < blocks; b++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) (void)!write(1, line, len);
        double t1 = now_ns();
        for (long i = 0; i < n; i++) (void)!syscall(SYS_write, 1, line, len);
        double t2 = now_ns();
        for (long i = 0; i < n; i++) (void)!libc_write(1, line, len);
        double t3 = now_ns();
        d[b] = ((t1 - t0) - (t2 - t1)) / n;
        tap[b] = ((t1 - t0) - (t3 - t2)) / n;
    }
    qsort(d, blocks, sizeof *d, cmp_double);
    qsort(tap, blocks, sizeof *tap, cmp_double);
    fprintf(stderr, "write_minus_syscall_ns=%.1f\n", d[blocks / 2]);
    fprintf(stderr, "tap_added_ns=%.1f\n", tap[blocks / 2]);
    fprintf(stderr, "where_ran cpu=%d write=%p line=%p stack=%p\n", sched_getcpu(),
            dlsym(RTLD_DEFAULT, "write"), (const void *)line, (void *)&blocks);
    return 0;
}
