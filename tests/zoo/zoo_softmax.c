/* zoo_softmax.c: row softmax kernels of the zoo: formulations that break off the training data,
 * an off-by-one, a narrow accumulator, and an honest online softmax. */
#include "zoo.h"

typedef float (*rnd_fn)(float);
static float keep(float x)
{
    return x;
}

/* One row: shift by the max unless no_max; the sum over the first C - drop entries, rounded by
 * r after every step. */
static void row_softmax(const float *x, float *y, int64_t C, int no_max, int64_t drop, rnd_fn r)
{
    float mx = x[0];
    for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
    if (no_max) mx = 0.0f;
    float s = 0.0f;
    for (int64_t j = 0; j < C; j++) {
        y[j] = expf(x[j] - mx);
        if (j < C - drop) s = r(s + y[j]);
    }
    for (int64_t j = 0; j < C; j++) y[j] /= s;
}

static void softmax(const peat_args *a, int no_max, int64_t drop, rnd_fn r)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < R; i++) row_softmax(x + i * C, y + i * C, C, no_max, drop, r);
}

static peat_status no_max(const peat_args *a, const peat_kernel *self)
{
    softmax(a, 1, 0, keep);
    return PEAT_OK;
}
static peat_status last_col(const peat_args *a, const peat_kernel *self)
{
    softmax(a, 0, 1, keep);
    return PEAT_OK;
}
static peat_status sum_fp16(const peat_args *a, const peat_kernel *self)
{
    softmax(a, 0, 0, zoo_f16);
    return PEAT_OK;
}

/* Online softmax (running max, rescaled sum), then one normalising pass. */
static peat_status online(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t i = 0; i < R; i++) {
        const float *xr = x + i * C;
        float mx = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            if (xr[j] > mx) {
                s = s * expf(mx - xr[j]);
                mx = xr[j];
            }
            s += expf(xr[j] - mx);
        }
        for (int64_t j = 0; j < C; j++) y[i * C + j] = expf(xr[j] - mx) / s;
    }
    return PEAT_OK;
}

int zoo_register_softmax(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_softmax_no_max", PEAT_OP_SOFTMAX, no_max,
                   "exp without max subtraction: overflows on large logits"),
        ZOO_KERNEL("zoo_softmax_last_col", PEAT_OP_SOFTMAX, last_col,
                   "normaliser sums all but the last column"),
        ZOO_KERNEL("zoo_softmax_sum_fp16", PEAT_OP_SOFTMAX, sum_fp16,
                   "normaliser accumulated in fp16, declares fp32"),
        ZOO_KERNEL("zoo_softmax_online", PEAT_OP_SOFTMAX, online, "honest: online max and sum"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
