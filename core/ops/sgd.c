/* sgd.c: the SGD step with momentum, weight decay and optional Nesterov (outputs param', mom',
 * which may alias the inputs). */
#include "core/opdesc.h"

#include <math.h>

#define P(k) (a->p.i[k])

static peat_status sgd_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 1));
    if (P(1) != 0 && P(1) != 1) return PEAT_ERROR(PEAT_ERR_SHAPE, "sgd: nesterov must be 0 or 1");
    static const char *sn[] = {"param", "grad", "mom"};
    for (int k = 0; k < 3; k++) PEAT_TRY(peat_op_expect(a, a->in[k], sn[k], PEAT_DTYPE_F32, P(0)));
    for (int k = 0; k < a->n_out; k++)
        PEAT_TRY(peat_op_expect(a, a->out[k], "out", PEAT_DTYPE_F32, P(0)));
    return PEAT_OK;
}
static peat_status sgd_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    for (int k = 0; k < 2; k++) peat_op_out_shape(nd, s, k, 1, P(0), 0, 0, 0);
    return PEAT_OK;
}
static double sgd_flops(const peat_op_params *p)
{
    return 12.0 * p->i[0];
}

/* depth 1: mag is the whole error / u, the union over the orders frameworks ship
 * (docs/bounds.md) */
static peat_status sgd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n_out,
                           const peat_tensor *exact_out, double *mag)
{
    (void)n_out, (void)exact_out;
    int64_t n = a->p.i[0];
    double lr = a->p.f[0], mu = a->p.f[1], wd = a->p.f[2];
    for (int64_t i = 0; i < n; i++) {
        double p = in->x[0][i], g = in->x[1][i], m = in->x[2][i];
        /* mom' = mu m + g + wd p in either grouping: golden (mu m + g) + wd p, PyTorch
         * mu m + (g + wd p): mu and wd rounded and multiplied, both partial sums, the last add */
        double m1 = mu * m + g + wd * p;
        double em = 2.0 * fabs(mu * m) + fabs(mu * m + g) + fabs(g + wd * p) + 2.0 * fabs(wd * p) +
                    fabs(m1);
        /* nesterov's step d = (g + wd p) + mu mom' (PyTorch: g + wd p formed once, reused; the
         * golden forms it again): wd's rounding and product, that add, mom's error scaled by mu,
         * mu's rounding and product, the last add */
        double d = a->p.i[1] ? (g + wd * p) + mu * m1 : m1;
        double ed = a->p.i[1] ? 2.0 * fabs(wd * p) + fabs(g + wd * p) + fabs(mu) * em +
                                    2.0 * fabs(mu * m1) + fabs(d)
                              : em;
        /* p' = p - lr d: d's error scaled, lr's rounding and product, the subtraction */
        mag[i] = o == 1 ? em : fabs(lr) * ed + 2.0 * fabs(lr * d) + fabs(p - lr * d);
    }
    return PEAT_OK;
}

static peat_status sgd_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    return peat_op_probe_scaled(s, recs->items[0], PEAT_PROBE_TAG_OVERFLOW,
                                "value huge gradients (g x 1e12)", 1, 1e12, 0.0);
}

static void sgd_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 2, (int64_t[]){16 * n * n + off, 1});
    p->f[0] = 1e-3, p->f[1] = 0.9, p->f[2] = 0.999, p->f[3] = 1e-8, p->f[4] = 0.01;
}
static void sgd_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                       peat_dtype dt[])
{
    int k = 0;
    for (int r = 0; r < 3; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

/* No generic range probe (as adamw: its own huge-gradient probe) */
const peat_op_desc peat_opd_sgd = {
    .info = {PEAT_OP_SGD, "sgd", 3, 3, 2, 0, sgd_check, sgd_shapes, peat_op_depth_one, sgd_flops},
    .magnitude = sgd_mag,
    .terms = peat_op_terms_one,
    .probes = sgd_probes,
    .range_low = 0,
    .range_high = 0,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = sgd_cal,
    .input_shapes = sgd_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "_fused_sgd_",
};
