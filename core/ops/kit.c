/* kit.c: helpers the op descriptor files share (core/opdesc.h). */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void peat_op_mag_in_free(peat_op_mag_in *m)
{
    for (int k = 0; k < PEAT_MAX_IO; k++) free(m->x[k]), m->x[k] = NULL;
}

peat_status peat_op_mag_in_load(const peat_args *a, peat_op_mag_in *m)
{
    memset(m, 0, sizeof *m);
    for (int k = 0; k < a->n_in; k++) {
        const peat_tensor *t = a->in[k];
        if (t->dtype == PEAT_DTYPE_I32) continue;
        int64_t n = peat_tensor_numel(t);
        double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
        if (!d) {
            peat_op_mag_in_free(m);
            return PEAT_ERROR(PEAT_ERR_NOMEM, "magnitude: %lld doubles", (long long)n);
        }
        if (t->dtype == PEAT_DTYPE_F64)
            memcpy(d, t->data, (size_t)n * sizeof *d);
        else
            for (int64_t i = 0; i < n; i++) d[i] = (double)((const float *)t->data)[i];
        m->x[k] = d;
    }
    return PEAT_OK;
}

peat_status peat_op_mag_abs(const peat_args *a, const peat_op_mag_in *in, int64_t n, double *mag)
{
    const peat_kernel *k = peat_registry_role(a->op, PEAT_ROLE_EXACT, NULL);
    if (!k) return PEAT_ERROR(PEAT_ERR_INTERNAL, "no exact kernel for %s", peat_op_name(a->op));
    peat_args b = *a;
    peat_tensor *abs_in[PEAT_MAX_IO] = {0}, *out = NULL;
    int64_t shp = n;
    peat_status s = peat_tensor_wrap(PEAT_DTYPE_F64, 1, &shp, mag, &out);
    for (int i = 0; i < a->n_in && s == PEAT_OK; i++) {
        if (!in->x[i]) continue; /* I32 indices pass through unchanged */
        /* |x| in the input's own dtype (exact in float), for kernels that read F32 only */
        peat_dtype dt = a->in[i]->dtype == PEAT_DTYPE_F64 ? PEAT_DTYPE_F64 : PEAT_DTYPE_F32;
        s = peat_tensor_alloc(dt, a->in[i]->ndim, a->in[i]->shape, &abs_in[i]);
        if (s != PEAT_OK) break;
        int64_t m = peat_tensor_numel(a->in[i]);
        for (int64_t j = 0; j < m; j++) {
            if (dt == PEAT_DTYPE_F64)
                peat_f64(abs_in[i])[j] = fabs(in->x[i][j]);
            else
                peat_f32(abs_in[i])[j] = (float)fabs(in->x[i][j]);
        }
        b.in[i] = abs_in[i];
    }
    if (s == PEAT_OK) {
        b.n_out = 1;
        b.out[0] = out;
        s = k->fn(&b, k);
    }
    for (int i = 0; i < PEAT_MAX_IO; i++) peat_tensor_free(abs_in[i]);
    peat_tensor_free(out);
    return s;
}

peat_status peat_op_mag_value(const peat_args *a, const peat_tensor *exact_out, int64_t n,
                              double *mag)
{
    if (!exact_out || peat_tensor_numel(exact_out) != n)
        return PEAT_ERROR(PEAT_ERR_INVAL, "magnitude of %s needs the exact output",
                          peat_op_name(a->op));
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(peat_tensor_get(exact_out, i));
    return PEAT_OK;
}

int64_t peat_op_terms_depth(const peat_op_params *p, int o, int64_t depth)
{
    (void)p, (void)o;
    return depth;
}

int64_t peat_op_terms_one(const peat_op_params *p, int o, int64_t depth)
{
    (void)p, (void)o, (void)depth;
    return 1;
}

int peat_op_perm_none(const peat_args *a, peat_op_perm *out)
{
    (void)a, (void)out;
    return 0;
}

