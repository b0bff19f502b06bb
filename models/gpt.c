/* gpt.c: the "gpt", "gpt_unfused" and "llama" flows: a small pre-norm decoder-only transformer
 * learning digit arithmetic (tiny, small) or next-token prediction on a Zipf-bigram corpus
 * (base), its attention one fused op or the unfused GEMM/mask/softmax/GEMM chain; "llama" norms
 * with RMSNorm and has no biases in its attention and MLP projections. */
#include "models/flow_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The causal mask's score above the diagonal (finite, never -inf). */
#define GPT_MASK (-1e9f)

/* Tokens: digits 0..9, then the operators and '='; the rest of the vocabulary (16 tokens at the
 * tiny size, 1024 at base: the preset's) is unused (the model must learn never to predict it). */
enum {
    TOK_PLUS = 10,
    TOK_MINUS = 11,
    TOK_EQ = 12,
    GPT_EVAL = 128,
    GPT_MAX_BLOCKS = 8,
    GPT_HOLDOUT = 8, /* 1 in 8 problems is held out */
    GPT_LM_EVAL = 16 /* held-out rows of the language-modelling task */
};

typedef struct gpt_block {
    peat_models_param *ln1g, *ln1b, *wqkv, *bqkv, *wo, *ln2g, *ln2b, *w1, *b1, *w2;
    peat_models_param *w3; /* llama: the up projection of the SwiGLU MLP (w1 is its gate) */
    char name[12][32];     /* layer names of the calls */
    /* activations kept for the backward (Lse for the fused attention, P for the unfused) */
    peat_tensor *H1, *mean1, *rstd1, *QKV0, *QKV, *Q, *K, *V, *O, *Lse, *P, *Om, *Xa;
    peat_tensor *Q0, *K0; /* llama: Q and K before the rotary embedding (Q, K: after) */
    peat_tensor *H2, *mean2, *rstd2, *F, *Fb, *Fg, *Fu; /* Fu: llama's up projection */
} gpt_block;

typedef struct gpt_impl {
    int unfused; /* attention as GEMM, mask BIAS_ADD, SOFTMAX, GEMM (flow "gpt_unfused") */
    int llama;   /* RMSNorm, no projection biases (flow "llama") */
    int nd;      /* digits per operand */
    int lm;      /* the language-modelling task (the preset's): every position predicts the next */
    int64_t na;  /* scored positions per row: nd + 1 answer digits, or T */
    int64_t T, D, H, Dh, Nrow, Nans, B, V; /* V: vocabulary */
    int64_t Fh;        /* the MLP's hidden width: 4 D, or llama's 8 D / 3 rounded up to 8 */
    int64_t Hkv, Wqkv; /* K/V heads (llama: half the query heads), the QKV rows' width */
    peat_models_param *wte, *wpe, *lnfg, *lnfb, *wh;
    gpt_block blk[GPT_MAX_BLOCKS];
    peat_tensor *X[GPT_MAX_BLOCKS + 1], *E, *Hf, *meanf, *rstdf, *Ha, *logits, *dlogits;
    peat_tensor *tok, *tgt; /* I32 [B*T] inputs, I32 [Nans] answer targets */
    peat_tensor *dHa, *dHf, *dX, *dXa, *dXln, *dFg, *dFb, *dH, *dOm, *dO, *dQ, *dK, *dV, *dQKV;
    peat_tensor *dE, *dU, *dH3, *dHs; /* llama: the up projection's gradients, their sum */
    peat_tensor *dQ0, *dK0;           /* llama: dQ, dK through the rotary embedding */
    /* unfused attention: the causal mask [T*T], scores before/after it and the backward's
     * dP, dS [B*H, T, T] (scratch shared by the blocks) */
    peat_tensor *mask, *S, *Sm, *dP, *dS;
    peat_models_xent_ws xw;
    int32_t *ev_a, *ev_b; /* held-out problems */
    peat_models_corpus corpus;
    uint64_t lm_seed[2]; /* training and held-out streams of the corpus */
    int32_t *row;        /* T + 1 tokens of one row */
} gpt_impl;

/* ---- the task: "a+b=" then the sum's digits, least significant first (the order in which a
 * carry is computed, which a left-to-right model can learn); task 1: "a-b=" with a >= b ---- */

static int64_t ipow10(int n)
{
    int64_t p = 1;
    while (n-- > 0) p *= 10;
    return p;
}

static int gpt_heldout(uint64_t seed, int64_t a, int64_t b)
{
    return peat_models_hash(seed ^ 0x5eedull, (uint64_t)a, (uint64_t)b) % GPT_HOLDOUT == 0;
}

/* Writes the T+1 tokens of problem (a, b) (a >= b already for subtraction). */
static void gpt_encode(const gpt_impl *m, int task, int64_t a, int64_t b, int32_t *seq)
{
    int n = m->nd, k = 0;
    for (int i = n - 1; i >= 0; i--) seq[k++] = (int32_t)(a / ipow10(i) % 10);
    seq[k++] = task ? TOK_MINUS : TOK_PLUS;
    for (int i = n - 1; i >= 0; i--) seq[k++] = (int32_t)(b / ipow10(i) % 10);
    seq[k++] = TOK_EQ;
    int64_t c = task ? a - b : a + b;
    for (int i = 0; i <= n; i++) seq[k++] = (int32_t)(c / ipow10(i) % 10);
}

/* Problem j of step s (training, never a held-out one), deterministic in (seed, s, j). */
static void gpt_problem(const peat_flow_t *f, const gpt_impl *m, int64_t s, int j, int64_t *a,
                        int64_t *b)
{
    int64_t lim = ipow10(m->nd);
    for (uint64_t tries = 0;; tries++) {
        uint64_t h = peat_models_hash(f->cfg.seed, (uint64_t)s, (uint64_t)j * 1024 + tries);
        int64_t x = (int64_t)(h % (uint64_t)lim), y = (int64_t)((h >> 32) % (uint64_t)lim);
        if (f->cfg.task && x < y) {
            int64_t t = x;
            x = y, y = t;
        }
        if (!gpt_heldout(f->cfg.seed, x, y)) {
            *a = x, *b = y;
            return;
        }
    }
}

