/* result_store.c: what a finished campaign's reports are made from, kept in its file
 * (/report/state) so that `peat report DIR` can write them again after they were lost. */
#include "harness/campaign/result_store.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define STATE_PATH PEAT_STORE_REPORT_STATE
/* Raised when peat_campaign_result changes meaning without changing its layout. */
#define STATE_VERSION 1
/* of the data column: a row holds what its code takes */
#define ROW_CHARS (PEAT_STORE_REPORT_STATE_DATA_WIDTH - 1)

/* the columns of peat_store_report_state_cols (store/store_schema.c): the part ("result",
 * "seed", "argv", "capture"), the build's layout of it (layout_tag), the offset of this row's
 * bytes in it, its whole size, the bytes coded (code_row) */
enum { C_PART, C_LAYOUT, C_OFFSET, C_SIZE, C_DATA, C_N };
_Static_assert(C_N == sizeof peat_store_report_state_cols / sizeof peat_store_report_state_cols[0],
               "the report state's columns");
static const peat_store_col *const state_cols = peat_store_report_state_cols;

/* The result's layout as this build lays it out (sizes and offsets of every part the reports
 * read): a file written by a build that lays it out otherwise is refused, never misread. */
static int64_t layout_tag(void)
{
    const size_t v[] = {STATE_VERSION,
                        PEAT_SIGNATURE_VERSION,
                        sizeof(peat_campaign_result),
                        sizeof(peat_signature),
                        sizeof(peat_finding),
                        sizeof(peat_plot_data),
                        sizeof(peat_coverage),
                        sizeof(peat_probe_outcome),
                        sizeof(peat_gemm_props),
                        sizeof(peat_runtime_verdict),
                        offsetof(peat_campaign_result, cand),
                        offsetof(peat_campaign_result, findings),
                        offsetof(peat_campaign_result, verdict),
                        offsetof(peat_campaign_result, plots),
                        offsetof(peat_campaign_result, coverage),
                        offsetof(peat_campaign_result, probes),
                        offsetof(peat_campaign_result, props_cand),
                        offsetof(peat_campaign_result, runtime),
                        offsetof(peat_campaign_result, rt)};
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        h ^= (uint64_t)v[i];
        h *= 1099511628211ull;
    }
    return (int64_t)(h >> 1);
}

/* Codes bytes b[*off..n) into out (at most ROW_CHARS characters, NUL-terminated): two hex digits
 * a byte, "z" and four hex digits for a run of 3 to 65535 zero bytes (the result is mostly
 * zeros: empty probe and plot slots). *off advances past what was coded. */
static void code_row(const unsigned char *b, size_t n, size_t *off, char *out)
{
    static const char dig[] = "0123456789abcdef";
    size_t k = 0, i = *off;
    while (i < n) {
        size_t run = 0;
        while (i + run < n && run < 0xffff && b[i + run] == 0) run++;
        if (run >= 3) {
            if (k + 5 > ROW_CHARS) break;
            out[k++] = 'z';
            for (int sh = 12; sh >= 0; sh -= 4) out[k++] = dig[(run >> sh) & 15];
            i += run;
        } else {
            if (k + 2 > ROW_CHARS) break;
            out[k++] = dig[b[i] >> 4], out[k++] = dig[b[i] & 15];
            i++;
        }
    }
    out[k] = 0;
    *off = i;
}

static peat_status part_write(peat_store_table_t *t, const char *part, const void *data, size_t n,
                              int64_t layout)
{
    size_t max_rows = n * 2 / ROW_CHARS + 2, rows = 0;
    char *text = malloc(max_rows * (ROW_CHARS + 1));
    peat_store_value *v = calloc(max_rows * C_N, sizeof *v);
    if (!text || !v) {
        free(text), free(v);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "report state");
    }
    size_t off = 0;
    do { /* one append of every row: one flush */
        peat_store_value *r = v + rows * C_N;
        char *row = text + rows * (ROW_CHARS + 1);
        r[C_PART].s = part, r[C_LAYOUT].i = layout, r[C_OFFSET].i = (int64_t)off;
        r[C_SIZE].i = (int64_t)n;
        code_row(data, n, &off, row);
        r[C_DATA].s = row;
        rows++;
    } while (off < n && rows < max_rows);
    peat_status st = peat_store_table_append(t, v, (int64_t)rows);
    free(text), free(v);
    return st;
}

