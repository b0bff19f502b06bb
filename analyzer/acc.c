/* acc.c: the analyzer's accumulator: checks an output tensor and streams it, in parallel units. */
#include "analyzer/internal.h"
#include "core/opdesc.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Half the smallest fp32 subnormal: the absolute error one rounding in gradual underflow adds. */
#define ETA_F32 0x1p-150

static double eta_of(int64_t depth)
{
    return (double)((depth > 0 ? depth : 1) + 1) * ETA_F32;
}

double peat_analyzer_bound(double mag, int64_t depth)
{
    return peat_op_gamma(depth) * mag + eta_of(depth);
}

void peat_analyzer_bound_coeffs(int64_t depth, double *gamma, double *eta)
{
    *gamma = peat_op_gamma(depth);
    *eta = eta_of(depth);
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > PEAT_ANALYZER_MAX_THREADS ? PEAT_ANALYZER_MAX_THREADS : (int)n;
}

peat_analyzer_acc_t *peat_analyzer_acc_new(const char *kernel, peat_op_kind op)
{
    /* written after every isolated call: kept out of the forks, as the sample is (mem.c) */
    peat_analyzer_acc_t *acc = peat_analyzer_big_new(sizeof *acc);
    if (!acc) return NULL;
    snprintf(acc->kernel, sizeof acc->kernel, "%s", kernel ? kernel : "");
    acc->op = op;
    peat_analyzer_partial_init(&acc->tot);
    acc->tot.hash = 1469598103934665603ull;
    acc->repeat_max_diff = -1.0;
    acc->threads = default_threads();
    peat_analyzer_sample_set_init(&acc->smp, PEAT_SAMPLE_K);
    if (pthread_mutex_init(&acc->smp_lock, NULL) != 0) {
        peat_analyzer_big_free(acc, sizeof *acc);
        return NULL;
    }
    return acc;
}

void peat_analyzer_acc_free(peat_analyzer_acc_t *acc)
{
    if (!acc) return;
    for (int t = 0; t < PEAT_ANALYZER_MAX_THREADS; t++) {
        if (!acc->w[t]) continue;
        peat_analyzer_sketch_free(&acc->w[t]->norm);
        peat_analyzer_sketch_free(&acc->w[t]->rel);
        peat_analyzer_big_free(acc->w[t], sizeof *acc->w[t]);
    }
    peat_analyzer_sample_set_free(&acc->smp);
    pthread_mutex_destroy(&acc->smp_lock);
    peat_analyzer_big_free(acc, sizeof *acc);
}

void peat_analyzer_acc_set_threads(peat_analyzer_acc_t *acc, int n)
{
    if (!acc) return;
    acc->threads = n <= 0                          ? default_threads()
                   : n > PEAT_ANALYZER_MAX_THREADS ? PEAT_ANALYZER_MAX_THREADS
                                                   : n;
}

/* Worker t's state, allocated on first use (sketches are 128 KiB each). */
static peat_status worker_get(peat_analyzer_acc_t *acc, int t, peat_worker **out)
{
    if (!acc->w[t]) {
        peat_worker *w = peat_analyzer_big_new(sizeof *w);
        if (!w) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: worker state");
        peat_status st = peat_analyzer_sketch_init(&w->norm);
        if (st == PEAT_OK) st = peat_analyzer_sketch_init(&w->rel);
        if (st != PEAT_OK) {
            peat_analyzer_sketch_free(&w->norm);
            peat_analyzer_big_free(w, sizeof *w);
            return st;
        }
        w->acc = acc;
        acc->w[t] = w;
    }
    acc->w[t]->thresh = acc->smp.thresh;
    *out = acc->w[t];
    return PEAT_OK;
}

void peat_analyzer_worker_flush(peat_worker *w)
{
    peat_analyzer_acc_t *acc = w->acc;
    pthread_mutex_lock(&acc->smp_lock);
    for (int i = 0; i < w->n_stage; i++) peat_analyzer_sample_set_push(&acc->smp, &w->stage[i]);
    w->thresh = acc->smp.thresh < w->add_thresh ? acc->smp.thresh : w->add_thresh;
    pthread_mutex_unlock(&acc->smp_lock);
    w->n_stage = 0;
}

