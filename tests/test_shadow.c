/* test_shadow.c: the runtime stage's shadow check (a time bomb's first bad call named, a warm-up
 * switch to bf16 failing, an honest kernel clean) and the loop rule for candidates (issue 42). */
#include <criterion/criterion.h>

#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "harness/runtime/runtime.h"
#include "detector/detector.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Calls a kernel made in its process (the worker keeps it from call to call, as training does). */
static int64_t calls_made;

/* x rounded to bf16 (nearest even) and back. */
static float bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The plain fp32 GEMM (each element summed over k in order), operands rounded to bf16 when rb,
 * and every output scaled by (1 + wrong). */
static peat_status gemm_loop(const peat_args *a, int rb, float wrong)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    for (int64_t b = 0; b < B; b++) {
        const float *A = peat_f32(a->in[0]) + b * M * K, *Bm = peat_f32(a->in[1]) + b * K * N;
        const float *C = beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        float *D = (float *)a->out[0]->data + b * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    float x = tA ? A[k * M + i] : A[i * K + k],
                          y = tB ? Bm[j * K + k] : Bm[k * N + j];
                    s += (rb ? bf16(x) : x) * (rb ? bf16(y) : y);
                }
                float v = alpha * s + (C ? beta * C[i * N + j] : 0.0f);
                D[i * N + j] = v * (1.0f + wrong);
            }
    }
    return PEAT_OK;
}

#define BOMB_AT   200 /* the time bomb: exact for its first 200 calls, 1e-3 off from then on */
#define WARMUP_AT 100 /* the warm-up switch: fp32 for 100 calls, then bf16 operands */

static peat_status time_bomb(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return gemm_loop(a, 0, calls_made++ >= BOMB_AT ? 1e-3f : 0.0f);
}

static peat_status warmup_switch(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    return gemm_loop(a, calls_made++ >= WARMUP_AT, 0.0f);
}

static const peat_kernel *kernel(const char *name, peat_kernel_fn fn)
{
    const peat_kernel *k = peat_registry_find(name);
    if (k) return k;
    peat_kernel d = {.name = name,
                     .op = PEAT_OP_GEMM,
                     .role = PEAT_ROLE_CANDIDATE,
                     .backend = "cpu",
                     .in_dtype = PEAT_DTYPE_F32,
                     .out_dtype = PEAT_DTYPE_F32,
                     .acc_dtype = PEAT_DTYPE_F32,
                     .fn = fn,
                     .desc = "test kernel (test_shadow.c)"};
    cr_assert_eq(peat_registry_add(&d), PEAT_OK, "%s", peat_error_last());
    return peat_registry_find(name);
}

static void setup(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
}

TestSuite(shadow, .init = setup);

/* The lockstep on mlp with k in the loop, isolated (its state kept), the shadow check on. */
static peat_runtime_result loop_with(const peat_kernel *k, int64_t iters)
{
    peat_runtime_opts o;
    memset(&o, 0, sizeof o);
    o.flow = "mlp";
    o.cfg.seed = 1;
    o.cfg.weight_decay = -1;
    o.iters = iters;
    o.op = PEAT_OP_GEMM;
    o.candidate = k;
    o.isolate = 1;
    o.kernel_timeout_s = 30;
    cr_assert_eq(peat_freq_schedule_parse("1", &o.freqs), PEAT_OK);
    o.shadow.on = 1;
    peat_runtime_result r;
    cr_assert_eq(peat_runtime_run_all(&o, &r), PEAT_OK, "%s", peat_error_last());
    return r;
}

Test(shadow, names_the_first_bad_call_of_a_time_bomb)
{
    peat_runtime_result r = loop_with(kernel("test_time_bomb", time_bomb), 40);
    const peat_runtime_shadow *s = &r.faulty[0].shadow;
    cr_assert(s->calls > BOMB_AT + 50, "%lld calls, %lld swapped, n %lld, ended %s",
              (long long)s->calls, (long long)r.faulty[0].swapped, (long long)r.n,
              r.faulty[0].ended);
    cr_assert_gt(s->bad, 0, "the bomb went off unseen");
    cr_assert_eq(s->bad_call, BOMB_AT, "first bad call %lld", (long long)s->bad_call);
    cr_assert_gt(s->bad_cand, s->bad_env);
    cr_assert_leq(s->bad_gold, 1.0, "the golden is within its bound");
    peat_finding f;
    cr_assert(peat_runtime_shadow_finding(&r.faulty[0], &f));
    cr_assert_eq(f.cls, PEAT_FIND_OUT_OF_BOUND);
    cr_assert_eq(f.accept, PEAT_ACCEPT_FAIL);
    char want[32];
    snprintf(want, sizeof want, "call %d (iteration", BOMB_AT);
    cr_assert(strstr(f.evidence[0], want), "%s", f.evidence[0]);
    cr_log_info("%s", f.evidence[0]);
    cr_assert(strstr(f.evidence[0], "fc") || strstr(f.evidence[0], "x"), "%s", f.evidence[0]);
    peat_runtime_result_free(&r);
}

Test(shadow, a_warmup_switch_to_bf16_fails)
{
    peat_runtime_result r = loop_with(kernel("test_warmup_bf16", warmup_switch), 40);
    const peat_runtime_shadow *s = &r.faulty[0].shadow;
    peat_finding f;
    int shadow = peat_runtime_shadow_finding(&r.faulty[0], &f);
    peat_finding rt =
        peat_detector_runtime_finding(&r.verdict[0], r.faulty[0].label, r.faulty[0].swapped);
    cr_assert(shadow || rt.accept == PEAT_ACCEPT_FAIL, "neither the shadow check nor the loop");
    cr_assert(shadow, "bf16 operands are far beyond the fp32 bound");
    cr_assert_eq(s->bad_call, WARMUP_AT, "first bad call %lld", (long long)s->bad_call);
    peat_runtime_result_free(&r);
}

