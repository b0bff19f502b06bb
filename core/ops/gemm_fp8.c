/* gemm_fp8.c: the fp8 GEMM op, D = scale_a scale_b op(A) op(B) + beta C with A and B fp8 values
 * (e4m3 or e5m2, held in F32) and fp32 accumulation (include/peat/plugin.h has the slots).
 *
 * Its bound is the fp8 format's own: a product of two fp8 values (at most 4 + 4 significand
 * bits) is exact in fp32, so an honest kernel's only roundings are the fp32 sums and the scales'
 * application: gamma_(K+2) of sum_k |scale_a scale_b a_ik b_kj| (+1 term with C). A kernel that
 * loses more than the format implies (a narrower accumulator, the inputs re-rounded to a coarser
 * format) is outside it. Probes: GEMM's shapes, and values at the format's ends (fp8 subnormal
 * inputs, products past fp16's range, scales that push the result to fp32's subnormals and to
 * its overflow, exact cancellation, small integers). */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>

#define P(k) (a->p.i[k])

static peat_status gemm_fp8_check(const peat_args *a)
{
    PEAT_TRY(peat_op_gemm_check(a));
    if ((P(6) != PEAT_FP8_E4M3 && P(6) != PEAT_FP8_E5M2) ||
        (P(7) != PEAT_FP8_E4M3 && P(7) != PEAT_FP8_E5M2))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "gemm_fp8: formats %lld, %lld (0 e4m3, 1 e5m2)",
                          (long long)P(6), (long long)P(7));
    double sa = a->p.f[0], sb = a->p.f[2];
    if (!(isfinite(sa) && sa > 0 && isfinite(sb) && sb > 0))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "gemm_fp8: scales %g, %g must be finite and positive", sa,
                          sb);
    return PEAT_OK;
}

/* K products summed in fp32, the scale product rounded and applied: K + 2 (+1 with C) */
static int64_t gemm_fp8_depth(const peat_op_params *p)
{
    return p->i[4] + 2 + (p->f[1] != 0.0);
}

/* ---- probes ---- */

/* The dequantized rms of the recorded A and B (values times scale), the formats, the largest K. */
typedef struct fp8_scale {
    double ra, rb;
    int fa, fb;
    int64_t kmax;
} fp8_scale;

static fp8_scale fp8_scale_of(const peat_record_list *recs)
{
    fp8_scale g = {0, 0, PEAT_FP8_E4M3, PEAT_FP8_E4M3, 1};
    int n = 0;
    for (int64_t i = 0; i < recs->n; i++) {
        const peat_record *r = recs->items[i];
        g.ra += peat_op_rms(r->in[0]) * r->p.f[0], g.rb += peat_op_rms(r->in[1]) * r->p.f[2];
        g.fa = (int)r->p.i[6], g.fb = (int)r->p.i[7], n++;
        if (r->p.i[4] > g.kmax) g.kmax = r->p.i[4];
    }
    g.ra = n && g.ra > 0 ? g.ra / n : 1.0, g.rb = n && g.rb > 0 ? g.rb / n : 1.0;
    return g;
}

/* Quantizes t in place to format fmt with the per-tensor scale current scaling picks (the
 * power of two that maps the largest |value| to at most the format's largest) and returns it. */
static double quantize(peat_tensor *t, int fmt)
{
    float *x = t->data;
    int64_t n = peat_tensor_numel(t);
    double amax = 0.0;
    for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs(x[i]));
    double s = amax > 0 ? ldexp(1.0, (int)ceil(log2(amax / peat_fp8_max(fmt)))) : 1.0;
    for (int64_t i = 0; i < n; i++) x[i] = peat_round_fp8((float)(x[i] / s), fmt);
    return s;
}

/* A GEMM probe (Gaussian A, B at the recorded scale) made an fp8 one: the formats set, A and B
 * quantized, alpha folded into scale_a. */
static peat_status to_fp8(peat_args *p, void *ctx)
{
    const fp8_scale *g = ctx;
    double alpha = p->p.f[0];
    p->op = PEAT_OP_GEMM_FP8;
    p->p.i[6] = g->fa, p->p.i[7] = g->fb;
    p->p.f[0] = alpha * quantize((peat_tensor *)p->in[0], g->fa);
    p->p.f[2] = quantize((peat_tensor *)p->in[1], g->fb);
    return PEAT_OK;
}

/* A 33x31x64 fp8 probe of the recorded formats with scales sa, sb (A and B quantized first). */
static peat_status value_probe(peat_probe_sink *s, peat_rng_t *r, const fp8_scale *g,
                               peat_probe_tag tag, const char *label, double sa, double sb,
                               peat_args **made)
{
    peat_op_gemm_shape shape = {33, 31, 64, 0, 0, 1, 1.0, 0.0};
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_VALUE, tag, label, shape, 1.0, 1.0, made));
    PEAT_TRY(to_fp8(*made, (void *)g));
    (*made)->p.f[0] = sa, (*made)->p.f[2] = sb;
    return PEAT_OK;
}

