/* nccl_like: NCCL-shaped VMM traffic from libnccl.so.2 (no cudart): internal device buffers and
 * a host-NUMA buffer, a legacy cuMemAlloc buffer, ncclMemAlloc, buffer and window registration,
 * then NCCL's free sequence for everything. */
#include "client_util.h"

/* This process reads memory through cudart only for the report (NCCL itself never uses it). */
int main(void) {
    ncclComm_t comm = NULL;
    step("nccl comm init", nccl_fake_comm_init(&comm, 0), 0);
    step("internal buffers 4 x 8MiB device + 1 host-NUMA", nccl_fake_internal_buffers(4, 8 * MiB), 0);
    step("legacy buffer cuMemAlloc 6MiB", nccl_fake_legacy_buffer(6 * MiB), 0);
    void *buf = NULL, *reg = NULL;
    ncclWindow_t win = NULL;
    step("ncclMemAlloc 10MiB", ncclMemAlloc(&buf, 10 * MiB), 0);
    step("ncclCommRegister", ncclCommRegister(comm, buf, 10 * MiB, &reg), 0);
    step("ncclCommWindowRegister", ncclCommWindowRegister(comm, buf, 10 * MiB, &win, 0), 0);
    step("ncclCommWindowDeregister", ncclCommWindowDeregister(comm, win), 0);
    step("ncclCommDeregister", ncclCommDeregister(comm, reg), 0);
    step("ncclMemFree", ncclMemFree(buf), 0);
    step("nccl free all", nccl_fake_free_all(), 0);
    step("nccl comm destroy", nccl_fake_comm_destroy(comm), 0);
    return finish("nccl_like");
}
