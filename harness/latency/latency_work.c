/* latency_work.c: the harness's own per-call work (recording, analysis, isolation, dispatch)
 * calibrated like a kernel: timed on synthetic calls at a few sizes, interpolated in between. */
#define _DEFAULT_SOURCE /* mkdtemp, MAP_ANONYMOUS, madvise */
#include "harness/latency/latency.h"
#include "peat/backend.h"

#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "analyzer/analyzer.h"
#include "detector/detector.h"
#include "harness/isolate/isolate.h"
#include "harness/runtime/runtime.h"
#include "harness/campaign/work.h"
#include "inject/inject.h"
#include "store/store.h"

static const char *const work_names[PEAT_WORK_COUNT][2] = {
    {"harness.record", "clone a call, write it to the file"},
    {"harness.analyze", "errors of N elements added (ulp-level)"},
    {"harness.signature", "signatures of N elements (ulp-level)"},
    {"harness.isolate", "a call through isolate.c, at RSS (4K)"},
    {"harness.dispatch", "one op call through exec + hook"},
    {"harness.metrics", "one metrics row appended to the file"},
    {"harness.judge", "a probe judged: 2 accumulators of N, signatures, detector"},
    {"harness.commit", "file reopened, two signatures written, closed"},
    {"harness.held", "resident bytes two accumulators add with N elements each"},
};

/* The harness's work is this build's code: its rows hold for this executable only, named by the
 * hash of its contents that also keys every kernel's row (peat_predictor_module_hash; the work
 * steps have no kernel function of their own to take it from). */
static void build_id(char *buf, size_t n)
{
    uint64_t h = peat_predictor_module_hash((const void *)(uintptr_t)build_id);
    snprintf(buf, n, "build %016llx", (unsigned long long)h);
}

static peat_kernel work_kernels[PEAT_WORK_COUNT];
static char work_desc[PEAT_WORK_COUNT][160];

static void work_kernels_init(void)
{
    char id[64];
    build_id(id, sizeof id);
    for (int w = 0; w < PEAT_WORK_COUNT; w++) {
        snprintf(work_desc[w], sizeof work_desc[w], "%s; %s", work_names[w][1], id);
        work_kernels[w].name = work_names[w][0];
        work_kernels[w].backend = PEAT_BACKEND_HOST;
        work_kernels[w].desc = work_desc[w];
    }
}

const peat_kernel *peat_latency_work_kernel(peat_latency_work w)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, work_kernels_init);
    return w >= 0 && w < PEAT_WORK_COUNT ? &work_kernels[w] : NULL;
}

double peat_latency_work_s(const peat_pred_table *t, peat_latency_work w, double x)
{
    const peat_pred_ktable *kt = peat_predictor_table_find(t, peat_latency_work_kernel(w));
    return kt ? peat_predictor_ktable_eval(kt, x) : 0.0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return v[n / 2];
}

/* A synthetic GEMM call of size n x n x n with golden and exact outputs, as a record. */
static peat_status make_record(int n, uint64_t id, peat_record **out)
{
    const peat_kernel *g = peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    if (!g) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden GEMM");
    peat_op_params p;
    peat_predictor_shape(PEAT_OP_GEMM, n, 0, &p);
    peat_pred_call c;
    PEAT_TRY(peat_predictor_call_alloc(g, &p, id, &c));
    peat_record *r = calloc(1, sizeof *r);
    if (!r) {
        peat_predictor_call_free(&c);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "record");
    }
    r->id = r->call_index = id;
    r->op = PEAT_OP_GEMM, r->p = p, r->n_in = c.a.n_in, r->n_out = 1;
    snprintf(r->flow, sizeof r->flow, "calibration");
    snprintf(r->layer, sizeof r->layer, "synthetic");
    snprintf(r->golden_kernel, sizeof r->golden_kernel, "%s", g->name);
    peat_status st = peat_tensor_clone(c.in[0], &r->in[0]);
    if (st == PEAT_OK) st = peat_tensor_clone(c.in[1], &r->in[1]);
    if (st == PEAT_OK) st = peat_tensor_clone(c.a.out[0], &r->golden[0]);
    peat_predictor_call_free(&c);
    if (st != PEAT_OK) peat_record_free(r);
    *out = st == PEAT_OK ? r : NULL;
    return st;
}

