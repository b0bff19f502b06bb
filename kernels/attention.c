/* attention.c: FlashAttention-style tiled forward/backward candidates and a bf16-boundary forward.
 */
#include "kernels/kcommon.h"
#include "peat/backend.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Query/key tile sizes (Br, Bc). Production kernels tile 64-128 for sequences of thousands; the
 * built-in flows train on sequences of ~10 tokens, so the tile is scaled down with them: the
 * validation must go through several tiles (the online rescaling across key tiles, the partial
 * dQ sums), which a tile larger than the sequence never does. */
#define FLASH_TILE 4

typedef struct flash_shape {
    int64_t BH, T, D;
    int64_t H, Hkv; /* query heads, K/V heads (grouped-query attention: Hkv divides H) */
    float scale;
    int causal;
    int64_t br, bc;
    int base2; /* FlashAttention-2's exp2 form: scores in log2 units (scale * log2(e) folded into
                  one constant), exp2f(s - m) as one fmaf, L = (m + log2 l) ln 2 */
} flash_shape;

#define LOG2E_F 1.44269504f
#define LN2_F   0.693147181f

static flash_shape flash_shape_get(const peat_args *a, const peat_kernel *self)
{
    flash_shape s = {a->p.i[0] * a->p.i[1],
                     a->p.i[2],
                     a->p.i[3],
                     a->p.i[1],
                     a->p.i[5] > 0 ? a->p.i[5] : a->p.i[1],
                     (float)a->p.f[0],
                     (int)a->p.i[4],
                     self->cfg.tile_m > 0 ? self->cfg.tile_m : FLASH_TILE,
                     self->cfg.tile_n > 0 ? self->cfg.tile_n : FLASH_TILE,
                     self->user != NULL};
    if (s.base2) s.scale *= LOG2E_F;
    return s;
}

/* the K/V plane query plane bh reads */
static int64_t kv_plane(const flash_shape *s, int64_t bh)
{
    return bh / s->H * s->Hkv + bh % s->H / (s->H / s->Hkv);
}

static float dot(const float *u, const float *v, int64_t n)
{
    float s = 0.0f;
    for (int64_t k = 0; k < n; k++) s += u[k] * v[k];
    return s;
}

/* Forward over one query tile at a time: key tiles stream through, each row keeps a running max
 * m, running denominator l and unnormalised output acc, rescaled by exp(m_old - m_new) when the
 * max grows; one division by l at the end, L = m + log l. Key tiles entirely above the causal
 * diagonal are never visited. */
static peat_status flash_fwd(const flash_shape *s, const float *Q, const float *K, const float *V,
                             float *O, float *L, const char *who)
{
    int64_t br = s->br, bc = s->bc, T = s->T, D = s->D;
    float *ws = malloc((size_t)(bc + 2 * br + br * D) * sizeof *ws);
    if (!ws) return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: tile workspace", who);
    float *sc = ws, *m = ws + bc, *l = m + br, *acc = l + br;
    for (int64_t bh = 0; bh < s->BH; bh++) {
        int64_t kv = kv_plane(s, bh);
        const float *q = Q + bh * T * D, *k = K + kv * T * D, *v = V + kv * T * D;
        for (int64_t i0 = 0; i0 < T; i0 += br) {
            int64_t i1 = i0 + br < T ? i0 + br : T;
            for (int64_t r = 0; r < i1 - i0; r++) m[r] = -INFINITY, l[r] = 0.0f;
            memset(acc, 0, (size_t)(br * D) * sizeof *acc);
            int64_t jend = s->causal ? i1 : T;
            for (int64_t j0 = 0; j0 < jend; j0 += bc) {
                int64_t j1 = j0 + bc < T ? j0 + bc : T;
                for (int64_t r = 0; r < i1 - i0; r++) {
                    int64_t i = i0 + r;
                    int64_t jlim = s->causal && i + 1 < j1 ? i + 1 : j1; /* keys j < jlim */
                    if (jlim <= j0) continue; /* row fully masked in this tile */
                    float mt = -INFINITY;
                    for (int64_t j = j0; j < jlim; j++) {
                        sc[j - j0] = s->scale * dot(q + i * D, k + j * D, D);
                        if (sc[j - j0] > mt) mt = sc[j - j0];
                    }
                    float mnew = m[r] > mt ? m[r] : mt;
                    float alpha = s->base2 ? exp2f(m[r] - mnew) : expf(m[r] - mnew), psum = 0.0f;
                    float *ar = acc + r * D;
                    for (int64_t d = 0; d < D; d++) ar[d] *= alpha;
                    for (int64_t j = j0; j < jlim; j++) {
                        float p = s->base2 ? exp2f(sc[j - j0] - mnew) : expf(sc[j - j0] - mnew);
                        psum += p;
                        for (int64_t d = 0; d < D; d++) ar[d] += p * v[j * D + d];
                    }
                    l[r] = l[r] * alpha + psum;
                    m[r] = mnew;
                }
            }
            for (int64_t r = 0; r < i1 - i0; r++) {
                float inv = 1.0f / l[r];
                for (int64_t d = 0; d < D; d++) O[(bh * T + i0 + r) * D + d] = acc[r * D + d] * inv;
                L[bh * T + i0 + r] = s->base2 ? (m[r] + log2f(l[r])) * LN2_F : m[r] + logf(l[r]);
            }
        }
    }
    free(ws);
    return PEAT_OK;
}

