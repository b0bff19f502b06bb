/* amp.c: mixed-precision training of the flows as autocast and GradScaler do it: fp16 or bf16
 * inputs and outputs of the GEMM-shaped ops, fp32 elsewhere, dynamic loss scaling for fp16. */
#include "models/flow_impl.h"
#include "core/opdesc.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const precision_names[PEAT_PRECISIONS] = {"fp32", "amp-fp16", "bf16", "fp8"};

const char *peat_models_flow_precision_name(int precision)
{
    return precision >= 0 && precision < PEAT_PRECISIONS ? precision_names[precision] : "?";
}

peat_status peat_models_flow_precision_parse(const char *name, int *precision)
{
    for (int p = 0; p < PEAT_PRECISIONS; p++)
        if (name && strcmp(name, precision_names[p]) == 0) {
            *precision = p;
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_INVAL, "unknown precision '%s' (fp32, amp-fp16, bf16 or fp8)",
                      name ? name : "");
}

/* fp32 -> fp16 -> fp32 (core/dtype.c's peat_round_f16), with a fast path where the result is an
 * fp16 normal: for |x| in [2^-14, 65520) (and for 0) round-to-nearest-even on the 13 dropped
 * significand bits of the fp32 pattern, a carry into the exponent included, is the same number
 * (tested against peat_round_f16 on every 4093rd fp32 pattern and around each fp16 tie). */
static inline uint32_t f16_fast_bits(uint32_t u)
{
    return (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
}

/* Outside the fast path: nonzero below fp16's normals (subnormal in fp16), overflow, inf, NaN. */
static inline int f16_slow(uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    return (a - 1u) < 0x387fffffu || a >= 0x477ff000u;
}

static inline float round_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (f16_slow(u)) return peat_round_f16(x);
    u = f16_fast_bits(u);
    memcpy(&x, &u, sizeof x);
    return x;
}

/* round_f16 over n values (x == y allowed), in blocks whose fast pass vectorises; the few values
 * outside the fast path are redone from a copy of the block. */
static void round_f16_n(const float *x, float *y, int64_t n)
{
    enum { BLK = 256 };
    uint32_t in[BLK];
    for (int64_t b = 0; b < n; b += BLK) {
        int m = n - b < BLK ? (int)(n - b) : BLK, slow = 0;
        memcpy(in, x + b, (size_t)m * sizeof *in);
        uint32_t out[BLK];
        for (int i = 0; i < m; i++) {
            slow |= f16_slow(in[i]);
            out[i] = f16_fast_bits(in[i]);
        }
        memcpy(y + b, out, (size_t)m * sizeof *out);
        for (int i = 0; slow && i < m; i++)
            if (f16_slow(in[i])) {
                float v;
                memcpy(&v, &in[i], sizeof v);
                y[b + i] = peat_round_f16(v);
            }
    }
}

/* core/dtype.c's peat_round_bf16 written out so that the loop vectorises: round to nearest even
 * on the 16 dropped bits (a carry into the exponent or to inf included), NaN kept quiet. */
static void round_bf16_n(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
        uint32_t r =
            nan ? (u & 0xffff0000u) | 0x00400000u : (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&y[i], &r, sizeof r);
    }
}

float peat_models_amp_round(const peat_flow_t *f, float x)
{
    switch (f->cfg.precision) {
    case PEAT_PRECISION_AMP_FP16:
        return round_f16(x);
    case PEAT_PRECISION_BF16:
        round_bf16_n(&x, &x, 1);
        return x;
    default:
        return x;
    }
}

/* y[i] = the flow's rounding of x[i] (x == y allowed): the switch outside the loop. */
static void round_n(const peat_flow_t *f, const float *x, float *y, int64_t n)
{
    if (f->cfg.precision == PEAT_PRECISION_AMP_FP16)
        round_f16_n(x, y, n);
    else if (f->cfg.precision == PEAT_PRECISION_BF16)
        round_bf16_n(x, y, n);
}

/* Which inputs autocast casts to half (bit i) and which outputs it returns in half (bit i) for
 * an op on its lower-precision list; 0 and 0 for ops it runs in fp32 (softmax, layernorm, the
 * loss, the optimizer) or leaves in their input's type (elementwise ops: they run in fp32 on the
 * half values they are given; docs/flows.md). */
static void cast_masks(const peat_args *a, unsigned *in, unsigned *out)
{
    const peat_op_desc *d = peat_op_desc_get(a->op);
    *in = *out = 0;
    if (d) d->amp_masks(a, in, out);
}

/* A rounded copy of t in scratch slot k (reallocated when its shape differs). */
/* A rounded copy of t in scratch slot k: a buffer kept from call to call (grown when too small;
 * a new allocation per call cost more than the rounding, in page faults), viewed with t's shape. */
