/* zoo_rope.c: rotary embedding kernels of the zoo: the pairs of the other layout, the position
 * offset ignored (a decoding step's rows rotated as if from 0), cos/sin tables in bf16, a backward
 * that rotates forward again; and an honest complex-multiply form with angles in double. */
#include "zoo.h"

/* mode 0: as specified; 1: layouts swapped; 2: pos0 ignored; 3: bf16 table; sign -1: backward */
static void rope(const peat_args *a, int mode, float sign, int dbl)
{
    int64_t BH = a->p.i[0] * a->p.i[1], T = a->p.i[2], D = a->p.i[3], lay = a->p.i[4],
            pos0 = mode == 2 ? 0 : a->p.i[5];
    if (mode == 1) lay = !lay;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t p = 0; p < BH; p++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < D / 2; j++) {
                int64_t row = (p * T + t) * D, i0 = lay ? j : 2 * j,
                        i1 = lay ? j + D / 2 : 2 * j + 1;
                float c, s;
                if (dbl) {
                    double ang = (double)(pos0 + t) * pow(a->p.f[0], -2.0 * (double)j / (double)D);
                    c = (float)cos(ang), s = (float)sin(ang);
                } else {
                    float ang =
                        (float)(pos0 + t) / powf((float)a->p.f[0], (float)(2 * j) / (float)D);
                    c = cosf(ang), s = sinf(ang);
                }
                if (mode == 3) c = zoo_bf16(c), s = zoo_bf16(s);
                s *= sign;
                float x0 = x[row + i0], x1 = x[row + i1];
                y[row + i0] = x0 * c - x1 * s;
                y[row + i1] = x0 * s + x1 * c;
            }
}

static peat_status layout_swapped(const peat_args *a, const peat_kernel *self)
{
    rope(a, 1, 1.0f, 0);
    return PEAT_OK;
}
static peat_status no_offset(const peat_args *a, const peat_kernel *self)
{
    rope(a, 2, 1.0f, 0);
    return PEAT_OK;
}
static peat_status table_bf16(const peat_args *a, const peat_kernel *self)
{
    rope(a, 3, 1.0f, 0);
    return PEAT_OK;
}
static peat_status bwd_forward_sign(const peat_args *a, const peat_kernel *self)
{
    rope(a, 0, 1.0f, 0);
    return PEAT_OK;
}
static peat_status complex_double(const peat_args *a, const peat_kernel *self)
{
    rope(a, 0, 1.0f, 1);
    return PEAT_OK;
}

int zoo_register_rope(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_rope_layout_swapped", PEAT_OP_ROPE, layout_swapped,
                   "pairs of the other layout (interleaved for half-split and back)"),
        ZOO_KERNEL("zoo_rope_no_offset", PEAT_OP_ROPE, no_offset,
                   "the position offset ignored: every call rotates from position 0"),
        ZOO_KERNEL("zoo_rope_table_bf16", PEAT_OP_ROPE, table_bf16,
                   "cos and sin tables rounded to bf16, declares fp32"),
        ZOO_KERNEL("zoo_rope_bwd_forward_sign", PEAT_OP_ROPE_BWD, bwd_forward_sign,
                   "backward rotating by +angle (the forward) instead of -angle"),
        ZOO_KERNEL("zoo_rope_complex_double", PEAT_OP_ROPE, complex_double,
                   "honest: angles and cos/sin in double, rounded once (torch.polar's tables)"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