/* One tensor's units (of one or two test sides against one exact side) shared among threads:
 * each takes the next unit number, so any thread may do any unit, and unit u's partials always
 * land in parts[side][u]. */
typedef struct scan_job {
    const peat_scan_in *in[2];
    int sides;
    int64_t n, n_units, next;
    peat_partial *parts[2];
} scan_job;

typedef struct scan_thread {
    scan_job *job;
    peat_worker *w[2];
    pthread_t tid;
} scan_thread;

static void *scan_main(void *arg)
{
    scan_thread *th = arg;
    scan_job *job = th->job;
    for (;;) {
        int64_t u = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        if (u >= job->n_units) break;
        int64_t lo = u * PEAT_ANALYZER_CHUNK, hi = lo + PEAT_ANALYZER_CHUNK;
        hi = hi < job->n ? hi : job->n;
        peat_partial *p[2] = {&job->parts[0][u], job->sides > 1 ? &job->parts[1][u] : NULL};
        for (int k = 0; k < job->sides; k++) peat_analyzer_partial_init(p[k]);
        if (job->sides == 1)
            peat_analyzer_scan_unit(job->in[0], lo, hi, p[0], th->w[0]);
        else
            peat_analyzer_scan_pair(job->in, lo, hi, p, th->w);
    }
    for (int k = 0; k < job->sides; k++) peat_analyzer_worker_flush(th->w[k]);
    return NULL;
}

/* A priority bound for the sample entries of one add of n elements: an element above it has at
 * least k elements of the same add below it, so it cannot be among the k smallest of all and need
 * not be staged. The bound is set where about 1.1 k of the add's priorities (uniform hashes) fall,
 * 0.1 k = 36 standard deviations above k for k = 2^17; the pass counts the add's finite elements
 * below it, and where fewer than k are (or the shared sample's threshold is not below it), a
 * second look stages the elements above it (sample_rescue). The sample is the same set either way;
 * the bound only saves staging and cutting what would be dropped. */
static uint64_t add_bound(int64_t n)
{
    if (n <= PEAT_SAMPLE_K + PEAT_SAMPLE_K / 2) return UINT64_MAX;
    return (uint64_t)ldexp(1.1 * (double)PEAT_SAMPLE_K / (double)n, 64);
}

/* The add's bound held if at least k of its finite elements fell below it, or if the shared
 * sample already had k entries below it; otherwise its elements above the bound are staged now. */
static void sample_rescue(peat_analyzer_acc_t *acc, const peat_scan_in *in, int64_t n,
                          uint64_t bound, int nt, scan_thread *th, int side)
{
    int64_t below = 0;
    for (int t = 0; t < nt; t++) below += th[t].w[side]->add_below;
    if (bound == UINT64_MAX || below >= PEAT_SAMPLE_K || acc->smp.thresh <= bound) return;
    peat_worker *w = th[0].w[side];
    w->add_thresh = UINT64_MAX;
    w->thresh = acc->smp.thresh;
    peat_analyzer_scan_sample_above(in, 0, n, bound, w);
    peat_analyzer_worker_flush(w);
}

/* Streams all units of one tensor (one test side per accumulator) on up to acc[0]->threads
 * threads (the caller's is one of them). */
static peat_status scan_tensor(peat_analyzer_acc_t *const *acc, int sides,
                               const peat_scan_in *const *in, int64_t n, peat_partial *const *parts,
                               int64_t n_units)
{
    scan_job job = {{in[0], sides > 1 ? in[1] : NULL},      sides, n, n_units, 0,
                    {parts[0], sides > 1 ? parts[1] : NULL}};
    scan_thread th[PEAT_ANALYZER_MAX_THREADS];
    int nt = acc[0]->threads < n_units ? acc[0]->threads : (int)n_units, started = 1;
    uint64_t bound = add_bound(n);
    for (int t = 0; t < nt; t++) {
        th[t].job = &job;
        for (int k = 0; k < sides; k++) {
            PEAT_TRY(worker_get(acc[k], t, &th[t].w[k]));
            peat_worker *w = th[t].w[k];
            w->add_thresh = bound;
            w->add_below = 0;
            w->thresh = w->thresh < bound ? w->thresh : bound;
        }
    }
    for (int t = 1; t < nt; t++, started++)
        if (pthread_create(&th[t].tid, NULL, scan_main, &th[t]) != 0) break;
    scan_main(&th[0]);
    for (int t = 1; t < started; t++) pthread_join(th[t].tid, NULL);
    for (int k = 0; k < sides; k++) sample_rescue(acc[k], in[k], n, bound, nt, th, k);
    return PEAT_OK;
}

