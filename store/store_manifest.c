/* store_manifest.c: the finished campaign's manifest (/manifest): which stages ran and what each
 * wrote, so that a stage output lost to damage is an error, not an omission. */
#include "store/store_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_PATH PEAT_STORE_MANIFEST
#define MANIFEST_MAX  128    /* rows: stages x the tables each writes */
#define META_STAGE    "meta" /* the row that covers /meta's attributes */
#define META_OBJECT   "/meta"

/* the columns of peat_store_manifest_cols (store_schema.c) */
enum { M_STAGE, M_STATE, M_OBJECT, M_ROWS, M_DIGEST, M_NOTE, M_ENTRIES, M_NCOLS };
_Static_assert(M_NCOLS == sizeof peat_store_manifest_cols / sizeof peat_store_manifest_cols[0],
               "the manifest's columns");

/* The /meta attributes that say what the campaign is (kernel, flow, seed, command line, policy,
 * ...), field by field; hdf5_version is left out: the store fills it in on reading. */
static uint64_t meta_digest(const peat_store_meta *m)
{
    const char *strs[] = {m->flow, m->kernel, m->backend, m->device, m->peat_version, m->created,
                          m->argv, m->host,   m->clocks,  m->dtypes, m->build,        m->policy};
    uint64_t h = 0;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        h = peat_store_hash64(strs[i], strlen(strs[i]) + 1, h);
    int64_t nums[] = {(int64_t)m->seed, m->iters, m->exact_max_bytes, m->deflate_level,
                      m->min_saving_pct};
    return peat_store_hash64(nums, sizeof nums, h);
}

/* Rows of object that pass their checks (-1: no such object) and the digest of the first upto;
 * "/meta" is one row, its attributes' digest. */
static peat_status object_rows(peat_store_t *s, const char *object, int64_t upto, int64_t *rows,
                               uint64_t *digest)
{
    if (!strcmp(object, META_OBJECT)) {
        *rows = 1, *digest = meta_digest(&s->meta);
        return PEAT_OK;
    }
    for (int t = 0; t < STORE_T_COUNT; t++) {
        if (strcmp(object, peat_store_table_path(t)) != 0) continue;
        const store_vec *v = &s->rows[t];
        *rows = v->n;
        *digest = 0;
        for (int64_t i = 0; i < v->n && i < upto; i++) {
            uint64_t c;
            memcpy(&c, (const char *)v->data + (size_t)(i + 1) * v->elem - 8, 8);
            *digest = peat_store_hash64(&c, 8, *digest);
        }
        return PEAT_OK;
    }
    if (!peat_store_table_exists(s, object)) {
        *rows = -1, *digest = 0;
        return PEAT_OK;
    }
    return peat_store_table_scan(s, object, upto, rows, digest);
}

typedef struct {
    char stage[32], state[16], object[64], note[128];
    int64_t rows;
    uint64_t digest;
} manifest_row;

/* One row per table a stage wrote (one without a table for a stage that wrote none). */
static peat_status stage_rows(peat_store_t *s, const peat_store_stage *st, manifest_row *r, int *m)
{
    const char *p = st->skipped ? "" : (st->objects ? st->objects : "");
    int first = *m;
    do {
        p += strspn(p, " ");
        size_t len = strcspn(p, " ");
        if (*m >= MANIFEST_MAX || len >= sizeof r->object)
            return PEAT_ERROR(PEAT_ERR_INVAL, "manifest: too many stage outputs, or a long name");
        manifest_row *x = &r[(*m)++];
        memset(x, 0, sizeof *x);
        snprintf(x->stage, sizeof x->stage, "%s", st->name);
        snprintf(x->state, sizeof x->state, "%s", st->skipped ? "skipped" : "done");
        snprintf(x->note, sizeof x->note, "%s", st->skipped ? st->skipped : "");
        memcpy(x->object, p, len);
        if (len) PEAT_TRY(object_rows(s, x->object, INT64_MAX, &x->rows, &x->digest));
        if (x->rows < 0) x->rows = 0; /* a table its stage had nothing for */
        p += len;
        /* the stage's own row stands for it when it wrote no table; otherwise one per table */
        if (!len && *m - 1 > first) (*m)--;
    } while (*p);
    return PEAT_OK;
}

