/* sig_write MS: 3 threads malloc and free for MS ms while a SIGALRM handler writes "x" (no
 * newline: a partial line the tap assembles) to stderr every 200 us, as write(2) may be
 * called from a handler; prints "sig_write: ok" (no hang). No CUDA: the tap alone. */
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
    signal_writes(argc > 1 ? atol(argv[1]) : 1000);
    printf("sig_write: ok\n");
    return 0;
}
