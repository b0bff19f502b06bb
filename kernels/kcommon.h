/* kcommon.h: private helpers shared by the candidate kernel files of kernels/ (not public). */
#ifndef PEAT_KERNELS_KCOMMON_H
#define PEAT_KERNELS_KCOMMON_H

#include "peat/peat.h"

#include <stdint.h>

/* Candidates read F32 (or I32 index) storage and write F32: peat_op_check lets F64 stand in for
 * F32, so this is the candidate's own refusal of storage it was not written for. */
peat_status peat_kernels_io_check(const peat_args *a, const peat_kernel *self);

/* Strided read-only view of a matrix: element (i, j) is p[i * rs + j * cs]. Transposes and the
 * im2col/col2im layouts become stride choices instead of copies. */
typedef struct peat_kernels_view {
    const float *p;
    int64_t rs, cs;
} peat_kernels_view;

/* The largest register tile tile_m * tile_n the blocked GEMM keeps on the stack. */
#define PEAT_KERNELS_TILE_MAX 4096

/* C[M,N] (row-major, leading dimension ldc) = A[M,K] B[K,N] (+ C when accumulate), fp32.
 * Cache-blocked like a BLIS macro-kernel: each tile_m x tile_n block of C is computed one
 * tile_k slice of K at a time into a zeroed register tile that is then added to C, so the sum
 * over K is a sum of per-slice partial sums (a different order from the sequential loop). */
peat_status peat_kernels_gemm_blocked(int64_t M, int64_t N, int64_t K, peat_kernels_view A,
                                      peat_kernels_view B, float *C, int64_t ldc, int accumulate,
                                      const peat_kernel_config *cfg);

/* A host candidate on fp32 storage, fp32 accumulation, one thread, no vector width. */
#define PEAT_KERNELS_F32(nm, opk, fn_, d)                                                          \
    {                                                                                              \
        .name = nm, .op = opk, .role = PEAT_ROLE_CANDIDATE, .backend = PEAT_BACKEND_HOST,          \
        .in_dtype = PEAT_DTYPE_F32, .out_dtype = PEAT_DTYPE_F32, .acc_dtype = PEAT_DTYPE_F32,      \
        .cfg = {.threads = 1, .vec_width = 1}, .fn = fn_, .desc = d                                \
    }

/* Registers n descriptors, stopping at the first refusal. */
peat_status peat_kernels_add_all(const peat_kernel *ks, int n);

#endif
