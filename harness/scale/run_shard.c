/* run_shard.c: the files of `peat run --shard I/N` and their checks before `peat merge`
 * (run_shard.h; docs/scale-out.md). */
#define _DEFAULT_SOURCE
#include "harness/scale/run_shard.h"

#include "peat/plugin.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC  "PEAT-RUN-SHARD"
#define FORMAT 2

void peat_scale_run_shard_path(const char *dir, peat_scale_shard sh, char *buf, size_t n)
{
    char name[64];
    peat_scale_shard_name("run-shard-", sh, ".bin", name, sizeof name);
    snprintf(buf, n, "%s/%s", dir, name);
}

static void head_pack(peat_scale_pack *p, const peat_scale_run_shard *h)
{
    int32_t v[4] = {FORMAT, h->sh.i, h->sh.n, h->n_runs}, ns = h->n_skipped;
    peat_scale_pack_put_str(p, MAGIC);
    peat_scale_pack_put(p, v, sizeof v);
    peat_scale_pack_put_str(p, PEAT_VERSION_STRING);
    peat_scale_pack_put(p, &h->seed, sizeof h->seed);
    peat_scale_pack_put_str(p, h->kernel);
    peat_scale_pack_put_str(p, h->flow);
    peat_scale_pack_put_str(p, h->line);
    peat_scale_pack_put_str(p, h->argv);
    for (int r = 0; r < h->n_runs; r++) peat_scale_pack_put_str(p, h->runs[r]);
    peat_scale_pack_put(p, &ns, sizeof ns);
    for (int k = 0; k < ns; k++) {
        peat_scale_pack_put_str(p, h->skip_stage[k]);
        peat_scale_pack_put_str(p, h->skip_why[k]);
    }
}

static void copy_str(peat_scale_pack *p, char *dst, size_t n)
{
    snprintf(dst, n, "%s", peat_scale_pack_get_str(p));
}

/* The header of p (a whole file) into h; p->at left at the body. */
static peat_status head_unpack(peat_scale_pack *p, peat_scale_run_shard *h)
{
    int32_t v[4] = {0}, ns = 0;
    int magic = !strcmp(peat_scale_pack_get_str(p), MAGIC);
    peat_scale_pack_get(p, v, sizeof v);
    if (p->err || !magic || v[0] != FORMAT)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not a `peat run --shard` file of this layout",
                          h->path);
    h->sh.i = v[1], h->sh.n = v[2], h->n_runs = v[3];
    copy_str(p, h->version, sizeof h->version);
    peat_scale_pack_get(p, &h->seed, sizeof h->seed);
    copy_str(p, h->kernel, sizeof h->kernel);
    copy_str(p, h->flow, sizeof h->flow);
    copy_str(p, h->line, sizeof h->line);
    copy_str(p, h->argv, sizeof h->argv);
    if (h->n_runs < 1 || h->n_runs > PEAT_RUN_SHARD_MAX_RUNS) p->err = 1;
    for (int r = 0; !p->err && r < h->n_runs; r++) copy_str(p, h->runs[r], sizeof h->runs[r]);
    peat_scale_pack_get(p, &ns, sizeof ns);
    if (ns < 0 || ns > 4) p->err = 1;
    for (int k = 0; !p->err && k < ns; k++) {
        copy_str(p, h->skip_stage[k], sizeof h->skip_stage[k]);
        copy_str(p, h->skip_why[k], sizeof h->skip_why[k]);
    }
    h->n_skipped = p->err ? 0 : ns;
    if (p->err || h->sh.n < 2 || h->sh.i < 0 || h->sh.i >= h->sh.n)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is cut short or damaged", h->path);
    return PEAT_OK;
}

peat_status peat_scale_run_shard_write(const char *dir, const peat_scale_run_shard *h,
                                       const peat_scale_pack *body)
{
    char path[700], tmp[720];
    peat_scale_run_shard_path(dir, h->sh, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    peat_scale_pack p = {0};
    head_pack(&p, h);
    peat_scale_pack_put(&p, body->b, body->n);
    if (p.err) {
        peat_scale_pack_free(&p);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "%s", path);
    }
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(p.b, 1, p.n, f) == p.n;
    ok = f && fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
    if (f && fclose(f) != 0) ok = 0;
    peat_scale_pack_free(&p);
    if (!ok || rename(tmp, path) != 0) {
        peat_status st = PEAT_ERROR(PEAT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return st;
    }
    return PEAT_OK;
}

static peat_status shard_read(const char *path, peat_scale_run_shard *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->path, sizeof h->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    peat_scale_pack *p = &h->body;
    char buf[1 << 16];
    for (size_t k; (k = fread(buf, 1, sizeof buf, f)) > 0;) peat_scale_pack_put(p, buf, k);
    int bad = ferror(f) || p->err;
    fclose(f);
    if (bad) return PEAT_ERROR(PEAT_ERR_IO, "cannot read %s", path);
    return head_unpack(p, h);
}

void peat_scale_run_shards_free(peat_scale_run_shard *s, int n)
{
    for (int i = 0; s && i < n; i++) peat_scale_pack_free(&s[i].body);
    free(s);
}

/* Why b is not a shard of a's campaign ("" when it is one). */
static void mismatch(const peat_scale_run_shard *a, const peat_scale_run_shard *b, char *why,
                     size_t n)
{
    why[0] = 0;
    if (b->sh.n != a->sh.n)
        snprintf(why, n, "a shard of %d, not %d", b->sh.n, a->sh.n);
    else if (strcmp(b->version, a->version))
        snprintf(why, n, "peat %s, not %s", b->version, a->version);
    else if (b->seed != a->seed)
        snprintf(why, n, "seed %llu, not %llu", (unsigned long long)b->seed,
                 (unsigned long long)a->seed);
    else if (strcmp(b->kernel, a->kernel) || strcmp(b->flow, a->flow))
        snprintf(why, n, "kernel %s on flow %s, not %s on %s", b->kernel, b->flow, a->kernel,
                 a->flow);
    else if (strcmp(b->line, a->line))
        snprintf(why, n, "options '%.300s', not '%.300s'", b->line, a->line);
}

/* The runs of shard i of n (#i, #i+n, ...; the golden run on shard 0), named. */
static void runs_of(const peat_scale_run_shard *s, int i, char *out, size_t n)
{
    out[0] = 0;
    for (int r = 0; r < s->n_runs; r++)
        if ((r == 0 && i == 0) || (r > 0 && peat_scale_ranks_owner(r, s->sh.n) == i))
            snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? ", " : "", s->runs[r]);
}

