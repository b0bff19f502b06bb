/* flow_impl.h: internals shared by the flows (flow object, parameter list, op call helpers). */
#ifndef PEAT_MODELS_FLOW_IMPL_H
#define PEAT_MODELS_FLOW_IMPL_H

#include "models/models.h"

/* One trainable tensor with its gradient and optimizer state (AdamW m and v, or SGD momentum
 * in s1 with s2 unused). */
typedef struct peat_models_param {
    char name[48];
    peat_tensor *w, *g, *s1, *s2;
    int decay; /* weight decay applies (matrices, not biases or norm gains) */
} peat_models_param;

/* One flow's size preset: the sizes a config leaves 0, and per flow the shapes only a preset
 * sets (0 where the flow has none). */
typedef struct peat_models_preset {
    int batch, width, depth, seq;
    int vocab, head_dim; /* gpt: token vocabulary (13 used), dims per attention head */
    int lm; /* gpt: language modelling on the Zipf-bigram corpus (seq = tokens read, up to 256)
             * instead of digit addition (seq 5..14) */
    int image, channels, strided; /* cnn: image side, input channels, stride-2 convs (each
                                   * doubling the channels) after the `depth` stride-1 ones */
} peat_models_preset;
/* The preset of a flow ("gpt_unfused" shares gpt's) at a size; NULL for an unknown pair. */
const peat_models_preset *peat_models_preset_get(const char *flow, int size);

/* What a flow implements; the common code does config, state lists and the optimizer. */
typedef struct peat_models_flow_ops {
    const char *name;
    const char *desc;
    uint64_t ops; /* op kinds of forward+backward+loss (the optimizer bit is added per config) */
    int def_batch, def_width, def_depth, def_seq;
    double def_lr_adamw, def_lr_sgd;
    peat_optimizer def_optimizer; /* what PEAT_OPTIM_DEFAULT means here (0: AdamW) */
    int gemm_beyond_linear;       /* GEMMs other than linear layers' (attention's): GEMM stays in an
                                   * fp8 flow's op mask */
    /* allocates impl, data and parameters (peat_models_param_add) */
    peat_status (*create)(peat_flow_t *f);
    /* forward and backward of step f->step: fills every param's g, returns the mean loss */
    peat_status (*train)(peat_flow_t *f, double *loss);
    /* held-out loss and accuracy (forward only) */
    peat_status (*eval)(peat_flow_t *f, double *loss, double *acc);
    void (*destroy)(peat_flow_t *f);
} peat_models_flow_ops;

/* Mixed precision (models/amp.c): GradScaler's state and the scratch tensors that hold the
 * rounded copies of a GEMM-shaped op's inputs. */
typedef struct peat_models_amp {
    double scale;                  /* the loss scale the next backward runs under */
    int64_t tracker;               /* successful steps since the last growth or backoff */
    int64_t skipped;               /* optimizer steps skipped so far */
    peat_tensor cast[PEAT_MAX_IO]; /* views of the buffers below, shaped per call */
    float *buf[PEAT_MAX_IO];
    int64_t cap[PEAT_MAX_IO]; /* floats each buffer holds (grown, never shrunk) */
} peat_models_amp;

struct peat_flow {
    const peat_models_flow_ops *ops;
    peat_flow_config cfg;             /* resolved: no 0 = default fields left */
    const peat_models_preset *preset; /* cfg.size's */
    peat_exec_t *ex;
    peat_models_param **params; /* each allocated alone: pointers to them stay valid */
    int n_params, cap_params;
    peat_tensor **state; /* weights, then optimizer state */
    const char **state_names;
    char (*state_name_buf)[64];
    int n_state;
    int64_t step;
    peat_models_amp amp;
    void *impl;
};

extern const peat_models_flow_ops peat_models_mlp_ops;
extern const peat_models_flow_ops peat_models_cnn_ops;
extern const peat_models_flow_ops peat_models_gpt_ops;
extern const peat_models_flow_ops peat_models_gpt_unfused_ops; /* gpt.c, attention unfused */
extern const peat_models_flow_ops peat_models_llama_ops;       /* gpt.c, RMSNorm, no biases */
extern const peat_models_flow_ops peat_models_mlp_silu_ops;    /* mlp.c, SiLU activations */
extern const peat_models_flow_ops peat_models_resnet_ops;      /* cnn.c, BN, pooling, residual */

/* Adds a parameter of the given shape (zero-filled, with gradient and optimizer state) and
 * returns it through *out. Init is the caller's. */