static peat_status manifest_write_impl(peat_store_t *s, const peat_store_stage *stages, int n)
{
    PEAT_TRY(peat_store_check_writable(s));
    peat_store_table_t *t = NULL;
    PEAT_TRY(peat_store_table_open(s, MANIFEST_PATH, peat_store_manifest_cols, M_NCOLS, &t));
    peat_status st = PEAT_OK;
    manifest_row *r = NULL;
    peat_store_value *v = NULL;
    int m = 0;
    if (peat_store_table_rows(t) > 0) goto done; /* a resumed commit: the first one stands */
    r = calloc(MANIFEST_MAX, sizeof *r);
    v = calloc((size_t)MANIFEST_MAX * M_NCOLS, sizeof *v);
    if (!r || !v) st = PEAT_ERROR(PEAT_ERR_NOMEM, "manifest");
    for (int i = 0; i < n && st == PEAT_OK; i++) st = stage_rows(s, &stages[i], r, &m);
    /* the campaign's identity: an edited kernel, seed or command line is damage too */
    static const peat_store_stage meta = {META_STAGE, META_OBJECT, NULL};
    if (st == PEAT_OK) st = stage_rows(s, &meta, r, &m);
    for (int i = 0; i < m && st == PEAT_OK; i++) {
        peat_store_value *x = v + (size_t)i * M_NCOLS;
        x[M_STAGE].s = r[i].stage, x[M_STATE].s = r[i].state, x[M_OBJECT].s = r[i].object;
        x[M_NOTE].s = r[i].note;
        x[M_ROWS].i = r[i].rows, x[M_DIGEST].i = (int64_t)r[i].digest, x[M_ENTRIES].i = m;
    }
    /* one append, one flush: a kill tears it at most, and a torn manifest fails `entries` */
    if (st == PEAT_OK) st = peat_store_table_append(t, v, m);
done:
    free(r);
    free(v);
    peat_store_table_close(t);
    return st;
}