/* The paths given, or every run shard file in dir. */
static peat_status shard_paths(const char *dir, char *const *paths, int n_paths, glob_t *g)
{
    memset(g, 0, sizeof *g);
    if (n_paths > 0) {
        for (int i = 0; i < n_paths; i++)
            if (glob(paths[i], GLOB_NOCHECK | (i ? GLOB_APPEND : 0), NULL, g) != 0)
                return PEAT_ERROR(PEAT_ERR_NOMEM, "shard list");
        return PEAT_OK;
    }
    char pat[700];
    snprintf(pat, sizeof pat, "%s/run-shard-*-of-*.bin", dir);
    int rc = glob(pat, 0, NULL, g);
    return rc == 0 || rc == GLOB_NOMATCH ? PEAT_OK : PEAT_ERROR(PEAT_ERR_IO, "cannot list %s", dir);
}

/* Each file read into its place in by[0..N) (N from the first); the first that does not fit is
 * the error. */
static peat_status shards_place(const char *dir, glob_t *g, peat_scale_run_shard **by, int *n)
{
    peat_scale_run_shard *all = NULL;
    int first = -1; /* the shard the others are compared with */
    for (size_t k = 0; k < g->gl_pathc; k++) {
        peat_scale_run_shard *h = malloc(sizeof *h);
        if (!h) return PEAT_ERROR(PEAT_ERR_NOMEM, "shard");
        peat_status st = shard_read(g->gl_pathv[k], h);
        if (st == PEAT_OK && !all) {
            *n = h->sh.n;
            all = *by = calloc((size_t)*n, sizeof *all);
            if (!all) st = PEAT_ERROR(PEAT_ERR_NOMEM, "shards");
        }
        char why[800] = "";
        if (st == PEAT_OK && first >= 0) mismatch(&all[first], h, why, sizeof why);
        if (st == PEAT_OK && !why[0] && all[h->sh.i].path[0])
            snprintf(why, sizeof why, "a second shard %d/%d (%s)", h->sh.i, h->sh.n,
                     all[h->sh.i].path);
        if (st == PEAT_OK && why[0])
            st = PEAT_ERROR(PEAT_ERR_INVAL,
                            "merge of %s: %s is not a shard of this campaign: %s (nothing "
                            "written)",
                            dir, h->path, why);
        if (st == PEAT_OK) {
            all[h->sh.i] = *h;
            if (first < 0) first = h->sh.i;
        } else
            peat_scale_pack_free(&h->body);
        free(h);
        PEAT_TRY(st);
    }
    return PEAT_OK;
}

peat_status peat_scale_run_shards_load(const char *dir, char *const *paths, int n_paths,
                                       peat_scale_run_shard **out, int *n)
{
    *out = NULL, *n = 0;
    glob_t g;
    peat_status st = shard_paths(dir, paths, n_paths, &g);
    if (st == PEAT_OK) st = shards_place(dir, &g, out, n);
    globfree(&g);
    peat_scale_run_shard *s = *out;
    for (int i = 0; st == PEAT_OK && i < *n; i++) {
        if (s[i].path[0]) continue;
        const peat_scale_run_shard *any = NULL;
        for (int j = 0; j < *n && !any; j++) any = s[j].path[0] ? &s[j] : NULL;
        char runs[600];
        runs_of(any, i, runs, sizeof runs);
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND,
                        "merge of %s: shard %d/%d missing (its runtime runs: %s): run it with "
                        "--shard %d/%d; then merge again (nothing written)",
                        dir, i, *n, runs[0] ? runs : "none", i, *n);
    }
    if (st != PEAT_OK) {
        peat_scale_run_shards_free(*out, *n);
        *out = NULL, *n = 0;
    }
    return st;
}
