/* test_ops.c: the op table (core/ops/table.c): every op kind has a descriptor with every trait,
 * its names round-trip, no module switches on op kinds, and the op of docs/ops.md's "Adding an
 * op" walkthrough (rmsnorm) lives only in its descriptor, its reference and candidate files and
 * the registration lines, not in any module that asks the table. */
#include <criterion/criterion.h>

#include "core/opdesc.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

Test(ops, every_op_has_every_trait)
{
    char buf[256];
    for (int k = 0; k < PEAT_OP_COUNT; k++) {
        peat_op_desc_missing((peat_op_kind)k, buf, sizeof buf);
        cr_expect_str_empty(buf, "op kind %d (%s) lacks: %s", k, peat_op_name((peat_op_kind)k),
                            buf);
    }
    /* the check itself: an op kind out of range has no descriptor */
    peat_op_desc_missing(PEAT_OP_COUNT, buf, sizeof buf);
    cr_assert_str_eq(buf, "descriptor", "an op kind past the table reads as missing");
}

Test(ops, names_and_aten_names_round_trip)
{
    for (int k = 0; k < PEAT_OP_COUNT; k++) {
        const char *name = peat_op_name((peat_op_kind)k);
        peat_op_kind back = PEAT_OP_COUNT;
        cr_assert_eq(peat_op_parse(name, &back), PEAT_OK, "%s does not parse", name);
        cr_assert_eq((int)back, k, "%s parses to %d, not %d", name, (int)back, k);
        const char *aten = peat_op_aten((peat_op_kind)k);
        cr_assert_not_null(aten, "%s has no aten list", name);
        /* comma-separated identifiers, no spaces, no empty entries */
        for (const char *c = aten; *c; c++)
            cr_assert(isalnum((unsigned char)*c) || *c == '_' ||
                          (*c == ',' && c != aten && c[1] && c[1] != ','),
                      "%s: malformed aten list '%s'", name, aten);
    }
    cr_assert_null(peat_op_aten(PEAT_OP_COUNT), "an op kind past the table has no aten list");
}

/* Reads a whole file (NULL if unreadable); the caller frees it. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s, "read %s", path);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Calls fn(relative path, text) for every .c, .h, .cu, .cl and .py file under dir. */
static void walk(const char *root, const char *dir, void (*fn)(const char *, const char *, void *),
                 void *ctx)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "cannot list %s", path);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char rel[1024], full[2048];
        snprintf(rel, sizeof rel, "%s/%s", dir, e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, rel);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            walk(root, rel, fn, ctx);
            continue;
        }
        if (!has_suffix(rel, ".c") && !has_suffix(rel, ".h") && !has_suffix(rel, ".cu") &&
            !has_suffix(rel, ".cl") && !has_suffix(rel, ".py"))
            continue;
        char *text = slurp(full);
        if (!text) continue;
        fn(rel, text, ctx);
        free(text);
    }
    closedir(d);
}

/* The modules that ask the op table: every folder of the design card but the op
 * implementations (core/ops/ descriptors, golden/ references, kernels/ candidates, the device
 * backends' kernels) and the flows' model code. */
static const char *const asking[] = {
    "analyzer", "detector", "predictor", "inject",
    "store",    "harness",  "python" /* last: see the walkthrough test */};

typedef struct hits {
    int n;
    char where[2048];
} hits;

static void note(hits *h, const char *rel)
{
    h->n++;
    size_t m = strlen(h->where);
    snprintf(h->where + m, sizeof h->where - m, " %s", rel);
}

static void find_switch(const char *rel, const char *text, void *ctx)
{
    if (strstr(text, "case PEAT_OP_")) note(ctx, rel);
}

Test(ops, no_module_switches_on_op_kinds)
{
    hits h = {0, ""};
    for (size_t i = 0; i < sizeof asking / sizeof asking[0]; i++)
        walk(PEAT_TEST_SOURCE_DIR, asking[i], find_switch, &h);
    /* nor the files of golden/, core/ and models/ that are not an op's own */
    static const char *const shared[] = {"golden/magnitude.c", "golden/golden.c",  "core/ops.c",
                                         "core/ops/kit.c",     "core/ops/table.c", "models/amp.c",
                                         "models/flow.c",      "models/layers.c"};
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", PEAT_TEST_SOURCE_DIR, shared[i]);
        char *text = slurp(full);
        cr_assert_not_null(text, "cannot read %s", full);
        find_switch(shared[i], text, &h);
        free(text);
    }
    cr_assert_eq(h.n, 0, "switch on op kinds instead of asking the op table in:%s", h.where);
}

static void find_rmsnorm(const char *rel, const char *text, void *ctx)
{
    for (const char *c = text; *c; c++)
        if (strncasecmp(c, "rmsnorm", 7) == 0 || strncasecmp(c, "rms_norm", 8) == 0) {
            note(ctx, rel);
            return;
        }
}

/* The walkthrough op added no line to any module that asks the table: the analyzer (bounds,
 * probes, experiments), detector, predictor, injection, store and harness learn it from
 * core/ops/rmsnorm.c alone. (The Python bridge's translation of an aten op's arguments is the
 * one thing an op adds there, once it has an aten op: docs/ops.md.) */
Test(ops, walkthrough_op_lives_in_its_own_files)
{
    hits h = {0, ""};
    for (size_t i = 0; i < sizeof asking / sizeof asking[0] - 1; i++)
        walk(PEAT_TEST_SOURCE_DIR, asking[i], find_rmsnorm, &h);
    cr_assert_eq(h.n, 0, "rmsnorm named outside its own files, in:%s", h.where);
    /* and its own files exist and say what they are */
    static const char *const own[] = {"core/ops/rmsnorm.c", "golden/rmsnorm.c",
                                      "kernels/rmsnorm.c"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", PEAT_TEST_SOURCE_DIR, own[i]);
        char *text = slurp(full);
        cr_assert_not_null(text, "%s is missing", own[i]);
        cr_assert_not_null(strstr(text, "PEAT_OP_RMSNORM"), "%s does not implement rmsnorm",
                           own[i]);
        free(text);
    }
}
