/* ho_nn.c: held-out small ops: bias add and its backward, ReLU and its backward, the row
 * reduction, the embedding and its backward. Defects: a bias indexed channels-last, bias-gradient
 * reductions in bf16 atomics, with round-toward-zero, in a per-call order; a leaky slope, a
 * denormals-are-zero backward, a mean over the wrong axis, a scatter that stores instead of adding,
 * atomics landing in a per-call order, a transient upset in a gather. Honest: a pairwise bias
 * gradient and a sorted, chunked embedding backward. */
#include "heldout.h"

#include <stdlib.h>

/* ---- bias_add: i = R, C, S ; Y[r, c, s] = X[r, c, s] + b[c] ---- */

/* WRONG_RESULT. The bias is indexed as if the tensor were channels-last (flat index mod C), the
 * layout the kernel was first written for: right when S == 1 (a linear layer), a wrong channel's
 * bias on almost every element of an NCHW feature map. */
static peat_status bias_channels_last(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *x = a->in[0]->data, *bb = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < R * C * S; i++) y[i] = x[i] + bb[i % C];
    return PEAT_OK;
}

/* ---- bias_add_bwd: db[c] = sum over r and s of dY[r, c, s] ---- */

/* REDUCED_PRECISION. One block per row r sums its S values of channel c in fp32, then adds the
 * partial into db with an atomic add on a bf16 gradient buffer: the R-term cross-row reduction is
 * rounded to bf16 after every add (the per-row sums are exact fp32). */
static peat_status bias_bwd_bf16_atomic(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data;
    for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++) {
            float part = 0.0f;
            for (int64_t s = 0; s < S; s++) part += dy[(r * C + c) * S + s];
            acc = zoo_bf16(acc + part);
        }
        db[c] = acc;
    }
    return PEAT_OK;
}

/* TRUNCATION. The column sums run with round-toward-zero adds (__fadd_rz): R S roundings, each
 * dropping the remainder toward zero, so long columns drift toward zero. */
static peat_status bias_bwd_rz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data;
    for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) acc = ho_add_rz(acc, dy[(r * C + c) * S + s]);
        db[c] = acc;
    }
    return PEAT_OK;
}

/* NONDETERMINISTIC. Rows are split over 4 blocks; each block's partial is atomically added into
 * db, in the order the blocks happen to finish: a fresh order on every call (zoo_upset_draw), so a
 * repeated call may differ in its last bits. */
static peat_status bias_bwd_block_order(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data;
    int64_t order[4];
    ho_shuffle(order, 4, zoo_upset_draw());
    for (int64_t c = 0; c < C; c++) {
        float part[4];
        for (int q = 0; q < 4; q++) {
            part[q] = 0.0f;
            for (int64_t r = R * q / 4; r < R * (q + 1) / 4; r++)
                for (int64_t s = 0; s < S; s++) part[q] += dy[(r * C + c) * S + s];
        }
        float acc = 0.0f;
        for (int q = 0; q < 4; q++) acc += part[order[q]];
        db[c] = acc;
    }
    return PEAT_OK;
}

/* Pairwise sum of the terms t in [t0, t1) of channel c, term t = dY[t / S, c, t % S]. */
static float pair_col(const float *dy, int64_t C, int64_t S, int64_t c, int64_t t0, int64_t t1)
{
    if (t1 - t0 <= 8) {
        float s = 0.0f;
        for (int64_t t = t0; t < t1; t++) s += dy[((t / S) * C + c) * S + t % S];
        return s;
    }
    int64_t m = t0 + (t1 - t0) / 2;
    return pair_col(dy, C, S, c, t0, m) + pair_col(dy, C, S, c, m, t1);
}

/* Honest (PASS). Each channel's R S terms summed pairwise (blocks of 8 at the leaves), fp32. */
static peat_status bias_bwd_pairwise(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data;
    for (int64_t c = 0; c < C; c++) db[c] = pair_col(dy, C, S, c, 0, R * S);
    return PEAT_OK;
}

/* ---- relu and relu_bwd: i = n ---- */

