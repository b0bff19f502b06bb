/* rowkit.h: what the softmax-family descriptors share (softmax, cross entropy, attention): the
 * libm allowances and the softmax of one row with the sums their bounds need (core/ops/, not
 * public). */
#ifndef PEAT_CORE_OPS_ROWKIT_H
#define PEAT_CORE_OPS_ROWKIT_H

#include <math.h>
#include <stdint.h>

/* Libm error allowances, in units of u (docs/ops.md: a libm call counts 2) */
#define R_EXP 2.0
#define R_LOG 2.0
/* Roundings an exponential's argument x - m passes through, amplified by exp: the shift (exp(x -
 * m)), and in the exp2 form Triton's tl.exp, CUDA's fast exp and FlashAttention compile to,
 * exp2((x - m) log2 e), the product and log2 e's own rounding as well (docs/bounds.md) */
#define R_SHIFT 3.0
/* log S evaluated as log2(S) ln 2 (the exp2 forms' logsumexp): the product and ln 2's rounding */
#define R_LOG2 2.0

/* Softmax of one row and the two sums the rules need: lam = sum_k p_k (R_SHIFT |x_k - max| +
 * R_EXP)
 * (the p-weighted error of the exponentials) and ln S = log sum exp(x - max). */
static inline void peat_opk_row_softmax(const double *x, int64_t C, double *p, double *mx,
                                        double *lnS, double *lam)
{
    double m = x[0], s = 0.0, l = 0.0;
    for (int64_t j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < C; j++) s += p[j] = exp(x[j] - m);
    /* a masked (-inf) entry has p = 0 and contributes nothing (not 0 * inf) */
    for (int64_t j = 0; j < C; j++)
        p[j] /= s, l += p[j] > 0.0 ? p[j] * (R_SHIFT * fabs(x[j] - m) + R_EXP) : 0.0;
    *mx = m, *lnS = log(s), *lam = l;
}

#endif
