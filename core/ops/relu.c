/* relu.c: the ReLU op and its backward (dX = dY where X > 0): elementwise, exact arithmetic. */
#include "core/opdesc.h"

#include <math.h>

/* relu: no rounding at all, so any error is a bug; |y| keeps the bound scale-free */
static peat_status relu_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                            const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)o, (void)exact_out;
    for (int64_t i = 0; i < n; i++) mag[i] = in->x[0][i] > 0.0 ? in->x[0][i] : 0.0;
    return PEAT_OK;
}

static peat_status relu_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                                const peat_tensor *exact_out, double *mag)
{
    (void)a, (void)o, (void)exact_out;
    for (int64_t i = 0; i < n; i++) mag[i] = in->x[0][i] > 0.0 ? fabs(in->x[1][i]) : 0.0;
    return PEAT_OK;
}

/* exact zeros of X: the kink, where x > 0 and x >= 0 part */
static peat_status relu_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    return peat_op_probe_zeros(s, recs->items[0], 0);
}

const peat_op_desc peat_opd_relu = {
    .info = {PEAT_OP_RELU, "relu", 1, 1, 1, 0, peat_op_ew_check, peat_op_ew_shapes,
             peat_op_depth_one, peat_op_ew_flops},
    .magnitude = relu_mag,
    .terms = peat_op_terms_one,
    .probes = relu_probes,
    .range_low = 1u << 0, /* X */
    .range_high = 1u << 0,
    .perm = peat_op_perm_elements,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_ew_cal,
    .input_shapes = peat_op_ew_inputs1,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "relu,relu_",
};

const peat_op_desc peat_opd_relu_bwd = {
    .info = {PEAT_OP_RELU_BWD, "relu_bwd", 2, 2, 1, 1, peat_op_ew_check, peat_op_ew_shapes,
             peat_op_depth_one, peat_op_ew_flops},
    .magnitude = relu_bwd_mag,
    .terms = peat_op_terms_one,
    .probes = relu_probes,
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
    .aten = "threshold_backward",
};