/* Fills the input tokens of batch row i and the answer targets from problem (a, b). */
static void gpt_fill(peat_flow_t *f, gpt_impl *m, int i, int64_t a, int64_t b)
{
    int32_t seq[64];
    gpt_encode(m, f->cfg.task, a, b, seq);
    memcpy(peat_i32(m->tok) + i * m->T, seq, (size_t)m->T * sizeof(int32_t));
    for (int j = 0; j <= m->nd; j++) peat_i32(m->tgt)[i * m->na + j] = seq[2 * m->nd + 2 + j];
}

/* Task 1 of the language-modelling task: half the vocabulary swaps names in pairs
 * (tokens 4k+2 and 4k+3), the same chain otherwise. */
static int32_t lm_label(int task, int32_t t)
{
    return task && (t & 2) ? t ^ 1 : t;
}

/* Row i of the batch from row (a, b) of the corpus's stream `held` (0 training, 1 held-out):
 * the first T of its T+1 tokens are the input, the last T the targets. */
static void lm_fill(peat_flow_t *f, gpt_impl *m, int i, int held, uint64_t a, uint64_t b)
{
    peat_models_corpus_sample(&m->corpus, m->lm_seed[held], a, b, (int)m->T + 1, m->row);
    int32_t *tok = peat_i32(m->tok) + i * m->T, *tgt = peat_i32(m->tgt) + i * m->T;
    for (int64_t t = 0; t < m->T; t++) {
        tok[t] = lm_label(f->cfg.task, m->row[t]);
        tgt[t] = lm_label(f->cfg.task, m->row[t + 1]);
    }
}

/* Input row of answer digit j of batch row i (the '=' predicts digit 0); every row under the
 * language-modelling task. */
static int64_t ans_row(const gpt_impl *m, int64_t i, int64_t j)
{
    return m->lm ? i * m->T + j : i * m->T + 2 * m->nd + 1 + j;
}

/* ---- create ------------------------------------------------------------------------------- */

static peat_status add(peat_flow_t *f, const char *nm, int64_t d0, int64_t d1, int decay,
                       peat_models_param **p)
{
    int64_t s[2] = {d0, d1};
    return peat_models_param_add(f, nm, d1 ? 2 : 1, s, decay, p);
}

static peat_status gpt_params(peat_flow_t *f, gpt_impl *m)
{
    int64_t D = m->D, L = f->cfg.depth;
    PEAT_TRY(add(f, "wte", m->V, D, 1, &m->wte));
    if (!m->llama) PEAT_TRY(add(f, "wpe", m->T, D, 1, &m->wpe)); /* llama: RoPE instead */
    char nm[48];
#define ADDB(field, suffix, d0, d1, decay)                                                         \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "h%d.%s", (int)l, suffix);                                         \
        PEAT_TRY(add(f, nm, d0, d1, decay, &b->field));                                            \
    } while (0)
    for (int64_t l = 0; l < L; l++) {
        gpt_block *b = &m->blk[l];
        ADDB(ln1g, "ln1.g", D, 0, 0);
        if (!m->llama) ADDB(ln1b, "ln1.b", D, 0, 0);
        ADDB(wqkv, "attn.qkv.w", D, m->Wqkv, 1);
        if (!m->llama) ADDB(bqkv, "attn.qkv.b", 3 * D, 0, 0);
        ADDB(wo, "attn.proj.w", D, D, 1);
        ADDB(ln2g, "ln2.g", D, 0, 0);
        if (!m->llama) ADDB(ln2b, "ln2.b", D, 0, 0);
        ADDB(w1, "mlp.fc.w", D, m->Fh, 1);
        if (!m->llama) ADDB(b1, "mlp.fc.b", m->Fh, 0, 0);
        if (m->llama) ADDB(w3, "mlp.up.w", D, m->Fh, 1);
        ADDB(w2, "mlp.proj.w", m->Fh, D, 1);
        const char *ln[12] = {"ln1",     "attn.qkv",  "attn",         "attn.proj",
                              "ln2",     "mlp.fc",    "mlp.proj",     "res",
                              "attn.qk", "attn.mask", "attn.softmax", "attn.pv"};
        for (int k = 0; k < 12; k++)
            snprintf(b->name[k], sizeof b->name[k], "h%d.%s", (int)l, ln[k]);
    }
#undef ADDB
    PEAT_TRY(add(f, "lnf.g", D, 0, 0, &m->lnfg));
    if (!m->llama) PEAT_TRY(add(f, "lnf.b", D, 0, 0, &m->lnfb));
    PEAT_TRY(add(f, "head.w", D, m->V, 1, &m->wh));

    peat_rng_t *r = peat_rng_new(peat_seed_derive(f->cfg.seed, "gpt.init"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "gpt: rng");
    /* residual-branch outputs are scaled down by sqrt(2 L) so the stream's variance does not
     * grow with depth (GPT-2's init) */
    double s_in = 1.0 / sqrt((double)D), s_out = s_in / sqrt(2.0 * (double)L);
    peat_models_param_init(m->wte, r, 0.3);
    if (!m->llama) peat_models_param_init(m->wpe, r, 0.3);
    for (int64_t l = 0; l < L; l++) {
        gpt_block *b = &m->blk[l];
        peat_models_param_fill(b->ln1g, 1.0f);
        peat_models_param_fill(b->ln2g, 1.0f);
        peat_models_param_init(b->wqkv, r, s_in);
        peat_models_param_init(b->wo, r, s_out);
        peat_models_param_init(b->w1, r, s_in);
        if (m->llama) peat_models_param_init(b->w3, r, s_in);
        peat_models_param_init(b->w2, r, 1.0 / sqrt((double)m->Fh) / sqrt(2.0 * (double)L));
    }
    peat_models_param_fill(m->lnfg, 1.0f);
    peat_models_param_init(m->wh, r, s_in);
    peat_rng_free(r);
    return PEAT_OK;
}

/* llama's own buffers: Q and K before the rotary embedding, the SwiGLU's up projection, and
 * their gradients */
