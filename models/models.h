/* models.h: training flows (models, generated data, optimizers, loop); every op goes through
 * the exec context (peat_exec_op), never straight to a kernel. */
#ifndef PEAT_MODELS_H
#define PEAT_MODELS_H

#include "peat/peat.h"

/* PEAT_OPTIM_DEFAULT: the flow's own (SGD with momentum for resnet, as torchvision's recipes
 * train it; AdamW for the others). */
typedef enum peat_optimizer {
    PEAT_OPTIM_ADAMW = 0,
    PEAT_OPTIM_SGD,
    PEAT_OPTIM_DEFAULT
} peat_optimizer;

typedef struct peat_flow_config {
    uint64_t seed; /* everything (init, data) derives from it */
    int batch;     /* 0 = flow default */
    int width;     /* hidden width / channels / d_model; 0 = default */
    int depth;     /* layers / blocks; 0 = default */
    int seq;       /* sequence length (gpt); 0 = default */
    peat_optimizer optimizer;
    int nesterov;        /* SGD: Nesterov momentum (PyTorch's nesterov=True) */
    double lr;           /* 0 = flow default for the optimizer */
    double weight_decay; /* < 0 = default */
    int task;            /* 0 = pretraining task, 1 = shifted task (for finetuning) */
    int size;      /* size preset (PEAT_FLOW_TINY = 0, the defaults; docs/flows.md): fills the sizes
                    * left 0 above and the shapes only a preset sets (gpt vocabulary, cnn images) */
    int precision; /* peat_flow_precision (docs/flows.md, "Precision"); 0 = fp32 */
    double loss_scale_init;  /* amp-fp16's first loss scale; 0 = 65536 (GradScaler's) */
    int loss_scale_interval; /* successful steps before the scale doubles; 0 = 2000 */
} peat_flow_config;

/* Training precision: fp32 everywhere (the default), or autocast's mixed precision: GEMM-shaped
 * ops (GEMM, convolution, attention) see inputs rounded to fp16 / bf16 and their outputs are
 * rounded to it, fp32 master weights and fp32 softmax, layernorm, loss and optimizer; amp-fp16
 * adds GradScaler's dynamic loss scaling. */
typedef enum peat_flow_precision {
    PEAT_PRECISION_FP32 = 0,
    PEAT_PRECISION_AMP_FP16,
    PEAT_PRECISION_BF16,
    /* fp8 training as Transformer Engine's hybrid recipe does it: every linear layer's GEMM
     * (forward, data and weight gradients) is a GEMM_FP8 call whose activations and weights are
     * e4m3 and whose gradients are e5m2, each tensor quantized with its own power-of-two scale
     * (current scaling: the largest |value| maps to at most the format's largest); fp32
     * accumulation, master weights, attention and every other op in fp32. */
    PEAT_PRECISION_FP8,
    PEAT_PRECISIONS
} peat_flow_precision;
const char *peat_models_flow_precision_name(int precision);
/* "fp32", "amp-fp16", "bf16" or "fp8" into *precision; anything else is PEAT_ERR_INVAL. */
peat_status peat_models_flow_precision_parse(const char *name, int *precision);

/* The size presets: tiny (the historical defaults), small, base (docs/flows.md). */
enum { PEAT_FLOW_TINY = 0, PEAT_FLOW_SMALL, PEAT_FLOW_BASE, PEAT_FLOW_SIZES };
const char *peat_models_flow_size_name(int size);
/* "tiny", "small" or "base" into *size; anything else is PEAT_ERR_INVAL. */
peat_status peat_models_flow_size_parse(const char *name, int *size);

typedef struct peat_flow_metrics {
    double loss;     /* mean training loss of the last step */
    double accuracy; /* held-out accuracy (eval): exact match (gpt addition), next-token accuracy
                      * (gpt base), NaN if n/a */
    int64_t step;
    double loss_scale; /* the loss scale this step's backward ran under (1 unless amp-fp16) */
    int skipped;       /* 1 when amp-fp16 skipped the optimizer step (inf/nan gradients) */
} peat_flow_metrics;

typedef struct peat_flow peat_flow_t;

/* Names of the built-in flows ("mlp", "cnn", "gpt"), NULL-terminated. */
const char *const *peat_models_flow_names(void);
const char *peat_models_flow_describe(const char *name);
/* Op kinds a flow calls (bit (1u<<op)). */
uint64_t peat_models_flow_op_mask(const char *name);
/* The same for a given config: the optimizer bit follows cfg->optimizer and GEMM_FP8 replaces
 * the linear layers' GEMM under --precision fp8 (peat_models_flow_op_mask
 * is the flow's default config: resnet's SGD, AdamW elsewhere). cfg may be NULL. */
uint64_t peat_models_flow_op_mask_for(const char *name, const peat_flow_config *cfg);
/* The optimizer a flow trains with under cfg (NULL: the defaults): PEAT_OPTIM_DEFAULT resolved. */
peat_optimizer peat_models_flow_optimizer(const char *name, const peat_flow_config *cfg);
peat_status peat_models_flow_alloc(const char *name, const peat_flow_config *cfg, peat_exec_t *ex,
                                   peat_flow_t **out);
void peat_models_flow_free(peat_flow_t *f);
/* One training iteration (forward, backward, optimizer update); sets the exec's iter. */
peat_status peat_models_flow_step(peat_flow_t *f, peat_flow_metrics *m);
/* Loss and accuracy on the held-out set (forward only, through the same exec). */
peat_status peat_models_flow_eval(peat_flow_t *f, peat_flow_metrics *m);
/* State tensors (weights then optimizer state), each with a stable name like "fc1.w",
 * "adam.m.fc1.w". */
int peat_models_flow_state_count(const peat_flow_t *f);
peat_tensor *peat_models_flow_state(peat_flow_t *f, int i, const char **name);
int64_t peat_models_flow_step_count(const peat_flow_t *f);
/* After loading a checkpoint into the state tensors, tell the flow which step it is at. */
void peat_models_flow_set_step(peat_flow_t *f, int64_t step);
/* amp-fp16's scaler: the loss scale the next step uses, and the optimizer steps skipped so far
 * (1 and 0 for the other precisions). */
double peat_models_flow_loss_scale(const peat_flow_t *f);
int64_t peat_models_flow_skipped_steps(const peat_flow_t *f);
/* Copies every state tensor and the step count of `from` into `to` (same flow and optimizer,
 * any task): the in-memory checkpoint used for finetuning. Checks names and sizes first and
 * leaves `to` untouched when they differ. */
peat_status peat_models_flow_state_copy(const peat_flow_t *from, peat_flow_t *to);

#endif