/* The gross errors' box of one tensor joins the accumulator's spatial statistics. A tensor of
 * several planes (rows x cols each) has its planes folded onto one: the box is where the errors
 * sit in a plane, its area counted once per plane. */
static void box_finish(peat_analyzer_acc_t *acc, const peat_partial *p, int64_t rows, int64_t cols,
                       int64_t planes)
{
    if (p->box_n == 0) return;
    int64_t h = p->box_r1 - p->box_r0 + 1, w = p->box_c1 - p->box_c0 + 1;
    int bottom = p->box_r1 == rows - 1 && rows > 1, right = p->box_c1 == cols - 1 && cols > 1;
    acc->box_gross_sum += p->box_n;
    acc->box_area_sum += h * w * planes;
    acc->box_numel_sum += rows * cols * planes;
    if (bottom || right) acc->gross_at_edge += p->box_n;
    if (p->box_n >= 2) {
        int64_t a = acc->gross_stride, b = p->box_g;
        while (b) {
            int64_t t = a % b;
            a = b;
            b = t;
        }
        acc->gross_stride = a;
    }
    if (p->box_n > acc->box_best_n) {
        acc->box_best_n = p->box_n;
        acc->box_rows = h;
        acc->box_cols = w;
        acc->box_tensor_rows = rows;
        acc->box_tensor_cols = cols;
        acc->box_at_bottom = bottom;
        acc->box_at_right = right;
    }
}

static peat_status check_add(const peat_analyzer_acc_t *acc, const peat_tensor *test,
                             const peat_tensor *exact, int64_t depth, int64_t terms, int64_t rows,
                             int64_t cols, const peat_tensor *input)
{
    if (!acc || !test || !exact)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: NULL accumulator or tensor");
    int64_t n = peat_tensor_numel(test);
    if (peat_tensor_numel(exact) != n)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "analyzer: test has %lld elements, exact %lld",
                          (long long)n, (long long)peat_tensor_numel(exact));
    if (input && peat_tensor_numel(input) != n)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "analyzer: input has %lld elements, test %lld",
                          (long long)peat_tensor_numel(input), (long long)n);
    if (depth <= 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: depth %lld <= 0", (long long)depth);
    if (rows <= 0 || cols <= 0 || n % (rows * cols) != 0)
        return PEAT_ERROR(PEAT_ERR_SHAPE,
                          "analyzer: plane view %lldx%lld does not tile %lld elements",
                          (long long)rows, (long long)cols, (long long)n);
    if (terms <= 0 || terms > depth)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: terms %lld outside 1..depth %lld",
                          (long long)terms, (long long)depth);
    if (n >= (int64_t)1 << 40)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "analyzer: %lld elements in one tensor (max 2^40)",
                          (long long)n);
    return PEAT_OK;
}

/* What a unit needs to read of one test side; call: the add's index among the accumulator's
 * adds (its sample priorities derive from it). */
static peat_scan_in scan_in_of(int64_t call, const peat_tensor *test, const peat_tensor *exact,
                               const double *mag, int64_t depth, int64_t terms, int64_t rows,
                               int64_t cols, const peat_tensor *input)
{
    peat_scan_in in = {.t = test->dtype == PEAT_DTYPE_F32 ? peat_f32(test) : NULL,
                       .x = exact->dtype == PEAT_DTYPE_F64 ? peat_f64(exact) : NULL,
                       .in = input && input->dtype == PEAT_DTYPE_F32 ? peat_f32(input) : NULL,
                       .test_t = test,
                       .exact_t = exact,
                       .input = input,
                       .mag = mag,
                       .depth = depth,
                       .cols = cols,
                       .rows = rows,
                       .call = call,
                       .gamma = peat_op_gamma(depth),
                       .eta = eta_of(depth),
                       .inv_sqrt_k = 1.0 / sqrt((double)terms)};
    return in;
}

