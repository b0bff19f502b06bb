/* diff.c: compares two campaigns or two suite results and names each regression with its old and
 * new value (verdict, findings, signature, training, cost); thresholds come from the policy. */
#define _DEFAULT_SOURCE
#include "harness/nightly/diff.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void peat_nightly_diff_free(peat_diff *d)
{
    free(d->e);
    memset(d, 0, sizeof *d);
}

static peat_status add(peat_diff *d, const char *item, int regression, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static peat_status add(peat_diff *d, const char *item, int regression, const char *fmt, ...)
{
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 16;
        peat_diff_entry *e = realloc(d->e, (size_t)cap * sizeof *e);
        if (!e) return PEAT_ERROR(PEAT_ERR_NOMEM, "diff entries");
        d->e = e, d->cap = cap;
    }
    peat_diff_entry *e = &d->e[d->n++];
    snprintf(e->item, sizeof e->item, "%s", item);
    e->regression = regression;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->what, sizeof e->what, fmt, ap);
    va_end(ap);
    d->n_regressions += regression;
    return PEAT_OK;
}

static peat_status diff_two_campaigns(const peat_json *o, const peat_json *n,
                                      const peat_thresholds *th, peat_diff *d);

/* PASS < WARN < FAIL < anything else (ERROR: no verdict reached). */
static int verdict_rank(const char *v)
{
    static const char *const order[] = {"PASS", "WARN", "FAIL"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, order[i])) return i;
    return 3;
}

/* The finding of class cls in a signature.json's findings array (NULL if none). */
static const peat_json *finding_of(const peat_json *sig, const char *cls)
{
    const peat_json *fs = peat_nightly_json_get(sig, "findings");
    for (int i = 0; fs && fs->kind == PEAT_JSON_ARRAY && i < fs->n; i++)
        if (!strcmp(peat_nightly_json_str(&fs->items[i], "class", ""), cls)) return &fs->items[i];
    return NULL;
}

static const char *first_evidence(const peat_json *f)
{
    const peat_json *ev = peat_nightly_json_get(f, "evidence");
    return ev && ev->kind == PEAT_JSON_ARRAY && ev->n > 0 && ev->items[0].kind == PEAT_JSON_STRING
               ? ev->items[0].str
               : "";
}

/* Findings: a class new at WARN or FAIL is a regression; one that went away is an improvement. */
static peat_status diff_findings(const char *item, const peat_json *o, const peat_json *n,
                                 peat_diff *d)
{
    const peat_json *fs = peat_nightly_json_get(n, "findings");
    for (int i = 0; fs && fs->kind == PEAT_JSON_ARRAY && i < fs->n; i++) {
        const peat_json *f = &fs->items[i];
        const char *cls = peat_nightly_json_str(f, "class", "?"),
                   *acc = peat_nightly_json_str(f, "acceptance", "?");
        if (finding_of(o, cls) || verdict_rank(acc) == 0) continue;
        PEAT_TRY(add(d, item, 1, "new finding %s %s (%s): %s", cls,
                     peat_nightly_json_str(f, "params", ""), acc, first_evidence(f)));
    }
    fs = peat_nightly_json_get(o, "findings");
    for (int i = 0; fs && fs->kind == PEAT_JSON_ARRAY && i < fs->n; i++) {
        const char *cls = peat_nightly_json_str(&fs->items[i], "class", "?");
        if (!finding_of(n, cls) &&
            verdict_rank(peat_nightly_json_str(&fs->items[i], "acceptance", "")) > 0)
            PEAT_TRY(add(d, item, 0, "finding %s is gone", cls));
    }
    return PEAT_OK;
}

