/* run_check.h: what the tests of a split `peat run` share (test_scale_mpi.c: mpirun ranks;
 * test_scale_run.c: --shard and peat merge): the runtime tables and checkpoints of two campaign
 * files compared byte for byte, their verdicts and findings field by field. Included once per
 * test file. */
#ifndef PEAT_TESTS_RUN_CHECK_H
#define PEAT_TESTS_RUN_CHECK_H

#include <criterion/criterion.h>

#include "campaign/harness.h"
#include "campaign/result_store.h"
#include "campaign/runtime.h"

#include <hdf5.h>

#include <stdlib.h>
#include <string.h>

/* A dataset's bytes as the file holds them (its own type: doubles, strings, padding). */
static inline void *dataset_bytes(hid_t f, const char *path, size_t *n)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    cr_assert_geq(d, 0, "%s is in the campaign file", path);
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    hssize_t rows = H5Sget_simple_extent_npoints(sp);
    *n = (size_t)rows * H5Tget_size(t);
    void *b = calloc(*n + 1, 1);
    cr_assert(b);
    cr_assert_geq(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b), 0, "%s reads", path);
    H5Sclose(sp);
    H5Tclose(t);
    H5Dclose(d);
    return b;
}

/* The runtime tables and the checkpoints (the states and the tensors they are stored in) are the
 * same bytes in both campaign files. */
static inline void assert_same_datasets(const char *a, const char *b, const char *what)
{
    static const char *const paths[] = {"/runtime/curves",   "/runtime/weight_distance",
                                        "/runtime/verdicts", "/states/index",
                                        "/tensors/index",    "/tensors/f32_raw"};
    hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT),
          fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
    cr_assert(fa >= 0 && fb >= 0, "%s and %s open", a, b);
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        size_t na, nb;
        void *x = dataset_bytes(fa, paths[i], &na), *y = dataset_bytes(fb, paths[i], &nb);
        cr_assert(na > 0, "%s holds rows", paths[i]);
        cr_assert_eq(na, nb, "%s: %s holds %zu bytes, the single process's %zu", what, paths[i], nb,
                     na);
        cr_assert(memcmp(x, y, na) == 0, "%s: %s differs from the single process's", what,
                  paths[i]);
        free(x);
        free(y);
    }
    H5Fclose(fa);
    H5Fclose(fb);
}

static inline void state_of(const char *path, peat_campaign_state *st)
{
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK, "%s: %s", path, peat_error_last());
    cr_assert_eq(peat_campaign_state_read(s, st), PEAT_OK, "%s: %s", path, peat_error_last());
    peat_store_close(s);
}

/* Verdict, runtime verdicts (n_runtime of them) and findings as the reports show them. */
static inline void assert_same_judgement(const char *a, const char *b, const char *what,
                                         int n_runtime)
{
    peat_campaign_state x, y;
    state_of(a, &x);
    state_of(b, &y);
    const peat_campaign_result *r = &x.res, *q = &y.res;
    cr_assert_eq(r->verdict, q->verdict, "%s: verdict %d, single process %d", what, q->verdict,
                 r->verdict);
    cr_assert_eq(r->n_runtime, n_runtime, "%d faulty runs were judged, not %d", r->n_runtime,
                 n_runtime);
    cr_assert_eq(q->n_runtime, r->n_runtime, "%s: runtime runs", what);
    for (int j = 0; j < r->n_runtime; j++) {
        const peat_runtime_verdict *u = &r->runtime[j], *v = &q->runtime[j];
        cr_assert_str_eq(q->runtime_run[j], r->runtime_run[j], "%s: run %d", what, j);
        cr_assert_eq(q->runtime_swapped[j], r->runtime_swapped[j], "%s: %s swapped", what,
                     r->runtime_run[j]);
        cr_assert(u->cls == v->cls && u->iter == v->iter && !strcmp(u->metric, v->metric) &&
                      u->final_loss == v->final_loss && u->band_lo == v->band_lo &&
                      u->band_hi == v->band_hi && u->wdist_ratio == v->wdist_ratio &&
                      !strcmp(u->evidence, v->evidence),
                  "%s: runtime verdict of %s: '%s', single process '%s'", what, r->runtime_run[j],
                  v->evidence, u->evidence);
    }
    cr_assert_eq(q->n_findings, r->n_findings, "%s: findings", what);
    for (int i = 0; i < r->n_findings; i++) {
        const peat_finding *u = &r->findings[i], *v = &q->findings[i];
        cr_assert(u->cls == v->cls && u->confidence == v->confidence &&
                      !strcmp(u->params, v->params) && u->n_evidence == v->n_evidence &&
                      u->accept == v->accept,
                  "%s: finding %d differs", what, i);
        for (int e = 0; e < u->n_evidence; e++)
            cr_assert_str_eq(v->evidence[e], u->evidence[e], "%s: finding %d", what, i);
    }
    peat_campaign_state_free(&x);
    peat_campaign_state_free(&y);
}

#endif
