/* direct_like: memory allocated by libthirdparty.so, which links libcuda directly. */
#include "client_util.h"

int main(void) {
    step("thirdparty init", thirdparty_init(), 0);
    step("thirdparty cuMemAlloc_v2 16MiB", thirdparty_alloc(16 * MiB), 0);
    step("thirdparty cuMemCreate 8MiB", thirdparty_vmm(8 * MiB), 0);
    step("thirdparty free all", thirdparty_free_all(), 0);
    return finish("direct_like");
}
