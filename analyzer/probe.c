/* probe.c: probe calls beyond the training data, and the GEMM arithmetic-property call
 * (analyzer/probe.h). */
#include "analyzer/probe_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *peat_analyzer_probe_kind_name(peat_probe_kind k)
{
    return k == PEAT_PROBE_SHAPE ? "shape" : "value";
}

void peat_analyzer_probe_set_free(peat_probe_set *s)
{
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->p[i].args.n_in; k++)
            peat_tensor_free((peat_tensor *)s->p[i].args.in[k]);
    free(s->p);
    memset(s, 0, sizeof *s);
}

peat_probe *peat_analyzer_probe_add(peat_probe_set *s, peat_probe_kind kind, peat_probe_tag tag,
                                    const char *label)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        peat_probe *np = realloc(s->p, (size_t)cap * sizeof *np);
        if (!np) return NULL;
        s->p = np, s->cap = cap;
    }
    peat_probe *p = &s->p[s->n++];
    memset(p, 0, sizeof *p);
    p->kind = kind, p->tag = tag;
    snprintf(p->label, sizeof p->label, "%s", label);
    return p;
}

/* ---- GEMM ---- */

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

typedef struct gemm_shape {
    int64_t M, N, K;
    int tA, tB;
    int64_t batch;
    double alpha, beta;
} gemm_shape;

/* Inputs of one GEMM probe: A and B drawn N(0, sa^2), N(0, sb^2) (scaled by 2^e each when
 * value-probing), C when beta != 0. */
static peat_status gemm_probe(peat_probe_set *s, peat_rng_t *r, peat_probe_kind kind,
                              peat_probe_tag tag, const char *label, gemm_shape g, double sa,
                              double sb)
{
    peat_probe *p = peat_analyzer_probe_add(s, kind, tag, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    peat_op_params *q = &p->args.p;
    p->args.op = PEAT_OP_GEMM;
    q->i[0] = g.tA, q->i[1] = g.tB, q->i[2] = g.M, q->i[3] = g.N, q->i[4] = g.K, q->i[5] = g.batch;
    q->f[0] = g.alpha, q->f[1] = g.beta;
    peat_tensor *t[3] = {NULL, NULL, NULL};
    int n_in = g.beta != 0.0 ? 3 : 2;
    PEAT_TRY(
        peat_tensor_alloc3(PEAT_DTYPE_F32, g.batch, g.tA ? g.K : g.M, g.tA ? g.M : g.K, &t[0]));
    p->args.in[0] = t[0], p->args.n_in = 1;
    PEAT_TRY(
        peat_tensor_alloc3(PEAT_DTYPE_F32, g.batch, g.tB ? g.N : g.K, g.tB ? g.K : g.N, &t[1]));
    p->args.in[1] = t[1], p->args.n_in = 2;
    if (n_in == 3) {
        PEAT_TRY(peat_tensor_alloc3(PEAT_DTYPE_F32, g.batch, g.M, g.N, &t[2]));
        p->args.in[2] = t[2], p->args.n_in = 3;
    }
    peat_rng_fill_gaussian(r, t[0], sa);
    peat_rng_fill_gaussian(r, t[1], sb);
    if (t[2]) peat_rng_fill_gaussian(r, t[2], sa * sb * sqrt((double)g.K));
    return PEAT_OK;
}

static peat_status gemm_shapes(peat_probe_set *s, peat_rng_t *r, const gemm_scale *sc)
{
    /* awkward sizes: 1, 2, 3, primes, and one either side of the powers of two 32, 64, 128;
     * and square ones (M == N, a path kernels special-case), a power of two and an odd size */
    static const int64_t dims[][3] = {{33, 65, 17},  {31, 63, 129}, {65, 33, 7},  {1, 129, 31},
                                      {127, 2, 65},  {3, 7, 1},     {17, 31, 33}, {129, 127, 3},
                                      {63, 17, 127}, {2, 1, 2},     {37, 41, 43}, {32, 32, 32},
                                      {37, 37, 19}};
    char label[96];
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        gemm_shape g = {dims[i][0], dims[i][1], dims[i][2], 0, 0, 1, 1.0, 0.0};
        snprintf(label, sizeof label, "shape %lldx%lldx%lld", (long long)g.M, (long long)g.N,
                 (long long)g.K);
        PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, g, sc->sa, sc->sb));
    }
    for (int t = 1; t < 4; t++) {
        gemm_shape g = {33, 17, 65, t & 1, t >> 1, 1, 1.0, 0.0};
        snprintf(label, sizeof label, "shape 33x17x65 transA=%d transB=%d", g.tA, g.tB);
        PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, g, sc->sa, sc->sb));
    }
    gemm_shape gb = {17, 33, 31, 0, 0, 3, 1.0, 0.0};
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, "shape 17x33x31 batch=3", gb,
                        sc->sa, sc->sb));
    int64_t klong = 4 * sc->kmax + 1 < 16385 ? 4 * sc->kmax + 1 : 16385;
    gemm_shape gk = {8, 9, klong, 0, 0, 1, 1.0, 0.0};
    snprintf(label, sizeof label, "shape 8x9x%lld (K beyond the recorded %lld)", (long long)klong,
             (long long)sc->kmax);
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label, gk, sc->sa, sc->sb));
    gemm_shape ga = {33, 31, 17, 0, 0, 1, 0.5, 1.0};
    return gemm_probe(s, r, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE,
                      "shape 33x31x17 alpha=0.5 beta=1", ga, sc->sa, sc->sb);
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

