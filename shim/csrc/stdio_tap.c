/* The stdio half of the stdout/stderr tap (see shim/src/hooks/stdio.rs for why it is C).
 *
 * glibc's stdio writes through its internal __write, which the interposed write() never sees,
 * so a C or C++ program's fprintf(stderr, "... Load weight end ...") would mark nothing. Each
 * function here stands in for one stdio output function: it calls the real one (found with
 * dlsym(RTLD_NEXT)) with the caller's exact arguments, and only after it returned, and only if
 * it succeeded, hands the bytes that call put into the stream to the tap, when the stream is
 * fd 1 or 2 and the tap still wants bytes. The result is returned unchanged and errno is what
 * the real call left. Bytes are reported at the call, in call order, whether the stream is
 * buffered or not (the later flush goes through glibc's internal write and is not seen again).
 *
 * The printf family's output is copied from the stream's buffer when it is still there after
 * the call (a buffered stream that did not flush during the call; the stream is locked around
 * the call for that), else formatted a second time, into a private buffer, with vsnprintf on
 * a va_copy of the arguments and errno as it was at the call (for %m): the same text the
 * stream took. Nothing here allocates unless the output is longer than the stack buffer (up
 * to 64 KiB; longer output is not formatted again, and its line is skipped). Output with a
 * conversion of the program's own (register_printf_specifier) is never formatted again either
 * (its handler would run twice): its line is skipped. A FILE without a lock (glibc's own, lent
 * to such a handler inside another call) is passed through untouched.
 *
 * Not seen: the inline putc_unlocked()/putchar_unlocked()/fputc_unlocked() macros of glibc's
 * headers (they store into the buffer without calling anything), wide-character output,
 * perror() and other messages glibc prints for itself. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*vl_observe_fn)(int fd, const char *bytes, size_t len);
typedef int (*vl_wanted_fn)(void);
typedef int (*vl_needs_fn)(int fd, const char *bytes, size_t len);

static vl_observe_fn observe_cb;
static vl_wanted_fn wanted_cb;
static vl_needs_fn needs_cb;

/* Called once by the Rust side when the library is loaded. */
void vl_stdio_register(vl_observe_fn observe, vl_wanted_fn wanted, vl_needs_fn needs) {
    __atomic_store_n(&observe_cb, observe, __ATOMIC_RELEASE);
    __atomic_store_n(&wanted_cb, wanted, __ATOMIC_RELEASE);
    __atomic_store_n(&needs_cb, needs, __ATOMIC_RELEASE);
}

/* Whether the tap wants to look at these bytes at all (its prefilter: no lock, no copy). */
static int needs(int fd, const char *p, size_t n) {
    vl_needs_fn f = __atomic_load_n(&needs_cb, __ATOMIC_ACQUIRE);
    return !f || f(fd, p, n);
}

static int wanted(void) {
    vl_wanted_fn w = __atomic_load_n(&wanted_cb, __ATOMIC_ACQUIRE);
    return w && w();
}

/* The fd behind `f` if it is 1 or 2, else -1 (errno untouched). */
static int tapped_fd(FILE *f) {
    int saved = errno;
    int fd = f ? fileno(f) : -1;
    errno = saved;
    return fd == 1 || fd == 2 ? fd : -1;
}

static void observe(int fd, const char *p, size_t n) {
    vl_observe_fn o = __atomic_load_n(&observe_cb, __ATOMIC_ACQUIRE);
    if (o && fd >= 0 && n) o(fd, p, n); /* p NULL: n bytes went by unseen */
}

/* Formatted output longer than this is not formatted again: the tap is told `n` bytes went
 * by unseen (NULL bytes), and skips the line they belong to. */
#define MAX_REFORMAT (64 * 1024)

