/* heldout.h: shared pieces of the held-out defect set (the C files of tests/heldout/, built as
 * libpeat_heldout.so): plugin kernels written apart from the zoo and without knowledge of the
 * detector's rules, each with the class its defect should read as in tests/heldout/manifest.tsv
 * (set by construction; only the one-off scoring reads it). The rounding and GEMM operand helpers
 * are the zoo's (zoo_round, zoo_f16, zoo_bf16, zoo_gemm_of, zoo_a, zoo_b, zoo_store,
 * zoo_upset_draw, ZOO_KERNEL); the pieces below are the ones the zoo has no helper for. */
#ifndef PEAT_HELDOUT_H
#define PEAT_HELDOUT_H

#include "../zoo/zoo.h"

#include <float.h>

/* A kernel's arguments: input k and output k as fp32, integer and float parameter k. */
#define IN(k)  ((const float *)a->in[k]->data)
#define OUT(k) ((float *)a->out[k]->data)
#define PI(k)  (a->p.i[k])
#define PF(k)  (a->p.f[k])

static inline uint32_t ho_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float ho_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
/* x to bf16's 8 significand bits, toward zero (call it on an unconditional path: GCC 12.2 at
 * -O1/-O2 folds `c ? ho_bf16_rz(x) : x` to x) */
static inline float ho_bf16_rz(float x)
{
    return ho_from_bits(ho_bits(x) & 0xffff0000u);
}
/* x to fp16's 11 significand bits, toward zero (normal range; the same caution) */
static inline float ho_f16_rz(float x)
{
    return ho_from_bits(ho_bits(x) & 0xffffe000u);
}
static inline double ho_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}
/* x with bit `bit` inverted (a transient upset) */
static inline float ho_flip(float x, int bit)
{
    return ho_from_bits(ho_bits(x) ^ (1u << bit));
}
/* x with bit `bit` forced to `value` (a stuck-at fault) */
static inline float ho_force(float x, int bit, int value)
{
    uint32_t u = ho_bits(x);
    return ho_from_bits(value ? u | (1u << bit) : u & ~(1u << bit));
}

/* A subnormal flushed to a zero of its sign (what FTZ/DAZ hardware modes do). */
static inline float ho_ftz(float x)
{
    return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

/* s rounded to fp32 toward zero: the nearest float, stepped toward zero when it lies farther from
 * zero than s (past FLT_MAX: FLT_MAX, as RZ never overflows to Inf). */
static inline float ho_rz(double s)
{
    if (!isfinite(s)) return (float)s;
    if (fabs(s) > (double)FLT_MAX) return s > 0 ? FLT_MAX : -FLT_MAX;
    float f = (float)s;
    if (fabs((double)f) > fabs(s)) f = nextafterf(f, 0.0f);
    return f;
}
/* a + b and a * b + c with one round-toward-zero (the double forms them exactly or within far
 * less than an fp32 ulp) */
static inline float ho_add_rz(float a, float b)
{
    return ho_rz((double)a + (double)b);
}
static inline float ho_fma_rz(float a, float b, float c)
{
    return ho_rz((double)a * (double)b + (double)c);
}

/* A small generator for per-call permutations (seeded from zoo_upset_draw). */
static inline uint64_t ho_next(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* perm[0..n-1] a random permutation of 0..n-1 (Fisher-Yates) from seed */
static inline void ho_shuffle(int64_t *perm, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(ho_next(&seed) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

static inline int64_t ho_numel(const peat_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* Registers n kernels: 0 on success. */
static inline int ho_register(const peat_plugin_host *host, const peat_kernel *ks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}

int ho_register_gemm(const peat_plugin_host *host);
int ho_register_conv(const peat_plugin_host *host);
int ho_register_nn(const peat_plugin_host *host);
int ho_register_gelu(const peat_plugin_host *host);
int ho_register_norm(const peat_plugin_host *host);
int ho_register_softmax(const peat_plugin_host *host);
int ho_register_attention(const peat_plugin_host *host);
int ho_register_optim(const peat_plugin_host *host);
int ho_register_state(const peat_plugin_host *host);

#endif
