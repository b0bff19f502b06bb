/* pool.c: max and average 2-D pooling (K x K windows, stride, zero padding) and their backward
 * ops, exact (fp64) and golden (fp32, windows and their elements in index order). Max pooling's
 * backward sends each dY to its window's first maximum (row-major), as PyTorch's CPU kernel;
 * average pooling divides by K^2, the padding counted. */
#include "golden/golden.h"
#include "golden/refkit.h"

#include <math.h>
#include <string.h>

typedef struct pool_dims {
    int64_t N, C, H, W, K, st, pad, OH, OW;
} pool_dims;

static pool_dims pool_dims_of(const peat_op_params *p)
{
    pool_dims d = {p->i[0], p->i[1], p->i[2], p->i[3], p->i[4], p->i[5], p->i[6], 0, 0};
    d.OH = (d.H + 2 * d.pad - d.K) / d.st + 1, d.OW = (d.W + 2 * d.pad - d.K) / d.st + 1;
    return d;
}

/* the input index of window element (kh, kw) of output (oh, ow) in plane nc, -1 in the padding */
static int64_t pool_at(const pool_dims *d, int64_t nc, int64_t oh, int64_t ow, int64_t kh,
                       int64_t kw)
{
    int64_t ih = oh * d->st - d->pad + kh, iw = ow * d->st - d->pad + kw;
    if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) return -1;
    return (nc * d->H + ih) * d->W + iw;
}

/* the input index of the window's first maximum */
#define POOL_ARGMAX(REAL)                                                                          \
    static int64_t argmax_##REAL(const pool_dims *d, const REAL *x, int64_t nc, int64_t oh,        \
                                 int64_t ow)                                                       \
    {                                                                                              \
        int64_t best = -1;                                                                         \
        for (int64_t kh = 0; kh < d->K; kh++)                                                      \
            for (int64_t kw = 0; kw < d->K; kw++) {                                                \
                int64_t i = pool_at(d, nc, oh, ow, kh, kw);                                        \
                if (i >= 0 && (best < 0 || x[i] > x[best])) best = i;                              \
            }                                                                                      \
        return best;                                                                               \
    }
POOL_ARGMAX(double)
POOL_ARGMAX(float)

static peat_status maxpool_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    pool_dims d = pool_dims_of(&a->p);
    double *x = NULL, *y = peat_f64(a->out[0]);
    PEAT_TRY(peat_golden_load(a->in[0], &x));
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++)
                y[(nc * d.OH + oh) * d.OW + ow] = x[argmax_double(&d, x, nc, oh, ow)];
    free(x);
    return PEAT_OK;
}

static peat_status maxpool_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    pool_dims d = pool_dims_of(&a->p);
    const float *x = peat_f32(a->in[0]);
    float *y = peat_f32(a->out[0]);
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++)
                y[(nc * d.OH + oh) * d.OW + ow] = x[argmax_float(&d, x, nc, oh, ow)];
    return PEAT_OK;
}

static peat_status maxpool_bwd_exact(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    pool_dims d = pool_dims_of(&a->p);
    double *in[2], *dx = peat_f64(a->out[0]);
    PEAT_TRY(peat_golden_load_n(a, 2, (const int[]){0, 1}, in));
    for (int64_t i = 0; i < d.N * d.C * d.H * d.W; i++) dx[i] = 0.0;
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++)
                dx[argmax_double(&d, in[0], nc, oh, ow)] += in[1][(nc * d.OH + oh) * d.OW + ow];
    peat_golden_free_n(2, in);
    return PEAT_OK;
}

static peat_status maxpool_bwd_golden(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_golden_io_check(a, self));
    pool_dims d = pool_dims_of(&a->p);
    const float *x = peat_f32(a->in[0]), *dy = peat_f32(a->in[1]);
    float *dx = peat_f32(a->out[0]);
    memset(dx, 0, (size_t)(d.N * d.C * d.H * d.W) * sizeof *dx);
    for (int64_t nc = 0; nc < d.N * d.C; nc++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++)
                dx[argmax_float(&d, x, nc, oh, ow)] += dy[(nc * d.OH + oh) * d.OW + ow];
    return PEAT_OK;
}