/* What the profiler does to a call it records: a copy of inputs and outputs. */
static peat_status clone_record(const peat_record *src, uint64_t id, peat_record **out)
{
    peat_record *r = malloc(sizeof *r);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "record");
    *r = *src;
    r->id = r->call_index = id;
    memset(r->in, 0, sizeof r->in), memset(r->golden, 0, sizeof r->golden);
    memset(r->exact, 0, sizeof r->exact);
    peat_status st = PEAT_OK;
    for (int i = 0; st == PEAT_OK && i < src->n_in; i++)
        st = peat_tensor_clone(src->in[i], &r->in[i]);
    for (int o = 0; st == PEAT_OK && o < src->n_out; o++)
        st = peat_tensor_clone(src->golden[o], &r->golden[o]);
    if (st != PEAT_OK) peat_record_free(r);
    *out = st == PEAT_OK ? r : NULL;
    return st;
}

/* Recording: clone inputs and outputs and write the record (x = bytes of inputs + outputs). */
static peat_status cal_record(double *x, double *t, int *n)
{
    static const int sizes[] = {4, 16, 48, 96, 192};
    char dir[] = "/tmp/peat-latency-XXXXXX", path[64];
    if (!mkdtemp(dir)) return PEAT_ERROR(PEAT_ERR_IO, "cannot create a temporary directory");
    snprintf(path, sizeof path, "%s/c.h5", dir);
    peat_store_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.flow, sizeof m.flow, "calibration");
    snprintf(m.kernel, sizeof m.kernel, "gemm_golden");
    snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_VERSION_STRING);
    peat_store_t *s = NULL;
    peat_status st = peat_store_create(path, &m, &s);
    uint64_t id = 0;
    *n = 0;
    for (size_t i = 0; st == PEAT_OK && i < sizeof sizes / sizeof sizes[0]; i++) {
        double r[5];
        for (int rep = 0; st == PEAT_OK && rep < 5; rep++) {
            peat_record *src = NULL, *cl = NULL;
            st = make_record(sizes[i], id++, &src);
            double t0 = peat_latency_thread_cpu_s();
            if (st == PEAT_OK) st = clone_record(src, id++, &cl);
            if (st == PEAT_OK) st = peat_store_call_write(s, cl);
            r[rep] = peat_latency_thread_cpu_s() - t0;
            peat_record_free(src);
            peat_record_free(cl);
        }
        x[*n] = 3.0 * sizes[i] * sizes[i] * 4.0;
        t[(*n)++] = median(r, 5);
    }
    peat_store_close(s);
    remove(path);
    remove(dir);
    return st;
}

/* Synthetic outputs of 4096 elements (64 columns) as an honest fp32 kernel's: the exact value
 * rounded, then 0, 1, 2, ... units in the last place off (about 38% / 30% / 18% / ...; gemm_new
 * shows 29 / 36 / 14), so the sorts of the analysis meet the ties and spreads of real outputs. */
typedef struct synth_out {
    peat_tensor *test, *exact;
    double *mag;
} synth_out;
enum { SYNTH_N = 4096, SYNTH_COLS = 64 };

static void synth_free(synth_out *o)
{
    peat_tensor_free(o->test), peat_tensor_free(o->exact);
    free(o->mag);
    memset(o, 0, sizeof *o);
}

static peat_status synth_make(synth_out *o)
{
    memset(o, 0, sizeof *o);
    o->mag = malloc(sizeof *o->mag * SYNTH_N);
    peat_rng_t *rng = peat_rng_new(7);
    peat_status st = o->mag && rng ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "analysis");
    if (st == PEAT_OK)
        st = peat_tensor_alloc2(PEAT_DTYPE_F32, SYNTH_N / SYNTH_COLS, SYNTH_COLS, &o->test);
    if (st == PEAT_OK)
        st = peat_tensor_alloc2(PEAT_DTYPE_F64, SYNTH_N / SYNTH_COLS, SYNTH_COLS, &o->exact);
    if (st == PEAT_OK) {
        peat_rng_fill_uniform(rng, o->exact, -1, 1);
        for (int64_t i = 0; i < SYNTH_N; i++) {
            double e = peat_f64(o->exact)[i];
            float v = (float)e;
            int ulps = (int)floor(fabs(peat_rng_gaussian(rng, 2.0)));
            float dir = peat_rng_uniform(rng) < 0.5 ? -INFINITY : INFINITY;
            for (int u = 0; u < ulps; u++) v = nextafterf(v, dir);
            peat_f32(o->test)[i] = v;
            o->mag[i] = fabs(e) + 1.0;
        }
    }
    peat_rng_free(rng);
    if (st != PEAT_OK) synth_free(o);
    return st;
}

