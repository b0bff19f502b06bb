/* dtype.c: dtype metadata and IEEE round-to-nearest-even conversions for bf16 and fp16. */
#include "peat/peat.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
    int mant;
} dtypes[PEAT_DTYPE_COUNT] = {
    [PEAT_DTYPE_F64] = {"f64", 8, 53},  [PEAT_DTYPE_F32] = {"f32", 4, 24},
    [PEAT_DTYPE_BF16] = {"bf16", 2, 8}, [PEAT_DTYPE_F16] = {"f16", 2, 11},
    [PEAT_DTYPE_I32] = {"i32", 4, 0},
};

size_t peat_dtype_size(peat_dtype t)
{
    return (unsigned)t < PEAT_DTYPE_COUNT ? dtypes[t].size : 0;
}
const char *peat_dtype_name(peat_dtype t)
{
    return (unsigned)t < PEAT_DTYPE_COUNT ? dtypes[t].name : "?";
}
int peat_dtype_mantissa_bits(peat_dtype t)
{
    return (unsigned)t < PEAT_DTYPE_COUNT ? dtypes[t].mant : 0;
}
double peat_dtype_unit_roundoff(peat_dtype t)
{
    int p = peat_dtype_mantissa_bits(t);
    return p > 0 ? ldexp(1.0, -p) : 0.0;
}

peat_status peat_dtype_parse(const char *s, peat_dtype *out)
{
    static const struct {
        const char *alias;
        peat_dtype t;
    } al[] = {{"f64", PEAT_DTYPE_F64},  {"fp64", PEAT_DTYPE_F64},  {"f32", PEAT_DTYPE_F32},
              {"fp32", PEAT_DTYPE_F32}, {"bf16", PEAT_DTYPE_BF16}, {"f16", PEAT_DTYPE_F16},
              {"fp16", PEAT_DTYPE_F16}, {"i32", PEAT_DTYPE_I32}};
    for (size_t k = 0; s && k < sizeof al / sizeof al[0]; k++)
        if (strcmp(s, al[k].alias) == 0) {
            *out = al[k].t;
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_NOTFOUND, "unknown dtype '%s' (f64, f32, bf16, f16, i32)",
                      s ? s : "");
}

uint16_t peat_f32_to_bf16(float x)
{
    uint32_t u = peat_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    /* round to nearest even on the 16 dropped bits; overflow carries into Inf correctly */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}

uint16_t peat_f32_to_bf16_rtz(float x)
{
    uint32_t u = peat_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)(u >> 16);
}

float peat_bf16_to_f32(uint16_t h)
{
    return peat_f32_from_bits((uint32_t)h << 16);
}

uint16_t peat_f32_to_f16(float x)
{
    uint32_t u = peat_f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((absu >> 13) & 0x3ffu)); /* NaN */
    if (absu == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
    int32_t e = (int32_t)(absu >> 23) - 127; /* unbiased exponent */
    uint32_t mant = absu & 0x7fffffu;
    if (e > 15) return (uint16_t)(sign | 0x7c00u); /* overflow to Inf (rounding cannot save it) */
    if (e >= -14) {
        /* normal in fp16: keep 10 bits, round the 13 dropped bits to nearest even */
        uint32_t h = ((uint32_t)(e + 15) << 10) | (mant >> 13);
        uint32_t rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* may carry into exponent/Inf */
        return (uint16_t)(sign | h);
    }
    if (e < -25) return (uint16_t)sign; /* below half the smallest subnormal: zero */
    /* subnormal in fp16: value = m * 2^-24 with m the 10-bit field */
    mant |= 0x800000u;        /* implicit bit */
    int shift = -e - 14 + 13; /* bits to drop: 14..24 */
    uint32_t h = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float peat_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return peat_f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0) return peat_f32_from_bits(sign);
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    return peat_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

float peat_round_bf16(float x)
{
    return peat_bf16_to_f32(peat_f32_to_bf16(x));
}
float peat_round_f16(float x)
{
    return peat_f16_to_f32(peat_f32_to_f16(x));
}

/* fp8: m mantissa bits, emin the exponent of the smallest normal (x = 1.f 2^e, e >= emin). */
static const struct {
    int m, emin;
    float max;
} fp8_fmt[2] = {[PEAT_FP8_E4M3] = {3, -6, 448.0f}, [PEAT_FP8_E5M2] = {2, -14, 57344.0f}};

float peat_fp8_max(int fmt)
{
    return fp8_fmt[fmt == PEAT_FP8_E5M2].max;
}

float peat_round_fp8(float x, int fmt)
{
    int f = fmt == PEAT_FP8_E5M2;
    if (x == 0.0f || isnan(x)) return x;
    if (isinf(x)) return copysignf(fp8_fmt[f].max, x);
    int e;
    frexpf(x, &e); /* |x| = 0.f 2^e: its leading bit is 2^(e-1) */
    e -= 1;
    if (e < fp8_fmt[f].emin) e = fp8_fmt[f].emin; /* subnormals share the smallest quantum */
    /* x / quantum and back are exact scalings by powers of two; nearbyint rounds to even */
    double q = ldexp(1.0, e - fp8_fmt[f].m), r = nearbyint((double)x / q) * q;
    if (fabs(r) > fp8_fmt[f].max) r = copysign(fp8_fmt[f].max, r);
    return (float)r;
}
