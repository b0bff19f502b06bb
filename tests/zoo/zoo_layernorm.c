/* zoo_layernorm.c: layernorm kernels of the zoo: the naive one-pass variance (cancels when the
 * mean is large against the spread), bf16 statistics, an unhandled row block, and an honest
 * pairwise two-pass kernel. Outputs Y, mean, rstd. */
#include "zoo.h"

typedef float (*rnd_fn)(float);
static float keep(float x)
{
    return x;
}

static float pair_sum(const float *x, int64_t n, float sub)
{
    if (n <= 4) {
        float s = 0.0f;
        for (int64_t j = 0; j < n; j++) s += x[j] - sub;
        return s;
    }
    return pair_sum(x, n / 2, sub) + pair_sum(x + n / 2, n - n / 2, sub);
}

/* One row. mode 0: two-pass; 1: E[x^2] - E[x]^2; 2: pairwise two-pass. r rounds the
 * statistics' running sums. */
static void ln_row(const peat_args *a, int64_t i, int mode, rnd_fn r)
{
    int64_t C = a->p.i[1];
    float eps = (float)a->p.f[0];
    const float *x = (const float *)a->in[0]->data + i * C;
    const float *gm = a->in[1]->data, *bt = a->in[2]->data;
    float *y = (float *)a->out[0]->data + i * C;
    float s = 0.0f, q = 0.0f, mean, var;
    if (mode == 2) {
        mean = pair_sum(x, C, 0.0f) / (float)C;
        float v = 0.0f;
        for (int64_t j = 0; j < C; j++) y[j] = (x[j] - mean) * (x[j] - mean);
        v = pair_sum(y, C, 0.0f);
        var = v / (float)C;
    } else {
        for (int64_t j = 0; j < C; j++) s = r(s + x[j]), q = r(q + x[j] * x[j]);
        mean = s / (float)C;
        if (mode == 1)
            var = q / (float)C - mean * mean;
        else {
            float v = 0.0f;
            for (int64_t j = 0; j < C; j++) v = r(v + (x[j] - mean) * (x[j] - mean));
            var = v / (float)C;
        }
    }
    float rstd = 1.0f / sqrtf(var + eps);
    for (int64_t j = 0; j < C; j++) y[j] = (x[j] - mean) * rstd * gm[j] + bt[j];
    ((float *)a->out[1]->data)[i] = mean;
    ((float *)a->out[2]->data)[i] = rstd;
}

static peat_status naive_var(const peat_args *a, const peat_kernel *self)
{
    for (int64_t i = 0; i < a->p.i[0]; i++) ln_row(a, i, 1, keep);
    return PEAT_OK;
}
static peat_status stats_bf16(const peat_args *a, const peat_kernel *self)
{
    for (int64_t i = 0; i < a->p.i[0]; i++) ln_row(a, i, 0, zoo_bf16);
    return PEAT_OK;
}
/* Rows in blocks of 8; a partial last block is skipped. */
static peat_status row_blocks(const peat_args *a, const peat_kernel *self)
{
    int64_t R = a->p.i[0];
    for (int64_t i = 0; i < (R / 8) * 8; i++) ln_row(a, i, 0, keep);
    return PEAT_OK;
}
static peat_status pairwise(const peat_args *a, const peat_kernel *self)
{
    for (int64_t i = 0; i < a->p.i[0]; i++) ln_row(a, i, 2, keep);
    return PEAT_OK;
}

int zoo_register_layernorm(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_layernorm_naive_var", PEAT_OP_LAYERNORM, naive_var,
                   "variance as E[x^2] - E[x]^2 in fp32"),
        ZOO_KERNEL("zoo_layernorm_stats_bf16", PEAT_OP_LAYERNORM, stats_bf16,
                   "mean and variance accumulated in bf16, declares fp32"),
        ZOO_KERNEL("zoo_layernorm_row_blocks", PEAT_OP_LAYERNORM, row_blocks,
                   "rows in blocks of 8; a partial last block is never written"),
        ZOO_KERNEL("zoo_layernorm_pairwise", PEAT_OP_LAYERNORM, pairwise,
                   "honest: two-pass with pairwise sums"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