unsigned peat_op_integers_none(peat_args *a)
{
    (void)a;
    return 0;
}

double peat_op_gamma(int64_t depth)
{
    double ku = (double)(depth > 0 ? depth : 1) * 0x1p-24;
    return ku < 0.5 ? ku / (1.0 - ku) : ku;
}

double peat_op_underflow_mag(int64_t depth, double roundings)
{
    return roundings * 0x1p-150 / peat_op_gamma(depth);
}

double peat_op_invariant_none(const peat_args *a)
{
    (void)a;
    return NAN;
}

void peat_op_int_values(peat_args *a, int k)
{
    peat_tensor *t = (peat_tensor *)a->in[k];
    if (t->dtype != PEAT_DTYPE_F32) return;
    float *x = t->data;
    /* a fixed draw per (input, element), a splitmix64 stream per input: whatever the base's
     * values, so that a factor near 1 (a norm's gamma) does not become 1 everywhere and hide a
     * formula */
    uint64_t state = (uint64_t)(k + 1) * 0xD1B54A32D192ED03ull - 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < peat_tensor_numel(t); i++) {
        unsigned v = (unsigned)(peat_splitmix64(&state) & 7u);
        x[i] = v < 2 ? 0.0f : v < 5 ? 1.0f : -1.0f;
    }
}

void peat_op_int_fill(peat_args *a, int k, float v)
{
    peat_tensor *t = (peat_tensor *)a->in[k];
    if (t->dtype != PEAT_DTYPE_F32) return;
    float *x = t->data;
    for (int64_t i = 0; i < peat_tensor_numel(t); i++) x[i] = v;
}

int64_t peat_op_int_stride(int64_t terms)
{
    return terms > PEAT_OP_INT_TERMS ? (terms + PEAT_OP_INT_TERMS - 1) / PEAT_OP_INT_TERMS : 1;
}

void peat_op_int_short_means(peat_args *a, int k, int64_t G, int64_t M, int64_t S, int64_t gs,
                             int64_t os)
{
    peat_tensor *t = (peat_tensor *)a->in[k];
    if (t->dtype != PEAT_DTYPE_F32 || M <= 0 || S <= 0) return;
    peat_op_int_values(a, k);
    float *x = t->data;
    int64_t st = peat_op_int_stride(M), odd = M;
    while (odd % 2 == 0) odd /= 2;
    for (int64_t g = 0; g < G; g++) {
        int64_t sum = 0, kept = 0;
        for (int64_t m = 0; m < M; m++) {
            float *v = &x[g * gs + m / S * os + m % S];
            if ((m + g) % st)
                *v = 0.0f;
            else
                sum += (int64_t)*v, kept++;
        }
        /* the nearest multiple of the odd part toward zero; a nonzero one where it fits */
        int64_t q = sum / odd;
        if (q == 0 && odd <= kept) q = sum >= 0 ? 1 : -1;
        for (int64_t m = 0, T = q * odd; m < M && sum != T; m++) {
            float *v = &x[g * gs + m / S * os + m % S];
            if ((m + g) % st) continue;
            while (sum < T && *v < 1.0f) *v += 1.0f, sum++;
            while (sum > T && *v > -1.0f) *v -= 1.0f, sum--;
        }
    }
}

void peat_op_int_sparse_rows_cols(peat_args *a, int k, int64_t R, int64_t C)
{
    peat_tensor *t = (peat_tensor *)a->in[k];
    if (t->dtype != PEAT_DTYPE_F32 || peat_tensor_numel(t) != R * C) return;
    float *x = t->data;
    /* a diagonal pattern: every row and every column keeps some terms (a defect in one row or
     * column stays visible), each sum at most PEAT_OP_INT_TERMS of them */
    int64_t sr = peat_op_int_stride(R), sc = peat_op_int_stride(C), st = sr > sc ? sr : sc;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < C; j++)
            if ((r + j) % st) x[r * C + j] = 0.0f;
}

