/* plugin_static_scratch.c: test plugin with a GEMM that is not reentrant: it sums into one static
 * scratch buffer and keeps a static call counter, as kernels with a global workspace do; two
 * calls at once would overwrite each other's sums. It counts the calls that found another inside.
 */
#include "peat/plugin.h"

#include <stdatomic.h>
#include <stdint.h>

#define SCRATCH (1 << 16)

static float scratch[SCRATCH];
static atomic_int inside;
static atomic_long overlaps;
static long calls; /* plain read-modify-write: only right when calls never overlap */

/* For the test: calls that started while another call was running, and calls made. */
long scratch_gemm_overlaps(void)
{
    return atomic_load(&overlaps);
}
long scratch_gemm_calls(void)
{
    return calls;
}

static peat_status scratch_gemm(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    if (atomic_fetch_add(&inside, 1) != 0) atomic_fetch_add(&overlaps, 1);
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5] > 0 ? a->p.i[5] : 1;
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    peat_status st = PEAT_OK;
    for (int64_t b = 0; b < B && st == PEAT_OK; b++) {
        if (M * N > SCRATCH) {
            st = PEAT_ERR_UNSUPPORTED;
            break;
        }
        const float *A = (const float *)a->in[0]->data + b * M * K;
        const float *Bm = (const float *)a->in[1]->data + b * K * N;
        const float *C = beta != 0.0f ? (const float *)a->in[2]->data + b * M * N : NULL;
        float *D = (float *)a->out[0]->data + b * M * N;
        for (int64_t i = 0; i < M * N; i++) scratch[i] = 0.0f;
        for (int64_t k = 0; k < K; k++) /* k outermost: the scratch holds partial sums long */
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    scratch[i * N + j] +=
                        (tA ? A[k * M + i] : A[i * K + k]) * (tB ? Bm[j * K + k] : Bm[k * N + j]);
        for (int64_t i = 0; i < M * N; i++)
            D[i] = C ? alpha * scratch[i] + beta * C[i] : alpha * scratch[i];
    }
    long c = calls;
    calls = c + 1;
    atomic_fetch_sub(&inside, 1);
    return st;
}

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    /* flags 0: not reentrant, the default */
    static const peat_kernel k = {.name = "test_gemm_static_scratch",
                                  .op = PEAT_OP_GEMM,
                                  .backend = "cpu",
                                  .in_dtype = PEAT_DTYPE_F32,
                                  .out_dtype = PEAT_DTYPE_F32,
                                  .acc_dtype = PEAT_DTYPE_F32,
                                  .fn = scratch_gemm,
                                  .desc = "test: GEMM summing into a static scratch buffer"};
    return host->register_kernel(&k) != PEAT_OK;
}
