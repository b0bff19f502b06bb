/* runtime_call.c: the candidate in the training loop of a runtime FI run, through the isolated
 * worker (harness/isolate/isolate_worker.c) or in-process under a watchdog (--no-isolate), and the
 * shadow check of its calls against the op's rounding bound beside the golden's. */
#include "harness/runtime/call.h"
#include "peat/backend.h"
#include "analyzer/analyzer.h"
#include "core/clock.h"
#include "harness/isolate/isolate.h"
#include "harness/isolate/isolate_impl.h"
#include "golden/golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shadow check (docs/fault-injection.md, "The shadow check"; none of these was fitted to a
 * test or a kernel):
 * - SHADOW_FIRST: every call of the first 400 of a run is checked. What playback cannot see
 *   (each recorded call runs in a fresh process) starts after some calls: a warm-up that switches
 *   precision, a cache that fills; 400 calls are 43 iterations of mlp, 11 of gpt.
 * - SHADOW_EVERY: after them every 16th call, and every call of the last iteration (where the run
 *   ends: a defect that starts late is still named); the cost is the golden kernel once per
 *   checked call, the exact result only on the calls the cheap threshold below cannot clear.
 *   Both are set by the cost goal, at most +50% on the runtime stage (bench_band --shadow: 1000
 *   and every 8th cost gpt +76%, mostly the exact GEMM and its magnitudes).
 * - PEAT_SHADOW_FACTOR 2: a call is bad when its largest error over the bound exceeds twice the
 *   golden's own on the same call, or twice the bound itself (every honest summation order stays
 *   within 1: docs/bounds.md). The detector's envelope for a golden beyond the bound is twice its
 *   max (docs/detector.md "env"), the sequence stage's STATEFUL factor is the same 2.
 * - PEAT_SHADOW_SELF_FACTOR 16: a kernel that is beyond the bound on fresh calls (a declared
 *   narrower format, an approximation: the playback already judged it) is held to 16x its own
 *   largest error over the playback's calls: the detector's gross-error margin (16 bounds, four
 *   bits); a loop call is another draw of the same computation, a defect is orders beyond.
 * - The cheap threshold: with |c - g| <= gamma |g| / (1 + 4 gamma) + eta for every element
 *   (c the candidate's, g the golden's output, gamma and eta the bound's coefficients), the
 *   candidate is within one bound of the golden (|g| <= (1 + 4 gamma) mag while the golden is
 *   within 4 bounds), so its error is at most the golden's plus one bound, inside the envelope:
 *   the exact result is not needed. */
#define SHADOW_FIRST            400
#define SHADOW_EVERY            16
#define PEAT_SHADOW_FACTOR      2.0
#define PEAT_SHADOW_SELF_FACTOR 16.0
#define SHADOW_GOLD_SLACK       4.0

struct peat_runtime_call {
    const peat_kernel *k;
    peat_isolate_worker *w; /* NULL: in-process */
    double timeout_s;
    int ended;
    char why[256];
    peat_runtime_shadow sh;
    int64_t last_iter; /* the run's last iteration (every call checked); -1: unknown */
};

double peat_runtime_shadow_envelope(double gold, double self)
{
    double env = PEAT_SHADOW_FACTOR * fmax(1.0, gold);
    return self > 1.0 ? fmax(env, PEAT_SHADOW_SELF_FACTOR * self) : env;
}

/* Whether every F32 output of the candidate is within the cheap threshold of the golden's. */
static int within_cheap(const peat_args *a, const peat_args *g, double gamma, double eta)
{
    double lim = gamma / (1.0 + SHADOW_GOLD_SLACK * gamma);
    for (int o = 0; o < a->n_out; o++) {
        if (a->out[o]->dtype != PEAT_DTYPE_F32) continue;
        const float *c = peat_f32(a->out[o]), *x = peat_f32(g->out[o]);
        for (int64_t e = 0, n = peat_tensor_numel(a->out[o]); e < n; e++) {
            if (c[e] == x[e] || (isnan(c[e]) && isnan(x[e]))) continue;
            double d = fabs((double)c[e] - (double)x[e]);
            if (!(d <= lim * fabs((double)x[e]) + eta)) return 0;
        }
    }
    return 1;
}

/* Largest |y - exact| / bound over one F32 output (INFINITY: non-finite where exact is not). */
static double norm_of(const float *y, const double *ex, const double *mag, int64_t n, double gamma,
                      double eta)
{
    double worst = 0.0;
    for (int64_t e = 0; e < n; e++) {
        if (!isfinite(ex[e])) continue;
        if (!isfinite(y[e])) return INFINITY;
        double r = fabs((double)y[e] - ex[e]) / (gamma * mag[e] + eta);
        if (r > worst) worst = r;
    }
    return worst;
}

/* The exact outputs, and each of candidate (a) and golden (g) measured against them. */
static peat_status exact_norms(const peat_args *a, const peat_args *g, double gamma, double eta,
                               double *cand, double *gold)
{
    const peat_kernel *ek = peat_registry_role(a->op, PEAT_ROLE_EXACT, PEAT_BACKEND_HOST);
    if (!ek) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no exact kernel for %s", peat_op_name(a->op));
    peat_args ea = *g;
    ea.n_out = 0;
    PEAT_TRY(peat_op_alloc_outputs(&ea, PEAT_DTYPE_F64));
    peat_status st = peat_kernel_run(ek, &ea);
    *cand = *gold = 0.0;
    for (int o = 0; st == PEAT_OK && o < a->n_out && o < ea.n_out; o++) {
        if (a->out[o]->dtype != PEAT_DTYPE_F32) continue;
        int64_t n = peat_tensor_numel(ea.out[o]);
        double *mag = malloc((size_t)n * sizeof *mag + 1);
        if (!mag) st = PEAT_ERROR(PEAT_ERR_NOMEM, "shadow magnitudes");
        if (st == PEAT_OK) st = peat_golden_magnitude(&ea, o, ea.out[o], mag);
        const double *ex = (const double *)ea.out[o]->data;
        if (st == PEAT_OK) {
            *cand = fmax(*cand, norm_of(peat_f32(a->out[o]), ex, mag, n, gamma, eta));
            *gold = fmax(*gold, norm_of(peat_f32(g->out[o]), ex, mag, n, gamma, eta));
        }
        free(mag);
    }
    peat_args_free_outputs(&ea);
    return st;
}

peat_status peat_runtime_shadow_measure(const peat_args *a, const peat_kernel *golden, double *cand,
                                        double *gold, int *exact)
{
    *cand = *gold = -1.0, *exact = 0;
    peat_args g = *a;
    int made = 0;
    peat_status st = PEAT_OK;
    for (; st == PEAT_OK && made < a->n_out; made++)
        st = peat_tensor_clone(a->out[made], &g.out[made]);
    if (st == PEAT_OK) st = peat_kernel_run(golden, &g);
    double gamma, eta;
    peat_analyzer_bound_coeffs(peat_op_info_get(a->op)->depth(&a->p), &gamma, &eta);
    if (st == PEAT_OK && !within_cheap(a, &g, gamma, eta)) {
        *exact = 1;
        st = exact_norms(a, &g, gamma, eta, cand, gold);
    }
    for (int o = 0; o < made; o++) peat_tensor_free(g.out[o]);
    return st;
}

/* "64x16x64" for a GEMM (M x N x K, batch in front when > 1), else the first output's shape. */
static void shape_of(const peat_args *a, char *buf, size_t n)
{
    if (a->op == PEAT_OP_GEMM) {
        char batch[32] = "";
        if (a->p.i[5] > 1) snprintf(batch, sizeof batch, "%lld of ", (long long)a->p.i[5]);
        snprintf(buf, n, "%s%lldx%lldx%lld", batch, (long long)a->p.i[2], (long long)a->p.i[3],
                 (long long)a->p.i[4]);
        return;
    }
    buf[0] = 0;
    const peat_tensor *t = a->n_out > 0 ? a->out[0] : NULL;
    for (int d = 0; t && d < t->ndim && strlen(buf) + 24 < n; d++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", d ? "x" : "",
                 (long long)t->shape[d]);
}

static int shadow_due(const peat_runtime_call *c, const peat_call_info *info)
{
    const peat_runtime_shadow *s = &c->sh;
    return s->on && (s->calls < s->first || (s->calls - s->first) % s->every == 0 ||
                     (c->last_iter >= 0 && info->iter >= c->last_iter));
}

/* The check of one completed call; its inputs are those the candidate saw (an input the output
 * aliases was copied before the call: in). A check that cannot run is skipped, not an error of
 * the run. */
static void shadow_check(peat_runtime_call *c, const peat_kernel *golden, const peat_args *a,
                         const peat_call_info *info)
{
    peat_runtime_shadow *s = &c->sh;
    double t0 = peat_clock_now(), cand, gold;
    int exact;
    s->checked++;
    if (peat_runtime_shadow_measure(a, golden, &cand, &gold, &exact) == PEAT_OK && exact) {
        s->exact++;
        double env = peat_runtime_shadow_envelope(gold, s->self_norm);
        if (!(cand <= env) && s->bad++ == 0) {
            s->bad_call = s->calls, s->bad_iter = info->iter, s->bad_op_call = info->op_call_index;
            snprintf(s->bad_layer, sizeof s->bad_layer, "%s", info->layer ? info->layer : "");
            shape_of(a, s->bad_shape, sizeof s->bad_shape);
            s->bad_cand = cand, s->bad_gold = gold, s->bad_env = env;
        }
    }
    s->seconds += peat_clock_now() - t0;
}

/* Inputs the outputs alias (a GEMM's D may be its C): copied before the candidate overwrites
 * them, so that the golden and the exact kernel see what the candidate saw. */
static peat_status aliased_copy(const peat_args *a, peat_args *seen, peat_tensor **copies)
{
    *seen = *a;
    for (int i = 0; i < a->n_in; i++) {
        copies[i] = NULL;
        for (int o = 0; o < a->n_out && !copies[i]; o++)
            if (a->in[i] && a->out[o] && a->in[i]->data == a->out[o]->data) {
                PEAT_TRY(peat_tensor_clone(a->in[i], &copies[i]));
                seen->in[i] = copies[i];
            }
    }
    return PEAT_OK;
}

/* Runs the call (fn: isolated or watched) and, when the schedule says so, checks it. */
static peat_status call_checked(peat_runtime_call *c, const peat_kernel *active, const peat_args *a,
                                const peat_call_info *info,
                                peat_status (*fn)(peat_runtime_call *, const peat_args *,
                                                  const peat_call_info *))
{
    int due = shadow_due(c, info);
    peat_tensor *copies[PEAT_MAX_IO] = {0};
    peat_args seen;
    peat_status cst = due ? aliased_copy(a, &seen, copies) : PEAT_OK;
    peat_status st = fn(c, a, info);
    if (st == PEAT_OK && due && cst == PEAT_OK) {
        for (int o = 0; o < a->n_out; o++) seen.out[o] = a->out[o];
        shadow_check(c, active, &seen, info);
    }
    for (int i = 0; i < a->n_in; i++) peat_tensor_free(copies[i]);
    c->sh.calls += st == PEAT_OK;
    return st;
}

static peat_status isolated_call(peat_runtime_call *c, const peat_args *a,
                                 const peat_call_info *info)
{
    if (c->ended) return PEAT_ERROR(PEAT_ERR_KERNEL, "%s", c->why);
    peat_call_outcome out;
    char why[200];
    PEAT_TRY(peat_isolate_worker_call(c->w, a, c->timeout_s, &out, why, sizeof why));
    if (out == PEAT_CALL_DONE) return PEAT_OK;
    c->ended = 1;
    snprintf(c->why, sizeof c->why, "%s (iteration %lld, call %lld of the op)", why,
             (long long)info->iter, (long long)info->op_call_index);
    return PEAT_ERROR(PEAT_ERR_KERNEL, "%s", c->why);
}

static peat_status watched_call(peat_runtime_call *c, const peat_args *a,
                                const peat_call_info *info)
{
    (void)info;
    return peat_isolate_watched_run(c->k, a, c->timeout_s);
}

static peat_status isolated_swap(void *user, const peat_kernel *active, const peat_args *a,
                                 const peat_call_info *info)
{
    return call_checked(user, active, a, info, isolated_call);
}

static peat_status watched_swap(void *user, const peat_kernel *active, const peat_args *a,
                                const peat_call_info *info)
{
    return call_checked(user, active, a, info, watched_call);
}

peat_status peat_runtime_call_setup(const peat_kernel *k, int isolate, double timeout_s,
                                    const peat_runtime_shadow *shadow, peat_exec_swap *s,
                                    peat_runtime_call **out)
{
    peat_runtime_call *c = calloc(1, sizeof *c);
    if (!c) return PEAT_ERROR(PEAT_ERR_NOMEM, "runtime call");
    c->k = k, c->timeout_s = timeout_s, c->last_iter = -1;
    if (shadow && shadow->on) {
        c->sh = *shadow;
        if (c->sh.first <= 0) c->sh.first = SHADOW_FIRST;
        if (c->sh.every <= 0) c->sh.every = SHADOW_EVERY;
    }
    c->sh.bad_call = c->sh.bad_iter = c->sh.bad_op_call = -1;
    if (isolate) {
        /* the kernel's state carries from call to call within the run, as in training; the
         * child starts here, before the band's threads do (a fork among running threads can
         * leave the child waiting on a lock no thread of its own will release) */
        peat_status st = peat_isolate_worker_create(k, 1, &c->w);
        if (st == PEAT_OK) st = peat_isolate_worker_start(c->w);
        if (st != PEAT_OK) {
            peat_isolate_worker_free(c->w);
            free(c);
            return st;
        }
    }
    s->kernel = NULL;
    s->fn = isolate ? isolated_swap : watched_swap;
    s->user = c;
    *out = c;
    return PEAT_OK;
}

void peat_runtime_call_last_iter(peat_runtime_call *c, int64_t last)
{
    if (c) c->last_iter = last;
}

int peat_runtime_call_ended(const peat_runtime_call *c, char *why, size_t nwhy)
{
    if (!c || !c->ended) return 0;
    snprintf(why, nwhy, "%s", c->why);
    return 1;
}

void peat_runtime_call_shadow(const peat_runtime_call *c, peat_runtime_shadow *out)
{
    memset(out, 0, sizeof *out);
    out->bad_call = out->bad_iter = out->bad_op_call = -1;
    if (c) *out = c->sh;
}

void peat_runtime_call_free(peat_runtime_call *c)
{
    if (!c) return;
    peat_isolate_worker_free(c->w);
    free(c);
}
