/* sig_write MS: 3 threads malloc and free for MS ms while a SIGALRM handler writes "x" (no
 * newline: a partial line the tap assembles) to stderr every 200 us, as write(2) may be
 * called from a handler; prints "sig_write: ok" (no hang). No CUDA: the tap alone.
 * sig_write MS lines: one thread only (the one the signal interrupts), its small blocks
 * taken and given back so that the allocator's per-thread cache runs dry and each malloc
 * takes the arena's lock, while the handler (installed with SA_NODEFER, as Python's
 * faulthandler does) writes whole engine lines that start stages and carry sizing figures:
 * a tap that classified them there would allocate under the lock the thread holds.
 * sig_write MS lines HOW: the same with the handler installed by HOW: sigaction (as above),
 * bsd_signal, sysv_signal (one-shot: the handler installs itself again first, the System V
 * idiom, then arms a one-shot timer for the next signal, so that none comes while the
 * default action is in place), __sysv_signal (what signal is in a program built with
 * -std=c11: the same) or sigset. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t sig_stop;

static void on_alarm_write(int sig) {
    (void)sig;
    (void)!write(2, "x", 1);
}

/* Lines the grammar takes: a stage each (the two alternate) and a sizing line. */
static const char *const sig_lines[] = {
    "[2025-03-08 12:29:21 TP0] Load weight begin. avail mem=21.63 GB\n",
    "[2025-03-08 12:29:22 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
    "avail mem=6.58 GB, mem usage=15.05 GB.\n",
    "INFO 05-30 06:40:49 [kv_cache_utils.py:634] GPU KV cache size: 123,456 tokens\n",
};
static volatile sig_atomic_t sig_next;

typedef void (*handler_fn)(int);
/* glibc declares these only for some feature sets: the prototypes the library exports. */
extern handler_fn bsd_signal(int, handler_fn);
extern handler_fn sysv_signal(int, handler_fn);
extern handler_fn __sysv_signal(int, handler_fn);
extern handler_fn sigset(int, handler_fn);

/* The one-shot modes: the function that installs the handler again from inside it. */
static handler_fn (*sysv_mode)(int, handler_fn);
static volatile sig_atomic_t sysv_stop;
static const struct itimerval sysv_next = {{0, 0}, {0, 200}};

static void on_alarm_line(int sig) {
    if (sysv_mode) sysv_mode(sig, on_alarm_line);
    const char *l = sig_lines[sig_next % 3];
    sig_next++;
    (void)!write(2, l, strlen(l));
    if (sysv_mode && !sysv_stop) setitimer(ITIMER_REAL, &sysv_next, NULL);
}

static void signal_lines(long ms, const char *how) {
    if (strcmp(how, "bsd_signal") == 0) {
        bsd_signal(SIGALRM, on_alarm_line);
    } else if (strcmp(how, "sysv_signal") == 0 || strcmp(how, "__sysv_signal") == 0) {
        sysv_mode = how[0] == '_' ? __sysv_signal : sysv_signal;
        sysv_mode(SIGALRM, on_alarm_line);
    } else if (strcmp(how, "sigset") == 0) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        sigset(SIGALRM, on_alarm_line);
#pragma GCC diagnostic pop
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm_line;
        sa.sa_flags = SA_RESTART | SA_NODEFER;
        sigaction(SIGALRM, &sa, NULL);
    }
    struct itimerval on = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, sysv_mode ? &sysv_next : &on, NULL);
    time_t end = time(NULL) + (ms + 999) / 1000;
    unsigned seed = 7;
    void *keep[256] = {0};
    while (time(NULL) < end) {
        for (int i = 0; i < 256; i++) keep[i] = malloc(16 + rand_r(&seed) % 1024);
        for (int i = 0; i < 256; i++) free(keep[i]);
    }
    sysv_stop = 1;
    setitimer(ITIMER_REAL, &off, NULL);
    fprintf(stderr, "sig_write: %d lines from the handler\n", (int)sig_next);
}

static void *churn_malloc(void *arg) {
    unsigned seed = (unsigned)(long)arg;
    void *keep[64] = {0};
    while (!sig_stop) {
        int i = rand_r(&seed) % 64;
        free(keep[i]);
        keep[i] = malloc(100 + rand_r(&seed) % 100000);
    }
    for (int i = 0; i < 64; i++) free(keep[i]);
    return NULL;
}

static void signal_writes(long ms) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm_write;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    pthread_t t[3];
    for (long i = 0; i < 3; i++) pthread_create(&t[i], NULL, churn_malloc, (void *)(i + 1));
    struct itimerval on = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &on, NULL);
    time_t end = time(NULL) + (ms + 999) / 1000;
    while (time(NULL) < end) {
        void *p = malloc(5000);
        free(p);
    }
    setitimer(ITIMER_REAL, &off, NULL);
    sig_stop = 1;
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    (void)!write(2, "\n", 1);
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 1000;
    if (argc > 2 && strcmp(argv[2], "lines") == 0)
        signal_lines(ms, argc > 3 ? argv[3] : "sigaction");
    else
        signal_writes(ms);
    printf("sig_write: ok\n");
    return 0;
}
