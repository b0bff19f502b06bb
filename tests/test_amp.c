/* test_amp.c: mixed-precision flows (--precision): the fp16/bf16 rounding on hand-picked values,
 * what the kernels of a flow see, GradScaler's skip, backoff and growth, fp32 unchanged, and
 * gemm_fp16 judged under amp-fp16 in a campaign. */
#include <criterion/criterion.h>

#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "models/flow_impl.h"
#include "models/models.h"
#include "harness/run/run.h"
#include "store/store.h"
#include "flow_run.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const FLOWS[] = {"mlp", "cnn", "gpt", "gpt_unfused"};
#define N_FLOWS ((int)(sizeof FLOWS / sizeof FLOWS[0]))

static void init(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry: %s", peat_error_last());
}

static peat_flow_config config(int precision)
{
    peat_flow_config c;
    memset(&c, 0, sizeof c);
    c.seed = 1;
    c.weight_decay = -1;
    c.precision = precision;
    return c;
}

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- rounding ---------------------------------------------------------------------------- */

typedef struct rcase {
    float in, want;
    const char *what;
} rcase;

static void check_rounding(int precision, const rcase *cs, int n)
{
    peat_flow_config c = config(precision);
    run r = make("mlp", &c);
    for (int i = 0; i < n; i++) {
        float got = peat_models_amp_round(r.f, cs[i].in);
        cr_assert(same_bits(got, cs[i].want) || (isnan(got) && isnan(cs[i].want)),
                  "%s: %s(%a) = %a, want %a", cs[i].what,
                  peat_models_flow_precision_name(precision), (double)cs[i].in, (double)got,
                  (double)cs[i].want);
        /* negatives mirror */
        float neg = peat_models_amp_round(r.f, -cs[i].in);
        cr_assert(isnan(neg) || same_bits(neg, -cs[i].want), "%s: negative %a gave %a", cs[i].what,
                  (double)-cs[i].in, (double)neg);
    }
    drop(&r);
}

Test(amp, fp16_rounding_ties_subnormals_overflow, .init = init)
{
    const rcase cs[] = {
        {1.0f, 1.0f, "exact"},
        {1.0f + 0x1p-11f, 1.0f, "tie between 1 and 1+2^-10 goes to the even 1"},
        {1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-9f, "tie between 1+2^-10 (odd) and 1+2^-9 (even)"},
        {1.0f + 0x1p-11f + 0x1p-20f, 1.0f + 0x1p-10f, "just above the tie rounds up"},
        {0x1p-24f, 0x1p-24f, "smallest subnormal is exact"},
        {0x1p-25f, 0.0f, "half the smallest subnormal: tie to the even 0"},
        {0x1.8p-25f, 0x1p-24f, "three quarters of the smallest subnormal rounds up"},
        {0x1.8p-24f, 0x1p-23f, "1.5 x 2^-24: tie between 1 and 2 subnormal steps -> 2"},
        {0x1.4p-23f, 0x1p-23f, "2.5 x 2^-24: tie between 2 and 3 steps -> 2"},
        {0x1p-14f - 0x1p-25f, 0x1p-14f, "largest subnormal + half a step: up to the normal 2^-14"},
        {0x1p-30f, 0.0f, "far below the subnormals"},
        {65504.0f, 65504.0f, "largest finite"},
        {65519.0f, 65504.0f, "below the overflow threshold"},
        {65520.0f, INFINITY, "halfway above the largest finite: overflow to inf"},
        {1e6f, INFINITY, "overflow"},
        {INFINITY, INFINITY, "inf stays"},
        {NAN, NAN, "nan stays nan"},
    };
    check_rounding(PEAT_PRECISION_AMP_FP16, cs, (int)(sizeof cs / sizeof cs[0]));
}