#define AVG_FWD(name, REAL, LOAD, OUT)                                                             \
    static peat_status name(const peat_args *a, const peat_kernel *self)                           \
    {                                                                                              \
        PEAT_TRY(peat_golden_io_check(a, self));                                                   \
        pool_dims d = pool_dims_of(&a->p);                                                         \
        LOAD;                                                                                      \
        REAL *y = OUT, kk = (REAL)(d.K * d.K);                                                     \
        for (int64_t nc = 0; nc < d.N * d.C; nc++)                                                 \
            for (int64_t oh = 0; oh < d.OH; oh++)                                                  \
                for (int64_t ow = 0; ow < d.OW; ow++) {                                            \
                    REAL s = 0;                                                                    \
                    for (int64_t kh = 0; kh < d.K; kh++)                                           \
                        for (int64_t kw = 0; kw < d.K; kw++) {                                     \
                            int64_t i = pool_at(&d, nc, oh, ow, kh, kw);                           \
                            if (i >= 0) s += x[i];                                                 \
                        }                                                                          \
                    y[(nc * d.OH + oh) * d.OW + ow] = s / kk;                                      \
                }                                                                                  \
        FREE;                                                                                      \
        return PEAT_OK;                                                                            \
    }
#define FREE free(xx)
AVG_FWD(avgpool_exact, double, double *xx = NULL; PEAT_TRY(peat_golden_load(a->in[0], &xx));
        const double *x = xx, peat_f64(a->out[0]))
#undef FREE
#define FREE (void)0
AVG_FWD(avgpool_golden, float, const float *x = peat_f32(a->in[0]), peat_f32(a->out[0]))
#undef FREE

#define AVG_BWD(name, REAL, LOAD, OUT, NUMEL)                                                      \
    static peat_status name(const peat_args *a, const peat_kernel *self)                           \
    {                                                                                              \
        PEAT_TRY(peat_golden_io_check(a, self));                                                   \
        pool_dims d = pool_dims_of(&a->p);                                                         \
        LOAD;                                                                                      \
        REAL *dx = OUT, kk = (REAL)(d.K * d.K);                                                    \
        for (int64_t i = 0; i < NUMEL; i++) dx[i] = 0;                                             \
        for (int64_t nc = 0; nc < d.N * d.C; nc++)                                                 \
            for (int64_t oh = 0; oh < d.OH; oh++)                                                  \
                for (int64_t ow = 0; ow < d.OW; ow++) {                                            \
                    REAL g = dy[(nc * d.OH + oh) * d.OW + ow] / kk;                                \
                    for (int64_t kh = 0; kh < d.K; kh++)                                           \
                        for (int64_t kw = 0; kw < d.K; kw++) {                                     \
                            int64_t i = pool_at(&d, nc, oh, ow, kh, kw);                           \
                            if (i >= 0) dx[i] += g;                                                \
                        }                                                                          \
                }                                                                                  \
        FREE;                                                                                      \
        return PEAT_OK;                                                                            \
    }
#define FREE free(dd)
AVG_BWD(avgpool_bwd_exact, double, double *dd = NULL; PEAT_TRY(peat_golden_load(a->in[0], &dd));
        const double *dy = dd, peat_f64(a->out[0]), d.N *d.C *d.H *d.W)
#undef FREE
#define FREE (void)0
AVG_BWD(avgpool_bwd_golden, float, const float *dy = peat_f32(a->in[0]), peat_f32(a->out[0]),
        d.N *d.C *d.H *d.W)
#undef FREE

peat_status peat_golden_register_pool(void)
{
    static const peat_kernel ks[] = {
        PEAT_GOLDEN_EXACT("maxpool2d_exact", PEAT_OP_MAXPOOL2D, maxpool_exact,
                          "2-D max pooling in fp64"),
        PEAT_GOLDEN_GOLDEN("maxpool2d_golden", PEAT_OP_MAXPOOL2D, maxpool_golden,
                           "2-D max pooling in fp32"),
        PEAT_GOLDEN_EXACT("maxpool2d_bwd_exact", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_exact,
                          "2-D max pooling backward (to the first maximum) in fp64"),
        PEAT_GOLDEN_GOLDEN("maxpool2d_bwd_golden", PEAT_OP_MAXPOOL2D_BWD, maxpool_bwd_golden,
                           "2-D max pooling backward in fp32, windows in order"),
        PEAT_GOLDEN_EXACT("avgpool2d_exact", PEAT_OP_AVGPOOL2D, avgpool_exact,
                          "2-D average pooling in fp64"),
        PEAT_GOLDEN_GOLDEN("avgpool2d_golden", PEAT_OP_AVGPOOL2D, avgpool_golden,
                           "2-D average pooling in fp32, window elements in order"),
        PEAT_GOLDEN_EXACT("avgpool2d_bwd_exact", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_exact,
                          "2-D average pooling backward in fp64"),
        PEAT_GOLDEN_GOLDEN("avgpool2d_bwd_golden", PEAT_OP_AVGPOOL2D_BWD, avgpool_bwd_golden,
                           "2-D average pooling backward in fp32, windows in order"),
    };
    return peat_golden_add_all(ks, (int)(sizeof ks / sizeof ks[0]));
}