/* The real functions, resolved on first use (or all at once at load, vl_stdio_resolve). */
#define REAL(name) real_##name
#define DECLARE_REAL(ret, name, params)                                                        \
    typedef ret(*name##_fn) params;                                                            \
    static name##_fn real_##name##_p;                                                          \
    static name##_fn real_##name(void) {                                                       \
        name##_fn p = __atomic_load_n(&real_##name##_p, __ATOMIC_ACQUIRE);                     \
        if (!p) {                                                                              \
            int saved = errno;                                                                 \
            p = (name##_fn)dlsym(RTLD_NEXT, #name);                                            \
            errno = saved;                                                                     \
            __atomic_store_n(&real_##name##_p, p, __ATOMIC_RELEASE);                           \
        }                                                                                      \
        return p;                                                                              \
    }

DECLARE_REAL(int, vfprintf, (FILE *, const char *, va_list))
DECLARE_REAL(int, __vfprintf_chk, (FILE *, int, const char *, va_list))
DECLARE_REAL(int, vdprintf, (int, const char *, va_list))
DECLARE_REAL(int, __vdprintf_chk, (int, int, const char *, va_list))
DECLARE_REAL(int, fputs, (const char *, FILE *))
DECLARE_REAL(int, fputs_unlocked, (const char *, FILE *))
DECLARE_REAL(int, puts, (const char *))
DECLARE_REAL(size_t, fwrite, (const void *, size_t, size_t, FILE *))
DECLARE_REAL(size_t, fwrite_unlocked, (const void *, size_t, size_t, FILE *))
DECLARE_REAL(int, fputc, (int, FILE *))
DECLARE_REAL(int, putc, (int, FILE *))
DECLARE_REAL(int, _IO_putc, (int, FILE *))
DECLARE_REAL(int, putchar, (int))
DECLARE_REAL(int, fputc_unlocked, (int, FILE *))
DECLARE_REAL(int, putc_unlocked, (int, FILE *))
DECLARE_REAL(int, putchar_unlocked, (int))

void vl_stdio_resolve(void) {
    (void)REAL(vfprintf)();
    (void)REAL(__vfprintf_chk)();
    (void)REAL(vdprintf)();
    (void)REAL(__vdprintf_chk)();
    (void)REAL(fputs)();
    (void)REAL(fputs_unlocked)();
    (void)REAL(puts)();
    (void)REAL(fwrite)();
    (void)REAL(fwrite_unlocked)();
    (void)REAL(fputc)();
    (void)REAL(putc)();
    (void)REAL(_IO_putc)();
    (void)REAL(putchar)();
    (void)REAL(fputc_unlocked)();
    (void)REAL(putc_unlocked)();
    (void)REAL(putchar_unlocked)();
}

/* Without the real function (never expected on glibc): what a failed output call returns. */
static int missing(void) {
    errno = ENOSYS;
    return EOF;
}

/* Whether every conversion of `fmt` is one of C's and glibc's own. A program may register
 * conversions of its own (register_printf_specifier): their handlers may count or print, and
 * formatting the call again would run them twice, so such output is not formatted again (its
 * line is skipped). */
static int standard_conversions_only(const char *fmt) {
    for (const char *p = fmt; (p = strchr(p, '%')) != NULL;) {
        p++;
        p += strspn(p, "0123456789$-+ #'I*.");
        p += strspn(p, "hlLqjzZt");
        if (*p == '\0') return 1;
        if (!strchr("diouxXeEfFgGaAcspnmCS%", *p)) return 0;
        p++;
    }
    return 1;
}

/* Formats again what a printf-family call just wrote (`written` bytes) and reports it.
 * `again` and `again2` are two copies of the call's arguments, `errno_at_call` the errno the
 * call saw (for %m). errno is left as the real call left it. */
static void report_formatted(int fd, int written, const char *fmt, va_list again, va_list again2,
                             int errno_at_call) {
    if (fd < 0 || written <= 0 || !fmt) return;
    if (!standard_conversions_only(fmt)) {
        observe(fd, NULL, (size_t)written);
        return;
    }
    int after = errno;
    char stack[2048];
    errno = errno_at_call;
    int n = vsnprintf(stack, sizeof stack, fmt, again);
    if (n > 0 && (size_t)n < sizeof stack) {
        observe(fd, stack, (size_t)(n < written ? n : written));
    } else if (n > MAX_REFORMAT) {
        observe(fd, NULL, (size_t)n);
    } else if (n > 0) {
        char *big = malloc((size_t)n + 1);
        if (big) {
            errno = errno_at_call;
            int m = vsnprintf(big, (size_t)n + 1, fmt, again2);
            if (m > 0) observe(fd, big, (size_t)(m < written ? m : written));
            free(big);
        }
    }
    errno = after;
}

/* The body shared by the printf wrappers without a stream (dprintf): `call` is the real call
 * on `ap`; its output is formatted again. */
#define FORMATTED(fd_expr, call)                                                               \
    do {                                                                                       \
        int errno_at_call = errno;                                                             \
        if (!wanted()) return call;                                                            \
        va_list again, again2;                                                                 \
        va_copy(again, ap);                                                                    \
        va_copy(again2, ap);                                                                   \
        int rc = call;                                                                         \
        report_formatted(fd_expr, rc, fmt, again, again2, errno_at_call);                      \
        va_end(again);                                                                         \
        va_end(again2);                                                                        \
        return rc;                                                                             \
    } while (0)

/* The body shared by the printf wrappers with a stream. Most often the stream is buffered and
 * the call's output is still in its buffer when it returns: it is copied from there (under the
 * stream's lock, taken around the call; glibc's stream locks are recursive), which costs far
 * less than formatting it again. When the call flushed, or the stream is unbuffered, it is
 * formatted again. */
#define FORMATTED_STREAM(f, call)                                                              \
    do {                                                                                       \
        int errno_at_call = errno;                                                             \
        int fd = wanted() ? tapped_fd(f) : -1;                                                 \
        /* A FILE without a lock is glibc's own, lent to a conversion handler inside another  \
         * call (dprintf's): that call reports the output; locking it would crash. */         \
        if (fd < 0 || !f->_lock) return call;                                                  \
        va_list again, again2;                                                                 \
        va_copy(again, ap);                                                                    \
        va_copy(again2, ap);                                                                   \
        char copy[2048];                                                                       \
        flockfile(f);                                                                          \
        char *base = f->_IO_write_base, *before = f->_IO_write_ptr;                            \
        int rc = call;                                                                         \
        char *after = f->_IO_write_ptr;                                                        \
        int in_buffer = rc > 0 && f->_IO_write_base == base && before && after >= before &&    \
                        after - before == rc && (size_t)rc <= sizeof copy;                     \
        /* Most lines match nothing: the prefilter says so on the buffer, and nothing is    \
         * copied. */                                                                          \
        int need = in_buffer && needs(fd, before, (size_t)rc);                                 \
        if (need) memcpy(copy, before, (size_t)rc);                                            \
        funlockfile(f);                                                                        \
        if (in_buffer) {                                                                       \
            int after_errno = errno;                                                           \
            if (need) observe(fd, copy, (size_t)rc);                                           \
            errno = after_errno;                                                               \
        } else {                                                                               \
            report_formatted(fd, rc, fmt, again, again2, errno_at_call);                       \
        }                                                                                      \
        va_end(again);                                                                         \
        va_end(again2);                                                                        \
        return rc;                                                                             \
    } while (0)

int vl_vfprintf(FILE *f, const char *fmt, va_list ap) {
    vfprintf_fn r = REAL(vfprintf)();
    if (!r) return missing();
    FORMATTED_STREAM(f, r(f, fmt, ap));
}

int vl_vprintf(const char *fmt, va_list ap) {
    return vl_vfprintf(stdout, fmt, ap);
}

int vl___vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap) {
    __vfprintf_chk_fn r = REAL(__vfprintf_chk)();
    if (!r) return vl_vfprintf(f, fmt, ap);
    FORMATTED_STREAM(f, r(f, flag, fmt, ap));
}

int vl___vprintf_chk(int flag, const char *fmt, va_list ap) {
    return vl___vfprintf_chk(stdout, flag, fmt, ap);
}

int vl_vdprintf(int fd, const char *fmt, va_list ap) {
    vdprintf_fn r = REAL(vdprintf)();
    if (!r) return missing();
    FORMATTED(fd == 1 || fd == 2 ? fd : -1, r(fd, fmt, ap));
}

int vl___vdprintf_chk(int fd, int flag, const char *fmt, va_list ap) {
    __vdprintf_chk_fn r = REAL(__vdprintf_chk)();
    if (!r) return vl_vdprintf(fd, fmt, ap);
    FORMATTED(fd == 1 || fd == 2 ? fd : -1, r(fd, flag, fmt, ap));
}

int vl_fprintf(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vl_vfprintf(f, fmt, ap);
    va_end(ap);
    return rc;
}

int vl_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vl_vfprintf(stdout, fmt, ap);
    va_end(ap);
    return rc;
}

