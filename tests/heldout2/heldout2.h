/* heldout2.h: shared pieces of the second held-out defect set (the C files of tests/heldout2/,
 * built as libpeat_heldout2.so): plugin kernels written apart from the zoo, from the first
 * held-out set and from the detector's rules, each with the class its defect should read as in
 * tests/heldout2/manifest.tsv (set by construction; only the one-off scoring reads it). The
 * rounding, bit and permutation helpers are the zoo's and the first held-out set's (zoo_bf16,
 * zoo_tf32, zoo_upset_draw, ZOO_KERNEL, ho_flip, ho_force, ho_ftz, ho_rz, ho_add_rz, ho_shuffle,
 * ho_numel, ho_register); the pieces below are the ones they have no helper for. */
#ifndef PEAT_HELDOUT2_H
#define PEAT_HELDOUT2_H

#include "../heldout/heldout.h"

#include <stdlib.h>

/* conv2d's parameters (i: N, C, H, W, O, KH, KW, stride, pad) and its output size */
typedef struct h2_conv {
    int64_t N, C, H, W, O, KH, KW, s, p, OH, OW;
} h2_conv;

static inline h2_conv h2_conv_of(const peat_args *a)
{
    const int64_t *i = a->p.i;
    h2_conv d = {i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7], i[8], 0, 0};
    d.OH = (d.H + 2 * d.p - d.KH) / d.s + 1;
    d.OW = (d.W + 2 * d.p - d.KW) / d.s + 1;
    return d;
}
static inline int64_t h2_x_at(const h2_conv *d, int64_t n, int64_t c, int64_t h, int64_t w)
{
    return ((n * d->C + c) * d->H + h) * d->W + w;
}
static inline int64_t h2_w_at(const h2_conv *d, int64_t o, int64_t c, int64_t kh, int64_t kw)
{
    return ((o * d->C + c) * d->KH + kh) * d->KW + kw;
}
static inline int64_t h2_y_at(const h2_conv *d, int64_t n, int64_t o, int64_t oh, int64_t ow)
{
    return ((n * d->O + o) * d->OH + oh) * d->OW + ow;
}

/* A transient upset of one call in `every` (a fresh draw per call, zoo_upset_draw): 1 and the
 * element and bit to flip (bits lo..lo+span-1) when this call is hit. */
static inline int h2_upset(int every, int64_t n, int lo, int span, int64_t *at, int *bit)
{
    uint64_t h = zoo_upset_draw();
    if (n <= 0 || h % (uint64_t)every != 0) return 0;
    *at = (int64_t)((h >> 16) % (uint64_t)n);
    *bit = lo + (int)((h >> 48) % (uint64_t)span);
    return 1;
}

int h2_register_nn(const peat_plugin_host *host);
int h2_register_norm(const peat_plugin_host *host);
int h2_register_conv(const peat_plugin_host *host);
int h2_register_attention(const peat_plugin_host *host);
int h2_register_optim(const peat_plugin_host *host);
int h2_register_state(const peat_plugin_host *host);

#endif