static peat_status llama_buffers(gpt_impl *m, int L)
{
    int64_t N = m->Nrow, D = m->D;
    for (int l = 0; l < L; l++) {
        gpt_block *b = &m->blk[l];
        PEAT_TRY(peat_models_tensor(&b->Q0, m->B, m->H, m->T, m->Dh));
        PEAT_TRY(peat_models_tensor(&b->K0, m->B, m->Hkv, m->T, m->Dh));
        PEAT_TRY(peat_models_tensor(&b->Fu, N, m->Fh, 0, 0));
    }
    PEAT_TRY(peat_models_tensor(&m->dU, N, m->Fh, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->dH3, N, D, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->dHs, N, D, 0, 0));
    PEAT_TRY(peat_models_tensor(&m->dQ0, m->B * m->H, m->T, m->Dh, 0));
    return peat_models_tensor(&m->dK0, m->B * m->Hkv, m->T, m->Dh, 0);
}

static peat_status gpt_buffers(gpt_impl *m, int L)
{
    if (m->llama) PEAT_TRY(llama_buffers(m, L));
    int64_t N = m->Nrow, D = m->D, BH = m->B * m->H;
#define T2(t, a, b) PEAT_TRY(peat_models_tensor(&(t), a, b, 0, 0))
    for (int l = 0; l <= L; l++) T2(m->X[l], N, D);
    for (int l = 0; l < L; l++) {
        gpt_block *b = &m->blk[l];
        T2(b->H1, N, D);
        T2(b->mean1, N, 0);
        T2(b->rstd1, N, 0);
        T2(b->QKV0, N, m->Wqkv);
        T2(b->QKV, N, m->Wqkv);
        PEAT_TRY(peat_models_tensor(&b->Q, m->B, m->H, m->T, m->Dh));
        PEAT_TRY(peat_models_tensor(&b->K, m->B, m->Hkv, m->T, m->Dh));
        PEAT_TRY(peat_models_tensor(&b->V, m->B, m->Hkv, m->T, m->Dh));
        PEAT_TRY(peat_models_tensor(&b->O, m->B, m->H, m->T, m->Dh));
        if (m->unfused)
            PEAT_TRY(peat_models_tensor(&b->P, BH, m->T, m->T, 0));
        else
            PEAT_TRY(peat_models_tensor(&b->Lse, m->B, m->H, m->T, 0));
        T2(b->Om, N, D);
        T2(b->Xa, N, D);
        T2(b->H2, N, D);
        T2(b->mean2, N, 0);
        T2(b->rstd2, N, 0);
        T2(b->F, N, m->Fh);
        T2(b->Fb, N, m->Fh);
        T2(b->Fg, N, m->Fh);
    }
    T2(m->E, N, D);
    T2(m->dE, N, D);
    T2(m->Hf, N, D);
    T2(m->meanf, N, 0);
    T2(m->rstdf, N, 0);
    T2(m->Ha, m->Nans, D);
    T2(m->dHa, m->Nans, D);
    T2(m->logits, m->Nans, m->V);
    T2(m->dlogits, m->Nans, m->V);
    T2(m->dHf, N, D);
    T2(m->dX, N, D);
    T2(m->dXa, N, D);
    T2(m->dXln, N, D);
    T2(m->dFg, N, m->Fh);
    T2(m->dFb, N, m->Fh);
    T2(m->dH, N, D);
    T2(m->dOm, N, D);
    T2(m->dQKV, N, m->Wqkv);
    PEAT_TRY(peat_models_tensor(&m->dO, BH, m->T, m->Dh, 0));
    PEAT_TRY(peat_models_tensor(&m->dQ, BH, m->T, m->Dh, 0));
    PEAT_TRY(peat_models_tensor(&m->dK, m->B * m->Hkv, m->T, m->Dh, 0));
    PEAT_TRY(peat_models_tensor(&m->dV, m->B * m->Hkv, m->T, m->Dh, 0));
    if (m->unfused) {
        PEAT_TRY(peat_models_tensor(&m->mask, m->T * m->T, 0, 0, 0));
        PEAT_TRY(peat_models_tensor(&m->S, BH, m->T, m->T, 0));
        PEAT_TRY(peat_models_tensor(&m->Sm, BH, m->T, m->T, 0));
        PEAT_TRY(peat_models_tensor(&m->dP, BH, m->T, m->T, 0));
        PEAT_TRY(peat_models_tensor(&m->dS, BH, m->T, m->T, 0));
        /* key j > query i is the future: a large finite negative score, as real codebases add
         * (with -inf, a kernel's max shift meeting two masked entries computes -inf - -inf =
         * NaN); its exp underflows to exactly 0, so the masked softmax is the causal one */
        float *mk = peat_f32(m->mask);
        for (int64_t i = 0; i < m->T; i++)
            for (int64_t j = 0; j < m->T; j++) mk[i * m->T + j] = j > i ? GPT_MASK : 0.0f;
    }
#undef T2
    PEAT_TRY(peat_tensor_alloc1(PEAT_DTYPE_I32, N, &m->tok));
    PEAT_TRY(peat_tensor_alloc1(PEAT_DTYPE_I32, m->Nans, &m->tgt));
    return peat_models_xent_ws_alloc(&m->xw, m->Nans);
}

