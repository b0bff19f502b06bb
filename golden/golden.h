/* golden.h: exact (fp64-accumulating) references and golden working-precision kernels. */
#ifndef PEAT_GOLDEN_H
#define PEAT_GOLDEN_H

#include "peat/peat.h"

/* Registers every exact and golden kernel of every op. */
peat_status peat_golden_register(void);

/* Per-element magnitude of the computation of output o of call a: for a reduction, the sum of
 * |terms| (for GEMM sum_k |alpha a_ik b_kj| + |beta c_ij|), so that the classic rounding bound is
 * |x_hat - x| <= gamma_depth * mag. Ops without a reduction return |exact value| (pass exact in).
 * mag must have numel(out o) elements. */
peat_status peat_golden_magnitude(const peat_args *a, int o, const peat_tensor *exact_out,
                                  double *mag);

/* How many comparably sized, independently rounded terms make up each element of output o: the
 * K of a dot product or sum (GEMM, conv, reductions, gradient sums over rows), 1 where an
 * element's error is dominated by its own inputs (elementwise ops, softmax, layernorm outputs,
 * attention's softmax-weighted average). The analyzer's effective-precision scale is
 * mag / sqrt(terms); the rigorous bound keeps the op's depth. */
int64_t peat_golden_terms(const peat_args *a, int o);

/* The golden GEMM (gemm_golden): OpenBLAS's sgemm on one thread when built with it and
 * PEAT_BLAS is not 0, else the plain loop (gemm_plain: each element summed over k in order). */
peat_status peat_golden_gemm_blas_run(const peat_args *a, const peat_kernel *self);
peat_status peat_golden_gemm_plain_run(const peat_args *a, const peat_kernel *self);
/* What the golden GEMM runs on, for the campaign's /meta and the report: "OpenBLAS 0.3.21 (core
 * Zen, 1 thread)" or "none (plain loop)". */
const char *peat_golden_blas_describe(void);
/* 1 when the golden GEMM is the BLAS's sgemm (built in and PEAT_BLAS not 0). */
int peat_golden_gemm_blas_on(void);
/* The golden GEMM's own library on a K range of one batch entry (the band's library orders,
 * inject/gemm.c): D = alpha op(A)[:, k0:k1] op(B)[k0:k1, :] + beta D, op(A) M x K and op(B) K x N
 * stored as the gemm op stores them (row-major, transposed when tA / tB), D M x N row-major and
 * not read when beta is 0. Through sgemm (one thread, as the golden) when the golden is the BLAS,
 * else each element summed over k in order in fp32, as the plain golden does. */
void peat_golden_gemm_krange(int tA, int tB, int64_t M, int64_t N, int64_t K, int64_t k0,
                             int64_t k1, float alpha, const float *A, const float *B, float beta,
                             float *D);

/* The golden conv2d directions (golden/conv_blas.c): im2col / col2im around the golden GEMM's
 * library (peat_golden_gemm_krange). */
peat_status peat_golden_conv2d_blas_run(const peat_args *a, const peat_kernel *self);
peat_status peat_golden_conv2d_bwd_data_blas_run(const peat_args *a, const peat_kernel *self);
peat_status peat_golden_conv2d_bwd_filter_blas_run(const peat_args *a, const peat_kernel *self);

/* Registration helpers used by each op's file. */
peat_status peat_golden_register_gemm(void);
peat_status peat_golden_register_nn(void); /* conv, bias, relu, gelu, softmax, layernorm,
                                            * embedding, cross-entropy, reduce */
peat_status peat_golden_register_attention(void);
peat_status peat_golden_register_optim(void); /* adamw, sgd */
peat_status peat_golden_register_rmsnorm(void);
peat_status peat_golden_register_silu(void); /* silu, swiglu */
peat_status peat_golden_register_rope(void);
peat_status peat_golden_register_batchnorm(void);
peat_status peat_golden_register_pool(void); /* maxpool2d, avgpool2d */

#endif