/* WRONG_RESULT. A leaky ReLU (negative slope 0.01) shipped where the plain ReLU is meant: every
 * negative input gives 0.01 x instead of 0. */
static peat_status relu_leaky(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) y[i] = x[i] > 0.0f ? x[i] : 0.01f * x[i];
    return PEAT_OK;
}

/* FTZ. Built with denormals-are-zero and flush-to-zero: a subnormal positive pre-activation reads
 * as 0 (its gradient is dropped) and a subnormal dY passes as 0. Exact on normal numbers. */
static peat_status relu_bwd_daz(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data, *dy = a->in[1]->data;
    float *dx = a->out[0]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) dx[i] = ho_ftz(x[i]) > 0.0f ? ho_ftz(dy[i]) : 0.0f;
    return PEAT_OK;
}

/* ---- reduce: i = R, C, mode ---- */

/* WRONG_RESULT. The mean divides by the number of rows R instead of the row length C (the axes
 * swapped in the divisor): a mean over one row of C values (the loss) comes out C times too
 * large. Sums (mode 0) are right. */
static peat_status reduce_mean_rows(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += x[r * C + j];
        y[r] = a->p.i[2] == 1 ? s / (float)R : s;
    }
    return PEAT_OK;
}

/* ---- embedding: i = N, V, D ; in table [V, D], idx [N] ; out Y [N, D] ---- */

/* BITFLIP. The gather is a plain copy, but in about one call in three (a fresh draw per call) one
 * copied element has bit 25 (an exponent bit) inverted on its way through. */
static peat_status embedding_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = a->p.i[0], D = a->p.i[2];
    const float *tab = a->in[0]->data;
    const int32_t *idx = a->in[1]->data;
    float *y = a->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) y[n * D + d] = tab[(int64_t)idx[n] * D + d];
    uint64_t h = zoo_upset_draw();
    if (h % 3 == 0 && N * D > 0) {
        int64_t e = (int64_t)((h >> 8) % (uint64_t)(N * D));
        y[e] = ho_flip(y[e], 25);
    }
    return PEAT_OK;
}

/* ---- embedding_bwd: in idx [N], dY [N, D] ; out dtable [V, D] ---- */

/* WRONG_RESULT. The scatter stores each dY row into its table row instead of adding it: a token
 * that occurs several times in the batch keeps only its last occurrence's gradient. Right only for
 * tokens seen once. */
static peat_status embedding_bwd_store(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = a->p.i[0], V = a->p.i[1], D = a->p.i[2];
    const int32_t *idx = a->in[0]->data;
    const float *dy = a->in[1]->data;
    float *dt = a->out[0]->data;
    memset(dt, 0, (size_t)(V * D) * sizeof *dt);
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) dt[(int64_t)idx[n] * D + d] = dy[n * D + d];
    return PEAT_OK;
}

/* NONDETERMINISTIC. One thread per dY row adds it into its table row with atomics: rows of a
 * repeated token land in the order the threads run, a fresh permutation on every call
 * (zoo_upset_draw), so a token's sum changes its last bits from run to run. */
static peat_status embedding_bwd_atomic(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = a->p.i[0], V = a->p.i[1], D = a->p.i[2];
    const int32_t *idx = a->in[0]->data;
    const float *dy = a->in[1]->data;
    float *dt = a->out[0]->data;
    int64_t *order = malloc((size_t)(N > 0 ? N : 1) * sizeof *order);
    if (!order) return PEAT_ERR_NOMEM;
    ho_shuffle(order, N, zoo_upset_draw());
    memset(dt, 0, (size_t)(V * D) * sizeof *dt);
    for (int64_t t = 0; t < N; t++) {
        int64_t n = order[t];
        for (int64_t d = 0; d < D; d++) dt[(int64_t)idx[n] * D + d] += dy[n * D + d];
    }
    free(order);
    return PEAT_OK;
}

/* Honest (PASS). PyTorch's CUDA embedding backward: the positions sorted by token (a stable
 * counting sort), then each token's occurrences reduced in chunks of 4 consecutive rows, the
 * chunk sums added into the table row in order; fp32, deterministic. */
