/* fi_shard.c: `peat inject` across shards and MPI ranks (docs/scale-out.md). A shard's trials are
 * those whose index % N is its number; each trial's randomness derives from (seed, model, site,
 * index) alone (peat_inject_trial_plan), so any shard count gives the same trials. */
#define _DEFAULT_SOURCE
#include "core/test_hooks.h"
#include "harness/fi/fi_shard.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUNS_TABLE "/fi/shards"

/* One shard's run: the options that name its series, and which shard of how many it is. */
typedef struct shard_run {
    char models[1024], site[8], ops[256], layers[256], phases[32];
    int64_t iter_lo, iter_hi, trials, local_only, sig, shard, of;
    const char *path;
} shard_run;

/* the columns of /fi/shards: store/store_schema.c (every file is created with it) */
static const peat_store_col *const run_cols = peat_store_fi_shard_cols;
#define NRC ((int)(sizeof peat_store_fi_shard_cols / sizeof peat_store_fi_shard_cols[0]))

static peat_status run_from_opts(const peat_fi_opts *o, int64_t trials, peat_scale_shard sh,
                                 shard_run *r)
{
    memset(r, 0, sizeof *r);
    const char *s[5] = {o->models, o->site ? o->site : "output", o->ops, o->layers, o->phases};
    char *d[5] = {r->models, r->site, r->ops, r->layers, r->phases};
    size_t w[5] = {sizeof r->models, sizeof r->site, sizeof r->ops, sizeof r->layers,
                   sizeof r->phases};
    for (int k = 0; k < 5; k++)
        if (snprintf(d[k], w[k], "%s", s[k] ? s[k] : "") >= (int)w[k])
            return PEAT_ERROR(PEAT_ERR_INVAL, "--shard: option '%s' too long for a shard file",
                              s[k]);
    r->iter_lo = o->iter_lo, r->iter_hi = o->iter_hi, r->trials = trials;
    r->local_only = o->local_only, r->sig = o->signature_trials, r->shard = sh.i, r->of = sh.n;
    return PEAT_OK;
}

static void run_to_row(const shard_run *r, peat_store_value *v)
{
    v[0].s = r->models, v[1].s = r->site, v[2].s = r->ops, v[3].s = r->layers, v[4].s = r->phases;
    v[5].i = r->iter_lo, v[6].i = r->iter_hi, v[7].i = r->trials, v[8].i = r->local_only;
    v[9].i = r->sig, v[10].i = r->shard, v[11].i = r->of;
}

static peat_status run_from_row(const peat_store_table_t *t, int64_t row, shard_run *r)
{
    peat_store_value v[NRC];
    for (int c = 0; c < NRC; c++) PEAT_TRY(peat_store_table_get(t, row, c, &v[c]));
    memset(r, 0, sizeof *r);
    snprintf(r->models, sizeof r->models, "%s", v[0].s);
    snprintf(r->site, sizeof r->site, "%s", v[1].s);
    snprintf(r->ops, sizeof r->ops, "%s", v[2].s);
    snprintf(r->layers, sizeof r->layers, "%s", v[3].s);
    snprintf(r->phases, sizeof r->phases, "%s", v[4].s);
    r->iter_lo = v[5].i, r->iter_hi = v[6].i, r->trials = v[7].i, r->local_only = v[8].i;
    r->sig = v[9].i, r->shard = v[10].i, r->of = v[11].i;
    return PEAT_OK;
}

/* Same series and shard count (the shard number aside). */
static int run_same_series(const shard_run *a, const shard_run *b)
{
    return !strcmp(a->models, b->models) && !strcmp(a->site, b->site) && !strcmp(a->ops, b->ops) &&
           !strcmp(a->layers, b->layers) && !strcmp(a->phases, b->phases) &&
           a->iter_lo == b->iter_lo && a->iter_hi == b->iter_hi && a->trials == b->trials &&
           a->local_only == b->local_only && a->sig == b->sig;
}

peat_status peat_fi_shard_run_write(peat_store_t *s, const peat_fi_opts *o, int64_t trials,
                                    peat_scale_shard sh)
{
    shard_run r, old;
    PEAT_TRY(run_from_opts(o, trials, sh, &r));
    peat_store_table_t *t = NULL;
    PEAT_TRY(peat_store_table_open(s, RUNS_TABLE, run_cols, NRC, &t));
    peat_status st = PEAT_OK;
    int found = 0;
    for (int64_t i = 0; st == PEAT_OK && i < peat_store_table_rows(t) && !found; i++) {
        st = run_from_row(t, i, &old);
        found =
            st == PEAT_OK && run_same_series(&r, &old) && old.shard == r.shard && old.of == r.of;
    }
    peat_store_value v[NRC];
    run_to_row(&r, v);
    if (st == PEAT_OK && !found) st = peat_store_table_append(t, v, 1);
    peat_store_table_close(t);
    return st;
}