Test(amp, bf16_rounding_ties_subnormals_overflow, .init = init)
{
    const rcase cs[] = {
        {1.0f + 0x1p-8f, 1.0f, "tie between 1 and 1+2^-7 goes to the even 1"},
        {1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-6f, "tie between 1+2^-7 (odd) and 1+2^-6 (even)"},
        {0x1p-133f, 0x1p-133f, "smallest bf16 subnormal is exact"},
        {0x1p-134f, 0.0f, "half of it: tie to the even 0"},
        {0x1.8p-133f, 0x1p-132f, "1.5 steps: tie to the even 2 steps"},
        {0x1.fep127f, 0x1.fep127f, "largest finite bf16"},
        {FLT_MAX, INFINITY, "FLT_MAX is past bf16's halfway point: inf"},
        {NAN, NAN, "nan stays nan"},
    };
    check_rounding(PEAT_PRECISION_BF16, cs, (int)(sizeof cs / sizeof cs[0]));
    const rcase id[] = {{1.0f + 0x1p-20f, 1.0f + 0x1p-20f, "fp32 leaves values alone"}};
    check_rounding(PEAT_PRECISION_FP32, id, 1);
}

/* The flow's rounding is core's peat_round_f16 / peat_round_bf16 on every 4093rd fp32 bit
 * pattern (both signs, every exponent, NaN and inf included) and on the patterns around each
 * fp16 rounding tie of the normal range. */
Test(amp, flow_rounding_is_cores_conversion, .init = init)
{
    peat_flow_config c16 = config(PEAT_PRECISION_AMP_FP16), cb = config(PEAT_PRECISION_BF16);
    run a = make("mlp", &c16), b = make("mlp", &cb);
    int64_t bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
        float x;
        uint32_t v = (uint32_t)u;
        memcpy(&x, &v, sizeof x);
        float want = peat_round_f16(x), got = peat_models_amp_round(a.f, x);
        bad += !same_bits(want, got) && !(isnan(want) && isnan(got));
        want = peat_round_bf16(x), got = peat_models_amp_round(b.f, x);
        bad += !same_bits(want, got) && !(isnan(want) && isnan(got));
    }
    for (uint32_t h = 0x0400; h < 0x7c00; h++) { /* fp16 normals: the tie above each */
        float lo = peat_f16_to_f32((uint16_t)h);
        uint32_t v;
        memcpy(&v, &lo, sizeof v);
        for (int64_t d = -2; d <= 2; d++) {
            uint32_t w = v + 0x1000u + (uint32_t)d;
            float x;
            memcpy(&x, &w, sizeof x);
            bad += !same_bits(peat_round_f16(x), peat_models_amp_round(a.f, x));
        }
    }
    cr_assert_eq(bad, 0, "%lld patterns round otherwise than core's conversion", (long long)bad);
    drop(&a), drop(&b);
}

Test(amp, precision_names_and_refusals, .init = init)
{
    int p = -1;
    cr_assert_eq(peat_models_flow_precision_parse("amp-fp16", &p), PEAT_OK);
    cr_assert_eq(p, PEAT_PRECISION_AMP_FP16);
    cr_assert_eq(peat_models_flow_precision_parse("fp16", &p), PEAT_ERR_INVAL,
                 "plain fp16 is no mode");
    cr_assert_str_eq(peat_models_flow_precision_name(PEAT_PRECISION_BF16), "bf16");
    peat_flow_config c = config(7);
    peat_exec_t *ex;
    peat_flow_t *f = NULL;
    cr_assert_eq(peat_exec_alloc("mlp", 1, &ex), PEAT_OK);
    cr_assert_eq(peat_models_flow_alloc("mlp", &c, ex, &f), PEAT_ERR_INVAL, "precision 7 refused");
    c = config(PEAT_PRECISION_AMP_FP16);
    c.loss_scale_init = -1;
    cr_assert_eq(peat_models_flow_alloc("mlp", &c, ex, &f), PEAT_ERR_INVAL,
                 "negative scale refused");
    cr_assert_null(f);
    peat_exec_free(ex);
}

/* ---- what the kernels see ------------------------------------------------------------------ */

