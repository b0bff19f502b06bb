/* layers.c: op call helpers for the flows: each fills a peat_args and runs it through the exec. */
#include "models/flow_impl.h"

#include <string.h>

static peat_status run(peat_flow_t *f, const char *layer, peat_phase ph, peat_op_kind op,
                       const peat_op_params *p, int n_in, const peat_tensor *const *in, int n_out,
                       peat_tensor *const *out)
{
    peat_args a = peat_args_make(op, p, n_in, in, n_out, out);
    return peat_models_exec(f, layer, ph, &a);
}

/* A linear layer's GEMM; in an fp8 flow a GEMM_FP8 of A and B quantized to formats fa and fb
 * (the caller's: e4m3 for activations and weights, e5m2 for gradients). */
static peat_status linear_gemm(peat_flow_t *f, const char *layer, peat_phase ph, int ta, int tb,
                               int64_t M, int64_t N, int64_t K, const peat_tensor *A, int fa,
                               const peat_tensor *B, int fb, double beta, const peat_tensor *C,
                               peat_tensor *D)
{
    if (f->cfg.precision != PEAT_PRECISION_FP8)
        return peat_models_gemm(f, layer, ph, ta, tb, M, N, K, A, B, beta, C, D);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = ta, p.i[1] = tb, p.i[2] = M, p.i[3] = N, p.i[4] = K, p.i[5] = 1;
    p.i[6] = fa, p.i[7] = fb;
    p.f[1] = beta;
    const peat_tensor *in[3] = {NULL, NULL, C};
    PEAT_TRY(peat_models_fp8_quantize(f, 0, A, fa, &in[0], &p.f[0]));
    PEAT_TRY(peat_models_fp8_quantize(f, 1, B, fb, &in[1], &p.f[2]));
    return run(f, layer, ph, PEAT_OP_GEMM_FP8, &p, beta != 0.0 ? 3 : 2, in, 1, &D);
}

peat_status peat_models_gemm(peat_flow_t *f, const char *layer, peat_phase ph, int ta, int tb,
                             int64_t M, int64_t N, int64_t K, const peat_tensor *A,
                             const peat_tensor *B, double beta, const peat_tensor *C,
                             peat_tensor *D)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = ta, p.i[1] = tb, p.i[2] = M, p.i[3] = N, p.i[4] = K, p.i[5] = 1;
    p.f[0] = 1.0, p.f[1] = beta;
    const peat_tensor *in[3] = {A, B, C};
    return run(f, layer, ph, PEAT_OP_GEMM, &p, beta != 0.0 ? 3 : 2, in, 1, &D);
}

peat_status peat_models_gemm_batched(peat_flow_t *f, const char *layer, peat_phase ph, int ta,
                                     int tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                                     double alpha, const peat_tensor *A, const peat_tensor *B,
                                     peat_tensor *D)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = ta, p.i[1] = tb, p.i[2] = M, p.i[3] = N, p.i[4] = K, p.i[5] = batch;
    p.f[0] = alpha;
    const peat_tensor *in[2] = {A, B};
    return run(f, layer, ph, PEAT_OP_GEMM, &p, 2, in, 1, &D);
}

peat_status peat_models_softmax(peat_flow_t *f, const char *layer, peat_phase ph, int64_t R,
                                int64_t C, const peat_tensor *X, const peat_tensor *dY,
                                peat_tensor *Y)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C;
    const peat_tensor *in[2] = {X, dY};
    return run(f, layer, ph, dY ? PEAT_OP_SOFTMAX_BWD : PEAT_OP_SOFTMAX, &p, dY ? 2 : 1, in, 1, &Y);
}

peat_status peat_models_linear_fwd(peat_flow_t *f, const char *layer, int64_t R, int64_t in,
                                   int64_t out, const peat_tensor *X, const peat_tensor *W,
                                   const peat_tensor *C, peat_tensor *Y)
{
    return linear_gemm(f, layer, PEAT_PHASE_FWD, 0, 0, R, out, in, X, PEAT_FP8_E4M3, W,
                       PEAT_FP8_E4M3, C ? 1.0 : 0.0, C, Y);
}

