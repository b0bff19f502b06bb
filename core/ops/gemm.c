/* gemm.c: the GEMM op, D = alpha op(A) op(B) + beta C, batched (include/peat/plugin.h has the
 * slots). Its probes are generated shapes and values at the recorded calls' input scale. */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define P(k) (a->p.i[k])

/* ---- GEMM ---- */
peat_status peat_op_gemm_check(const peat_args *a)
{
    const char *op = peat_op_name(a->op);
    int64_t M = P(2), N = P(3), K = P(4), B = P(5);
    if (P(0) < 0 || P(0) > 1 || P(1) < 0 || P(1) > 1)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: transA/transB must be 0 or 1", op);
    if (B <= 0 || B > (1 << 20) || M <= 0 || N <= 0 || K <= 0 || M > (1LL << 31) ||
        N > (1LL << 31) || K > (1LL << 31) || (double)B * M * N > 4e9 || (double)B * M * K > 4e9 ||
        (double)B * K * N > 4e9)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape M=%lld N=%lld K=%lld batch=%lld", op,
                          (long long)M, (long long)N, (long long)K, (long long)B);
    PEAT_TRY(peat_op_expect(a, a->in[0], "A", PEAT_DTYPE_F32, B * M * K));
    PEAT_TRY(peat_op_expect(a, a->in[1], "B", PEAT_DTYPE_F32, B * K * N));
    if (a->p.f[1] != 0.0) {
        if (a->n_in < 3) return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: beta != 0 needs input C", op);
        PEAT_TRY(peat_op_expect(a, a->in[2], "C", PEAT_DTYPE_F32, B * M * N));
    }
    return peat_op_expect(a, peat_op_out(a, 0), "D", PEAT_DTYPE_F32, B * M * N);
}

peat_status peat_op_gemm_out_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    if (P(5) > 1)
        peat_op_out_shape(nd, s, 0, 3, P(5), P(2), P(3), 0);
    else
        peat_op_out_shape(nd, s, 0, 2, P(2), P(3), 0, 0);
    return PEAT_OK;
}

static int64_t gemm_depth(const peat_op_params *p)
{
    return p->i[4] + (p->f[1] != 0.0);
}

double peat_op_gemm_flops(const peat_op_params *p)
{
    return 2.0 * (double)p->i[5] * (double)p->i[2] * (double)p->i[3] * (double)p->i[4];
}

/* sum_k |alpha a_ik b_kj| + |beta c_ij|: the exact GEMM on |A|, |B|, |C| with |alpha|, |beta|
 * (an order-free bound: any summation order's error is within gamma_K of it) */
peat_status peat_op_gemm_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                             const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)exact_out;
    peat_args b = *a;
    b.p.f[0] = fabs(a->p.f[0]), b.p.f[1] = fabs(a->p.f[1]), b.p.f[2] = fabs(a->p.f[2]);
    return peat_op_mag_abs(&b, in, n, mag);
}

typedef struct gemm_scale {
    double sa, sb; /* rms of the recorded A and B values */
    int64_t kmax;
} gemm_scale;

static double rms_of(const peat_tensor *t)
{
    const float *x = t->data;
    int64_t n = peat_tensor_numel(t);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return n > 0 ? sqrt(s / (double)n) : 0.0;
}

static gemm_scale gemm_scale_of(const peat_record_list *recs)
{
    gemm_scale g = {0, 0, 1};
    int n = 0;
    for (int64_t i = 0; i < recs->n; i++) {
        const peat_record *r = recs->items[i];
        g.sa += rms_of(r->in[0]), g.sb += rms_of(r->in[1]), n++;
        if (r->p.i[4] > g.kmax) g.kmax = r->p.i[4];
    }
    g.sa = n && g.sa > 0 ? g.sa / n : 1.0, g.sb = n && g.sb > 0 ? g.sb / n : 1.0;
    return g;
}

/* Inputs of one GEMM probe: A and B drawn N(0, sa^2), N(0, sb^2) (scaled by 2^e each when
 * value-probing), C when beta != 0. */
