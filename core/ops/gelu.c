/* gelu.c: the exact (erf) GELU and its backward: elementwise, libm-rounded. */
#include "core/opdesc.h"

#include <math.h>
#include <string.h>

/* Libm error allowances, in units of u (docs/ops.md: a libm call counts 2, erf 3) */
#define R_EXP       2.0
#define R_ERF       3.0
#define INV_SQRT2   0.70710678118654752440
#define INV_SQRT2PI 0.39894228040143267794

static peat_status gelu_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                            const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)o, (void)exact_out;
    const double *x = in->x[0];
    /* y = 0.5 x (1 + erf(x/sqrt2)): argument scaling <= 1u of erf (|z erf'(z)| <= 0.49, two
     * roundings), erf itself, the add and the product: r = 1 + R_ERF + 1 + 1 on the terms. */
    for (int64_t i = 0; i < n; i++)
        mag[i] = (3.0 + R_ERF) * 0.5 * fabs(x[i]) * (1.0 + fabs(erf(x[i] * INV_SQRT2)));
    return PEAT_OK;
}

static peat_status gelu_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                                const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)o, (void)exact_out;
    const double *x = in->x[0], *dy = in->x[1];
    /* dX = dY (0.5 (1 + erf) + x phi(x)): the cdf part as in gelu plus the sum and the dY product;
     * phi's exponent -x^2/2 carries a rounding of size x^2/2 u into exp, then exp, the constant,
     * two products, the sum and the dY product. */
    for (int64_t i = 0; i < n; i++) {
        double xi = x[i], cdf_t = 0.5 * (1.0 + fabs(erf(xi * INV_SQRT2)));
        double xphi = fabs(xi) * exp(-0.5 * xi * xi) * INV_SQRT2PI;
        mag[i] = fabs(dy[i]) * ((4.0 + R_ERF) * cdf_t + (0.5 * xi * xi + 5.0 + R_EXP) * xphi);
    }
    return PEAT_OK;
}

/* x spread to +-10 and +-30 (erf saturates; a tanh form's exp overflows), exact zeros and
 * subnormal x */
static peat_status gelu_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    PEAT_TRY(peat_op_probe_zeros(s, rec, 0));
    double m = peat_op_maxabs(rec->in[0]);
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value x spread to +-10", 0,
                                  10.0 / m, 0.0));
    PEAT_TRY(peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value x spread to +-30", 0,
                                  30.0 / m, 0.0));
    return peat_op_probe_scaled(s, rec, PEAT_PROBE_TAG_SUBNORMAL, "value subnormal x (x 2^-130)", 0,
                                0x1p-130, 0.0);
}

/* GELU's own value probes cover both ends of the range: no generic range probe */
const peat_op_desc peat_opd_gelu = {
    .info = {PEAT_OP_GELU, "gelu", 1, 1, 1, 0, peat_op_ew_check, peat_op_ew_shapes,
             peat_op_depth_one, peat_op_ew_flops},
    .magnitude = gelu_mag,
    .terms = peat_op_terms_one,
    .probes = gelu_probes,
    .range_low = 0,
    .range_high = 0,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_ew_cal,
    .input_shapes = peat_op_ew_inputs1,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "gelu",
};

const peat_op_desc peat_opd_gelu_bwd = {
    .info = {PEAT_OP_GELU_BWD, "gelu_bwd", 2, 2, 1, 1, peat_op_ew_check, peat_op_ew_shapes,
             peat_op_depth_one, peat_op_ew_flops},
    .magnitude = gelu_bwd_mag,
    .terms = peat_op_terms_one,
    .probes = gelu_probes,
    .range_low = 0,
    .range_high = 0,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_ew_cal,
    .input_shapes = peat_op_ew_inputs2,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "gelu_backward",
};