typedef struct seen {
    int precision;
    int64_t cast_inputs, not_representable; /* elements of the cast inputs; of them off-format */
} seen;

static peat_status seen_hook(void *user, const peat_kernel *k, const peat_args *a,
                             const peat_call_info *info, int after)
{
    (void)k, (void)info;
    seen *s = user;
    if (after) return PEAT_OK;
    int n_cast = a->op == PEAT_OP_GEMM || a->op == PEAT_OP_CONV2D ||
                         a->op == PEAT_OP_CONV2D_BWD_DATA || a->op == PEAT_OP_CONV2D_BWD_FILTER
                     ? 2
                 : a->op == PEAT_OP_ATTENTION ? 3
                                              : 0;
    for (int i = 0; i < n_cast; i++) {
        const float *x = peat_f32(a->in[i]);
        for (int64_t e = 0; e < peat_tensor_numel(a->in[i]); e++) {
            float r =
                s->precision == PEAT_PRECISION_BF16 ? peat_round_bf16(x[e]) : peat_round_f16(x[e]);
            s->cast_inputs++;
            s->not_representable += !same_bits(r, x[e]) && !isnan(x[e]);
        }
    }
    return PEAT_OK;
}

/* Under amp-fp16 and bf16 every GEMM, convolution and attention input a kernel sees is a value
 * of that format; under fp32 many are not (so the check can fail). */
Test(amp, gemm_shaped_kernels_see_format_values, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++)
        for (int p = 0; p < PEAT_PRECISION_FP8; p++) {
            peat_flow_config c = config(p);
            run r = make(FLOWS[k], &c);
            seen s = {.precision = p == PEAT_PRECISION_FP32 ? PEAT_PRECISION_AMP_FP16 : p};
            cr_assert_eq(peat_exec_add_hook(r.ex, seen_hook, &s), PEAT_OK);
            for (int i = 0; i < 3; i++) {
                peat_flow_metrics m;
                cr_assert_eq(peat_models_flow_step(r.f, &m), PEAT_OK, "%s", peat_error_last());
                cr_assert(isfinite(m.loss), "%s %s: loss %g", FLOWS[k],
                          peat_models_flow_precision_name(p), m.loss);
            }
            cr_assert_gt(s.cast_inputs, 1000, "%s: GEMM-shaped calls seen", FLOWS[k]);
            if (p == PEAT_PRECISION_FP32)
                cr_assert_gt(s.not_representable, s.cast_inputs / 4,
                             "%s fp32: most GEMM inputs are not fp16 values (%lld of %lld)",
                             FLOWS[k], (long long)s.not_representable, (long long)s.cast_inputs);
            else
                cr_assert_eq(s.not_representable, 0, "%s %s: %lld of %lld inputs off-format",
                             FLOWS[k], peat_models_flow_precision_name(p),
                             (long long)s.not_representable, (long long)s.cast_inputs);
            drop(&r);
        }
}

/* Each flow still learns under each precision (30 steps), and amp-fp16 at the default scale of
 * 2^16 skips few steps. */
Test(amp, flows_learn_under_every_precision, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++)
        for (int p = 1; p < PEAT_PRECISIONS; p++) {
            peat_flow_config c = config(p);
            run r = make(FLOWS[k], &c);
            double first = NAN, last = NAN;
            for (int i = 0; i < 30; i++) {
                peat_flow_metrics m;
                cr_assert_eq(peat_models_flow_step(r.f, &m), PEAT_OK, "%s", peat_error_last());
                if (i == 0) first = m.loss;
                last = m.loss;
            }
            cr_assert(isfinite(last) && last < 0.85 * first, "%s %s: loss %g -> %g", FLOWS[k],
                      peat_models_flow_precision_name(p), first, last);
            cr_assert_leq(peat_models_flow_skipped_steps(r.f), 3, "%s %s: %lld skipped", FLOWS[k],
                          peat_models_flow_precision_name(p),
                          (long long)peat_models_flow_skipped_steps(r.f));
            drop(&r);
        }
}