int vl___fprintf_chk(FILE *f, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vl___vfprintf_chk(f, flag, fmt, ap);
    va_end(ap);
    return rc;
}

int vl___printf_chk(int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vl___vfprintf_chk(stdout, flag, fmt, ap);
    va_end(ap);
    return rc;
}

int vl_dprintf(int fd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vl_vdprintf(fd, fmt, ap);
    va_end(ap);
    return rc;
}

int vl___dprintf_chk(int fd, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vl___vdprintf_chk(fd, flag, fmt, ap);
    va_end(ap);
    return rc;
}

/* Strings, blocks and characters: the bytes are the caller's own arguments. */
static int put_string(int rc, FILE *f, const char *s, int newline) {
    if (rc == EOF || !wanted()) return rc;
    int after = errno;
    int fd = tapped_fd(f);
    if (fd >= 0 && s) {
        observe(fd, s, strlen(s));
        if (newline) observe(fd, "\n", 1);
    }
    errno = after;
    return rc;
}

int vl_fputs(const char *s, FILE *f) {
    fputs_fn r = REAL(fputs)();
    if (!r) return missing();
    return put_string(r(s, f), f, s, 0);
}

int vl_fputs_unlocked(const char *s, FILE *f) {
    fputs_unlocked_fn r = REAL(fputs_unlocked)();
    if (!r) return missing();
    return put_string(r(s, f), f, s, 0);
}

