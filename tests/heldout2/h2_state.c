/* h2_state.c: kernels of the second held-out set whose result depends on earlier calls. Their
 * state is unguarded, so they are not marked reentrant (PEAT serialises their calls). */
#include "heldout2.h"

#define H2_SLOTS 8

/* Bias gradient into a persistent per-width buffer that is never zeroed between calls (the
 * "forgot zero_grad" bug): each call returns the sum of every call's gradient so far for that
 * channel count. The first call of each width is exact. */
static peat_status bias_add_bwd_keep_grad(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static int64_t widths[H2_SLOTS];
    static float *bufs[H2_SLOTS];
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2];
    int slot = 0;
    while (slot < H2_SLOTS && widths[slot] != 0 && widths[slot] != C) slot++;
    if (slot == H2_SLOTS) slot = 0, free(bufs[0]), bufs[0] = NULL, widths[0] = 0;
    if (!bufs[slot]) {
        bufs[slot] = calloc((size_t)C, sizeof(float));
        if (!bufs[slot]) return PEAT_ERR_NOMEM;
        widths[slot] = C;
    }
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data, *acc = bufs[slot];
    for (int64_t c = 0; c < C; c++) {
        float s = 0.0f;
        for (int64_t r = 0; r < R; r++)
            for (int64_t q = 0; q < S; q++) s += dy[(r * C + c) * S + q];
        acc[c] += s;
        db[c] = acc[c];
    }
    return PEAT_OK;
}

/* Cross-entropy that memoises its one-hot target mask per shape (R, C): the targets of the
 * first call of each shape are reused by every later call of that shape, whatever targets it
 * passes. */
static peat_status xent_target_cache(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    static int64_t shapes[H2_SLOTS][2];
    static int32_t *cached[H2_SLOTS];
    int64_t R = a->p.i[0], C = a->p.i[1];
    int slot = 0;
    while (slot < H2_SLOTS && cached[slot] && (shapes[slot][0] != R || shapes[slot][1] != C))
        slot++;
    if (slot == H2_SLOTS) slot = 0, free(cached[0]), cached[0] = NULL;
    if (!cached[slot]) {
        cached[slot] = malloc((size_t)R * sizeof(int32_t));
        if (!cached[slot]) return PEAT_ERR_NOMEM;
        memcpy(cached[slot], a->in[1]->data, (size_t)R * sizeof(int32_t));
        shapes[slot][0] = R, shapes[slot][1] = C;
    }
    const int32_t *tgt = cached[slot];
    float *loss = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        const float *x = (const float *)a->in[0]->data + r * C;
        float mx = x[0], sum = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) sum += expf(x[j] - mx);
        loss[r] = logf(sum) + mx - x[tgt[r]];
    }
    return PEAT_OK;
}

int h2_register_state(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("h2_bias_add_bwd_keep_grad", PEAT_OP_BIAS_ADD_BWD, bias_add_bwd_keep_grad,
                   "bias gradient accumulated across calls in a never-zeroed buffer"),
        ZOO_KERNEL("h2_xent_target_cache", PEAT_OP_CROSS_ENTROPY, xent_target_cache,
                   "cross-entropy reusing the first call's targets for each shape"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
