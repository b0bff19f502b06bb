/* suite.c: reads suite files and policy files (INI-style `key = value` lines in sections) into
 * peat_suite / peat_policy, with one-line errors naming file:line. Keys are tables. */
#include "harness/nightly/suite.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- generic pieces ---- */

static char *trim(char *s)
{
    s += strspn(s, " \t");
    for (char *e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
    return s;
}

peat_status peat_nightly_ini_read(const char *path, peat_ini_fn fn, void *user)
{
    FILE *f = fopen(path, "r");
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    char line[1024], section[96] = "";
    peat_status st = PEAT_OK;
    for (int lineno = 1; st == PEAT_OK && fgets(line, sizeof line, f); lineno++) {
        if (!strchr(line, '\n') && !feof(f)) {
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s:%d: line longer than %zu characters", path, lineno,
                            sizeof line - 2);
            break;
        }
        line[strcspn(line, "#\r\n")] = 0;
        char *c = trim(line);
        if (!*c) continue;
        if (*c == '[') {
            char *end = strchr(c, ']');
            if (!end || end[1])
                st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s:%d: expected `[section]`", path, lineno);
            else {
                *end = 0;
                snprintf(section, sizeof section, "%s", trim(c + 1));
            }
            continue;
        }
        char *eq = strchr(c, '=');
        if (!eq) {
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s:%d: expected `key = value`", path, lineno);
            break;
        }
        *eq = 0;
        char *key = trim(c), *val = trim(eq + 1);
        if (!*key)
            st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s:%d: a key is missing before '='", path, lineno);
        else
            st = fn(user, section, key, val, lineno);
    }
    fclose(f);
    return st;
}

peat_status peat_nightly_finding_class_parse(const char *name, peat_finding_class *out)
{
    *out = peat_detector_finding_parse(name);
    if (*out != PEAT_FIND_COUNT) return PEAT_OK;
    return PEAT_ERROR(PEAT_ERR_NOTFOUND,
                      "unknown finding '%s' (BIT_EXACT, WITHIN_BOUND, REDUCED_PRECISION, ...: "
                      "docs/detector.md)",
                      name);
}

peat_status peat_nightly_duration_parse(const char *s, double *seconds)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double unit = !strcmp(end, "") || !strcmp(end, "s") ? 1
                  : !strcmp(end, "m")                   ? 60
                  : !strcmp(end, "h")                   ? 3600
                                                        : -1;
    if (end == s || errno || unit < 0 || !(v > 0) || !isfinite(v))
        return PEAT_ERROR(PEAT_ERR_INVAL, "bad duration '%s' (e.g. 90, 90s, 2m, 1h)", s);
    *seconds = v * unit;
    return PEAT_OK;
}

static peat_status parse_i64(const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return PEAT_ERROR(PEAT_ERR_INVAL, "expected an integer in %lld..%lld, got '%s'",
                          (long long)lo, (long long)hi, v);
    *out = x;
    return PEAT_OK;
}

static peat_status parse_nonneg(const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0) || !isfinite(x))
        return PEAT_ERROR(PEAT_ERR_INVAL, "expected a number >= 0, got '%s'", v);
    *out = x;
    return PEAT_OK;
}

/* Splits a comma- or space-separated list into at most max names of size len. */
static peat_status parse_list(const char *v, char *names, size_t len, int max, int *n)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (*n == max) return PEAT_ERROR(PEAT_ERR_INVAL, "more than %d names in '%s'", max, v);
        if (strlen(t) >= len) return PEAT_ERROR(PEAT_ERR_INVAL, "name '%s' is too long", t);
        snprintf(names + (size_t)*n * len, len, "%s", t);
        (*n)++;
    }
    if (*n == 0) return PEAT_ERROR(PEAT_ERR_INVAL, "empty list");
    return PEAT_OK;
}

/* ---- policy ---- */

void peat_nightly_policy_default(peat_policy *p)
{
    memset(p, 0, sizeof *p);
    p->fail_on = PEAT_ACCEPT_FAIL;
    /* honest reruns move these by a fraction of the threshold (docs/nightly-ci.md) */
    p->th = (peat_thresholds){.eff_bits_drop = 1.0,
                              .max_norm_ratio = 2.0,
                              .max_norm_floor = 1.0,
                              .over_bound_increase = 0.001,
                              .loss_increase = 0.05,
                              .accuracy_drop = 0.02,
                              .time_ratio = 3.0,
                              .time_min_s = 10.0};
}

