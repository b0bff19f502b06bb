/* heldout8.h: shared pieces of the eighth held-out defect set (the C files of tests/heldout8/,
 * built as libpeat_heldout8.so): defects over the old and the new op kinds (formula slips of
 * several sizes, precision lost in one part of a computation, truncation, flushes, range and NaN
 * sources, structural defects on one boundary, state, nondeterminism, transient upsets, stuck
 * bits) and honest forms in the orders frameworks and GPU kernels ship. Written and committed
 * after the seventh round's rules and their fixes were final and before any run of it, apart
 * from the zoo and the earlier held-out sets, and scored once on that tree. Each kernel's class in
 * tests/heldout8/manifest.tsv is set by construction (what the defect is), read only by the one-off
 * scoring. Most defects compute the op in double, round once to fp32 and add their defect, so that
 * nothing but the defect departs from a correctly rounded result. */
#ifndef PEAT_HELDOUT8_H
#define PEAT_HELDOUT8_H

#include "../heldout/heldout.h"

#include <stdlib.h>
#include <string.h>

#define IN(k)  ((const float *)a->in[k]->data)
#define OUT(k) ((float *)a->out[k]->data)
#define PI(k)  (a->p.i[k])
#define PF(k)  (a->p.f[k])

static inline float h8_f16(float x)
{
    return zoo_round(x, 11, -14, 15);
}
/* x to bf16's 8 significand bits, toward zero (called on an unconditional path: GCC 12.2 folds
 * `c ? from_bits(bits(x) & m) : x` to x) */
static inline float h8_bf16_rz(float x)
{
    return ho_from_bits(ho_bits(x) & 0xffff0000u);
}
/* x to fp16's 11 significand bits, toward zero (normal range; an unconditional pass) */
static inline float h8_f16_rz(float x)
{
    return ho_from_bits(ho_bits(x) & 0xffffe000u);
}
static inline double h8_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

int h8_register_llama(const peat_plugin_host *host);
int h8_register_resnet(const peat_plugin_host *host);
int h8_register_nn(const peat_plugin_host *host);

#endif
