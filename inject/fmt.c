/* fmt.c: rounding to narrower number formats (bf16, fp16, tf32, fp8 e4m3, p bits) for the models.
 */
#include "inject/internal.h"

#include <float.h>
#include <math.h>

/* frexp splits x = m 2^e with m in [0.5, 1): scaling m by 2^p puts the p kept bits left of the
 * point, so rounding to an integer there is rounding to p significand bits. Exact in double for
 * any float x and p <= 24. */
static double round_bits_d(double x, int p, int rtz)
{
    if (!isfinite(x) || x == 0.0) return x;
    int e;
    double m = frexp(x, &e);
    double q = ldexp(m, p);
    q = rtz ? trunc(q) : nearbyint(q); /* nearbyint: the default mode, ties to even */
    return ldexp(q, e - p);
}

float peat_inject_round_bits(double x, int p)
{
    /* below FLT_MIN fp32 itself has fewer bits: its own RN does the rest */
    return (float)round_bits_d(x, p, 0);
}

float peat_inject_round_bits_rtz(double x, int p)
{
    if (!isfinite(x)) return (float)x;
    if (fabs(x) < FLT_MIN) {
        /* subnormal range: truncate to the fp32 subnormal grid (2^-149) */
        return (float)ldexp(trunc(ldexp(x, 149)), -149);
    }
    double r = round_bits_d(x, p, 1);
    /* round toward zero never overflows: it stops at the largest finite value */
    if (r > FLT_MAX) return FLT_MAX;
    if (r < -FLT_MAX) return -FLT_MAX;
    return (float)r;
}

static float round_e4m3(float x)
{
    if (!isfinite(x)) return x;
    double d = x, r;
    if (fabs(d) < 0x1p-6)
        r = nearbyint(ldexp(d, 9)) * 0x1p-9; /* subnormals: grid 2^-9 */
    else
        r = round_bits_d(d, 4, 0);
    /* e4m3 has no Inf: conversions saturate at the largest finite value, 448 */
    if (r > 448.0) r = 448.0;
    if (r < -448.0) r = -448.0;
    return (float)r;
}

float peat_inject_round(float x, peat_inject_fmt f, int bits)
{
    switch (f) {
    case PEAT_FMT_BF16:
        return peat_round_bf16(x);
    case PEAT_FMT_FP16:
        return peat_round_f16(x);
    case PEAT_FMT_TF32:
        return peat_inject_round_bits(x, 11);
    case PEAT_FMT_FP8:
        return round_e4m3(x);
    case PEAT_FMT_BITS:
        return peat_inject_round_bits(x, bits);
    }
    return x;
}
