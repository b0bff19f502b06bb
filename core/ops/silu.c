/* silu.c: SiLU (x sigmoid(x)) and the SwiGLU product (silu(G) U, the gated MLP of LLaMA-style
 * models) with their backward ops: elementwise; the references are golden/silu.c. */
#include "core/opdesc.h"

#include <math.h>

/* ---- shapes: i = n ---- */

static peat_status swiglu_check(const peat_args *a)
{
    static const char *in[] = {"G", "U", "dY"}, *out[] = {"Y", "dG", "dU"};
    PEAT_TRY(peat_op_positive(a, 1));
    int64_t n = a->p.i[0];
    for (int k = 0; k < a->n_in; k++)
        PEAT_TRY(peat_op_expect(a, a->in[k], in[k], PEAT_DTYPE_F32, n));
    int bwd = a->op == PEAT_OP_SWIGLU_BWD;
    for (int k = 0; k < a->n_out; k++)
        PEAT_TRY(peat_op_expect(a, a->out[k], out[bwd + k], PEAT_DTYPE_F32, n));
    return PEAT_OK;
}
static peat_status swiglu_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    int n_out = a->op == PEAT_OP_SWIGLU_BWD ? 2 : 1;
    for (int k = 0; k < n_out; k++) peat_op_out_shape(nd, s, k, 1, a->p.i[0], 0, 0, 0);
    return PEAT_OK;
}

/* ---- rounding bound (docs/bounds.md, "SiLU") ----
 * sigmoid s = 1 / (1 + exp(-x)): exp (2), the add and the divide; in the exp2 form of fused
 * kernels (exp2(-x log2 e)) the argument's product and log2 e's rounding as well, which exp
 * amplifies by |x| and the sigmoid damps by 1 - s; in the tanh form an absolute error of about
 * u (s_rel): s's relative error / u. Below x = -80 the
 * sigmoid leaves fp32's normal range (exp(-x) overflows at -88.7): an honest fp32 kernel may lose
 * the whole (tiny) value there, and the bound allows it. */
#define SILU_LOST (-80.0)
static double s_rel(double x, double s)
{
    /* the tanh form (1 + tanh(x/2)) / 2 (XLA's logistic, fused kernels' fast sigmoid): tanh's
     * rounding, up to u |t| with t = 2s - 1, is absolute once 1 + t cancels, so s keeps an
     * absolute error of about u, not a relative one, and below x = -17 the whole value (under
     * u) may be lost: |1 - 2s| / s more units (at most 1 above x = 0) */
    double tanh_form = s > 0.0 ? fabs(1.0 - 2.0 * s) / s : 0.0;
    return 4.0 + 3.0 * fabs(x) * (1.0 - s) + tanh_form;
}
static double lost(double x)
{
    return x < SILU_LOST ? 16777216.0 : 0.0;
}
static double sigm(double x)
{
    return 1.0 / (1.0 + exp(-x));
}
/* error / u of c = 1 + x (1 - s) with s's error s R u: (1 - s), x (1 - s), the add */
static double c_err(double x, double s, double R)
{
    double c = 1.0 + x * (1.0 - s);
    return fabs(x) * (s * R + 2.0 * fabs(1.0 - s)) + fabs(c);
}

static peat_status silu_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                            const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)o, (void)exact_out;
    for (int64_t i = 0; i < n; i++) {
        double x = in->x[0][i], s = sigm(x), y = fabs(x * s);
        mag[i] = y * (1.0 + s_rel(x, s)) + y * lost(x);
    }
    return PEAT_OK;
}

/* dX = dY s c: s's error, c's, the two products */
static peat_status silu_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                                const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)o, (void)exact_out;
    for (int64_t i = 0; i < n; i++) {
        double x = in->x[0][i], dy = fabs(in->x[1][i]), s = sigm(x), R = s_rel(x, s);
        double c = fabs(1.0 + x * (1.0 - s));
        mag[i] = dy * (s * c * (R + 2.0) + s * c_err(x, s, R)) + dy * s * c * lost(x);
    }
    return PEAT_OK;
}

