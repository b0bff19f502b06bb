/* mlp.c: the "mlp" flow: a ReLU perceptron classifying a generated Gaussian mixture. */
#include "models/flow_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MLP_IN = 16, /* input features */
    MLP_CLASSES = 4,
    MLP_CLUSTERS = 12, /* 3 clusters per class: not linearly separable, the hidden layers matter */
    MLP_TRAIN = 2048,
    MLP_EVAL = 512,
    MLP_MAX_LAYERS = 17
};

/* Class of cluster k: task 0 takes k mod 4; task 1 (finetuning) relabels the last third of
 * the clusters (class + 1 mod 4) while the clusters themselves (the features) stay: a shifted
 * task that a pretrained model partly solves already. */
static int mlp_class(int cluster, int task)
{
    int c = cluster % MLP_CLASSES;
    return task == 1 && cluster >= 2 * MLP_CLASSES ? (c + 1) % MLP_CLASSES : c;
}

typedef struct mlp_impl {
    int L;                     /* linear layers = depth + 1 */
    peat_op_kind act, act_bwd; /* ReLU, or SiLU (flow "mlp_silu") */
    int64_t dim[MLP_MAX_LAYERS + 1];
    peat_models_param *W[MLP_MAX_LAYERS], *b[MLP_MAX_LAYERS];
    char lname[MLP_MAX_LAYERS][16];
    /* per layer l: G = X W, Z = G + b, A = relu(Z) (the next X); dZ, dX */
    peat_tensor *G[MLP_MAX_LAYERS], *Z[MLP_MAX_LAYERS], *A[MLP_MAX_LAYERS];
    peat_tensor *dZ[MLP_MAX_LAYERS], *dX[MLP_MAX_LAYERS];
    peat_tensor *xb, *yb; /* current batch */
    peat_models_xent_ws xw;
    peat_tensor *xtr, *ytr, *xev, *yev; /* data sets */
} mlp_impl;

