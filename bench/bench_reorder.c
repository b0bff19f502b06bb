/* bench_reorder.c: how fast the runtime band's reorder GEMMs (inject/gemm_rows.c, gemm_lib.c) run
 * beside the golden GEMM (OpenBLAS, or the plain loop), the plain loop and the candidate gemm_new,
 * on gpt base's GEMM shapes: thread CPU milliseconds a call and GFLOP/s. */
#include "inject/internal.h"
#include "core/clock.h"
#include "harness/runtime/builtin.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
    return peat_clock_thread_cpu();
}

typedef struct shape {
    int64_t M, N, K;
    int tA, tB;
    const char *what;
} shape;

/* One row: each GEMM's best of `reps` calls (CPU time of this thread). */
static void row(const shape *s, int reps)
{
    peat_tensor *A = NULL, *B = NULL, *D = NULL;
    if (peat_tensor_alloc2(PEAT_DTYPE_F32, s->tA ? s->K : s->M, s->tA ? s->M : s->K, &A) ||
        peat_tensor_alloc2(PEAT_DTYPE_F32, s->tB ? s->N : s->K, s->tB ? s->K : s->N, &B) ||
        peat_tensor_alloc2(PEAT_DTYPE_F32, s->M, s->N, &D)) {
        printf("%s: %s\n", s->what, peat_error_last());
        return;
    }
    peat_rng_t *r = peat_rng_new(1);
    peat_rng_fill_gaussian(r, A, 1.0);
    peat_rng_fill_gaussian(r, B, 1.0);
    peat_rng_free(r);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = s->tA, p.i[1] = s->tB, p.i[2] = s->M, p.i[3] = s->N, p.i[4] = s->K, p.i[5] = 1;
    p.f[0] = 1.0;
    const peat_tensor *in[2] = {A, B};
    peat_tensor *out[1] = {D};
    peat_args a = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, out);
    double flop = 2.0 * (double)(s->M * s->N * s->K);
    printf("%-26s", s->what);
    static const char *const kernels[] = {"gemm_golden", "gemm_plain", "gemm_new"};
    for (int k = 0; k < 3; k++) {
        const peat_kernel *kn = peat_registry_find(kernels[k]);
        double best = 1e30;
        for (int i = 0; kn && i < reps; i++) {
            double t0 = cpu_now();
            if (peat_kernel_run(kn, &a) != PEAT_OK) break;
            double t = cpu_now() - t0;
            best = t < best ? t : best;
        }
        printf(" %7.2f %5.1f", best * 1e3, flop / best / 1e9);
    }
    static const peat_inject_order orders[] = {PEAT_ORDER_FORWARD,    PEAT_ORDER_REVERSE,
                                               PEAT_ORDER_PAIRWISE,   PEAT_ORDER_SPLIT,
                                               PEAT_ORDER_BLAS_SPLIT, PEAT_ORDER_BLAS_PAIRWISE};
    for (int o = 0; o < 6; o++) {
        peat_inject_gemm_variant v;
        memset(&v, 0, sizeof v);
        v.order = orders[o], v.split = 4, v.block = 16;
        double best = 1e30;
        for (int i = 0; i < reps; i++) {
            double t0 = cpu_now();
            if (peat_inject_gemm(&a, &v) != PEAT_OK) break;
            double t = cpu_now() - t0;
            best = t < best ? t : best;
        }
        printf(" %7.2f %5.1f", best * 1e3, flop / best / 1e9);
    }
    printf("\n");
    peat_tensor_free(A);
    peat_tensor_free(B);
    peat_tensor_free(D);
}

int main(void)
{
    if (peat_runtime_builtin_init() != PEAT_OK) return 1;
    /* gpt base before its language-modelling task (batch 32 x 14 tokens = 448 rows, d 256, MLP
     * 1024, vocabulary 1024): forward, backward-data (op(B) transposed) and backward-weight (op(A)
     * transposed, K = 448) */
    static const shape shapes[] = {
        {448, 768, 256, 0, 0, "fwd qkv 448x768x256"},
        {448, 256, 1024, 0, 0, "fwd mlp2 448x256x1024"},
        {448, 256, 768, 0, 1, "bwd data 448x256x768 (B^T)"},
        {256, 1024, 448, 1, 0, "bwd weight 256x1024x448 (A^T)"},
    };
    printf("# one call, best of 5, thread CPU ms and GFLOP/s; golden: %s\n",
           peat_registry_find("gemm_golden") ? peat_registry_find("gemm_golden")->desc : "?");
    printf("%-26s %13s %13s %13s %13s %13s %13s %13s %13s %13s\n", "shape M x N x K", "golden",
           "plain", "gemm_new", "forward", "reverse", "pairwise", "split 4", "blas_split 4",
           "blas_pw 16");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) row(&shapes[i], 5);
    return 0;
}