/* "KERNEL CLASS [param>=X | param<=X]" (kernel given: "CLASS [cond]"). */
static peat_status allowance_parse(const char *kernel, const char *v, peat_allowance *a)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", v);
    memset(a, 0, sizeof *a);
    char *t = strtok_r(buf, " \t", &save);
    if (!kernel) {
        if (!t) return PEAT_ERROR(PEAT_ERR_INVAL, "allow needs `KERNEL CLASS [param>=X]`");
        kernel = t;
        t = strtok_r(NULL, " \t", &save);
    }
    if (!t) return PEAT_ERROR(PEAT_ERR_INVAL, "allow needs a finding class after the kernel");
    snprintf(a->kernel, sizeof a->kernel, "%s", kernel);
    PEAT_TRY(peat_nightly_finding_class_parse(t, &a->cls));
    char *cond = strtok_r(NULL, " \t", &save);
    if (!cond) return PEAT_OK;
    char *op = strpbrk(cond, "<>");
    char *end = NULL;
    if (op && op[1] == '=') a->value = strtod(op + 2, &end);
    if (!op || op[1] != '=' || op == cond || end == op + 2 || *end || strtok_r(NULL, " ", &save))
        return PEAT_ERROR(PEAT_ERR_INVAL, "bad condition '%s' (e.g. bits>=7)", cond);
    a->at_least = *op == '>';
    snprintf(a->param, sizeof a->param, "%.*s", (int)(op - cond), cond);
    return PEAT_OK;
}

static peat_status allow_add(peat_policy *p, const char *kernel, const char *v)
{
    if (p->n_allow == PEAT_SUITE_MAX_ALLOW)
        return PEAT_ERROR(PEAT_ERR_INVAL, "more than %d allowances", PEAT_SUITE_MAX_ALLOW);
    PEAT_TRY(allowance_parse(kernel, v, &p->allow[p->n_allow]));
    p->n_allow++;
    return PEAT_OK;
}

/* The numeric parameter `name` in a finding's params ("bits=7.5,storage=8"). */
static int param_value(const char *params, const char *name, double *v)
{
    size_t n = strlen(name);
    for (const char *c = params; (c = strstr(c, name)); c += n) {
        int starts = c == params || c[-1] == ',' || c[-1] == ' ';
        char *end;
        if (starts && c[n] == '=') {
            *v = strtod(c + n + 1, &end);
            if (end != c + n + 1) return 1;
        }
    }
    return 0;
}

int peat_nightly_policy_allows(const peat_policy *p, const char *kernel, peat_finding_class cls,
                               const char *params)
{
    for (int i = 0; i < p->n_allow; i++) {
        const peat_allowance *a = &p->allow[i];
        if (a->cls != cls || (strcmp(a->kernel, kernel) && strcmp(a->kernel, "*"))) continue;
        double v;
        if (!a->param[0]) return 1;
        if (param_value(params, a->param, &v) && (a->at_least ? v >= a->value : v <= a->value))
            return 1;
    }
    return 0;
}

static const struct {
    const char *key;
    size_t off;
} threshold_keys[] = {
    {"eff-bits-drop", offsetof(peat_thresholds, eff_bits_drop)},
    {"max-norm-ratio", offsetof(peat_thresholds, max_norm_ratio)},
    {"max-norm-floor", offsetof(peat_thresholds, max_norm_floor)},
    {"over-bound-increase", offsetof(peat_thresholds, over_bound_increase)},
    {"loss-increase", offsetof(peat_thresholds, loss_increase)},
    {"accuracy-drop", offsetof(peat_thresholds, accuracy_drop)},
    {"time-ratio", offsetof(peat_thresholds, time_ratio)},
    {"time-min", offsetof(peat_thresholds, time_min_s)},
};

/* One [accept] or [thresholds] line; *known = 0 when the section is not a policy section. */
static peat_status policy_line(peat_policy *p, const char *section, const char *key, const char *v,
                               int *known)
{
    *known = 1;
    if (!strcmp(section, "accept")) {
        if (!strcmp(key, "allow")) return allow_add(p, NULL, v);
        if (!strcmp(key, "fail-on")) {
            if (strcmp(v, "fail") && strcmp(v, "warn"))
                return PEAT_ERROR(PEAT_ERR_INVAL, "fail-on must be fail or warn, got '%s'", v);
            p->fail_on = !strcmp(v, "warn") ? PEAT_ACCEPT_WARN : PEAT_ACCEPT_FAIL;
            return PEAT_OK;
        }
        return PEAT_ERROR(PEAT_ERR_INVAL, "unknown key '%s' in [accept] (fail-on, allow)", key);
    }
    if (!strcmp(section, "thresholds")) {
        for (size_t i = 0; i < sizeof threshold_keys / sizeof threshold_keys[0]; i++)
            if (!strcmp(key, threshold_keys[i].key))
                return parse_nonneg(v, (double *)((char *)&p->th + threshold_keys[i].off));
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "unknown key '%s' in [thresholds] (eff-bits-drop, max-norm-ratio, "
                          "max-norm-floor, over-bound-increase, loss-increase, accuracy-drop, "
                          "time-ratio, time-min)",
                          key);
    }
    *known = 0;
    return PEAT_OK;
}