static peat_status cast_copy(peat_flow_t *f, int k, const peat_tensor *t, const peat_tensor **out)
{
    peat_models_amp *m = &f->amp;
    int64_t n = peat_tensor_numel(t);
    if (n > m->cap[k]) {
        float *b = realloc(m->buf[k], (size_t)n * sizeof *b);
        if (!b) return PEAT_ERROR(PEAT_ERR_NOMEM, "amp: cast copy of %lld floats", (long long)n);
        m->buf[k] = b, m->cap[k] = n;
    }
    peat_tensor *c = &m->cast[k];
    *c = *t;
    c->data = m->buf[k];
    round_n(f, peat_f32(t), m->buf[k], n);
    *out = c;
    return PEAT_OK;
}

peat_status peat_models_exec(peat_flow_t *f, const char *layer, peat_phase ph, peat_args *a)
{
    unsigned in_mask = 0, out_mask = 0;
    if (f->cfg.precision == PEAT_PRECISION_AMP_FP16 || f->cfg.precision == PEAT_PRECISION_BF16)
        cast_masks(a, &in_mask, &out_mask);
    for (int k = 0; k < a->n_in; k++)
        if ((in_mask >> k & 1u) && a->in[k] && a->in[k]->dtype == PEAT_DTYPE_F32)
            PEAT_TRY(cast_copy(f, k, a->in[k], &a->in[k]));
    PEAT_TRY(peat_exec_op(f->ex, layer, ph, a));
    for (int k = 0; k < a->n_out; k++)
        if ((out_mask >> k & 1u) && a->out[k] && a->out[k]->dtype == PEAT_DTYPE_F32) {
            float *y = peat_f32(a->out[k]);
            round_n(f, y, y, peat_tensor_numel(a->out[k]));
        }
    return PEAT_OK;
}

/* fp8 current scaling of t into scratch slot k: the power of two s with max|t| / s at most the
 * format's largest, the copy's values t / s rounded to the format. */
peat_status peat_models_fp8_quantize(peat_flow_t *f, int k, const peat_tensor *t, int fmt,
                                     const peat_tensor **out, double *scale)
{
    peat_models_amp *m = &f->amp;
    int64_t n = peat_tensor_numel(t);
    if (n > m->cap[k]) {
        float *b = realloc(m->buf[k], (size_t)n * sizeof *b);
        if (!b)
            return PEAT_ERROR(PEAT_ERR_NOMEM, "fp8: quantized copy of %lld floats", (long long)n);
        m->buf[k] = b, m->cap[k] = n;
    }
    const float *x = peat_f32(t);
    float amax = 0.0f;
    int finite = 1;
    for (int64_t i = 0; i < n; i++) {
        amax = fmaxf(amax, fabsf(x[i]));
        finite &= isfinite(x[i]) != 0;
    }
    int e = 0;
    if (finite && amax > 0.0f) e = (int)ceil(log2((double)amax / peat_fp8_max(fmt)));
    double inv = ldexp(1.0, -e); /* exact: x / s is a scaling by a power of two */
    /* an Inf or NaN operand (a diverging run) has no scale: the copy is NaN, as current
     * scaling's Inf amax makes it, and the run's loss shows it */
    for (int64_t i = 0; i < n; i++)
        m->buf[k][i] = finite ? peat_round_fp8((float)(x[i] * inv), fmt) : NAN;
    peat_tensor *c = &m->cast[k];
    *c = *t;
    c->data = m->buf[k];
    *out = c;
    *scale = ldexp(1.0, e);
    return PEAT_OK;
}

double peat_models_amp_loss_scale(const peat_flow_t *f)
{
    return f->cfg.precision == PEAT_PRECISION_AMP_FP16 ? f->amp.scale : 1.0;
}

/* GradScaler: growth factor 2, backoff 0.5 (the interval and the first scale are options). */
#define AMP_GROWTH  2.0
#define AMP_BACKOFF 0.5

int peat_models_amp_unscale_update(peat_flow_t *f)
{
    if (f->cfg.precision != PEAT_PRECISION_AMP_FP16) return 0;
    /* unscale_: every gradient times the fp32 reciprocal of the scale, inf/nan looked for in the
     * results */
    float inv = (float)(1.0 / f->amp.scale);
    int found_inf = 0;
    for (int i = 0; i < f->n_params; i++) {
        float *g = peat_f32(f->params[i]->g);
        for (int64_t e = 0, n = peat_tensor_numel(f->params[i]->g); e < n; e++) {
            g[e] *= inv;
            found_inf |= !isfinite(g[e]);
        }
    }
    /* update() */
    if (found_inf) {
        f->amp.scale *= AMP_BACKOFF;
        f->amp.tracker = 0;
        f->amp.skipped++;
    } else if (++f->amp.tracker >= f->cfg.loss_scale_interval) {
        f->amp.scale *= AMP_GROWTH;
        f->amp.tracker = 0;
    }
    return found_inf;
}

void peat_models_amp_free(peat_flow_t *f)
{
    for (int k = 0; k < PEAT_MAX_IO; k++) {
        free(f->amp.buf[k]);
        f->amp.buf[k] = NULL, f->amp.cap[k] = 0;
    }
}

double peat_models_flow_loss_scale(const peat_flow_t *f)
{
    return f ? peat_models_amp_loss_scale(f) : 1.0;
}

int64_t peat_models_flow_skipped_steps(const peat_flow_t *f)
{
    return f ? f->amp.skipped : 0;
}