static peat_status gemm_values(peat_probe_set *s, peat_rng_t *r)
{
    gemm_shape g = {33, 31, 64, 0, 0, 1, 1.0, 0.0};
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_SUBNORMAL,
                        "value subnormal inputs (A ~ 2^-133)", g, 0x1p-133, 1.0));
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_SUBNORMAL,
                        "value subnormal products (A, B ~ 2^-64)", g, 0x1p-64, 0x1p-64));
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_OVERFLOW,
                        "value near fp32 overflow (A, B ~ 2^60)", g, 0x1p60, 0x1p60));
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_OVERFLOW,
                        "value sums beyond fp16's 65504 (A, B ~ 64)", g, 64.0, 64.0));
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_CANCEL,
                        "value cancellation (terms +x and -x(1+2^-20))", g, 1.0, 1.0));
    peat_probe *c = &s->p[s->n - 1];
    cancelling((peat_tensor *)c->args.in[0], (peat_tensor *)c->args.in[1], g.M, g.N, g.K);
    PEAT_TRY(gemm_probe(s, r, PEAT_PROBE_VALUE, PEAT_PROBE_TAG_EXACT,
                        "value exactly representable sums (integers)", g, 1.0, 1.0));
    c = &s->p[s->n - 1];
    integerise((peat_tensor *)c->args.in[0]);
    integerise((peat_tensor *)c->args.in[1]);
    return PEAT_OK;
}

/* ---- other ops: value probes made from a recorded call ---- */