typedef struct ini_ctx {
    const char *path;
    peat_policy *policy;
    peat_suite *suite; /* NULL: a policy file */
} ini_ctx;

/* Prefixes the last error with file:line (the reason came from a value parser). */
static peat_status at_line(peat_status st, const ini_ctx *c, int line)
{
    if (st == PEAT_OK) return st;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", peat_error_last());
    return PEAT_ERROR(st, "%s:%d: %s", c->path, line, msg);
}

static peat_status policy_cb(void *user, const char *section, const char *key, const char *v,
                             int line)
{
    ini_ctx *c = user;
    int known;
    peat_status st = policy_line(c->policy, section, key, v, &known);
    if (st == PEAT_OK && !known)
        st = PEAT_ERROR(PEAT_ERR_INVAL,
                        "unknown section [%s] in a policy file (accept, thresholds)", section);
    return at_line(st, c, line);
}

peat_status peat_nightly_policy_load(const char *path, peat_policy *p)
{
    ini_ctx c = {path, p, NULL};
    return peat_nightly_ini_read(path, policy_cb, &c);
}

/* ---- suite ---- */

static peat_status kernel_find_or_add(peat_suite *s, const char *name, int line,
                                      peat_suite_kernel **k)
{
    for (int i = 0; i < s->n_kernels; i++)
        if (!strcmp(s->kernels[i].name, name)) {
            *k = &s->kernels[i];
            return PEAT_OK;
        }
    if (s->n_kernels == PEAT_SUITE_MAX_KERNELS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "more than %d kernels", PEAT_SUITE_MAX_KERNELS);
    if (strlen(name) >= sizeof s->kernels[0].name)
        return PEAT_ERROR(PEAT_ERR_INVAL, "kernel name '%s' is too long", name);
    *k = &s->kernels[s->n_kernels++];
    memset(*k, 0, sizeof **k);
    snprintf((*k)->name, sizeof(*k)->name, "%s", name);
    (*k)->line = line;
    return PEAT_OK;
}

/* Run settings shared by [suite] and [kernel NAME]; *known = 0 for another key. */
static peat_status run_key(const char *key, const char *v, peat_suite_kernel *k, int *known)
{
    *known = 1;
    if (!strcmp(key, "flows"))
        return parse_list(v, &k->flows[0][0], sizeof k->flows[0], PEAT_SUITE_MAX_LIST, &k->n_flows);
    if (!strcmp(key, "backends"))
        return parse_list(v, &k->backends[0][0], sizeof k->backends[0], PEAT_SUITE_MAX_LIST,
                          &k->n_backends);
    if (!strcmp(key, "iters")) return parse_i64(v, 1, 1000000, &k->iters);
    if (!strcmp(key, "calls")) return parse_i64(v, 1, 1000000, &k->calls);
    if (!strcmp(key, "budget")) return peat_nightly_duration_parse(v, &k->budget_s);
    if (!strcmp(key, "size")) {
        if (strcmp(v, "tiny") && strcmp(v, "small") && strcmp(v, "base"))
            return PEAT_ERROR(PEAT_ERR_INVAL, "size '%s': tiny, small or base", v);
        snprintf(k->size, sizeof k->size, "%s", v);
        return PEAT_OK;
    }
    *known = 0;
    return PEAT_OK;
}

/* A plugin path relative to the suite file's folder. */
static peat_status plugin_add(peat_suite *s, const char *v)
{
    if (s->n_plugins == PEAT_SUITE_MAX_PLUGINS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "more than %d plugins", PEAT_SUITE_MAX_PLUGINS);
    char dir[sizeof s->path] = "";
    const char *slash = strrchr(s->path, '/');
    if (v[0] != '/' && slash) snprintf(dir, sizeof dir, "%.*s/", (int)(slash - s->path), s->path);
    int w = snprintf(s->plugins[s->n_plugins], sizeof s->plugins[0], "%s%s", dir, v);
    if (w >= (int)sizeof s->plugins[0]) return PEAT_ERROR(PEAT_ERR_INVAL, "plugin path too long");
    s->n_plugins++;
    return PEAT_OK;
}

