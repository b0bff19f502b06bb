/* calls.c: the file protocol's two kernels (calls.h, docs/calls.md). The taping kernel stands in
 * for the candidate during `peat calls export`: it keeps each call's inputs and the output
 * buffers as handed, then answers with the golden kernel, so the pipeline runs as for an honest
 * kernel. The answering kernel stands in for it during `peat judge`: it finds the call in
 * calls.h5 by its checksum (op, params, inputs), the next one at or after the last it answered,
 * and copies the outputs the harness wrote into outs.h5. Both run in PEAT's process (the files
 * are read before the run, never from a kernel call). */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include "harness/calls/calls.h"
#include "peat/backend.h"

#include "core/dir_tree.h"
#include "harness/run/run.h"
#include "harness/runtime/builtin.h"
#include "store/store_calls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A host candidate kernel of op reading and writing fp32, as both of the protocol's kernels are. */
static peat_kernel host_candidate(const char *name, peat_op_kind op, peat_kernel_fn fn,
                                  const char *desc, void *user)
{
    return (peat_kernel){.name = name,
                         .op = op,
                         .role = PEAT_ROLE_CANDIDATE,
                         .backend = PEAT_BACKEND_HOST,
                         .in_dtype = PEAT_DTYPE_F32,
                         .out_dtype = PEAT_DTYPE_F32,
                         .acc_dtype = PEAT_DTYPE_F32,
                         .fn = fn,
                         .desc = desc,
                         .user = user};
}

/* ---- export: the taping kernel ---- */

typedef struct tape {
    const peat_kernel *golden;
    peat_store_calls_call *calls;
    int64_t n, cap;
    char stage[16];
    void *buf[4096]; /* buffers seen by the in-order calls, their index the id */
    size_t buf_bytes[4096];
    int64_t n_buf;
    peat_status err; /* a copy that failed (out of memory) */
} tape;

static tape tape_now; /* the export in progress (one per process at a time) */

/* The id of the buffer at p of nbytes: the last id given to that address and size (a buffer
 * freed and another of another size made there is a new buffer). */
static int64_t buffer_id(tape *t, void *p, size_t nbytes)
{
    for (int64_t i = t->n_buf - 1; i >= 0; i--)
        if (t->buf[i] == p) {
            if (t->buf_bytes[i] == nbytes) return i;
            break;
        }
    if (t->n_buf == (int64_t)(sizeof t->buf / sizeof t->buf[0])) return -1;
    t->buf[t->n_buf] = p, t->buf_bytes[t->n_buf] = nbytes;
    return t->n_buf++;
}

static peat_status tape_keep(tape *t, const peat_args *a)
{
    if (t->n == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 256;
        peat_store_calls_call *c = realloc(t->calls, (size_t)cap * sizeof *c);
        if (!c) return PEAT_ERROR(PEAT_ERR_NOMEM, "the exported calls");
        t->calls = c, t->cap = cap;
    }
    peat_store_calls_call *c = &t->calls[t->n];
    memset(c, 0, sizeof *c);
    c->op = a->op, c->p = a->p, c->n_in = a->n_in, c->n_out = a->n_out;
    snprintf(c->stage, sizeof c->stage, "%s", t->stage);
    c->in_order = strcmp(t->stage, "sequence") == 0;
    peat_status st = PEAT_OK;
    for (int k = 0; k < a->n_in && st == PEAT_OK; k++) {
        st = peat_tensor_clone(a->in[k], &c->in[k]);
        c->in_buf[k] =
            c->in_order ? buffer_id(t, a->in[k]->data, peat_tensor_nbytes(a->in[k])) : -1;
    }
    for (int k = 0; k < a->n_out && st == PEAT_OK; k++) {
        st = peat_tensor_clone(a->out[k], &c->out[k]);
        c->out_buf[k] =
            c->in_order ? buffer_id(t, a->out[k]->data, peat_tensor_nbytes(a->out[k])) : -1;
    }
    c->sum = peat_store_calls_sum(a->op, &a->p, a->n_in, a->in);
    if (st != PEAT_OK) {
        peat_store_calls_call_free(c);
        return st;
    }
    t->n++;
    return PEAT_OK;
}

static peat_status tape_fn(const peat_args *a, const peat_kernel *self)
{
    tape *t = self->user;
    if (t->err == PEAT_OK) t->err = tape_keep(t, a);
    return peat_kernel_run(t->golden, a);
}

static void tape_stage(void *user, const char *stage)
{
    tape *t = user;
    snprintf(t->stage, sizeof t->stage, "%s", stage);
}