peat_status peat_campaign_state_write(peat_store_t *s, const peat_campaign_opts *o,
                                      const peat_campaign_result *r)
{
    peat_campaign_result *copy = malloc(sizeof *copy);
    if (!copy) return PEAT_ERROR(PEAT_ERR_NOMEM, "report state");
    memcpy(copy, r, sizeof *copy);
    copy->rt = NULL; /* a pointer means nothing in a file; the curves are /runtime/curves */
    peat_store_table_t *t = NULL;
    peat_status st = peat_store_table_open(s, STATE_PATH, state_cols, C_N, &t);
    /* a resumed commit appends after the rows of one that was killed: the last part read wins */
    const char *argv = o->argv ? o->argv : "", *cap = o->capture ? o->capture : "";
    if (st == PEAT_OK) st = part_write(t, "result", copy, sizeof *copy, layout_tag());
    if (st == PEAT_OK) st = part_write(t, "seed", &o->seed, sizeof o->seed, 0);
    if (st == PEAT_OK) st = part_write(t, "argv", argv, strlen(argv) + 1, 0);
    if (st == PEAT_OK && o->capture) st = part_write(t, "capture", cap, strlen(cap) + 1, 0);
    peat_store_table_close(t);
    free(copy);
    return st;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes a row coded by code_row into dst (room for cap bytes): the bytes it holds, or -1 when
 * it is not such a code or overflows dst. */
static long decode_row(const char *s, unsigned char *dst, size_t cap)
{
    size_t k = 0;
    while (*s) {
        if (*s == 'z') {
            size_t run = 0;
            for (int i = 1; i <= 4; i++) {
                int h = hexval(s[i]);
                if (h < 0) return -1;
                run = run << 4 | (size_t)h;
            }
            if (k + run > cap) return -1;
            memset(dst + k, 0, run);
            k += run, s += 5;
            continue;
        }
        int hi = hexval(s[0]), lo = hi < 0 ? -1 : hexval(s[1]);
        if (lo < 0 || k + 1 > cap) return -1;
        dst[k++] = (unsigned char)(hi << 4 | lo);
        s += 2;
    }
    return (long)k;
}

/* Part `part` of the table into a new buffer (*out, *n bytes); *out NULL when absent. */
static peat_status part_read_rows(const peat_store_table_t *t, const char *part, int64_t layout,
                                  unsigned char **out, size_t *n)
{
    *out = NULL, *n = 0;
    size_t got = 0;
    for (int64_t row = 0; row < peat_store_table_rows(t); row++) {
        peat_store_value v[C_N];
        for (int c = 0; c < C_N; c++) PEAT_TRY(peat_store_table_get(t, row, c, &v[c]));
        if (strcmp(v[C_PART].s, part)) continue;
        if (v[C_LAYOUT].i != layout)
            return PEAT_ERROR(PEAT_ERR_FORMAT,
                              "its report state was written by a peat build that lays results "
                              "out differently: rerun the campaign with this build");
        if (v[C_OFFSET].i == 0) { /* a part starts (again: a resumed commit wrote it anew) */
            free(*out);
            *n = (size_t)v[C_SIZE].i, got = 0;
            if (v[C_SIZE].i < 0 || !(*out = calloc(*n + 1, 1)))
                return PEAT_ERROR(PEAT_ERR_NOMEM, "report state");
        }
        if (!*out || (size_t)v[C_SIZE].i != *n || v[C_OFFSET].i < 0 || (size_t)v[C_OFFSET].i > *n)
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: part %s is not whole", STATE_PATH, part);
        long len = decode_row(v[C_DATA].s, *out + v[C_OFFSET].i, *n - (size_t)v[C_OFFSET].i);
        if (len < 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: part %s is damaged", STATE_PATH, part);
        got += (size_t)len;
    }
    if (*out && got != *n)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: part %s is not whole", STATE_PATH, part);
    return PEAT_OK;
}

static peat_status part_read(const peat_store_table_t *t, const char *part, int64_t layout,
                             unsigned char **out, size_t *n)
{
    peat_status st = part_read_rows(t, part, layout, out, n);
    if (st != PEAT_OK) free(*out), *out = NULL;
    return st;
}

static peat_status state_parts(const peat_store_table_t *t, peat_campaign_state *out)
{
    unsigned char *b = NULL;
    size_t n = 0;
    PEAT_TRY(part_read(t, "result", layout_tag(), &b, &n));
    if (!b || n != sizeof out->res) {
        free(b);
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s holds no campaign result", STATE_PATH);
    }
    memcpy(&out->res, b, n);
    free(b);
    out->res.rt = NULL;
    PEAT_TRY(part_read(t, "seed", 0, &b, &n));
    if (b && n == sizeof out->o.seed) memcpy(&out->o.seed, b, n);
    free(b);
    PEAT_TRY(part_read(t, "argv", 0, &b, &n));
    out->argv = (char *)b;
    PEAT_TRY(part_read(t, "capture", 0, &b, &n));
    out->capture = (char *)b;
    out->o.argv = out->argv;
    out->o.capture = out->capture;
    return PEAT_OK;
}

peat_status peat_campaign_state_read(peat_store_t *s, peat_campaign_state *out)
{
    memset(out, 0, sizeof *out);
    peat_campaign_opts_default(&out->o);
    if (!peat_store_table_present(s, STATE_PATH))
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "it holds no report state (%s): written by a peat from before reports "
                          "could be regenerated; rerun the campaign",
                          STATE_PATH);
    peat_store_table_t *t = NULL;
    PEAT_TRY(peat_store_table_open(s, STATE_PATH, state_cols, C_N, &t));
    peat_status st = state_parts(t, out);
    peat_store_table_close(t);
    if (st == PEAT_OK) {
        out->rt = calloc(1, sizeof *out->rt);
        if (!out->rt) st = PEAT_ERROR(PEAT_ERR_NOMEM, "runtime curves");
    }
    if (st == PEAT_OK) {
        peat_status rs = peat_runtime_result_load(s, out->rt);
        if (rs == PEAT_ERR_NOTFOUND) {
            free(out->rt);
            out->rt = NULL;
        } else
            st = rs;
    }
    out->res.rt = out->rt;
    if (st != PEAT_OK) peat_campaign_state_free(out);
    return st;
}

void peat_campaign_state_free(peat_campaign_state *st)
{
    if (st->rt) peat_runtime_result_free(st->rt);
    free(st->rt);
    free(st->argv);
    free(st->capture);
    st->rt = NULL, st->argv = st->capture = NULL;
    st->res.rt = NULL;
}
