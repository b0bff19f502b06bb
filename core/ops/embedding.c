/* embedding.c: the embedding gather (Y[n,:] = table[idx[n],:]) and its backward, the
 * scatter-add of dY into a zeroed table gradient. */
#include "core/opdesc.h"

#include <math.h>

#define P(k) (a->p.i[k])

static peat_status emb_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 3));
    int64_t N = P(0), V = P(1), D = P(2);
    const peat_tensor *idx = a->op == PEAT_OP_EMBEDDING ? a->in[1] : a->in[0];
    PEAT_TRY(peat_op_expect(a, idx, "idx", PEAT_DTYPE_I32, N));
    if (idx) {
        const int32_t *t = peat_i32(idx);
        for (int64_t r = 0; r < N; r++)
            if (t[r] < 0 || t[r] >= V)
                return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: idx[%lld] = %d outside [0,%lld)",
                                  peat_op_name(a->op), (long long)r, t[r], (long long)V);
    }
    if (a->op == PEAT_OP_EMBEDDING) {
        PEAT_TRY(peat_op_expect(a, a->in[0], "table", PEAT_DTYPE_F32, V * D));
        return peat_op_expect(a, peat_op_out(a, 0), "Y", PEAT_DTYPE_F32, N * D);
    }
    PEAT_TRY(peat_op_expect(a, a->in[1], "dY", PEAT_DTYPE_F32, N * D));
    return peat_op_expect(a, peat_op_out(a, 0), "dtable", PEAT_DTYPE_F32, V * D);
}
static peat_status emb_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (a->op == PEAT_OP_EMBEDDING)
        peat_op_out_shape(nd, s, 0, 2, P(0), P(2), 0, 0);
    else
        peat_op_out_shape(nd, s, 0, 2, P(1), P(2), 0, 0);
    return PEAT_OK;
}
static int64_t emb_bwd_depth(const peat_op_params *p)
{
    return p->i[0];
}
static double emb_flops(const peat_op_params *p)
{
    return (double)p->i[0] * p->i[2];
}

/* embedding: a copy of the indexed rows */
static peat_status emb_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                           const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    int64_t D = a->p.i[2];
    const int32_t *idx = peat_i32(a->in[1]);
    for (int64_t i = 0; i < n; i++) mag[i] = fabs(in->x[0][(int64_t)idx[i / D] * D + i % D]);
    return PEAT_OK;
}

/* the scatter-add is a plain sum: the exact kernel on |dY| */
static peat_status emb_bwd_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                               const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    return peat_op_mag_abs(a, in, n, mag);
}

/* each table row gathers about N / V token gradients */
static int64_t emb_bwd_terms(const peat_op_params *p, int o, int64_t depth)
{
    (void)o, (void)depth;
    return p->i[1] > 0 ? p->i[0] / p->i[1] : 1;
}

/* every token the same index; every third token the last index V-1 */
static peat_status emb_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    (void)seed;
    const peat_record *rec = recs->items[0];
    int k = rec->op == PEAT_OP_EMBEDDING ? 1 : 0;
    int64_t V = rec->p.i[1];
    peat_args *p = peat_op_probe_clone(s, rec, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE,
                                       "shape every token the same index");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "embedding probe");
    int32_t *ix = (int32_t *)peat_op_probe_f32(p, k);
    for (int64_t i = 1; i < peat_op_probe_numel(p, k); i++) ix[i] = ix[0];
    p = peat_op_probe_clone(s, rec, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE,
                            "shape the last index (V-1) every third token");
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "embedding probe");
    ix = (int32_t *)peat_op_probe_f32(p, k);
    for (int64_t i = 0; i < peat_op_probe_numel(p, k); i += 3) ix[i] = (int32_t)(V - 1);
    return PEAT_OK;
}

static void emb_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 3, (int64_t[]){4 * n + off, 64, 4 + n / 2});
}
static void emb_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                       peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 2, p->i[1], p->i[2], 0, 0, PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_I32);
    *n_in = k;
}
static void emb_bwd_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                           peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 1, p->i[0], 0, 0, 0, PEAT_DTYPE_I32);
    peat_op_shape(nd, s, dt, &k, 2, p->i[0], p->i[2], 0, 0, PEAT_DTYPE_F32);
    *n_in = k;
}

const peat_op_desc peat_opd_embedding = {
    .info = {PEAT_OP_EMBEDDING, "embedding", 2, 2, 1, 0, emb_check, emb_shapes, peat_op_depth_one,
             emb_flops},
    .magnitude = emb_mag,
    .terms = peat_op_terms_one,
    .probes = emb_probes,
    .range_low = 1u << 0, /* the table */
    .range_high = 1u << 0,
    .perm = peat_op_perm_none,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = emb_cal,
    .input_shapes = emb_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "embedding",
};

/* the large end: scatter-adds of large rows say nothing new */
/* ---- small integers: dY as -1, 0, 1, at most PEAT_OP_INT_TERMS tokens nonzero (a row of the
 * table sums the tokens of its index) ---- */
static unsigned embedding_bwd_integers(peat_args *a)
{
    int64_t N = P(0), D = P(2), st = peat_op_int_stride(N);
    peat_op_int_values(a, 1);
    float *x = (float *)a->in[1]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++)
            if ((n + d) % st) x[n * D + d] = 0.0f;
    return 1u;
}

const peat_op_desc peat_opd_embedding_bwd = {
    .info = {PEAT_OP_EMBEDDING_BWD, "embedding_bwd", 2, 2, 1, 1, emb_check, emb_shapes,
             emb_bwd_depth, emb_flops},
    .magnitude = emb_bwd_mag,
    .terms = emb_bwd_terms,
    .probes = emb_probes,
    .range_low = 1u << 1, /* dY */
    .range_high = 0,
    .perm = peat_op_perm_none,
    .integers = embedding_bwd_integers,
    .invariant = peat_op_invariant_none,
    .cal_params = emb_cal,
    .input_shapes = emb_bwd_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "embedding_dense_backward",
};