/* The taping kernel of op, registered once per process. */
static peat_status tape_kernel(peat_op_kind op, const peat_kernel **out)
{
    static peat_kernel k[PEAT_OP_COUNT];
    static char names[PEAT_OP_COUNT][48];
    if (!k[op].name) {
        snprintf(names[op], sizeof names[op], "peat-calls-export-%s", peat_op_name(op));
        k[op] = host_candidate(names[op], op, tape_fn,
                               "the file protocol's export: the golden, each call kept", &tape_now);
        peat_status st = peat_registry_add(&k[op]);
        if (st != PEAT_OK) {
            k[op].name = NULL;
            return st;
        }
    }
    *out = &k[op];
    return PEAT_OK;
}

static void tape_clear(tape *t)
{
    for (int64_t i = 0; i < t->n; i++) peat_store_calls_call_free(&t->calls[i]);
    free(t->calls);
    memset(t, 0, sizeof *t);
}

peat_status peat_calls_export(const peat_campaign_opts *run, const char *op_name, const char *words,
                              const char *path, int64_t *n_calls)
{
    peat_op_kind op;
    PEAT_TRY(peat_runtime_builtin_init());
    PEAT_TRY(peat_op_parse(op_name, &op));
    tape *t = &tape_now;
    tape_clear(t);
    t->golden = peat_registry_role(op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    if (!t->golden) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no CPU golden kernel for %s", op_name);
    const peat_kernel *k;
    PEAT_TRY(tape_kernel(op, &k));
    const char *tmp = getenv("TMPDIR");
    char dirbuf[600];
    snprintf(dirbuf, sizeof dirbuf, "%s/peat-calls-export-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    char *d = mkdtemp(dirbuf);
    if (!d) return PEAT_ERROR(PEAT_ERR_IO, "cannot make a temporary folder under %s", dirbuf);
    peat_campaign_opts o = *run;
    o.kernel = k->name, o.out_dir = d, o.force = 1, o.resume = 0;
    o.no_runtime = 1, o.isolate = 0, o.quiet = 1, o.json = 0, o.table = NULL;
    o.on_stage = tape_stage, o.on_stage_user = t;
    peat_campaign_result *res = calloc(1, sizeof *res);
    peat_status st = res ? peat_run_campaign(&o, res) : PEAT_ERROR(PEAT_ERR_NOMEM, "a result");
    free(res);
    peat_dir_tree_remove(d);
    if (st == PEAT_OK) st = t->err;
    if (st == PEAT_OK && t->n == 0)
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND, "the run made no %s call (does the flow call %s?)",
                        op_name, op_name);
    if (st == PEAT_OK) st = peat_store_calls_write(path, op_name, words, t->calls, t->n);
    *n_calls = t->n;
    tape_clear(t);
    return st;
}

/* ---- judge: the answering kernel ---- */

struct peat_calls_judge {
    int64_t n;
    uint64_t *sum;      /* each call's checksum */
    peat_tensor **outs; /* n x PEAT_MAX_IO: the harness's outputs (NULL where it failed) */
    char **failed;      /* the harness's message for a call it marked failed, else NULL */
    int64_t next;       /* the call after the last answered */
    int64_t answered;   /* calls answered */
    char missing[300];  /* the first call of the run not in calls.h5 ("" when none) */
    char kernel[64];
};

static peat_calls_judge *judge_now; /* the judge in progress: the kernel's state */

static int64_t judge_find(const peat_calls_judge *j, uint64_t sum)
{
    for (int64_t i = j->next; i < j->n; i++)
        if (j->sum[i] == sum) return i;
    for (int64_t i = 0; i < j->next && i < j->n; i++)
        if (j->sum[i] == sum) return i;
    return -1;
}

static peat_status judge_fn(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    peat_calls_judge *j = judge_now;
    if (!j) return PEAT_ERROR(PEAT_ERR_INTERNAL, "no judge open");
    int64_t i = judge_find(j, peat_store_calls_sum(a->op, &a->p, a->n_in, a->in));
    if (i < 0) {
        if (!j->missing[0])
            snprintf(j->missing, sizeof j->missing, "a %s call with %d inputs (after call %lld)",
                     peat_op_name(a->op), a->n_in, (long long)j->next - 1);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "this call is not in calls.h5");
    }
    j->next = i + 1, j->answered++;
    if (j->failed[i]) return PEAT_ERROR(PEAT_ERR_KERNEL, "%s", j->failed[i]);
    for (int k = 0; k < a->n_out; k++) {
        const peat_tensor *o = j->outs[i * PEAT_MAX_IO + k];
        if (!o || peat_tensor_nbytes(o) != peat_tensor_nbytes(a->out[k]))
            return PEAT_ERROR(PEAT_ERR_SHAPE, "outs.h5: call %lld out%d does not fit", (long long)i,
                              k);
        memcpy(a->out[k]->data, o->data, peat_tensor_nbytes(o));
    }
    return PEAT_OK;
}

