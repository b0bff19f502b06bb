/* gemm_blas.c: the golden fp32 GEMM through a tuned BLAS (OpenBLAS's sgemm, threads pinned), as
 * cuBLAS is the golden on NVIDIA and CLBlast on OpenCL; the plain loop when no BLAS was built in.
 */
#include "golden/golden.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PEAT_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* One BLAS thread a call: PEAT runs calls and training runs side by side on its own threads, so
 * BLAS threads would only contend with them; and with a fixed thread count OpenBLAS picks the
 * same kernels and blocking on every call, so a run is bit-for-bit repeatable on its machine. */
#define GEMM_BLAS_THREADS 1

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static int blas_on;
static char blas_desc[128];

/* PEAT_BLAS=0 in the environment keeps the plain loop as the golden (what bench_scale's "before"
 * columns measure); anything else, or unset, uses the BLAS when one was built in. */
static void blas_init(void)
{
    const char *env = getenv("PEAT_BLAS");
    int off = env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0);
#ifdef PEAT_HAVE_OPENBLAS
    if (!off) {
        openblas_set_num_threads(GEMM_BLAS_THREADS);
        /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64": name and version first */
        char cfg[64];
        snprintf(cfg, sizeof cfg, "%s", openblas_get_config());
        char *sp = strchr(cfg, ' ');
        sp = sp ? strchr(sp + 1, ' ') : NULL;
        if (sp) *sp = 0;
        snprintf(blas_desc, sizeof blas_desc, "%s (core %s, %d thread%s)", cfg,
                 openblas_get_corename(), openblas_get_num_threads(),
                 openblas_get_num_threads() == 1 ? "" : "s");
        blas_on = 1;
        return;
    }
#endif
    snprintf(blas_desc, sizeof blas_desc, "none (plain loop%s)", off ? ", PEAT_BLAS=0" : "");
}

const char *peat_golden_blas_describe(void)
{
    pthread_once(&blas_once, blas_init);
    return blas_desc;
}

#ifdef PEAT_HAVE_OPENBLAS
/* alpha op(A) op(B) + beta C per batch entry; C is copied into the output first (sgemm updates
 * in place), and with beta == 0 it is not read, as the plain golden does not read it. */
static peat_status gemm_sgemm(const peat_args *a)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        float *D = peat_f32(a->out[0]) + b * M * N;
        if (beta != 0.0f) {
            const float *C = peat_f32(a->in[2]) + b * M * N;
            if (C != D) memmove(D, C, (size_t)(M * N) * sizeof *D);
        }
        cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, alpha, A, tA ? (int)M : (int)K, Bm,
                    tB ? (int)K : (int)N, beta, D, (int)N);
    }
    return PEAT_OK;
}
#endif

#ifdef PEAT_HAVE_OPENBLAS
/* sgemm takes int sizes and leading dimensions: anything larger goes to the plain loop. */
static int blas_fits(int64_t M, int64_t N, int64_t K)
{
    return blas_on && M < (1 << 30) && N < (1 << 30) && K < (1 << 30) && M * K < (1ll << 31) &&
           K * N < (1ll << 31) && M * N < (1ll << 31);
}
#endif

int peat_golden_gemm_blas_on(void)
{
    pthread_once(&blas_once, blas_init);
    return blas_on;
}

void peat_golden_gemm_krange(int tA, int tB, int64_t M, int64_t N, int64_t K, int64_t k0,
                             int64_t k1, float alpha, const float *A, const float *B, float beta,
                             float *D)
{
    pthread_once(&blas_once, blas_init);
#ifdef PEAT_HAVE_OPENBLAS
    if (blas_fits(M, N, K)) {
        /* op(A)[:, k0:k1] and op(B)[k0:k1, :] are sub-matrices with the whole operands' leading
         * dimensions; sgemm packs them, so where they start changes no bit */
        const float *As = tA ? A + k0 * M : A + k0, *Bs = tB ? B + k0 : B + k0 * N;
        cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)(k1 - k0), alpha, As, tA ? (int)M : (int)K, Bs,
                    tB ? (int)K : (int)N, beta, D, (int)N);
        return;
    }
#endif
    /* the plain golden's order: each element summed over k in order, then its epilogue; a row of
     * sums at a time (k outer, j inner) changes no element's order; without memory for the row,
     * element by element */
    float *s = malloc((size_t)(N + 1) * sizeof *s);
    for (int64_t i = 0; i < M; i++) {
        if (!s) {
            for (int64_t j = 0; j < N; j++) {
                float e = 0.0f;
                for (int64_t k = k0; k < k1; k++)
                    e += (tA ? A[k * M + i] : A[i * K + k]) * (tB ? B[j * K + k] : B[k * N + j]);
                D[i * N + j] = beta != 0.0f ? alpha * e + beta * D[i * N + j] : alpha * e;
            }
            continue;
        }
        for (int64_t j = 0; j < N; j++) s[j] = 0.0f;
        for (int64_t k = k0; k < k1; k++) {
            float a = tA ? A[k * M + i] : A[i * K + k];
            if (tB)
                for (int64_t j = 0; j < N; j++) s[j] += a * B[j * K + k];
            else
                for (int64_t j = 0; j < N; j++) s[j] += a * B[k * N + j];
        }
        for (int64_t j = 0; j < N; j++)
            D[i * N + j] = beta != 0.0f ? alpha * s[j] + beta * D[i * N + j] : alpha * s[j];
    }
    free(s);
}

peat_status peat_golden_gemm_blas_run(const peat_args *a, const peat_kernel *self)
{
    pthread_once(&blas_once, blas_init);
#ifdef PEAT_HAVE_OPENBLAS
    if (blas_fits(a->p.i[2], a->p.i[3], a->p.i[4])) return gemm_sgemm(a);
#endif
    return peat_golden_gemm_plain_run(a, self);
}
