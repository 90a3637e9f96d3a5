/* sig_semantics: what sigaction and signal say and do, printed line by line, so that a run
 * with vramledger (which puts handlers behind trampolines) can be compared with a plain one:
 * read-backs, siginfo, masks, SA_RESETHAND, SA_NODEFER, SIG_IGN, invalid signals, a handler
 * that installs another from inside itself, an action read back and installed again, the
 * same struct as new and old action, errno left by a handler, a forked child, and the older
 * ways to install a handler (bsd_signal, sysv_signal's one-shot handler, sigset and its
 * SIG_HOLD). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t info_runs, plain_runs, plain2_runs, nested_depth, nested_max;
static volatile int got_signo, got_code, got_value, got_ctx, usr2_blocked, self_blocked;

static const char *name_of(void (*h)(int));

typedef void (*handler_fn)(int);
/* glibc declares these only for some feature sets: the prototypes the library exports. */
extern handler_fn bsd_signal(int, handler_fn);
extern handler_fn sysv_signal(int, handler_fn);
extern handler_fn sigset(int, handler_fn);

static void on_info(int sig, siginfo_t *si, void *ctx) {
    info_runs++;
    got_signo = si ? si->si_signo : -1;
    got_code = si ? si->si_code : -1;
    got_value = si ? si->si_value.sival_int : -1;
    got_ctx = ctx != NULL;
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    usr2_blocked = sigismember(&now, SIGUSR2);
    self_blocked = sigismember(&now, sig);
}

static void on_plain(int sig) { (void)sig; plain_runs++; }
static void on_plain2(int sig) { (void)sig; plain2_runs++; errno = 77; }

static void on_nested(int sig) {
    nested_depth++;
    if (nested_depth > nested_max) nested_max = nested_depth;
    if (nested_depth == 1) raise(sig); /* SA_NODEFER: runs again right here */
    nested_depth--;
}