int peat_op_gemm_view_none(const peat_op_params *p, peat_op_gemm_view *v)
{
    (void)p, (void)v;
    return 0;
}

void peat_op_amp_none(const peat_args *a, unsigned *in, unsigned *out)
{
    (void)a;
    *in = *out = 0;
}

peat_status peat_op_probes_none(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)s, (void)recs, (void)seed;
    return PEAT_OK;
}

/* ---- probes ---- */

peat_args *peat_op_probe_clone(peat_probe_sink *s, const peat_record *rec, peat_probe_kind kind,
                               peat_probe_tag tag, const char *label)
{
    peat_args *a = s->add(s->ctx, kind, tag, label);
    if (!a) return NULL;
    a->op = rec->op, a->p = rec->p;
    for (int k = 0; k < rec->n_in; k++) {
        peat_tensor *t = NULL;
        if (peat_tensor_clone(rec->in[k], &t) != PEAT_OK) return NULL;
        a->in[k] = t, a->n_in = k + 1;
    }
    return a;
}

float *peat_op_probe_f32(peat_args *a, int k)
{
    return (float *)((peat_tensor *)a->in[k])->data;
}

int64_t peat_op_probe_numel(const peat_args *a, int k)
{
    return peat_tensor_numel(a->in[k]);
}

double peat_op_maxabs(const peat_tensor *t)
{
    const float *x = t->data;
    double m = 0.0;
    for (int64_t i = 0; i < peat_tensor_numel(t); i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    return m > 0.0 ? m : 1.0;
}

double peat_op_rms(const peat_tensor *t)
{
    const float *x = t->data;
    double s = 0.0;
    int64_t n = peat_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) s += isfinite(x[i]) ? (double)x[i] * x[i] : 0.0;
    return n > 0 && s > 0.0 ? sqrt(s / (double)n) : 1.0;
}

peat_status peat_op_probe_scaled(peat_probe_sink *s, const peat_record *rec, peat_probe_tag tag,
                                 const char *label, int k, double scale, double shift)
{
    peat_args *a = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, tag, label);
    if (!a) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe %s", label);
    float *x = peat_op_probe_f32(a, k);
    for (int64_t i = 0; i < peat_op_probe_numel(a, k); i++)
        x[i] = (float)(shift + scale * (double)x[i]);
    return PEAT_OK;
}

double peat_op_var_err(double n, double var, double A, double Ad)
{
    return (n + 4.0) * var + n * Ad * A + n * n * 0x1p-24 * A * A;
}

peat_status peat_op_probe_zeros(peat_probe_sink *s, const peat_record *rec, int k)
{
    peat_args *a = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                       "value exact zeros (every 5th x = 0)");
    if (!a) return PEAT_ERROR(PEAT_ERR_NOMEM, "zeros probe");
    float *x = peat_op_probe_f32(a, k);
    for (int64_t i = 0; i < peat_op_probe_numel(a, k); i += 5) x[i] = 0.0f;
    return PEAT_OK;
}

peat_status peat_op_probe_zero_rows(peat_probe_sink *s, const peat_record *rec, int k,
                                    int64_t planes, int64_t rows, int64_t cols, const char *label)
{
    peat_args *a = peat_op_probe_clone(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE, label);
    if (!a) return PEAT_ERROR(PEAT_ERR_NOMEM, "zero rows probe");
    float *x = peat_op_probe_f32(a, k);
    if (peat_op_probe_numel(a, k) != planes * rows * cols)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "zero rows probe: input %d is not %lldx%lldx%lld", k,
                          (long long)planes, (long long)rows, (long long)cols);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t r = 0; r < rows; r += 4)
            memset(x + (p * rows + r) * cols, 0, (size_t)cols * sizeof *x);
    return PEAT_OK;
}