peat_status peat_models_linear_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t in,
                                   int64_t out, const peat_tensor *X, const peat_tensor *W,
                                   const peat_tensor *dY, peat_tensor *dW, peat_tensor *dX)
{
    /* W is [in,out]: dW = X^T dY is (in x R)(R x out); dX = dY W^T is (R x out)(out x in) */
    PEAT_TRY(linear_gemm(f, layer, PEAT_PHASE_BWD, 1, 0, in, out, R, X, PEAT_FP8_E4M3, dY,
                         PEAT_FP8_E5M2, 0.0, NULL, dW));
    if (dX)
        PEAT_TRY(linear_gemm(f, layer, PEAT_PHASE_BWD, 0, 1, R, in, out, dY, PEAT_FP8_E5M2, W,
                             PEAT_FP8_E4M3, 0.0, NULL, dX));
    return PEAT_OK;
}

peat_status peat_models_bias_add(peat_flow_t *f, const char *layer, peat_phase ph, int64_t R,
                                 int64_t C, int64_t S, const peat_tensor *X, const peat_tensor *b,
                                 peat_tensor *Y)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C, p.i[2] = S;
    const peat_tensor *in[2] = {X, b};
    return run(f, layer, ph, PEAT_OP_BIAS_ADD, &p, 2, in, 1, &Y);
}

peat_status peat_models_bias_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t C, int64_t S,
                                 const peat_tensor *dY, peat_tensor *db)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C, p.i[2] = S;
    return run(f, layer, PEAT_PHASE_BWD, PEAT_OP_BIAS_ADD_BWD, &p, 1, &dY, 1, &db);
}

peat_status peat_models_unary(peat_flow_t *f, const char *layer, peat_phase ph, peat_op_kind op,
                              const peat_tensor *X, const peat_tensor *dY, peat_tensor *Y)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = peat_tensor_numel(X);
    const peat_tensor *in[2] = {X, dY};
    return run(f, layer, ph, op, &p, dY ? 2 : 1, in, 1, &Y);
}

peat_status peat_models_layernorm(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                  const peat_tensor *X, const peat_tensor *gamma,
                                  const peat_tensor *beta, peat_tensor *Y, peat_tensor *mean,
                                  peat_tensor *rstd)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C;
    p.f[0] = 1e-5;
    const peat_tensor *in[3] = {X, gamma, beta};
    peat_tensor *out[3] = {Y, mean, rstd};
    return run(f, layer, PEAT_PHASE_FWD, PEAT_OP_LAYERNORM, &p, 3, in, 3, out);
}

peat_status peat_models_layernorm_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                      const peat_tensor *X, const peat_tensor *gamma,
                                      const peat_tensor *mean, const peat_tensor *rstd,
                                      const peat_tensor *dY, peat_tensor *dX, peat_tensor *dgamma,
                                      peat_tensor *dbeta)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C;
    p.f[0] = 1e-5;
    const peat_tensor *in[5] = {X, gamma, mean, rstd, dY};
    peat_tensor *out[3] = {dX, dgamma, dbeta};
    return run(f, layer, PEAT_PHASE_BWD, PEAT_OP_LAYERNORM_BWD, &p, 5, in, 3, out);
}

/* Y = silu(G) U over n elements (the SwiGLU MLP's product); with dY, its backward into dG, dU */
peat_status peat_models_swiglu(peat_flow_t *f, const char *layer, const peat_tensor *G,
                               const peat_tensor *U, peat_tensor *Y)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = peat_tensor_numel(G);
    const peat_tensor *in[2] = {G, U};
    return run(f, layer, PEAT_PHASE_FWD, PEAT_OP_SWIGLU, &p, 2, in, 1, &Y);
}

peat_status peat_models_swiglu_bwd(peat_flow_t *f, const char *layer, const peat_tensor *G,
                                   const peat_tensor *U, const peat_tensor *dY, peat_tensor *dG,
                                   peat_tensor *dU)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = peat_tensor_numel(G);
    const peat_tensor *in[3] = {G, U, dY};
    peat_tensor *out[2] = {dG, dU};
    return run(f, layer, PEAT_PHASE_BWD, PEAT_OP_SWIGLU_BWD, &p, 3, in, 2, out);
}

/* Rotary position embedding of heads [B, H, T, Dh] (half-split pairs as Hugging Face's LLaMA,
 * base 10000, positions from 0); the backward (ph BWD) rotates back */
