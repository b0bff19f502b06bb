/* json.c: a signature as one JSON object with a fixed key order (non-finite numbers -> null). */
#include "analyzer/analyzer.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* snprintf-style appender: keeps counting past the end so the caller learns the size needed. */
typedef struct jbuf {
    char *buf;
    size_t n, len;
} jbuf;

static void put(jbuf *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = j->len < j->n ? j->n - j->len : 0;
    int w = vsnprintf(room ? j->buf + j->len : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0) j->len += (size_t)w;
}

static void num(jbuf *j, const char *key, double v)
{
    if (isfinite(v))
        put(j, ",\"%s\":%.17g", key, v);
    else
        put(j, ",\"%s\":null", key);
}

static void i64(jbuf *j, const char *key, int64_t v)
{
    put(j, ",\"%s\":%" PRId64, key, v);
}

static void arr(jbuf *j, const char *key, const double *v, int n)
{
    put(j, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        if (isfinite(v[i]))
            put(j, "%s%.17g", i ? "," : "", v[i]);
        else
            put(j, "%snull", i ? "," : "");
    }
    put(j, "]");
}

/* Kernel and op names come from the registry (identifiers); quotes and control characters are
 * escaped anyway so that a plugin's odd name cannot break the file. */
static void escaped(jbuf *j, const char *v)
{
    for (const char *p = v; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            put(j, "\\%c", c);
        else if (c < 0x20)
            put(j, "\\u%04x", c);
        else
            put(j, "%c", c);
    }
}

static void str(jbuf *j, const char *key, const char *v)
{
    put(j, ",\"%s\":\"", key);
    escaped(j, v);
    put(j, "\"");
}

size_t peat_analyzer_json_escape(char *buf, size_t n, const char *s)
{
    jbuf j = {buf, n, 0};
    if (n > 0) buf[0] = '\0';
    escaped(&j, s);
    return j.len;
}

int peat_analyzer_signature_to_json(const peat_signature *s, char *buf, size_t n)
{
    jbuf j = {buf, n, 0};
    if (n > 0) buf[0] = '\0';
    put(&j, "{\"version\":%d", s->version);
    str(&j, "kernel", s->kernel);
    str(&j, "op", s->op);
    i64(&j, "n_calls", s->n_calls);
    i64(&j, "n_elems", s->n_elems);
    i64(&j, "depth_max", s->depth_max);
    i64(&j, "n_exact_zero", s->n_exact_zero);
    i64(&j, "n_nan", s->n_nan);
    i64(&j, "n_inf", s->n_inf);
    i64(&j, "n_equal_rounded", s->n_equal_rounded);
    i64(&j, "n_nonzero_err", s->n_nonzero_err);
    put(&j, ",\"test_hash\":\"%016" PRIx64 "\"", s->test_hash);
    num(&j, "max_abs_exact", s->max_abs_exact);
    num(&j, "rms_exact", s->rms_exact);
    num(&j, "max_abs", s->max_abs);
    num(&j, "mean_abs", s->mean_abs);
    num(&j, "rms_abs", s->rms_abs);
    num(&j, "max_rel", s->max_rel);
    num(&j, "mean_rel", s->mean_rel);
    num(&j, "median_rel", s->median_rel);
    num(&j, "max_norm", s->max_norm);
    num(&j, "mean_norm", s->mean_norm);
    num(&j, "p50_norm", s->p50_norm);
    num(&j, "p99_norm", s->p99_norm);
    i64(&j, "n_over_bound", s->n_over_bound);
    num(&j, "frac_over_bound", s->frac_over_bound);
    num(&j, "rms_rel_mag", s->rms_rel_mag);
    num(&j, "eff_bits", s->eff_bits);
    num(&j, "bias_t", s->bias_t);
    num(&j, "frac_err_negative", s->frac_err_negative);
    arr(&j, "ulp_hist", s->ulp_hist, PEAT_ULP_BINS);
    num(&j, "max_ulp", s->max_ulp);
    arr(&j, "bit_hist", s->bit_hist, PEAT_BIT_POSITIONS);
    arr(&j, "bit_set", s->bit_set, PEAT_BIT_POSITIONS);
    arr(&j, "bit_clr", s->bit_clr, PEAT_BIT_POSITIONS);
    i64(&j, "test_mant_bits", s->test_mant_bits);
    num(&j, "top1pct_share", s->top1pct_share);
    i64(&j, "n_err_subnormal_exact", s->n_err_subnormal_exact);
    num(&j, "min_exact_at_inf", s->min_exact_at_inf);
    num(&j, "max_exact_finite", s->max_exact_finite);
    i64(&j, "n_zero_introduced", s->n_zero_introduced);
    num(&j, "max_exact_at_zero", s->max_exact_at_zero);
    num(&j, "min_exact_nonzero", s->min_exact_nonzero);
    i64(&j, "n_gross", s->n_gross);
    num(&j, "gross_single_bit", s->gross_single_bit);
    arr(&j, "gross_bit", s->gross_bit, PEAT_BIT_POSITIONS);
    num(&j, "gross_dir_set", s->gross_dir_set);
    i64(&j, "gross_stride", s->gross_stride);
    num(&j, "box_fill", s->box_fill);
    num(&j, "box_share", s->box_share);
    i64(&j, "box_rows", s->box_rows);
    i64(&j, "box_cols", s->box_cols);
    i64(&j, "box_tensor_rows", s->box_tensor_rows);
    i64(&j, "box_tensor_cols", s->box_tensor_cols);
    i64(&j, "box_at_bottom", s->box_at_bottom);
    i64(&j, "box_at_right", s->box_at_right);
    num(&j, "frac_err_in_last_tile", s->frac_err_in_last_tile);
    num(&j, "corr_err_input", s->corr_err_input);
    num(&j, "err_roughness", s->err_roughness);
    num(&j, "err_sign_changes", s->err_sign_changes);
    num(&j, "repeat_max_diff", s->repeat_max_diff);
    i64(&j, "repeat_n_diff", s->repeat_n_diff);
    put(&j, "}");
    return (int)j.len;
}
