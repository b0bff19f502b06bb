/* ho_state.c: held-out kernels whose result depends on earlier calls, each exact on the first call
 * it sees: a layer norm memoised by its input pointer, a softmax that switches to a broken "fast"
 * exponential after a warm-up count, and an AdamW that keeps its own copy of the optimizer state
 * (the previous call's m' and v' outputs) and trusts it over the state it is given. */
#include "heldout.h"

#include <stdlib.h>

/* STATEFUL. Layer norm memoised by the input pointer and the shape ("the same activation buffer
 * means the same activations"): the first call on a buffer computes and keeps Y, mean and rstd;
 * every later call on that buffer with that shape returns the kept outputs, whatever X now holds.
 * Training reuses its activation buffers every step, so from the second step on each layer gets its
 * first step's normalised values. */
static peat_status layernorm_ptr_cache(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static struct {
        const void *x;
        int64_t R, C;
        float *keep; /* Y, then mean, then rstd */
    } c[16];
    int64_t R = a->p.i[0], C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const void *key = a->in[0]->data;
    int slot = (int)(((uintptr_t)key >> 6) % 16);
    size_t n = (size_t)(R * C + 2 * R);
    if (c[slot].keep && c[slot].x == key && c[slot].R == R && c[slot].C == C) {
        memcpy(a->out[0]->data, c[slot].keep, (size_t)(R * C) * sizeof(float));
        memcpy(a->out[1]->data, c[slot].keep + R * C, (size_t)R * sizeof(float));
        memcpy(a->out[2]->data, c[slot].keep + R * C + R, (size_t)R * sizeof(float));
        return PEAT_OK;
    }
    const float *gm = a->in[1]->data, *bt = a->in[2]->data;
    float *Y = a->out[0]->data, *M = a->out[1]->data, *RS = a->out[2]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float s = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < C; j++) s += x[j];
        float mean = s / (float)C;
        for (int64_t j = 0; j < C; j++) v += (x[j] - mean) * (x[j] - mean);
        float rstd = 1.0f / sqrtf(v / (float)C + eps);
        for (int64_t j = 0; j < C; j++) Y[r * C + j] = (x[j] - mean) * rstd * gm[j] + bt[j];
        M[r] = mean, RS[r] = rstd;
    }
    float *k = realloc(c[slot].keep, n * sizeof *k);
    if (!k) return PEAT_OK; /* nothing kept: this call is still right */
    memcpy(k, Y, (size_t)(R * C) * sizeof *k);
    memcpy(k + R * C, M, (size_t)R * sizeof *k);
    memcpy(k + R * C + R, RS, (size_t)R * sizeof *k);
    c[slot].keep = k, c[slot].x = key, c[slot].R = R, c[slot].C = C;
    return PEAT_OK;
}

/* Schraudolph's bit-trick exponential: the float whose bits are 2^23 / ln 2 x + the bias; within a
 * few percent of e^x. */
static float fast_exp(float x)
{
    if (x < -87.0f) return 0.0f;
    if (x > 88.0f) return INFINITY;
    return ho_from_bits((uint32_t)(int32_t)(12102203.0f * x + 1064866805.0f));
}

/* STATEFUL. After 64 calls (an "autotuner" deciding the kernel is warm) the softmax switches to a
 * fast path with the bit-trick exponential above: the first 64 calls are exact, every later one is
 * off by up to a few percent, whatever its inputs. */
static peat_status softmax_fastexp_after_n(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static long calls;
    int fast = ++calls > 64;
    int64_t R = a->p.i[0], C = a->p.i[1];
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float *y = (float *)a->out[0]->data + r * C, mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += y[j] = fast ? fast_exp(x[j] - mx) : expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) y[j] /= s;
    }
    return PEAT_OK;
}

/* STATEFUL. The optimizer keeps its own copy of m and v, keyed by the tensor's length (the
 * previous call's m' and v' outputs for that length), and when it has one it reads the copy
 * instead of the m and v it is given. In a live training loop the copy usually equals the given
 * state, but two tensors of one length trade states, and a replayed or reordered call reads the
 * state some earlier call left behind. */
static peat_status adamw_own_state(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static struct {
        int64_t n;
        float *mv; /* m', then v' */
    } c[32];
    int64_t n = a->p.i[0], t = a->p.i[1];
    float lr = (float)a->p.f[0], b1 = (float)a->p.f[1], b2 = (float)a->p.f[2];
    float eps = (float)a->p.f[3], wd = (float)a->p.f[4];
    float c1 = (float)(1.0 - a->p.f[1]), c2 = (float)(1.0 - a->p.f[2]);
    float bc1 = (float)(1.0 - pow(a->p.f[1], (double)t));
    float bc2 = (float)(1.0 - pow(a->p.f[2], (double)t));
    int slot = (int)(((uint64_t)n * 0x9E3779B97F4A7C15ull) >> 59); /* 32 slots */
    int own = c[slot].mv && c[slot].n == n;
    if (!own) {
        float *mv = realloc(c[slot].mv, (size_t)(2 * (n > 0 ? n : 1)) * sizeof *mv);
        if (!mv) return PEAT_ERR_NOMEM;
        c[slot].mv = mv, c[slot].n = n;
    }
    float *sm = c[slot].mv, *sv = c[slot].mv + n;
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < n; i++) {
        float p = pi[i], g = gi[i], m = own ? sm[i] : mi[i], v = own ? sv[i] : vi[i];
        m = b1 * m + c1 * g;
        v = b2 * v + c2 * g * g;
        p = p - lr * ((m / bc1) / (sqrtf(v / bc2) + eps) + wd * p);
        po[i] = p, mo[i] = m, vo[i] = v;
        sm[i] = m, sv[i] = v;
    }
    return PEAT_OK;
}

int ho_register_state(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_layernorm_ptr_cache", PEAT_OP_LAYERNORM, layernorm_ptr_cache,
                   "outputs memoised by the input pointer and shape"),
        ZOO_KERNEL("ho_softmax_fastexp_after_n", PEAT_OP_SOFTMAX, softmax_fastexp_after_n,
                   "switches to a bit-trick exp (a few % off) after 64 calls"),
        ZOO_KERNEL("ho_adamw_own_state", PEAT_OP_ADAMW, adamw_own_state,
                   "reads its own copy of the previous call's m', v' for that length"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
