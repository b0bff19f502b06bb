/* hip.h: maps the CUDA runtime and cuBLAS names used by PEAT's GPU source onto HIP/hipBLAS, so
 * one .cu file builds for NVIDIA (nvcc) and AMD (hipcc). Without hipBLAS the golden GEMM is the
 * reference device kernel (PEAT_HAVE_VENDOR_BLAS stays undefined). */
#ifndef PEAT_VENDORS_HIP_H
#define PEAT_VENDORS_HIP_H

#include <hip/hip_runtime.h>
#if __has_include(<hipblas/hipblas.h>)
#include <hipblas/hipblas.h>
#define PEAT_HAVE_VENDOR_BLAS 1
#elif __has_include(<hipblas.h>)
#include <hipblas.h>
#define PEAT_HAVE_VENDOR_BLAS 1
#endif

#define PEAT_GPU_BACKEND_NAME "hip"
#define PEAT_GPU_BLAS_NAME    "hipBLAS"
#define PEAT_GPU_CAPS         (PEAT_BACKEND_CAP_CLOCK_ROCM_SMI | PEAT_BACKEND_CAP_WAVE64)

#define cudaError_t                     hipError_t
#define cudaSuccess                     hipSuccess
#define cudaGetErrorString              hipGetErrorString
#define cudaGetDeviceCount              hipGetDeviceCount
#define cudaGetDeviceProperties         hipGetDeviceProperties
#define cudaDeviceProp                  hipDeviceProp_t
#define cudaDeviceGetAttribute          hipDeviceGetAttribute
#define cudaDevAttrMemoryClockRate      hipDeviceAttributeMemoryClockRate
#define cudaDevAttrGlobalMemoryBusWidth hipDeviceAttributeMemoryBusWidth
#define cudaDevAttrClockRate            hipDeviceAttributeClockRate
#define cudaSetDevice                   hipSetDevice
#define cudaMalloc                      hipMalloc
#define cudaFree                        hipFree
#define cudaMemset                      hipMemset
#define cudaMemcpy                      hipMemcpy
#define cudaMemcpyHostToDevice          hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost          hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice        hipMemcpyDeviceToDevice
#define cudaDeviceSynchronize           hipDeviceSynchronize
#define cudaGetLastError                hipGetLastError
#define cudaEvent_t                     hipEvent_t
#define cudaEventCreate                 hipEventCreate
#define cudaEventRecord                 hipEventRecord
#define cudaEventSynchronize            hipEventSynchronize
#define cudaEventElapsedTime            hipEventElapsedTime
#define cudaEventDestroy                hipEventDestroy
#define cudaStream_t                    hipStream_t
#define cudaStreamCreate                hipStreamCreate
#define cudaStreamDestroy               hipStreamDestroy
#define cudaStreamSynchronize           hipStreamSynchronize
#define cudaMemsetAsync                 hipMemsetAsync
#define cudaMemcpyAsync                 hipMemcpyAsync
#define cudaLaunchKernel                hipLaunchKernel

#ifdef PEAT_HAVE_VENDOR_BLAS
#define cublasHandle_t            hipblasHandle_t
#define cublasStatus_t            hipblasStatus_t
#define cublasCreate              hipblasCreate
#define cublasDestroy             hipblasDestroy
#define cublasSgemm               hipblasSgemm
#define cublasSgemmStridedBatched hipblasSgemmStridedBatched
#define cublasSetStream           hipblasSetStream
#define cublasSetMathMode(h, m)   HIPBLAS_STATUS_SUCCESS
#define CUBLAS_STATUS_SUCCESS     HIPBLAS_STATUS_SUCCESS
#define CUBLAS_OP_N               HIPBLAS_OP_N
#define CUBLAS_OP_T               HIPBLAS_OP_T
#endif

#endif
