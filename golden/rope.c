/* rope.c: rotary position embedding and its backward, exact (fp64) and golden (fp32, as PyTorch
 * models compute it: inv_freq = 1 / base^(2j/D) and the angle (pos0 + t) inv_freq in fp32, then
 * cosf and sinf). The backward rotates by the negated angle (the rotation is orthogonal). */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>

/* element indices of pair j in a row of D: interleaved (2j, 2j+1) or half-split (j, j + D/2) */
static void pair_at(int64_t D, int64_t layout, int64_t j, int64_t *a, int64_t *b)
{
    *a = layout ? j : 2 * j;
    *b = layout ? j + D / 2 : 2 * j + 1;
}

/* sign +1: forward; -1: backward */
static peat_status rope_exact_run(const peat_args *a, const peat_kernel *self, double sign)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t BH = a->p.i[0] * a->p.i[1], T = a->p.i[2], D = a->p.i[3], lay = a->p.i[4],
            pos0 = a->p.i[5];
    double base = a->p.f[0], *x = NULL;
    PEAT_TRY(peat_golden_load(a->in[0], &x));
    double *y = peat_f64(a->out[0]);
    for (int64_t p = 0; p < BH; p++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < D / 2; j++) {
                int64_t i0, i1, row = (p * T + t) * D;
                pair_at(D, lay, j, &i0, &i1);
                double ang = (double)(pos0 + t) * pow(base, -2.0 * (double)j / (double)D);
                double c = cos(ang), s = sign * sin(ang), x0 = x[row + i0], x1 = x[row + i1];
                y[row + i0] = x0 * c - x1 * s;
                y[row + i1] = x0 * s + x1 * c;
            }
    free(x);
    return PEAT_OK;
}

static peat_status rope_golden_run(const peat_args *a, const peat_kernel *self, float sign)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    int64_t BH = a->p.i[0] * a->p.i[1], T = a->p.i[2], D = a->p.i[3], lay = a->p.i[4],
            pos0 = a->p.i[5];
    float base = (float)a->p.f[0];
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t p = 0; p < BH; p++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < D / 2; j++) {
                int64_t i0, i1, row = (p * T + t) * D;
                pair_at(D, lay, j, &i0, &i1);
                float inv = 1.0f / powf(base, (float)(2 * j) / (float)D);
                float ang = (float)(pos0 + t) * inv;
                float c = cosf(ang), s = sign * sinf(ang), x0 = x[row + i0], x1 = x[row + i1];
                y[row + i0] = x0 * c - x1 * s;
                y[row + i1] = x0 * s + x1 * c;
            }
    return PEAT_OK;
}

static peat_status rope_exact(const peat_args *a, const peat_kernel *self)
{
    return rope_exact_run(a, self, 1.0);
}
static peat_status rope_golden(const peat_args *a, const peat_kernel *self)
{
    return rope_golden_run(a, self, 1.0f);
}
static peat_status rope_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    return rope_exact_run(a, self, -1.0);
}
static peat_status rope_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    return rope_golden_run(a, self, -1.0f);
}

peat_status peat_golden_register_rope(void)
{
    static const peat_kernel ks[] = {
        PEAT_GOLDEN_EXACT("rope_exact", PEAT_OP_ROPE, rope_exact,
                          "rotary position embedding in fp64"),
        PEAT_GOLDEN_GOLDEN("rope_golden", PEAT_OP_ROPE, rope_golden,
                           "rotary position embedding, fp32 angles and cosf/sinf"),
        PEAT_GOLDEN_EXACT("rope_bwd_exact", PEAT_OP_ROPE_BWD, rope_bwd_exact,
                          "rotary position embedding backward in fp64"),
        PEAT_GOLDEN_GOLDEN("rope_bwd_golden", PEAT_OP_ROPE_BWD, rope_bwd_golden,
                           "rotary position embedding backward, fp32"),
    };
    return peat_golden_add_all(ks, (int)(sizeof ks / sizeof ks[0]));
}
