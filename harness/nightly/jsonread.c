/* jsonread.c: a recursive-descent JSON reader into a small tree (the diff and ci read back what
 * the reports wrote). Depth is limited so a hostile file cannot exhaust the stack. */
#include "harness/nightly/jsonread.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct parser {
    const char *s, *p, *what;
    int line;
} parser;

static peat_status fail(parser *ps, const char *expected)
{
    char near[24] = "end of input";
    if (*ps->p) {
        snprintf(near, sizeof near, "'%.12s'", ps->p);
        for (char *c = near; *c; c++)
            if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    }
    return PEAT_ERROR(PEAT_ERR_FORMAT, "%s:%d: bad JSON: expected %s near %s", ps->what, ps->line,
                      expected, near);
}

static void skip_ws(parser *ps)
{
    for (;; ps->p++) {
        if (*ps->p == '\n')
            ps->line++;
        else if (*ps->p != ' ' && *ps->p != '\t' && *ps->p != '\r')
            return;
    }
}

static int hex4(const char *h, unsigned *cp)
{
    *cp = 0;
    for (int i = 0; i < 4; i++) {
        char c = h[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return 0;
        *cp = *cp * 16 + (unsigned)d;
    }
    return 1;
}

/* Appends code point cp as UTF-8 (at most 4 bytes). */
static char *put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xc0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xe0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (char)(0xf0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    }
    return o;
}

/* One escape after the backslash; advances *q past it. Returns 0 on a bad escape. */
static int unescape(const char **q, char **o)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *e = strchr(from, **q);
    if (**q && e) {
        *(*o)++ = to[e - from];
        (*q)++;
        return 1;
    }
    unsigned cp, lo;
    if (**q != 'u' || !hex4(*q + 1, &cp)) return 0;
    *q += 5;
    if (cp >= 0xd800 && cp < 0xdc00 && (*q)[0] == '\\' && (*q)[1] == 'u' && hex4(*q + 2, &lo) &&
        lo >= 0xdc00 && lo < 0xe000) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        *q += 6;
    }
    *o = put_utf8(*o, cp);
    return 1;
}

static peat_status parse_string(parser *ps, char **out)
{
    if (*ps->p != '"') return fail(ps, "a string");
    const char *q = ps->p + 1;
    size_t n = 0;
    while (q[n] && q[n] != '"') n += q[n] == '\\' && q[n + 1] ? 2 : 1;
    if (!q[n]) return fail(ps, "a closing quote");
    char *buf = malloc(n + 1), *o = buf; /* escapes never grow the text */
    if (!buf) return PEAT_ERROR(PEAT_ERR_NOMEM, "JSON string of %zu bytes", n);
    while (*q != '"') {
        if ((unsigned char)*q < 0x20) {
            free(buf);
            ps->p = q;
            return fail(ps, "no raw control character in a string");
        }
        if (*q != '\\') {
            *o++ = *q++;
            continue;
        }
        q++;
        if (!unescape(&q, &o)) {
            free(buf);
            ps->p = q;
            return fail(ps, "a valid escape");
        }
    }
    *o = 0;
    ps->p = q + 1;
    *out = buf;
    return PEAT_OK;
}

static peat_status parse_value(parser *ps, peat_json *v, int depth);

/* Grows the items (and keys) of an array or object by one; returns the new item. */
static peat_json *push(peat_json *v, int with_key)
{
    peat_json *items = realloc(v->items, (size_t)(v->n + 1) * sizeof *items);
    if (!items) return NULL;
    v->items = items;
    if (with_key) {
        char **keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof *keys);
        if (!keys) return NULL;
        v->keys = keys;
        v->keys[v->n] = NULL;
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    return &v->items[v->n++];
}

/* Array or object: items separated by commas up to the closing bracket. */
static peat_status parse_container(parser *ps, peat_json *v, int depth)
{
    int obj = *ps->p == '{';
    char close = obj ? '}' : ']';
    v->kind = obj ? PEAT_JSON_OBJECT : PEAT_JSON_ARRAY;
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) {
        ps->p++;
        return PEAT_OK;
    }
    for (;;) {
        skip_ws(ps);
        char *key = NULL;
        if (obj) {
            PEAT_TRY(parse_string(ps, &key));
            skip_ws(ps);
            if (*ps->p != ':') {
                free(key);
                return fail(ps, "':' after an object key");
            }
            ps->p++;
        }
        peat_json *item = push(v, obj);
        if (!item) {
            free(key);
            return PEAT_ERROR(PEAT_ERR_NOMEM, "JSON container");
        }
        if (obj) v->keys[v->n - 1] = key;
        PEAT_TRY(parse_value(ps, item, depth + 1));
        skip_ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return PEAT_OK;
        }
        return fail(ps, obj ? "',' or '}'" : "',' or ']'");
    }
}

