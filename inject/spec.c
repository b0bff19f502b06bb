/* spec.c: the pseudo-error model catalogue and the parser of model specs like "bitflip(bit=30)". */
#include "inject/internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define I(k, d, lo, hi, h)                                                                         \
    {                                                                                              \
        k, 'i', d, lo, hi, NULL, h                                                                 \
    }
#define D(k, d, lo, hi, h)                                                                         \
    {                                                                                              \
        k, 'd', d, lo, hi, NULL, h                                                                 \
    }
#define E(k, d, c, h)                                                                              \
    {                                                                                              \
        k, 'e', d, 0, 0, c, h                                                                      \
    }

/* The catalogue (docs/fault-injection.md): each model mimics one known error mechanism. */
static const peat_inject_def defs[PEAT_INJ_COUNT] = {
    {PEAT_INJ_REORDER,
     "reorder",
     "honest other summation order (GEMM: forward, reversed, pairwise, split-K, or split-K and "
     "blocked pairwise through the golden's BLAS; other ops: the exact result correctly rounded "
     "to fp32)",
     3,
     {E("order", 1, "forward|reverse|pairwise|split|blas_split|blas_pairwise",
        "GEMM summation order"),
      I("split", 4, 2, 1 << 16, "chunks of K for order=split and blas_split"),
      I("block", 16, 1, 1 << 20, "least terms a leaf for order=blas_pairwise")}},
    {PEAT_INJ_PRECISION,
     "precision",
     "inputs, output or GEMM accumulation rounded to a narrower format (RN)",
     3,
     {E("fmt", 0, "bf16|fp16|tf32|fp8|bits",
        "format: bf16 (8 bits), fp16 (11), tf32 (11), fp8 "
        "e4m3 (4), or bits=p significand bits"),
      E("where", 0, "inputs|output|both|acc", "what is rounded (acc: GEMM running sum)"),
      I("bits", 8, 2, 24, "significand bits for fmt=bits")}},
    {PEAT_INJ_TRUNCATE,
     "truncate",
     "round toward zero: the exact result truncated to `bits` significand bits",
     1,
     {I("bits", 24, 2, 24, "significand bits kept")}},
    {PEAT_INJ_FTZ,
     "ftz",
     "subnormal values flushed to (signed) zero",
     1,
     {E("where", 1, "inputs|output|both", "flush the inputs (DAZ), the outputs (FTZ) or both")}},
    {PEAT_INJ_RANGE,
     "range",
     "outputs that leave a narrower format's range become Inf (overflow) or 0 (underflow)",
     1,
     {E("fmt", 1, "bf16|fp16", "format whose range is enforced")}},
    {PEAT_INJ_BITFLIP,
     "bitflip",
     "silent data corruption: one bit XORed in `count` random elements (transient)",
     3,
     {I("bit", 30, -1, 31, "bit position (0 = mantissa lsb, 31 = sign; -1 = drawn per call)"),
      I("count", 1, 1, 1e9, "elements hit"), I("out", 0, 0, PEAT_MAX_IO - 1, "output index")}},
    {PEAT_INJ_STUCK,
     "stuck",
     "permanent fault: one bit forced to `value` in every stride-th lane",
     5,
     {I("bit", 0, -1, 31, "bit position (-1 = drawn from the seed)"),
      I("value", 1, 0, 1, "forced value"), I("stride", 1, 1, 1e9, "every stride-th element"),
      I("offset", 0, 0, 1e9, "first lane (offset < stride)"),
      I("out", 0, 0, PEAT_MAX_IO - 1, "output index")}},
    {PEAT_INJ_TILE,
     "tile",
     "one rows x cols block of the output zeroed, stale or random",
     4,
     {I("rows", 16, 1, 1e9, "tile rows"), I("cols", 16, 1, 1e9, "tile columns"),
      E("kind", 1, "zero|stale|random", "what the block holds"),
      I("out", 0, 0, PEAT_MAX_IO - 1, "output index")}},
    {PEAT_INJ_BOUNDARY,
     "boundary",
     "the last rows / cols (unhandled edge tile) zeroed, stale or "
     "random",
     4,
     {I("rows", 1, 0, 1e9, "last rows hit"), I("cols", 0, 0, 1e9, "last columns hit"),
      E("kind", 0, "zero|stale|random", "what they hold"),
      I("out", 0, 0, PEAT_MAX_IO - 1, "output index")}},
    {PEAT_INJ_NAN,
     "nan",
     "NaN (or Inf) written into `count` random elements (transient)",
     3,
     {I("count", 1, 1, 1e9, "elements hit"), E("value", 0, "nan|inf", "value written"),
      I("out", 0, 0, PEAT_MAX_IO - 1, "output index")}},
    {PEAT_INJ_NOISE,
     "noise",
     "dense relative gaussian noise: y (1 + sigma N(0,1))",
     1,
     {D("sigma", 1e-5, 0, 1, "relative standard deviation")}},
    {PEAT_INJ_APPROX,
     "approx",
     "approximated function: smooth input-dependent error (gelu via tanh, or a smooth "
     "value-dependent deviation for any op)",
     2,
     {E("fn", 1, "tanh|smooth",
        "tanh: GELU/GELU' via the tanh formula; smooth: y + amp S "
        "sin(3y/S), S the output's rms"),
      D("amp", 1e-4, 0, 1, "relative amplitude for fn=smooth")}},
    {PEAT_INJ_NONDETERMINISTIC,
     "nondeterministic",
     "results that differ between repeats (GEMM: split-K partials added in random order; other "
     "ops: N(0, sigma) ulps); transient: a new seed per repeat",
     2,
     {D("sigma", 1, 0, 1e6, "ulps of noise for non-GEMM ops"),
      I("split", 8, 2, 1 << 16, "GEMM split-K chunks")}},
};