static peat_status gpt_create(peat_flow_t *f)
{
    gpt_impl *m = calloc(1, sizeof *m);
    if (!m) return PEAT_ERROR(PEAT_ERR_NOMEM, "gpt");
    f->impl = m;
    m->unfused = f->ops == &peat_models_gpt_unfused_ops;
    m->llama = f->ops == &peat_models_llama_ops;
    int L = f->cfg.depth;
    if (L > GPT_MAX_BLOCKS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "gpt: depth %d > %d", L, GPT_MAX_BLOCKS);
    m->lm = f->preset->lm;
    if (m->lm) {
        /* language modelling: seq tokens read, each predicting the next */
        if (f->cfg.seq < 2 || f->cfg.seq > 256)
            return PEAT_ERROR(PEAT_ERR_INVAL, "gpt: seq %d (language modelling: 2..256)",
                              f->cfg.seq);
        m->T = f->cfg.seq;
        m->na = m->T;
    } else {
        /* the sequence "a op b = c" with n-digit operands and an (n+1)-digit answer has 3n+3
         * tokens; the model reads the first 3n+2 */
        m->nd = (f->cfg.seq - 2) / 3;
        if (m->nd < 1 || m->nd > 4)
            return PEAT_ERROR(PEAT_ERR_INVAL, "gpt: seq %d gives %d-digit operands (seq 5..14)",
                              f->cfg.seq, m->nd);
        m->T = 3 * m->nd + 2;
        m->na = m->nd + 1;
    }
    m->D = f->cfg.width;
    int64_t hd = f->preset->head_dim; /* heads of hd dims (16 at the tiny size) */
    m->V = f->preset->vocab;
    m->H = m->D >= 2 * hd ? m->D / hd : 1;
    if (m->D % m->H || m->D < 4)
        return PEAT_ERROR(PEAT_ERR_INVAL, "gpt: width %lld does not split into heads of %lld",
                          (long long)m->D, (long long)hd);
    m->Dh = m->D / m->H;
    /* llama's grouped-query attention: two query heads share a K/V head (one head: itself) */
    m->Hkv = m->llama && m->H % 2 == 0 ? m->H / 2 : m->H;
    m->Wqkv = m->D + 2 * m->Hkv * m->Dh;
    /* LLaMA's SwiGLU hidden width 8 D / 3 keeps the MLP's parameters at 8 D^2 with three
     * matrices (rounded up to a multiple of 8) */
    m->Fh = m->llama ? (8 * m->D / 3 + 7) / 8 * 8 : 4 * m->D;
    m->B = f->cfg.batch;
    m->Nrow = m->B * m->T;
    m->Nans = m->B * m->na;
    PEAT_TRY(gpt_params(f, m));
    PEAT_TRY(gpt_buffers(m, L));
    if (m->lm) {
        m->row = calloc((size_t)m->T + 1, sizeof *m->row);
        if (!m->row) return PEAT_ERROR(PEAT_ERR_NOMEM, "gpt: row");
        m->lm_seed[0] = peat_seed_derive(f->cfg.seed, "gpt.data");
        m->lm_seed[1] = peat_seed_derive(f->cfg.seed, "gpt.eval");
        return peat_models_corpus_alloc(&m->corpus, (int)m->V, PEAT_MODELS_LM_ZIPF,
                                        PEAT_MODELS_LM_COPY,
                                        peat_seed_derive(f->cfg.seed, "gpt.corpus"));
    }

    m->ev_a = calloc(GPT_EVAL, sizeof *m->ev_a);
    m->ev_b = calloc(GPT_EVAL, sizeof *m->ev_b);
    if (!m->ev_a || !m->ev_b) return PEAT_ERROR(PEAT_ERR_NOMEM, "gpt: held-out set");
    peat_rng_t *r = peat_rng_new(peat_seed_derive(f->cfg.seed, "gpt.eval"));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "gpt: rng");
    int64_t lim = ipow10(m->nd);
    for (int i = 0; i < GPT_EVAL;) {
        int64_t a = (int64_t)peat_rng_int(r, (uint64_t)lim),
                b = (int64_t)peat_rng_int(r, (uint64_t)lim);
        if (f->cfg.task && a < b) {
            int64_t t = a;
            a = b, b = t;
        }
        if (gpt_heldout(f->cfg.seed, a, b)) m->ev_a[i] = (int32_t)a, m->ev_b[i++] = (int32_t)b;
    }
    peat_rng_free(r);
    return PEAT_OK;
}

static void gpt_destroy(peat_flow_t *f)
{
    gpt_impl *m = f->impl;
    if (!m) return;
    for (int l = 0; l < GPT_MAX_BLOCKS; l++) {
        gpt_block *b = &m->blk[l];
        peat_tensor *t[] = {b->H1, b->mean1, b->rstd1, b->QKV0, b->QKV, b->Q,  b->K,     b->V,
                            b->O,  b->Lse,   b->P,     b->Om,   b->Xa,  b->H2, b->mean2, b->rstd2,
                            b->F,  b->Fb,    b->Fg,    b->Fu,   b->Q0,  b->K0};
        for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) peat_tensor_free(t[k]);
    }
    for (int l = 0; l <= GPT_MAX_BLOCKS; l++) peat_tensor_free(m->X[l]);
    peat_tensor *t[] = {m->E,   m->Hf,   m->meanf, m->rstdf, m->Ha,  m->logits, m->dlogits,
                        m->tok, m->tgt,  m->dHa,   m->dHf,   m->dX,  m->dXa,    m->dXln,
                        m->dFg, m->dFb,  m->dH,    m->dOm,   m->dO,  m->dQ,     m->dK,
                        m->dV,  m->dQKV, m->dE,    m->mask,  m->S,   m->Sm,     m->dP,
                        m->dS,  m->dU,   m->dH3,   m->dHs,   m->dQ0, m->dK0};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) peat_tensor_free(t[k]);
    peat_models_xent_ws_free(&m->xw);
    free(m->ev_a);
    free(m->ev_b);
    free(m->row);
    peat_models_corpus_free(&m->corpus);
    free(m);
    f->impl = NULL;
}

/* ---- glue: head split/merge (copies between [B*T, k*D] rows and [B,H,T,Dh]) --------------- */

/* the nh heads at column `off` of rows [N, width] <-> heads [B,nh,T,Dh]; to_heads selects the
 * direction (Q at 0, K at D and V after K's Hkv heads in the QKV rows) */
static void heads_copy(const gpt_impl *m, float *rows, int64_t width, int64_t off, int64_t nh,
                       float *heads, int to_heads)
{
    for (int64_t b = 0; b < m->B; b++)
        for (int64_t t = 0; t < m->T; t++)
            for (int64_t h = 0; h < nh; h++) {
                float *r = rows + (b * m->T + t) * width + off + h * m->Dh;
                float *q = heads + ((b * nh + h) * m->T + t) * m->Dh;
                if (to_heads)
                    memcpy(q, r, (size_t)m->Dh * sizeof(float));
                else
                    memcpy(r, q, (size_t)m->Dh * sizeof(float));
            }
}

