/* stdio_lines [buffered|line|unbuffered]: SGLang's startup lines, each printed through another
 * stdio function (printf, fprintf, vfprintf, puts, fputs, fwrite, fwrite_unlocked, putc,
 * putchar, fputc, dprintf), to stdout and stderr. Built twice: as is, and with
 * -O2 -D_FORTIFY_SOURCE=2 (stdio_lines_chk), where the printf family becomes the __*_chk forms.
 * "buffered" leaves stdout as glibc sets it (fully buffered on a pipe or file). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *stamp = "2025-06-01 10:00:00";

static void vlog(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
}

static void char_by_char(const char *s, FILE *f, int use_putchar) {
    for (; *s; s++) {
        if (use_putchar) putchar(*s);
        else if (f == stderr) fputc(*s, f);
        else putc(*s, f);
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "buffered";
    if (!strcmp(mode, "unbuffered")) setvbuf(stdout, NULL, _IONBF, 0);
    else if (!strcmp(mode, "line")) setvbuf(stdout, NULL, _IOLBF, 0);
    fprintf(stderr, "[%s TP0] Init torch distributed begin.\n", stamp);
    puts("[2025-06-01 10:00:01 TP0] Init torch distributed ends. mem usage=0.58 GB");
    printf("[%s TP0] Load weight begin. avail mem=%.2f GB\n", stamp, 78.68);
    fputs("Loading safetensors checkpoint shards: 100% Completed | 4/4\r", stdout);
    fputs("[2025-06-01 10:00:04 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
          "avail mem=63.57 GB, mem usage=15.11 GB.\n",
          stdout);
    const char *kv = "[2025-06-01 10:00:04 TP0] KV Cache is allocated. #tokens: 444500, K size: 27.13 GB, "
                     "V size: 27.13 GB\n";
    fwrite(kv, 1, strlen(kv), stdout);
    char_by_char("[2025-06-01 10:00:04 TP0] Memory pool end. avail mem=8.40 GB\n", stdout, 0);
    char_by_char("[2025-06-01 10:00:05 TP0] Capture cuda graph begin. This can take up to several minutes. "
                 "avail mem=7.88 GB\n",
                 stdout, 1);
    char_by_char("[2025-06-01 10:00:20 TP0] Capture cuda graph end. Time elapsed: 15.21 s. mem usage=0.60 GB. "
                 "avail mem=7.28 GB.\n",
                 stderr, 0);
    const char *other = "an unrelated line that mentions nothing\n";
    fwrite_unlocked(other, 1, strlen(other), stdout);
    vlog(stdout,
         "[%s TP0] max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, "
         "max_running_requests=%d, context_len=%d, available_gpu_mem=%.2f GB\n",
         stamp, 444500, 8192, 16384, 4096, 131072, 7.28);
    dprintf(1, "dprintf after serving: %d\n", 1);
    errno = ENOENT;
    fprintf(stderr, "errno as text: %m\n");
    /* A stream that is neither stdout nor stderr is never looked at. */
    FILE *other_file = fopen("/dev/null", "w");
    if (other_file) {
        fprintf(other_file, "[%s TP0] Init torch distributed begin.\n", stamp);
        fclose(other_file);
    }
    /* errno survives a failed stdio call under the preload. */
    errno = 0;
    int rc = fputs("x", (FILE *)fopen("/proc/self/status", "r"));
    fprintf(stderr, "fputs to a read-only stream: rc=%d errno=%d\n", rc, errno);
    return 0;
}
