/* scale_check.h: what the scale-out tests share (test_scale.c, test_scale_mpi.c): a small
 * campaign, the FI options they run, and the check that two campaign folders hold the same trial
 * table, rate tables and signatures. Included once per test file. */
#ifndef PEAT_TESTS_SCALE_CHECK_H
#define PEAT_TESTS_SCALE_CHECK_H

#include <criterion/criterion.h>

#include "harness/campaign/campaign.h"
#include "harness/fi/fi.h"
#include "harness/run/run.h"
#include "store/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FI_MODELS "bitflip(bit=-1);nan;tile(rows=4,cols=4,kind=random)"

/* The text of the file at path into buf (at most n - 1 bytes, NUL-terminated; empty when it
 * cannot be read): its length. */
static inline size_t text_read(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t k = f ? fread(buf, 1, n - 1, f) : 0;
    buf[k] = 0;
    if (f) fclose(f);
    return k;
}

static inline void make_campaign(const char *dir, uint64_t seed)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_new";
    o.flow = "mlp";
    o.iters = 8;
    o.calls = 16;
    o.seed = seed;
    o.out_dir = dir;
    o.quiet = 1;
    o.isolate = 0;
    o.no_runtime = 1;
    o.no_probes = 1;
    peat_campaign_result r;
    cr_assert_eq(peat_run_campaign(&o, &r), PEAT_OK, "campaign: %s", peat_error_last());
}

static inline void copy_dir(const char *from, const char *to)
{
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    cr_assert_eq(system(cmd), 0);
}

static inline void fi_opts(peat_fi_opts *o, const char *dir, const char *shard)
{
    peat_fi_opts_default(o);
    o->campaign = dir;
    o->models = FI_MODELS;
    o->trials = 30;
    o->threads = 2;
    o->batch = 8;
    o->signature_trials = 4;
    o->quiet = 1;
    o->shard = shard;
}

static inline void run_shard(const char *dir, int i, int n, int64_t kill_after)
{
    char spec[32];
    snprintf(spec, sizeof spec, "%d/%d", i, n);
    peat_fi_opts o;
    fi_opts(&o, dir, spec);
    o.debug_kill_after = kill_after;
    peat_fi_result r;
    cr_assert_eq(peat_fi_run(&o, &r), PEAT_OK, "shard %s: %s", spec, peat_error_last());
    peat_fi_result_free(&r);
}

/* The same double, NaN included (a NaN trial's max_norm and distances are NaN in both). */
static inline int same_d(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

/* The whole trial table, the rate tables and the reference signatures of two campaign folders
 * are the same. */
static inline void assert_same_fi(const char *a, const char *b)
{
    peat_fi_opts o;
    peat_fi_result ra, rb;
    fi_opts(&o, a, NULL);
    o.show = 1;
    cr_assert_eq(peat_fi_run(&o, &ra), PEAT_OK, "%s", peat_error_last());
    o.campaign = b;
    cr_assert_eq(peat_fi_run(&o, &rb), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(ra.n_trials, rb.n_trials, "%lld trials vs %lld", (long long)ra.n_trials,
                 (long long)rb.n_trials);
    for (int64_t i = 0; i < ra.n_trials; i++) {
        const peat_inject_trial *x = &ra.trials[i], *y = &rb.trials[i];
        cr_assert_str_eq(x->model, y->model);
        cr_assert_eq(x->index, y->index);
        cr_assert(x->seed == y->seed && x->record_id == y->record_id && x->bit == y->bit &&
                      x->outcome == y->outcome && x->prop == y->prop && x->n_diff == y->n_diff &&
                      x->n_over == y->n_over && same_d(x->max_norm, y->max_norm) &&
                      same_d(x->d_loss, y->d_loss) && same_d(x->d_w, y->d_w) &&
                      x->pred_changed == y->pred_changed && !strcmp(x->spec, y->spec),
                  "%s #%lld differs: outcome %s/%s, propagated %s/%s, d_loss %g/%g", x->model,
                  (long long)x->index, peat_inject_outcome_name(x->outcome),
                  peat_inject_outcome_name(y->outcome), peat_inject_outcome_name(x->prop),
                  peat_inject_outcome_name(y->prop), x->d_loss, y->d_loss);
    }
    for (int g = 0; g < PEAT_INJECT_GROUP_COUNT; g++) {
        cr_assert_eq(ra.tab[g].n, rb.tab[g].n, "table %d: %d rows vs %d", g, ra.tab[g].n,
                     rb.tab[g].n);
        for (int k = 0; k < ra.tab[g].n; k++)
            cr_assert(
                !memcmp(ra.tab[g].rows[k].t.n, rb.tab[g].rows[k].t.n, sizeof ra.tab[g].rows[k].t.n),
                "table %d row %s: other counts", g, ra.tab[g].rows[k].key);
    }
    peat_fi_result_free(&ra);
    peat_fi_result_free(&rb);
    /* every signature (the campaign's and the FI reference ones) */
    char pa[400], pb[400];
    snprintf(pa, sizeof pa, "%s/campaign.h5", a);
    snprintf(pb, sizeof pb, "%s/campaign.h5", b);
    peat_store_t *sa, *sb;
    cr_assert_eq(peat_store_open(pa, 0, &sa), PEAT_OK);
    cr_assert_eq(peat_store_open(pb, 0, &sb), PEAT_OK);
    int64_t n = peat_store_signature_count(sa);
    cr_assert_eq(n, peat_store_signature_count(sb), "signature counts differ");
    int fi_sigs = 0;
    for (int64_t i = 0; i < n; i++) {
        char name[64];
        char *ja = NULL, *jb = NULL;
        cr_assert_eq(peat_store_signature_at(sa, i, name, &ja), PEAT_OK);
        cr_assert_eq(peat_store_signature_read(sb, name, &jb), PEAT_OK, "%s: no %s", b, name);
        cr_assert_str_eq(ja, jb, "signature %s differs", name);
        fi_sigs += !strncmp(name, "fi:", 3);
        free(ja), free(jb);
    }
    cr_assert_eq(fi_sigs, 3, "one reference signature per model, got %d", fi_sigs);
    peat_store_close(sa);
    peat_store_close(sb);
}

static inline int64_t trial_rows(const char *dir)
{
    peat_fi_opts o;
    fi_opts(&o, dir, NULL);
    o.show = 1;
    peat_fi_result r;
    if (peat_fi_run(&o, &r) != PEAT_OK) return 0;
    int64_t n = r.n_trials;
    peat_fi_result_free(&r);
    return n;
}

#endif