static void attn_params(const gpt_impl *m, peat_op_params *p)
{
    memset(p, 0, sizeof *p);
    p->i[0] = m->B, p->i[1] = m->H, p->i[2] = m->T, p->i[3] = m->Dh, p->i[4] = 1;
    p->i[5] = m->Hkv < m->H ? m->Hkv : 0; /* grouped-query attention (llama) */
    p->f[0] = 1.0 / sqrt((double)m->Dh);
}

/* O = softmax(scale Q K^T + causal mask) V per (batch, head), into b->O. */
static peat_status attn_fwd(peat_flow_t *f, gpt_impl *m, gpt_block *b)
{
    peat_op_params p;
    attn_params(m, &p);
    if (!m->unfused) {
        const peat_tensor *in[3] = {b->Q, b->K, b->V};
        peat_tensor *out[2] = {b->O, b->Lse};
        peat_args a = peat_args_make(PEAT_OP_ATTENTION, &p, 3, in, 2, out);
        return peat_models_exec(f, b->name[2], PEAT_PHASE_FWD, &a);
    }
    int64_t BH = m->B * m->H, T = m->T, Dh = m->Dh;
    double scale = p.f[0];
    const peat_phase F = PEAT_PHASE_FWD;
    /* S = scale Q K^T: [T, Dh] x [Dh, T] for each of the B*H heads */
    PEAT_TRY(
        peat_models_gemm_batched(f, b->name[8], F, 0, 1, BH, T, T, Dh, scale, b->Q, b->K, m->S));
    /* the mask is one [T*T] bias shared by every head's score matrix */
    PEAT_TRY(peat_models_bias_add(f, b->name[9], F, BH, T * T, 1, m->S, m->mask, m->Sm));
    PEAT_TRY(peat_models_softmax(f, b->name[10], F, BH * T, T, m->Sm, NULL, b->P));
    return peat_models_gemm_batched(f, b->name[11], F, 0, 0, BH, T, Dh, T, 1.0, b->P, b->V, b->O);
}

/* dQ, dK, dV from dO (in m->dO). */
static peat_status attn_bwd(peat_flow_t *f, gpt_impl *m, gpt_block *b)
{
    peat_op_params p;
    attn_params(m, &p);
    if (!m->unfused) {
        const peat_tensor *in[6] = {b->Q, b->K, b->V, b->O, b->Lse, m->dO};
        peat_tensor *out[3] = {m->dQ, m->dK, m->dV};
        peat_args a = peat_args_make(PEAT_OP_ATTENTION_BWD, &p, 6, in, 3, out);
        return peat_models_exec(f, b->name[2], PEAT_PHASE_BWD, &a);
    }
    int64_t BH = m->B * m->H, T = m->T, Dh = m->Dh;
    double scale = p.f[0];
    const peat_phase B = PEAT_PHASE_BWD;
    /* O = P V: dP = dO V^T, dV = P^T dO */
    PEAT_TRY(
        peat_models_gemm_batched(f, b->name[11], B, 0, 1, BH, T, T, Dh, 1.0, m->dO, b->V, m->dP));
    PEAT_TRY(
        peat_models_gemm_batched(f, b->name[11], B, 1, 0, BH, T, Dh, T, 1.0, b->P, m->dO, m->dV));
    PEAT_TRY(peat_models_softmax(f, b->name[10], B, BH * T, T, b->P, m->dP, m->dS));
    /* the mask is a constant: the gradient passes through its add unchanged (and is 0 where
     * P is); S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q */
    PEAT_TRY(
        peat_models_gemm_batched(f, b->name[8], B, 0, 0, BH, T, Dh, T, scale, m->dS, b->K, m->dQ));
    return peat_models_gemm_batched(f, b->name[8], B, 1, 0, BH, T, Dh, T, scale, m->dS, b->Q,
                                    m->dK);
}

/* ---- forward / backward ------------------------------------------------------------------- */

/* The pre-norm: layernorm (Y, mean, rstd), or in llama RMSNorm (Y, rstd; no beta, no mean). */
static peat_status norm_fwd(peat_flow_t *f, const gpt_impl *m, const char *layer,
                            const peat_tensor *X, const peat_models_param *g,
                            const peat_models_param *b, peat_tensor *Y, peat_tensor *mean,
                            peat_tensor *rstd)
{
    if (m->llama) return peat_models_rmsnorm(f, layer, m->Nrow, m->D, X, g->w, Y, rstd);
    return peat_models_layernorm(f, layer, m->Nrow, m->D, X, g->w, b->w, Y, mean, rstd);
}

static peat_status norm_bwd(peat_flow_t *f, const gpt_impl *m, const char *layer,
                            const peat_tensor *X, peat_models_param *g, peat_models_param *b,
                            const peat_tensor *mean, const peat_tensor *rstd, const peat_tensor *dY,
                            peat_tensor *dX)
{
    if (m->llama)
        return peat_models_rmsnorm_bwd(f, layer, m->Nrow, m->D, X, g->w, rstd, dY, dX, g->g);
    return peat_models_layernorm_bwd(f, layer, m->Nrow, m->D, X, g->w, mean, rstd, dY, dX, g->g,
                                     b->g);
}