/* The candidate's signature: precision, error against the bound, non-finite values. */
static peat_status diff_signature(const char *item, const peat_json *o, const peat_json *n,
                                  const peat_thresholds *th, peat_diff *d)
{
    double ob = peat_nightly_json_num(o, "candidate.eff_bits"),
           nb = peat_nightly_json_num(n, "candidate.eff_bits");
    if (ob - nb > th->eff_bits_drop)
        PEAT_TRY(add(d, item, 1, "effective bits %.1f -> %.1f (lost %.1f; threshold %g)", ob, nb,
                     ob - nb, th->eff_bits_drop));
    else if (nb - ob > th->eff_bits_drop)
        PEAT_TRY(add(d, item, 0, "effective bits %.1f -> %.1f (better)", ob, nb));
    double om = peat_nightly_json_num(o, "candidate.max_norm"),
           nm = peat_nightly_json_num(n, "candidate.max_norm");
    if (nm > th->max_norm_floor && nm > om * th->max_norm_ratio)
        PEAT_TRY(add(d, item, 1, "max error/bound %.3g -> %.3g (x%.3g; threshold x%g above %g)", om,
                     nm, om > 0 ? nm / om : INFINITY, th->max_norm_ratio, th->max_norm_floor));
    double of = peat_nightly_json_num(o, "candidate.frac_over_bound"),
           nf = peat_nightly_json_num(n, "candidate.frac_over_bound");
    if (nf - of > th->over_bound_increase)
        PEAT_TRY(add(d, item, 1, "elements over the bound %.3g%% -> %.3g%% (threshold +%g%%)",
                     100 * of, 100 * nf, 100 * th->over_bound_increase));
    double onf =
        peat_nightly_json_num(o, "candidate.n_nan") + peat_nightly_json_num(o, "candidate.n_inf");
    double nnf =
        peat_nightly_json_num(n, "candidate.n_nan") + peat_nightly_json_num(n, "candidate.n_inf");
    if (nnf > 0 && !(onf > 0))
        PEAT_TRY(add(d, item, 1, "NaN/Inf introduced: 0 -> %.0f elements", nnf));
    double ok = peat_nightly_json_num(o, "kernel_failures"),
           nk = peat_nightly_json_num(n, "kernel_failures");
    if (nk > 0 && !(ok > 0))
        PEAT_TRY(add(d, item, 1, "the kernel failed (crash, hang or error) on %.0f calls, before 0",
                     nk));
    return PEAT_OK;
}

/* Cost: the campaign's total time. */
static peat_status diff_cost(const char *item, const peat_json *o, const peat_json *n,
                             const peat_thresholds *th, peat_diff *d)
{
    double ot = peat_nightly_json_num(o, "timing_s.total"),
           nt = peat_nightly_json_num(n, "timing_s.total");
    if (nt > ot * th->time_ratio && nt - ot >= th->time_min_s)
        PEAT_TRY(add(d, item, 1,
                     "cost: total time %.1f s -> %.1f s (x%.2g; threshold x%g and +%g s)", ot, nt,
                     nt / ot, th->time_ratio, th->time_min_s));
    return PEAT_OK;
}

/* Training (held-out loss and accuracy after the flow) and cost (total time). Training is
 * compared only between runs of the same seed: across seeds a short flow's held-out accuracy
 * moves by 0.1 (measured: 0.80, 0.68, 0.72 for seeds 1-3), which says nothing about the kernel. */
static peat_status diff_training_cost(const char *item, const peat_json *o, const peat_json *n,
                                      const peat_thresholds *th, peat_diff *d)
{
    if (peat_nightly_json_num(o, "seed") != peat_nightly_json_num(n, "seed"))
        return diff_cost(item, o, n, th, d);
    double ol = peat_nightly_json_num(o, "training.eval_loss"),
           nl = peat_nightly_json_num(n, "training.eval_loss");
    if (ol > 0 && nl > ol * (1 + th->loss_increase))
        PEAT_TRY(add(d, item, 1, "held-out loss %.4g -> %.4g (+%.1f%%; threshold +%g%%)", ol, nl,
                     100 * (nl / ol - 1), 100 * th->loss_increase));
    double oa = peat_nightly_json_num(o, "training.eval_accuracy"),
           na = peat_nightly_json_num(n, "training.eval_accuracy");
    if (oa - na > th->accuracy_drop)
        PEAT_TRY(add(d, item, 1, "held-out accuracy %.4g -> %.4g (threshold -%g)", oa, na,
                     th->accuracy_drop));
    return diff_cost(item, o, n, th, d);
}

