/* pyapi.c: libpeat.so's entry points for the PyTorch bridge: captured calls written through the
 * store, kernels and error models run on caller buffers, runtime verdicts by the detector. */
#include "harness/cli/commands.h"
#include "peat/backend.h"
#include "harness/pyapi/pyapi.h"
#include "core/freq.h"

#include "detector/detector.h"
#include "harness/runtime/builtin.h"
#include "harness/runtime/runtime.h"
#include "harness/runtime/call.h"
#include "inject/inject.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

peat_status peat_pyapi_init(void)
{
    return peat_runtime_builtin_init();
}

int peat_pyapi_main(int argc, char **argv)
{
    if (peat_runtime_builtin_init() != PEAT_OK) return 2;
    int rc = peat_cli_dispatch(argc, argv);
    fflush(stdout);
    fflush(stderr);
    return rc;
}

int64_t peat_pyapi_struct_size(int which)
{
    switch (which) {
    case 0:
        return (int64_t)sizeof(peat_pyapi_call);
    case 1:
        return (int64_t)sizeof(peat_tensor);
    case 2:
        return (int64_t)sizeof(peat_pyapi_verdict);
    case 3:
        return (int64_t)sizeof(peat_pyapi_freqs);
    default:
        return -1;
    }
}

peat_status peat_pyapi_store_create(const char *path, const char *flow, uint64_t seed,
                                    int64_t iters, const char *argv, const char *policy,
                                    const char *dtypes, void **out)
{
    if (!path || !flow || !out) return PEAT_ERROR(PEAT_ERR_INVAL, "store_create: NULL argument");
    peat_store_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.flow, sizeof m.flow, "%s", flow);
    snprintf(m.kernel, sizeof m.kernel, "%s", "torch");
    snprintf(m.backend, sizeof m.backend, "%s", "torch");
    snprintf(m.device, sizeof m.device, "%s", "PyTorch (captured)");
    m.seed = seed;
    m.iters = iters;
    snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_VERSION_STRING);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(m.created, sizeof m.created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(m.argv, sizeof m.argv, "%s", argv ? argv : "");
    snprintf(m.policy, sizeof m.policy, "%s", policy ? policy : "");
    snprintf(m.dtypes, sizeof m.dtypes, "%s", dtypes ? dtypes : "");
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_create(path, &m, &s));
    *out = s;
    return PEAT_OK;
}

/* An f32 copy of a bf16 or f16 tensor (the op table checks f32 working precision); other
 * dtypes are returned as they are (*copy NULL). */
static peat_status as_f32(const peat_tensor *t, const peat_tensor **view, peat_tensor **copy)
{
    *copy = NULL;
    *view = t;
    if (t->dtype != PEAT_DTYPE_BF16 && t->dtype != PEAT_DTYPE_F16) return PEAT_OK;
    PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, t->ndim, t->shape, copy));
    float *y = peat_f32(*copy);
    for (int64_t e = 0; e < peat_tensor_numel(t); e++) y[e] = (float)peat_tensor_get(t, e);
    *view = *copy;
    return PEAT_OK;
}

static peat_status args_of(const peat_pyapi_call *c, const peat_tensor *const *in, peat_args *a)
{
    if (!c || !in) return PEAT_ERROR(PEAT_ERR_INVAL, "call: NULL argument");
    if (c->op < 0 || c->op >= PEAT_OP_COUNT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "call: op %d is not a PEAT op", (int)c->op);
    if (c->n_in < 1 || c->n_in > PEAT_MAX_IO || c->n_out < 1 || c->n_out > PEAT_MAX_IO)
        return PEAT_ERROR(PEAT_ERR_INVAL, "call: %d inputs, %d outputs", (int)c->n_in,
                          (int)c->n_out);
    memset(a, 0, sizeof *a);
    a->op = (peat_op_kind)c->op;
    memcpy(a->p.i, c->i, sizeof a->p.i);
    memcpy(a->p.f, c->f, sizeof a->p.f);
    a->n_in = c->n_in;
    a->n_out = c->n_out;
    for (int k = 0; k < c->n_in; k++) a->in[k] = in[k];
    return PEAT_OK;
}

