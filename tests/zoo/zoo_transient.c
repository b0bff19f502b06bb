/* zoo_transient.c: transient upsets on small ops: in about one call in three (a fresh draw per
 * call, so it does not repeat), one output element has one bit flipped. */
#include "zoo.h"

static void flip(float *x, int bit)
{
    uint32_t u;
    memcpy(&u, x, 4);
    u ^= 1u << bit;
    memcpy(x, &u, 4);
}

/* Bias gradient (sum over rows and spatial positions) with exponent bit 26 of one channel's sum
 * flipped in ~1 call of 3: 4-16 outputs a call, so one upset is 6-25% of a call's elements. */
static peat_status bias_bwd_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1], S = a->p.i[2] > 0 ? a->p.i[2] : 1;
    const float *dy = a->in[0]->data;
    float *db = a->out[0]->data;
    for (int64_t c = 0; c < C; c++) {
        float s = 0.0f;
        for (int64_t r = 0; r < R; r++)
            for (int64_t k = 0; k < S; k++) s += dy[(r * C + c) * S + k];
        db[c] = s;
    }
    uint64_t h = zoo_upset_draw();
    if (h % 3 == 0) flip(&db[(h >> 8) % (uint64_t)C], 26);
    return PEAT_OK;
}

/* Row softmax with mantissa bit 21 of one probability flipped in ~1 call of 3. */
static peat_status softmax_flip(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < R; i++) {
        const float *x = (const float *)a->in[0]->data + i * C;
        float mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += y[i * C + j] = expf(x[j] - mx);
        for (int64_t j = 0; j < C; j++) y[i * C + j] /= s;
    }
    uint64_t h = zoo_upset_draw();
    if (h % 3 == 0) flip(&y[(h >> 8) % (uint64_t)(R * C)], 21);
    return PEAT_OK;
}

int zoo_register_transient(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_bias_bwd_transient", PEAT_OP_BIAS_ADD_BWD, bias_bwd_flip,
                   "bias gradient with one exponent bit flipped in ~1 call of 3"),
        ZOO_KERNEL("zoo_softmax_transient", PEAT_OP_SOFTMAX, softmax_flip,
                   "softmax with one mantissa bit flipped in ~1 call of 3"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
