/* percall.c: per-call structure of one output tensor: which trailing rows and columns of its 2-D
 * view are wrong (an unwritten or mis-indexed edge region), analysed call by call so that clean
 * calls do not dilute it. */
#include "analyzer/probe.h"
#include "analyzer/analyzer.h"

#include <math.h>
#include <stdlib.h>

#define ROW_WRONG 0.9 /* a row (column) is wrong when >= 90% of its elements are gross errors */

static int over(double t, double e, double mag, int64_t depth, double factor)
{
    if (!isfinite(t)) return isfinite(e);
    return fabs(t - e) > factor * peat_analyzer_bound(mag, depth);
}

static int gross(double t, double e, double mag, int64_t depth)
{
    return over(t, e, mag, depth, PEAT_GROSS_FACTOR);
}

/* Whole planes wrong, the others within the bound. An error that hits elements one by one, as a
 * data-dependent formula error does, with some rate q, fills a plane of n >= 16 elements to 90%
 * and leaves another with none over the bound only when q is near 1 and near 0 at once: such a
 * partition follows the op's leading axis (a batch entry skipped or mis-indexed), not the data. */
static void plane_partition(const float *t, const double *e, const double *mag, int64_t depth,
                            int64_t planes, int64_t size, peat_edge_region *out)
{
    out->planes = planes, out->wrong_planes = 0, out->first_wrong_plane = -1;
    out->plane_confined = 0;
    if (planes < 2 || size < PEAT_PLANE_MIN) return;
    int64_t clean = 0;
    for (int64_t p = 0; p < planes; p++) {
        int64_t g = 0, o = 0;
        for (int64_t x = p * size; x < (p + 1) * size; x++) {
            double m = mag ? mag[x] : fabs(e[x]);
            g += gross((double)t[x], e[x], m, depth);
            o += over((double)t[x], e[x], m, depth, 1.0);
        }
        if (g >= ROW_WRONG * (double)size) {
            if (out->wrong_planes++ == 0) out->first_wrong_plane = p;
        } else if (o == 0)
            clean++;
        else
            return; /* a plane partly wrong: no partition */
    }
    out->plane_confined = out->wrong_planes > 0 && clean > 0;
}

/* Trailing rows (columns) wrong: >= ROW_WRONG of their live elements gross. A trailing row with
 * no live element (max pooling's last input column when no window reaches it) is passed over,
 * and counts only when wrong ones follow it. Before the wrong rows, as many rows again may be
 * partly wrong (fringe_count: the input rows a dropped output row's windows share with the
 * windows before them, as overlapping pooling windows do), where no column is wrong (whose errors
 * would fill every row); the rows before the fringe must be right. */
static int64_t edge_count(const int64_t *wrong, const int64_t *live, int64_t n)
{
    int64_t k = 0, dead = 0;
    while (k < n && live[n - 1 - k] == 0) k++, dead++;
    int64_t w = 0;
    while (k + w < n && live[n - 1 - k - w] > 0 &&
           wrong[n - 1 - k - w] >= ROW_WRONG * (double)live[n - 1 - k - w])
        w++;
    return w > 0 ? dead + w : 0;
}

/* The fringe before `edge` trailing rows: up to as many again, each with a gross error. */
static int64_t fringe_count(const int64_t *wrong, int64_t n, int64_t edge)
{
    int64_t f = 0;
    while (edge > 0 && f < edge && edge + f < n && wrong[n - 1 - edge - f] > 0) f++;
    return f;
}

peat_status peat_analyzer_edge_region(const peat_tensor *test, const peat_tensor *exact,
                                      const double *mag, int64_t depth, int64_t rows, int64_t cols,
                                      peat_edge_region *out)
{
    const float *t = test->data;
    const double *e = exact->data;
    int64_t *rw = calloc((size_t)(2 * (rows + cols)), sizeof *rw);
    if (!rw) return PEAT_ERROR(PEAT_ERR_NOMEM, "edge region counts");
    /* per row and column: gross errors, and live elements (an exact value other than 0, or a
     * wrong one): an output that is mostly exact zeros (max pooling's gradient, non-zero only at
     * each window's maximum) shows a dropped row by its live elements alone */
    int64_t *cw = rw + rows, *rl = cw + cols, *cl = rl + rows;
    /* a tensor of several planes (heads, images x channels) folds onto one plane */
    int64_t n = 0, planes = peat_tensor_numel(test) / (rows * cols);
    for (int64_t x = 0; x < planes * rows * cols; x++) {
        int g = gross((double)t[x], e[x], mag ? mag[x] : fabs(e[x]), depth);
        if (g || e[x] != 0.0) rl[x / cols % rows]++, cl[x % cols]++;
        if (!g) continue;
        rw[x / cols % rows]++, cw[x % cols]++, n++;
    }
    out->rows = rows, out->cols = cols, out->n_gross = n;
    out->edge_rows = edge_count(rw, rl, rows);
    out->edge_cols = edge_count(cw, cl, cols);
    if (!out->edge_cols)
        out->edge_rows += fringe_count(rw, rows, out->edge_rows);
    else if (!out->edge_rows)
        out->edge_cols += fringe_count(cw, cols, out->edge_cols);
    /* every gross error inside the trailing rows or columns (second pass) */
    int64_t outside = 0, r0 = rows - out->edge_rows, c0 = cols - out->edge_cols;
    for (int64_t x = 0; x < planes * rows * cols; x++) {
        int64_t i = x / cols % rows, j = x % cols;
        if (i >= r0 || j >= c0) continue;
        /* outside the region the output must be as good as any fp32 order: within the bound,
         * or the errors are spread and the region only their worst part */
        outside += over((double)t[x], e[x], mag ? mag[x] : fabs(e[x]), depth, 1.0);
    }
    /* the region is a proper part: a clean top-left block of at least half the plane remains
     * (a skipped last tile is a minority of it; wrong rows after a first right one, as a
     * causal attention's row 0 is right whatever the scale, are not an edge) */
    out->confined = n > 0 && outside == 0 && r0 > 0 && c0 > 0 && (r0 < rows || c0 < cols) &&
                    2 * r0 >= rows && 2 * c0 >= cols;
    plane_partition(t, e, mag, depth, planes, rows * cols, out);
    free(rw);
    return PEAT_OK;
}
