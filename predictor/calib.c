/* calib.c: calibration micro-benchmarks: the median time of a call, and one kernel's table timed
 * at its op's size family. */
#include "predictor/predictor.h"
#include "peat/backend.h"
#include "core/clock.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (n >= 1; v is sorted in place). */
static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A CPU kernel is timed on its thread's CPU clock: on a shared machine the wall clock also
 * counts the time slices other processes took, which says nothing about the kernel. Device
 * kernels are timed on the wall clock (the host waits for the device). */
static double kernel_clock(int cpu)
{
    if (!cpu) return peat_predictor_now();
    return peat_clock_thread_cpu();
}

/* Copies the call's input set s into its inputs: the kernel then reads new values at the same
 * addresses, as a flow's call reads what the op before it just wrote. */
static void load_set(const peat_pred_call *c, int s)
{
    for (int i = 0; i < c->a.n_in; i++) {
        size_t nb = peat_tensor_nbytes(c->in[i]);
        memcpy(c->in[i]->data, (const char *)c->pool[i]->data + (size_t)s * nb, nb);
    }
}

peat_status peat_predictor_time_call(const peat_kernel *k, const peat_pred_call *c, double min_s,
                                     int max_reps, double *median_s)
{
    enum { CAP = 256 };
    double t[CAP];
    if (max_reps < 1 || max_reps > CAP) max_reps = CAP;
    int cpu = peat_backend_on_host(k->backend);
    int sets = c->n_sets > 1 ? c->n_sets : 1, v = 0;
    /* untimed first call (first touch of outputs and code); it also sizes a batch of calls long
     * enough (>= 20 us) that reading the clock costs nothing beside it */
    double t0 = kernel_clock(cpu);
    if (sets > 1) load_set(c, 0);
    PEAT_TRY(peat_kernel_run(k, &c->a));
    double first = kernel_clock(cpu) - t0;
    int batch = first > 0 && first < 20e-6 ? (int)(20e-6 / first) + 1 : 1;
    double start = peat_predictor_now(), spent = 0;
    int n = 0;
    while (n < max_reps && (n < 5 || spent < min_s)) {
        int v0 = v;
        t0 = kernel_clock(cpu);
        for (int b = 0; b < batch; b++, v = v + 1 < sets ? v + 1 : 0) {
            if (sets > 1) load_set(c, v);
            PEAT_TRY(peat_kernel_run(k, &c->a));
        }
        double both = kernel_clock(cpu) - t0, copies = 0;
        if (sets > 1) { /* the same copies alone, taken off */
            t0 = kernel_clock(cpu);
            for (int b = 0, w = v0; b < batch; b++, w = w + 1 < sets ? w + 1 : 0) load_set(c, w);
            copies = kernel_clock(cpu) - t0;
        }
        t[n++] = (both > copies ? both - copies : 0) / batch;
        spent = peat_predictor_now() - start;
    }
    *median_s = median_of(t, n);
    return PEAT_OK;
}

/* Calls of k at the sizes of its op's family (the held-out family when odd), appended to c. */
static peat_status alloc_calls(const peat_kernel *k, int odd, peat_pred_call *c, int *sizes, int *n)
{
    *n = peat_predictor_sizes(k->op, odd, sizes, PEAT_PRED_MAX_POINTS);
    for (int i = 0; i < *n; i++) {
        peat_op_params p;
        peat_predictor_shape(k->op, sizes[i], odd, &p);
        peat_status st = peat_predictor_call_alloc(k, &p, 0x5eed + (uint64_t)sizes[i], &c[i]);
        if (st != PEAT_OK) {
            while (i-- > 0) peat_predictor_call_free(&c[i]);
            return st;
        }
    }
    return PEAT_OK;
}

/* ---- the quiet gate ---- */

/* A core shared with a busy sibling (another tenant's hyperthread on a cloud host) runs every
 * thread on it about 1.7x slower, for seconds at a time, and the thread's CPU clock counts it:
 * on this project's VM the same loop ran at 1.3 ms or at 2.2 ms, 44% of 30 s slow, in phases of
 * one to ten seconds. A timing taken then is a fact about the neighbour, and a table mixing
 * both speeds is wrong between its points. Each timing is therefore bracketed by a probe, a
 * fixed L1-resident loop on the thread's CPU clock, and kept only when both probes ran within
 * PEAT_PRED_QUIET of the fastest probe this process has seen. */
static _Atomic double probe_best = INFINITY; /* atomics: any thread may time kernels */
static atomic_long gate_timings, gate_quiet;

void peat_predictor_gate_stats(long *timings, long *quiet)
{
    *timings = atomic_load(&gate_timings), *quiet = atomic_load(&gate_quiet);
}