/* At least elems synthetic output elements added to both accumulators, as playback adds a call. */
static peat_status synth_adds(const synth_out *o, peat_analyzer_acc_t *a, peat_analyzer_acc_t *b,
                              int64_t elems)
{
    for (int64_t done = 0; done < elems; done += SYNTH_N)
        PEAT_TRY(peat_analyzer_acc_add_pair(a, o->test, b, o->test, o->exact, o->mag, 64, 64,
                                            SYNTH_N / SYNTH_COLS, SYNTH_COLS, NULL));
    return PEAT_OK;
}

/* Analysis as the campaign runs it: candidate and golden outputs of N elements added against
 * exact in one pass (add_s, as playback adds each call), then the two signatures as one pair
 * (sig_s: CPU seconds of both its threads, as the analyze stage reports); *held_b: the resident
 * bytes the process grew by while the accumulators filled (what a campaign holds beside its
 * records), less what the analyzer mapped out of forks: what its forks copy. */
static peat_status analyze_once(int64_t elems, double *add_s, double *sig_s, double *held_b)
{
    double rss0 = peat_latency_rss_bytes(), out0 = (double)peat_analyzer_unforked_bytes();
    peat_analyzer_acc_t *a = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
    peat_analyzer_acc_t *b = peat_analyzer_acc_new("g", PEAT_OP_GEMM);
    synth_out o;
    peat_status st = a && b ? synth_make(&o) : PEAT_ERROR(PEAT_ERR_NOMEM, "analysis");
    int made = st == PEAT_OK;
    double t0 = peat_latency_thread_cpu_s();
    if (st == PEAT_OK) st = synth_adds(&o, a, b, elems);
    *add_s = peat_latency_thread_cpu_s() - t0;
    *held_b = peat_latency_rss_bytes() - rss0 - ((double)peat_analyzer_unforked_bytes() - out0);
    if (*held_b < 0) *held_b = 0;
    peat_signature sa, sb;
    double c0 = peat_latency_process_cpu_s();
    if (st == PEAT_OK) st = peat_analyzer_signature_pair(a, &sa, b, &sb);
    *sig_s = peat_latency_process_cpu_s() - c0;
    peat_analyzer_acc_free(a), peat_analyzer_acc_free(b);
    if (made) synth_free(&o);
    return st;
}

/* Both analysis curves come from the same runs (measured once per process). */
/* up to 2^20 elements: the signatures of the bounded sample and sketches stop growing once they
 * are full (about 2^18 here), and beyond the last point the table extrapolates its last
 * segment, which is then flat */
static const int64_t an_elems[] = {4096, 16384, 65536, 262144, 1048576};
enum { AN_N = sizeof an_elems / sizeof an_elems[0] };

/* what[0]: adds, [1]: signatures, [2]: resident bytes held */
static peat_status measure_analysis(double what[3][AN_N])
{
    static double m[3][AN_N];
    static int done;
    for (int i = 0; !done && i < AN_N; i++) {
        double r[3][3];
        int passes = an_elems[i] > 100000 ? 1 : 3; /* the largest cost ~0.3 s: once */
        for (int rep = 0; rep < passes; rep++)
            PEAT_TRY(analyze_once(an_elems[i], &r[0][rep], &r[1][rep], &r[2][rep]));
        for (int k = 0; k < 3; k++) m[k][i] = median(r[k], passes);
    }
    done = 1;
    memcpy(what, m, sizeof m);
    return PEAT_OK;
}

static peat_status cal_analysis(double *x, double *t, int *n, int which)
{
    double m[3][AN_N];
    PEAT_TRY(measure_analysis(m));
    for (int i = 0; i < AN_N; i++) x[i] = (double)an_elems[i], t[i] = m[which][i];
    *n = AN_N;
    return PEAT_OK;
}

static peat_status cal_analyze(double *x, double *t, int *n)
{
    return cal_analysis(x, t, n, 0);
}

static peat_status cal_signature(double *x, double *t, int *n)
{
    return cal_analysis(x, t, n, 1);
}

