/* fi.c: playback fault-injection trials: plan (seeded draws), run at a site, classify outcome. */
#include "inject/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const site_names[PEAT_INJECT_SITE_COUNT] = {"output", "input", "acc"};
static const char *const outcome_names[PEAT_INJECT_OUTCOME_COUNT] = {"MASKED", "TOLERABLE", "SDC",
                                                                     "DUE"};

const char *peat_inject_site_name(peat_inject_site s)
{
    return (unsigned)s < PEAT_INJECT_SITE_COUNT ? site_names[s] : "?";
}

peat_status peat_inject_site_parse(const char *name, peat_inject_site *out)
{
    for (int s = 0; s < PEAT_INJECT_SITE_COUNT; s++)
        if (name && strcmp(name, site_names[s]) == 0) {
            *out = (peat_inject_site)s;
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_INVAL, "unknown fault site '%s' (output, input, acc)",
                      name ? name : "(null)");
}

const char *peat_inject_outcome_name(peat_inject_outcome o)
{
    return (unsigned)o < PEAT_INJECT_OUTCOME_COUNT ? outcome_names[o] : "?";
}

/* Bit-level models carry a `bit` parameter (bitflip, stuck). */
static int has_bit(const peat_inject_model_t *m)
{
    return m->def->id == PEAT_INJ_BITFLIP || m->def->id == PEAT_INJ_STUCK;
}