peat_status peat_pyapi_call_check(const peat_pyapi_call *c, const peat_tensor *const *in)
{
    peat_args a;
    PEAT_TRY(args_of(c, in, &a));
    peat_tensor *copies[PEAT_MAX_IO] = {0};
    peat_status st = PEAT_OK;
    for (int k = 0; st == PEAT_OK && k < a.n_in; k++) st = as_f32(in[k], &a.in[k], &copies[k]);
    if (st == PEAT_OK) st = peat_op_check(&a);
    for (int k = 0; k < PEAT_MAX_IO; k++) peat_tensor_free(copies[k]);
    return st;
}

static peat_status record_fill(peat_record *r, const peat_pyapi_call *c,
                               const peat_tensor *const *in, const peat_tensor *const *golden)
{
    r->id = c->id;
    r->op = (peat_op_kind)c->op;
    memcpy(r->p.i, c->i, sizeof r->p.i);
    memcpy(r->p.f, c->f, sizeof r->p.f);
    r->n_in = c->n_in;
    r->n_out = c->n_out;
    for (int k = 0; k < c->n_in; k++) PEAT_TRY(peat_tensor_clone(in[k], &r->in[k]));
    for (int k = 0; k < c->n_out; k++) {
        if (!golden[k])
            return PEAT_ERROR(PEAT_ERR_INVAL, "call %llu: golden output %d missing",
                              (unsigned long long)c->id, k);
        PEAT_TRY(peat_tensor_clone(golden[k], &r->golden[k]));
    }
    memcpy(r->flow, c->flow, sizeof r->flow);
    memcpy(r->layer, c->layer, sizeof r->layer);
    memcpy(r->golden_kernel, c->golden_kernel, sizeof r->golden_kernel);
    r->flow[sizeof r->flow - 1] = r->layer[sizeof r->layer - 1] = 0;
    r->golden_kernel[sizeof r->golden_kernel - 1] = 0;
    r->iter = c->iter;
    r->phase = (peat_phase)c->phase;
    r->call_index = c->call_index;
    r->op_call_index = c->op_call_index;
    r->seed = c->seed;
    return PEAT_OK;
}

peat_status peat_pyapi_call_write(void *store, const peat_pyapi_call *c,
                                  const peat_tensor *const *in, const peat_tensor *const *golden)
{
    if (!store || !golden) return PEAT_ERROR(PEAT_ERR_INVAL, "call_write: NULL argument");
    PEAT_TRY(peat_pyapi_call_check(c, in));
    peat_record *r = calloc(1, sizeof *r);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "record");
    peat_status st = record_fill(r, c, in, golden);
    if (st == PEAT_OK) st = peat_store_call_write(store, r);
    peat_record_free(r);
    return st;
}

peat_status peat_pyapi_metrics_append(void *store, int64_t iter, double loss, double accuracy)
{
    if (!store) return PEAT_ERROR(PEAT_ERR_INVAL, "metrics_append: no store");
    return peat_store_metrics_append(store, iter, loss, accuracy);
}

peat_status peat_pyapi_unmapped_write(void *store, int n, const char *const *ops,
                                      const int64_t *calls, const char *const *why)
{
    if (!store || n < 0 || (n > 0 && (!ops || !calls || !why)))
        return PEAT_ERROR(PEAT_ERR_INVAL, "unmapped_write: NULL argument");
    peat_store_table_t *t = NULL;
    PEAT_TRY(peat_store_table_open(store, PEAT_STORE_CAPTURE_UNMAPPED,
                                   peat_store_capture_unmapped_cols, 3, &t));
    peat_status st = PEAT_OK;
    for (int r = 0; st == PEAT_OK && r < n; r++) {
        char op[96], w[160];
        snprintf(op, sizeof op, "%s", ops[r]);
        snprintf(w, sizeof w, "%s", why[r]);
        peat_store_value v[3] = {{.s = op}, {.i = calls[r]}, {.s = w}};
        st = peat_store_table_append(t, v, 1);
    }
    peat_store_table_close(t);
    return st;
}

peat_status peat_pyapi_store_close(void *store)
{
    return peat_store_close(store);
}

static peat_status args_out(const peat_pyapi_call *c, const peat_tensor *const *in,
                            peat_tensor *const *out, peat_args *a)
{
    PEAT_TRY(args_of(c, in, a));
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "run: no outputs");
    for (int k = 0; k < c->n_out; k++) a->out[k] = out[k];
    return PEAT_OK;
}

