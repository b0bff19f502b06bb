/* reduce.c: the row reduction (i = R, C, mode: 0 sum, 1 mean; Y[r] = the row's sum or mean). */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>

#define P(k) (a->p.i[k])

static peat_status reduce_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 2));
    if (P(2) < 0 || P(2) > 1) return PEAT_ERROR(PEAT_ERR_SHAPE, "reduce: mode must be 0 or 1");
    PEAT_TRY(peat_op_expect(a, a->in[0], "X", PEAT_DTYPE_F32, P(0) * P(1)));
    return peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, P(0));
}
/* a mean is C-1 adds and a divide, or the sum times a rounded 1/C: one rounding more */
static int64_t reduce_depth(const peat_op_params *p)
{
    return p->i[1] + (p->i[2] == 1);
}

/* the row sum of |x|; for the mean, sum|x|/C bounds u((C-1) sum|x| + |sum|)/C by C u sum|x|/C,
 * so the exact mean of |x| serves as well */
static peat_status reduce_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                              const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    return peat_op_mag_abs(a, in, n, mag);
}

/* A reduce probe of REDUCE_ROWS rows of length len, the recorded values cycled: enough outputs
 * for the statistical rules (a recorded call may hold a single row). */
#define REDUCE_ROWS 256
static peat_args *reduce_probe(peat_probe_sink *s, const peat_record *rec, peat_probe_kind kind,
                               peat_probe_tag tag, const char *label, int64_t len)
{
    peat_args *p = s->add(s->ctx, kind, tag, label);
    peat_tensor *t = NULL;
    if (!p || peat_tensor_alloc2(PEAT_DTYPE_F32, REDUCE_ROWS, len, &t) != PEAT_OK) return NULL;
    p->op = rec->op, p->p = rec->p;
    p->p.i[0] = REDUCE_ROWS, p->p.i[1] = len;
    p->in[0] = t, p->n_in = 1;
    const float *x = rec->in[0]->data;
    int64_t n = peat_tensor_numel(rec->in[0]);
    float *y = t->data;
    /* recorded values times a hashed factor in [0.5, 1.5): their signs and scale, but rows that
     * do not repeat each other's rounding errors */
    for (int64_t e = 0; e < REDUCE_ROWS * len; e++) {
        uint64_t h = (uint64_t)(e + 1) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        y[e] = x[(e * 7919) % n] * (float)(0.5 + (double)(h >> 11) * 0x1p-53);
    }
    return p;
}

/* alternating magnitudes 1 and 1e6, and halves +x, -x(1 + 2^-20) that cancel */
static peat_status reduce_values(peat_probe_sink *s, const peat_record *rec)
{
    int64_t C = rec->p.i[1];
    peat_args *p = reduce_probe(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_NONE,
                                "value mixed magnitudes (x 1 and x 1e6)", C);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "reduce probe");
    float *x = peat_op_probe_f32(p, 0);
    for (int64_t i = 0; i < peat_op_probe_numel(p, 0); i++) x[i] *= i % 2 ? 1e6f : 1.0f;
    /* each row's second half negates its first: the terms cancel late in any order (as the
     * GEMM cancellation probe), so no order is favoured */
    int64_t L = C + C % 2;
    p = reduce_probe(s, rec, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_CANCEL,
                     "value cancelling halves (+x, -x(1 + 2^-20))", L);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "reduce probe");
    x = peat_op_probe_f32(p, 0);
    for (int64_t r = 0; r < REDUCE_ROWS; r++)
        for (int64_t j = L / 2; j < L; j++)
            x[r * L + j] = -x[r * L + j - L / 2] * (1.0f + 0x1p-20f);
    return PEAT_OK;
}

/* reductions: row lengths that leave a remainder for every block size up to 64 (1..9 and one
 * either side of 16, 32, 64, 128), the recorded values cycled */
static peat_status reduce_lengths(peat_probe_sink *s, const peat_record *rec)
{
    static const int64_t lens[] = {1, 2, 3, 4, 5, 6, 7, 9, 15, 17, 31, 33, 63, 65, 127, 129};
    char label[96];
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        if (lens[i] == rec->p.i[1]) continue;
        snprintf(label, sizeof label, "shape row length %lld (recorded %lld)", (long long)lens[i],
                 (long long)rec->p.i[1]);
        if (!reduce_probe(s, rec, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, lens[i]))
            return PEAT_ERROR(PEAT_ERR_NOMEM, "reduce probe");
    }
    return PEAT_OK;
}

static peat_status reduce_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    PEAT_TRY(reduce_lengths(s, recs->items[0]));
    return reduce_values(s, recs->items[0]);
}

static int reduce_perm(const peat_args *a, peat_op_perm *out)
{
    return peat_op_perm_rows_cols(a, out, 0, 0, 1);
}

static void reduce_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                          peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[1], 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

/* ---- small integers: each row's values as -1, 0, 1, at most PEAT_OP_INT_TERMS of them nonzero
 * (the mean's division by C is exact only where C is a power of two: the stage reads which
 * outputs came out exact) ---- */
static unsigned reduce_integers(peat_args *a)
{
    int64_t R = P(0), C = P(1), st = peat_op_int_stride(C);
    peat_op_int_values(a, 0);
    float *x = (float *)a->in[0]->data;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < C; j++)
            if ((j + r) % st) x[r * C + j] = 0.0f;
    return 1u;
}

const peat_op_desc peat_opd_reduce = {
    .info = {PEAT_OP_REDUCE, "reduce", 1, 1, 1, 0, reduce_check, peat_op_rows_shapes, reduce_depth,
             peat_op_row_flops},
    .magnitude = reduce_mag,
    .terms = peat_op_terms_depth,
    .probes = reduce_probes,
    .range_low = 1u << 0, /* X */
    .range_high = 1u << 0,
    .perm = reduce_perm,
    .integers = reduce_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_row_cal,
    .input_shapes = reduce_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "sum,mean",
};