Test(shadow, an_honest_kernel_has_no_shadow_finding)
{
    peat_runtime_result r = loop_with(peat_registry_find_on("gemm_new", "cpu"), 40);
    const peat_runtime_shadow *s = &r.faulty[0].shadow;
    cr_assert_gt(s->checked, 0);
    cr_assert_eq(s->bad, 0, "gemm_new: call %lld, %g x the bound (golden %g)",
                 (long long)s->bad_call, s->bad_cand, s->bad_gold);
    peat_finding f;
    cr_assert_not(peat_runtime_shadow_finding(&r.faulty[0], &f));
    cr_assert_eq(r.verdict[0].cls, PEAT_RUNTIME_EQUIVALENT);
    /* "inside" only when inside: the quoted last-quarter mean is within its bound */
    cr_assert_leq(r.verdict[0].end_mean, r.verdict[0].end_bound);
    cr_assert(strstr(r.verdict[0].evidence, "inside"));
    peat_runtime_result_free(&r);
}

/* The loop rule on constructed verdicts: a candidate's drift beyond the limit is DEGRADES, and a
 * candidate's DEGRADES is FAIL unless a declared format explains it; a model's stays WARN. */
Test(shadow, loop_rule_for_candidates_and_models)
{
    peat_runtime_verdict v;
    memset(&v, 0, sizeof v);
    v.cls = PEAT_RUNTIME_EQUIVALENT, v.iter = -1, v.drift_iter = 12;
    v.drift_end = 2.0 * PEAT_DETECTOR_DRIFT_FAIL, v.weights_out = 1;
    peat_runtime_verdict model = v;
    cr_assert_eq(peat_detector_runtime_verdict_acceptance(&model), PEAT_ACCEPT_PASS);
    peat_runtime_verdict cand = v;
    peat_detector_runtime_candidate(&cand, 0, 0);
    cr_assert_eq(cand.cls, PEAT_RUNTIME_DEGRADES);
    cr_assert_str_eq(cand.metric, "weights");
    cr_assert_eq(cand.iter, 12);
    cr_assert_eq(peat_detector_runtime_verdict_acceptance(&cand), PEAT_ACCEPT_FAIL);
    peat_runtime_verdict decl = v;
    peat_detector_runtime_candidate(&decl, 1, 0);
    cr_assert_eq(peat_detector_runtime_verdict_acceptance(&decl), PEAT_ACCEPT_WARN);
    peat_runtime_verdict near = v;
    near.weights_out = 0, near.drift_end = 0.5 * PEAT_DETECTOR_DRIFT_FAIL;
    peat_detector_runtime_candidate(&near, 0, 0);
    cr_assert_eq(near.cls, PEAT_RUNTIME_EQUIVALENT, "within the limit: a note at most");
    peat_runtime_verdict deg;
    memset(&deg, 0, sizeof deg);
    deg.cls = PEAT_RUNTIME_DEGRADES;
    cr_assert_eq(peat_detector_runtime_verdict_acceptance(&deg), PEAT_ACCEPT_WARN, "a model");
    peat_detector_runtime_candidate(&deg, 0, 0);
    cr_assert_eq(peat_detector_runtime_verdict_acceptance(&deg), PEAT_ACCEPT_FAIL);
    /* no honest drift measured and every call inside its envelope: the drift stays a note */
    peat_runtime_verdict unscaled = v;
    peat_detector_runtime_candidate(&unscaled, 0, 1);
    cr_assert_eq(unscaled.cls, PEAT_RUNTIME_EQUIVALENT, "no scale for the weights: not judged");
    cr_assert(strstr(unscaled.evidence, "not judged"), "the note says why: %s", unscaled.evidence);
    /* a loss outside is judged whatever the weights' scale */
    peat_runtime_verdict lossy = deg;
    lossy.candidate = 0;
    peat_detector_runtime_candidate(&lossy, 0, 1);
    cr_assert_eq(peat_detector_runtime_verdict_acceptance(&lossy), PEAT_ACCEPT_FAIL);
}

/* The band is still when every member's weights stayed the golden run's. */
Test(shadow, a_band_that_never_moved_is_still)
{
    double w0[3] = {0, 0, 0}, w1[3] = {0, 1e-9, 0};
    peat_runtime_band b;
    memset(&b, 0, sizeof b);
    b.n = 3, b.wdist_hi = w0;
    cr_assert(peat_detector_band_still(&b), "all distances 0");
    b.wdist_hi = w1;
    cr_assert_not(peat_detector_band_still(&b), "one member moved by 1e-9");
    cr_assert_not(peat_detector_band_still(NULL), "no band");
}

/* The envelope: twice the golden's or the bound, a kernel beyond the bound on fresh calls
 * against 16x its own. */
Test(shadow, envelope)
{
    cr_assert_float_eq(peat_runtime_shadow_envelope(0.3, 0.0), 2.0, 1e-12);
    cr_assert_float_eq(peat_runtime_shadow_envelope(1.5, 0.7), 3.0, 1e-12);
    cr_assert_float_eq(peat_runtime_shadow_envelope(0.3, 100.0), 1600.0, 1e-9);
}
