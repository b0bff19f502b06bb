/* plugin_test_gemms.c: test plugin with deliberately broken GEMMs (corrupt element, crash, hang),
 * one that regresses on request (bf16 operands when PEAT_TEST_REGRESS=1, for `peat diff`), and the
 * sequential fp32 GEMM with its defects (the last k term dropped, bf16 operands) that
 * examples/calls_harness.py computes the same way in numpy (tests/calls: `peat judge` against
 * `peat run --plugin`). */
#include "peat/plugin.h"

#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* x rounded to bf16 (nearest even) and back: what a kernel reading bf16 operands sees. */
static float bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static float operand(float x, int round_bf16)
{
    return round_bf16 ? bf16(x) : x;
}

/* D = alpha op(A) op(B) + beta C summed over k in order in fp32 (no FMA: -std=c11), operands
 * rounded to bf16 when rb, the last k term left out when drop. */
static void gemm_ref_r(const peat_args *a, int rb, int drop)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    for (int64_t b = 0; b < B; b++) {
        const float *A = (const float *)a->in[0]->data + b * M * K;
        const float *Bm = (const float *)a->in[1]->data + b * K * N;
        const float *C = beta != 0.0f ? (const float *)a->in[2]->data + b * M * N : NULL;
        float *D = (float *)a->out[0]->data + b * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < K - drop; k++)
                    s += operand(tA ? A[k * M + i] : A[i * K + k], rb) *
                         operand(tB ? Bm[j * K + k] : Bm[k * N + j], rb);
                D[i * N + j] = C ? alpha * s + beta * C[i * N + j] : alpha * s;
            }
    }
}

static void gemm_ref(const peat_args *a)
{
    gemm_ref_r(a, 0, 0);
}

/* fp32 as declared; with PEAT_TEST_REGRESS=1 the operands are silently rounded to bf16: the
 * "last night passed, tonight regressed" kernel of the diff and baseline tests. */
static peat_status gemm_nightly(const peat_args *a, const peat_kernel *self)
{
    const char *r = getenv("PEAT_TEST_REGRESS");
    gemm_ref_r(a, r && !strcmp(r, "1"), 0);
    return PEAT_OK;
}

static peat_status gemm_dropk(const peat_args *a, const peat_kernel *self)
{
    gemm_ref_r(a, 0, 1);
    return PEAT_OK;
}

static peat_status gemm_bf16_operands(const peat_args *a, const peat_kernel *self)
{
    gemm_ref_r(a, 1, 0);
    return PEAT_OK;
}

/* Correct except one output element per call, which is off by far more than rounding. */
static peat_status gemm_corrupt(const peat_args *a, const peat_kernel *self)
{
    gemm_ref(a);
    float *D = (float *)a->out[0]->data;
    int64_t n = a->p.i[2] * a->p.i[3];
    int64_t idx = n / 3;
    D[idx] = D[idx] * 1.5f + (D[idx] >= 0 ? 0.25f : -0.25f);
    return PEAT_OK;
}

static peat_status gemm_crash(const peat_args *a, const peat_kernel *self)
{
    raise(SIGSEGV);
    return PEAT_OK;
}

static peat_status gemm_hang(const peat_args *a, const peat_kernel *self)
{
    for (;;) pause();
    return PEAT_OK;
}

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        {.name = "test_gemm_corrupt",
         .op = PEAT_OP_GEMM,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = gemm_corrupt,
         .desc = "test: corrupts one output element per call"},
        {.name = "test_gemm_crash",
         .op = PEAT_OP_GEMM,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = gemm_crash,
         .desc = "test: segfaults"},
        {.name = "test_gemm_hang",
         .op = PEAT_OP_GEMM,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = gemm_hang,
         .desc = "test: never returns"},
        {.name = "test_gemm_nightly",
         .op = PEAT_OP_GEMM,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = gemm_nightly,
         .desc = "test: fp32 GEMM, bf16 operands when PEAT_TEST_REGRESS=1"},
        {.name = "test_gemm_dropk",
         .op = PEAT_OP_GEMM,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = gemm_dropk,
         .desc = "test: sequential fp32 GEMM without its last k term"},
        {.name = "test_gemm_bf16",
         .op = PEAT_OP_GEMM,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = gemm_bf16_operands,
         .desc = "test: sequential GEMM on bf16-rounded operands, declared fp32"},
    };
    for (unsigned i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