/* Clones a recorded call's inputs into a new probe, then transforms input `which`. */
static peat_status from_record(peat_probe_set *s, const peat_record *rec, peat_probe_tag tag,
                               const char *label, int which, double scale, double shift, int which2)
{
    peat_probe *p = peat_analyzer_probe_add(s, PEAT_PROBE_VALUE, tag, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    p->args.op = rec->op, p->args.p = rec->p;
    for (int k = 0; k < rec->n_in; k++) {
        peat_tensor *t = NULL;
        PEAT_TRY(peat_tensor_clone(rec->in[k], &t));
        p->args.in[k] = t, p->args.n_in = k + 1;
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
static peat_status rows_probe(peat_probe_set *s, const peat_record *rec, int64_t n)
{
    int attn = rec->op == PEAT_OP_ATTENTION;
    int64_t m = attn ? rec->p.i[2] : rec->p.i[0];
    int64_t width = attn ? rec->p.i[3] : rec->p.i[1];
    int64_t outer = attn ? rec->p.i[0] * rec->p.i[1] : 1;
    char label[96];
    snprintf(label, sizeof label,
             attn ? "shape T=%lld (recorded %lld)" : "shape rows=%lld (recorded %lld)",
             (long long)n, (long long)m);
    peat_probe *p = peat_analyzer_probe_add(s, PEAT_PROBE_SHAPE, PEAT_PROBE_TAG_NONE, label);
    if (!p) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe list");
    p->args.op = rec->op, p->args.p = rec->p;
    p->args.p.i[attn ? 2 : 0] = n;
    int n_rowwise = attn ? 3 : 1; /* Q, K, V / X: the rest (gamma, beta) keep their shape */
    for (int k = 0; k < rec->n_in; k++) {
        peat_tensor *t = NULL;
        if (k < n_rowwise)
            PEAT_TRY(cycle_rows(rec->in[k], outer, m, n, width, &t));
        else
            PEAT_TRY(peat_tensor_clone(rec->in[k], &t));
        p->args.in[k] = t, p->args.n_in = k + 1;
    }
    return PEAT_OK;
}

static peat_status other_shapes(peat_probe_set *s, const peat_record *rec)
{
    if (rec->op != PEAT_OP_SOFTMAX && rec->op != PEAT_OP_LAYERNORM && rec->op != PEAT_OP_ATTENTION)
        return PEAT_OK;
    int attn = rec->op == PEAT_OP_ATTENTION;
    int64_t m = attn ? rec->p.i[2] : rec->p.i[0];
    const int64_t sizes[] = {1, 3, 7, 9, 17, 33, 65, m + 1, attn ? 4 * m + 1 : 2 * m + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] != m && (i == 0 || sizes[i] != sizes[i - 1]))
            PEAT_TRY(rows_probe(s, rec, sizes[i]));
    return PEAT_OK;
}

static peat_status other_values(peat_probe_set *s, const peat_record *rec)
{
    switch (rec->op) {
    case PEAT_OP_SOFTMAX:
        PEAT_TRY(from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value large logits (x40)", 0, 40.0,
                             0.0, -1));
        return from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value logits shifted by +100", 0, 1.0,
                           100.0, -1);
    case PEAT_OP_LAYERNORM:
        return from_record(s, rec, PEAT_PROBE_TAG_CANCEL,
                           "value large mean over small spread (1000 + 0.01 x)", 0, 0.01, 1000.0,
                           -1);
    case PEAT_OP_ATTENTION:
        return from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value large scores (Q, K x12)", 0,
                           12.0, 0.0, 1);
    case PEAT_OP_CONV2D:
        PEAT_TRY(from_record(s, rec, PEAT_PROBE_TAG_SUBNORMAL, "value subnormal inputs (x 2^-133)",
                             0, 0x1p-133, 0.0, -1));
        return from_record(s, rec, PEAT_PROBE_TAG_OVERFLOW, "value large inputs (X, W x64)", 0,
                           64.0, 0.0, 1);
    default:
        return PEAT_OK;
    }
}

peat_status peat_analyzer_probe_set_make(const peat_record_list *recs, uint64_t seed,
                                         peat_probe_set *out)
{
    memset(out, 0, sizeof *out);
    if (!recs || recs->n == 0) return PEAT_OK;
    peat_status st = PEAT_OK;
    if (recs->items[0]->op == PEAT_OP_GEMM) {
        peat_rng_t *r = peat_rng_new(seed ^ 0x70726f6265ull);
        if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
        gemm_scale sc = gemm_scale_of(recs);
        st = gemm_shapes(out, r, &sc);
        if (st == PEAT_OK) st = gemm_values(out, r);
        peat_rng_free(r);
    } else {
        st = other_shapes(out, recs->items[0]);
        if (st == PEAT_OK) st = other_values(out, recs->items[0]);
        if (st == PEAT_OK) st = peat_analyzer_probe_ops(out, recs->items[0], seed);
    }
    if (st != PEAT_OK) peat_analyzer_probe_set_free(out);
    return st;
}