static peat_status cal_held(double *x, double *t, int *n)
{
    return cal_analysis(x, t, n, 2);
}

/* The golden relu on one element: the smallest call isolation can run. */
static peat_status relu_call(const peat_kernel **k, peat_pred_call *c)
{
    *k = peat_registry_role(PEAT_OP_RELU, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    if (!*k) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden relu");
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = 1;
    return peat_predictor_call_alloc(*k, &p, 1, c);
}

/* A call of k through playback's guards (guarded outputs; peat_isolate_call: input copies,
 * the checks for stray writes), forked when isolate: *run_s the CPU seconds of the call through
 * peat_isolate_run, of process and children (not the outputs' allocation). */
static peat_status guarded_run(const peat_kernel *k, const peat_pred_call *c, int isolate,
                               double *run_s)
{
    peat_args a = c->a;
    a.n_out = 0;
    PEAT_TRY(peat_isolate_outputs_alloc(&a, c->a.out, c->a.n_out));
    char why[256];
    double t0 = peat_campaign_cpu_s();
    peat_status st = peat_isolate_run(k, &a, isolate, 30.0, why, sizeof why);
    *run_s = peat_campaign_cpu_s() - t0;
    peat_isolate_outputs_free(&a);
    return st == PEAT_ERR_KERNEL ? PEAT_ERROR(PEAT_ERR_INTERNAL, "isolation: %s", why) : st;
}

/* One replayed call as playback makes it: guarded outputs, the candidate through
 * peat_isolate_call (input copies, the checks for stray writes) forked or not, then the
 * exact reference and, after the call as the campaign makes it (forked when fork), playback's
 * analysis of its outputs (magnitudes, both accumulators, plots: stage_playback.c's own code, into
 * ac, ag and pl); and the two calls alone. CPU seconds of process and children: sec[0] forked,
 * sec[1] unforked, sec[2] the calls alone, sec[3] the analysis. Forked holds what the one-element
 * calibration call cannot: the child's work on real buffers and, after every fork, a
 * copy-on-write fault on each page the parent writes (the exact kernel's outputs and packing
 * buffers; 1.4 us a page on this project's VM, where gpt's 98 forks cost 22.7k faults). */
static peat_status replay_once(const peat_kernel *k, const peat_kernel *ex, const peat_pred_call *c,
                               const peat_pred_call *e, int fork, peat_analyzer_acc_t *const an[2],
                               peat_plot_data *pl, double sec[4])
{
    sec[0] = sec[3] = 0;
    for (int isolate = fork ? 1 : 0; isolate >= 0; isolate--) {
        double t0 = peat_campaign_cpu_s(), run_s;
        PEAT_TRY(guarded_run(k, c, isolate, &run_s));
        if (ex) PEAT_TRY(peat_kernel_run(ex, &e->a));
        sec[1 - isolate] = peat_campaign_cpu_s() - t0; /* guarded outputs and all */
        if (isolate != (fork ? 1 : 0) || !ex) continue;
        /* the golden's outputs (c->a.out, from the calls alone) as both candidate and golden */
        double tr = 0, ta = 0;
        t0 = peat_campaign_cpu_s();
        for (int o = 0; o < c->a.n_out && o < e->a.n_out; o++)
            PEAT_TRY(peat_campaign_playback_accumulate(an[0], an[1], pl, 0, &c->a, o, c->a.out[o],
                                                       c->a.out[o], e->a.out[o], &tr, &ta));
        sec[3] = peat_campaign_cpu_s() - t0;
    }
    double t0 = peat_campaign_cpu_s();
    PEAT_TRY(peat_kernel_run(k, &c->a));
    if (ex) PEAT_TRY(peat_kernel_run(ex, &e->a));
    sec[2] = peat_campaign_cpu_s() - t0;
    return PEAT_OK;
}

static double out_elems_of(const peat_args *a)
{
    double n = 0;
    for (int o = 0; o < a->n_out; o++) n += (double)peat_tensor_numel(a->out[o]);
    return n;
}

peat_status peat_latency_replay_now(const peat_kernel *k, const peat_op_params *p, int n, int fork,
                                    peat_latency_replay *r)
{
    const peat_kernel *ex = peat_registry_role(k->op, PEAT_ROLE_EXACT, PEAT_BACKEND_HOST);
    double iso = 0, guard = 0;
    memset(r, 0, sizeof *r);
    /* one pair of accumulators for all the adds, from empty, as a campaign's playback begins:
     * their growth (the sample's buffer, 7.9 MB at full capacity) is paid in these adds too */
    peat_analyzer_acc_t *an[2] = {peat_analyzer_acc_new("c", k->op),
                                  peat_analyzer_acc_new("g", k->op)};
    peat_plot_data *pl = calloc(1, sizeof *pl);
    peat_status st = an[0] && an[1] && pl ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "replay analysis");
    for (int i = 0; i < n && st == PEAT_OK; i++) {
        peat_pred_call c, e;
        memset(&e, 0, sizeof e); /* freeing a call that failed or was never made is a no-op */
        st = peat_predictor_call_alloc(k, &p[i], 7, &c);
        if (st != PEAT_OK) break;
        if (ex) st = peat_predictor_call_alloc(ex, &p[i], 7, &e);
        /* outputs to analyse from the first round on */
        if (st == PEAT_OK) st = peat_kernel_run(k, &c.a);
        if (st == PEAT_OK && ex) st = peat_kernel_run(ex, &e.a);
        double sec[4], fork_d[5], guard_d[5], an_d[5];
        /* the first round untimed (first touch of the buffers and code, the accumulators'
         * first growth) */
        for (int rep = 0; st == PEAT_OK && rep < 6; rep++) {
            st = replay_once(k, ex, &c, &e, fork, an, pl, sec);
            if (rep > 0)
                fork_d[rep - 1] = sec[0] - sec[1], guard_d[rep - 1] = sec[1] - sec[2],
                             an_d[rep - 1] = sec[3];
        }
        if (st == PEAT_OK && ex && r->n_analysis < PEAT_LATENCY_REPLAY_MAX)
            r->analysis_x[r->n_analysis] = out_elems_of(&e.a),
            r->analysis_t[r->n_analysis++] =
                (an_d[0] + an_d[1] + an_d[2] + an_d[3] + an_d[4]) / 5.0;
        peat_predictor_call_free(&e);
        peat_predictor_call_free(&c);
        if (st != PEAT_OK) break;
        double f = median(fork_d, 5), g = median(guard_d, 5);
        iso += f > 0 ? f : 0, guard += g > 0 ? g : 0;
    }
    peat_analyzer_acc_free(an[0]);
    peat_analyzer_acc_free(an[1]);
    free(pl);
    PEAT_TRY(st);
    if (n > 0) r->isolate_s = iso / n, r->guard_s = guard / n;
    return PEAT_OK;
}