peat_status peat_nightly_diff_campaigns(const char *item, const peat_json *o, const peat_json *n,
                                        const peat_thresholds *th, peat_diff *d)
{
    d->n_compared++;
    const char *ov = peat_nightly_json_str(o, "verdict", "?"),
               *nv = peat_nightly_json_str(n, "verdict", "?");
    if (verdict_rank(nv) > verdict_rank(ov))
        PEAT_TRY(add(d, item, 1, "verdict %s -> %s", ov, nv));
    else if (verdict_rank(nv) < verdict_rank(ov))
        PEAT_TRY(add(d, item, 0, "verdict %s -> %s (better)", ov, nv));
    double os = peat_nightly_json_num(o, "seed"), ns = peat_nightly_json_num(n, "seed");
    if (os != ns) PEAT_TRY(add(d, item, 0, "note: seeds differ (%.0f, %.0f)", os, ns));
    PEAT_TRY(diff_findings(item, o, n, d));
    PEAT_TRY(diff_signature(item, o, n, th, d));
    return diff_training_cost(item, o, n, th, d);
}

/* ---- inputs: a campaign or a suite result, as a directory or the file itself ---- */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Loads path as a suite result (*suite = 1, ci.json) or a campaign (signature.json); *base is
 * the folder item directories are relative to. */
static peat_status load_side(const char *path, peat_json *doc, int *suite, char *base, size_t n)
{
    char file[1024];
    if (is_dir(path)) {
        snprintf(base, n, "%s", path);
        snprintf(file, sizeof file, "%s/ci.json", path);
        if (!is_file(file)) snprintf(file, sizeof file, "%s/signature.json", path);
        if (!is_file(file))
            return PEAT_ERROR(PEAT_ERR_NOTFOUND,
                              "%s holds neither a suite result (ci.json) nor a campaign "
                              "(signature.json)",
                              path);
    } else {
        snprintf(file, sizeof file, "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(base, n, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    }
    PEAT_TRY(peat_nightly_json_load(file, doc));
    *suite = peat_nightly_json_get(doc, "items") != NULL;
    peat_status st = PEAT_OK;
    if (!*suite && !peat_nightly_json_get(doc, "verdict"))
        st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s is neither a PEAT suite result nor a signature.json",
                        file);
    /* a file of another shape is an input error, never a regression read from defaults */
    else
        st = *suite ? peat_nightly_diff_suite_check(doc, file)
                    : peat_nightly_diff_campaign_check(doc, file);
    if (st != PEAT_OK) peat_nightly_json_free(doc);
    return st;
}

static void item_key(const peat_json *it, char *key, size_t n)
{
    snprintf(key, n, "%s/%s/%s", peat_nightly_json_str(it, "kernel", "?"),
             peat_nightly_json_str(it, "flow", "?"), peat_nightly_json_str(it, "backend", "?"));
}

static const peat_json *item_find(const peat_json *items, const char *key)
{
    char k[128];
    for (int i = 0; i < items->n; i++) {
        item_key(&items->items[i], k, sizeof k);
        if (!strcmp(k, key)) return &items->items[i];
    }
    return NULL;
}

/* One suite item present on both sides: its campaigns if both reached a verdict. */
static peat_status diff_item(const char *key, const peat_json *oi, const char *obase,
                             const peat_json *ni, const char *nbase, const peat_thresholds *th,
                             peat_diff *d)
{
    const char *os = peat_nightly_json_str(oi, "status", "?"),
               *ns = peat_nightly_json_str(ni, "status", "?");
    if (verdict_rank(ns) == 3 && verdict_rank(os) < 3)
        return add(d, key, 1, "no verdict any more: %s (%s)", ns,
                   peat_nightly_json_str(ni, "error", ""));
    if (verdict_rank(ns) == 3 || verdict_rank(os) == 3) {
        if (verdict_rank(os) == 3 && verdict_rank(ns) < 3)
            return add(d, key, 0, "reaches a verdict again (was %s)", os);
        d->n_compared++;
        return PEAT_OK;
    }
    char of[1200], nf[1200];
    snprintf(of, sizeof of, "%s/%s/signature.json", obase, peat_nightly_json_str(oi, "dir", ""));
    snprintf(nf, sizeof nf, "%s/%s/signature.json", nbase, peat_nightly_json_str(ni, "dir", ""));
    peat_json o, n;
    memset(&n, 0, sizeof n);
    PEAT_TRY(peat_nightly_json_load(of, &o));
    peat_status st = peat_nightly_diff_campaign_check(&o, of);
    if (st == PEAT_OK) st = peat_nightly_json_load(nf, &n);
    if (st == PEAT_OK) st = peat_nightly_diff_campaign_check(&n, nf);
    if (st == PEAT_OK) st = peat_nightly_diff_campaigns(key, &o, &n, th, d);
    peat_nightly_json_free(&o);
    peat_nightly_json_free(&n);
    return st;
}

static peat_status diff_suites(const peat_json *o, const char *obase, const peat_json *n,
                               const char *nbase, const peat_thresholds *th, peat_diff *d)
{
    const peat_json *oi = peat_nightly_json_get(o, "items"),
                    *ni = peat_nightly_json_get(n, "items");
    if (oi->kind != PEAT_JSON_ARRAY || ni->kind != PEAT_JSON_ARRAY)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "suite result: \"items\" is not an array");
    char key[128];
    for (int i = 0; i < ni->n; i++) {
        item_key(&ni->items[i], key, sizeof key);
        const peat_json *old = item_find(oi, key);
        if (!old)
            PEAT_TRY(add(d, key, 0, "new item (%s)",
                         peat_nightly_json_str(&ni->items[i], "status", "?")));
        else
            PEAT_TRY(diff_item(key, old, obase, &ni->items[i], nbase, th, d));
    }
    for (int i = 0; i < oi->n; i++) {
        item_key(&oi->items[i], key, sizeof key);
        if (!item_find(ni, key)) PEAT_TRY(add(d, key, 0, "item no longer in the suite"));
    }
    return PEAT_OK;
}