static peat_status parse_number(parser *ps, peat_json *v)
{
    /* strtod accepts more than JSON (hex, inf, leading '+'): check the JSON grammar's start */
    const char *c = ps->p + (*ps->p == '-');
    if (*c < '0' || *c > '9' || (c[0] == '0' && c[1] >= '0' && c[1] <= '9'))
        return fail(ps, "a value");
    char *end;
    errno = 0;
    v->num = strtod(ps->p, &end);
    if (end == ps->p || (c[1] == 'x' || c[1] == 'X')) return fail(ps, "a number");
    /* 1e999 overflows to infinity: no file PEAT writes holds one (it writes null) */
    if (!isfinite(v->num)) return fail(ps, "a number within the range of a double");
    v->kind = PEAT_JSON_NUMBER;
    ps->p = end;
    return PEAT_OK;
}

static peat_status parse_value(parser *ps, peat_json *v, int depth)
{
    if (depth > JSON_MAX_DEPTH) return fail(ps, "at most 64 levels of nesting");
    skip_ws(ps);
    static const struct {
        const char *word;
        peat_json_kind kind;
        double num;
    } words[] = {
        {"null", PEAT_JSON_NULL, 0}, {"true", PEAT_JSON_BOOL, 1}, {"false", PEAT_JSON_BOOL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strncmp(ps->p, words[i].word, strlen(words[i].word))) {
            v->kind = words[i].kind;
            v->num = words[i].num;
            ps->p += strlen(words[i].word);
            return PEAT_OK;
        }
    if (*ps->p == '{' || *ps->p == '[') return parse_container(ps, v, depth);
    if (*ps->p == '"') {
        v->kind = PEAT_JSON_STRING;
        return parse_string(ps, &v->str);
    }
    return parse_number(ps, v);
}

peat_status peat_nightly_json_parse(const char *text, const char *what, peat_json *out)
{
    parser ps = {text, text, what ? what : "JSON", 1};
    memset(out, 0, sizeof *out);
    peat_status st = parse_value(&ps, out, 0);
    if (st == PEAT_OK) {
        skip_ws(&ps);
        if (*ps.p) st = fail(&ps, "end of input after the value");
    }
    if (st != PEAT_OK) peat_nightly_json_free(out);
    return st;
}

peat_status peat_nightly_json_load(const char *path, peat_json *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return PEAT_ERROR(PEAT_ERR_NOMEM, "reading %s", path);
    if (bad) {
        free(buf);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot read %s", path);
    }
    buf[n] = 0;
    /* the parser reads a C string: a NUL byte would end the text early, and what follows it
     * (binary data, a second document) would pass unread */
    size_t len = strlen(buf);
    if (len < n) {
        free(buf);
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not JSON text: a NUL byte at offset %zu", path,
                          len);
    }
    peat_status st = peat_nightly_json_parse(buf, path, out);
    free(buf);
    return st;
}

void peat_nightly_json_free(peat_json *v)
{
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        peat_nightly_json_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

const peat_json *peat_nightly_json_get(const peat_json *v, const char *key)
{
    if (!v || v->kind != PEAT_JSON_OBJECT) return NULL;
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key)) return &v->items[i];
    return NULL;
}

const peat_json *peat_nightly_json_path(const peat_json *v, const char *path)
{
    char key[128];
    while (v && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        v = peat_nightly_json_get(v, key);
        path += n + (path[n] == '.');
    }
    return v;
}

double peat_nightly_json_num(const peat_json *v, const char *path)
{
    const peat_json *x = peat_nightly_json_path(v, path);
    return x && x->kind == PEAT_JSON_NUMBER ? x->num : NAN;
}

const char *peat_nightly_json_str(const peat_json *v, const char *path, const char *fallback)
{
    const peat_json *x = peat_nightly_json_path(v, path);
    return x && x->kind == PEAT_JSON_STRING ? x->str : fallback;
}