peat_status peat_store_manifest_write(peat_store_t *s, const peat_store_stage *stages, int n)
{
    if (!s || (!stages && n > 0) || n < 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_manifest_write: bad arguments");
    peat_status st;
    STORE_GUARDED(st, manifest_write_impl(s, stages, n));
    return st;
}

/* ---- checking a file against its manifest ---- */

void peat_store_report(peat_store_report_fn fn, void *user, peat_store_check *out, const char *fmt,
                       ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    out->problems++;
    if (fn) fn(user, line);
}

/* One manifest row: the table it names is there, with at least its rows, and those unchanged. */
static peat_status row_check(peat_store_t *s, const peat_store_table_t *t, int64_t i,
                             peat_store_report_fn fn, void *user, peat_store_check *out)
{
    peat_store_value v[M_NCOLS];
    for (int c = 0; c < M_NCOLS; c++) PEAT_TRY(peat_store_table_get(t, i, c, &v[c]));
    if (strcmp(v[M_STATE].s, "done") != 0 || !v[M_OBJECT].s[0] || v[M_ROWS].i <= 0) return PEAT_OK;
    out->tables += strcmp(v[M_OBJECT].s, META_OBJECT) != 0; /* tables: /meta is attributes */
    int64_t have = -1;
    uint64_t digest = 0;
    peat_status st = object_rows(s, v[M_OBJECT].s, v[M_ROWS].i, &have, &digest);
    if (st == PEAT_ERR_NOMEM) return st;
    if (st != PEAT_OK)
        peat_store_report(fn, user, out, "stage %s: %s is unreadable (%s)", v[M_STAGE].s,
                          v[M_OBJECT].s, peat_error_last());
    else if (have < 0)
        peat_store_report(fn, user, out, "stage %s: %s is missing (its manifest lists %lld rows)",
                          v[M_STAGE].s, v[M_OBJECT].s, (long long)v[M_ROWS].i);
    else if (have < v[M_ROWS].i)
        peat_store_report(fn, user, out,
                          "stage %s: %s holds %lld of the %lld rows its manifest lists",
                          v[M_STAGE].s, v[M_OBJECT].s, (long long)have, (long long)v[M_ROWS].i);
    else if (digest != (uint64_t)v[M_DIGEST].i && !strcmp(v[M_OBJECT].s, META_OBJECT))
        peat_store_report(
            fn, user, out,
            "/meta: the campaign's attributes (kernel, flow, seed, command line, ...) "
            "differ from its manifest (edited)");
    else if (digest != (uint64_t)v[M_DIGEST].i)
        peat_store_report(fn, user, out,
                          "stage %s: the rows of %s differ from its manifest (digest)",
                          v[M_STAGE].s, v[M_OBJECT].s);
    return PEAT_OK;
}

/* Stages listed (a stage's rows are consecutive), of them skipped, and their names in order. */
static void stages_count(const peat_store_table_t *t, peat_store_check *out)
{
    peat_store_value a, b, state, note;
    size_t n = sizeof out->stage_list, len = 0;
    for (int64_t i = 0; i < peat_store_table_rows(t); i++) {
        if (peat_store_table_get(t, i, M_STAGE, &a) != PEAT_OK ||
            peat_store_table_get(t, i, M_STATE, &state) != PEAT_OK ||
            peat_store_table_get(t, i, M_NOTE, &note) != PEAT_OK)
            return;
        if (i > 0 && peat_store_table_get(t, i - 1, M_STAGE, &b) == PEAT_OK && !strcmp(a.s, b.s))
            continue;
        if (!strcmp(a.s, META_STAGE)) continue; /* not a stage: the attributes' row */
        out->stages++;
        int skipped = !strcmp(state.s, "skipped");
        out->skipped += skipped;
        if (len < n)
            len += (size_t)snprintf(out->stage_list + len, n - len, "%s%s%s%s%s", i ? ", " : "",
                                    a.s, skipped ? " (skipped: " : "", skipped ? note.s : "",
                                    skipped ? ")" : "");
    }
}

static peat_status check_impl(peat_store_t *s, peat_store_report_fn fn, void *user,
                              peat_store_check *out)
{
    if (!peat_store_table_present(s, MANIFEST_PATH)) {
        /* PEAT names a campaign file campaign.h5 only once its commit wrote the manifest */
        const char *base = strrchr(s->path, '/');
        if (!s->crashed && !strcmp(base ? base + 1 : s->path, "campaign.h5"))
            peat_store_report(
                fn, user, out,
                "/manifest is missing, though the file is named as a finished campaign "
                "(campaign.h5): deleted, or damaged");
        return PEAT_OK;
    }
    out->has_manifest = 1;
    peat_store_table_t *t = NULL;
    peat_status st = peat_store_table_open(s, MANIFEST_PATH, peat_store_manifest_cols, M_NCOLS, &t);
    if (st != PEAT_OK) {
        peat_store_report(fn, user, out, "/manifest is unreadable (%s)", peat_error_last());
        return st == PEAT_ERR_NOMEM ? st : PEAT_OK;
    }
    int64_t n = peat_store_table_rows(t);
    peat_store_value entries = {.i = 0};
    if (n > 0) peat_store_table_get(t, 0, M_ENTRIES, &entries);
    if (n == 0)
        peat_store_report(fn, user, out, "/manifest: none of its rows passes its check (damaged)");
    else if (entries.i != n)
        peat_store_report(fn, user, out,
                          "/manifest: %lld of its %lld rows pass their checks (damaged)",
                          (long long)n, (long long)entries.i);
    stages_count(t, out);
    for (int64_t i = 0; i < n && st == PEAT_OK; i++) st = row_check(s, t, i, fn, user, out);
    /* a finished campaign's writer closed it whole: rows of a record left behind are damage */
    if (st == PEAT_OK && !s->crashed && s->dropped > 0)
        peat_store_report(fn, user, out,
                          "%lld index rows after the last whole record fail their checks or their "
                          "data's hash (damaged)",
                          (long long)s->dropped);
    peat_store_table_close(t);
    return st;
}

peat_status peat_store_manifest_check(peat_store_t *s, peat_store_report_fn fn, void *user,
                                      peat_store_check *out)
{
    if (!s || !out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_manifest_check: bad arguments");
    memset(out, 0, sizeof *out);
    peat_status st;
    STORE_GUARDED(st, check_impl(s, fn, user, out));
    return st;
}