static peat_status attention_flash(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    flash_shape s = flash_shape_get(a, self);
    return flash_fwd(&s, peat_f32(a->in[0]), peat_f32(a->in[1]), peat_f32(a->in[2]),
                     peat_f32(a->out[0]), peat_f32(a->out[1]), self->name);
}

/* Q, K, V rounded to bf16 as a bf16 kernel loads them, fp32 tile math, O stored as bf16 (L stays
 * fp32, as the logsumexp a bf16 FlashAttention saves for its backward). F32 storage with rounding
 * at the boundary is numerically identical to bf16 storage. */
static peat_status attention_bf16(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    flash_shape s = flash_shape_get(a, self);
    int64_t n = s.BH * s.T * s.D;
    float *qkv = malloc((size_t)(3 * n) * sizeof *qkv);
    if (!qkv)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: %lld floats for bf16 Q,K,V", self->name,
                          (long long)(3 * n));
    for (int t = 0; t < 3; t++) {
        const float *src = peat_f32(a->in[t]);
        int64_t m = t ? n / s.H * s.Hkv : n; /* K, V: Hkv heads */
        for (int64_t i = 0; i < m; i++) qkv[t * n + i] = peat_round_bf16(src[i]);
    }
    float *O = peat_f32(a->out[0]);
    peat_status st = flash_fwd(&s, qkv, qkv + n, qkv + 2 * n, O, peat_f32(a->out[1]), self->name);
    free(qkv);
    if (st == PEAT_OK)
        for (int64_t i = 0; i < n; i++) O[i] = peat_round_bf16(O[i]);
    return st;
}

/* FlashAttention-2 backward: Delta_i = dO_i . O_i once, then key tiles in the outer loop and query
 * tiles inside; P is recomputed per tile from L (P = exp(scale q.k - L)), dV_j and dK_j gather
 * over query rows, and each key tile's contribution to dQ_i is summed on its own before it is
 * added to dQ (the atomicAdd of the GPU kernel). */