peat_status peat_models_rope(peat_flow_t *f, const char *layer, peat_phase ph, int64_t B, int64_t H,
                             int64_t T, int64_t Dh, const peat_tensor *X, peat_tensor *Y)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = B, p.i[1] = H, p.i[2] = T, p.i[3] = Dh, p.i[4] = 1, p.i[5] = 0;
    p.f[0] = 10000.0;
    const peat_tensor *in[1] = {X};
    return run(f, layer, ph, ph == PEAT_PHASE_BWD ? PEAT_OP_ROPE_BWD : PEAT_OP_ROPE, &p, 1, in, 1,
               &Y);
}

/* RMSNorm with eps 1e-6 (LLaMA's) */
peat_status peat_models_rmsnorm(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                const peat_tensor *X, const peat_tensor *gamma, peat_tensor *Y,
                                peat_tensor *rstd)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C;
    p.f[0] = 1e-6;
    const peat_tensor *in[2] = {X, gamma};
    peat_tensor *out[2] = {Y, rstd};
    return run(f, layer, PEAT_PHASE_FWD, PEAT_OP_RMSNORM, &p, 2, in, 2, out);
}

peat_status peat_models_rmsnorm_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                    const peat_tensor *X, const peat_tensor *gamma,
                                    const peat_tensor *rstd, const peat_tensor *dY, peat_tensor *dX,
                                    peat_tensor *dgamma)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C;
    p.f[0] = 1e-6;
    const peat_tensor *in[4] = {X, gamma, rstd, dY};
    peat_tensor *out[2] = {dX, dgamma};
    return run(f, layer, PEAT_PHASE_BWD, PEAT_OP_RMSNORM_BWD, &p, 4, in, 2, out);
}

peat_status peat_models_xent_ws_alloc(peat_models_xent_ws *ws, int64_t R)
{
    memset(ws, 0, sizeof *ws);
    PEAT_TRY(peat_models_tensor(&ws->loss, R, 0, 0, 0));
    PEAT_TRY(peat_models_tensor(&ws->dloss, R, 0, 0, 0));
    PEAT_TRY(peat_models_tensor(&ws->mean, 1, 0, 0, 0));
    /* the gradient of the mean loss w.r.t. each row's loss: constant glue, set once */
    float *d = peat_f32(ws->dloss);
    for (int64_t r = 0; r < R; r++) d[r] = (float)(1.0 / (double)R);
    return PEAT_OK;
}

void peat_models_xent_ws_free(peat_models_xent_ws *ws)
{
    peat_tensor_free(ws->loss);
    peat_tensor_free(ws->dloss);
    peat_tensor_free(ws->mean);
    memset(ws, 0, sizeof *ws);
}

peat_status peat_models_xent(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                             const peat_tensor *logits, const peat_tensor *target,
                             peat_models_xent_ws *ws, peat_tensor *dlogits, double *mean_loss)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = R, p.i[1] = C;
    const peat_tensor *in[3] = {logits, target, ws->dloss};
    PEAT_TRY(run(f, layer, PEAT_PHASE_FWD, PEAT_OP_CROSS_ENTROPY, &p, 2, in, 1, &ws->loss));
    /* the mean over the batch: one row of R values */
    peat_op_params rp;
    memset(&rp, 0, sizeof rp);
    rp.i[0] = 1, rp.i[1] = R, rp.i[2] = 1;
    const peat_tensor *rin = ws->loss;
    PEAT_TRY(run(f, layer, PEAT_PHASE_FWD, PEAT_OP_REDUCE, &rp, 1, &rin, 1, &ws->mean));
    if (mean_loss) *mean_loss = peat_f32(ws->mean)[0];
    double scale = peat_models_amp_loss_scale(f);
    if (dlogits && scale != 1.0) {
        /* amp-fp16: the backward of scale x the mean loss (GradScaler.scale(loss).backward()) */
        float *d = peat_f32(ws->dloss);
        for (int64_t r = 0; r < R; r++) d[r] = (float)(scale / (double)R);
    }
    if (dlogits)
        PEAT_TRY(run(f, layer, PEAT_PHASE_BWD, PEAT_OP_CROSS_ENTROPY_BWD, &p, 3, in, 1, &dlogits));
    return PEAT_OK;
}

int peat_models_argmax(const float *x, int n)
{
    int best = 0;
    for (int k = 1; k < n; k++)
        if (x[k] > x[best]) best = k;
    return best;
}