/* Every run row of the shard files (path set), appended to *runs. */
static peat_status runs_read(const char *path, shard_run **runs, int *n)
{
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(path, 0, &s));
    peat_status st = PEAT_OK;
    if (!peat_store_table_present(s, RUNS_TABLE))
        st = PEAT_ERROR(PEAT_ERR_INVAL, "%s is not a shard of `peat inject --shard I/N`", path);
    peat_store_table_t *t = NULL;
    if (st == PEAT_OK) st = peat_store_table_open(s, RUNS_TABLE, run_cols, NRC, &t);
    for (int64_t i = 0; st == PEAT_OK && i < peat_store_table_rows(t); i++) {
        shard_run *g = realloc(*runs, (size_t)(*n + 1) * sizeof *g);
        if (!g) {
            st = PEAT_ERROR(PEAT_ERR_NOMEM, "merge");
            break;
        }
        *runs = g;
        st = run_from_row(t, i, &g[*n]);
        g[(*n)++].path = path;
    }
    peat_store_table_close(t);
    peat_status cst = peat_store_close(s);
    return st == PEAT_OK ? cst : st;
}

static void opts_from_run(const shard_run *r, const char *dir, peat_fi_opts *o)
{
    peat_fi_opts_default(o);
    o->campaign = dir;
    o->models = r->models, o->site = r->site;
    o->ops = r->ops[0] ? r->ops : NULL, o->layers = r->layers[0] ? r->layers : NULL;
    o->phases = r->phases[0] ? r->phases : NULL;
    o->iter_lo = r->iter_lo, o->iter_hi = r->iter_hi, o->trials = r->trials;
    o->local_only = (int)r->local_only, o->signature_trials = (int)r->sig;
    o->quiet = 1;
}

/* The shard files of one series: refuses another shard count for the same series (not when
 * partial: a resumed job may have any rank count). */
static peat_status series_merge(const shard_run *runs, int n, int k, const char *dir, int partial,
                                peat_fi_result *res)
{
    const char **paths = malloc((size_t)n * sizeof *paths);
    if (!paths) return PEAT_ERROR(PEAT_ERR_NOMEM, "merge");
    int np = 0;
    peat_status st = PEAT_OK;
    for (int j = 0; j < n && st == PEAT_OK; j++) {
        if (!run_same_series(&runs[k], &runs[j])) continue;
        if (runs[j].of != runs[k].of && !partial)
            st = PEAT_ERROR(PEAT_ERR_INVAL,
                            "mismatched shards: %s is shard %lld/%lld, %s shard %lld/%lld of the "
                            "same series: merge shards of one shard count",
                            runs[k].path, (long long)runs[k].shard, (long long)runs[k].of,
                            runs[j].path, (long long)runs[j].shard, (long long)runs[j].of);
        paths[np++] = runs[j].path;
    }
    peat_fi_opts o;
    opts_from_run(&runs[k], dir, &o);
    o.from = paths, o.n_from = np, o.from_of = (int)runs[k].of, o.from_partial = partial;
    peat_fi_result_free(res);
    if (st == PEAT_OK) st = peat_fi_run(&o, res);
    free(paths);
    return st;
}

/* DIR itself, or the folder of DIR/campaign.h5 given as a file. */
static void campaign_dir(const char *campaign, char *dir, size_t n)
{
    struct stat sb;
    snprintf(dir, n, "%s", campaign);
    if (stat(campaign, &sb) != 0 || S_ISDIR(sb.st_mode)) return; /* a folder, or named as given */
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, n, ".");
}

static peat_status shard_files(const char *dir, glob_t *g)
{
    char pat[700];
    snprintf(pat, sizeof pat, "%s/fi-shard-*-of-*.h5", dir);
    memset(g, 0, sizeof *g);
    int rc = glob(pat, 0, NULL, g);
    if (rc == GLOB_NOMATCH) return PEAT_OK;
    return rc == 0 ? PEAT_OK : PEAT_ERROR(PEAT_ERR_IO, "%s: cannot list shard files", dir);
}

peat_status peat_fi_merge(const char *campaign, const char *const *shards, int n, int partial,
                          peat_fi_result *res)
{
    memset(res, 0, sizeof *res);
    char dir[600];
    campaign_dir(campaign, dir, sizeof dir);
    glob_t g = {0};
    if (n == 0) {
        PEAT_TRY(shard_files(dir, &g));
        shards = (const char *const *)g.gl_pathv, n = (int)g.gl_pathc;
    }
    if (n == 0) {
        globfree(&g);
        return partial
                   ? PEAT_OK
                   : PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s: no shard files (fi-shard-I-of-N.h5)", dir);
    }
    shard_run *runs = NULL;
    int nr = 0;
    peat_status st = PEAT_OK;
    for (int i = 0; i < n && st == PEAT_OK; i++) st = runs_read(shards[i], &runs, &nr);
    /* each series once: the first run row that names it */
    for (int k = 0; k < nr && st == PEAT_OK; k++) {
        int seen = 0;
        for (int j = 0; j < k && !seen; j++) seen = run_same_series(&runs[j], &runs[k]);
        if (!seen) st = series_merge(runs, nr, k, campaign, partial, res);
    }
    free(runs);
    globfree(&g);
    return st;
}

