/* zoo_fp8.c: fp8 GEMM kernels (D = scale_a scale_b op(A) op(B) + beta C, A and B fp8 values):
 * defects of the kinds fp8 kernels ship with, and honest forms. */
#include "zoo.h"

/* A GEMM of the fp8 op with a rounding applied to the running sum after each product (the
 * accumulator's format) and to A's values as read (the format the kernel loads A in). */
typedef float (*fp8_round_fn)(float);

static float keep(float x)
{
    return x;
}

static void fp8_gemm(const peat_args *a, fp8_round_fn acc, fp8_round_fn in_a, int use_sb,
                     int64_t promote)
{
    zoo_gemm g = zoo_gemm_of(a);
    g.alpha = (float)a->p.f[0] * (use_sb ? (float)a->p.f[2] : 1.0f);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f, part = 0.0f;
                for (int64_t k = 0; k < g.K; k++) {
                    part = acc(part + in_a(zoo_a(a, &g, b, i, k)) * zoo_b(a, &g, b, k, j));
                    if (promote && (k + 1) % promote == 0) s += part, part = 0.0f;
                }
                zoo_store(a, &g, b, i, j, s + part);
            }
}

/* An accumulator that keeps 14 significand bits (fp32's exponent range): the limited-precision
 * accumulation of fp8 tensor-core MMA on Hopper, without promotion to fp32. */
static float acc14(float x)
{
    return zoo_round(x, 14, -126, 127);
}

static float e5m2(float x)
{
    return zoo_round(x, 3, -14, 15);
}

static peat_status fast_accum(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    fp8_gemm(a, acc14, keep, 1, 0);
    return PEAT_OK;
}

static peat_status acc_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    fp8_gemm(a, zoo_bf16, keep, 1, 0);
    return PEAT_OK;
}

static peat_status scale_b_dropped(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    fp8_gemm(a, keep, keep, 0, 0);
    return PEAT_OK;
}

/* A read as e5m2 whatever its declared format: an e4m3 A loses its last mantissa bit */
static peat_status a_as_e5m2(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    fp8_gemm(a, keep, e5m2, 1, 0);
    return PEAT_OK;
}

/* honest: fp32 partial sums of 32 products added into an fp32 total (a split accumulation, as
 * kernels that promote their MMA partials every few K blocks do) */
static peat_status promoted(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    fp8_gemm(a, keep, keep, 1, 32);
    return PEAT_OK;
}

int zoo_register_fp8(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_gemm_fp8_fast_accum", PEAT_OP_GEMM_FP8, fast_accum,
                   "fp8 GEMM accumulating in 14 significand bits, never promoted, declares fp32"),
        ZOO_KERNEL("zoo_gemm_fp8_acc_bf16", PEAT_OP_GEMM_FP8, acc_bf16,
                   "fp8 GEMM accumulating in bf16, declares fp32"),
        ZOO_KERNEL("zoo_gemm_fp8_no_scale_b", PEAT_OP_GEMM_FP8, scale_b_dropped,
                   "fp8 GEMM applying scale_a only"),
        ZOO_KERNEL("zoo_gemm_fp8_a_as_e5m2", PEAT_OP_GEMM_FP8, a_as_e5m2,
                   "fp8 GEMM reading A as e5m2 whatever its format (e4m3 loses a bit)"),
        ZOO_KERNEL("zoo_gemm_fp8_promoted", PEAT_OP_GEMM_FP8, promoted,
                   "honest: fp32 partial sums of 32 products added into the fp32 total"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