peat_status peat_pyapi_kernel_run(const char *name, const peat_pyapi_call *c,
                                  const peat_tensor *const *in, peat_tensor *const *out)
{
    PEAT_TRY(peat_runtime_builtin_init());
    const peat_kernel *k = peat_registry_find_on(name ? name : "", PEAT_BACKEND_HOST);
    if (!k) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no CPU kernel named '%s'", name ? name : "");
    peat_args a;
    PEAT_TRY(args_out(c, in, out, &a));
    if (k->op != a.op)
        return PEAT_ERROR(PEAT_ERR_INVAL, "kernel '%s' computes %s, the call is %s", k->name,
                          peat_op_name(k->op), peat_op_name(a.op));
    return peat_kernel_run(k, &a);
}

peat_status peat_pyapi_model_run(const char *spec, uint64_t seed, const peat_pyapi_call *c,
                                 const peat_tensor *const *in, peat_tensor *const *out)
{
    PEAT_TRY(peat_runtime_builtin_init());
    peat_args a;
    PEAT_TRY(args_out(c, in, out, &a));
    const peat_kernel *g = peat_registry_role(a.op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    if (!g) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden CPU kernel for %s", peat_op_name(a.op));
    PEAT_TRY(peat_op_check(&a));
    peat_inject_model_t *m = NULL;
    PEAT_TRY(peat_inject_model_parse(spec ? spec : "", &m));
    peat_status st = peat_inject_run(m, g, &a, seed);
    peat_inject_model_free(m);
    return st;
}

_Static_assert(PEAT_FREQ_MAX == 4 && PEAT_FREQ_LABEL == 64,
               "peat_pyapi_freqs mirrors the schedule");

peat_status peat_pyapi_freqs_parse(const char *s, peat_pyapi_freqs *out)
{
    if (!s || !out) return PEAT_ERROR(PEAT_ERR_INVAL, "freqs_parse: NULL argument");
    memset(out, 0, sizeof *out);
    peat_freq_schedule f;
    PEAT_TRY(peat_freq_schedule_parse(s, &f));
    out->n = f.n;
    for (int i = 0; i < f.n; i++) {
        out->every[i] = f.f[i].every, out->prob[i] = f.f[i].prob;
        memcpy(out->label[i], f.f[i].label, sizeof out->label[i]);
    }
    return PEAT_OK;
}

const char *peat_pyapi_band_spec(int r)
{
    return peat_runtime_band_spec(r);
}

const char *peat_pyapi_runtime_class_name(int cls)
{
    return peat_detector_runtime_class_name((peat_runtime_class)cls);
}

const char *peat_pyapi_accept_name(int accept)
{
    return peat_detector_acceptance_name((peat_acceptance)accept);
}

/* Whether a kernel declares a format narrower than fp32 for its inputs, accumulation or outputs
 * (what explains a candidate's degradation: peat_detector_runtime_candidate). */
static int declares_narrow(const peat_kernel *k)
{
    const peat_dtype d[3] = {k->in_dtype, k->acc_dtype, k->out_dtype};
    for (int i = 0; i < 3; i++)
        if (d[i] == PEAT_DTYPE_BF16 || d[i] == PEAT_DTYPE_F16) return 1;
    return 0;
}

/* The detector's verdict of a run, the candidate's rules applied when kernel names one. */
static peat_status verdict_of(const peat_runtime_band *b, const peat_runtime_curve *c,
                              const char *kernel, peat_pyapi_verdict *out)
{
    peat_runtime_verdict v;
    PEAT_TRY(peat_detector_runtime_judge(b, c, &v));
    if (kernel) {
        const peat_kernel *k = peat_registry_find_on(kernel, PEAT_BACKEND_HOST);
        if (!k) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no CPU kernel named '%s'", kernel);
        peat_detector_runtime_candidate(&v, declares_narrow(k), 0);
    }
    memset(out, 0, sizeof *out);
    out->cls = (int32_t)v.cls;
    out->accept = (int32_t)peat_detector_runtime_verdict_acceptance(&v);
    out->iter = v.iter;
    out->final_loss = v.final_loss, out->band_lo = v.band_lo, out->band_hi = v.band_hi;
    out->end_mean = v.end_mean, out->end_bound = v.end_bound;
    out->wdist_ratio = v.wdist_ratio, out->drift_end = v.drift_end;
    snprintf(out->metric, sizeof out->metric, "%s", v.metric);
    snprintf(out->evidence, sizeof out->evidence, "%s", v.evidence);
    return PEAT_OK;
}

peat_status peat_pyapi_runtime_judge(int R, int64_t n, const double *band_loss,
                                     const double *band_wdist, int64_t n_eval,
                                     const int64_t *eval_iter, const double *band_acc,
                                     const double *loss, const double *wdist,
                                     const int64_t *nonfinite, const double *acc,
                                     const char *kernel, peat_pyapi_verdict *v)
{
    if (R < 2 || R > PEAT_RUNTIME_MAX_BAND || n < 1 || n_eval < 0 || !band_loss || !loss || !v ||
        (n_eval > 0 && (!band_acc || !acc)))
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime_judge: %d band runs of %lld iterations", R,
                          (long long)n);
    PEAT_TRY(peat_runtime_builtin_init());
    peat_runtime_curve m[PEAT_RUNTIME_MAX_BAND];
    for (int r = 0; r < R; r++) {
        m[r] = (peat_runtime_curve){.n = n,
                                    .loss = band_loss + r * n,
                                    .wdist = band_wdist ? band_wdist + r * n : NULL,
                                    .n_eval = n_eval,
                                    .eval_acc = n_eval ? band_acc + r * n_eval : NULL,
                                    .eval_iter = n_eval ? eval_iter : NULL};
    }
    peat_runtime_band b;
    PEAT_TRY(peat_detector_band_build(m, R, &b));
    peat_runtime_curve c = {.n = n,
                            .loss = loss,
                            .wdist = wdist,
                            .nonfinite = nonfinite,
                            .n_eval = n_eval,
                            .eval_acc = acc,
                            .eval_iter = n_eval ? eval_iter : NULL};
    peat_status st = verdict_of(&b, &c, kernel, v);
    peat_detector_band_free(&b);
    return st;
}