/* Y = silu(G) U: silu's error and one more product */
static peat_status swiglu_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                              const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)o, (void)exact_out;
    for (int64_t i = 0; i < n; i++) {
        double g = in->x[0][i], s = sigm(g), y = fabs(g * s * in->x[1][i]);
        mag[i] = y * (2.0 + s_rel(g, s)) + y * lost(g);
    }
    return PEAT_OK;
}

/* dG = dY U s c (three products), dU = dY g s (two) */
static peat_status swiglu_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                                  const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)exact_out;
    for (int64_t i = 0; i < n; i++) {
        double g = in->x[0][i], u = fabs(in->x[1][i]), dy = fabs(in->x[2][i]);
        double s = sigm(g), R = s_rel(g, s), c = fabs(1.0 + g * (1.0 - s));
        if (o == 1) {
            double d = dy * fabs(g) * s;
            mag[i] = d * (2.0 + R) + d * lost(g);
        } else {
            mag[i] = dy * u * (s * c * (R + 3.0) + s * c_err(g, s, R)) + dy * u * s * c * lost(g);
        }
    }
    return PEAT_OK;
}

/* ---- probes: inputs spread to +-20 (the sigmoid saturates) and +-100 (exp(-x) overflows
 * below -88.7: a kernel that divides exp(x) by 1 + exp(x) gives inf / inf there), exact zeros
 * ---- */

static peat_status silu_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    PEAT_TRY(peat_op_probe_zeros(s, rec, 0));
    double m = peat_op_maxabs(rec->in[0]);
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value x spread to +-20", 0,
                                  20.0 / m, 0.0));
    return peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value x spread to +-100", 0,
                                100.0 / m, 0.0);
}

static void swiglu_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                          peat_dtype dt[])
{
    peat_op_ew_inputs2(p, n_in, nd, s, dt);
}
static void swiglu_bwd_inputs(const peat_op_params *p, int *n_in, int nd[],
                              int64_t s[][PEAT_MAX_DIMS], peat_dtype dt[])
{
    int k = 0;
    for (int r = 0; r < 3; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

const peat_op_desc peat_opd_silu = {
    .info = {PEAT_OP_SILU, "silu", 1, 1, 1, 0, peat_op_ew_check, peat_op_ew_shapes,
             peat_op_depth_one, peat_op_ew_flops},
    .magnitude = silu_mag,
    .terms = peat_op_terms_one,
    .probes = silu_probes,
    .range_low = 1u << 0, /* X: silu(x) = x / 2 near 0 */
    .range_high = 1u << 0,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_ew_cal,
    .input_shapes = peat_op_ew_inputs1,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "silu,silu_",
};

const peat_op_desc peat_opd_silu_bwd = {
    .info = {PEAT_OP_SILU_BWD, "silu_bwd", 2, 2, 1, 1, peat_op_ew_check, peat_op_ew_shapes,
             peat_op_depth_one, peat_op_ew_flops},
    .magnitude = silu_bwd_mag,
    .terms = peat_op_terms_one,
    .probes = silu_probes,
    .range_low = 1u << 1, /* dY */
    .range_high = 1u << 1,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_ew_cal,
    .input_shapes = peat_op_ew_inputs2,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "silu_backward",
};

/* no aten op of its own: PyTorch computes silu(g) * u (the bridge maps the silu) */
const peat_op_desc peat_opd_swiglu = {
    .info = {PEAT_OP_SWIGLU, "swiglu", 2, 2, 1, 0, swiglu_check, swiglu_shapes, peat_op_depth_one,
             peat_op_ew_flops},
    .magnitude = swiglu_mag,
    .terms = peat_op_terms_one,
    .probes = silu_probes,
    .range_low = 1u << 1,            /* U: Y scales with it */
    .range_high = 1u << 0 | 1u << 1, /* G and U */
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_ew_cal,
    .input_shapes = swiglu_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "",
};

const peat_op_desc peat_opd_swiglu_bwd = {
    .info = {PEAT_OP_SWIGLU_BWD, "swiglu_bwd", 3, 3, 2, 1, swiglu_check, swiglu_shapes,
             peat_op_depth_one, peat_op_ew_flops},
    .magnitude = swiglu_bwd_mag,
    .terms = peat_op_terms_one,
    .probes = silu_probes,
    .range_low = 1u << 2, /* dY */
    .range_high = 1u << 2,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_ew_cal,
    .input_shapes = swiglu_bwd_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "",
};
