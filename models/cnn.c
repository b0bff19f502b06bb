/* cnn.c: the "cnn" flow: conv + strided conv + layernorm + linear head on generated shape images;
 * and the "resnet" flow on the same images: a conv-batchnorm-ReLU-maxpool stem, one residual block
 * (conv-BN-ReLU-conv-BN, the skip added, ReLU), global average pooling and a linear head. */
#include "models/flow_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CNN_S = 12, /* image side at the tiny size (the preset's: 12, 16, 32) */
    CNN_CLASSES = 4,
    CNN_TRAIN = 1024,
    CNN_EVAL = 256,
    CNN_MAX_CONV = 5 /* stride-1 convs (depth) + the strided ones (the preset's, 1 or 2) */
};

extern const peat_models_flow_ops peat_models_resnet_ops;

typedef struct cnn_impl {
    int nc;           /* conv layers: depth stride-1 ones, then the preset's stride-2 ones */
    int S, ch, depth; /* image side, input channels, stride-1 convs */
    int64_t cin[CNN_MAX_CONV], cout[CNN_MAX_CONV], side[CNN_MAX_CONV + 1];
    peat_models_param *W[CNN_MAX_CONV], *b[CNN_MAX_CONV], *gamma, *beta, *Wh, *bh;
    char lname[CNN_MAX_CONV][16];
    int64_t feat; /* features entering the head: C * side * side */
    /* per conv: Y = conv(X), Z = Y + b, A = relu(Z); dZ, dX (gradient w.r.t. its input) */
    peat_tensor *Y[CNN_MAX_CONV], *Z[CNN_MAX_CONV], *A[CNN_MAX_CONV];
    peat_tensor *dZ[CNN_MAX_CONV], *dA[CNN_MAX_CONV];
    peat_tensor *N, *mean, *rstd, *dN, *G, *logits, *dlogits;
    peat_tensor *xb, *yb;
    peat_models_xent_ws xw;
    peat_tensor *xtr, *ytr, *xev, *yev;
    /* resnet: conv weights (no biases), batchnorm gammas and betas, running statistics (kept as
     * the op updates them; eval normalises with batch statistics, as the op is training-mode) */
    int resnet;
    int64_t half; /* the side after the 2x2 max pooling */
    peat_models_param *rW[3], *rg[3], *rb[3];
    peat_tensor *rm[3], *rv[3], *rm1[3], *rv1[3], *mean3[3], *rstd3[3];
    peat_tensor *rY[3], *rZ[3], *rA[3], *P1, *R3, *A3, *Gp, *rdY[3], *rdZ[3], *rdA[3], *dP1, *dR3,
        *dGp, *dG;
} cnn_impl;

/* Draws one image of class c into img[ch*S*S]: a square outline, a plus-shaped cross, a circle
 * ring or a diagonal stroke, with position, scale and noise jitter (geometry scaled by S/12);
 * with ch > 1 channels each channel is the shape in its own random intensity plus its own
 * noise. Task 1 (finetuning) shifts the distribution: smaller shapes, larger shifts, more noise
 * and the other diagonal. */
static void cnn_draw(peat_rng_t *r, int c, int task, int S, int ch, float *img)
{
    double g = S / (double)CNN_S;
    double jit = (task ? 3.0 : 2.0) * g, rlo = (task ? 2.0 : 2.5) * g, rhi = (task ? 3.5 : 4.5) * g;
    double noise = task ? 0.35 : 0.25;
    double cx = S / 2.0 - 0.5 + (2 * peat_rng_uniform(r) - 1) * jit;
    double cy = S / 2.0 - 0.5 + (2 * peat_rng_uniform(r) - 1) * jit;
    double rad = rlo + (rhi - rlo) * peat_rng_uniform(r);
    double col[8] = {1.0};
    for (int k = 0; ch > 1 && k < ch && k < 8; k++) col[k] = 0.5 + peat_rng_uniform(r);
    for (int k = 0; k < ch; k++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                double dx = j - cx, dy = i - cy, ax = fabs(dx), ay = fabs(dy);
                int on = 0;
                switch (c) {
                case 0:
                    on = fabs((ax > ay ? ax : ay) - rad) <= 0.5 * g;
                    break;
                case 1:
                    on = (ax <= 0.5 * g && ay <= rad) || (ay <= 0.5 * g && ax <= rad);
                    break;
                case 2:
                    on = fabs(sqrt(dx * dx + dy * dy) - rad) <= 0.6 * g;
                    break;
                default:
                    on = task ? fabs(dx + dy) <= 0.75 * g && fabs(dx - dy) <= 2 * rad
                              : fabs(dx - dy) <= 0.75 * g && fabs(dx + dy) <= 2 * rad;
                }
                img[(k * S + i) * S + j] =
                    (float)((on ? col[k < 8 ? k : 7] : 0.0) + peat_rng_gaussian(r, noise));
            }
}