peat_status peat_models_param_add(peat_flow_t *f, const char *name, int ndim, const int64_t *shape,
                                  int decay, peat_models_param **out);
/* Fills a parameter with N(0, sigma^2) from rng (init only). */
void peat_models_param_init(peat_models_param *p, peat_rng_t *r, double sigma);
void peat_models_param_fill(peat_models_param *p, float v);

/* Deterministic 64-bit mixing of (seed, a, b): batch indices that depend only on the step, so
 * a flow resumed at step s draws the same batches as one that ran up to s. */
uint64_t peat_models_hash(uint64_t seed, uint64_t a, uint64_t b);

/* The gpt flows' language-modelling corpus (models/corpus.c, docs/flows.md "gpt base"): a seeded
 * sparse reversible Markov chain over V tokens whose stationary token law is Zipf(zipf_s) (token
 * id = frequency rank), and an in-context copy rule taken with probability copy_p. */
typedef struct peat_models_corpus {
    int V;
    double zipf_s, copy_p;
    double *pi;   /* [V] the Zipf law (the chain's stationary law) */
    double *pcdf; /* [V] its cumulative sum: the first token of a row */
    int *off;     /* [V + 1] CSR offsets of each token's successors */
    int *nb;      /* [edges] successor tokens */
    double *cdf;  /* [edges] cumulative transition probabilities, row by row */
    int64_t edges;
    double h_unigram, h_bigram; /* nats: entropy of pi, and of the next token given the current
                                 * one under the chain (the copy rule only lowers the latter) */
} peat_models_corpus;
/* The gpt flows' corpus: Zipf exponent (the top token is 100^s times as frequent as the 100th)
 * and in-context copy rate. */
#define PEAT_MODELS_LM_ZIPF 1.0
#define PEAT_MODELS_LM_COPY 0.15
peat_status peat_models_corpus_alloc(peat_models_corpus *c, int V, double zipf_s, double copy_p,
                                     uint64_t seed);
void peat_models_corpus_free(peat_models_corpus *c);
/* n tokens of row (a, b) of the corpus, deterministic in (seed, a, b). */
void peat_models_corpus_sample(const peat_models_corpus *c, uint64_t seed, uint64_t a, uint64_t b,
                               int n, int32_t *out);

/* Allocation helper: a zeroed F32 tensor of up to 4 dims (trailing dims 0 = absent). */
peat_status peat_models_tensor(peat_tensor **out, int64_t d0, int64_t d1, int64_t d2, int64_t d3);

/* Runs one op through the exec under the flow's precision: for GEMM, CONV2D(+BWD) and
 * ATTENTION(+BWD) at amp-fp16 / bf16, the inputs autocast casts are replaced by rounded copies
 * and the outputs it produces in half are rounded in place after the call. Every op of a flow
 * goes through here. */
peat_status peat_models_exec(peat_flow_t *f, const char *layer, peat_phase ph, peat_args *a);
/* The flow's half-precision rounding (fp16 or bf16; identity at fp32). */
float peat_models_amp_round(const peat_flow_t *f, float x);
/* fp8 (PEAT_PRECISION_FP8): t quantized to format fmt with its power-of-two current scale into
 * scratch slot k (valid until the slot's next use): the copy in *out, the scale in *scale. */
peat_status peat_models_fp8_quantize(peat_flow_t *f, int k, const peat_tensor *t, int fmt,
                                     const peat_tensor **out, double *scale);
/* The loss's backward multiplier: the scale at amp-fp16, 1 otherwise. */
double peat_models_amp_loss_scale(const peat_flow_t *f);
/* After the backward: unscales the gradients (amp-fp16), returns 1 when one is inf or NaN (the
 * optimizer step is then skipped), and updates the scale as GradScaler.update does. */
int peat_models_amp_unscale_update(peat_flow_t *f);
void peat_models_amp_free(peat_flow_t *f);

/* ---- op call helpers: each builds a peat_args and runs it through the exec ---------------- */

/* D = alpha op(A) op(B) + beta C (C may be NULL when beta == 0). */
peat_status peat_models_gemm(peat_flow_t *f, const char *layer, peat_phase ph, int ta, int tb,
                             int64_t M, int64_t N, int64_t K, const peat_tensor *A,
                             const peat_tensor *B, double beta, const peat_tensor *C,
                             peat_tensor *D);
