/* bench_stdio N [line]: N printf calls of an HTTP-access-like line (or, with "line" = 1,
 * SGLang's decode-progress line) to stdout, and N fputs of the same text. Run with stdout to
 * /dev/null (fully buffered), with and without the preload; scripts/bench_stdio.sh prints the
 * nanoseconds per call. What the stdio tap adds: the bytes handed to the tap after the real
 * call (printf: formatted a second time). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int which = argc > 2 ? atoi(argv[2]) : 0;
    const char *fmt = which ? "[2025-06-01 10:01:%02ld TP0] Decode batch. #running-req: %ld, #token: 51234, "
                              "token usage: 0.11, gen throughput (token/s): 4321.00, #queue-req: 0\n"
                            : "INFO:     127.0.0.1:%ld - \"POST /v1/completions HTTP/1.1\" 200 OK %ld\n";
    double t0 = now_ns();
    for (long i = 0; i < n; i++) printf(fmt, i % 60, i);
    double t1 = now_ns();
    char line[256];
    snprintf(line, sizeof line, fmt, 7L, 7L);
    for (long i = 0; i < n; i++) fputs(line, stdout);
    double t2 = now_ns();
    fflush(stdout);
    fprintf(stderr, "printf_ns=%.1f fputs_ns=%.1f\n", (t1 - t0) / n, (t2 - t1) / n);
    return 0;
}
