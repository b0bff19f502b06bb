/* plots.h: what report.html draws beyond the signatures, gathered during playback: histograms of
 * the bound-normalised error (candidate and golden), the worst call's error over its output
 * matrix (the heatmap and, for gross errors, the region map), and the coverage table (which
 * layers, phases and shapes the replayed calls came from, with each group's worst error). */
#ifndef PEAT_PLOTS_H
#define PEAT_PLOTS_H

#include <stdint.h>

#define PEAT_PLOT_ERR_BINS                                                                         \
    20 /* e < 2^-12, [2^-12, 2^-11), ..., [2^5, 2^6), >= 2^6 or not finite                         \
        */
#define PEAT_PLOT_ERR_LO        (-12)
#define PEAT_PLOT_HEAT_ROWS     48
#define PEAT_PLOT_HEAT_COLS     64
#define PEAT_PLOT_COVERAGE_ROWS 32

/* One group of replayed calls: same layer, phase and output view. */
typedef struct peat_plot_coverage {
    char layer[64], phase[8];
    int64_t rows, cols;
    int64_t calls, iter_lo, iter_hi;
    double max_e[2]; /* largest error / bound: candidate, golden */
} peat_plot_coverage;

typedef struct peat_plot_data {
    /* fraction of elements per bin of e = |test - exact| / bound; [0] candidate, [1] golden */
    double err_hist[2][PEAT_PLOT_ERR_BINS];
    int64_t n[2];
    /* the candidate's call with the largest e: its output's 2-D view, downsampled to at most
     * PEAT_PLOT_HEAT_ROWS x PEAT_PLOT_HEAT_COLS cells holding the largest e of their elements */
    int have_worst;
    double worst_e;
    int64_t worst_call, worst_rows, worst_cols;
    int grid_rows, grid_cols;
    float grid[PEAT_PLOT_HEAT_ROWS * PEAT_PLOT_HEAT_COLS];
    /* coverage: groups in order of first appearance; calls past the last row are counted */
    int n_coverage;
    int64_t coverage_other_calls;
    peat_plot_coverage coverage[PEAT_PLOT_COVERAGE_ROWS];
    double call_worst[2]; /* of the call being added (peat_campaign_plot_call_end files it) */
} peat_plot_data;

/* Adds one output tensor (rows x cols view) of call `call`: test values, exact values, and the
 * per-element rounding bounds' magnitudes and depth (peat_analyzer_bound). which: 0 candidate,
 * 1 golden; only the candidate's calls compete for the heatmap. */
void peat_campaign_plot_add(peat_plot_data *p, int which, const float *test, const double *exact,
                            const double *mag, int64_t depth, int64_t rows, int64_t cols,
                            int64_t call);
/* Files the call whose outputs were just added under its coverage group (layer, phase name,
 * first output's rows x cols view, training iteration), then starts the next call. */
void peat_campaign_plot_call_end(peat_plot_data *p, const char *layer, const char *phase,
                                 int64_t rows, int64_t cols, int64_t iter);
/* Turns the bin counts into fractions (once, after the last add). */
void peat_campaign_plot_finish(peat_plot_data *p);
/* The bin of a bound-normalised error. */
int peat_campaign_plot_err_bin(double e);

#endif