peat_status peat_op_probe_fresh(peat_probe_sink *s, const peat_record *rec, peat_rng_t *r,
                                const peat_op_params *q, const int64_t *sizes, int n_in,
                                const char *label)
{
    peat_args *a = s->add(s->ctx, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label);
    if (!a) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    a->op = rec->op, a->p = *q;
    for (int k = 0; k < n_in; k++) {
        peat_tensor *t = NULL;
        PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, 1, &sizes[k], &t));
        a->in[k] = t, a->n_in = k + 1;
        peat_rng_fill_gaussian(r, t, peat_op_rms(rec->in[k]));
    }
    return PEAT_OK;
}

/* ---- shape checks ---- */

peat_status peat_op_expect(const peat_args *a, const peat_tensor *t, const char *what,
                           peat_dtype dt, int64_t n)
{
    if (!t) return PEAT_OK; /* outputs may be absent when only inputs are checked */
    if (t->dtype != dt && !(dt == PEAT_DTYPE_F32 && t->dtype == PEAT_DTYPE_F64))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: %s has dtype %s, expected %s", peat_op_name(a->op),
                          what, peat_dtype_name(t->dtype), peat_dtype_name(dt));
    if (peat_tensor_numel(t) != n)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: %s has %lld elements, expected %lld",
                          peat_op_name(a->op), what, (long long)peat_tensor_numel(t), (long long)n);
    return PEAT_OK;
}

peat_status peat_op_positive(const peat_args *a, int n)
{
    for (int k = 0; k < n; k++)
        if (a->p.i[k] <= 0 || a->p.i[k] > (1LL << 31))
            return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: param i[%d] = %lld is not a sane size",
                              peat_op_name(a->op), k, (long long)a->p.i[k]);
    return PEAT_OK;
}

const peat_tensor *peat_op_out(const peat_args *a, int k)
{
    return k < a->n_out ? a->out[k] : NULL;
}

void peat_op_out_shape(int *nd, int64_t s[][PEAT_MAX_DIMS], int o, int n, int64_t d0, int64_t d1,
                       int64_t d2, int64_t d3)
{
    nd[o] = n;
    s[o][0] = d0, s[o][1] = d1, s[o][2] = d2, s[o][3] = d3;
}

peat_status peat_op_probe_from_record(peat_probe_sink *s, const peat_record *rec,
                                      peat_probe_tag tag, const char *label, int which,
                                      double scale, double shift, int which2)
{
    peat_args *p = s->add(s->ctx, PEAT_PROBE_VALUE, tag, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    p->op = rec->op, p->p = rec->p;
    for (int k = 0; k < rec->n_in; k++) {
        peat_tensor *t = NULL;
        PEAT_TRY(peat_tensor_clone(rec->in[k], &t));
        p->in[k] = t, p->n_in = k + 1;
        if ((k != which && k != which2) || t->dtype != PEAT_DTYPE_F32) continue;
        float *x = t->data;
        for (int64_t e = 0; e < peat_tensor_numel(t); e++)
            x[e] = (float)(shift + scale * (double)x[e]);
    }
    return PEAT_OK;
}

/* A tensor of `outer` blocks of n rows of `width` values, from src's blocks of m rows, each
 * block's rows cycled: the recorded values at another row count. */
static peat_status cycle_rows(const peat_tensor *src, int64_t outer, int64_t m, int64_t n,
                              int64_t width, peat_tensor **out)
{
    int64_t shape[PEAT_MAX_DIMS];
    int nd = src->ndim;
    for (int d = 0; d < nd; d++) shape[d] = src->shape[d];
    if (outer == 1) /* row-wise ops: any leading dimensions are rows; the probe is [n, width] */
        nd = 2, shape[0] = n, shape[1] = width;
    else
        shape[nd - 2] = n; /* attention [B,H,T,D]: T is the one before the last */
    PEAT_TRY(peat_tensor_alloc(PEAT_DTYPE_F32, nd, shape, out));
    const float *x = src->data;
    float *y = (*out)->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t r = 0; r < n; r++)
            memcpy(y + (o * n + r) * width, x + (o * m + r % m) * width, (size_t)width * sizeof *y);
    return PEAT_OK;
}

