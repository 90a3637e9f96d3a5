/*
 * What a hook's ingredients cost next to the real driver: cuMemAlloc_v2 + cuMemFree_v2 pairs
 * (2 MiB) timed in alternating blocks, plain and with one extra ingredient per pair, in the
 * cache state a hook meets after the driver's own work. No preload: the driver alone.
 *
 *   ctx_get_device    one cuCtxGetDevice (the device lookup the shim no longer makes per call)
 *   clock_mono        two clock_gettime(CLOCK_MONOTONIC) (one per record)
 *   clock_coarse      two clock_gettime(CLOCK_MONOTONIC_COARSE)
 *   crc_tables        two 100-byte records through a slicing-by-8 CRC (format 1's per-record
 *                     checksum: 8 KiB of tables)
 *   syscall           two syscall(SYS_gettid) (what a system call costs on this machine)
 *   mutex             two pthread mutex lock/unlock pairs
 *
 * Build: gcc -O2 -o bench_costs bench_costs.c -ldl -lpthread
 * Run:   ./bench_costs [blocks=20] [pairs=300] [bytes]  -> one line per ingredient:
 *        "cost NAME added_ns=… ratio=…" (medians of the per-block differences and ratios)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

typedef unsigned long long CUdeviceptr;
static int (*alloc_fn)(CUdeviceptr *, size_t);
static int (*free_fn)(CUdeviceptr);
static int (*ctx_get_device)(int *);

static uint32_t T[8][256];
static pthread_mutex_t M = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink;

static void make_tables(void) {
    for (int i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        T[0][i] = c;
    }
    for (int s = 1; s < 8; s++)
        for (int i = 0; i < 256; i++) T[s][i] = (T[s - 1][i] >> 8) ^ T[0][T[s - 1][i] & 0xff];
}

static uint32_t crc8(const uint8_t *p, size_t n) {
    uint32_t c = ~0u;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo;
        memcpy(&lo, p, 4);
        lo ^= c;
        c = T[7][lo & 0xff] ^ T[6][(lo >> 8) & 0xff] ^ T[5][(lo >> 16) & 0xff] ^ T[4][lo >> 24] ^
            T[3][p[4]] ^ T[2][p[5]] ^ T[1][p[6]] ^ T[0][p[7]];
    }
    while (n--) c = T[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

static void extra(int which, uint8_t *rec) {
    struct timespec ts;
    int d;
    switch (which) {
    case 1: ctx_get_device(&d); sink += d; break;
    case 2: clock_gettime(CLOCK_MONOTONIC, &ts); clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; break;
    case 3: clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); sink += ts.tv_nsec; break;
    case 4: rec[0]++; sink += crc8(rec, 100); rec[1]++; sink += crc8(rec, 100); break;
    case 5: sink += syscall(SYS_gettid); sink += syscall(SYS_gettid); break;
    case 6: for (int i = 0; i < 2; i++) { pthread_mutex_lock(&M); sink++; pthread_mutex_unlock(&M); } break;
    }
}

static int block(long pairs, size_t bytes, int which, uint8_t *rec, double *ns) {
    double t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        CUdeviceptr p;
        if (alloc_fn(&p, bytes)) return 4;
        extra(which, rec);
        if (free_fn(p)) return 4;
    }
    *ns = (now_ns() - t0) / pairs;
    return 0;
}

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 20;
    long pairs = argc > 2 ? atol(argv[2]) : 300;
    size_t bytes = argc > 3 ? (size_t)atoll(argv[3]) : (size_t)2 << 20;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 2;
    int (*init)(unsigned) = dlsym(h, "cuInit");
    int (*retain)(void **, int) = dlsym(h, "cuDevicePrimaryCtxRetain");
    int (*set_current)(void *) = dlsym(h, "cuCtxSetCurrent");
    alloc_fn = dlsym(h, "cuMemAlloc_v2");
    free_fn = dlsym(h, "cuMemFree_v2");
    ctx_get_device = dlsym(h, "cuCtxGetDevice");
    void *ctx = NULL;
    if (!init || !retain || !set_current || !alloc_fn || !free_fn || !ctx_get_device || init(0) ||
        retain(&ctx, 0) || set_current(ctx))
        return 4;
    make_tables();
    uint8_t rec[104] = {0};
    const char *names[] = {"", "ctx_get_device", "clock_mono", "clock_coarse", "crc_tables", "syscall", "mutex"};
    double base, with;
    if (block(pairs, bytes, 0, rec, &base)) return 4; /* warm up */
    double *add = calloc(blocks, sizeof *add), *ratio = calloc(blocks, sizeof *ratio);
    for (int which = 1; which <= 6; which++) {
        for (int b = 0; b < blocks; b++) {
            if (b % 2 == 0) {
                if (block(pairs, bytes, 0, rec, &base) || block(pairs, bytes, which, rec, &with)) return 4;
            } else {
                if (block(pairs, bytes, which, rec, &with) || block(pairs, bytes, 0, rec, &base)) return 4;
            }
            add[b] = with - base;
            ratio[b] = with / base;
        }
        qsort(add, blocks, sizeof *add, cmp_double);
        qsort(ratio, blocks, sizeof *ratio, cmp_double);
        printf("cost %s added_ns=%.1f ratio=%.4f (pair %.0f ns)\n", names[which], add[blocks / 2], ratio[blocks / 2], base);
    }
    return 0;
}