/* [suite]: the suite's own keys, then the run settings every kernel inherits. */
static peat_status suite_key(peat_suite *s, peat_suite_kernel *defaults, const char *key,
                             const char *v, int line)
{
    if (!strcmp(key, "name")) {
        snprintf(s->name, sizeof s->name, "%s", v);
        return PEAT_OK;
    }
    if (!strcmp(key, "seed")) {
        int64_t x;
        PEAT_TRY(parse_i64(v, 0, INT64_MAX, &x));
        s->seed = (uint64_t)x;
        return PEAT_OK;
    }
    if (!strcmp(key, "plugin")) return plugin_add(s, v);
    if (!strcmp(key, "kernels")) {
        char names[PEAT_SUITE_MAX_KERNELS][64];
        int n;
        PEAT_TRY(parse_list(v, &names[0][0], sizeof names[0], PEAT_SUITE_MAX_KERNELS, &n));
        peat_suite_kernel *k;
        for (int i = 0; i < n; i++) PEAT_TRY(kernel_find_or_add(s, names[i], line, &k));
        return PEAT_OK;
    }
    int known;
    PEAT_TRY(run_key(key, v, defaults, &known));
    if (!known)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "unknown key '%s' in [suite] (name, kernels, flows, backends, iters, "
                          "calls, size, seed, budget, plugin)",
                          key);
    return PEAT_OK;
}

typedef struct suite_ctx {
    ini_ctx ini;
    peat_suite_kernel defaults;
} suite_ctx;

/* [kernel NAME]: run settings for that kernel alone, and its allowances. */
static peat_status kernel_key(peat_suite *s, const char *name, const char *key, const char *v,
                              int line)
{
    peat_suite_kernel *k;
    PEAT_TRY(kernel_find_or_add(s, name, line, &k));
    if (!strcmp(key, "allow")) return allow_add(&s->policy, k->name, v);
    int known;
    PEAT_TRY(run_key(key, v, k, &known));
    if (!known)
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "unknown key '%s' in [kernel %s] (flows, backends, iters, calls, size, "
                          "budget, allow)",
                          key, name);
    return PEAT_OK;
}

static peat_status suite_cb(void *user, const char *section, const char *key, const char *v,
                            int line)
{
    suite_ctx *c = user;
    peat_suite *s = c->ini.suite;
    int known;
    peat_status st = policy_line(&s->policy, section, key, v, &known);
    if (st != PEAT_OK || known) return at_line(st, &c->ini, line);
    if (!strcmp(section, "suite"))
        st = suite_key(s, &c->defaults, key, v, line);
    else if (!strncmp(section, "kernel ", 7) && section[7])
        st = kernel_key(s, section + 7 + strspn(section + 7, " "), key, v, line);
    else
        st = PEAT_ERROR(PEAT_ERR_INVAL,
                        "unknown section [%s] (suite, kernel NAME, accept, thresholds)", section);
    return at_line(st, &c->ini, line);
}

/* Settings a kernel leaves unset come from [suite]. */
static void inherit(peat_suite_kernel *k, const peat_suite_kernel *d)
{
    if (!k->n_flows) {
        k->n_flows = d->n_flows;
        memcpy(k->flows, d->flows, sizeof k->flows);
    }
    if (!k->n_backends) {
        k->n_backends = d->n_backends;
        memcpy(k->backends, d->backends, sizeof k->backends);
    }
    if (!k->iters) k->iters = d->iters;
    if (!k->calls) k->calls = d->calls;
    if (!k->size[0]) memcpy(k->size, d->size, sizeof k->size);
    if (!(k->budget_s > 0)) k->budget_s = d->budget_s;
}

peat_status peat_nightly_suite_load(const char *path, peat_suite *s)
{
    memset(s, 0, sizeof *s);
    if (strlen(path) >= sizeof s->path) return PEAT_ERROR(PEAT_ERR_INVAL, "suite path too long");
    snprintf(s->path, sizeof s->path, "%s", path);
    s->seed = 1;
    peat_nightly_policy_default(&s->policy);
    suite_ctx c;
    memset(&c, 0, sizeof c);
    c.ini = (ini_ctx){path, &s->policy, s};
    PEAT_TRY(peat_nightly_ini_read(path, suite_cb, &c));
    if (s->n_kernels == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s: no kernels (`kernels = a, b` in [suite])", path);
    for (int i = 0; i < s->n_kernels; i++) inherit(&s->kernels[i], &c.defaults);
    s->iters = c.defaults.iters, s->calls = c.defaults.calls, s->budget_s = c.defaults.budget_s;
    if (!s->name[0]) {
        const char *base = strrchr(path, '/');
        snprintf(s->name, sizeof s->name, "%s", base ? base + 1 : path);
    }
    return PEAT_OK;
}
