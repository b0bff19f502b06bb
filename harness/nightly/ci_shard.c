/* ci_shard.c: `peat ci` across shards and MPI ranks (docs/scale-out.md): a shard runs the items
 * whose number in the suite's plan is i mod N into OUT/shard-i-of-N (its own ci.json says which);
 * `peat merge OUT` puts the shards' items back in the plan's order into the one suite result. */
#define _DEFAULT_SOURCE
#include "harness/nightly/ci.h"
#include "harness/nightly/jsonread.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void str_at(const peat_json *j, const char *key, char *dst, size_t n)
{
    snprintf(dst, n, "%s", peat_nightly_json_str(j, key, ""));
}

static void finding_from_json(const peat_json *j, peat_ci_finding *f)
{
    str_at(j, "class", f->cls, sizeof f->cls);
    str_at(j, "params", f->params, sizeof f->params);
    str_at(j, "acceptance", f->acceptance, sizeof f->acceptance);
    str_at(j, "evidence", f->evidence, sizeof f->evidence);
    const peat_json *a = peat_nightly_json_get(j, "allowed");
    f->allowed = a && a->kind == PEAT_JSON_BOOL && a->num != 0;
}

/* One item of a shard's ci.json; its folder made relative to the merged result's (prefix). */
static void item_from_json(const peat_json *j, const char *prefix, peat_ci_item *it)
{
    memset(it, 0, sizeof *it);
    str_at(j, "kernel", it->kernel, sizeof it->kernel);
    str_at(j, "op", it->op, sizeof it->op);
    str_at(j, "flow", it->flow, sizeof it->flow);
    str_at(j, "backend", it->backend, sizeof it->backend);
    str_at(j, "status", it->status, sizeof it->status);
    str_at(j, "verdict", it->verdict, sizeof it->verdict);
    str_at(j, "error", it->error, sizeof it->error);
    str_at(j, "command", it->command, sizeof it->command);
    /* a folder too long for the item is cut: its report link then names no folder */
    if (snprintf(it->dir, sizeof it->dir, "%s%s", prefix, peat_nightly_json_str(j, "dir", "")) >=
        (int)sizeof it->dir)
        it->dir[0] = 0;
    it->exit_code = (int)peat_nightly_json_num(j, "exit");
    it->seconds = peat_nightly_json_num(j, "seconds");
    double p = peat_nightly_json_num(j, "planned_s");
    it->plan_s = isnan(p) ? 0 : p;
    it->max_norm = peat_nightly_json_num(j, "max_norm");
    it->eff_bits = peat_nightly_json_num(j, "eff_bits");
    it->rms_ratio = peat_nightly_json_num(j, "rms_vs_golden");
    const peat_json *fs = peat_nightly_json_get(j, "findings");
    for (int i = 0; fs && fs->kind == PEAT_JSON_ARRAY && i < fs->n; i++)
        if (it->n_findings < PEAT_CI_MAX_FINDINGS)
            finding_from_json(&fs->items[i], &it->findings[it->n_findings++]);
}

/* What every shard of one suite run shares (the first shard's, compared with the others'). */
typedef struct shard_head {
    char version[32], suite[64], suite_file[512], policy[256], fail_on[8];
    int n, planned;
} shard_head;