/* The trusted op's outputs (torch's, held in self->user) as the shadow check's golden kernel
 * computes them: widened to the f32 outputs it is given. */
static peat_status given_outputs(const peat_args *a, const peat_kernel *self)
{
    const peat_tensor *const *g = self->user;
    for (int o = 0; o < a->n_out; o++) {
        int64_t n = peat_tensor_numel(a->out[o]);
        if (!g[o] || peat_tensor_numel(g[o]) != n)
            return PEAT_ERROR(PEAT_ERR_INVAL,
                              "shadow: golden output %d missing or of %lld "
                              "elements, the op's has %lld",
                              o, (long long)(g[o] ? peat_tensor_numel(g[o]) : 0), (long long)n);
        float *y = peat_f32(a->out[o]);
        for (int64_t e = 0; e < n; e++) y[e] = (float)peat_tensor_get(g[o], e);
    }
    return PEAT_OK;
}

peat_status peat_pyapi_shadow_measure(const peat_pyapi_call *c, const peat_tensor *const *in,
                                      const peat_tensor *const *out,
                                      const peat_tensor *const *golden, double self, double *cand,
                                      double *gold, int *bad)
{
    if (!golden || !cand || !gold || !bad)
        return PEAT_ERROR(PEAT_ERR_INVAL, "shadow_measure: NULL argument");
    PEAT_TRY(peat_runtime_builtin_init());
    peat_args a;
    PEAT_TRY(args_out(c, in, (peat_tensor *const *)out, &a));
    for (int o = 0; o < a.n_out; o++)
        if (!a.out[o] || a.out[o]->dtype != PEAT_DTYPE_F32)
            return PEAT_ERROR(PEAT_ERR_INVAL, "shadow_measure: output %d is not f32", o);
    PEAT_TRY(peat_op_check(&a));
    peat_kernel g = {.name = "torch",
                     .op = a.op,
                     .role = PEAT_ROLE_GOLDEN,
                     .backend = PEAT_BACKEND_HOST,
                     .in_dtype = PEAT_DTYPE_F32,
                     .out_dtype = PEAT_DTYPE_F32,
                     .acc_dtype = PEAT_DTYPE_F32,
                     .fn = given_outputs,
                     .user = (void *)golden,
                     .flags = PEAT_KERNEL_REENTRANT};
    int exact = 0;
    PEAT_TRY(peat_runtime_shadow_measure(&a, &g, cand, gold, &exact));
    *bad = exact && *cand > peat_runtime_shadow_envelope(*gold, self);
    return PEAT_OK;
}