/* One add's partials merged in unit order, and what places them among the adds. */
typedef struct call_part {
    peat_partial call;
    int64_t n, depth, rows, cols;
} call_part;

/* The add's place among the accumulator's adds, in the order they come (one process's order). */
static void apply_part(peat_analyzer_acc_t *acc, const call_part *cp)
{
    peat_partial call = cp->call;
    acc->n_calls++;
    acc->gross_tensors += call.n_gross > 0;
    acc->gross_tensors_many += call.n_gross > peat_few_per_call(cp->n);
    if (cp->depth > acc->depth_max) acc->depth_max = cp->depth;
    box_finish(acc, &call, cp->rows, cp->cols, cp->n / (cp->rows * cp->cols));
    call.box_n = 0; /* boxes are per tensor */
    peat_analyzer_partial_merge(&acc->tot, &call);
}

/* Streams one output tensor of one or two kernels (test[k] for acc[k]) against the exact one as
 * add number call[k] of acc[k]: the sketches and sample into acc[k], the add's partials into
 * part[k]. */
static peat_status scan_parts(peat_analyzer_acc_t *const *acc, const peat_tensor *const *test,
                              int sides, const peat_tensor *exact, const double *mag, int64_t depth,
                              int64_t terms, int64_t rows, int64_t cols, const peat_tensor *input,
                              const int64_t *call, call_part *part)
{
    for (int k = 0; k < sides; k++)
        PEAT_TRY(check_add(acc[k], test[k], exact, depth, terms, rows, cols, input));
    int64_t n = peat_tensor_numel(exact);
    peat_scan_in in[2];
    const peat_scan_in *inp[2] = {&in[0], &in[1]};
    for (int k = 0; k < sides; k++)
        in[k] = scan_in_of(call[k], test[k], exact, mag, depth, terms, rows, cols, input);
    int64_t n_units = (n + PEAT_ANALYZER_CHUNK - 1) / PEAT_ANALYZER_CHUNK;
    peat_partial one[2], *parts[2] = {one, one + 1};
    if (n_units > 1) {
        parts[0] = malloc((size_t)(sides * n_units) * sizeof **parts);
        if (!parts[0])
            return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: %lld partials", (long long)n_units);
        parts[1] = parts[0] + n_units;
    }
    peat_status st = n_units > 0 ? scan_tensor(acc, sides, inp, n, parts, n_units) : PEAT_OK;
    for (int k = 0; st == PEAT_OK && k < sides; k++) {
        part[k] = (call_part){.n = n, .depth = depth, .rows = rows, .cols = cols};
        peat_analyzer_partial_init(&part[k].call);
        for (int64_t u = 0; u < n_units; u++)
            peat_analyzer_partial_merge(&part[k].call, &parts[k][u]);
    }
    if (n_units > 1) free(parts[0]);
    return st;
}

/* Adds one output tensor of one or two kernels (test[k] into acc[k]) against the exact one. */
static peat_status add_sides(peat_analyzer_acc_t *const *acc, const peat_tensor *const *test,
                             int sides, const peat_tensor *exact, const double *mag, int64_t depth,
                             int64_t terms, int64_t rows, int64_t cols, const peat_tensor *input)
{
    call_part part[2];
    int64_t call[2] = {acc[0] ? acc[0]->n_calls : 0, sides > 1 && acc[1] ? acc[1]->n_calls : 0};
    PEAT_TRY(scan_parts(acc, test, sides, exact, mag, depth, terms, rows, cols, input, call, part));
    for (int k = 0; k < sides; k++) apply_part(acc[k], &part[k]);
    return PEAT_OK;
}

size_t peat_analyzer_part_size(void)
{
    return sizeof(call_part);
}