/* Lowers the process's best probe to best when it is faster. */
static void best_note(double best)
{
    double seen = atomic_load(&probe_best);
    while (best > 0 && best < seen && !atomic_compare_exchange_weak(&probe_best, &seen, best)) {
    }
}

/* Whether a probe of probe_s is quiet against best (0: an ungated timing). */
static int quiet_at(double probe_s, double best)
{
    return probe_s == 0 || probe_s <= PEAT_PRED_QUIET * best;
}

void peat_predictor_gate_merge(long timings, long quiet, double best)
{
    atomic_fetch_add(&gate_timings, timings);
    atomic_fetch_add(&gate_quiet, quiet);
    best_note(best);
}

double peat_predictor_probe(void)
{
    static const double c[4] = {1.0000001, 0.9999999, 1.0000002, 0.9999998};
    double best = INFINITY;
    for (int r = 0; r < 3; r++) {
        volatile double sink;
        double a0 = 1, a1 = 1, a2 = 1, a3 = 1;
        double t0 = kernel_clock(1);
        for (int i = 0; i < 2000; i++) a0 *= c[0], a1 *= c[1], a2 *= c[2], a3 *= c[3];
        double t = kernel_clock(1) - t0;
        sink = a0 + a1 + a2 + a3;
        (void)sink;
        if (t < best) best = t;
    }
    best_note(best);
    return best;
}

double peat_predictor_probe_best(void)
{
    double b = atomic_load(&probe_best);
    return b < INFINITY ? b : 0.0;
}

int peat_predictor_probe_quiet(double probe_s)
{
    return quiet_at(probe_s, atomic_load(&probe_best));
}

/* One gated timing: the call's median time (time_call) and the slower of the probes around it
 * (0 for device kernels, whose wall clock the gate does not judge). */
static peat_status time_gated(const peat_kernel *k, const peat_pred_call *c, double min_s,
                              double *t, double *probe)
{
    int cpu = peat_backend_on_host(k->backend);
    double p0 = cpu ? peat_predictor_probe() : 0;
    PEAT_TRY(peat_predictor_time_call(k, c, min_s, 64, t));
    double p1 = cpu ? peat_predictor_probe() : 0;
    *probe = p0 > p1 ? p0 : p1;
    atomic_fetch_add(&gate_timings, 1);
    atomic_fetch_add(&gate_quiet, peat_predictor_probe_quiet(*probe));
    return PEAT_OK;
}

int peat_predictor_quiet_median(const double *t, const double *probe, int n, double best, int need,
                                double *med)
{
    double q[PEAT_PRED_GATE_MAX];
    if (n < 1 || n > PEAT_PRED_GATE_MAX) return *med = 0, 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (quiet_at(probe[i], best)) q[m++] = t[i];
    int quiet = m;
    if (m < need) {
        memcpy(q, t, (size_t)n * sizeof *t);
        m = n;
    }
    *med = median_of(q, m);
    return quiet;
}

double peat_predictor_median_se(const double *t, int n)
{
    double v[PEAT_PRED_GATE_MAX], d[PEAT_PRED_GATE_MAX];
    if (n < 2 || n > PEAT_PRED_GATE_MAX) return INFINITY;
    memcpy(v, t, (size_t)n * sizeof *t);
    double med = median_of(v, n);
    if (!(med > 0)) return INFINITY;
    for (int i = 0; i < n; i++) d[i] = fabs(t[i] - med);
    /* 1.4826 MAD estimates a normal spread's sigma; the median's standard error is
     * sqrt(pi / 2) sigma / sqrt(n) */
    return 1.2533 * 1.4826 * median_of(d, n) / sqrt((double)n) / med;
}

/* Whether size i needs another timing after n of them: fewer than passes, fewer than passes
 * quiet ones (up to 3x passes), or a median not yet known to PEAT_PRED_SE (up to max_n; from the
 * quiet timings, from all of them when fewer than 3 are quiet). */
static int wants_more(const double *t, const double *probe, int n, int passes, int max_n)
{
    if (n < passes) return 1;
    double q[PEAT_PRED_GATE_MAX];
    int m = 0;
    for (int s = 0; s < n; s++)
        if (peat_predictor_probe_quiet(probe[s])) q[m++] = t[s];
    if (m < passes && n < 3 * passes) return 1;
    if (n >= max_n) return 0;
    if (m < 3) memcpy(q, t, (size_t)n * sizeof *t), m = n;
    return peat_predictor_median_se(q, m) > PEAT_PRED_SE;
}