/* Rank 0, before the ranks start: the trials of shard files a killed job left (of any rank
 * count) go into the campaign, and the files are removed. */
static peat_status leftovers_take(const char *dir)
{
    glob_t g;
    PEAT_TRY(shard_files(dir, &g));
    peat_status st = PEAT_OK;
    if (g.gl_pathc) {
        peat_fi_result r;
        st = peat_fi_merge(dir, (const char *const *)g.gl_pathv, (int)g.gl_pathc, 1, &r);
        peat_fi_result_free(&r);
        for (size_t i = 0; st == PEAT_OK && i < g.gl_pathc; i++) unlink(g.gl_pathv[i]);
    }
    globfree(&g);
    return st;
}

static void failed_ranks(uint64_t failed, int size, const char *dir, char *msg, size_t n)
{
    msg[0] = 0;
    for (int r = 0; r < size && r < 64; r++) {
        if (!(failed >> r & 1)) continue;
        size_t l = strlen(msg);
        snprintf(msg + l, n - l, "%srank %d (shard %d/%d: trials #%d, #%d, ...)", l ? ", " : "", r,
                 r, size, r, r + size);
    }
    size_t l = strlen(msg);
    snprintf(msg + l, n - l,
             " failed; the other ranks' trials are kept in %s/fi-shard-*.h5: rerun the same "
             "command (any rank count) to finish",
             dir);
}

peat_status peat_fi_run_ranks(const peat_fi_opts *o, peat_fi_result *res)
{
    int size = peat_scale_mpi_size(), rank = peat_scale_mpi_rank();
    if (size <= 1 || o->shard || o->show) return peat_fi_run(o, res);
    memset(res, 0, sizeof *res);
    char dir[600], spec[32], msg[900];
    campaign_dir(o->campaign ? o->campaign : ".", dir, sizeof dir);
    peat_status st = rank == 0 ? leftovers_take(dir) : PEAT_OK;
    if (peat_scale_mpi_status_all(st, NULL) != PEAT_OK)
        return rank == 0 ? st : PEAT_ERROR(PEAT_ERR_IO, "rank 0 failed before the trials");
    snprintf(spec, sizeof spec, "%d/%d", rank, size);
    peat_fi_opts mine = *o;
    mine.shard = spec;
    mine.quiet = o->quiet || rank != 0;
    /* test hook (core/test_hooks.h): kill-rank=R:ROWS kills rank R after ROWS */
    char rows[32];
    if (peat_test_hook_rank("kill-rank", rank, rows, sizeof rows) && rows[0])
        mine.debug_kill_after = atoll(rows);
    peat_fi_result part;
    st = peat_fi_run(&mine, &part);
    if (st != PEAT_OK)
        fprintf(stderr, "peat: rank %d (shard %s) failed: %s\n", rank, spec, peat_error_last());
    /* what the ranks ran, for the report: trials, resumed, the slowest rank's time, CPU time */
    double sum[3] = {(double)part.n_run, (double)part.n_resumed, part.t_cpu};
    double slowest = part.t_run;
    peat_scale_mpi_sum(sum, 3);
    peat_scale_mpi_max(&slowest, 1);
    int threads = part.threads;
    peat_fi_result_free(&part);
    uint64_t failed = 0;
    peat_status all = peat_scale_mpi_status_all(st, &failed);
    if (all != PEAT_OK) {
        failed_ranks(failed, size, dir, msg, sizeof msg);
        return PEAT_ERROR(PEAT_ERR_IO, "%s", msg);
    }
    if (rank != 0) return PEAT_OK;
    char(*paths)[700] = malloc((size_t)size * sizeof *paths);
    const char **pp = malloc((size_t)size * sizeof *pp);
    st = paths && pp ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "merge");
    for (int r = 0; st == PEAT_OK && r < size; r++) {
        char name[64];
        peat_scale_shard_name("fi-shard-", (peat_scale_shard){r, size}, ".h5", name, sizeof name);
        snprintf(paths[r], sizeof paths[r], "%s/%s", dir, name);
        pp[r] = paths[r];
    }
    if (st == PEAT_OK) st = peat_fi_merge(dir, pp, size, 0, res);
    if (st == PEAT_OK) {
        res->n_run = (int64_t)sum[0], res->n_resumed = (int64_t)sum[1];
        res->t_run = slowest, res->t_cpu = sum[2], res->threads = threads * size;
        res->trials_per_s = res->t_run > 0 ? (double)res->n_run / res->t_run : 0;
        res->propagated = !o->local_only;
    }
    for (int r = 0; st == PEAT_OK && r < size; r++) unlink(paths[r]);
    free(paths);
    free(pp);
    return st;
}