/* ---- fp8 ----------------------------------------------------------------------------------- */

/* Round to nearest even on the 3 (e4m3) or 2 (e5m2) mantissa bits, subnormals down to 2^-9 and
 * 2^-16, saturation at 448 and 57344, NaN kept. */
Test(amp, fp8_rounding_ties_subnormals_saturation)
{
    static const struct {
        float in, want;
        int fmt;
        const char *what;
    } cs[] = {
        {1.0f, 1.0f, PEAT_FP8_E4M3, "one"},
        {1.0625f, 1.0f, PEAT_FP8_E4M3, "tie 1 + 1/16 to the even 1"},
        {1.1875f, 1.25f, PEAT_FP8_E4M3, "tie 1.1875 to the even 1.25"},
        {1.07f, 1.125f, PEAT_FP8_E4M3, "above the tie"},
        {448.0f, 448.0f, PEAT_FP8_E4M3, "largest"},
        {470.0f, 448.0f, PEAT_FP8_E4M3, "past the largest: saturated"},
        {0x1p-9f, 0x1p-9f, PEAT_FP8_E4M3, "smallest subnormal"},
        {0x1p-10f, 0.0f, PEAT_FP8_E4M3, "half the smallest subnormal: tie to 0"},
        {0x1.8p-10f, 0x1p-9f, PEAT_FP8_E4M3, "three quarters of it: up"},
        {0x1.4p-8f, 0x1p-8f, PEAT_FP8_E4M3, "subnormal 1.25 x 2^-8: quantum 2^-9"},
        {1.125f, 1.0f, PEAT_FP8_E5M2, "e5m2 tie 1.125 to the even 1"},
        {1.375f, 1.5f, PEAT_FP8_E5M2, "e5m2 tie 1.375 to the even 1.5"},
        {57344.0f, 57344.0f, PEAT_FP8_E5M2, "e5m2 largest"},
        {1e9f, 57344.0f, PEAT_FP8_E5M2, "e5m2 saturated"},
        {INFINITY, 57344.0f, PEAT_FP8_E5M2, "inf saturated"},
        {0x1p-16f, 0x1p-16f, PEAT_FP8_E5M2, "e5m2 smallest subnormal"},
        {0x1p-17f, 0.0f, PEAT_FP8_E5M2, "half of it: tie to 0"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        float got = peat_round_fp8(cs[i].in, cs[i].fmt);
        cr_assert(same_bits(got, cs[i].want), "%s: round(%a) = %a, want %a", cs[i].what,
                  (double)cs[i].in, (double)got, (double)cs[i].want);
        cr_assert(same_bits(peat_round_fp8(-cs[i].in, cs[i].fmt), -cs[i].want), "%s: negative",
                  cs[i].what);
    }
    cr_assert(isnan(peat_round_fp8(NAN, PEAT_FP8_E4M3)), "NaN kept");
    cr_assert_eq(peat_fp8_max(PEAT_FP8_E4M3), 448.0f);
    cr_assert_eq(peat_fp8_max(PEAT_FP8_E5M2), 57344.0f);
}

typedef struct fp8_seen {
    int64_t fp8_calls, gemm_calls, off_format, bad_scale, e5m2_fwd, e5m2_bwd;
} fp8_seen;

static peat_status fp8_hook(void *user, const peat_kernel *k, const peat_args *a,
                            const peat_call_info *info, int after)
{
    (void)k;
    fp8_seen *s = user;
    if (after) return PEAT_OK;
    s->gemm_calls += a->op == PEAT_OP_GEMM;
    if (a->op != PEAT_OP_GEMM_FP8) return PEAT_OK;
    s->fp8_calls++;
    for (int i = 0; i < 2; i++) {
        int fmt = (int)a->p.i[6 + i];
        if (fmt == PEAT_FP8_E5M2 && info->phase == PEAT_PHASE_FWD) s->e5m2_fwd++;
        if (fmt == PEAT_FP8_E5M2 && info->phase != PEAT_PHASE_FWD) s->e5m2_bwd++;
        const float *x = peat_f32(a->in[i]);
        for (int64_t e = 0; e < peat_tensor_numel(a->in[i]); e++)
            s->off_format += !same_bits(peat_round_fp8(x[e], fmt), x[e]);
        int ex;
        double scale = a->p.f[i ? 2 : 0];
        s->bad_scale += frexp(scale, &ex) != 0.5; /* a power of two */
    }
    return PEAT_OK;
}

/* Under fp8 the linear layers' GEMMs are fp8 GEMMs whose inputs are values of their format
 * (e4m3 forward; the backward's gradient operand e5m2) with power-of-two scales; GEMM is left
 * only where attention calls it (gpt_unfused). */
Test(amp, fp8_flows_call_fp8_gemms_of_format_values, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++) {
        peat_flow_config c = config(PEAT_PRECISION_FP8);
        run r = make(FLOWS[k], &c);
        fp8_seen s = {0};
        cr_assert_eq(peat_exec_add_hook(r.ex, fp8_hook, &s), PEAT_OK);
        for (int i = 0; i < 3; i++) {
            peat_flow_metrics m;
            cr_assert_eq(peat_models_flow_step(r.f, &m), PEAT_OK, "%s", peat_error_last());
        }
        cr_assert_gt(s.fp8_calls, 0, "%s: fp8 GEMMs called", FLOWS[k]);
        cr_assert_eq(s.off_format, 0, "%s: %lld fp8 GEMM inputs off their format", FLOWS[k],
                     (long long)s.off_format);
        cr_assert_eq(s.bad_scale, 0, "%s: scales not powers of two", FLOWS[k]);
        cr_assert_eq(s.e5m2_fwd, 0, "%s: forward operands are e4m3", FLOWS[k]);
        cr_assert_gt(s.e5m2_bwd, 0, "%s: gradients are e5m2", FLOWS[k]);
        int unfused = strcmp(FLOWS[k], "gpt_unfused") == 0;
        cr_assert(unfused ? s.gemm_calls > 0 : s.gemm_calls == 0, "%s: %lld fp32 GEMM calls left",
                  FLOWS[k], (long long)s.gemm_calls);
        cr_assert(peat_models_flow_op_mask_for(FLOWS[k], &c) & PEAT_OP_BIT(PEAT_OP_GEMM_FP8),
                  "%s: the op mask says so", FLOWS[k]);
        drop(&r);
    }
}