peat_status peat_inject_trial_plan(const peat_inject_model_t *m, peat_inject_site site,
                                   uint64_t seed, int64_t index, int64_t n_records,
                                   peat_inject_trial *t)
{
    if (!m || !t || n_records < 1 || index < 0 || (unsigned)site >= PEAT_INJECT_SITE_COUNT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "fi plan: bad model, site, index or record count");
    memset(t, 0, sizeof *t);
    snprintf(t->model, sizeof t->model, "%s", m->spec);
    char stream[320];
    snprintf(stream, sizeof stream, "fi/%s/%s/%lld", m->spec, site_names[site], (long long)index);
    t->seed = peat_seed_derive(seed, stream);
    t->index = index;
    t->site = site;
    t->target = -1;
    t->bit = -1;
    t->prop = PEAT_INJECT_OUTCOME_COUNT; /* not followed (yet) */
    peat_rng_t *r = peat_rng_new(peat_seed_derive(t->seed, "plan"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi plan: rng");
    t->record = (int64_t)peat_rng_int(r, (uint64_t)n_records);
    if (has_bit(m)) {
        int b = (int)peat_inject_param_get(m, "bit");
        t->bit = b >= 0 ? b : (int)peat_rng_int(r, 32);
    }
    peat_rng_free(r);
    if (has_bit(m) && peat_inject_param_get(m, "bit") < 0) {
        peat_inject_model_t *c;
        PEAT_TRY(peat_inject_model_clone_with(m, "bit", t->bit, &c));
        snprintf(t->spec, sizeof t->spec, "%s", c->spec);
        peat_inject_model_free(c);
    } else {
        snprintf(t->spec, sizeof t->spec, "%s", m->spec);
    }
    return PEAT_OK;
}

/* ---- classification ---- */

static void classify_output(const peat_tensor *y_t, const peat_tensor *g_t, const peat_tensor *e_t,
                            const double *bound, peat_inject_trial *t)
{
    const float *y = peat_f32(y_t), *g = peat_f32(g_t);
    const double *e = peat_f64(e_t);
    int64_t n = peat_tensor_numel(g_t);
    for (int64_t i = 0; i < n; i++) {
        if (peat_f32_bits(y[i]) == peat_f32_bits(g[i])) continue;
        t->n_diff++;
        if (!isfinite(y[i])) {
            t->n_nonfinite += isfinite(g[i]) != 0;
            continue;
        }
        if (!isfinite(e[i])) continue; /* no finite reference to measure against */
        double err = fabs((double)y[i] - e[i]);
        double norm = bound[i] > 0.0 ? err / bound[i] : (err > 0.0 ? INFINITY : 0.0);
        if (norm > t->max_norm) t->max_norm = norm;
        if (norm > 1.0) t->n_over++;
    }
}

peat_inject_outcome peat_inject_classify(const peat_args *a, const peat_inject_ref *ref,
                                         peat_inject_trial *t)
{
    t->n_diff = t->n_over = t->n_nonfinite = 0;
    t->max_norm = 0.0;
    for (int o = 0; o < ref->n_out && o < a->n_out; o++)
        classify_output(a->out[o], ref->golden[o], ref->exact[o], ref->bound[o], t);
    t->outcome = t->n_nonfinite ? PEAT_INJECT_DUE
                 : t->n_over    ? PEAT_INJECT_SDC
                 : t->n_diff    ? PEAT_INJECT_TOLERABLE
                                : PEAT_INJECT_MASKED;
    return t->outcome;
}

/* ---- sites ---- */

static void golden_copy(const peat_args *a, const peat_inject_ref *ref)
{
    for (int o = 0; o < a->n_out; o++)
        memcpy(a->out[o]->data, ref->golden[o]->data, peat_tensor_nbytes(ref->golden[o]));
}

/* Output site: the model as specified. Output-only models start from the golden outputs and
 * draw from the same stream peat_inject_run would, so both paths give the same bits. */
static peat_status site_output(const peat_inject_model_t *m, const peat_kernel *k,
                               const peat_args *a, const peat_inject_ref *ref, peat_inject_trial *t)
{
    t->target = m->def->id == PEAT_INJ_BITFLIP || m->def->id == PEAT_INJ_STUCK ||
                        m->def->id == PEAT_INJ_TILE || m->def->id == PEAT_INJ_BOUNDARY ||
                        m->def->id == PEAT_INJ_NAN
                    ? (int)peat_inject_param_get(m, "out")
                    : -1;
    if (!peat_inject_model_output_only(m, a->op)) return peat_inject_run(m, k, a, t->seed);
    if (t->target >= a->n_out)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: out=%d but %s has %d output(s)", m->spec,
                          t->target, peat_op_name(a->op), a->n_out);
    golden_copy(a, ref);
    return peat_inject_outputs(m, a, t->seed);
}

/* Input site: one F32 input, drawn with probability proportional to its size (a random word of
 * the call's input memory), corrupted in a copy; the golden kernel then computes on it. */
static peat_status site_input(const peat_inject_model_t *m, const peat_kernel *k,
                              const peat_args *a, peat_inject_trial *t)
{
    int64_t total = 0;
    for (int i = 0; i < a->n_in; i++)
        if (a->in[i] && a->in[i]->dtype == PEAT_DTYPE_F32) total += peat_tensor_numel(a->in[i]);
    if (total == 0)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "fi: %s has no F32 input to corrupt",
                          peat_op_name(a->op));
    peat_rng_t *r = peat_rng_new(peat_seed_derive(t->seed, "target"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: rng");
    int64_t w = (int64_t)peat_rng_int(r, (uint64_t)total);
    peat_rng_free(r);
    int target = 0;
    for (int i = 0; i < a->n_in; i++) {
        if (!a->in[i] || a->in[i]->dtype != PEAT_DTYPE_F32) continue;
        target = i;
        if (w < peat_tensor_numel(a->in[i])) break;
        w -= peat_tensor_numel(a->in[i]);
    }
    t->target = target;
    peat_tensor *copy = NULL;
    PEAT_TRY(peat_tensor_clone(a->in[target], &copy));
    peat_status st = peat_inject_corrupt_tensor(m, a->op, copy, t->seed);
    if (st == PEAT_OK) {
        peat_args b = *a;
        b.in[target] = copy;
        st = peat_kernel_run(k, &b);
    }
    peat_tensor_free(copy);
    return st;
}

/* Accumulator site (GEMM): `count` output elements, each recomputed in the golden's order with
 * the running sum hit after a drawn step k (bit flipped, or NaN / Inf written). */
static peat_status site_acc(const peat_inject_model_t *m, const peat_args *a,
                            const peat_inject_ref *ref, peat_inject_trial *t)
{
    int id = m->def->id;
    if (a->op != PEAT_OP_GEMM || (id != PEAT_INJ_BITFLIP && id != PEAT_INJ_NAN))
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                          "fi: site acc takes bitflip or nan on gemm, not %s on %s", m->spec,
                          peat_op_name(a->op));
    golden_copy(a, ref);
    t->target = 0;
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], nb = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    int64_t count = (int64_t)peat_inject_param_get(m, "count");
    peat_rng_t *r = peat_rng_new(peat_seed_derive(t->seed, m->def->name));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi: rng");
    for (int64_t c = 0; c < count; c++) {
        int64_t e = (int64_t)peat_rng_int(r, (uint64_t)(nb * M * N)), step = 0;
        if (K > 0) step = (int64_t)peat_rng_int(r, (uint64_t)K);
        int64_t b = e / (M * N), i = e % (M * N) / N, j = e % N;
        const float *A = peat_f32(a->in[0]) + b * M * K, *B = peat_f32(a->in[1]) + b * K * N;
        float s = 0.0f;
        for (int64_t kk = 0; kk < K; kk++) {
            s += (tA ? A[kk * M + i] : A[i * K + kk]) * (tB ? B[j * K + kk] : B[kk * N + j]);
            if (kk != step) continue;
            if (id == PEAT_INJ_BITFLIP)
                s = peat_f32_from_bits(peat_f32_bits(s) ^ (1u << t->bit));
            else
                s = peat_inject_param_get(m, "value") > 0 ? INFINITY : NAN;
        }
        float *D = peat_f32(a->out[0]) + b * M * N;
        /* the golden's epilogue (inject/gemm.c) */
        D[i * N + j] =
            beta != 0.0f ? alpha * s + beta * peat_f32(a->in[2])[b * M * N + i * N + j] : alpha * s;
    }
    peat_rng_free(r);
    return PEAT_OK;
}