/* Isolation: one call through the playback's own isolation (harness/isolate/isolate.c: shared
 * outputs, fork, the child runs the kernel, the parent waits for its end) with a one-element
 * kernel: CPU seconds of parent and child (the wall clock of a shared machine would count other
 * jobs). The fork copies the page tables of everything the process holds, so it is timed at three
 * resident sizes (x = the process's resident bytes: nothing extra, 16 and 64 MiB more). */
static peat_status cal_isolate(double *x, double *t, int *n)
{
    static const size_t extra[] = {0, (size_t)16 << 20, (size_t)64 << 20};
    const peat_kernel *k;
    peat_pred_call c;
    PEAT_TRY(relu_call(&k, &c));
    peat_status st = PEAT_OK;
    *n = 0;
    for (size_t i = 0; st == PEAT_OK && i < sizeof extra / sizeof extra[0]; i++) {
        /* in small pages, as a campaign's many records and samples are (one huge-page block
         * would fork in a few page-table entries) */
        char *mem = extra[i] ? mmap(NULL, extra[i], PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                             : NULL;
        if (mem == MAP_FAILED) st = PEAT_ERROR(PEAT_ERR_NOMEM, "isolation calibration");
        if (st == PEAT_OK && mem) {
            madvise(mem, extra[i], MADV_NOHUGEPAGE);
            memset(mem, 1, extra[i]);
        }
        double r[7];
        for (int rep = 0; st == PEAT_OK && rep < 7; rep++) st = guarded_run(k, &c, 1, &r[rep]);
        x[*n] = peat_latency_rss_bytes();
        if (mem && mem != MAP_FAILED) munmap(mem, extra[i]);
        if (st == PEAT_OK) t[(*n)++] = median(r, 7);
    }
    peat_predictor_call_free(&c);
    return st;
}

static peat_status noop_hook(void *user, const peat_kernel *k, const peat_args *a,
                             const peat_call_info *info, int after)
{
    return PEAT_OK;
}

/* Dispatch: a one-element op through an exec context with a hook, minus nothing (the kernel's
 * own time at one element is within the noise). */
static peat_status cal_dispatch(double *x, double *t, int *n)
{
    peat_exec_t *ex = NULL;
    PEAT_TRY(peat_exec_alloc("calibration", 1, &ex));
    peat_tensor *in = NULL, *out = NULL;
    peat_status st = peat_exec_add_hook(ex, noop_hook, NULL);
    if (st == PEAT_OK) st = peat_tensor_alloc1(PEAT_DTYPE_F32, 1, &in);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = 1;
    double r[9];
    for (int rep = 0; st == PEAT_OK && rep < 9; rep++) {
        double t0 = peat_latency_thread_cpu_s();
        for (int i = 0; st == PEAT_OK && i < 200; i++) {
            st = peat_tensor_alloc1(PEAT_DTYPE_F32, 1, &out);
            peat_args a =
                peat_args_make(PEAT_OP_RELU, &p, 1, (const peat_tensor *const *)&in, 1, &out);
            if (st == PEAT_OK) st = peat_exec_op(ex, "calibration", PEAT_PHASE_FWD, &a);
            peat_tensor_free(out);
        }
        r[rep] = (peat_latency_thread_cpu_s() - t0) / 200;
    }
    peat_tensor_free(in);
    peat_exec_free(ex);
    x[0] = 1.0;
    t[0] = st == PEAT_OK ? median(r, 9) : 0;
    *n = 1;
    return st;
}

/* A campaign file in a fresh temporary directory (dir receives its name, to remove). */
static peat_status temp_store(char dir[32], char path[64], peat_store_t **s)
{
    snprintf(dir, 32, "/tmp/peat-latency-XXXXXX");
    if (!mkdtemp(dir)) return PEAT_ERROR(PEAT_ERR_IO, "cannot create a temporary directory");
    snprintf(path, 64, "%s/c.h5", dir);
    peat_store_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.flow, sizeof m.flow, "calibration");
    snprintf(m.kernel, sizeof m.kernel, "gemm_golden");
    snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_VERSION_STRING);
    return peat_store_create(path, &m, s);
}