/* An Inf in a GEMM operand (a diverging run, a candidate's overflow) has no fp8 scale: the step
 * goes on, NaN where the operand went (the run's weights show it: DIVERGES), and does not stop
 * the campaign. */
static peat_status nan_hook(void *user, const peat_kernel *k, const peat_args *a,
                            const peat_call_info *info, int after)
{
    (void)k, (void)info;
    int64_t *n = user;
    if (after || a->op != PEAT_OP_GEMM_FP8) return PEAT_OK;
    for (int i = 0; i < 2; i++)
        for (int64_t e = 0; e < peat_tensor_numel(a->in[i]); e++)
            *n += isnan(peat_f32(a->in[i])[e]);
    return PEAT_OK;
}

Test(amp, fp8_non_finite_operand_diverges, .init = init)
{
    peat_flow_config c = config(PEAT_PRECISION_FP8);
    run r = make("mlp", &c);
    int64_t nans = 0;
    cr_assert_eq(peat_exec_add_hook(r.ex, nan_hook, &nans), PEAT_OK);
    peat_f32(r.f->params[0]->w)[3] = INFINITY;
    for (int i = 0; i < 2; i++) {
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_step(r.f, &m), PEAT_OK, "step %d: %s", i, peat_error_last());
    }
    cr_assert_gt(nans, 0, "the operand with an Inf went to the fp8 GEMM as NaN");
    drop(&r);
}