static peat_status ref_check(const peat_args *a, const peat_inject_ref *ref)
{
    if (!ref || ref->n_out != a->n_out)
        return PEAT_ERROR(PEAT_ERR_INVAL, "fi: reference has %d outputs, call %d",
                          ref ? ref->n_out : -1, a->n_out);
    for (int o = 0; o < a->n_out; o++) {
        int64_t n = peat_tensor_numel(a->out[o]);
        if (!ref->golden[o] || !ref->exact[o] || !ref->bound[o] ||
            peat_tensor_numel(ref->golden[o]) != n || peat_tensor_numel(ref->exact[o]) != n ||
            ref->golden[o]->dtype != PEAT_DTYPE_F32 || ref->exact[o]->dtype != PEAT_DTYPE_F64)
            return PEAT_ERROR(PEAT_ERR_INVAL, "fi: reference of output %d missing or mis-shaped",
                              o);
    }
    return PEAT_OK;
}

peat_status peat_inject_trial_run(const peat_inject_model_t *m, const peat_kernel *golden,
                                  const peat_args *a, const peat_inject_ref *ref,
                                  peat_inject_trial *t)
{
    if (!m || !golden || !a || !t) return PEAT_ERROR(PEAT_ERR_INVAL, "fi: NULL argument");
    PEAT_TRY(ref_check(a, ref));
    /* the model as the plan resolved it (a drawn bit) */
    peat_inject_model_t *res = NULL;
    if (has_bit(m) && peat_inject_param_get(m, "bit") != t->bit)
        PEAT_TRY(peat_inject_model_clone_with(m, "bit", t->bit, &res));
    const peat_inject_model_t *rm = res ? res : m;
    peat_status st;
    switch (t->site) {
    case PEAT_INJECT_SITE_OUTPUT:
        st = site_output(rm, golden, a, ref, t);
        break;
    case PEAT_INJECT_SITE_INPUT:
        st = site_input(rm, golden, a, t);
        break;
    case PEAT_INJECT_SITE_ACC:
        st = site_acc(rm, a, ref, t);
        break;
    default:
        st = PEAT_ERROR(PEAT_ERR_INVAL, "fi: site %d out of range", (int)t->site);
    }
    peat_inject_model_free(res);
    t->why[0] = 0;
    /* a model that does not apply is the caller's error; a computation that fails is an outcome */
    if (st == PEAT_ERR_INVAL || st == PEAT_ERR_UNSUPPORTED || st == PEAT_ERR_NOMEM) return st;
    if (st != PEAT_OK) {
        snprintf(t->why, sizeof t->why, "%s", peat_error_last());
        t->n_diff = t->n_over = t->n_nonfinite = 0;
        t->max_norm = 0.0;
        t->outcome = PEAT_INJECT_DUE;
        return PEAT_OK;
    }
    peat_inject_classify(a, ref, t);
    return PEAT_OK;
}
