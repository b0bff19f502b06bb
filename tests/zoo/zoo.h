/* zoo.h: shared pieces of the defect zoo: plugin-style kernels whose defects sit inside their
 * arithmetic (tests/zoo/manifest.tsv says which class each should read; only scoring uses it). */
#ifndef PEAT_ZOO_H
#define PEAT_ZOO_H

#include "peat/plugin.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Rounds to a binary format with p significand bits and exponent range [emin, emax]
 * (round to nearest even, gradual underflow, Inf past the largest finite value). */
static inline float zoo_round(float x, int p, int emin, int emax)
{
    if (x == 0.0f || !isfinite(x)) return x;
    int e = (int)floor(log2(fabs((double)x)));
    if (e < emin) e = emin;
    double q = ldexp(nearbyint(ldexp((double)x, p - 1 - e)), e - (p - 1));
    double maxv = ldexp(2.0 - ldexp(1.0, 1 - p), emax);
    if (fabs(q) > maxv) return x > 0 ? INFINITY : -INFINITY;
    return (float)q;
}
static inline float zoo_f16(float x)
{
    return zoo_round(x, 11, -14, 15);
}
static inline float zoo_bf16(float x)
{
    return zoo_round(x, 8, -126, 127);
}
/* TF32: 11 significant bits, fp32's exponent range */
static inline float zoo_tf32(float x)
{
    return zoo_round(x, 11, -126, 127);
}

/* GEMM operand access: op(A)[i][k] and op(B)[k][j] of batch entry b. */
typedef struct zoo_gemm {
    int tA, tB;
    int64_t M, N, K, B;
    float alpha, beta;
} zoo_gemm;

static inline zoo_gemm zoo_gemm_of(const peat_args *a)
{
    zoo_gemm g = {(int)a->p.i[0],   (int)a->p.i[1],  a->p.i[2],
                  a->p.i[3],        a->p.i[4],       a->p.i[5] > 0 ? a->p.i[5] : 1,
                  (float)a->p.f[0], (float)a->p.f[1]};
    return g;
}
static inline float zoo_a(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t k)
{
    const float *A = (const float *)a->in[0]->data + b * g->M * g->K;
    return g->tA ? A[k * g->M + i] : A[i * g->K + k];
}
static inline float zoo_b(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t k, int64_t j)
{
    const float *Bm = (const float *)a->in[1]->data + b * g->K * g->N;
    return g->tB ? Bm[j * g->K + k] : Bm[k * g->N + j];
}
/* Writes alpha*s + beta*C into D[b][i][j]. */
static inline void zoo_store(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t j,
                             float s)
{
    float *D = (float *)a->out[0]->data + b * g->M * g->N;
    const float *C = g->beta != 0.0f ? (const float *)a->in[2]->data + b * g->M * g->N : NULL;
    D[i * g->N + j] = C ? g->alpha * s + g->beta * C[i * g->N + j] : g->alpha * s;
}

#define ZOO_KERNEL(nm, opk, f, d)                                                                  \
    {                                                                                              \
        .name = nm, .op = opk, .role = PEAT_ROLE_CANDIDATE, .backend = "cpu",                      \
        .in_dtype = PEAT_DTYPE_F32, .out_dtype = PEAT_DTYPE_F32, .acc_dtype = PEAT_DTYPE_F32,      \
        .fn = f, .desc = d                                                                         \
    }

int zoo_register_gemm(const peat_plugin_host *host);
int zoo_register_conv(const peat_plugin_host *host);
int zoo_register_softmax(const peat_plugin_host *host);
int zoo_register_layernorm(const peat_plugin_host *host);
int zoo_register_attention(const peat_plugin_host *host);
int zoo_register_honest_optim(const peat_plugin_host *host);
int zoo_register_honest_nn(const peat_plugin_host *host);
int zoo_register_latent(const peat_plugin_host *host);
int zoo_register_honest_bwd(const peat_plugin_host *host);
int zoo_register_formula(const peat_plugin_host *host);
int zoo_register_transient(const peat_plugin_host *host);
int zoo_register_views(const peat_plugin_host *host);
int zoo_register_state(const peat_plugin_host *host);
int zoo_register_rmsnorm(const peat_plugin_host *host);
int zoo_register_silu(const peat_plugin_host *host);
int zoo_register_rope(const peat_plugin_host *host);
int zoo_register_gqa(const peat_plugin_host *host);
int zoo_register_resnet(const peat_plugin_host *host);
int zoo_register_fp8(const peat_plugin_host *host);

/* A fresh draw for each call of a transient defect (whether this call is hit, and where): a
 * per-process call counter mixed with the process id through SplitMix64, so a repeated call
 * (or the same call in another process) is hit elsewhere or not at all, as a clock would have
 * it, without asking for the time. Each file that calls it counts its own calls. */
static inline uint64_t zoo_upset_draw(void)
{
    static _Atomic uint64_t calls;
    uint64_t h = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) ^ (uint64_t)getpid()
                                                                                  << 32;
    h += 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

#endif