static peat_status cnn_data(peat_flow_t *f, cnn_impl *m)
{
    peat_rng_t *r = peat_rng_new(peat_seed_derive(f->cfg.seed, "cnn.data"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "cnn: rng");
    peat_status st = PEAT_OK;
    peat_tensor **xs[2] = {&m->xtr, &m->xev}, **ys[2] = {&m->ytr, &m->yev};
    int64_t ns[2] = {CNN_TRAIN, CNN_EVAL};
    for (int s = 0; s < 2 && st == PEAT_OK; s++) {
        st = peat_models_tensor(xs[s], ns[s], m->ch, m->S, m->S);
        if (st == PEAT_OK) st = peat_tensor_alloc1(PEAT_DTYPE_I32, ns[s], ys[s]);
        if (st != PEAT_OK) break;
        for (int64_t i = 0; i < ns[s]; i++) {
            int c = (int)peat_rng_int(r, CNN_CLASSES);
            peat_i32(*ys[s])[i] = c;
            cnn_draw(r, c, f->cfg.task, m->S, m->ch, peat_f32(*xs[s]) + i * m->ch * m->S * m->S);
        }
    }
    peat_rng_free(r);
    return st;
}

static peat_status resnet_create(peat_flow_t *f, struct cnn_impl *m);

static peat_status cnn_create(peat_flow_t *f)
{
    cnn_impl *m = calloc(1, sizeof *m);
    if (!m) return PEAT_ERROR(PEAT_ERR_NOMEM, "cnn");
    f->impl = m;
    const peat_models_preset *ps = f->preset;
    if (f->cfg.depth + ps->strided > CNN_MAX_CONV)
        return PEAT_ERROR(PEAT_ERR_INVAL, "cnn: depth %d > %d at size %s", f->cfg.depth,
                          CNN_MAX_CONV - ps->strided, peat_models_flow_size_name(f->cfg.size));
    int64_t B = f->cfg.batch, C = f->cfg.width;
    m->S = ps->image, m->ch = ps->channels, m->depth = f->cfg.depth;
    m->nc = f->cfg.depth + ps->strided;
    m->side[0] = m->S;
    for (int k = 0; k < m->nc; k++) {
        int strided = k >= m->depth;
        m->cin[k] = k ? m->cout[k - 1] : m->ch;
        m->cout[k] = strided ? C << (k - m->depth + 1) : C;
        m->side[k + 1] = strided ? (m->side[k] + 2 - 3) / 2 + 1 : m->side[k];
        snprintf(m->lname[k], sizeof m->lname[k], "conv%d", k + 1);
    }
    int64_t last = m->nc - 1;
    m->feat = m->cout[last] * m->side[m->nc] * m->side[m->nc];
    PEAT_TRY(cnn_data(f, m));
    m->resnet = f->ops == &peat_models_resnet_ops;
    if (m->resnet) return resnet_create(f, m);

    peat_rng_t *r = peat_rng_new(peat_seed_derive(f->cfg.seed, "cnn.init"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "cnn: rng");
    peat_status st = PEAT_OK;
    char nm[48];
    for (int k = 0; k < m->nc && st == PEAT_OK; k++) {
        int64_t ws[4] = {m->cout[k], m->cin[k], 3, 3}, bs[1] = {m->cout[k]};
        snprintf(nm, sizeof nm, "%s.w", m->lname[k]);
        st = peat_models_param_add(f, nm, 4, ws, 1, &m->W[k]);
        if (st != PEAT_OK) break;
        peat_models_param_init(m->W[k], r, sqrt(2.0 / (double)(m->cin[k] * 9)));
        snprintf(nm, sizeof nm, "%s.b", m->lname[k]);
        st = peat_models_param_add(f, nm, 1, bs, 0, &m->b[k]);
    }
    int64_t fs[1] = {m->feat}, hs[2] = {m->feat, CNN_CLASSES}, cs[1] = {CNN_CLASSES};
    if (st == PEAT_OK) st = peat_models_param_add(f, "norm.gamma", 1, fs, 0, &m->gamma);
    if (st == PEAT_OK) {
        peat_models_param_fill(m->gamma, 1.0f);
        st = peat_models_param_add(f, "norm.beta", 1, fs, 0, &m->beta);
    }
    if (st == PEAT_OK) st = peat_models_param_add(f, "head.w", 2, hs, 1, &m->Wh);
    if (st == PEAT_OK) {
        peat_models_param_init(m->Wh, r, sqrt(1.0 / (double)m->feat));
        st = peat_models_param_add(f, "head.b", 1, cs, 0, &m->bh);
    }
    peat_rng_free(r);
    PEAT_TRY(st);

    for (int k = 0; k < m->nc; k++) {
        int64_t so = m->side[k + 1], si = m->side[k];
        PEAT_TRY(peat_models_tensor(&m->Y[k], B, m->cout[k], so, so));
        PEAT_TRY(peat_models_tensor(&m->Z[k], B, m->cout[k], so, so));
        PEAT_TRY(peat_models_tensor(&m->A[k], B, m->cout[k], so, so));
        PEAT_TRY(peat_models_tensor(&m->dZ[k], B, m->cout[k], so, so));
        /* gradient w.r.t. the conv's input, not needed for the image */
        if (k) PEAT_TRY(peat_models_tensor(&m->dA[k], B, m->cin[k], si, si));
    }
    PEAT_TRY(peat_models_tensor(&m->N, B, m->feat, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->dN, B, m->feat, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->mean, B, 0, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->rstd, B, 0, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->G, B, CNN_CLASSES, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->logits, B, CNN_CLASSES, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->dlogits, B, CNN_CLASSES, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->xb, B, m->ch, m->S, m->S));
    PEAT_TRY(peat_tensor_alloc1(PEAT_DTYPE_I32, B, &m->yb));
    return peat_models_xent_ws_alloc(&m->xw, B);
}

static void cnn_destroy(peat_flow_t *f)
{
    cnn_impl *m = f->impl;
    if (!m) return;
    for (int k = 0; k < CNN_MAX_CONV; k++) {
        peat_tensor_free(m->Y[k]);
        peat_tensor_free(m->Z[k]);
        peat_tensor_free(m->A[k]);
        peat_tensor_free(m->dZ[k]);
        peat_tensor_free(m->dA[k]);
    }
    for (int k = 0; k < 3; k++) {
        peat_tensor *r[] = {m->rY[k], m->rZ[k], m->rA[k],  m->rdY[k], m->rdZ[k],   m->rdA[k],
                            m->rm[k], m->rv[k], m->rm1[k], m->rv1[k], m->mean3[k], m->rstd3[k]};
        for (size_t j = 0; j < sizeof r / sizeof r[0]; j++) peat_tensor_free(r[j]);
    }
    peat_tensor *t[] = {m->N,  m->mean, m->rstd, m->dN,  m->G,   m->logits, m->dlogits,
                        m->xb, m->yb,   m->xtr,  m->ytr, m->xev, m->yev,    m->P1,
                        m->R3, m->A3,   m->dR3,  m->dP1, m->Gp,  m->dGp};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) peat_tensor_free(t[k]);
    peat_models_xent_ws_free(&m->xw);
    free(m);
    f->impl = NULL;
}

static void conv_params(const cnn_impl *m, int k, int64_t B, peat_op_params *p)
{
    memset(p, 0, sizeof *p);
    p->i[0] = B, p->i[1] = m->cin[k], p->i[2] = m->side[k], p->i[3] = m->side[k];
    p->i[4] = m->cout[k], p->i[5] = 3, p->i[6] = 3;
    p->i[7] = k >= m->depth ? 2 : 1, p->i[8] = 1;
}

static peat_status conv_run(peat_flow_t *f, const char *layer, peat_phase ph, peat_op_kind op,
                            const peat_op_params *p, const peat_tensor *in0, const peat_tensor *in1,
                            peat_tensor *out)
{
    const peat_tensor *in[2] = {in0, in1};
    peat_args a = peat_args_make(op, p, 2, in, 1, &out);
    return peat_models_exec(f, layer, ph, &a);
}

static void cnn_gather(cnn_impl *m, const peat_tensor *x, const peat_tensor *y, const int64_t *idx,
                       int B)
{
    const size_t px = (size_t)(m->ch * m->S * m->S);
    for (int i = 0; i < B; i++) {
        memcpy(peat_f32(m->xb) + i * px, peat_f32(x) + idx[i] * px, px * sizeof(float));
        peat_i32(m->yb)[i] = peat_i32(y)[idx[i]];
    }
}

/* ---- resnet ---------------------------------------------------------------------------------- */

static void rconv_params(int64_t B, int64_t cin, int64_t cout, int64_t side, peat_op_params *p)
{
    memset(p, 0, sizeof *p);
    p->i[0] = B, p->i[1] = cin, p->i[2] = side, p->i[3] = side, p->i[4] = cout;
    p->i[5] = 3, p->i[6] = 3, p->i[7] = 1, p->i[8] = 1;
}

static void bn_params(int64_t B, int64_t C, int64_t S, peat_op_params *p)
{
    memset(p, 0, sizeof *p);
    p->i[0] = B, p->i[1] = C, p->i[2] = S, p->f[0] = 1e-5, p->f[1] = 0.1;
}

static void pool_params(int64_t B, int64_t C, int64_t side, int64_t K, peat_op_params *p)
{
    memset(p, 0, sizeof *p);
    p->i[0] = B, p->i[1] = C, p->i[2] = side, p->i[3] = side, p->i[4] = K, p->i[5] = K;
}

static peat_status run_op(peat_flow_t *f, const char *layer, peat_phase ph, peat_op_kind op,
                          const peat_op_params *p, int n_in, const peat_tensor *const *in,
                          int n_out, peat_tensor *const *out)
{
    peat_args a = peat_args_make(op, p, n_in, in, n_out, out);
    return peat_models_exec(f, layer, ph, &a);
}

/* batch norm k of the net on X [B, W, side^2] into Y; the running statistics carried over */
static peat_status rbn_fwd(peat_flow_t *f, cnn_impl *m, int k, int64_t side, const peat_tensor *X,
                           peat_tensor *Y)
{
    static const char *ln[3] = {"bn1", "block.bn1", "block.bn2"};
    peat_op_params p;
    bn_params(f->cfg.batch, f->cfg.width, side * side, &p);
    const peat_tensor *in[5] = {X, m->rg[k]->w, m->rb[k]->w, m->rm[k], m->rv[k]};
    peat_tensor *out[5] = {Y, m->mean3[k], m->rstd3[k], m->rm1[k], m->rv1[k]};
    PEAT_TRY(run_op(f, ln[k], PEAT_PHASE_FWD, PEAT_OP_BATCHNORM, &p, 5, in, 5, out));
    memcpy(m->rm[k]->data, m->rm1[k]->data, peat_tensor_nbytes(m->rm[k]));
    memcpy(m->rv[k]->data, m->rv1[k]->data, peat_tensor_nbytes(m->rv[k]));
    return PEAT_OK;
}

static peat_status rbn_bwd(peat_flow_t *f, cnn_impl *m, int k, int64_t side, const peat_tensor *X,
                           const peat_tensor *dY, peat_tensor *dX)
{
    static const char *ln[3] = {"bn1", "block.bn1", "block.bn2"};
    peat_op_params p;
    bn_params(f->cfg.batch, f->cfg.width, side * side, &p);
    const peat_tensor *in[5] = {X, m->rg[k]->w, m->mean3[k], m->rstd3[k], dY};
    peat_tensor *out[3] = {dX, m->rg[k]->g, m->rb[k]->g};
    return run_op(f, ln[k], PEAT_PHASE_BWD, PEAT_OP_BATCHNORM_BWD, &p, 5, in, 3, out);
}

static peat_status resnet_create(peat_flow_t *f, cnn_impl *m)
{
    int64_t B = f->cfg.batch, W = f->cfg.width, S = m->S, h = S / 2;
    if (S % 2) return PEAT_ERROR(PEAT_ERR_INVAL, "resnet: image side %lld is odd", (long long)S);
    m->half = h;
    peat_rng_t *r = peat_rng_new(peat_seed_derive(f->cfg.seed, "resnet.init"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "resnet: rng");
    static const char *wn[3] = {"conv1.w", "block.conv1.w", "block.conv2.w"};
    static const char *gn[3] = {"bn1.gamma", "block.bn1.gamma", "block.bn2.gamma"};
    static const char *bn[3] = {"bn1.beta", "block.bn1.beta", "block.bn2.beta"};
    peat_status st = PEAT_OK;
    for (int k = 0; k < 3 && st == PEAT_OK; k++) {
        int64_t cin = k ? W : m->ch, ws[4] = {W, cin, 3, 3}, cs[1] = {W};
        st = peat_models_param_add(f, wn[k], 4, ws, 1, &m->rW[k]);
        if (st == PEAT_OK) peat_models_param_init(m->rW[k], r, sqrt(2.0 / (double)(cin * 9)));
        if (st == PEAT_OK) st = peat_models_param_add(f, gn[k], 1, cs, 0, &m->rg[k]);
        if (st == PEAT_OK) peat_models_param_fill(m->rg[k], 1.0f);
        if (st == PEAT_OK) st = peat_models_param_add(f, bn[k], 1, cs, 0, &m->rb[k]);
    }
    int64_t hs[2] = {W, CNN_CLASSES}, cs[1] = {CNN_CLASSES};
    if (st == PEAT_OK) st = peat_models_param_add(f, "head.w", 2, hs, 1, &m->Wh);
    if (st == PEAT_OK) {
        peat_models_param_init(m->Wh, r, sqrt(1.0 / (double)W));
        st = peat_models_param_add(f, "head.b", 1, cs, 0, &m->bh);
    }
    peat_rng_free(r);
    PEAT_TRY(st);
    for (int k = 0; k < 3; k++) {
        int64_t side = k ? h : S;
        PEAT_TRY(peat_models_tensor(&m->rY[k], B, W, side, side));
        PEAT_TRY(peat_models_tensor(&m->rZ[k], B, W, side, side));
        PEAT_TRY(peat_models_tensor(&m->rA[k], B, W, side, side));
        PEAT_TRY(peat_models_tensor(&m->rdY[k], B, W, side, side));
        PEAT_TRY(peat_models_tensor(&m->rdZ[k], B, W, side, side));
        PEAT_TRY(peat_models_tensor(&m->rdA[k], B, W, side, side));
        PEAT_TRY(peat_models_tensor(&m->rm[k], W, 0, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->rv[k], W, 0, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->rm1[k], W, 0, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->rv1[k], W, 0, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->mean3[k], W, 0, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->rstd3[k], W, 0, 0, 0));
        for (int64_t c = 0; c < W; c++) peat_f32(m->rv[k])[c] = 1.0f; /* PyTorch's initial var */
    }
    PEAT_TRY(peat_models_tensor(&m->P1, B, W, h, h));
    PEAT_TRY(peat_models_tensor(&m->R3, B, W, h, h));
    PEAT_TRY(peat_models_tensor(&m->A3, B, W, h, h));
    PEAT_TRY(peat_models_tensor(&m->dR3, B, W, h, h));
    PEAT_TRY(peat_models_tensor(&m->dP1, B, W, h, h));
    PEAT_TRY(peat_models_tensor(&m->Gp, B, W, 1, 1));
    PEAT_TRY(peat_models_tensor(&m->dGp, B, W, 1, 1));
    PEAT_TRY(peat_models_tensor(&m->G, B, CNN_CLASSES, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->logits, B, CNN_CLASSES, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->dlogits, B, CNN_CLASSES, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->xb, B, m->ch, S, S));
    PEAT_TRY(peat_tensor_alloc1(PEAT_DTYPE_I32, B, &m->yb));
    return peat_models_xent_ws_alloc(&m->xw, B);
}

/* stem: conv, BN, ReLU, 2x2 max pooling; block: conv, BN, ReLU, conv, BN, + stem, ReLU; global
 * average pooling; linear head */
static peat_status resnet_forward(peat_flow_t *f, cnn_impl *m)
{
    int64_t B = f->cfg.batch, W = f->cfg.width, S = m->S, h = m->half;
    const peat_phase F = PEAT_PHASE_FWD;
    peat_op_params p;
    rconv_params(B, m->ch, W, S, &p);
    PEAT_TRY(conv_run(f, "conv1", F, PEAT_OP_CONV2D, &p, m->xb, m->rW[0]->w, m->rY[0]));
    PEAT_TRY(rbn_fwd(f, m, 0, S, m->rY[0], m->rZ[0]));
    PEAT_TRY(peat_models_unary(f, "relu1", F, PEAT_OP_RELU, m->rZ[0], NULL, m->rA[0]));
    pool_params(B, W, S, 2, &p);
    PEAT_TRY(run_op(f, "maxpool", F, PEAT_OP_MAXPOOL2D, &p, 1,
                    (const peat_tensor *const[]){m->rA[0]}, 1, &m->P1));
    rconv_params(B, W, W, h, &p);
    PEAT_TRY(conv_run(f, "block.conv1", F, PEAT_OP_CONV2D, &p, m->P1, m->rW[1]->w, m->rY[1]));
    PEAT_TRY(rbn_fwd(f, m, 1, h, m->rY[1], m->rZ[1]));
    PEAT_TRY(peat_models_unary(f, "block.relu1", F, PEAT_OP_RELU, m->rZ[1], NULL, m->rA[1]));
    PEAT_TRY(conv_run(f, "block.conv2", F, PEAT_OP_CONV2D, &p, m->rA[1], m->rW[2]->w, m->rY[2]));
    PEAT_TRY(rbn_fwd(f, m, 2, h, m->rY[2], m->rZ[2]));
    /* the skip: an elementwise sum is a bias_add with R = S = 1 */
    PEAT_TRY(peat_models_bias_add(f, "block.res", F, 1, B * W * h * h, 1, m->rZ[2], m->P1, m->R3));
    PEAT_TRY(peat_models_unary(f, "block.relu2", F, PEAT_OP_RELU, m->R3, NULL, m->A3));
    pool_params(B, W, h, h, &p);
    PEAT_TRY(run_op(f, "avgpool", F, PEAT_OP_AVGPOOL2D, &p, 1, (const peat_tensor *const[]){m->A3},
                    1, &m->Gp));
    PEAT_TRY(peat_models_linear_fwd(f, "head", B, W, CNN_CLASSES, m->Gp, m->Wh->w, NULL, m->G));
    return peat_models_bias_add(f, "head", F, B, CNN_CLASSES, 1, m->G, m->bh->w, m->logits);
}

static peat_status resnet_backward(peat_flow_t *f, cnn_impl *m)
{
    int64_t B = f->cfg.batch, W = f->cfg.width, S = m->S, h = m->half;
    const peat_phase BW = PEAT_PHASE_BWD;
    peat_op_params p;
    PEAT_TRY(peat_models_bias_bwd(f, "head", B, CNN_CLASSES, 1, m->dlogits, m->bh->g));
    PEAT_TRY(peat_models_linear_bwd(f, "head", B, W, CNN_CLASSES, m->Gp, m->Wh->w, m->dlogits,
                                    m->Wh->g, m->dGp));
    pool_params(B, W, h, h, &p);
    PEAT_TRY(run_op(f, "avgpool", BW, PEAT_OP_AVGPOOL2D_BWD, &p, 1,
                    (const peat_tensor *const[]){m->dGp}, 1, &m->rdA[2]));
    PEAT_TRY(peat_models_unary(f, "block.relu2", BW, PEAT_OP_RELU_BWD, m->R3, m->rdA[2], m->dR3));
    PEAT_TRY(rbn_bwd(f, m, 2, h, m->rY[2], m->dR3, m->rdY[2]));
    rconv_params(B, W, W, h, &p);
    PEAT_TRY(conv_run(f, "block.conv2", BW, PEAT_OP_CONV2D_BWD_FILTER, &p, m->rA[1], m->rdY[2],
                      m->rW[2]->g));
    PEAT_TRY(conv_run(f, "block.conv2", BW, PEAT_OP_CONV2D_BWD_DATA, &p, m->rdY[2], m->rW[2]->w,
                      m->rdA[1]));
    PEAT_TRY(
        peat_models_unary(f, "block.relu1", BW, PEAT_OP_RELU_BWD, m->rZ[1], m->rdA[1], m->rdZ[1]));
    PEAT_TRY(rbn_bwd(f, m, 1, h, m->rY[1], m->rdZ[1], m->rdY[1]));
    PEAT_TRY(conv_run(f, "block.conv1", BW, PEAT_OP_CONV2D_BWD_FILTER, &p, m->P1, m->rdY[1],
                      m->rW[1]->g));
    PEAT_TRY(conv_run(f, "block.conv1", BW, PEAT_OP_CONV2D_BWD_DATA, &p, m->rdY[1], m->rW[1]->w,
                      m->rdZ[2]));
    /* the pooled stem feeds the block and the skip: the two gradients add */
    PEAT_TRY(
        peat_models_bias_add(f, "block.res", BW, 1, B * W * h * h, 1, m->rdZ[2], m->dR3, m->dP1));
    pool_params(B, W, S, 2, &p);
    PEAT_TRY(run_op(f, "maxpool", BW, PEAT_OP_MAXPOOL2D_BWD, &p, 2,
                    (const peat_tensor *const[]){m->rA[0], m->dP1}, 1, &m->rdA[0]));
    PEAT_TRY(peat_models_unary(f, "relu1", BW, PEAT_OP_RELU_BWD, m->rZ[0], m->rdA[0], m->rdZ[0]));
    PEAT_TRY(rbn_bwd(f, m, 0, S, m->rY[0], m->rdZ[0], m->rdY[0]));
    rconv_params(B, m->ch, W, S, &p);
    return conv_run(f, "conv1", BW, PEAT_OP_CONV2D_BWD_FILTER, &p, m->xb, m->rdY[0], m->rW[0]->g);
}

static peat_status cnn_forward(peat_flow_t *f, cnn_impl *m)
{
    if (m->resnet) return resnet_forward(f, m);
    int64_t B = f->cfg.batch;
    const peat_tensor *X = m->xb;
    peat_op_params p;
    for (int k = 0; k < m->nc; k++) {
        const char *ln = m->lname[k];
        int64_t so = m->side[k + 1];
        conv_params(m, k, B, &p);
        PEAT_TRY(conv_run(f, ln, PEAT_PHASE_FWD, PEAT_OP_CONV2D, &p, X, m->W[k]->w, m->Y[k]));
        PEAT_TRY(peat_models_bias_add(f, ln, PEAT_PHASE_FWD, B, m->cout[k], so * so, m->Y[k],
                                      m->b[k]->w, m->Z[k]));
        PEAT_TRY(peat_models_unary(f, ln, PEAT_PHASE_FWD, PEAT_OP_RELU, m->Z[k], NULL, m->A[k]));
        X = m->A[k];
    }
    /* layernorm over each image's whole feature map (channels x spatial) */
    PEAT_TRY(peat_models_layernorm(f, "norm", B, m->feat, X, m->gamma->w, m->beta->w, m->N, m->mean,
                                   m->rstd));
    PEAT_TRY(
        peat_models_linear_fwd(f, "head", B, m->feat, CNN_CLASSES, m->N, m->Wh->w, NULL, m->G));
    return peat_models_bias_add(f, "head", PEAT_PHASE_FWD, B, CNN_CLASSES, 1, m->G, m->bh->w,
                                m->logits);
}

static peat_status cnn_train(peat_flow_t *f, double *loss)
{
    cnn_impl *m = f->impl;
    int B = f->cfg.batch;
    int64_t idx[4096];
    for (int i = 0; i < B; i++)
        idx[i] =
            (int64_t)(peat_models_hash(f->cfg.seed, (uint64_t)f->step, (uint64_t)i) % CNN_TRAIN);
    cnn_gather(m, m->xtr, m->ytr, idx, B);
    PEAT_TRY(cnn_forward(f, m));
    PEAT_TRY(
        peat_models_xent(f, "loss", B, CNN_CLASSES, m->logits, m->yb, &m->xw, m->dlogits, loss));
    if (m->resnet) return resnet_backward(f, m);
    PEAT_TRY(peat_models_bias_bwd(f, "head", B, CNN_CLASSES, 1, m->dlogits, m->bh->g));
    PEAT_TRY(peat_models_linear_bwd(f, "head", B, m->feat, CNN_CLASSES, m->N, m->Wh->w, m->dlogits,
                                    m->Wh->g, m->dN));
    int last = m->nc - 1;
    /* the backward reads only Z and A of a conv, so Y[last] is free to hold d(A[last]) */
    peat_tensor *dAl = m->Y[last];
    PEAT_TRY(peat_models_layernorm_bwd(f, "norm", B, m->feat, m->A[last], m->gamma->w, m->mean,
                                       m->rstd, m->dN, dAl, m->gamma->g, m->beta->g));
    const peat_tensor *dA = dAl;
    peat_op_params p;
    for (int k = last; k >= 0; k--) {
        const char *ln = m->lname[k];
        int64_t so = m->side[k + 1];
        PEAT_TRY(peat_models_unary(f, ln, PEAT_PHASE_BWD, PEAT_OP_RELU_BWD, m->Z[k], dA, m->dZ[k]));
        PEAT_TRY(peat_models_bias_bwd(f, ln, B, m->cout[k], so * so, m->dZ[k], m->b[k]->g));
        conv_params(m, k, B, &p);
        const peat_tensor *X = k ? m->A[k - 1] : m->xb;
        PEAT_TRY(conv_run(f, ln, PEAT_PHASE_BWD, PEAT_OP_CONV2D_BWD_FILTER, &p, X, m->dZ[k],
                          m->W[k]->g));
        if (k) {
            PEAT_TRY(conv_run(f, ln, PEAT_PHASE_BWD, PEAT_OP_CONV2D_BWD_DATA, &p, m->dZ[k],
                              m->W[k]->w, m->dA[k]));
            dA = m->dA[k];
        }
    }
    return PEAT_OK;
}

static peat_status cnn_eval(peat_flow_t *f, double *loss, double *acc)
{
    cnn_impl *m = f->impl;
    int B = f->cfg.batch;
    int64_t idx[4096], n = 0, correct = 0;
    double sum = 0;
    for (int64_t s = 0; s + B <= CNN_EVAL; s += B) {
        for (int i = 0; i < B; i++) idx[i] = s + i;
        cnn_gather(m, m->xev, m->yev, idx, B);
        PEAT_TRY(cnn_forward(f, m));
        double l = 0;
        PEAT_TRY(peat_models_xent(f, "loss", B, CNN_CLASSES, m->logits, m->yb, &m->xw, NULL, &l));
        sum += l * B;
        for (int i = 0; i < B; i++)
            correct += peat_models_argmax(peat_f32(m->logits) + i * CNN_CLASSES, CNN_CLASSES) ==
                       peat_i32(m->yb)[i];
        n += B;
    }
    if (n == 0) return PEAT_ERROR(PEAT_ERR_INVAL, "cnn: batch %d larger than held-out set", B);
    *loss = sum / (double)n;
    *acc = (double)correct / (double)n;
    return PEAT_OK;
}

/* Defaults and entry points cnn and resnet share (same images, seeds and sizes) */
#define CNN_COMMON                                                                                 \
    .def_batch = 32, .def_width = 8, .def_depth = 1, .def_seq = 1, .def_lr_adamw = 3e-3,           \
    .create = cnn_create, .train = cnn_train, .eval = cnn_eval, .destroy = cnn_destroy

const peat_models_flow_ops peat_models_cnn_ops = {
    .name = "cnn",
    .desc = "conv3x3(8) + ReLU + conv3x3/2(16) + ReLU + layernorm + linear head on generated 12x12 "
            "shape images (square, cross, ring, diagonal)",
    .ops = PEAT_OP_BIT(PEAT_OP_CONV2D) | PEAT_OP_BIT(PEAT_OP_CONV2D_BWD_DATA) |
           PEAT_OP_BIT(PEAT_OP_CONV2D_BWD_FILTER) | PEAT_OP_BIT(PEAT_OP_BIAS_ADD) |
           PEAT_OP_BIT(PEAT_OP_BIAS_ADD_BWD) | PEAT_OP_BIT(PEAT_OP_RELU) |
           PEAT_OP_BIT(PEAT_OP_RELU_BWD) | PEAT_OP_BIT(PEAT_OP_LAYERNORM) |
           PEAT_OP_BIT(PEAT_OP_LAYERNORM_BWD) | PEAT_OP_BIT(PEAT_OP_GEMM) |
           PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY) | PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY_BWD) |
           PEAT_OP_BIT(PEAT_OP_REDUCE),
    CNN_COMMON,
    .def_lr_sgd = 0.03,
};