static int choice_index(const char *choices, const char *v, size_t vlen)
{
    int idx = 0;
    const char *p = choices;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vlen && strncmp(p, v, len) == 0) return idx;
        idx++;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

static void choice_name(const char *choices, int idx, char *out, size_t n)
{
    const char *p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) p = "?";
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len >= n) len = n - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

static const peat_inject_param *param_find(const peat_inject_def *d, const char *k, size_t klen,
                                           int *idx)
{
    for (int i = 0; i < d->n_params; i++)
        if (strlen(d->params[i].key) == klen && strncmp(d->params[i].key, k, klen) == 0) {
            *idx = i;
            return &d->params[i];
        }
    return NULL;
}

double peat_inject_param_get(const peat_inject_model_t *m, const char *key)
{
    int i;
    return param_find(m->def, key, strlen(key), &i) ? m->v[i] : NAN;
}

static void canonical(peat_inject_model_t *m)
{
    const peat_inject_def *d = m->def;
    size_t len = (size_t)snprintf(m->spec, sizeof m->spec, "%s", d->name);
    for (int i = 0; i < d->n_params && len < sizeof m->spec; i++) {
        const peat_inject_param *p = &d->params[i];
        char v[64];
        if (p->type == 'e')
            choice_name(p->choices, (int)m->v[i], v, sizeof v);
        else if (p->type == 'i')
            snprintf(v, sizeof v, "%lld", (long long)m->v[i]);
        else
            snprintf(v, sizeof v, "%.9g", m->v[i]);
        len += (size_t)snprintf(m->spec + len, sizeof m->spec - len, "%s%s=%s", i ? "," : "(",
                                p->key, v);
    }
    if (d->n_params && len < sizeof m->spec) snprintf(m->spec + len, sizeof m->spec - len, ")");
}

