/* tap_writer FILE CHUNK [FD]: writes FILE to stdout (or FD) with write(2), CHUNK bytes at a
 * time, so lines arrive split across writes as they do from a block-buffered pipe. Also
 * checks that errno survives a write to a closed descriptor under the preload. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int chunk = atoi(argv[2]);
    int out = argc > 3 ? atoi(argv[3]) : 1;
    int in = open(argv[1], O_RDONLY);
    if (in < 0 || chunk <= 0) return 2;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, chunk < (int)sizeof buf ? chunk : (int)sizeof buf)) > 0) {
        ssize_t off = 0;
        while (off < n) {
            ssize_t w = write(out, buf + off, n - off);
            if (w <= 0) return 3;
            off += w;
        }
    }
    errno = 0;
    ssize_t bad = write(99, "x", 1);
    if (bad != -1 || errno != EBADF) {
        fprintf(stderr, "errno after a bad write: %d\n", errno);
        return 4;
    }
    return 0;
}