static peat_status fp8_values(peat_probe_sink *s, peat_rng_t *r, const fp8_scale *g)
{
    peat_args *p = NULL;
    /* A moved by a power of two to an rms of twice the format's smallest normal (2^-6 e4m3,
     * 2^-14 e5m2): about half its values subnormal in the format */
    PEAT_TRY(value_probe(s, r, g, PEAT_PROBE_TAG_SUBNORMAL,
                         "value fp8 subnormal inputs (A near the format's smallest normal)", 1.0,
                         1.0, &p));
    double tiny = ldexp(1.0, g->fa == PEAT_FP8_E5M2 ? -14 : -6);
    double shift = ldexp(1.0, (int)lround(log2(2 * tiny / peat_op_rms(p->in[0]))));
    float *x = peat_op_probe_f32(p, 0);
    for (int64_t i = 0; i < peat_op_probe_numel(p, 0); i++)
        x[i] = peat_round_fp8((float)(x[i] * shift), g->fa);
    p->p.f[0] = 1.0 / shift;
    PEAT_TRY(value_probe(s, r, g, PEAT_PROBE_TAG_SUBNORMAL,
                         "value subnormal fp32 results (scales 2^-76)", 0x1p-76, 0x1p-76, &p));
    PEAT_TRY(value_probe(s, r, g, PEAT_PROBE_TAG_OVERFLOW,
                         "value sums beyond fp16's 65504 (values at the format's largest)", 1.0,
                         1.0, &p));
    PEAT_TRY(value_probe(s, r, g, PEAT_PROBE_TAG_OVERFLOW, "value near fp32 overflow (scales 2^53)",
                         0x1p53, 0x1p53, &p));
    /* the second half of each row of A the negation of its first, B's halves equal: terms that
     * cancel to exactly 0 */
    PEAT_TRY(value_probe(s, r, g, PEAT_PROBE_TAG_CANCEL, "value exact cancellation (+x and -x)",
                         1.0, 1.0, &p));
    float *a = peat_op_probe_f32(p, 0), *b = peat_op_probe_f32(p, 1);
    int64_t M = p->p.i[2], N = p->p.i[3], K = p->p.i[4];
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = K / 2; k < K; k++) a[i * K + k] = -a[i * K + k - K / 2];
    for (int64_t k = K / 2; k < K; k++)
        for (int64_t j = 0; j < N; j++) b[k * N + j] = b[(k - K / 2) * N + j];
    /* integers in [-8, 8]: fp8 values of both formats whose sums are exact in fp32 */
    PEAT_TRY(value_probe(s, r, g, PEAT_PROBE_TAG_EXACT,
                         "value exactly representable sums (integers)", 1.0, 1.0, &p));
    for (int k = 0; k < 2; k++) {
        float *v = peat_op_probe_f32(p, k);
        double top = peat_op_maxabs(p->in[k]);
        for (int64_t i = 0; i < peat_op_probe_numel(p, k); i++)
            v[i] = nearbyintf(fmaxf(-8, fminf(8, (float)(16 * v[i] / top))));
    }
    return PEAT_OK;
}

static peat_status gemm_fp8_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    peat_rng_t *r = peat_rng_new(seed ^ 0x6670386765ull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    fp8_scale g = fp8_scale_of(recs);
    peat_status st = peat_op_gemm_shape_probes(s, r, g.ra, g.rb, g.kmax, to_fp8, &g);
    if (st == PEAT_OK) st = fp8_values(s, r, &g);
    peat_rng_free(r);
    return st;
}

static void gemm_fp8_cal(int n, int off, peat_op_params *p)
{
    peat_op_gemm_cal(n, off, p);
    p->i[6] = p->i[7] = PEAT_FP8_E4M3;
    p->f[2] = 1.0;
}

const peat_op_desc peat_opd_gemm_fp8 = {
    .info = {PEAT_OP_GEMM_FP8, "gemm_fp8", 2, 3, 1, 0, gemm_fp8_check, peat_op_gemm_out_shapes,
             gemm_fp8_depth, peat_op_gemm_flops},
    .magnitude = peat_op_gemm_mag,
    .terms = peat_op_terms_depth,
    .probes = gemm_fp8_probes,
    .range_low = 0,
    .range_high = 0,
    .perm = peat_op_gemm_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = gemm_fp8_cal,
    .input_shapes = peat_op_gemm_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_of,
    .amp_masks = peat_op_amp_none,
    .aten = "_scaled_mm",
};