int vl_puts(const char *s) {
    puts_fn r = REAL(puts)();
    if (!r) return missing();
    return put_string(r(s), stdout, s, 1);
}

static size_t put_block(size_t rc, const void *p, size_t size, FILE *f) {
    if (rc == 0 || size == 0 || !wanted()) return rc;
    int after = errno;
    int fd = tapped_fd(f);
    if (fd >= 0 && p && rc <= (size_t)-1 / size) observe(fd, p, rc * size);
    errno = after;
    return rc;
}

size_t vl_fwrite(const void *p, size_t size, size_t n, FILE *f) {
    fwrite_fn r = REAL(fwrite)();
    if (!r) {
        missing();
        return 0;
    }
    return put_block(r(p, size, n, f), p, size, f);
}

size_t vl_fwrite_unlocked(const void *p, size_t size, size_t n, FILE *f) {
    fwrite_unlocked_fn r = REAL(fwrite_unlocked)();
    if (!r) {
        missing();
        return 0;
    }
    return put_block(r(p, size, n, f), p, size, f);
}

static int put_char(int rc, FILE *f) {
    if (rc == EOF || !wanted()) return rc;
    int after = errno;
    int fd = tapped_fd(f);
    char c = (char)rc; /* the character written, as an unsigned char converted to int */
    if (fd >= 0) observe(fd, &c, 1);
    errno = after;
    return rc;
}

#define PUT_CHAR_WRAPPER(name)                                                                 \
    int vl_##name(int c, FILE *f) {                                                            \
        name##_fn r = REAL(name)();                                                            \
        if (!r) return missing();                                                              \
        return put_char(r(c, f), f);                                                           \
    }

PUT_CHAR_WRAPPER(fputc)
PUT_CHAR_WRAPPER(putc)
PUT_CHAR_WRAPPER(_IO_putc)
PUT_CHAR_WRAPPER(fputc_unlocked)
PUT_CHAR_WRAPPER(putc_unlocked)

int vl_putchar(int c) {
    putchar_fn r = REAL(putchar)();
    if (!r) return missing();
    return put_char(r(c), stdout);
}

int vl_putchar_unlocked(int c) {
    putchar_unlocked_fn r = REAL(putchar_unlocked)();
    if (!r) return missing();
    return put_char(r(c), stdout);
}