peat_status peat_op_gemm_probe(peat_probe_sink *s, peat_rng_t *r, peat_probe_kind kind,
                               peat_probe_tag tag, const char *label, peat_op_gemm_shape g,
                               double sa, double sb, peat_args **made)
{
    peat_args *p = s->add(s->ctx, kind, tag, label);
    if (made) *made = p;
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    peat_op_params *q = &p->p;
    p->op = PEAT_OP_GEMM;
    q->i[0] = g.tA, q->i[1] = g.tB, q->i[2] = g.M, q->i[3] = g.N, q->i[4] = g.K, q->i[5] = g.batch;
    q->f[0] = g.alpha, q->f[1] = g.beta;
    peat_tensor *t[3] = {NULL, NULL, NULL};
    int n_in = g.beta != 0.0 ? 3 : 2;
    PEAT_TRY(
        peat_tensor_alloc3(PEAT_DTYPE_F32, g.batch, g.tA ? g.K : g.M, g.tA ? g.M : g.K, &t[0]));
    p->in[0] = t[0], p->n_in = 1;
    PEAT_TRY(
        peat_tensor_alloc3(PEAT_DTYPE_F32, g.batch, g.tB ? g.N : g.K, g.tB ? g.K : g.N, &t[1]));
    p->in[1] = t[1], p->n_in = 2;
    if (n_in == 3) {
        PEAT_TRY(peat_tensor_alloc3(PEAT_DTYPE_F32, g.batch, g.M, g.N, &t[2]));
        p->in[2] = t[2], p->n_in = 3;
    }
    peat_rng_fill_gaussian(r, t[0], sa);
    peat_rng_fill_gaussian(r, t[1], sb);
    if (t[2]) peat_rng_fill_gaussian(r, t[2], sa * sb * sqrt((double)g.K));
    return PEAT_OK;
}

peat_status peat_op_gemm_shape_probes(peat_probe_sink *s, peat_rng_t *r, double sa, double sb,
                                      int64_t kmax, peat_op_probe_finish finish, void *ctx)
{
    peat_args *p = NULL;
    /* awkward sizes: 1, 2, 3, primes, and one either side of the powers of two 32, 64, 128;
     * and square ones (M == N, a path kernels special-case), a power of two and an odd size */
    static const int64_t dims[][3] = {{33, 65, 17},  {31, 63, 129}, {65, 33, 7},  {1, 129, 31},
                                      {127, 2, 65},  {3, 7, 1},     {17, 31, 33}, {129, 127, 3},
                                      {63, 17, 127}, {2, 1, 2},     {37, 41, 43}, {32, 32, 32},
                                      {37, 37, 19}};
    char label[96];
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        peat_op_gemm_shape g = {dims[i][0], dims[i][1], dims[i][2], 0, 0, 1, 1.0, 0.0};
        snprintf(label, sizeof label, "shape %lldx%lldx%lld", (long long)g.M, (long long)g.N,
                 (long long)g.K);
        PEAT_TRY(
            peat_op_gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, g, sa, sb, &p));
        if (finish) PEAT_TRY(finish(p, ctx));
    }
    for (int t = 1; t < 4; t++) {
        peat_op_gemm_shape g = {33, 17, 65, t & 1, t >> 1, 1, 1.0, 0.0};
        snprintf(label, sizeof label, "shape 33x17x65 transA=%d transB=%d", g.tA, g.tB);
        PEAT_TRY(
            peat_op_gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, g, sa, sb, &p));
        if (finish) PEAT_TRY(finish(p, ctx));
    }
    peat_op_gemm_shape gb = {17, 33, 31, 0, 0, 3, 1.0, 0.0};
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE,
                                "shape 17x33x31 batch=3", gb, sa, sb, &p));
    if (finish) PEAT_TRY(finish(p, ctx));
    int64_t klong = 4 * kmax + 1 < 16385 ? 4 * kmax + 1 : 16385;
    peat_op_gemm_shape gk = {8, 9, klong, 0, 0, 1, 1.0, 0.0};
    snprintf(label, sizeof label, "shape 8x9x%lld (K beyond the recorded %lld)", (long long)klong,
             (long long)kmax);
    PEAT_TRY(
        peat_op_gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, gk, sa, sb, &p));
    if (finish) PEAT_TRY(finish(p, ctx));
    peat_op_gemm_shape ga = {33, 31, 17, 0, 0, 1, 0.5, 1.0};
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE,
                                "shape 33x31x17 alpha=0.5 beta=1", ga, sa, sb, &p));
    return finish ? finish(p, ctx) : PEAT_OK;
}

/* Replaces every value by a small integer in [-8, 8]: products and sums are exact in fp32. */
static void integerise(peat_tensor *t)
{
    float *x = t->data;
    for (int64_t i = 0; i < peat_tensor_numel(t); i++)
        x[i] = nearbyintf(fmaxf(-8, fminf(8, 4 * x[i])));
}

/* A's second half of each row is the negation of its first, against B's rows paired equal:
 * large terms that cancel to a small result. */
static void cancelling(peat_tensor *A, peat_tensor *B, int64_t M, int64_t N, int64_t K)
{
    float *a = A->data, *b = B->data;
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = K / 2; k < K; k++)
            a[i * K + k] = -a[i * K + k - K / 2] * (1.0f + 0x1p-20f);
    for (int64_t k = K / 2; k < K; k++)
        for (int64_t j = 0; j < N; j++) b[k * N + j] = b[(k - K / 2) * N + j];
}

