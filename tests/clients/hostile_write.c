/* hostile_write: write(2) with buffers the kernel refuses in part or in whole. The results (and
 * errno) must be the same with and without the preload, and nothing may crash: the tap may look
 * only at the bytes the real write took. Each buffer starts like an SGLang line, so the tap
 * wants to look at it. Results go to stderr. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void report(const char *what, ssize_t rc, int err) {
    fprintf(stderr, "%s: rc=%zd errno=%d\n", what, rc, rc < 0 ? err : 0);
}

int main(void) {
    long pg = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 2;
    const char *line = "[2025-06-01 10:00:01 TP0] Load weight begin. avail mem=78.68 GB";
    memset(p, ' ', pg);
    memcpy(p, line, strlen(line));
    memcpy(p + pg - strlen(line), line, strlen(line)); /* no newline before the hole */
    munmap(p + pg, pg);
    ssize_t rc;
    errno = 0;
    rc = write(1, p, 2 * pg); /* second page unmapped */
    report("unmapped second page", rc, errno);
    errno = 0;
    rc = write(1, p + pg - strlen(line), strlen(line) + 100); /* runs into the hole */
    report("runs into the hole", rc, errno);
    errno = 0;
    rc = write(1, (void *)0x10, 5);
    report("tiny address", rc, errno);
    errno = 0;
    rc = write(2, NULL, 5);
    report("NULL", rc, errno);
    errno = 0;
    rc = write(1, p + pg, 0); /* zero bytes at an unmapped address */
    report("zero bytes", rc, errno);
    errno = 0;
    rc = write(1, "\n", 1);
    report("newline", rc, errno);
    return 0;
}