/* ---- fp32 unchanged ------------------------------------------------------------------------ */

/* fp32 (explicit, with scaler options set) trains bit for bit as the default config: losses and
 * every state tensor; the scaler is inert (scale 1, nothing skipped). */
Test(amp, fp32_is_bit_identical_to_the_default, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++) {
        peat_flow_config d;
        memset(&d, 0, sizeof d);
        d.seed = 1, d.weight_decay = -1;
        peat_flow_config e = config(PEAT_PRECISION_FP32);
        e.loss_scale_init = 1024, e.loss_scale_interval = 1;
        run a = make(FLOWS[k], &d), b = make(FLOWS[k], &e);
        for (int i = 0; i < 4; i++) {
            peat_flow_metrics ma, mb;
            cr_assert_eq(peat_models_flow_step(a.f, &ma), PEAT_OK);
            cr_assert_eq(peat_models_flow_step(b.f, &mb), PEAT_OK);
            cr_assert(same_bits((float)ma.loss, (float)mb.loss) && ma.loss == mb.loss,
                      "%s step %d: %.9g vs %.9g", FLOWS[k], i, ma.loss, mb.loss);
            cr_assert(mb.loss_scale == 1.0 && mb.skipped == 0, "%s: fp32 has no scaler", FLOWS[k]);
        }
        for (int i = 0; i < peat_models_flow_state_count(a.f); i++) {
            const char *n;
            peat_tensor *ta = peat_models_flow_state(a.f, i, &n),
                        *tb = peat_models_flow_state(b.f, i, NULL);
            cr_assert_eq(memcmp(ta->data, tb->data, peat_tensor_nbytes(ta)), 0,
                         "%s: state %s differs", FLOWS[k], n);
        }
        drop(&a), drop(&b);
    }
}

/* ---- GradScaler ---------------------------------------------------------------------------- */

typedef struct snapshot {
    int n;
    peat_tensor *t[64];
} snapshot;

static void snap(peat_flow_t *f, snapshot *s)
{
    s->n = peat_models_flow_state_count(f);
    cr_assert_leq(s->n, 64);
    for (int i = 0; i < s->n; i++)
        cr_assert_eq(peat_tensor_clone(peat_models_flow_state(f, i, NULL), &s->t[i]), PEAT_OK);
}

/* Whether every state tensor (weights and optimizer state) is bit for bit the snapshot's. */
static int unchanged(peat_flow_t *f, const snapshot *s, const char **which)
{
    for (int i = 0; i < s->n; i++) {
        peat_tensor *t = peat_models_flow_state(f, i, which);
        if (memcmp(t->data, s->t[i]->data, peat_tensor_nbytes(t)) != 0) return 0;
    }
    return 1;
}

static void snap_free(snapshot *s)
{
    for (int i = 0; i < s->n; i++) peat_tensor_free(s->t[i]);
}

/* A loss scale of 2^40 makes fp16 gradients overflow: GradScaler skips the step (weights and
 * optimizer state untouched), halves the scale, and keeps halving until the gradients fit; then
 * training proceeds. */
Test(amp, scaler_skips_overflowing_steps_and_backs_off, .init = init)
{
    peat_flow_config c = config(PEAT_PRECISION_AMP_FP16);
    c.loss_scale_init = 0x1p40;
    run r = make("mlp", &c);
    double scale = 0x1p40;
    int skipped = 0, i;
    for (i = 0; i < 40; i++) {
        snapshot s;
        snap(r.f, &s);
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_step(r.f, &m), PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(m.loss_scale, scale, "step %d ran under scale %g, expected %g", i,
                     m.loss_scale, scale);
        const char *which = "";
        int same = unchanged(r.f, &s, &which);
        snap_free(&s);
        if (!m.skipped) {
            cr_assert(!same, "step %d was not skipped but changed nothing", i);
            break;
        }
        skipped++;
        cr_assert(same, "skipped step %d changed %s", i, which);
        scale *= 0.5;
        cr_assert_eq(peat_models_flow_loss_scale(r.f), scale, "backoff after step %d", i);
    }
    cr_assert_lt(i, 40, "the scale never came down far enough");
    cr_assert_geq(skipped, 10, "2^40 must overflow fp16 gradients for many halvings: %d", skipped);
    cr_assert_eq(peat_models_flow_skipped_steps(r.f), skipped);
    /* it stops where the largest fp16 gradient fits: mlp's are between 1/16 and 64 */
    cr_assert(scale <= 0x1p20 && scale >= 0x1p10, "stopped skipping at scale %g", scale);
    drop(&r);
}