static peat_status gpt_forward(peat_flow_t *f, gpt_impl *m)
{
    int64_t N = m->Nrow, D = m->D, L = f->cfg.depth;
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = N, p.i[1] = m->V, p.i[2] = D;
    const peat_tensor *ein[2] = {m->wte->w, m->tok};
    peat_args a = peat_args_make(PEAT_OP_EMBEDDING, &p, 2, ein, 1, m->llama ? &m->X[0] : &m->E);
    PEAT_TRY(peat_models_exec(f, "wte", PEAT_PHASE_FWD, &a));
    /* the position table [T, D] is a bias over each sequence's T*D values (llama: none, its
     * positions are the rotary embedding of Q and K) */
    if (!m->llama)
        PEAT_TRY(peat_models_bias_add(f, "wpe", PEAT_PHASE_FWD, m->B, m->T * D, 1, m->E, m->wpe->w,
                                      m->X[0]));
    for (int64_t l = 0; l < L; l++) {
        gpt_block *b = &m->blk[l];
        PEAT_TRY(norm_fwd(f, m, b->name[0], m->X[l], b->ln1g, b->ln1b, b->H1, b->mean1, b->rstd1));
        PEAT_TRY(peat_models_linear_fwd(f, b->name[1], N, D, m->Wqkv, b->H1, b->wqkv->w, NULL,
                                        m->llama ? b->QKV : b->QKV0));
        if (!m->llama)
            PEAT_TRY(peat_models_bias_add(f, b->name[1], PEAT_PHASE_FWD, N, 3 * D, 1, b->QKV0,
                                          b->bqkv->w, b->QKV));
        heads_copy(m, peat_f32(b->QKV), m->Wqkv, 0, m->H, peat_f32(m->llama ? b->Q0 : b->Q), 1);
        heads_copy(m, peat_f32(b->QKV), m->Wqkv, m->D, m->Hkv, peat_f32(m->llama ? b->K0 : b->K),
                   1);
        heads_copy(m, peat_f32(b->QKV), m->Wqkv, m->D + m->Hkv * m->Dh, m->Hkv, peat_f32(b->V), 1);
        if (m->llama) {
            PEAT_TRY(peat_models_rope(f, b->name[2], PEAT_PHASE_FWD, m->B, m->H, m->T, m->Dh, b->Q0,
                                      b->Q));
            PEAT_TRY(peat_models_rope(f, b->name[2], PEAT_PHASE_FWD, m->B, m->Hkv, m->T, m->Dh,
                                      b->K0, b->K));
        }
        PEAT_TRY(attn_fwd(f, m, b));
        heads_copy(m, peat_f32(b->Om), m->D, 0, m->H, peat_f32(b->O), 0);
        /* the residual sum is the GEMM's beta*C */
        PEAT_TRY(peat_models_linear_fwd(f, b->name[3], N, D, D, b->Om, b->wo->w, m->X[l], b->Xa));
        PEAT_TRY(norm_fwd(f, m, b->name[4], b->Xa, b->ln2g, b->ln2b, b->H2, b->mean2, b->rstd2));
        if (m->llama) {
            /* SwiGLU: gate G = H2 W1 (in Fb), up U = H2 W3, Fg = silu(G) U */
            PEAT_TRY(
                peat_models_linear_fwd(f, b->name[5], N, D, m->Fh, b->H2, b->w1->w, NULL, b->Fb));
            PEAT_TRY(
                peat_models_linear_fwd(f, b->name[5], N, D, m->Fh, b->H2, b->w3->w, NULL, b->Fu));
            PEAT_TRY(peat_models_swiglu(f, b->name[5], b->Fb, b->Fu, b->Fg));
        } else {
            PEAT_TRY(
                peat_models_linear_fwd(f, b->name[5], N, D, m->Fh, b->H2, b->w1->w, NULL, b->F));
            PEAT_TRY(peat_models_bias_add(f, b->name[5], PEAT_PHASE_FWD, N, m->Fh, 1, b->F,
                                          b->b1->w, b->Fb));
            PEAT_TRY(
                peat_models_unary(f, b->name[5], PEAT_PHASE_FWD, PEAT_OP_GELU, b->Fb, NULL, b->Fg));
        }
        PEAT_TRY(peat_models_linear_fwd(f, b->name[6], N, m->Fh, D, b->Fg, b->w2->w, b->Xa,
                                        m->X[l + 1]));
    }
    PEAT_TRY(norm_fwd(f, m, "lnf", m->X[L], m->lnfg, m->lnfb, m->Hf, m->meanf, m->rstdf));
    /* only the answer positions are scored: their rows go through the head */
    for (int64_t i = 0; i < m->B; i++)
        for (int64_t j = 0; j < m->na; j++)
            memcpy(peat_f32(m->Ha) + (i * m->na + j) * D, peat_f32(m->Hf) + ans_row(m, i, j) * D,
                   (size_t)D * sizeof(float));
    return peat_models_linear_fwd(f, "head", m->Nans, D, m->V, m->Ha, m->wh->w, NULL, m->logits);
}

