/* printf_custom [buffered]: a conversion of the program's own (register_printf_specifier, %W)
 * whose handler counts its calls and prints into the stream it is given: SGLang's first line
 * three times through fprintf to stderr (unbuffered), once through dprintf to fd 1, then the
 * count. A tap that formats a call again runs the handler twice (the numbers change); one that
 * locks the stream it is handed crashes on the lockless FILE glibc gives handlers inside
 * dprintf. "buffered": stdout fully buffered, the dprintf line through printf instead. */
#define _GNU_SOURCE
#include <printf.h>
#include <stdio.h>
#include <string.h>

static int calls;

static int print_w(FILE *s, const struct printf_info *info, const void *const *args) {
    (void)info;
    (void)args;
    calls++;
    return fprintf(s, "W%d", calls);
}

static int arginfo(const struct printf_info *info, size_t n, int *types, int *sizes) {
    (void)info;
    (void)n;
    (void)types;
    (void)sizes;
    return 0;
}

int main(int argc, char **argv) {
    int buffered = argc > 1 && !strcmp(argv[1], "buffered");
    register_printf_specifier('W', print_w, arginfo);
    for (int k = 0; k < 3; k++)
        fprintf(stderr, "[2025-06-01 10:00:00 TP0] Init torch distributed begin. %W\n");
    if (buffered) printf("[2025-06-01 10:00:01 TP0] Load weight begin. avail mem=78.68 GB %W\n");
    else dprintf(1, "[2025-06-01 10:00:01 TP0] Load weight begin. avail mem=78.68 GB %W\n");
    printf("handler called %d times for 4 conversions\n", calls);
    return 0;
}