static peat_status head_read(const peat_json *j, const char *path, shard_head *h, int *i)
{
    const peat_json *s = peat_nightly_json_get(j, "shard");
    if (!s || s->kind != PEAT_JSON_OBJECT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s is not the result of `peat ci --shard I/N`", path);
    memset(h, 0, sizeof *h);
    str_at(j, "peat_version", h->version, sizeof h->version);
    str_at(j, "suite", h->suite, sizeof h->suite);
    str_at(j, "suite_file", h->suite_file, sizeof h->suite_file);
    str_at(j, "fail_on", h->fail_on, sizeof h->fail_on);
    str_at(s, "policy", h->policy, sizeof h->policy);
    h->n = (int)peat_nightly_json_num(s, "n"),
    h->planned = (int)peat_nightly_json_num(s, "planned");
    *i = (int)peat_nightly_json_num(s, "i");
    if (h->n < 1 || *i < 0 || *i >= h->n || h->planned < 0 || h->planned > PEAT_CI_MAX_ITEMS)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: a damaged shard header", path);
    return PEAT_OK;
}

static peat_status head_same(const shard_head *a, const shard_head *b, const char *pa,
                             const char *pb)
{
    const char *what = strcmp(a->version, b->version)   ? "peat version"
                       : strcmp(a->suite, b->suite)     ? "suite"
                       : a->n != b->n                   ? "shard count"
                       : a->planned != b->planned       ? "number of items"
                       : strcmp(a->policy, b->policy)   ? "policy"
                       : strcmp(a->fail_on, b->fail_on) ? "fail_on"
                                                        : NULL;
    if (!what) return PEAT_OK;
    return PEAT_ERROR(PEAT_ERR_INVAL,
                      "mismatched shards: %s and %s differ in %s (%s %s, %d of %d items vs %s %s, "
                      "%d of %d)",
                      pa, pb, what, a->suite, a->version, a->n, a->planned, b->suite, b->version,
                      b->n, b->planned);
}

/* The shard's items into their places of the plan (filled[id] = 1). */
static peat_status shard_take(const peat_json *j, const char *out, const char *dir,
                              peat_ci_result *res, unsigned char *filled, double *slowest)
{
    char prefix[1000];
    size_t lo = strlen(out);
    /* item folders relative to OUT: a shard inside OUT is "shard-i-of-N/", another its path */
    if (!strncmp(dir, out, lo) && dir[lo] == '/')
        snprintf(prefix, sizeof prefix, "%s/", dir + lo + 1);
    else
        snprintf(prefix, sizeof prefix, "%s/", dir);
    const peat_json *ids = peat_nightly_json_path(j, "shard.ids"),
                    *items = peat_nightly_json_get(j, "items");
    if (!ids || !items || ids->kind != PEAT_JSON_ARRAY || items->kind != PEAT_JSON_ARRAY ||
        ids->n != items->n)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s/ci.json: items and ids do not match", dir);
    for (int k = 0; k < ids->n; k++) {
        int id = (int)ids->items[k].num;
        if (id < 0 || id >= res->n_planned)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s/ci.json: item #%d outside the plan", dir, id);
        item_from_json(&items->items[k], prefix, &res->items[id]);
        filled[id] = 1;
    }
    double s = peat_nightly_json_num(j, "seconds");
    if (s > *slowest) *slowest = s;
    return PEAT_OK;
}

/* One line naming every shard that left items unfilled, with them. */
static peat_status missing_named(const peat_ci_result *res, const unsigned char *filled, int n,
                                 const char *out)
{
    char msg[1200] = "";
    for (int k = 0; k < n; k++) {
        char items[400] = "";
        int lack = 0;
        for (int id = k; id < res->n_planned; id += n) {
            if (filled[id]) continue;
            size_t l = strlen(items);
            if (lack++ < 6)
                snprintf(items + l, sizeof items - l, "%s#%d %s %s %s", lack > 1 ? ", " : "", id,
                         res->items[id].kernel, res->items[id].flow, res->items[id].backend);
        }
        if (!lack) continue;
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof msg - l, "%sshard %d/%d missing (%d item%s: %s%s)", l ? "; " : "",
                 k, n, lack, lack > 1 ? "s" : "", items, lack > 6 ? ", ..." : "");
    }
    if (!msg[0]) return PEAT_OK;
    return PEAT_ERROR(PEAT_ERR_NOTFOUND,
                      "merge of %s: %s: run `peat ci SUITE --shard I/N --out %s --resume` for "
                      "each, then merge again (nothing written)",
                      out, msg, out);
}

static int shard_dirs(const char *out, glob_t *g)
{
    char pat[700];
    snprintf(pat, sizeof pat, "%s/shard-*-of-*/ci.json", out);
    memset(g, 0, sizeof *g);
    return glob(pat, 0, NULL, g) == 0 ? (int)g->gl_pathc : 0;
}

/* The suite planned again (its policy for the report, its items' names for missing shards);
 * a suite file changed since the shards ran is refused. */
static peat_status suite_reload(const shard_head *h, peat_ci_result *res)
{
    peat_status st = peat_nightly_ci_plan(h->suite_file, h->policy[0] ? h->policy : NULL, res);
    if (st != PEAT_OK)
        return PEAT_ERROR(st, "merge needs the suite file the shards ran (%s): %s", h->suite_file,
                          peat_error_last());
    if (res->n_items != h->planned)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "%s plans %d items, the shards %d: the suite changed since they ran",
                          h->suite_file, res->n_items, h->planned);
    snprintf(res->policy_file, sizeof res->policy_file, "%s", h->policy);
    return PEAT_OK;
}

