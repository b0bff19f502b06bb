/* run_check.h: what the tests of a split `peat run` share (test_scale_mpi.c: mpirun ranks;
 * test_scale_run.c: --shard and peat merge): the runtime tables and checkpoints of two campaign
 * files compared byte for byte, their verdicts and findings field by field. Included once per
 * test file. */
#ifndef PEAT_TESTS_RUN_CHECK_H
#define PEAT_TESTS_RUN_CHECK_H

#include <criterion/criterion.h>

#include "harness/runtime/builtin.h"
#include "harness/campaign/result_store.h"
#include "harness/runtime/runtime.h"

#include <hdf5.h>

#include <stdio.h>
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

/* The datasets at paths[0..n) are the same bytes in both campaign files (each holding rows). */
static inline void assert_same_bytes(const char *a, const char *b, const char *const *paths,
                                     size_t n, const char *what)
{
    hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT),
          fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
    cr_assert(fa >= 0 && fb >= 0, "%s and %s open", a, b);
    for (size_t i = 0; i < n; i++) {
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

/* The runtime tables and the checkpoints (the states and the tensors they are stored in) are the
 * same bytes in both campaign files. */
static inline void assert_same_datasets(const char *a, const char *b, const char *what)
{
    static const char *const paths[] = {"/runtime/curves",   "/runtime/weight_distance",
                                        "/runtime/verdicts", "/states/index",
                                        "/tensors/index",    "/tensors/f32_raw"};
    assert_same_bytes(a, b, paths, sizeof paths / sizeof paths[0], what);
}

static inline void state_of(const char *path, peat_campaign_state *st)
{
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_open(path, 0, &s), PEAT_OK, "%s: %s", path, peat_error_last());
    cr_assert_eq(peat_campaign_state_read(s, st), PEAT_OK, "%s: %s", path, peat_error_last());
    peat_store_close(s);
}

/* Playback and probes: the signatures (/signatures/index, /signatures/text) the same bytes, and
 * the counts of misbehaving calls, the report's plots and every probe's outcome field by field. */
static inline void assert_same_analysis(const char *a, const char *b, const char *what)
{
    static const char *const paths[] = {"/signatures/index", "/signatures/text"};
    assert_same_bytes(a, b, paths, sizeof paths / sizeof paths[0], what);
    peat_campaign_state x, y;
    state_of(a, &x);
    state_of(b, &y);
    const peat_campaign_result *r = &x.res, *q = &y.res;
    cr_assert(r->n_records > 0 && q->n_records == r->n_records &&
                  q->n_kernel_failures == r->n_kernel_failures && q->n_due == r->n_due &&
                  q->n_hang_skipped == r->n_hang_skipped && q->n_oob_writes == r->n_oob_writes &&
                  q->n_input_mutations == r->n_input_mutations &&
                  !strcmp(q->kernel_failure, r->kernel_failure) && !strcmp(q->due, r->due) &&
                  !strcmp(q->oob_write, r->oob_write) &&
                  !strcmp(q->input_mutation, r->input_mutation),
              "%s: the playback's counts of misbehaving calls differ (%lld failures, single "
              "process %lld)",
              what, (long long)q->n_kernel_failures, (long long)r->n_kernel_failures);
    cr_assert(!memcmp(&q->cand, &r->cand, sizeof r->cand) &&
                  !memcmp(&q->golden, &r->golden, sizeof r->golden),
              "%s: the signatures differ", what);
    cr_assert(!memcmp(&q->plots, &r->plots, sizeof r->plots), "%s: the plots differ", what);
    cr_assert_eq(q->n_probes, r->n_probes, "%s: %d probes, single process %d", what, q->n_probes,
                 r->n_probes);
    for (int i = 0; i < r->n_probes; i++) {
        const peat_probe_outcome *u = &r->probes[i], *v = &q->probes[i];
        cr_assert(!strcmp(u->label, v->label) && u->kind == v->kind && u->tag == v->tag &&
                      u->f.cls == v->f.cls && u->f.accept == v->f.accept &&
                      u->f.confidence == v->f.confidence && !strcmp(u->f.params, v->f.params) &&
                      u->f.n_evidence == v->f.n_evidence &&
                      !memcmp(&u->edge, &v->edge, sizeof u->edge) &&
                      !memcmp(&u->eff_bits, &v->eff_bits, sizeof u->eff_bits) &&
                      !memcmp(&u->golden_eff_bits, &v->golden_eff_bits, sizeof u->eff_bits),
                  "%s: probe %d (%s) differs", what, i, u->label);
        for (int e = 0; e < u->f.n_evidence; e++)
            cr_assert_str_eq(v->f.evidence[e], u->f.evidence[e], "%s: probe %d", what, i);
    }
    cr_assert(q->have_props == r->have_props &&
                  !memcmp(&q->props_cand, &r->props_cand, sizeof r->props_cand),
              "%s: the GEMM properties differ", what);
    peat_campaign_state_free(&x);
    peat_campaign_state_free(&y);
}

/* A text file's lines but those holding skip1 or skip2, into buf. */
static inline void lines_but(const char *path, const char *skip1, const char *skip2, char *buf,
                             size_t n)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s opens", path);
    char line[8192];
    size_t at = 0;
    buf[0] = 0;
    while (fgets(line, sizeof line, f))
        if (!strstr(line, skip1) && !strstr(line, skip2) && at + strlen(line) < n)
            at += (size_t)snprintf(buf + at, n - at, "%s", line);
    fclose(f);
}

/* signature.json of two runs the same but for the command line and the timings. */
static inline void assert_same_signature_json(const char *a, const char *b, const char *what)
{
    static char x[1 << 18], y[1 << 18];
    lines_but(a, "\"command\"", "\"timing_s\"", x, sizeof x);
    lines_but(b, "\"command\"", "\"timing_s\"", y, sizeof y);
    cr_assert(strlen(x) > 100 && !strcmp(x, y), "%s: %s differs from the single process's %s", what,
              b, a);
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