static void temp_remove(const char *dir, const char *path)
{
    remove(path);
    remove(dir);
}

/* Metrics: one row appended per training iteration (x = 1; the median of 200 appends). */
static peat_status cal_metrics(double *x, double *t, int *n)
{
    char dir[32], path[64];
    peat_store_t *s = NULL;
    peat_status st = temp_store(dir, path, &s);
    double r[200];
    for (int i = 0; st == PEAT_OK && i < 200; i++) {
        double t0 = peat_latency_thread_cpu_s();
        st = peat_store_metrics_append(s, i, 1.0 / (i + 1), 0.5);
        r[i] = peat_latency_thread_cpu_s() - t0;
    }
    peat_store_close(s);
    temp_remove(dir, path);
    x[0] = 1.0;
    t[0] = st == PEAT_OK ? median(r, 200) : 0;
    *n = 1;
    return st;
}

/* One judgement of n elements as the probe stage makes it (a fresh pair of accumulators). */
static peat_status judge_once(int64_t n, const peat_tensor *test, const peat_tensor *exact,
                              const double *mag, double *sec)
{
    const peat_kernel *g = peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    double t0 = peat_latency_thread_cpu_s();
    peat_analyzer_acc_t *a = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
    peat_analyzer_acc_t *b = peat_analyzer_acc_new("g", PEAT_OP_GEMM);
    peat_status st = a && b && g ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "judge");
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(a, test, exact, mag, 64, 64, n / 16, 16, NULL);
    if (st == PEAT_OK)
        st = peat_analyzer_acc_add_terms(b, test, exact, mag, 64, 64, n / 16, 16, NULL);
    peat_signature sa, sb;
    if (st == PEAT_OK) st = peat_analyzer_signature(a, &sa);
    if (st == PEAT_OK) st = peat_analyzer_signature(b, &sb);
    peat_finding f[8];
    peat_detector_ctx ctx = g ? peat_detector_ctx_from_kernel(g) : (peat_detector_ctx){0};
    if (st == PEAT_OK) peat_detector_run(&sa, &sb, &ctx, f, 8);
    peat_analyzer_acc_free(a), peat_analyzer_acc_free(b);
    *sec = peat_latency_thread_cpu_s() - t0;
    return st;
}

