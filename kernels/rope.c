/* rope.c: rotary position embedding candidates: a cos/sin table of the call's positions built once
 * (inv_freq through exp2f of -e log2(base), as fused kernels fold the constants) and applied to
 * every head; the backward rotates with the sines negated. Both pair layouts. */
#include "kernels/kcommon.h"
#include "kernels/kernels.h"
#include "peat/backend.h"

#include <math.h>
#include <stdlib.h>

static peat_status rope_table_run(const peat_args *a, const peat_kernel *self, float sign)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t BH = a->p.i[0] * a->p.i[1], T = a->p.i[2], D = a->p.i[3], lay = a->p.i[4],
            pos0 = a->p.i[5], half = D / 2;
    float *cs = malloc((size_t)(2 * T * half) * sizeof *cs);
    if (!cs) return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: cos/sin table", self->name);
    float lb = log2f((float)a->p.f[0]);
    for (int64_t j = 0; j < half; j++) {
        float inv = exp2f(-((float)(2 * j) / (float)D) * lb);
        for (int64_t t = 0; t < T; t++) {
            float ang = (float)(pos0 + t) * inv;
            cs[2 * (t * half + j)] = cosf(ang), cs[2 * (t * half + j) + 1] = sign * sinf(ang);
        }
    }
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t p = 0; p < BH; p++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < half; j++) {
                int64_t row = (p * T + t) * D, i0 = lay ? j : 2 * j,
                        i1 = lay ? j + half : 2 * j + 1;
                float c = cs[2 * (t * half + j)], s = cs[2 * (t * half + j) + 1];
                float x0 = x[row + i0], x1 = x[row + i1];
                y[row + i0] = x0 * c - x1 * s;
                y[row + i1] = x1 * c + x0 * s;
            }
    free(cs);
    return PEAT_OK;
}

static peat_status rope_table(const peat_args *a, const peat_kernel *self)
{
    return rope_table_run(a, self, 1.0f);
}
static peat_status rope_table_bwd(const peat_args *a, const peat_kernel *self)
{
    return rope_table_run(a, self, -1.0f);
}

static const peat_kernel rope_kernels[] = {
    PEAT_KERNELS_F32(
        "rope_table", PEAT_OP_ROPE, rope_table,
        "RoPE from a per-call cos/sin table (exp2f inverse frequencies), both layouts, fp32"),
    PEAT_KERNELS_F32("rope_table_bwd", PEAT_OP_ROPE_BWD, rope_table_bwd,
                     "RoPE backward from the same table, sines negated, fp32"),
};

peat_status peat_kernels_register_rope(void)
{
    return peat_kernels_add_all(rope_kernels, (int)(sizeof rope_kernels / sizeof rope_kernels[0]));
}