peat_status peat_predictor_time_families(const peat_kernel *k, int passes, double min_s, int *n_cal,
                                         int *cal, double *t_cal, int *n_odd, int *odd,
                                         double *t_odd)
{
    enum { MAXP = 15, MAXS = PEAT_PRED_GATE_MAX, MAXC = 2 * PEAT_PRED_MAX_POINTS };
    peat_pred_call c[MAXC];
    double r[MAXC][MAXS], pr[MAXC][MAXS];
    int cnt[MAXC] = {0};
    if (passes < 1 || passes > MAXP) passes = 3;
    int nc = 0, no = 0;
    PEAT_TRY(alloc_calls(k, 0, c, cal, &nc));
    if (odd) {
        peat_status st = alloc_calls(k, 1, c + nc, odd, &no);
        if (st != PEAT_OK) {
            for (int i = 0; i < nc; i++) peat_predictor_call_free(&c[i]);
            return st;
        }
    }
    peat_status st = PEAT_OK;
    /* sweeps go over the sizes in turn, so a burst of load from elsewhere hits one sweep of
     * several sizes instead of every sweep of one size; the median over sweeps drops it. A size
     * is timed again in later sweeps until it has passes quiet timings (up to 3x passes: a
     * short phase of a slowed core is waited out rather than averaged in; a long one costs 3x
     * and its timings are used, all slow alike) and its median's standard error, from the
     * timings' own spread, is within PEAT_PRED_SE: a kernel whose time wanders from one timing
     * to the next (the former conv2d loops here, branching on every tap: 10-25% between the
     * 10th and 90th percentiles, with an L1 loop beside it steady to 4%) gets the timings that
     * pin its median down, a steady one stops at passes */
    int max_n = PEAT_PRED_SE_PASSES * passes < MAXS ? PEAT_PRED_SE_PASSES * passes : MAXS;
    double start = peat_predictor_now();
    for (int more = 1; st == PEAT_OK && more;) {
        more = 0;
        /* a slow kernel (a candidate's calibration runs under a hang timeout) gets no timings
         * for its standard error past PEAT_PRED_SE_SPEND_S */
        int se_n = peat_predictor_now() - start < PEAT_PRED_SE_SPEND_S ? max_n : 0;
        for (int i = 0; st == PEAT_OK && i < nc + no; i++) {
            if (!wants_more(r[i], pr[i], cnt[i], passes, se_n)) continue;
            st = time_gated(k, &c[i], min_s, &r[i][cnt[i]], &pr[i][cnt[i]]);
            cnt[i]++, more = 1;
        }
    }
    for (int i = 0; i < nc + no; i++) {
        if (st == PEAT_OK)
            peat_predictor_quiet_median(r[i], pr[i], cnt[i], atomic_load(&probe_best),
                                        passes < 3 ? passes : 3,
                                        i < nc ? &t_cal[i] : &t_odd[i - nc]);
        peat_predictor_call_free(&c[i]);
    }
    *n_cal = nc;
    if (n_odd) *n_odd = no;
    return st;
}

/* Time of k at one size of its calibration family: median of 5 quiet passes (of 20 at most). */
static peat_status time_one(const peat_kernel *k, int size, double min_s, double *t)
{
    peat_op_params p;
    peat_predictor_shape(k->op, size, 0, &p);
    peat_pred_call c;
    PEAT_TRY(peat_predictor_call_alloc(k, &p, 0x5eed + (uint64_t)size, &c));
    double r[20], pr[20];
    int n = 0, quiet = 0;
    peat_status st = PEAT_OK;
    for (; st == PEAT_OK && n < 20 && quiet < 5; n++) {
        st = time_gated(k, &c, min_s, &r[n], &pr[n]);
        quiet += peat_predictor_probe_quiet(pr[n]);
    }
    peat_predictor_call_free(&c);
    if (st == PEAT_OK) peat_predictor_quiet_median(r, pr, n, atomic_load(&probe_best), 3, t);
    return st;
}

/* Noise on a shared machine only ever adds time: a point well above the line through its
 * neighbours (or, for the last, the extension of the two before it) is timed again and the
 * smaller of the two medians kept. A point the second timing confirms at 1.5x the line or more is
 * an effect of that one size (relu_bwd_exact at n = 96 ran 2.3x the line through n = 56 and 80
 * here, n = 88 on it), not a trend of the sizes around it: it is left out of the table (*keep
 * 0). */
static peat_status retime_outliers(const peat_kernel *k, const int *sizes, int n, const double *x,
                                   double *t, double min_s, int *keep)
{
    for (int i = 0; i < n; i++) keep[i] = 1;
    for (int i = 2; i < n; i++) {
        int a = i - 2, b = i - 1, c = i + 1 < n ? i + 1 : -1;
        double line = c > 0 ? t[b] + (x[i] - x[b]) * (t[c] - t[b]) / (x[c] - x[b])
                            : t[b] + (x[i] - x[b]) * (t[b] - t[a]) / (x[b] - x[a]);
        if (!(x[c > 0 ? c : b] > x[c > 0 ? b : a]) || t[i] <= 1.15 * line) continue;
        double again = 0;
        PEAT_TRY(time_one(k, sizes[i], min_s, &again));
        if (again < t[i]) t[i] = again;
        if (t[i] >= 1.5 * line) keep[i] = 0;
    }
    return PEAT_OK;
}