/* Judge: a probe's outputs of N elements (a few ulps off exact) judged (x = N). */
static peat_status cal_judge(double *x, double *t, int *n)
{
    static const int64_t sizes[] = {16, 256, 4096};
    peat_tensor *test = NULL, *exact = NULL;
    double *mag = malloc(sizeof *mag * 4096);
    peat_rng_t *rng = peat_rng_new(3);
    peat_status st = mag && rng ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "judge calibration");
    *n = 0;
    for (size_t i = 0; st == PEAT_OK && i < sizeof sizes / sizeof sizes[0]; i++) {
        st = peat_tensor_alloc2(PEAT_DTYPE_F32, sizes[i] / 16, 16, &test);
        if (st == PEAT_OK) st = peat_tensor_alloc2(PEAT_DTYPE_F64, sizes[i] / 16, 16, &exact);
        if (st == PEAT_OK) peat_rng_fill_uniform(rng, exact, -1, 1);
        for (int64_t e = 0; st == PEAT_OK && e < sizes[i]; e++) {
            peat_f32(test)[e] = nextafterf((float)peat_f64(exact)[e], INFINITY);
            mag[e] = fabs(peat_f64(exact)[e]) + 1.0;
        }
        double r[7];
        for (int rep = 0; st == PEAT_OK && rep < 7; rep++)
            st = judge_once(sizes[i], test, exact, mag, &r[rep]);
        peat_tensor_free(test), peat_tensor_free(exact);
        test = exact = NULL;
        x[*n] = (double)sizes[i];
        if (st == PEAT_OK) t[(*n)++] = median(r, 7);
    }
    peat_rng_free(rng);
    free(mag);
    return st;
}

/* The signatures of a small campaign, as JSON (what commit writes). */
static peat_status signature_json(char **js)
{
    peat_analyzer_acc_t *a = peat_analyzer_acc_new("c", PEAT_OP_GEMM);
    peat_tensor *test = NULL, *exact = NULL;
    peat_status st = a ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "signature");
    if (st == PEAT_OK) st = peat_tensor_alloc2(PEAT_DTYPE_F32, 16, 16, &test);
    if (st == PEAT_OK) st = peat_tensor_alloc2(PEAT_DTYPE_F64, 16, 16, &exact);
    double mag[256];
    for (int e = 0; st == PEAT_OK && e < 256; e++) {
        peat_f64(exact)[e] = (e % 17) / 17.0;
        peat_f32(test)[e] = (float)peat_f64(exact)[e];
        mag[e] = 1.0;
    }
    if (st == PEAT_OK) st = peat_analyzer_acc_add_terms(a, test, exact, mag, 16, 16, 16, 16, NULL);
    peat_signature s;
    if (st == PEAT_OK) st = peat_analyzer_signature(a, &s);
    if (st == PEAT_OK) {
        int len = peat_analyzer_signature_to_json(&s, NULL, 0) + 1;
        *js = malloc((size_t)len);
        if (!*js) st = PEAT_ERROR(PEAT_ERR_NOMEM, "signature json");
        if (*js) peat_analyzer_signature_to_json(&s, *js, (size_t)len);
    }
    peat_analyzer_acc_free(a);
    peat_tensor_free(test), peat_tensor_free(exact);
    return st;
}

/* Commit: a campaign file of 8, 32 and 96 recorded 32^3 GEMM calls reopened, two signatures
 * written, closed (x = the records' bytes). */
