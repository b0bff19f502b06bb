/* adamw.c: the AdamW step (decoupled weight decay; outputs param', m', v', which may alias the
 * inputs). */
#include "core/opdesc.h"

#include <math.h>
#include <string.h>

#define P(k) (a->p.i[k])

static peat_status adamw_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 1));
    if (P(1) < 1) return PEAT_ERROR(PEAT_ERR_SHAPE, "adamw: step must be >= 1");
    static const char *an[] = {"param", "grad", "m", "v"};
    for (int k = 0; k < 4; k++) PEAT_TRY(peat_op_expect(a, a->in[k], an[k], PEAT_DTYPE_F32, P(0)));
    for (int k = 0; k < a->n_out; k++)
        PEAT_TRY(peat_op_expect(a, a->out[k], "out", PEAT_DTYPE_F32, P(0)));
    return PEAT_OK;
}
static peat_status adamw_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    for (int k = 0; k < 3; k++) peat_op_out_shape(nd, s, k, 1, P(0), 0, 0, 0);
    return PEAT_OK;
}
static double adamw_flops(const peat_op_params *p)
{
    return 12.0 * p->i[0];
}

/* ---- optimizers (depth 1: mag is the whole error / u) ----
 * The rule is the union over the orders frameworks ship (docs/bounds.md): the golden's
 * p - lr (mhat / (sqrt(vhat) + eps) + wd p); PyTorch's single-tensor and foreach orders (decay
 * p (1 - lr wd) first, m.lerp_(g, 1 - b1), v b2 + (1 - b2) g g, sqrt(v) / sqrt(bc2) + eps,
 * p + (-lr / bc1) m / denom); its fused kernel (p -= lr wd p, m = b1 m + (1 - b1) g). Each
 * intermediate is charged the largest rounding count any of them gives it, and a scalar formed
 * per call (lr / bc1, sqrt(bc2), 1 - lr wd) up to 3 roundings. A GPU kernel gets its
 * hyperparameters as fp32 and forms 1 - b1, 1 - b2 and the bias corrections 1 - b^t from them:
 * b's own rounding (u |b|, t times through b^t, and powf's) is then amplified by 1 / (1 - b)
 * (apex's FusedAdam: 1 - 0.999f is 1.3e-5 off 0.001, 217 u), which each coefficient carries. */

#define R_SCALAR 3.0

/* The relative error / u of 1 - b^t formed in fp32 from an fp32 b: b's rounding, t times
 * through the power, powf's own where t > 1, over 1 - b^t; 1 for the subtraction. */
static double one_minus_pow_err(double b, double t)
{
    double bt = pow(fabs(b), t), d = fabs(1.0 - pow(b, t));
    return d > 0.0 ? 1.0 + (t + (t > 1.0)) * bt / d : 0.0;
}

/* A call's scalars: the hyperparameters, the coefficients, the bias corrections and each one's
 * own error / u (formed once per call, not per element). */
typedef struct adamw_k {
    double lr, b1, b2, eps, wd, c1, c2, bc1, bc2, r1, r2, rb1, rb2;
} adamw_k;

static adamw_k adamw_k_of(const peat_args *a)
{
    adamw_k k = {
        .lr = a->p.f[0], .b1 = a->p.f[1], .b2 = a->p.f[2], .eps = a->p.f[3], .wd = a->p.f[4]};
    double t = (double)a->p.i[1];
    k.c1 = 1.0 - k.b1, k.c2 = 1.0 - k.b2;
    k.bc1 = 1.0 - pow(k.b1, t), k.bc2 = 1.0 - pow(k.b2, t);
    k.r1 = one_minus_pow_err(k.b1, 1.0), k.r2 = one_minus_pow_err(k.b2, 1.0);
    /* lr / bc1 with bc1's own error; sqrt(bc2) with half of bc2's */
    k.rb1 = fmax(R_SCALAR, one_minus_pow_err(k.b1, t));
    k.rb2 = fmax(R_SCALAR, 0.5 * one_minus_pow_err(k.b2, t));
    return k;
}

/* m' = b1 m + c1 g (fused) or m + c1 (g - m) (lerp: the difference, the weight's rounding, the
 * product, the add), c1 with its own error: the larger error / u. */
static double adamw_em(const adamw_k *k, double m, double g, double m1)
{
    double fused = 2.0 * fabs(k->b1 * m) + (1.0 + k->r1) * fabs(k->c1 * g) + fabs(m1);
    double lerp = (2.0 + k->r1) * fabs(k->c1 * (g - m)) + fabs(m1);
    return fused > lerp ? fused : lerp;
}