/* Shape probes for row-wise ops (softmax, layernorm: rows R) and attention (sequence T): the
 * recorded call's values at awkward row counts and a longer sequence. */
static peat_status rows_probe(peat_probe_sink *s, const peat_record *rec, int64_t n, int attn)
{
    int64_t m = attn ? rec->p.i[2] : rec->p.i[0];
    int64_t width = attn ? rec->p.i[3] : rec->p.i[1];
    int64_t outer = attn ? rec->p.i[0] * rec->p.i[1] : 1;
    char label[96];
    snprintf(label, sizeof label,
             attn ? "shape T=%lld (recorded %lld)" : "shape rows=%lld (recorded %lld)",
             (long long)n, (long long)m);
    peat_args *p = s->add(s->ctx, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_EXTENT, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    p->op = rec->op, p->p = rec->p;
    p->p.i[attn ? 2 : 0] = n;
    int n_rowwise = attn ? 3 : 1; /* Q, K, V / X: the rest (gamma, beta) keep their shape */
    for (int k = 0; k < rec->n_in; k++) {
        peat_tensor *t = NULL;
        /* each input's own planes (grouped-query attention: fewer K/V heads than query heads) */
        int64_t outer_k = attn ? peat_tensor_numel(rec->in[k]) / (m * width) : outer;
        if (k < n_rowwise)
            PEAT_TRY(cycle_rows(rec->in[k], outer_k, m, n, width, &t));
        else
            PEAT_TRY(peat_tensor_clone(rec->in[k], &t));
        p->in[k] = t, p->n_in = k + 1;
    }
    return PEAT_OK;
}

peat_status peat_op_probe_row_counts(peat_probe_sink *s, const peat_record *rec, int attn)
{
    int64_t m = attn ? rec->p.i[2] : rec->p.i[0];
    const int64_t sizes[] = {1, 3, 7, 9, 17, 33, 65, m + 1, attn ? 4 * m + 1 : 2 * m + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] != m && (i == 0 || sizes[i] != sizes[i - 1]))
            PEAT_TRY(rows_probe(s, rec, sizes[i], attn));
    return PEAT_OK;
}

peat_status peat_op_probe_row_lengths(peat_probe_sink *s, const peat_record *rec)
{
    static const int64_t lens[] = {1, 3, 5, 7, 17, 33, 65, 129};
    int64_t R = rec->p.i[0] < 64 ? rec->p.i[0] : 64, C0 = rec->p.i[1], rows = rec->p.i[0] * C0;
    peat_status st = PEAT_OK;
    char label[96];
    for (size_t i = 0; st == PEAT_OK && i < sizeof lens / sizeof lens[0]; i++) {
        int64_t C = lens[i];
        if (C == C0) continue;
        snprintf(label, sizeof label, "shape row length %lld (recorded %lld)", (long long)C,
                 (long long)C0);
        peat_args *a = s->add(s->ctx, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_EXTENT, label);
        if (!a) {
            st = PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
            break;
        }
        a->op = rec->op, a->p = rec->p, a->p.i[0] = R, a->p.i[1] = C;
        for (int k = 0; st == PEAT_OK && k < rec->n_in; k++) {
            int row = peat_tensor_numel(rec->in[k]) == rows;
            int64_t n = row ? R * C : C;
            peat_tensor *t = NULL;
            st = peat_tensor_alloc(PEAT_DTYPE_F32, 1, &n, &t);
            if (st != PEAT_OK) break;
            a->in[k] = t, a->n_in = k + 1;
            /* the recorded values, each row (vector) cut short or cycled to the new length */
            const float *x = rec->in[k]->data;
            float *y = t->data;
            for (int64_t q = 0; q < n; q++) y[q] = row ? x[q / C * C0 + q % C % C0] : x[q % C0];
        }
    }
    return st;
}

