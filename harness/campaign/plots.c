/* plots.c: error histograms and the worst call's error map for report.html (counting and
 * downsampling only; the bound is the analyzer's). */
#include "harness/campaign/plots.h"
#include "analyzer/analyzer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int peat_campaign_plot_err_bin(double e)
{
    if (!(e == e) || isinf(e)) return PEAT_PLOT_ERR_BINS - 1;
    if (e < ldexp(1.0, PEAT_PLOT_ERR_LO)) return 0;
    /* floor(log2(e)) is the binary exponent of e (a normal number here), read from its bits
     * (log2 itself can round up to the next integer just below a power of two) */
    uint64_t u;
    memcpy(&u, &e, sizeof u);
    int b = (int)((u >> 52) & 0x7ff) - 1023 - PEAT_PLOT_ERR_LO + 1;
    return b >= PEAT_PLOT_ERR_BINS - 1 ? PEAT_PLOT_ERR_BINS - 1 : b;
}

/* |test - exact| / bound of element i (Inf where the test value is not finite), the bound
 * gamma mag + eta with the depth's gamma and eta taken once per tensor. */
static double norm_err(const float *test, const double *exact, const double *mag, double gamma,
                       double eta, int64_t i)
{
    if (!isfinite(test[i])) return INFINITY;
    double m = mag ? mag[i] : fabs(exact[i]);
    return fabs((double)test[i] - exact[i]) / (gamma * m + eta);
}

/* Replaces the heatmap with this tensor's error map, each cell the largest e it covers. */
static void take_worst(peat_plot_data *p, const float *test, const double *exact, const double *mag,
                       double gamma, double eta, int64_t rows, int64_t cols)
{
    int gr = rows < PEAT_PLOT_HEAT_ROWS ? (int)rows : PEAT_PLOT_HEAT_ROWS;
    int gc = cols < PEAT_PLOT_HEAT_COLS ? (int)cols : PEAT_PLOT_HEAT_COLS;
    p->grid_rows = gr, p->grid_cols = gc;
    p->worst_rows = rows, p->worst_cols = cols;
    memset(p->grid, 0, sizeof p->grid);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            double e = norm_err(test, exact, mag, gamma, eta, r * cols + c);
            float *cell = &p->grid[(r * gr / rows) * gc + c * gc / cols];
            float v = isinf(e) ? INFINITY : (float)e;
            if (v > *cell || v != v) *cell = v;
        }
}

void peat_campaign_plot_add(peat_plot_data *p, int which, const float *test, const double *exact,
                            const double *mag, int64_t depth, int64_t rows, int64_t cols,
                            int64_t call)
{
    double worst = 0, gamma, eta;
    peat_analyzer_bound_coeffs(depth, &gamma, &eta);
    for (int64_t i = 0; i < rows * cols; i++) {
        double e = norm_err(test, exact, mag, gamma, eta, i);
        p->err_hist[which][peat_campaign_plot_err_bin(e)] += 1;
        if (e > worst || e != e) worst = e != e ? INFINITY : e;
    }
    p->n[which] += rows * cols;
    if (!(p->call_worst[which] >= worst)) p->call_worst[which] = worst;
    if (which != 0 || rows * cols == 0 || (p->have_worst && !(worst > p->worst_e))) return;
    p->have_worst = 1;
    p->worst_e = worst;
    p->worst_call = call;
    take_worst(p, test, exact, mag, gamma, eta, rows, cols);
}

void peat_campaign_plot_call_end(peat_plot_data *p, const char *layer, const char *phase,
                                 int64_t rows, int64_t cols, int64_t iter)
{
    peat_plot_coverage *c = NULL;
    for (int i = 0; i < p->n_coverage && !c; i++)
        if (!strcmp(p->coverage[i].layer, layer) && !strcmp(p->coverage[i].phase, phase) &&
            p->coverage[i].rows == rows && p->coverage[i].cols == cols)
            c = &p->coverage[i];
    if (!c && p->n_coverage < PEAT_PLOT_COVERAGE_ROWS) {
        c = &p->coverage[p->n_coverage++];
        memset(c, 0, sizeof *c);
        snprintf(c->layer, sizeof c->layer, "%s", layer);
        snprintf(c->phase, sizeof c->phase, "%s", phase);
        c->rows = rows, c->cols = cols, c->iter_lo = iter, c->iter_hi = iter;
    }
    if (c) {
        c->calls++;
        c->iter_lo = iter < c->iter_lo ? iter : c->iter_lo;
        c->iter_hi = iter > c->iter_hi ? iter : c->iter_hi;
        for (int w = 0; w < 2; w++)
            if (!(c->max_e[w] >= p->call_worst[w])) c->max_e[w] = p->call_worst[w];
    } else
        p->coverage_other_calls++;
    p->call_worst[0] = p->call_worst[1] = 0;
}

void peat_campaign_plot_finish(peat_plot_data *p)
{
    for (int w = 0; w < 2; w++)
        for (int b = 0; b < PEAT_PLOT_ERR_BINS && p->n[w] > 0; b++)
            p->err_hist[w][b] /= (double)p->n[w];
}