const peat_models_flow_ops peat_models_resnet_ops = {
    .name = "resnet",
    .desc = "ResNet-style net on the cnn flow's images: conv3x3 + batchnorm + ReLU + 2x2 max "
            "pooling, one residual block (conv-BN-ReLU-conv-BN, the skip added, ReLU), global "
            "average pooling, linear head",
    .ops = PEAT_OP_BIT(PEAT_OP_CONV2D) | PEAT_OP_BIT(PEAT_OP_CONV2D_BWD_DATA) |
           PEAT_OP_BIT(PEAT_OP_CONV2D_BWD_FILTER) | PEAT_OP_BIT(PEAT_OP_BATCHNORM) |
           PEAT_OP_BIT(PEAT_OP_BATCHNORM_BWD) | PEAT_OP_BIT(PEAT_OP_RELU) |
           PEAT_OP_BIT(PEAT_OP_RELU_BWD) | PEAT_OP_BIT(PEAT_OP_MAXPOOL2D) |
           PEAT_OP_BIT(PEAT_OP_MAXPOOL2D_BWD) | PEAT_OP_BIT(PEAT_OP_AVGPOOL2D) |
           PEAT_OP_BIT(PEAT_OP_AVGPOOL2D_BWD) | PEAT_OP_BIT(PEAT_OP_BIAS_ADD) |
           PEAT_OP_BIT(PEAT_OP_BIAS_ADD_BWD) | PEAT_OP_BIT(PEAT_OP_GEMM) |
           PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY) | PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY_BWD) |
           PEAT_OP_BIT(PEAT_OP_REDUCE),
    CNN_COMMON,
    .def_lr_sgd = 0.05,
    .def_optimizer = PEAT_OPTIM_SGD,
};