/* The answering kernel for op under name, registered once per name and op in a process. */
static peat_status judge_kernel(peat_op_kind op, const char *name)
{
    static peat_kernel k[16];
    static char names[16][64];
    static int n;
    for (int i = 0; i < n; i++)
        if (k[i].op == op && strcmp(names[i], name) == 0) return PEAT_OK;
    if (n == 16) return PEAT_ERROR(PEAT_ERR_INTERNAL, "too many judged kernels in one process");
    if (peat_registry_find_on(name, PEAT_BACKEND_HOST))
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "outs.h5 names its kernel '%s', a kernel PEAT already has "
                          "(name it otherwise: attribute \"kernel\")",
                          name);
    snprintf(names[n], sizeof names[n], "%s", name);
    k[n] = host_candidate(names[n], op, judge_fn,
                          "a kernel judged through files: its outputs read from outs.h5", NULL);
    PEAT_TRY(peat_registry_add(&k[n]));
    n++;
    return PEAT_OK;
}

/* Call i of calls.h5 and its outputs from outs.h5 (or the harness's failure). */
static peat_status judge_load_call(peat_calls_judge *j, peat_store_calls *calls,
                                   peat_store_calls *outs, int64_t i)
{
    peat_store_calls_call c;
    PEAT_TRY(peat_store_calls_get(calls, i, &c));
    j->sum[i] = c.sum;
    peat_status st = peat_store_calls_outs_get(outs, i, c.n_out, c.out);
    if (st == PEAT_ERR_KERNEL) {
        j->failed[i] = strdup(peat_error_last());
        st = j->failed[i] ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "a message");
    } else if (st == PEAT_OK) {
        for (int k = 0; k < c.n_out; k++) j->outs[i * PEAT_MAX_IO + k] = c.out[k], c.out[k] = NULL;
    }
    peat_store_calls_call_free(&c);
    return st;
}

static peat_status judge_load(peat_calls_judge *j, peat_store_calls *calls, peat_store_calls *outs)
{
    j->n = peat_store_calls_count(calls);
    j->sum = calloc((size_t)j->n + 1, sizeof *j->sum);
    j->outs = calloc(((size_t)j->n + 1) * PEAT_MAX_IO, sizeof *j->outs);
    j->failed = calloc((size_t)j->n + 1, sizeof *j->failed);
    if (!j->sum || !j->outs || !j->failed) return PEAT_ERROR(PEAT_ERR_NOMEM, "the judged calls");
    for (int64_t i = 0; i < j->n; i++) PEAT_TRY(judge_load_call(j, calls, outs, i));
    return PEAT_OK;
}

static char judge_words[8192], judge_op[32];

peat_status peat_calls_judge_open(const char *calls_path, const char *outs_path,
                                  peat_calls_judge **out, const char **kernel, const char **words)
{
    *out = NULL;
    if (judge_now) return PEAT_ERROR(PEAT_ERR_INTERNAL, "a judge is already open");
    peat_store_calls *calls = NULL, *outs = NULL;
    PEAT_TRY(peat_store_calls_open(calls_path, "calls", &calls));
    peat_status st = peat_store_calls_open(outs_path, "outs", &outs);
    peat_calls_judge *j = st == PEAT_OK ? calloc(1, sizeof *j) : NULL;
    if (st == PEAT_OK && !j) st = PEAT_ERROR(PEAT_ERR_NOMEM, "a judge");
    if (st == PEAT_OK) {
        const char *kn = peat_store_calls_kernel(outs);
        snprintf(j->kernel, sizeof j->kernel, "%s", kn[0] ? kn : "external");
        snprintf(judge_words, sizeof judge_words, "%s", peat_store_calls_words(calls));
        snprintf(judge_op, sizeof judge_op, "%s", peat_store_calls_op(calls));
        st = judge_load(j, calls, outs);
    }
    peat_op_kind op = PEAT_OP_GEMM;
    if (st == PEAT_OK) st = peat_op_parse(judge_op, &op);
    if (st == PEAT_OK) st = judge_kernel(op, j->kernel);
    peat_store_calls_close(calls);
    peat_store_calls_close(outs);
    if (st != PEAT_OK) {
        peat_calls_judge_close(j);
        return st;
    }
    judge_now = j;
    *out = j, *kernel = j->kernel, *words = judge_words;
    return PEAT_OK;
}

peat_status peat_calls_judge_check(const peat_calls_judge *j)
{
    if (j->missing[0])
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "this run made %s that calls.h5 does not hold: export the calls again "
                          "with this peat (%s)",
                          j->missing, PEAT_VERSION_STRING);
    return PEAT_OK;
}

void peat_calls_judge_close(peat_calls_judge *j)
{
    if (!j) return;
    if (judge_now == j) judge_now = NULL;
    for (int64_t i = 0; i < j->n; i++) {
        for (int k = 0; k < PEAT_MAX_IO && j->outs; k++)
            peat_tensor_free(j->outs[i * PEAT_MAX_IO + k]);
        if (j->failed) free(j->failed[i]);
    }
    free(j->sum), free(j->outs), free(j->failed);
    free(j);
}