static peat_status gpt_backward(peat_flow_t *f, gpt_impl *m)
{
    int64_t N = m->Nrow, D = m->D, L = f->cfg.depth;
    PEAT_TRY(peat_models_linear_bwd(f, "head", m->Nans, D, m->V, m->Ha, m->wh->w, m->dlogits,
                                    m->wh->g, m->dHa));
    memset(m->dHf->data, 0, peat_tensor_nbytes(m->dHf));
    for (int64_t i = 0; i < m->B; i++)
        for (int64_t j = 0; j < m->na; j++)
            memcpy(peat_f32(m->dHf) + ans_row(m, i, j) * D, peat_f32(m->dHa) + (i * m->na + j) * D,
                   (size_t)D * sizeof(float));
    PEAT_TRY(norm_bwd(f, m, "lnf", m->X[L], m->lnfg, m->lnfb, m->meanf, m->rstdf, m->dHf, m->dX));
    peat_op_params p;
    for (int64_t l = L - 1; l >= 0; l--) {
        gpt_block *b = &m->blk[l];
        /* dX holds d(X[l+1]); X[l+1] = Fg W2 + Xa */
        PEAT_TRY(peat_models_linear_bwd(f, b->name[6], N, m->Fh, D, b->Fg, b->w2->w, m->dX,
                                        b->w2->g, m->dFg));
        const peat_tensor *dH2 = m->dH;
        if (m->llama) {
            /* Fg = silu(G) U: dG (into dFb), dU; both projections read H2, their gradients add */
            PEAT_TRY(peat_models_swiglu_bwd(f, b->name[5], b->Fb, b->Fu, m->dFg, m->dFb, m->dU));
            PEAT_TRY(peat_models_linear_bwd(f, b->name[5], N, D, m->Fh, b->H2, b->w1->w, m->dFb,
                                            b->w1->g, m->dH));
            PEAT_TRY(peat_models_linear_bwd(f, b->name[5], N, D, m->Fh, b->H2, b->w3->w, m->dU,
                                            b->w3->g, m->dH3));
            PEAT_TRY(peat_models_bias_add(f, b->name[7], PEAT_PHASE_BWD, 1, N * D, 1, m->dH, m->dH3,
                                          m->dHs));
            dH2 = m->dHs;
        } else {
            PEAT_TRY(peat_models_unary(f, b->name[5], PEAT_PHASE_BWD, PEAT_OP_GELU_BWD, b->Fb,
                                       m->dFg, m->dFb));
            PEAT_TRY(peat_models_bias_bwd(f, b->name[5], N, m->Fh, 1, m->dFb, b->b1->g));
            PEAT_TRY(peat_models_linear_bwd(f, b->name[5], N, D, m->Fh, b->H2, b->w1->w, m->dFb,
                                            b->w1->g, m->dH));
        }
        PEAT_TRY(
            norm_bwd(f, m, b->name[4], b->Xa, b->ln2g, b->ln2b, b->mean2, b->rstd2, dH2, m->dXln));
        /* the two paths into Xa add up: an elementwise sum is a bias_add with R = S = 1 */
        PEAT_TRY(peat_models_bias_add(f, b->name[7], PEAT_PHASE_BWD, 1, N * D, 1, m->dXln, m->dX,
                                      m->dXa));
        /* Xa = Om Wo + X[l] */
        PEAT_TRY(peat_models_linear_bwd(f, b->name[3], N, D, D, b->Om, b->wo->w, m->dXa, b->wo->g,
                                        m->dOm));
        heads_copy(m, peat_f32(m->dOm), m->D, 0, m->H, peat_f32(m->dO), 1);
        PEAT_TRY(attn_bwd(f, m, b));
        if (m->llama) {
            PEAT_TRY(peat_models_rope(f, b->name[2], PEAT_PHASE_BWD, m->B, m->H, m->T, m->Dh, m->dQ,
                                      m->dQ0));
            PEAT_TRY(peat_models_rope(f, b->name[2], PEAT_PHASE_BWD, m->B, m->Hkv, m->T, m->Dh,
                                      m->dK, m->dK0));
        }
        heads_copy(m, peat_f32(m->dQKV), m->Wqkv, 0, m->H, peat_f32(m->llama ? m->dQ0 : m->dQ), 0);
        heads_copy(m, peat_f32(m->dQKV), m->Wqkv, m->D, m->Hkv, peat_f32(m->llama ? m->dK0 : m->dK),
                   0);
        heads_copy(m, peat_f32(m->dQKV), m->Wqkv, m->D + m->Hkv * m->Dh, m->Hkv, peat_f32(m->dV),
                   0);
        if (!m->llama)
            PEAT_TRY(peat_models_bias_bwd(f, b->name[1], N, 3 * D, 1, m->dQKV, b->bqkv->g));
        PEAT_TRY(peat_models_linear_bwd(f, b->name[1], N, D, m->Wqkv, b->H1, b->wqkv->w, m->dQKV,
                                        b->wqkv->g, m->dH));
        PEAT_TRY(norm_bwd(f, m, b->name[0], m->X[l], b->ln1g, b->ln1b, b->mean1, b->rstd1, m->dH,
                          m->dXln));
        /* d(X[l]) = dXa (skip) + layernorm path, into dX (free again) */
        PEAT_TRY(peat_models_bias_add(f, b->name[7], PEAT_PHASE_BWD, 1, N * D, 1, m->dXln, m->dXa,
                                      m->dX));
    }
    /* X[0] = E + wpe: the bias gradient sums over the batch; dE is dX[0] itself */
    if (!m->llama) PEAT_TRY(peat_models_bias_bwd(f, "wpe", m->B, m->T * D, 1, m->dX, m->wpe->g));
    memset(&p, 0, sizeof p);
    p.i[0] = N, p.i[1] = m->V, p.i[2] = D;
    const peat_tensor *ein[2] = {m->tok, m->dX};
    peat_args a = peat_args_make(PEAT_OP_EMBEDDING_BWD, &p, 2, ein, 1, &m->wte->g);
    return peat_models_exec(f, "wte", PEAT_PHASE_BWD, &a);
}

static peat_status gpt_train(peat_flow_t *f, double *loss)
{
    gpt_impl *m = f->impl;
    for (int i = 0; i < m->B; i++) {
        if (m->lm) {
            lm_fill(f, m, i, 0, (uint64_t)f->step, (uint64_t)i);
            continue;
        }
        int64_t a, b;
        gpt_problem(f, m, f->step, i, &a, &b);
        gpt_fill(f, m, i, a, b);
    }
    PEAT_TRY(gpt_forward(f, m));
    PEAT_TRY(
        peat_models_xent(f, "loss", m->Nans, m->V, m->logits, m->tgt, &m->xw, m->dlogits, loss));
    return gpt_backward(f, m);
}

/* Held-out: teacher-forced loss of the answer digits, and exact match of the greedy decode
 * (each answer digit predicted from the model's own previous digits; the causal mask makes
 * one forward per digit exact). */
/* Held-out language modelling: the loss and the next-token accuracy (argmax) over every position
 * of the first GPT_LM_EVAL (or more) rows of the held-out stream. */
static peat_status lm_eval(peat_flow_t *f, gpt_impl *m, double *loss, double *acc)
{
    int64_t n = 0, hit = 0;
    double sum = 0;
    /* whole batches: GPT_LM_EVAL rows rounded up to a multiple of the batch */
    for (int64_t s = 0; s < GPT_LM_EVAL; s += m->B) {
        for (int i = 0; i < m->B; i++) lm_fill(f, m, i, 1, 0, (uint64_t)(s + i));
        PEAT_TRY(gpt_forward(f, m));
        double l = 0;
        PEAT_TRY(peat_models_xent(f, "loss", m->Nans, m->V, m->logits, m->tgt, &m->xw, NULL, &l));
        sum += l * (double)m->Nans;
        for (int64_t r = 0; r < m->Nans; r++)
            hit += peat_models_argmax(peat_f32(m->logits) + r * m->V, (int)m->V) ==
                   peat_i32(m->tgt)[r];
        n += m->Nans;
    }
    *loss = sum / (double)n;
    *acc = (double)hit / (double)n;
    return PEAT_OK;
}