peat_status peat_nightly_diff_paths(const char *old_path, const char *new_path,
                                    const peat_thresholds *th, peat_diff *d)
{
    peat_json o, n;
    int os, ns;
    char obase[1024], nbase[1024];
    PEAT_TRY(load_side(old_path, &o, &os, obase, sizeof obase));
    peat_status st = load_side(new_path, &n, &ns, nbase, sizeof nbase);
    if (st != PEAT_OK) {
        peat_nightly_json_free(&o);
        return st;
    }
    if (os != ns)
        st = PEAT_ERROR(PEAT_ERR_INVAL,
                        "cannot compare a suite result with a single campaign (%s, %s)", old_path,
                        new_path);
    else if (os)
        st = diff_suites(&o, obase, &n, nbase, th, d);
    else
        st = diff_two_campaigns(&o, &n, th, d);
    peat_nightly_json_free(&o);
    peat_nightly_json_free(&n);
    return st;
}

/* Two single campaigns; when they ran different kernels, flows or backends every line names
 * both ("gemm_bf16/mlp/cpu -> gemm_new/mlp/cpu") and a note says what differs. */
static peat_status diff_two_campaigns(const peat_json *o, const peat_json *n,
                                      const peat_thresholds *th, peat_diff *d)
{
    char ok[128], nk[128], key[260];
    snprintf(ok, sizeof ok, "%s/%s/%s", peat_nightly_json_str(o, "kernel", "?"),
             peat_nightly_json_str(o, "flow", "?"), peat_nightly_json_str(o, "backend", "?"));
    snprintf(nk, sizeof nk, "%s/%s/%s", peat_nightly_json_str(n, "kernel", "?"),
             peat_nightly_json_str(n, "flow", "?"), peat_nightly_json_str(n, "backend", "?"));
    if (!strcmp(ok, nk)) return peat_nightly_diff_campaigns(nk, o, n, th, d);
    snprintf(key, sizeof key, "%s -> %s", ok, nk);
    static const char *const parts[] = {"kernel", "flow", "backend"};
    for (int i = 0; i < 3; i++) {
        const char *a = peat_nightly_json_str(o, parts[i], "?"),
                   *b = peat_nightly_json_str(n, parts[i], "?");
        if (strcmp(a, b))
            PEAT_TRY(add(d, key, 0, "note: different %ss compared (%s, %s)", parts[i], a, b));
    }
    return peat_nightly_diff_campaigns(key, o, n, th, d);
}

void peat_nightly_diff_print(FILE *f, const peat_diff *d)
{
    for (int i = 0; i < d->n; i++)
        fprintf(f, "%-10s %s: %s\n", d->e[i].regression ? "REGRESSION" : "changed", d->e[i].item,
                d->e[i].what);
    if (d->n_regressions)
        fprintf(f, "%d regression%s in %d campaign%s compared\n", d->n_regressions,
                d->n_regressions == 1 ? "" : "s", d->n_compared, d->n_compared == 1 ? "" : "s");
    else
        fprintf(f, "no regressions (%d campaign%s compared)\n", d->n_compared,
                d->n_compared == 1 ? "" : "s");
}