static peat_status cal_commit(double *x, double *t, int *n)
{
    static const int records[] = {8, 32, 96};
    char *js = NULL;
    PEAT_TRY(signature_json(&js));
    peat_status st = PEAT_OK;
    *n = 0;
    for (size_t i = 0; st == PEAT_OK && i < sizeof records / sizeof records[0]; i++) {
        char dir[32], path[64];
        peat_store_t *s = NULL;
        st = temp_store(dir, path, &s);
        double bytes = 0;
        for (int j = 0; st == PEAT_OK && j < records[i]; j++) {
            peat_record *r = NULL;
            st = make_record(32, (uint64_t)j, &r);
            if (st == PEAT_OK) st = peat_store_call_write(s, r);
            bytes += 3.0 * 32 * 32 * 4.0;
            peat_record_free(r);
        }
        peat_store_close(s);
        double r[3];
        for (int rep = 0; st == PEAT_OK && rep < 3; rep++) {
            double t0 = peat_latency_thread_cpu_s();
            st = peat_store_open(path, 1, &s);
            if (st == PEAT_OK) st = peat_store_signature_write(s, rep ? "g" : "c", js);
            if (st == PEAT_OK) st = peat_store_signature_write(s, rep ? "c" : "g", js);
            peat_status cst = peat_store_close(s);
            if (st == PEAT_OK) st = cst;
            r[rep] = peat_latency_thread_cpu_s() - t0;
        }
        temp_remove(dir, path);
        x[*n] = bytes;
        if (st == PEAT_OK) t[(*n)++] = median(r, 3);
    }
    free(js);
    return st;
}

peat_status peat_latency_work_calibrate(peat_latency_work w, peat_pred_ktable *kt)
{
    double x[PEAT_PRED_MAX_POINTS], t[PEAT_PRED_MAX_POINTS];
    int n = 0;
    static peat_status (*const fns[PEAT_WORK_COUNT])(double *, double *, int *) = {
        cal_record,  cal_analyze, cal_signature, cal_isolate, cal_dispatch,
        cal_metrics, cal_judge,   cal_commit,    cal_held};
    PEAT_TRY(fns[w](x, t, &n));
    memset(kt, 0, sizeof *kt);
    snprintf(kt->kernel, sizeof kt->kernel, "%s", work_names[w][0]);
    kt->desc_hash = peat_predictor_kernel_hash(peat_latency_work_kernel(w));
    kt->cls = PEAT_PRED_MEMORY;
    /* the streaming analyzer's signatures grow linearly (sketches, a bounded sample): the
     * last segment's slope extrapolates them. One point: a constant cost (the overhead is the
     * point itself); isolation, a judgement and a commit cost their first point at least (a
     * fork, accumulators and signatures, a file opened, however small) */
    double over = n == 1 || w == PEAT_WORK_ISOLATE || w == PEAT_WORK_JUDGE || w == PEAT_WORK_COMMIT
                      ? t[0]
                      : 0.0;
    return peat_predictor_ktable_build(kt, n, x, t, over);
}

/* ---- runtime FI's band reruns as pseudo-kernels ---- */

typedef struct band_slot {
    peat_kernel k;
    peat_inject_model_t *m;
    const peat_kernel *golden;
    char name[64], desc[200];
} band_slot;

static band_slot band_slots[PEAT_OP_COUNT][PEAT_RUNTIME_MAX_BAND];

static peat_status band_run(const peat_args *a, const peat_kernel *self)
{
    const band_slot *b = self->user;
    return peat_inject_run(b->m, b->golden, a, 1);
}

static void band_init(void)
{
    char id[64];
    build_id(id, sizeof id);
    for (int op = 0; op < PEAT_OP_COUNT; op++)
        for (int r = 1; r < PEAT_RUNTIME_MAX_BAND; r++) {
            band_slot *b = &band_slots[op][r];
            b->golden = peat_registry_role((peat_op_kind)op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
            if (!b->golden || peat_inject_model_parse(peat_runtime_band_spec(r), &b->m) != PEAT_OK)
                continue;
            snprintf(b->name, sizeof b->name, "runtime.band%d.%s", r, peat_op_name(op));
            snprintf(b->desc, sizeof b->desc, "%s on %s; %s", peat_runtime_band_spec(r),
                     b->golden->name, id);
            b->k = *b->golden;
            b->k.name = b->name, b->k.desc = b->desc, b->k.fn = band_run, b->k.user = b;
            memset(&b->k.cfg, 0, sizeof b->k.cfg); /* the model's loops, not the golden's tiles */
        }
}

const peat_kernel *peat_latency_band_kernel(peat_op_kind op, int r)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, band_init);
    if (op < 0 || op >= PEAT_OP_COUNT || r < 1 || r >= PEAT_RUNTIME_MAX_BAND) return NULL;
    return band_slots[op][r].m ? &band_slots[op][r].k : NULL;
}