/* D[batch,M,N] = alpha op(A) op(B) per batch entry (no C): attention's score and value GEMMs. */
peat_status peat_models_gemm_batched(peat_flow_t *f, const char *layer, peat_phase ph, int ta,
                                     int tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                                     double alpha, const peat_tensor *A, const peat_tensor *B,
                                     peat_tensor *D);
/* Row softmax of X [R,C] into Y; with dY != NULL the backward instead: X is then the softmax
 * output and Y receives dX. */
peat_status peat_models_softmax(peat_flow_t *f, const char *layer, peat_phase ph, int64_t R,
                                int64_t C, const peat_tensor *X, const peat_tensor *dY,
                                peat_tensor *Y);
/* Y[R,out] = X[R,in] W[in,out] (+ C when C != NULL, the fused residual). */
peat_status peat_models_linear_fwd(peat_flow_t *f, const char *layer, int64_t R, int64_t in,
                                   int64_t out, const peat_tensor *X, const peat_tensor *W,
                                   const peat_tensor *C, peat_tensor *Y);
/* dW = X^T dY ; dX = dY W^T (dX skipped when NULL). */
peat_status peat_models_linear_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t in,
                                   int64_t out, const peat_tensor *X, const peat_tensor *W,
                                   const peat_tensor *dY, peat_tensor *dW, peat_tensor *dX);
/* Y[R,C,S] = X + b[C]; with R = 1, S = 1 and b of numel C this is an elementwise sum. */
peat_status peat_models_bias_add(peat_flow_t *f, const char *layer, peat_phase ph, int64_t R,
                                 int64_t C, int64_t S, const peat_tensor *X, const peat_tensor *b,
                                 peat_tensor *Y);
peat_status peat_models_bias_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t C, int64_t S,
                                 const peat_tensor *dY, peat_tensor *db);
/* Elementwise op (RELU, GELU: in X ; *_BWD: in X, dY). */
peat_status peat_models_unary(peat_flow_t *f, const char *layer, peat_phase ph, peat_op_kind op,
                              const peat_tensor *X, const peat_tensor *dY, peat_tensor *Y);
peat_status peat_models_layernorm(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                  const peat_tensor *X, const peat_tensor *gamma,
                                  const peat_tensor *beta, peat_tensor *Y, peat_tensor *mean,
                                  peat_tensor *rstd);
peat_status peat_models_swiglu(peat_flow_t *f, const char *layer, const peat_tensor *G,
                               const peat_tensor *U, peat_tensor *Y);
peat_status peat_models_swiglu_bwd(peat_flow_t *f, const char *layer, const peat_tensor *G,
                                   const peat_tensor *U, const peat_tensor *dY, peat_tensor *dG,
                                   peat_tensor *dU);
peat_status peat_models_rope(peat_flow_t *f, const char *layer, peat_phase ph, int64_t B, int64_t H,
                             int64_t T, int64_t Dh, const peat_tensor *X, peat_tensor *Y);
peat_status peat_models_rmsnorm(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                const peat_tensor *X, const peat_tensor *gamma, peat_tensor *Y,
                                peat_tensor *rstd);
peat_status peat_models_rmsnorm_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                    const peat_tensor *X, const peat_tensor *gamma,
                                    const peat_tensor *rstd, const peat_tensor *dY, peat_tensor *dX,
                                    peat_tensor *dgamma);
peat_status peat_models_layernorm_bwd(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                                      const peat_tensor *X, const peat_tensor *gamma,
                                      const peat_tensor *mean, const peat_tensor *rstd,
                                      const peat_tensor *dY, peat_tensor *dX, peat_tensor *dgamma,
                                      peat_tensor *dbeta);
/* Cross-entropy loss of logits [R,C] against target, mean through REDUCE mode 1; when dlogits
 * is not NULL also the backward with dloss = 1/R (so dlogits is the gradient of the mean). ws
 * holds per-row loss [R], dloss [R] and the mean [1]. */
typedef struct peat_models_xent_ws {
    peat_tensor *loss, *dloss, *mean;
} peat_models_xent_ws;
peat_status peat_models_xent_ws_alloc(peat_models_xent_ws *ws, int64_t R);
void peat_models_xent_ws_free(peat_models_xent_ws *ws);
peat_status peat_models_xent(peat_flow_t *f, const char *layer, int64_t R, int64_t C,
                             const peat_tensor *logits, const peat_tensor *target,
                             peat_models_xent_ws *ws, peat_tensor *dlogits, double *mean_loss);
/* Index of the largest of n values (first on ties): metric counting, not op math. */
int peat_models_argmax(const float *x, int n);

#endif