static peat_status embedding_bwd_sorted(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t N = a->p.i[0], V = a->p.i[1], D = a->p.i[2];
    const int32_t *idx = a->in[0]->data;
    const float *dy = a->in[1]->data;
    float *dt = a->out[0]->data;
    int64_t *start = calloc((size_t)V + 1, sizeof *start);
    int64_t *pos = malloc((size_t)(N > 0 ? N : 1) * sizeof *pos);
    if (!start || !pos) {
        free(start), free(pos);
        return PEAT_ERR_NOMEM;
    }
    for (int64_t n = 0; n < N; n++) start[idx[n] + 1]++;
    for (int64_t v = 0; v < V; v++) start[v + 1] += start[v];
    for (int64_t n = 0; n < N; n++) pos[start[idx[n]]++] = n; /* start[v] now ends row v */
    memset(dt, 0, (size_t)(V * D) * sizeof *dt);
    for (int64_t v = 0, b = 0; v < V; v++) {
        int64_t e = start[v];
        for (int64_t d = 0; d < D; d++) {
            float acc = 0.0f;
            for (int64_t c0 = b; c0 < e; c0 += 4) {
                float chunk = 0.0f;
                for (int64_t t = c0; t < c0 + 4 && t < e; t++) chunk += dy[pos[t] * D + d];
                acc += chunk;
            }
            dt[v * D + d] = acc;
        }
        b = e;
    }
    free(start), free(pos);
    return PEAT_OK;
}

int ho_register_nn(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_bias_add_channels_last", PEAT_OP_BIAS_ADD, bias_channels_last,
                   "bias indexed channels-last (flat index mod C) on NCHW data"),
        ZOO_KERNEL("ho_bias_bwd_bf16_atomic", PEAT_OP_BIAS_ADD_BWD, bias_bwd_bf16_atomic,
                   "per-row fp32 partials added across rows in a bf16 buffer"),
        ZOO_KERNEL("ho_bias_bwd_rz", PEAT_OP_BIAS_ADD_BWD, bias_bwd_rz,
                   "column sums with round-toward-zero adds"),
        ZOO_KERNEL("ho_bias_bwd_block_order", PEAT_OP_BIAS_ADD_BWD, bias_bwd_block_order,
                   "4 row blocks' partials added in a per-call random order"),
        ZOO_KERNEL("ho_bias_bwd_pairwise", PEAT_OP_BIAS_ADD_BWD, bias_bwd_pairwise,
                   "honest: pairwise column sums, fp32"),
        ZOO_KERNEL("ho_relu_leaky", PEAT_OP_RELU, relu_leaky,
                   "leaky ReLU (slope 0.01) where ReLU is meant"),
        ZOO_KERNEL("ho_relu_bwd_daz", PEAT_OP_RELU_BWD, relu_bwd_daz,
                   "subnormal X and dY read as zero (DAZ/FTZ)"),
        ZOO_KERNEL("ho_reduce_mean_rows", PEAT_OP_REDUCE, reduce_mean_rows,
                   "mean divides by the row count R instead of the row length C"),
        ZOO_KERNEL("ho_embedding_flip", PEAT_OP_EMBEDDING, embedding_flip,
                   "one gathered element has bit 25 flipped in ~1 call of 3"),
        ZOO_KERNEL("ho_embedding_bwd_store", PEAT_OP_EMBEDDING_BWD, embedding_bwd_store,
                   "scatter stores instead of adding: repeated tokens keep one row"),
        ZOO_KERNEL("ho_embedding_bwd_atomic", PEAT_OP_EMBEDDING_BWD, embedding_bwd_atomic,
                   "scatter-add of rows in a per-call random order (atomics)"),
        ZOO_KERNEL("ho_embedding_bwd_sorted", PEAT_OP_EMBEDDING_BWD, embedding_bwd_sorted,
                   "honest: sorted by token, occurrences reduced in chunks of 4"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