/* ---- synthetic calls ---- */

void peat_op_shape(int *nd, int64_t s[][PEAT_MAX_DIMS], peat_dtype *dt, int *k, int d, int64_t a,
                   int64_t b, int64_t c, int64_t e, peat_dtype t)
{
    nd[*k] = d;
    s[*k][0] = a, s[*k][1] = b, s[*k][2] = c, s[*k][3] = e;
    dt[*k] = t;
    (*k)++;
}

void peat_op_params_set(peat_op_params *p, int count, const int64_t *v)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < count; i++) p->i[i] = v[i] > 0 ? v[i] : 1;
}

/* ---- families ---- */

peat_status peat_op_ew_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 1));
    for (int k = 0; k < a->n_in; k++)
        PEAT_TRY(peat_op_expect(a, a->in[k], k ? "dY" : "X", PEAT_DTYPE_F32, a->p.i[0]));
    return peat_op_expect(a, peat_op_out(a, 0), a->n_in > 1 ? "dX" : "Y", PEAT_DTYPE_F32,
                          a->p.i[0]);
}

peat_status peat_op_ew_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    peat_op_out_shape(nd, s, 0, 1, a->p.i[0], 0, 0, 0);
    return PEAT_OK;
}

int64_t peat_op_depth_one(const peat_op_params *p)
{
    (void)p;
    return 1;
}

double peat_op_ew_flops(const peat_op_params *p)
{
    return (double)p->i[0] * 8;
}

void peat_op_ew_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 1, (int64_t[]){16 * n * n + off});
}

void peat_op_ew_inputs1(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

void peat_op_ew_inputs2(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[])
{
    int k = 0;
    for (int r = 0; r < 2; r++) peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

int peat_op_perm_elements(const peat_args *a, peat_op_perm *out)
{
    int64_t n = peat_tensor_numel(a->in[0]);
    out->len[0] = n;
    for (int k = 0; k < a->n_in; k++)
        if (peat_tensor_numel(a->in[k]) == n) {
            out->in_mask |= 1u << k;
            out->in[k] = peat_op_view(1, 1, n, -1, -1, 0);
        }
    out->out = peat_op_view(1, 1, n, -1, -1, 0);
    return 1;
}

int64_t peat_op_row_depth(const peat_op_params *p)
{
    return p->i[1];
}

double peat_op_row_flops(const peat_op_params *p)
{
    return 5.0 * p->i[0] * p->i[1];
}

peat_status peat_op_rc_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    peat_op_out_shape(nd, s, 0, 2, a->p.i[0], a->p.i[1], 0, 0);
    return PEAT_OK;
}

peat_status peat_op_rows_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    peat_op_out_shape(nd, s, 0, 1, a->p.i[0], 0, 0, 0);
    return PEAT_OK;
}

void peat_op_row_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 2, (int64_t[]){2 * n + off, 2 * n + 3 * off});
    p->i[2] = 0;
    p->f[0] = 1e-5;
}

int peat_op_perm_rows_cols(const peat_args *a, peat_op_perm *out, unsigned cols_mask,
                           unsigned rows_mask, int out_rows)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    out->len[0] = R, out->len[1] = C;
    for (int k = 0; k < a->n_in; k++) {
        int cols = cols_mask >> k & 1u, rows = rows_mask >> k & 1u;
        peat_op_perm_view v = cols   ? peat_op_view(1, 1, C, -1, -1, 1)
                              : rows ? peat_op_view(1, 1, R, -1, -1, 0)
                                     : peat_op_view(1, R, C, -1, 0, 1);
        if (peat_tensor_numel(a->in[k]) == v.P * v.R * v.C) out->in_mask |= 1u << k, out->in[k] = v;
    }
    out->out = out_rows ? peat_op_view(1, 1, R, -1, -1, 0) : peat_op_view(1, R, C, -1, 0, 1);
    return 1;
}