/* One gradient forced to inf (an after-hook on one backward GEMM at iteration 3) skips exactly
 * that step at the default scale and halves it; the growth tracker restarts. */
static peat_status inf_hook(void *user, const peat_kernel *k, const peat_args *a,
                            const peat_call_info *info, int after)
{
    (void)k, (void)user;
    if (after && info->iter == 3 && a->op == PEAT_OP_GEMM && info->phase == PEAT_PHASE_BWD)
        peat_f32(a->out[0])[0] = INFINITY;
    return PEAT_OK;
}

Test(amp, a_forced_inf_gradient_skips_that_step, .init = init)
{
    peat_flow_config c = config(PEAT_PRECISION_AMP_FP16);
    run r = make("mlp", &c);
    cr_assert_eq(peat_exec_add_hook(r.ex, inf_hook, NULL), PEAT_OK);
    for (int i = 0; i < 6; i++) {
        snapshot s;
        snap(r.f, &s);
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_step(r.f, &m), PEAT_OK, "%s", peat_error_last());
        const char *which = "";
        int same = unchanged(r.f, &s, &which);
        snap_free(&s);
        cr_assert_eq(m.skipped, i == 3, "step %d skipped=%d", i, m.skipped);
        cr_assert_eq(same, i == 3, "step %d: weights %s", i, same ? "unchanged" : "changed");
        cr_assert_eq(m.loss_scale, i <= 3 ? 65536.0 : 32768.0, "step %d scale %g", i, m.loss_scale);
    }
    drop(&r);
}

/* With a growth interval of 3 and a scale small enough never to overflow, the scale doubles
 * after every 3 steps, and training matches the unscaled run closely (the scale is a power of
 * two: scaling and unscaling are exact where nothing underflows). */
Test(amp, scaler_grows_after_the_interval, .init = init)
{
    peat_flow_config c = config(PEAT_PRECISION_AMP_FP16);
    c.loss_scale_init = 1024, c.loss_scale_interval = 3;
    run r = make("mlp", &c);
    for (int i = 0; i < 10; i++) {
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_step(r.f, &m), PEAT_OK);
        cr_assert_eq(m.skipped, 0, "step %d skipped at scale %g", i, m.loss_scale);
        double want = 1024.0 * (double)(1 << (i / 3));
        cr_assert_eq(m.loss_scale, want, "step %d: scale %g, expected %g", i, m.loss_scale, want);
    }
    cr_assert_eq(peat_models_flow_loss_scale(r.f), 8192.0, "after 9 of 10 steps grown 3 times");
    drop(&r);
}

/* ---- a campaign under amp-fp16 ---------------------------------------------------------- */

static peat_campaign_result *campaign(const char *kernel, const char *precision, char *dir,
                                      size_t n)
{
    snprintf(dir, n, "/tmp/peat_test_amp_%d_%s_%s", (int)getpid(), kernel, precision);
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = kernel, o.flow = "gpt", o.precision = precision, o.no_runtime = 1, o.quiet = 1,
    o.out_dir = dir;
    peat_campaign_result *res = calloc(1, sizeof *res);
    cr_assert_not_null(res);
    cr_assert_eq(peat_run_campaign(&o, res), PEAT_OK, "%s %s: %s", kernel, precision,
                 peat_error_last());
    return res;
}

