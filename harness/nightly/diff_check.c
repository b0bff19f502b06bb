/* diff_check.c: what `peat diff` reads from a signature.json or a ci.json, checked before anything
 * is compared: a file of another shape (a field missing, of the wrong type, a verdict PEAT never
 * writes) is an input error in one line, never a "regression" read from defaults. */
#include "harness/nightly/diff.h"

#include <stdarg.h>
#include <string.h>

static const char *const kind_names[] = {"null",     "a boolean", "a number",
                                         "a string", "an array",  "an object"};

/* PEAT_ERR_FORMAT: "FILE is not a PEAT WHAT: DETAIL". */
static peat_status bad(const char *file, const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static peat_status bad(const char *file, const char *what, const char *fmt, ...)
{
    char detail[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not a PEAT %s: %s", file, what, detail);
}

/* Member key of v (an object) is of kind k (null also allowed when nullable). */
static peat_status member(const char *file, const char *what, const peat_json *v, const char *at,
                          const char *key, peat_json_kind k, int nullable)
{
    const peat_json *m = peat_nightly_json_get(v, key);
    if (!m) return bad(file, what, "%s%s\"%s\" is missing", at, at[0] ? " " : "", key);
    if (m->kind == k || (nullable && m->kind == PEAT_JSON_NULL)) return PEAT_OK;
    return bad(file, what, "%s%s\"%s\" is %s, not %s", at, at[0] ? " " : "", key,
               kind_names[m->kind], kind_names[k]);
}

/* Member key of v is a string among names (n of them). */
static peat_status one_of(const char *file, const char *what, const peat_json *v, const char *at,
                          const char *key, const char *const *names, int n)
{
    PEAT_TRY(member(file, what, v, at, key, PEAT_JSON_STRING, 0));
    const char *s = peat_nightly_json_get(v, key)->str;
    char list[96] = "";
    for (int i = 0; i < n; i++) {
        if (!strcmp(s, names[i])) return PEAT_OK;
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", names[i]);
    }
    return bad(file, what, "%s%s\"%s\" is \"%.40s\", not one of %s", at, at[0] ? " " : "", key, s,
               list);
}

static const char *const verdicts[] = {"PASS", "WARN", "FAIL"};

static peat_status findings_check(const char *file, const peat_json *doc)
{
    static const char *const w = "signature.json";
    const peat_json *fs = peat_nightly_json_get(doc, "findings");
    for (int i = 0; i < fs->n; i++) {
        const peat_json *f = &fs->items[i];
        char at[48];
        snprintf(at, sizeof at, "findings[%d]", i);
        if (f->kind != PEAT_JSON_OBJECT)
            return bad(file, w, "%s is %s, not an object", at, kind_names[f->kind]);
        PEAT_TRY(member(file, w, f, at, "class", PEAT_JSON_STRING, 0));
        PEAT_TRY(one_of(file, w, f, at, "acceptance", verdicts, 3));
        if (peat_nightly_json_get(f, "params"))
            PEAT_TRY(member(file, w, f, at, "params", PEAT_JSON_STRING, 0));
        const peat_json *ev = peat_nightly_json_get(f, "evidence");
        if (ev) PEAT_TRY(member(file, w, f, at, "evidence", PEAT_JSON_ARRAY, 0));
        for (int k = 0; ev && k < ev->n; k++)
            if (ev->items[k].kind != PEAT_JSON_STRING)
                return bad(file, w, "%s evidence[%d] is %s, not a string", at, k,
                           kind_names[ev->items[k].kind]);
    }
    return PEAT_OK;
}

peat_status peat_nightly_diff_campaign_check(const peat_json *doc, const char *file)
{
    static const char *const w = "signature.json";
    if (doc->kind != PEAT_JSON_OBJECT)
        return bad(file, w, "the document is %s, not an object", kind_names[doc->kind]);
    PEAT_TRY(one_of(file, w, doc, "", "verdict", verdicts, 3));
    static const char *const strs[] = {"kernel", "flow", "backend"};
    for (int i = 0; i < 3; i++) PEAT_TRY(member(file, w, doc, "", strs[i], PEAT_JSON_STRING, 0));
    PEAT_TRY(member(file, w, doc, "", "seed", PEAT_JSON_NUMBER, 0));
    PEAT_TRY(member(file, w, doc, "", "kernel_failures", PEAT_JSON_NUMBER, 0));
    PEAT_TRY(member(file, w, doc, "", "findings", PEAT_JSON_ARRAY, 0));
    PEAT_TRY(findings_check(file, doc));
    /* the numbers compared: null where the run had none (NaN), never another kind */
    static const struct {
        const char *obj;
        const char *keys[5];
    } nums[] = {{"candidate", {"eff_bits", "max_norm", "frac_over_bound", "n_nan", "n_inf"}},
                {"training", {"eval_loss", "eval_accuracy"}},
                {"timing_s", {"total"}}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        PEAT_TRY(member(file, w, doc, "", nums[i].obj, PEAT_JSON_OBJECT, 0));
        const peat_json *o = peat_nightly_json_get(doc, nums[i].obj);
        for (int k = 0; k < 5 && nums[i].keys[k]; k++)
            PEAT_TRY(member(file, w, o, nums[i].obj, nums[i].keys[k], PEAT_JSON_NUMBER, 1));
    }
    return PEAT_OK;
}

peat_status peat_nightly_diff_suite_check(const peat_json *doc, const char *file)
{
    static const char *const w = "suite result (ci.json)";
    static const char *const statuses[] = {"PASS", "WARN", "FAIL", "ERROR", "SKIP"};
    if (doc->kind != PEAT_JSON_OBJECT)
        return bad(file, w, "the document is %s, not an object", kind_names[doc->kind]);
    PEAT_TRY(member(file, w, doc, "", "items", PEAT_JSON_ARRAY, 0));
    const peat_json *items = peat_nightly_json_get(doc, "items");
    for (int i = 0; i < items->n; i++) {
        const peat_json *it = &items->items[i];
        char at[32];
        snprintf(at, sizeof at, "items[%d]", i);
        if (it->kind != PEAT_JSON_OBJECT)
            return bad(file, w, "%s is %s, not an object", at, kind_names[it->kind]);
        static const char *const strs[] = {"kernel", "flow", "backend", "dir"};
        for (int k = 0; k < 4; k++) PEAT_TRY(member(file, w, it, at, strs[k], PEAT_JSON_STRING, 0));
        PEAT_TRY(one_of(file, w, it, at, "status", statuses, 5));
        if (peat_nightly_json_get(it, "error"))
            PEAT_TRY(member(file, w, it, at, "error", PEAT_JSON_STRING, 0));
    }
    return PEAT_OK;
}