peat_status peat_inject_model_clone_with(const peat_inject_model_t *m, const char *key, double v,
                                         peat_inject_model_t **out)
{
    int i;
    if (!param_find(m->def, key, strlen(key), &i))
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: no parameter '%s'", m->spec, key);
    const peat_inject_param *p = &m->def->params[i];
    if (v < p->lo || v > p->hi)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: %s=%g outside [%g, %g]", m->spec, key, v,
                          p->lo, p->hi);
    peat_inject_model_t *c = malloc(sizeof *c);
    if (!c) return PEAT_ERROR(PEAT_ERR_NOMEM, "inject: model copy");
    *c = *m;
    c->v[i] = v;
    canonical(c);
    *out = c;
    return PEAT_OK;
}

static peat_status parse_value(const char *spec, const peat_inject_def *d,
                               const peat_inject_param *p, const char *v, size_t vlen, double *out)
{
    char tmp[64];
    if (vlen == 0 || vlen >= sizeof tmp)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': %s.%s needs a value", spec, d->name,
                          p->key);
    memcpy(tmp, v, vlen);
    tmp[vlen] = '\0';
    if (p->type == 'e') {
        int idx = choice_index(p->choices, tmp, vlen);
        if (idx < 0)
            return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': %s.%s=%s is not one of %s", spec,
                              d->name, p->key, tmp, p->choices);
        *out = idx;
        return PEAT_OK;
    }
    char *end;
    errno = 0;
    double x = strtod(tmp, &end);
    if (*end != '\0' || errno == ERANGE || !isfinite(x))
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': %s.%s=%s is not a number", spec, d->name,
                          p->key, tmp);
    if (p->type == 'i' && x != floor(x))
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': %s.%s=%s must be an integer", spec,
                          d->name, p->key, tmp);
    if (x < p->lo || x > p->hi)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': %s.%s=%s outside [%g, %g]", spec, d->name,
                          p->key, tmp, p->lo, p->hi);
    *out = x;
    return PEAT_OK;
}

static const char *skip_ws(const char *s)
{
    while (isspace((unsigned char)*s)) s++;
    return s;
}

static peat_status check_model(const char *spec, const peat_inject_model_t *m)
{
    if (m->def->id == PEAT_INJ_STUCK &&
        peat_inject_param_get(m, "offset") >= peat_inject_param_get(m, "stride"))
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': stuck.offset must be below stride", spec);
    if (m->def->id == PEAT_INJ_BOUNDARY && peat_inject_param_get(m, "rows") == 0 &&
        peat_inject_param_get(m, "cols") == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': boundary needs rows or cols > 0", spec);
    return PEAT_OK;
}

/* The catalogue entry named by the nlen characters at name (NULL if none). */
static const peat_inject_def *find_def(const char *name, size_t nlen)
{
    for (int i = 0; i < PEAT_INJ_COUNT; i++)
        if (strlen(defs[i].name) == nlen && strncmp(defs[i].name, name, nlen) == 0) return &defs[i];
    return NULL;
}

/* One `key = value` of the parameter list at *sp into m (seen counts each key); *sp moves past
 * it. */
static peat_status parse_assignment(const char *spec, peat_inject_model_t *m, int *seen,
                                    const char **sp)
{
    const peat_inject_def *d = m->def;
    const char *s = *sp, *k = s;
    while (isalnum((unsigned char)*s) || *s == '_') s++;
    size_t klen = (size_t)(s - k);
    int idx = -1;
    const peat_inject_param *p = param_find(d, k, klen, &idx);
    if (!p)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': %s has no parameter '%.*s'", spec, d->name,
                          (int)klen, k);
    if (seen[idx]++)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': %s.%s given twice", spec, d->name, p->key);
    s = skip_ws(s);
    if (*s != '=')
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': expected '=' after %s", spec, p->key);
    s = skip_ws(s + 1);
    const char *v = s;
    while (*s && *s != ',' && *s != ')' && !isspace((unsigned char)*s)) s++;
    *sp = s;
    return parse_value(spec, d, p, v, (size_t)(s - v), &m->v[idx]);
}

