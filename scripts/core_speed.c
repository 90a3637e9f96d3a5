/* core_speed: how fast this core runs a chain of dependent adds right now (one add a cycle on
 * an idle x86-64 core, so the figure is about the clock in GHz). Run it beside a benchmark on a
 * shared VM: a figure that moves between runs is the host's load, not the code's.
 *   gcc -O1 -o core_speed scripts/core_speed.c && ./core_speed [STEPS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000000UL, x = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (unsigned long i = 0; i < n; i++) __asm__ volatile("add $1, %0" : "+r"(x));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%.2f dependent adds a ns (%lu in %.3f s)\n", (double)n / s / 1e9, x, s);
    return 0;
}