static peat_status mlp_data(peat_flow_t *f, mlp_impl *m)
{
    peat_rng_t *r = peat_rng_new(peat_seed_derive(f->cfg.seed, "mlp.data"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "mlp: rng");
    double ctr[MLP_CLUSTERS][MLP_IN];
    for (int k = 0; k < MLP_CLUSTERS; k++)
        for (int d = 0; d < MLP_IN; d++) ctr[k][d] = peat_rng_gaussian(r, 1.0);
    peat_status st = PEAT_OK;
    peat_tensor **xs[2] = {&m->xtr, &m->xev}, **ys[2] = {&m->ytr, &m->yev};
    int64_t ns[2] = {MLP_TRAIN, MLP_EVAL};
    for (int s = 0; s < 2 && st == PEAT_OK; s++) {
        st = peat_models_tensor(xs[s], ns[s], MLP_IN, 0, 0);
        if (st == PEAT_OK) st = peat_tensor_alloc1(PEAT_DTYPE_I32, ns[s], ys[s]);
        if (st != PEAT_OK) break;
        float *x = peat_f32(*xs[s]);
        int32_t *y = peat_i32(*ys[s]);
        for (int64_t i = 0; i < ns[s]; i++) {
            int k = (int)peat_rng_int(r, MLP_CLUSTERS);
            y[i] = mlp_class(k, f->cfg.task);
            /* noise as large as the centre spread: clusters overlap, so the held-out accuracy
             * stays near 90% (not 100%) and a damaged run can show in it */
            for (int d = 0; d < MLP_IN; d++)
                x[i * MLP_IN + d] = (float)(ctr[k][d] + peat_rng_gaussian(r, 1.0));
        }
    }
    peat_rng_free(r);
    return st;
}

static peat_status mlp_create(peat_flow_t *f)
{
    mlp_impl *m = calloc(1, sizeof *m);
    if (!m) return PEAT_ERROR(PEAT_ERR_NOMEM, "mlp");
    f->impl = m;
    int silu = f->ops == &peat_models_mlp_silu_ops;
    m->act = silu ? PEAT_OP_SILU : PEAT_OP_RELU;
    m->act_bwd = silu ? PEAT_OP_SILU_BWD : PEAT_OP_RELU_BWD;
    if (f->cfg.depth > MLP_MAX_LAYERS - 1)
        return PEAT_ERROR(PEAT_ERR_INVAL, "mlp: depth %d > %d", f->cfg.depth, MLP_MAX_LAYERS - 1);
    int B = f->cfg.batch;
    m->L = f->cfg.depth + 1;
    m->dim[0] = MLP_IN;
    for (int l = 1; l < m->L; l++) m->dim[l] = f->cfg.width;
    m->dim[m->L] = MLP_CLASSES;
    PEAT_TRY(mlp_data(f, m));

    peat_rng_t *r = peat_rng_new(peat_seed_derive(f->cfg.seed, "mlp.init"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "mlp: rng");
    peat_status st = PEAT_OK;
    for (int l = 0; l < m->L && st == PEAT_OK; l++) {
        char nm[48];
        int64_t ws[2] = {m->dim[l], m->dim[l + 1]}, bs[1] = {m->dim[l + 1]};
        snprintf(m->lname[l], sizeof m->lname[l], "fc%d", l + 1);
        snprintf(nm, sizeof nm, "%s.w", m->lname[l]);
        st = peat_models_param_add(f, nm, 2, ws, 1, &m->W[l]);
        if (st != PEAT_OK) break;
        /* He init for layers feeding a ReLU, 1/sqrt(fan_in) for the logits */
        double fan = (double)m->dim[l];
        peat_models_param_init(m->W[l], r, l + 1 < m->L ? sqrt(2.0 / fan) : sqrt(1.0 / fan));
        snprintf(nm, sizeof nm, "%s.b", m->lname[l]);
        st = peat_models_param_add(f, nm, 1, bs, 0, &m->b[l]);
    }
    peat_rng_free(r);
    PEAT_TRY(st);
    for (int l = 0; l < m->L; l++) {
        int64_t o = m->dim[l + 1];
        PEAT_TRY(peat_models_tensor(&m->G[l], B, o, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->Z[l], B, o, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->dZ[l], B, o, 0, 0));
        if (l + 1 < m->L) PEAT_TRY(peat_models_tensor(&m->A[l], B, o, 0, 0));
        if (l > 0) PEAT_TRY(peat_models_tensor(&m->dX[l], B, m->dim[l], 0, 0));
    }
    PEAT_TRY(peat_models_tensor(&m->xb, B, MLP_IN, 0, 0));
    PEAT_TRY(peat_tensor_alloc1(PEAT_DTYPE_I32, B, &m->yb));
    return peat_models_xent_ws_alloc(&m->xw, B);
}

static void mlp_destroy(peat_flow_t *f)
{
    mlp_impl *m = f->impl;
    if (!m) return;
    for (int l = 0; l < MLP_MAX_LAYERS; l++) {
        peat_tensor_free(m->G[l]);
        peat_tensor_free(m->Z[l]);
        peat_tensor_free(m->A[l]);
        peat_tensor_free(m->dZ[l]);
        peat_tensor_free(m->dX[l]);
    }
    peat_tensor_free(m->xb);
    peat_tensor_free(m->yb);
    peat_models_xent_ws_free(&m->xw);
    peat_tensor_free(m->xtr);
    peat_tensor_free(m->ytr);
    peat_tensor_free(m->xev);
    peat_tensor_free(m->yev);
    free(m);
    f->impl = NULL;
}

/* Copies rows idx[0..B) of (x, y) into the batch tensors. */
static void mlp_gather(mlp_impl *m, const peat_tensor *x, const peat_tensor *y, const int64_t *idx,
                       int B)
{
    for (int i = 0; i < B; i++) {
        memcpy(peat_f32(m->xb) + (size_t)i * MLP_IN, peat_f32(x) + idx[i] * MLP_IN,
               MLP_IN * sizeof(float));
        peat_i32(m->yb)[i] = peat_i32(y)[idx[i]];
    }
}

static peat_status mlp_forward(peat_flow_t *f, mlp_impl *m)
{
    int B = f->cfg.batch;
    const peat_tensor *X = m->xb;
    for (int l = 0; l < m->L; l++) {
        int64_t in = m->dim[l], out = m->dim[l + 1];
        PEAT_TRY(peat_models_linear_fwd(f, m->lname[l], B, in, out, X, m->W[l]->w, NULL, m->G[l]));
        PEAT_TRY(peat_models_bias_add(f, m->lname[l], PEAT_PHASE_FWD, B, out, 1, m->G[l],
                                      m->b[l]->w, m->Z[l]));
        if (l + 1 < m->L) {
            PEAT_TRY(
                peat_models_unary(f, m->lname[l], PEAT_PHASE_FWD, m->act, m->Z[l], NULL, m->A[l]));
            X = m->A[l];
        }
    }
    return PEAT_OK;
}

static peat_status mlp_train(peat_flow_t *f, double *loss)
{
    mlp_impl *m = f->impl;
    int B = f->cfg.batch, L = m->L;
    int64_t idx[4096];
    for (int i = 0; i < B; i++)
        idx[i] =
            (int64_t)(peat_models_hash(f->cfg.seed, (uint64_t)f->step, (uint64_t)i) % MLP_TRAIN);
    mlp_gather(m, m->xtr, m->ytr, idx, B);
    PEAT_TRY(mlp_forward(f, m));
    PEAT_TRY(peat_models_xent(f, "loss", B, MLP_CLASSES, m->Z[L - 1], m->yb, &m->xw, m->dZ[L - 1],
                              loss));
    for (int l = L - 1; l >= 0; l--) {
        int64_t in = m->dim[l], out = m->dim[l + 1];
        PEAT_TRY(peat_models_bias_bwd(f, m->lname[l], B, out, 1, m->dZ[l], m->b[l]->g));
        const peat_tensor *X = l ? m->A[l - 1] : m->xb;
        PEAT_TRY(peat_models_linear_bwd(f, m->lname[l], B, in, out, X, m->W[l]->w, m->dZ[l],
                                        m->W[l]->g, l ? m->dX[l] : NULL));
        if (l)
            PEAT_TRY(peat_models_unary(f, m->lname[l - 1], PEAT_PHASE_BWD, m->act_bwd, m->Z[l - 1],
                                       m->dX[l], m->dZ[l - 1]));
    }
    return PEAT_OK;
}

static peat_status mlp_eval(peat_flow_t *f, double *loss, double *acc)
{
    mlp_impl *m = f->impl;
    int B = f->cfg.batch;
    int64_t idx[4096], n = 0, correct = 0;
    double sum = 0;
    /* whole batches of the held-out set (the workspace is sized for the batch) */
    for (int64_t s = 0; s + B <= MLP_EVAL; s += B) {
        for (int i = 0; i < B; i++) idx[i] = s + i;
        mlp_gather(m, m->xev, m->yev, idx, B);
        PEAT_TRY(mlp_forward(f, m));
        double l = 0;
        PEAT_TRY(
            peat_models_xent(f, "loss", B, MLP_CLASSES, m->Z[m->L - 1], m->yb, &m->xw, NULL, &l));
        sum += l * B;
        for (int i = 0; i < B; i++)
            correct += peat_models_argmax(peat_f32(m->Z[m->L - 1]) + i * MLP_CLASSES,
                                          MLP_CLASSES) == peat_i32(m->yb)[i];
        n += B;
    }
    if (n == 0) return PEAT_ERROR(PEAT_ERR_INVAL, "mlp: batch %d larger than held-out set", B);
    *loss = sum / (double)n;
    *acc = (double)correct / (double)n;
    return PEAT_OK;
}

/* Op kinds and defaults both variants share (same model, data, seeds); the activation is each's. */
#define MLP_OPS                                                                                    \
    (PEAT_OP_BIT(PEAT_OP_GEMM) | PEAT_OP_BIT(PEAT_OP_BIAS_ADD) |                                   \
     PEAT_OP_BIT(PEAT_OP_BIAS_ADD_BWD) | PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY) |                      \
     PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY_BWD) | PEAT_OP_BIT(PEAT_OP_REDUCE))
#define MLP_COMMON                                                                                 \
    .def_batch = 32, .def_width = 64, .def_depth = 2, .def_seq = 1, .def_lr_adamw = 3e-3,          \
    .def_lr_sgd = 0.05, .create = mlp_create, .train = mlp_train, .eval = mlp_eval,                \
    .destroy = mlp_destroy

const peat_models_flow_ops peat_models_mlp_ops = {
    .name = "mlp",
    .desc = "ReLU MLP (16 -> 64 -> 64 -> 4) on a generated 12-cluster Gaussian mixture, 4 classes",
    .ops = MLP_OPS | PEAT_OP_BIT(PEAT_OP_RELU) | PEAT_OP_BIT(PEAT_OP_RELU_BWD),
    MLP_COMMON,
};

const peat_models_flow_ops peat_models_mlp_silu_ops = {
    .name = "mlp_silu",
    .desc = "the mlp model and task with SiLU activations (x sigmoid(x)) in place of ReLU",
    .ops = MLP_OPS | PEAT_OP_BIT(PEAT_OP_SILU) | PEAT_OP_BIT(PEAT_OP_SILU_BWD),
    MLP_COMMON,
};