/* The optional "(key=value, ...)" after the model's name at *sp; *sp moves past it. */
static peat_status parse_params(const char *spec, peat_inject_model_t *m, const char **sp)
{
    int seen[PEAT_INJ_MAX_PARAMS] = {0};
    const char *s = skip_ws(*sp);
    *sp = s;
    if (*s != '(') return PEAT_OK;
    s = skip_ws(s + 1);
    if (*s == ')') {
        *sp = s + 1;
        return PEAT_OK;
    }
    for (;;) {
        PEAT_TRY(parse_assignment(spec, m, seen, &s));
        s = skip_ws(s);
        if (*s == ',') {
            s = skip_ws(s + 1);
            continue;
        }
        if (*s == ')') {
            *sp = s + 1;
            return PEAT_OK;
        }
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': expected ',' or ')' at '%s'", spec, s);
    }
}

peat_status peat_inject_model_parse(const char *spec, peat_inject_model_t **out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "inject: NULL output");
    *out = NULL;
    if (!spec) return PEAT_ERROR(PEAT_ERR_INVAL, "inject: NULL model spec");
    const char *s = skip_ws(spec);
    const char *name = s;
    while (isalnum((unsigned char)*s) || *s == '_') s++;
    size_t nlen = (size_t)(s - name);
    const peat_inject_def *d = find_def(name, nlen);
    if (!d)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject: unknown model '%.*s' in '%s' (see peat list)",
                          (int)nlen, name, spec);
    peat_inject_model_t *m = calloc(1, sizeof *m);
    if (!m) return PEAT_ERROR(PEAT_ERR_NOMEM, "inject: model");
    m->def = d;
    for (int i = 0; i < d->n_params; i++) m->v[i] = d->params[i].def;
    peat_status st = parse_params(spec, m, &s);
    if (st == PEAT_OK) {
        s = skip_ws(s);
        if (*s)
            st = PEAT_ERROR(PEAT_ERR_INVAL, "inject: '%s': unexpected '%s' after the model", spec,
                            s);
    }
    if (st == PEAT_OK) st = check_model(spec, m);
    if (st != PEAT_OK) {
        free(m);
        return st;
    }
    canonical(m);
    *out = m;
    return PEAT_OK;
}

void peat_inject_model_free(peat_inject_model_t *m)
{
    free(m);
}

const char *peat_inject_model_spec(const peat_inject_model_t *m)
{
    return m ? m->spec : "";
}

int peat_inject_model_transient(const peat_inject_model_t *m)
{
    if (!m) return 0;
    peat_inject_id id = m->def->id;
    return id == PEAT_INJ_BITFLIP || id == PEAT_INJ_NAN || id == PEAT_INJ_NONDETERMINISTIC;
}

static char catalogue[8192];

static void catalogue_build(void)
{
    size_t len = 0;
    for (int i = 0; i < PEAT_INJ_COUNT && len < sizeof catalogue; i++) {
        const peat_inject_def *d = &defs[i];
        char params[256] = "";
        size_t pl = 0;
        for (int k = 0; k < d->n_params && pl < sizeof params; k++) {
            const peat_inject_param *p = &d->params[k];
            char v[64];
            /* key=default, with the choices of an enum in brackets */
            if (p->type == 'e') {
                char dn[32];
                choice_name(p->choices, (int)p->def, dn, sizeof dn);
                snprintf(v, sizeof v, "%s[%s]", dn, p->choices);
            } else if (p->type == 'i')
                snprintf(v, sizeof v, "%lld", (long long)p->def);
            else
                snprintf(v, sizeof v, "%g", p->def);
            pl += (size_t)snprintf(params + pl, sizeof params - pl, "%s%s=%s", k ? "," : "", p->key,
                                   v);
        }
        len +=
            (size_t)snprintf(catalogue + len, sizeof catalogue - len, "%-17s %s%s%s  %s\n", d->name,
                             d->n_params ? "(" : "", params, d->n_params ? ")" : "", d->desc);
    }
}

const char *peat_inject_catalogue(void)
{
    /* built once from the constant table; pthread_once makes concurrent first calls safe */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, catalogue_build);
    return catalogue;
}