/* Leave-one-out error of interpolating each interior point from its neighbours (relative). */
static double loo_error(int n, const double *x, const double *t)
{
    double e = 0;
    for (int i = 1; i + 1 < n; i++) {
        if (!(x[i + 1] > x[i - 1])) return INFINITY;
        double f = (x[i] - x[i - 1]) / (x[i + 1] - x[i - 1]);
        double tp = t[i - 1] + f * (t[i + 1] - t[i - 1]);
        e += fabs(tp - t[i]) / (t[i] > 0 ? t[i] : 1e-12);
    }
    return e + 1e-12;
}

peat_status peat_predictor_ktable_fit(const peat_kernel *k, const peat_pred_device *d, int n,
                                      const int *sizes, const double *t, peat_pred_ktable *kt)
{
    memset(kt, 0, sizeof *kt);
    snprintf(kt->kernel, sizeof kt->kernel, "%.63s", k->name);
    kt->desc_hash = peat_predictor_kernel_hash(k);
    peat_pred_clock clk;
    peat_predictor_clock_read(k->backend, 0, &clk);
    kt->clock_mhz = clk.mhz;
    /* the class whose variable interpolates the measured points best (docs/predictor.md) */
    double x[PEAT_PRED_MAX_POINTS];
    peat_op_params p;
    peat_pred_gemm_view v;
    peat_predictor_shape(k->op, sizes[0], 0, &p);
    kt->cls = PEAT_PRED_MEMORY;
    double err[2] = {0, 0};
    for (int c = peat_predictor_gemm_view(k->op, &p, &v) ? 0 : 1; c < 2; c++) {
        for (int i = 0; i < n; i++) {
            peat_predictor_shape(k->op, sizes[i], 0, &p);
            x[i] = peat_predictor_x(k, d, (peat_pred_class)c, &p);
        }
        err[c] = loo_error(n, x, t);
    }
    if (err[0] > 0 && err[0] <= err[1]) kt->cls = PEAT_PRED_COMPUTE;
    for (int i = 0; i < n; i++) {
        peat_predictor_shape(k->op, sizes[i], 0, &p);
        x[i] = peat_predictor_x(k, d, kt->cls, &p);
    }
    /* the empty call: the smallest size, extrapolated to no work along the first segment */
    double over = n > 1 ? t[0] - x[0] * (t[1] - t[0]) / (x[1] - x[0]) : 0.0;
    if (over < 0 || over > t[0]) over = over < 0 ? 0.0 : t[0];
    return peat_predictor_ktable_build(kt, n, x, t, over);
}

peat_status peat_predictor_ktable_refine(const peat_kernel *k, const peat_pred_device *d, int n,
                                         const int *sizes, const double *t, double min_s,
                                         peat_pred_ktable *kt)
{
    int keep[PEAT_PRED_MAX_POINTS], sz[PEAT_PRED_MAX_POINTS], m = 0;
    double x[PEAT_PRED_MAX_POINTS], tt[PEAT_PRED_MAX_POINTS];
    if (n > PEAT_PRED_MAX_POINTS) return PEAT_ERROR(PEAT_ERR_INVAL, "%d calibration points", n);
    memcpy(tt, t, (size_t)n * sizeof *t);
    PEAT_TRY(peat_predictor_ktable_fit(k, d, n, sizes, tt, kt));
    for (int i = 0; i < n; i++) {
        peat_op_params p;
        peat_predictor_shape(k->op, sizes[i], 0, &p);
        x[i] = peat_predictor_x(k, d, kt->cls, &p);
    }
    PEAT_TRY(retime_outliers(k, sizes, n, x, tt, min_s, keep));
    for (int i = 0; i < n; i++)
        if (keep[i]) sz[m] = sizes[i], tt[m++] = tt[i];
    return peat_predictor_ktable_fit(k, d, m, sz, tt, kt);
}

peat_status peat_predictor_calibrate_kernel(const peat_kernel *k, const peat_pred_device *d,
                                            double min_s, int passes, peat_pred_ktable *kt)
{
    int sizes[PEAT_PRED_MAX_POINTS], n = 0;
    double t[PEAT_PRED_MAX_POINTS];
    PEAT_TRY(peat_predictor_time_families(k, passes, min_s, &n, sizes, t, NULL, NULL, NULL));
    return peat_predictor_ktable_refine(k, d, n, sizes, t, min_s, kt);
}
