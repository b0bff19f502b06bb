/* heldout3.h: shared pieces of the third held-out defect set (the C files of tests/heldout3/,
 * built as libpeat_heldout3.so): kernels of the ops added with RMSNorm, SiLU, SwiGLU, RoPE,
 * grouped-query attention, batch norm, pooling and the fp8 GEMM, and formula slips of the older
 * ops, written before the rules they are scored against were changed, apart from the zoo and the
 * earlier held-out sets. Each kernel's class in tests/heldout3/manifest.tsv is set by
 * construction (what the defect is), read only by the one-off scoring. The rounding, bit and
 * registration helpers are the zoo's and the first held-out set's. */
#ifndef PEAT_HELDOUT3_H
#define PEAT_HELDOUT3_H

#include "../heldout/heldout.h"

#include <stdlib.h>

#define F(t)  ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)

/* x rounded to fp16 (round to nearest even, gradual underflow, Inf past 65504) */
static inline float h3_f16(float x)
{
    return zoo_round(x, 11, -14, 15);
}

/* the sigmoid as the golden computes it */
static inline float h3_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* RoPE's angle for pair j of head dim D at position p (the golden's fp32 order) */
static inline float h3_rope_angle(int64_t p, int64_t j, int64_t D, double base)
{
    float inv = powf((float)base, -(float)(2 * j) / (float)D);
    return (float)p * inv;
}
/* the two elements of pair j of a row of D under layout 0 (interleaved) or 1 (half-split) */
static inline void h3_rope_pair(int64_t j, int64_t D, int layout, int64_t *a, int64_t *b)
{
    *a = layout ? j : 2 * j;
    *b = layout ? j + D / 2 : 2 * j + 1;
}

int h3_register_llama(const peat_plugin_host *host);
int h3_register_resnet(const peat_plugin_host *host);
int h3_register_misc(const peat_plugin_host *host);

#endif