static int has(const peat_campaign_result *r, peat_finding_class cls)
{
    for (int i = 0; i < r->n_findings; i++)
        if (r->findings[i].cls == cls) return 1;
    return 0;
}

/* gemm_fp16 in gpt: RANGE from unscaled gradients at fp32 (as before), at amp-fp16 its declared
 * fp16 precision (WARN) and no RANGE; the loss scale is recorded per iteration. */
Test(amp, gemm_fp16_in_gpt_is_judged_in_its_regime, .init = init, .timeout = 300)
{
    char d32[256], d16[256];
    peat_campaign_result *r32 = campaign("gemm_fp16", "fp32", d32, sizeof d32);
    cr_assert(has(r32, PEAT_FIND_RANGE), "fp32: unscaled gradients underflow fp16");
    cr_assert_eq(r32->precision[0], '\0', "fp32 reports no precision line");
    peat_campaign_result *r16 = campaign("gemm_fp16", "amp-fp16", d16, sizeof d16);
    cr_assert(!has(r16, PEAT_FIND_RANGE), "amp-fp16: no RANGE (first finding %s %s)",
              peat_detector_finding_name(r16->findings[0].cls), r16->findings[0].params);
    cr_assert(has(r16, PEAT_FIND_WITHIN_BOUND) || has(r16, PEAT_FIND_REDUCED_PRECISION),
              "amp-fp16: within bound or its declared precision");
    cr_assert_neq(r16->verdict, PEAT_ACCEPT_FAIL, "amp-fp16: gemm_fp16 does not fail");
    cr_assert(strstr(r16->precision, "amp-fp16"), "precision line: %s", r16->precision);
    /* /metrics/amp: one row per iteration, the scale starting at 2^16 */
    char path[300];
    snprintf(path, sizeof path, "%s/campaign.h5", d16);
    peat_store_t *s;
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK, "%s", peat_error_last());
    int nc;
    const peat_store_col *cols = peat_store_amp_cols(&nc);
    peat_store_table_t *t;
    cr_assert_eq(peat_store_table_open(s, "/metrics/amp", cols, nc, &t), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(peat_store_table_rows(t), r16->plan_iters > 0 ? r16->plan_iters : 60,
                 "one row per iteration");
    peat_store_value v;
    cr_assert_eq(peat_store_table_get(t, 0, 1, &v), PEAT_OK);
    cr_assert_eq(v.d, 65536.0, "first scale %g", v.d);
    int64_t skipped = 0;
    for (int64_t i = 0; i < peat_store_table_rows(t); i++) {
        cr_assert_eq(peat_store_table_get(t, i, 2, &v), PEAT_OK);
        skipped += v.i;
    }
    cr_assert_eq(skipped, r16->skipped_steps, "table and report agree on skipped steps");
    peat_store_table_close(t);
    peat_store_close(s);
    free(r32), free(r16);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", d32, d16);
    cr_assert_eq(system(cmd), 0);
}

/* Scaler options without the scaler, and --precision on a capture, are refused by name before
 * anything is written. */
Test(amp, scaler_options_without_amp_fp16_are_refused, .init = init)
{
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/peat_test_amp_refused_%d", (int)getpid());
    const char *precisions[] = {NULL, "fp32", "bf16"};
    for (int i = 0; i < 3; i++) {
        peat_campaign_opts o;
        peat_campaign_opts_default(&o);
        o.kernel = "gemm_new", o.flow = "mlp", o.precision = precisions[i], o.quiet = 1;
        o.loss_scale_init = 1024, o.out_dir = dir;
        peat_campaign_result *res = calloc(1, sizeof *res);
        cr_assert_eq(peat_run_campaign(&o, res), PEAT_ERR_INVAL, "precision %s",
                     precisions[i] ? precisions[i] : "(default)");
        cr_assert(strstr(peat_error_last(), "--loss-scale-init"), "message: %s", peat_error_last());
        free(res);
        cr_assert_neq(access(dir, F_OK), 0, "nothing written for a refused run");
    }
}
