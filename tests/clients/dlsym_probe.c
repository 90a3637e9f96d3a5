/* dlsym_probe: which library answers dlsym(RTLD_DEFAULT, name) for every name vramledger hooks,
 * before and after the driver is loaded. With VRAMLEDGER_DISABLE=1 the answers must be those of
 * a run without the preload. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *where(void *p) {
    Dl_info info;
    if (!p) return "NULL";
    if (!dladdr(p, &info) || !info.dli_fname) return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static const char *names[] = {"cuInit",         "cuMemAlloc_v2", "cuMemFree_v2", "cuGetProcAddress_v2",
                              "cuMemGetInfo_v2", "ncclMemAlloc",  "write",        "fprintf",
                              "puts",            "fwrite",        "__printf_chk", "dlsym",
                              NULL};

int main(void) {
    for (int i = 0; names[i]; i++) printf("before %s: %s\n", names[i], where(dlsym(RTLD_DEFAULT, names[i])));
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return 2;
    for (int i = 0; names[i]; i++) printf("after %s: %s\n", names[i], where(dlsym(RTLD_DEFAULT, names[i])));
    printf("cuInit(RTLD_DEFAULT) is the driver's: %d\n", dlsym(RTLD_DEFAULT, "cuInit") == dlsym(h, "cuInit"));
    return 0;
}