static peat_status gemm_values(peat_probe_sink *s, peat_rng_t *r)
{
    peat_args *c = NULL;
    peat_op_gemm_shape g = {33, 31, 64, 0, 0, 1, 1.0, 0.0};
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_SUBNORMAL,
                                "value subnormal inputs (A ~ 2^-133)", g, 0x1p-133, 1.0, NULL));
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_SUBNORMAL,
                                "value subnormal products (A, B ~ 2^-64)", g, 0x1p-64, 0x1p-64,
                                NULL));
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_OVERFLOW,
                                "value near fp32 overflow (A, B ~ 2^60)", g, 0x1p60, 0x1p60, NULL));
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_OVERFLOW,
                                "value sums beyond fp16's 65504 (A, B ~ 64)", g, 64.0, 64.0, NULL));
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_CANCEL,
                                "value cancellation (terms +x and -x(1+2^-20))", g, 1.0, 1.0, &c));
    cancelling((peat_tensor *)c->in[0], (peat_tensor *)c->in[1], g.M, g.N, g.K);
    PEAT_TRY(peat_op_gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_EXACT,
                                "value exactly representable sums (integers)", g, 1.0, 1.0, &c));
    integerise((peat_tensor *)c->in[0]);
    integerise((peat_tensor *)c->in[1]);
    return PEAT_OK;
}

/* awkward shapes (1, 2, 3, primes, one either side of 32, 64, 128; square ones; every
 * transpose; a batch; K beyond the recorded; alpha and beta) and values (subnormal inputs and
 * products, near fp32's overflow, past fp16's 65504, cancellation, exact integer sums) */
static peat_status gemm_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    peat_rng_t *r = peat_rng_new(seed ^ 0x70726f6265ull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    gemm_scale sc = gemm_scale_of(recs);
    peat_status st = peat_op_gemm_shape_probes(s, r, sc.sa, sc.sb, sc.kmax, NULL, NULL);
    if (st == PEAT_OK) st = gemm_values(s, r);
    peat_rng_free(r);
    return st;
}

/* rows of A and C, columns of B and C, and the batch entries of all three */
int peat_op_gemm_perm(const peat_args *a, peat_op_perm *out)
{
    int tA = (int)P(0), tB = (int)P(1);
    int64_t M = P(2), N = P(3), K = P(4), b = P(5) > 0 ? P(5) : 1;
    out->len[0] = M, out->len[1] = N, out->len[2] = b;
    out->in_mask = a->n_in > 2 ? 0x7u : 0x3u;
    out->in[0] = tA ? peat_op_view(b, K, M, 2, -1, 0) : peat_op_view(b, M, K, 2, 0, -1);
    out->in[1] = tB ? peat_op_view(b, N, K, 2, 1, -1) : peat_op_view(b, K, N, 2, -1, 1);
    out->in[2] = peat_op_view(b, M, N, 2, 0, 1);
    out->out = peat_op_view(b, M, N, 2, 0, 1);
    return 1;
}

void peat_op_gemm_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 6, (int64_t[]){0, 0, n + off, n - off, n + 2 * off, 1});
    p->i[0] = p->i[1] = 0;
    p->f[0] = 1.0;
}
void peat_op_gemm_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                         peat_dtype dt[])
{
    const int64_t *i = p->i;
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 3, i[5], i[0] ? i[4] : i[2], i[0] ? i[2] : i[4], 0,
                  PEAT_DTYPE_F32);
    peat_op_shape(nd, s, dt, &k, 3, i[5], i[1] ? i[3] : i[4], i[1] ? i[4] : i[3], 0,
                  PEAT_DTYPE_F32);
    if (p->f[1] != 0.0) peat_op_shape(nd, s, dt, &k, 3, i[5], i[2], i[3], 0, PEAT_DTYPE_F32);
    *n_in = k;
}
int peat_op_gemm_view_of(const peat_op_params *p, peat_op_gemm_view *v)
{
    const int64_t *i = p->i;
    v->scale = 1.0;
    v->batch = i[5] > 0 ? i[5] : 1, v->m = i[2], v->n = i[3], v->k = i[4];
    return 1;
}
/* A and B; a fused residual C stays fp32 and so does D = AB + C (half + fp32 is fp32) */
static void gemm_amp(const peat_args *a, unsigned *in, unsigned *out)
{
    *in = 0x3u;
    *out = a->n_in > 2 ? 0u : 0x1u;
}

/* its own probes cover both ends of the range */
const peat_op_desc peat_opd_gemm = {
    .info = {PEAT_OP_GEMM, "gemm", 2, 3, 1, 0, peat_op_gemm_check, peat_op_gemm_out_shapes,
             gemm_depth, peat_op_gemm_flops},
    .magnitude = peat_op_gemm_mag,
    .terms = peat_op_terms_depth,
    .probes = gemm_probes,
    .range_low = 0,
    .range_high = 0,
    .perm = peat_op_gemm_perm,
    .integers = peat_op_integers_none,
    .invariant = peat_op_invariant_none,
    .cal_params = peat_op_gemm_cal,
    .input_shapes = peat_op_gemm_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_of,
    .amp_masks = gemm_amp,
    .aten = "addmm,baddbmm,bmm,mm",
};