peat_status peat_analyzer_acc_add_pair_part(peat_analyzer_acc_t *acc_a, const peat_tensor *test_a,
                                            peat_analyzer_acc_t *acc_b, const peat_tensor *test_b,
                                            const peat_tensor *exact, const double *mag,
                                            int64_t depth, int64_t terms, int64_t rows,
                                            int64_t cols, const peat_tensor *input, int64_t call,
                                            void *part_a, void *part_b)
{
    if (acc_a && acc_a == acc_b)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: a pair needs two accumulators");
    peat_analyzer_acc_t *acc[2] = {acc_a, acc_b};
    const peat_tensor *test[2] = {test_a, test_b};
    call_part part[2];
    int64_t calls[2] = {call, call};
    PEAT_TRY(scan_parts(acc, test, 2, exact, mag, depth, terms, rows, cols, input, calls, part));
    memcpy(part_a, &part[0], sizeof part[0]);
    memcpy(part_b, &part[1], sizeof part[1]);
    return PEAT_OK;
}

void peat_analyzer_acc_apply_part(peat_analyzer_acc_t *acc, const void *part)
{
    call_part cp;
    memcpy(&cp, part, sizeof cp);
    apply_part(acc, &cp);
}

/* The spill: both sketches (every worker's merged; the header, then the counts) and the sample's
 * entries (priority and values). */
#define SKETCH_HEAD  (sizeof(int64_t) + 3 * sizeof(double))
#define SKETCH_BYTES (SKETCH_HEAD + SKETCH_SLOTS * sizeof(int64_t))
#define ENTRY_BYTES  (sizeof(uint64_t) + sizeof(peat_sample_val))

size_t peat_analyzer_acc_spill_size(const peat_analyzer_acc_t *acc)
{
    return 2 * SKETCH_BYTES + sizeof(int64_t) + (size_t)acc->smp.n * ENTRY_BYTES;
}

static unsigned char *sketch_put(const peat_sketch *s, unsigned char *b)
{
    memcpy(b, &s->n, sizeof s->n), b += sizeof s->n;
    memcpy(b, &s->min_pos, sizeof(double)), b += sizeof(double);
    memcpy(b, &s->max, sizeof(double)), b += sizeof(double);
    memcpy(b, &s->sumsq_high, sizeof(double)), b += sizeof(double);
    memcpy(b, s->count, SKETCH_SLOTS * sizeof(int64_t));
    return b + SKETCH_SLOTS * sizeof(int64_t);
}

static const unsigned char *sketch_get(peat_sketch *s, const unsigned char *b)
{
    memcpy(&s->n, b, sizeof s->n), b += sizeof s->n;
    memcpy(&s->min_pos, b, sizeof(double)), b += sizeof(double);
    memcpy(&s->max, b, sizeof(double)), b += sizeof(double);
    memcpy(&s->sumsq_high, b, sizeof(double)), b += sizeof(double);
    memcpy(s->count, b, SKETCH_SLOTS * sizeof(int64_t));
    return b + SKETCH_SLOTS * sizeof(int64_t);
}

peat_status peat_analyzer_acc_spill(const peat_analyzer_acc_t *acc, void *buf)
{
    peat_sketch m[2];
    PEAT_TRY(peat_analyzer_sketch_init(&m[0]));
    peat_status st = peat_analyzer_sketch_init(&m[1]);
    for (int t = 0; st == PEAT_OK && t < PEAT_ANALYZER_MAX_THREADS; t++) {
        if (!acc->w[t]) continue;
        peat_analyzer_sketch_merge(&m[0], &acc->w[t]->norm);
        peat_analyzer_sketch_merge(&m[1], &acc->w[t]->rel);
    }
    unsigned char *b = buf;
    if (st == PEAT_OK) {
        b = sketch_put(&m[1], sketch_put(&m[0], b));
        memcpy(b, &acc->smp.n, sizeof acc->smp.n), b += sizeof acc->smp.n;
        for (int64_t i = 0; i < acc->smp.n; i++, b += ENTRY_BYTES) {
            memcpy(b, &acc->smp.prio[i], sizeof(uint64_t));
            memcpy(b + sizeof(uint64_t), &acc->smp.v[i], sizeof(peat_sample_val));
        }
    }
    peat_analyzer_sketch_free(&m[0]);
    peat_analyzer_sketch_free(&m[1]);
    return st;
}