static peat_status merge_files(const char *out, char **paths, int n, peat_ci_result *res)
{
    shard_head first, h;
    unsigned char filled[PEAT_CI_MAX_ITEMS] = {0};
    double slowest = 0;
    peat_status st = PEAT_OK;
    for (int k = 0; k < n && st == PEAT_OK; k++) {
        peat_json j;
        char json[820], dir[800];
        size_t l = strlen(paths[k]);
        int is_json = l > 8 && !strcmp(paths[k] + l - 8, "/ci.json");
        snprintf(dir, sizeof dir, "%.*s", (int)(is_json ? l - 8 : l), paths[k]);
        snprintf(json, sizeof json, "%s/ci.json", dir);
        PEAT_TRY(peat_nightly_json_load(json, &j));
        int i;
        st = head_read(&j, json, k ? &h : &first, &i);
        if (st == PEAT_OK && k) st = head_same(&first, &h, paths[0], paths[k]);
        if (st == PEAT_OK && !k) {
            st = suite_reload(&first, res);
            res->n_planned = res->n_items = first.planned;
        }
        if (st == PEAT_OK) st = shard_take(&j, out, dir, res, filled, &slowest);
        peat_nightly_json_free(&j);
    }
    if (st == PEAT_OK) st = missing_named(res, filled, first.n, out);
    res->seconds = slowest;
    return st;
}

peat_status peat_nightly_ci_merge(const char *out, const char *const *shards, int n,
                                  const char *baseline, int update_baseline, peat_ci_result *res)
{
    memset(res, 0, sizeof *res);
    PEAT_TRY(peat_nightly_ci_baseline_check(baseline, update_baseline));
    snprintf(res->out_dir, sizeof res->out_dir, "%s", out);
    glob_t g = {0};
    char **paths = (char **)shards;
    if (n == 0) n = shard_dirs(out, &g), paths = g.gl_pathv;
    peat_status st =
        n ? PEAT_OK
          : PEAT_ERROR(PEAT_ERR_NOTFOUND, "%s: no shard results (shard-I-of-N/ci.json)", out);
    if (st == PEAT_OK) st = merge_files(out, paths, n, res);
    globfree(&g);
    PEAT_TRY(st);
    static const char *const names[] = {"PASS", "WARN", "FAIL", "ERROR", "SKIP"};
    for (int i = 0; i < res->n_items; i++) {
        res->ids[i] = i;
        for (int s = 0; s < 5; s++) res->counts[s] += !strcmp(res->items[i].status, names[s]);
    }
    /* as `peat ci` ends: the reports, the baseline compared (and replaced), its exit status */
    return peat_nightly_ci_finish(res, baseline, update_baseline);
}

peat_status peat_nightly_ci_run_ranks(const peat_ci_opts *o, peat_ci_result *res)
{
    int size = peat_scale_mpi_size(), rank = peat_scale_mpi_rank();
    if (size <= 1 || o->shard) return peat_nightly_ci_run(o, res);
    if (!o->out_dir)
        return PEAT_ERROR(PEAT_ERR_INVAL, "peat ci under mpirun needs --out DIR (one for all "
                                          "ranks)");
    char spec[32];
    snprintf(spec, sizeof spec, "%d/%d", rank, size);
    /* checked before any rank runs (one line; the merge on rank 0 compares with the baseline) */
    PEAT_TRY(peat_nightly_ci_opts_check(o));
    peat_ci_opts mine = *o;
    mine.shard = spec;
    mine.quiet = 1;
    mine.baseline = NULL, mine.update_baseline = 0;
    peat_ci_result *part = malloc(sizeof *part);
    peat_status st = part ? peat_nightly_ci_run(&mine, part) : PEAT_ERROR(PEAT_ERR_NOMEM, "ci");
    if (st != PEAT_OK)
        fprintf(stderr, "peat: rank %d (shard %s) failed: %s\n", rank, spec, peat_error_last());
    double resumed = st == PEAT_OK ? part->n_resumed : 0;
    if (part) peat_nightly_ci_result_free(part);
    free(part);
    uint64_t failed = 0;
    if (peat_scale_mpi_status_all(st, &failed) != PEAT_OK)
        return PEAT_ERROR(PEAT_ERR_IO,
                          "ranks failed (mask 0x%llx): the others' items are in %s/shard-*; rerun "
                          "the same command with --resume (any rank count) to run only the items "
                          "not finished",
                          (unsigned long long)failed, o->out_dir);
    peat_scale_mpi_sum(&resumed, 1);
    memset(res, 0, sizeof *res);
    if (rank != 0) return PEAT_OK;
    PEAT_TRY(peat_nightly_ci_merge(o->out_dir, NULL, 0, o->baseline, o->update_baseline, res));
    res->n_resumed = (int)resumed;
    return PEAT_OK;
}