static peat_status gpt_eval(peat_flow_t *f, double *loss, double *acc)
{
    gpt_impl *m = f->impl;
    if (m->lm) return lm_eval(f, m, loss, acc);
    int64_t n = 0, exact = 0, na = m->na;
    double sum = 0;
    for (int64_t s = 0; s + m->B <= GPT_EVAL; s += m->B) {
        for (int i = 0; i < m->B; i++) gpt_fill(f, m, i, m->ev_a[s + i], m->ev_b[s + i]);
        PEAT_TRY(gpt_forward(f, m));
        double l = 0;
        PEAT_TRY(peat_models_xent(f, "loss", m->Nans, m->V, m->logits, m->tgt, &m->xw, NULL, &l));
        sum += l * (double)m->B;
        int32_t *tok = peat_i32(m->tok);
        int ok[4096];
        for (int i = 0; i < m->B; i++) {
            ok[i] = 1;
            for (int j = 0; j < m->nd; j++) tok[ans_row(m, i, j) + 1] = 0; /* hide the answer */
        }
        /* digit 0 reads only the question, so the teacher-forced forward above already holds
         * its greedy logits; each later digit needs one forward over the decoded prefix */
        for (int j = 0; j < na; j++) {
            if (j > 0) PEAT_TRY(gpt_forward(f, m));
            for (int i = 0; i < m->B; i++) {
                int d = peat_models_argmax(peat_f32(m->logits) + (i * na + j) * m->V, m->V);
                ok[i] &= d == peat_i32(m->tgt)[i * na + j];
                if (j + 1 < na) tok[ans_row(m, i, j) + 1] = d;
            }
        }
        for (int i = 0; i < m->B; i++) exact += ok[i];
        n += m->B;
    }
    if (n == 0)
        return PEAT_ERROR(PEAT_ERR_INVAL, "gpt: batch %lld larger than held-out set %d",
                          (long long)m->B, GPT_EVAL);
    *loss = sum / (double)n;
    *acc = (double)exact / (double)n;
    return PEAT_OK;
}

/* Op kinds both variants call; the attention ops are added per variant. */
#define GPT_OPS                                                                                    \
    (PEAT_OP_BIT(PEAT_OP_EMBEDDING) | PEAT_OP_BIT(PEAT_OP_EMBEDDING_BWD) |                         \
     PEAT_OP_BIT(PEAT_OP_BIAS_ADD) | PEAT_OP_BIT(PEAT_OP_BIAS_ADD_BWD) |                           \
     PEAT_OP_BIT(PEAT_OP_LAYERNORM) | PEAT_OP_BIT(PEAT_OP_LAYERNORM_BWD) |                         \
     PEAT_OP_BIT(PEAT_OP_GEMM) | PEAT_OP_BIT(PEAT_OP_GELU) | PEAT_OP_BIT(PEAT_OP_GELU_BWD) |       \
     PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY) | PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY_BWD) |                 \
     PEAT_OP_BIT(PEAT_OP_REDUCE))

/* Defaults and entry points both variants share (same model, task, seeds: the same initial
 * weights and batches for the same seed). */
#define GPT_COMMON                                                                                 \
    .def_batch = 32, .def_width = 32, .def_depth = 2, .def_seq = 8, .def_lr_adamw = 3e-3,          \
    .def_lr_sgd = 0.1, .create = gpt_create, .train = gpt_train, .eval = gpt_eval,                 \
    .destroy = gpt_destroy

const peat_models_flow_ops peat_models_gpt_ops = {
    .name = "gpt",
    .desc = "pre-LN decoder-only transformer (d 32, 2 blocks, 2 heads, causal) learning 2-digit "
            "addition \"ab+cd=\" -> sum digits, least significant first (--size base: next-token "
            "prediction on a Zipf-bigram corpus, T 128, vocabulary 1024)",
    .ops = GPT_OPS | PEAT_OP_BIT(PEAT_OP_ATTENTION) | PEAT_OP_BIT(PEAT_OP_ATTENTION_BWD),
    GPT_COMMON,
};

/* llama's op kinds: no layernorm, no GELU, no biases (BIAS_ADD still sums the residual gradients)
 */
#define LLAMA_OPS                                                                                  \
    ((GPT_OPS & ~(PEAT_OP_BIT(PEAT_OP_LAYERNORM) | PEAT_OP_BIT(PEAT_OP_LAYERNORM_BWD) |            \
                  PEAT_OP_BIT(PEAT_OP_BIAS_ADD_BWD) | PEAT_OP_BIT(PEAT_OP_GELU) |                  \
                  PEAT_OP_BIT(PEAT_OP_GELU_BWD))) |                                                \
     PEAT_OP_BIT(PEAT_OP_SWIGLU) | PEAT_OP_BIT(PEAT_OP_SWIGLU_BWD) |                               \
     PEAT_OP_BIT(PEAT_OP_RMSNORM) | PEAT_OP_BIT(PEAT_OP_RMSNORM_BWD) |                             \
     PEAT_OP_BIT(PEAT_OP_ATTENTION) | PEAT_OP_BIT(PEAT_OP_ATTENTION_BWD) |                         \
     PEAT_OP_BIT(PEAT_OP_ROPE) | PEAT_OP_BIT(PEAT_OP_ROPE_BWD))

const peat_models_flow_ops peat_models_llama_ops = {
    .name = "llama",
    .desc = "the gpt model and task as LLaMA builds a block: RMSNorm before attention, MLP and "
            "head, a SwiGLU MLP (gate and up projections, hidden 8 d / 3), rotary position "
            "embedding of Q and K (no position table), grouped-query attention (two query heads "
            "a K/V head), no biases in the attention and MLP projections",
    .ops = LLAMA_OPS,
    GPT_COMMON,
};

const peat_models_flow_ops peat_models_gpt_unfused_ops = {
    .name = "gpt_unfused",
    .desc = "the gpt model and task with unfused attention: batched GEMM scale*QK^T, causal mask "
            "by BIAS_ADD (-1e9 above the diagonal), row SOFTMAX, GEMM PV; backward by GEMMs "
            "and SOFTMAX_BWD",
    .ops = GPT_OPS | PEAT_OP_BIT(PEAT_OP_SOFTMAX) | PEAT_OP_BIT(PEAT_OP_SOFTMAX_BWD),
    .gemm_beyond_linear = 1,
    GPT_COMMON,
};