peat_status peat_analyzer_acc_absorb(peat_analyzer_acc_t *acc, const void *buf, size_t n)
{
    int64_t ns = 0;
    if (n >= 2 * SKETCH_BYTES + sizeof ns)
        memcpy(&ns, (const unsigned char *)buf + 2 * SKETCH_BYTES, sizeof ns);
    if (n < 2 * SKETCH_BYTES + sizeof ns || ns < 0 ||
        n != 2 * SKETCH_BYTES + sizeof ns + (size_t)ns * ENTRY_BYTES)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "analyzer: a spilled accumulator of %zu bytes", n);
    peat_worker *w;
    PEAT_TRY(worker_get(acc, 0, &w));
    peat_sketch s;
    PEAT_TRY(peat_analyzer_sketch_init(&s));
    const unsigned char *b = sketch_get(&s, buf);
    peat_analyzer_sketch_merge(&w->norm, &s);
    memset(s.count, 0, SKETCH_SLOTS * sizeof(int64_t));
    b = sketch_get(&s, b);
    peat_analyzer_sketch_merge(&w->rel, &s);
    peat_analyzer_sketch_free(&s);
    b += sizeof ns;
    for (int64_t i = 0; i < ns; i++, b += ENTRY_BYTES) {
        peat_sample x;
        peat_sample_val v;
        memcpy(&x.prio, b, sizeof x.prio);
        memcpy(&v, b + sizeof x.prio, sizeof v);
        x.inv_s = v.inv_s, x.key = v.key, x.x = v.x, x.d = v.d;
        peat_analyzer_sample_set_push(&acc->smp, &x);
    }
    return PEAT_OK;
}

peat_status peat_analyzer_acc_add_terms(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                        const peat_tensor *exact, const double *mag, int64_t depth,
                                        int64_t terms, int64_t rows, int64_t cols,
                                        const peat_tensor *input)
{
    return add_sides(&acc, &test, 1, exact, mag, depth, terms, rows, cols, input);
}

peat_status peat_analyzer_acc_add_pair(peat_analyzer_acc_t *acc_a, const peat_tensor *test_a,
                                       peat_analyzer_acc_t *acc_b, const peat_tensor *test_b,
                                       const peat_tensor *exact, const double *mag, int64_t depth,
                                       int64_t terms, int64_t rows, int64_t cols,
                                       const peat_tensor *input)
{
    if (acc_a && acc_a == acc_b)
        return PEAT_ERROR(PEAT_ERR_INVAL, "analyzer: a pair needs two accumulators");
    peat_analyzer_acc_t *acc[2] = {acc_a, acc_b};
    const peat_tensor *test[2] = {test_a, test_b};
    return add_sides(acc, test, 2, exact, mag, depth, terms, rows, cols, input);
}

peat_status peat_analyzer_acc_add_input(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                        const peat_tensor *exact, const double *mag, int64_t depth,
                                        int64_t rows, int64_t cols, const peat_tensor *input)
{
    return peat_analyzer_acc_add_terms(acc, test, exact, mag, depth, depth, rows, cols, input);
}

peat_status peat_analyzer_acc_add(peat_analyzer_acc_t *acc, const peat_tensor *test,
                                  const peat_tensor *exact, const double *mag, int64_t depth,
                                  int64_t rows, int64_t cols)
{
    return peat_analyzer_acc_add_input(acc, test, exact, mag, depth, rows, cols, NULL);
}

void peat_analyzer_acc_add_repeat(peat_analyzer_acc_t *acc, const peat_tensor *run1,
                                  const peat_tensor *run2)
{
    if (!acc || !run1 || !run2) return;
    int64_t n = peat_tensor_numel(run1);
    if (peat_tensor_numel(run2) != n) {
        /* different shapes can only mean the runs differ */
        acc->repeat_max_diff = INFINITY;
        return;
    }
    double mx = acc->repeat_max_diff > 0 ? acc->repeat_max_diff : 0.0;
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = peat_tensor_get(run1, i), b = peat_tensor_get(run2, i);
        if (a == b || (isnan(a) && isnan(b))) continue;
        diff++;
        double d = isfinite(a) && isfinite(b) ? fabs(a - b) : INFINITY;
        if (d > mx) mx = d;
    }
    acc->repeat_n_diff += diff;
    acc->repeat_max_diff = mx;
    acc->repeat_calls++;
    acc->repeat_calls_diff += diff > 0;
    acc->repeat_calls_many += diff > 2 * peat_few_per_call(n);
}