/* The error / u of p' given the moments m1, v1 and their errors em, ev. */
static double adamw_ep(const adamw_k *k, double p, double m1, double v1, double em, double ev)
{
    double lr = k->lr, eps = k->eps, wd = k->wd, bc2 = k->bc2;
    /* sq = sqrt(v1 / bc2), either as sqrt(v / bc2) or sqrt(v) / sqrt(bc2): v's error halved, the
     * divide, sqrt and the rounded scalar */
    double sq = sqrt(v1 / bc2), den = sq + eps;
    double esq = (v1 > 0.0 ? 0.5 * ev / sqrt(v1 * bc2) : 0.0) + (2.0 + k->rb2) * sq;
    double eden = esq + fabs(eps) + den; /* eps's rounding and the add */
    /* U = (lr / bc1) m / den in any grouping: m's error, den's, the scalars and two operations */
    double step = fabs(lr / k->bc1), U = step * m1 / den;
    double eU = step * em / den + fabs(U) * (eden / den + 2.0 + R_SCALAR + k->rb1);
    /* decay: golden lr (q + wd p) (wd p rounded twice, the inner add, the lr product), or
     * p (1 - lr wd) / p - (lr wd) p first (the scalar and the product at |p|) */
    double pd = p * (1.0 - lr * wd), inner = fabs(U / lr + wd * p);
    double edec = 2.0 * fabs(pd) + fabs(lr * wd * p) * (2.0 + R_SCALAR) + 2.0 * fabs(lr) * inner;
    return edec + eU + fabs(pd - U);
}

static peat_status adamw_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n_out,
                             const peat_tensor *exact_out, double *mag)
{
    (void)n_out, (void)exact_out;
    int64_t n = a->p.i[0];
    adamw_k k = adamw_k_of(a);
    for (int64_t i = 0; i < n; i++) {
        double p = in->x[0][i], g = in->x[1][i], m = in->x[2][i], v = in->x[3][i];
        /* v' = b2 v + c2 g g (every order: the two coefficients, c2 with b2's own error, the
         * products, the add) */
        double m1 = k.b1 * m + k.c1 * g, v1 = k.b2 * v + k.c2 * g * g;
        double em = adamw_em(&k, m, g, m1);
        double ev = 2.0 * fabs(k.b2 * v) + (2.0 + k.r2) * fabs(k.c2 * g * g) + fabs(v1);
        mag[i] = o == 1 ? em : o == 2 ? ev : adamw_ep(&k, p, m1, v1, em, ev);
    }
    return PEAT_OK;
}

/* a tiny second moment, huge gradients, and g = m = v = 0 */
static peat_status adamw_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_SUBNORMAL,
                                  "value tiny second moment (v x 1e-30)", 3, 1e-30, 0.0));
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW,
                                  "value huge gradients (g x 1e12)", 1, 1e12, 0.0));
    peat_args *p = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                       "value zero gradient and moments (g = m = v = 0)");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "adamw probe");
    for (int k = 1; k < 4; k++)
        memset(peat_op_probe_f32(p, k), 0, (size_t)peat_op_probe_numel(p, k) * sizeof(float));
    return PEAT_OK;
}

static void adamw_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 2, (int64_t[]){16 * n * n + off, 1});
    p->f[0] = 1e-3, p->f[1] = 0.9, p->f[2] = 0.999, p->f[3] = 1e-8, p->f[4] = 0.01;
}
static void adamw_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                         peat_dtype dt[])
{
    int k = 0;
    for (int r = 0; r < 4; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

/* No generic range probe: a dozen roundings an element, where the bound of a depth-1 op allows
 * two units of 2^-150 (its own tiny-moment probe), and its own huge-gradient probe. */
const peat_op_desc peat_opd_adamw = {
    .info = {PEAT_OP_ADAMW, "adamw", 4, 4, 3, 0, adamw_check, adamw_shapes, peat_op_depth_one,
             adamw_flops},
    .magnitude = adamw_mag,
    .terms = peat_op_terms_one,
    .probes = adamw_probes,
    .range_low = 0,
    .range_high = 0,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = adamw_cal,
    .input_shapes = adamw_inputs,
    .positive_inputs = 1u << 3, /* v */
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "_fused_adamw_",
};