static void on_swap(int sig) {
    /* sigaction is async-signal-safe: a handler may install the next one. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_plain;
    sigaction(sig, &sa, NULL);
}

static const char *name_of(void (*h)(int)) {
    if (h == SIG_DFL) return "SIG_DFL";
    if (h == SIG_IGN) return "SIG_IGN";
    if (h == SIG_ERR) return "SIG_ERR";
    if (h == SIG_HOLD) return "SIG_HOLD";
    if (h == on_plain) return "on_plain";
    if (h == on_plain2) return "on_plain2";
    if (h == on_nested) return "on_nested";
    if (h == on_swap) return "on_swap";
    if ((void *)h == (void *)on_info) return "on_info";
    return "another function";
}

static void show(const char *what, int sig) {
    struct sigaction cur;
    memset(&cur, 0, sizeof cur);
    int rc = sigaction(sig, NULL, &cur);
    printf("%s: rc=%d handler=%s flags=%#x usr2_in_mask=%d\n", what, rc, name_of(cur.sa_handler),
           (unsigned)cur.sa_flags, sigismember(&cur.sa_mask, SIGUSR2));
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    memset(&old, 0, sizeof old);
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    printf("install info: rc=%d\n", sigaction(SIGUSR1, &sa, &old));
    printf("old before: handler=%s\n", name_of(old.sa_handler));
    show("read back info", SIGUSR1);

    union sigval v = {.sival_int = 42};
    sigqueue(getpid(), SIGUSR1, v);
    printf("sigqueue: runs=%d signo=%d code_is_queue=%d value=%d ctx=%d usr2_blocked=%d "
           "self_blocked=%d\n",
           info_runs, got_signo, got_code == SI_QUEUE, got_value, got_ctx, usr2_blocked,
           self_blocked);

    struct sigaction saved;
    sigaction(SIGUSR1, NULL, &saved);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    printf("ignore: rc=%d\n", sigaction(SIGUSR1, &sa, &old));
    printf("old of ignore: handler=%s\n", name_of(old.sa_handler));
    show("read back ignore", SIGUSR1);
    raise(SIGUSR1);
    printf("ignored: runs=%d\n", info_runs);
    printf("reinstall read-back: rc=%d\n", sigaction(SIGUSR1, &saved, NULL));
    show("read back reinstalled", SIGUSR1);
    raise(SIGUSR1);
    printf("reinstalled: runs=%d code_is_tkill=%d\n", info_runs, got_code == SI_TKILL);

    void (*prev)(int) = signal(SIGUSR2, on_plain);
    printf("signal first: prev=%s\n", name_of(prev));
    prev = signal(SIGUSR2, on_plain2);
    printf("signal second: prev=%s\n", name_of(prev));
    show("read back signal", SIGUSR2);
    errno = 0;
    raise(SIGUSR2);
    printf("signal raised: plain=%d plain2=%d errno=%d\n", plain_runs, plain2_runs, errno);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_plain;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGHUP, &sa, NULL);
    raise(SIGHUP);
    printf("resethand: plain=%d\n", plain_runs);
    show("read back resethand", SIGHUP);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_nested;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGWINCH, &sa, NULL);
    raise(SIGWINCH);
    printf("nodefer: max depth=%d depth now=%d\n", nested_max, nested_depth);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_swap;
    sigaction(SIGURG, &sa, NULL);
    raise(SIGURG);
    show("swapped from inside", SIGURG);
    raise(SIGURG);
    printf("after swap: plain=%d\n", plain_runs);

    struct sigaction same;
    memset(&same, 0, sizeof same);
    same.sa_handler = on_plain2;
    /* The same struct as both: allowed (libc copies the new action first). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
    printf("same struct: rc=%d\n", sigaction(SIGURG, &same, &same));
#pragma GCC diagnostic pop
    printf("same struct old: handler=%s\n", name_of(same.sa_handler));
    show("same struct now", SIGURG);

    /* The older ways to install a handler. */
    prev = bsd_signal(SIGPIPE, on_plain);
    printf("bsd_signal first: prev=%s\n", name_of(prev));
    prev = bsd_signal(SIGPIPE, on_plain2);
    printf("bsd_signal second: prev=%s\n", name_of(prev));
    show("read back bsd_signal", SIGPIPE);
    int before2 = plain2_runs;
    raise(SIGPIPE);
    printf("bsd_signal raised: plain2=%d\n", plain2_runs - before2);

    prev = sysv_signal(SIGXCPU, on_plain);
    printf("sysv_signal first: prev=%s\n", name_of(prev));
    show("read back sysv_signal", SIGXCPU);
    int before = plain_runs;
    raise(SIGXCPU);
    printf("sysv_signal raised: plain=%d\n", plain_runs - before);
    show("read back sysv_signal after one", SIGXCPU);
    prev = sysv_signal(SIGXCPU, SIG_IGN);
    printf("sysv_signal to SIG_IGN: prev=%s\n", name_of(prev));

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    prev = sigset(SIGXFSZ, on_plain);
    printf("sigset first: prev=%s\n", name_of(prev));
    prev = sigset(SIGXFSZ, SIG_HOLD);
    printf("sigset hold: prev=%s\n", name_of(prev));
    sigset_t mask;
    sigprocmask(SIG_BLOCK, NULL, &mask);
    printf("sigset held: blocked=%d\n", sigismember(&mask, SIGXFSZ));
    show("read back sigset held", SIGXFSZ);
    before = plain_runs;
    raise(SIGXFSZ);
    printf("sigset raised while held: plain=%d\n", plain_runs - before);
    before2 = plain2_runs;
    prev = sigset(SIGXFSZ, on_plain2);
    printf("sigset after hold: prev=%s pending ran: plain=%d plain2=%d\n", name_of(prev),
           plain_runs - before, plain2_runs - before2);
    sigprocmask(SIG_BLOCK, NULL, &mask);
    printf("sigset released: blocked=%d\n", sigismember(&mask, SIGXFSZ));
    show("read back sigset", SIGXFSZ);
    before2 = plain2_runs;
    raise(SIGXFSZ);
    printf("sigset raised: plain2=%d\n", plain2_runs - before2);
    prev = sigset(SIGXFSZ, SIG_DFL);
    printf("sigset to SIG_DFL: prev=%s\n", name_of(prev));
#pragma GCC diagnostic pop

    int bad[] = {0, SIGKILL, SIGSTOP, 65, -1};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_plain;
        errno = 0;
        int rc = sigaction(bad[i], &sa, NULL);
        int e1 = errno;
        errno = 0;
        void (*s)(int) = signal(bad[i], on_plain);
        printf("bad %d: sigaction rc=%d errno=%d signal=%s errno=%d\n", bad[i], rc, e1, name_of(s),
               errno);
    }
    errno = 0;
    printf("read SIGKILL: rc=%d errno=%d\n", sigaction(SIGKILL, NULL, &old), errno);

    /* A vfork child shares the parent's memory (not its handlers) until it exits: a handler
     * it installs must not become the parent's. */
    signal(SIGALRM, on_plain2);
    pid_t vp = vfork();
    if (vp == 0) {
        signal(SIGALRM, on_plain);
        _exit(0);
    }
    waitpid(vp, NULL, 0);
    int p1 = plain_runs, p2 = plain2_runs;
    raise(SIGALRM);
    printf("after a vfork child's handler: plain=%d plain2=%d\n", plain_runs - p1, plain2_runs - p2);
    show("read back after the vfork child", SIGALRM);

    pid_t pid = fork();
    if (pid == 0) {
        raise(SIGUSR1);
        _exit(info_runs == 3 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child: exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    printf("sig_semantics: done\n");
    return 0;
}
