/* The exported C API of the fake libraries built from tests/clients: libcudart.so.13,
 * libc10_cuda.so, libcublas.so.13, libnccl.so.2 and libthirdparty.so. The cudart functions return
 * cudaError_t values, which for every code used here equal the driver's CUresult numbers. */
#ifndef FAKE_LIBS_H
#define FAKE_LIBS_H
#include <stddef.h>

typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;

/* libcudart.so.13 */
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
cudaError_t cudaMalloc(void **devPtr, size_t size);
cudaError_t cudaFree(void *devPtr);
cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream);
cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void *ptr);
cudaError_t cudaMemGetInfo(size_t *free, size_t *total);
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, int mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaThreadExchangeStreamCaptureMode(int *mode);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t minBytesToKeep);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, int attr, void *value);
/* driverStatus may be NULL (cudaDriverEntryPointQueryResult: 0 success, 1 not found, 2 version). */
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags, int *driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, int *driverStatus);

/* libc10_cuda.so: a PyTorch-like caching allocator on top of cudart and driver entry points. */
void *c10_alloc(size_t size);       /* NULL on failure, see c10_last_error() */
int c10_free(void *ptr);            /* back to the cache; 0, or -1 for an unknown pointer */
int c10_empty_cache(void);          /* cudaFree every cached, unused default-pool segment */
int c10_segment_count(void);        /* segments held (default and private pools) */
int c10_last_error(void);
int c10_capture_begin(void);        /* cudaStreamBeginCapture(own stream, GLOBAL) */
void *c10_capture_alloc(size_t size); /* private-pool segment: RELAXED mode + cudaMalloc */
int c10_capture_end(void);          /* cudaStreamEndCapture */
int c10_graph_reset(void);          /* cudaGraphDestroy + cudaFree of the private-pool segments */
int c10_expandable_map(size_t bytes);       /* large segment, 20 MiB pages */
int c10_expandable_map_small(size_t bytes); /* small segment, 2 MiB pages */
int c10_expandable_unmap(void);             /* cuMemUnmap + cuMemRelease per page, both segments */
int c10_expandable_release(void);           /* unmap, then cuMemAddressFree of both reservations */

/* libcublas.so.13 */
int cublas_fake_init_workspace(size_t size);
int cublas_fake_destroy(void);

/* libnccl.so.2 (ncclResult_t: 0 success, 1 unhandled CUDA error, 4 invalid argument) */
typedef void *ncclComm_t;
typedef void *ncclWindow_t;
int nccl_fake_comm_init(ncclComm_t *comm, int device);
int nccl_fake_comm_destroy(ncclComm_t comm);
int ncclMemAlloc(void **ptr, size_t size);
int ncclMemFree(void *ptr);
int ncclCommRegister(ncclComm_t comm, void *buff, size_t size, void **handle);
int ncclCommDeregister(ncclComm_t comm, void *handle);
int ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags);
int ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
int nccl_fake_internal_buffers(int n, size_t size); /* n device buffers + one HOST_NUMA buffer */
int nccl_fake_legacy_buffer(size_t size);           /* cuMemAlloc (NCCL_CUMEM_ENABLE=0 style) */
int nccl_fake_free_all(void);                       /* NCCL's free sequence; cuMemFree for legacy */

/* libthirdparty.so */
int thirdparty_init(void);
int thirdparty_alloc(size_t size);
int thirdparty_vmm(size_t size);
int thirdparty_free_all(void);
#endif