static peat_status attention_flash_bwd(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    flash_shape s = flash_shape_get(a, self);
    int64_t T = s.T, D = s.D, br = s.br, bc = s.bc, n = s.BH * T * D, nkv = n / s.H * s.Hkv;
    const float *Q = peat_f32(a->in[0]), *K = peat_f32(a->in[1]), *V = peat_f32(a->in[2]);
    const float *O = peat_f32(a->in[3]), *L = peat_f32(a->in[4]), *dO = peat_f32(a->in[5]);
    float *dQ = peat_f32(a->out[0]), *dK = peat_f32(a->out[1]), *dV = peat_f32(a->out[2]);
    float *ws = malloc((size_t)(T + D) * sizeof *ws);
    if (!ws) return PEAT_ERROR(PEAT_ERR_NOMEM, "%s: workspace", self->name);
    float *delta = ws, *dqp = ws + T;
    memset(dQ, 0, (size_t)n * sizeof *dQ);
    memset(dK, 0, (size_t)nkv * sizeof *dK);
    memset(dV, 0, (size_t)nkv * sizeof *dV);
    for (int64_t bh = 0; bh < s.BH; bh++) {
        int64_t off = bh * T * D, kvo = kv_plane(&s, bh) * T * D;
        const float *q = Q + off, *k = K + kvo, *v = V + kvo, *o = O + off, *go = dO + off;
        const float *lse = L + bh * T;
        float *gq = dQ + off, *gk = dK + kvo, *gv = dV + kvo;
        for (int64_t i = 0; i < T; i++) delta[i] = dot(go + i * D, o + i * D, D);
        for (int64_t j0 = 0; j0 < T; j0 += bc) {
            int64_t j1 = j0 + bc < T ? j0 + bc : T;
            /* causal: query tiles wholly above this key tile see none of its keys */
            int64_t istart = s.causal ? (j0 / br) * br : 0;
            for (int64_t i0 = istart; i0 < T; i0 += br) {
                int64_t i1 = i0 + br < T ? i0 + br : T;
                for (int64_t i = i0; i < i1; i++) {
                    int64_t jlim = s.causal && i + 1 < j1 ? i + 1 : j1;
                    if (jlim <= j0) continue;
                    memset(dqp, 0, (size_t)D * sizeof *dqp);
                    for (int64_t j = j0; j < jlim; j++) {
                        float p = expf(s.scale * dot(q + i * D, k + j * D, D) - lse[i]);
                        float dp = dot(go + i * D, v + j * D, D);
                        float ds = p * (dp - delta[i]) * s.scale;
                        for (int64_t d = 0; d < D; d++) {
                            gv[j * D + d] += p * go[i * D + d];
                            gk[j * D + d] += ds * q[i * D + d];
                            dqp[d] += ds * k[j * D + d];
                        }
                    }
                    for (int64_t d = 0; d < D; d++) gq[i * D + d] += dqp[d];
                }
            }
        }
    }
    free(ws);
    return PEAT_OK;
}

#define FLASH_CFG                                                                                  \
    {                                                                                              \
        .tile_m = FLASH_TILE, .tile_n = FLASH_TILE, .threads = 1, .vec_width = 1                   \
    }

static const peat_kernel attention_kernels[] = {
    {.name = "attention_flash",
     .op = PEAT_OP_ATTENTION,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = FLASH_CFG,
     .fn = attention_flash,
     .desc = "tiled online-softmax attention (Br=Bc=4), fp32"},
    {.name = "attention_flash_bwd",
     .op = PEAT_OP_ATTENTION_BWD,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = FLASH_CFG,
     .fn = attention_flash_bwd,
     .desc = "FlashAttention-2 backward, P recomputed per 4x4 tile from L"},
    {.name = "attention_exp2",
     .op = PEAT_OP_ATTENTION,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_F32,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = FLASH_CFG,
     .fn = attention_flash,
     .desc = "tiled online-softmax attention in FlashAttention-2's exp2 form (scale*log2e folded)",
     .user = (void *)1},
    {.name = "attention_bf16",
     .op = PEAT_OP_ATTENTION,
     .role = PEAT_ROLE_CANDIDATE,
     .backend = PEAT_BACKEND_HOST,
     .in_dtype = PEAT_DTYPE_BF16,
     .out_dtype = PEAT_DTYPE_F32,
     .acc_dtype = PEAT_DTYPE_F32,
     .cfg = FLASH_CFG,
     .fn = attention_bf16,
     .desc = "tiled attention with Q,K,V and O in bf16, fp32 math"},
};

peat_status peat_kernels_register_attention(void)
{
    return peat_kernels_add_all(attention_kernels,
                                (int)(sizeof attention_kernels / sizeof attention_kernels[0]));
}
