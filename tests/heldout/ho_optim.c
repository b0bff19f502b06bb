/* ho_optim.c: held-out AdamW steps (i: n, t ; f: lr, beta1, beta2, eps, wd ; in p, g, m, v ;
 * out p', m', v', which may alias the inputs: every element's inputs are read before its outputs
 * are written): bias corrections one step ahead, weight decay applied twice, the second moment
 * stored in bf16, a fast-math build flushing subnormals, an rsqrt rewrite that is NaN at v = 0;
 * and an honest kernel in DeepSpeed's CPU-Adam order. */
#include "heldout.h"

/* The per-call scalars, formed in double and rounded once (as PyTorch does). */
typedef struct adam_sc {
    float lr, b1, b2, eps, wd, c1, c2, bc1, bc2;
} adam_sc;

static adam_sc adam_sc_at(const peat_args *a, double t)
{
    double b1 = a->p.f[1], b2 = a->p.f[2];
    adam_sc s = {
        (float)a->p.f[0],         (float)b1,         (float)b2,         (float)a->p.f[3],
        (float)a->p.f[4],         (float)(1.0 - b1), (float)(1.0 - b2), (float)(1.0 - pow(b1, t)),
        (float)(1.0 - pow(b2, t))};
    return s;
}

typedef struct adam_io {
    int64_t n;
    const float *p, *g, *m, *v;
    float *po, *mo, *vo;
} adam_io;

static adam_io adam_io_of(const peat_args *a)
{
    adam_io io = {a->p.i[0],      a->in[0]->data,  a->in[1]->data,  a->in[2]->data,
                  a->in[3]->data, a->out[0]->data, a->out[1]->data, a->out[2]->data};
    return io;
}

/* WRONG_RESULT. The step counter is incremented before the bias corrections are formed, so they
 * use beta^(t+1): at t = 1 1 - beta1^2 = 0.19 for 0.1 (the update 1.9x too small in its m part)
 * and 1 - beta2^2 for 1 - beta2; the error fades as t grows. */
static peat_status bc_next_step(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    adam_sc s = adam_sc_at(a, (double)a->p.i[1] + 1.0);
    adam_io io = adam_io_of(a);
    for (int64_t i = 0; i < io.n; i++) {
        float p = io.p[i], g = io.g[i], m = io.m[i], v = io.v[i];
        m = s.b1 * m + s.c1 * g;
        v = s.b2 * v + s.c2 * g * g;
        p = p - s.lr * ((m / s.bc1) / (sqrtf(v / s.bc2) + s.eps) + s.wd * p);
        io.po[i] = p, io.mo[i] = m, io.vo[i] = v;
    }
    return PEAT_OK;
}

/* WRONG_RESULT. Weight decay applied twice: the parameter is first decayed in place
 * (p *= 1 - lr wd, the decoupled form) and the update then adds lr wd p again (the golden's form).
 * Tensors with wd = 0 (biases, norm gains) are right; decayed ones shrink twice as fast. */
static peat_status decay_twice(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    adam_sc s = adam_sc_at(a, (double)a->p.i[1]);
    float decay = (float)(1.0 - a->p.f[0] * a->p.f[4]);
    adam_io io = adam_io_of(a);
    for (int64_t i = 0; i < io.n; i++) {
        float p = io.p[i], g = io.g[i], m = io.m[i], v = io.v[i];
        m = s.b1 * m + s.c1 * g;
        v = s.b2 * v + s.c2 * g * g;
        p = p * decay;
        p = p - s.lr * ((m / s.bc1) / (sqrtf(v / s.bc2) + s.eps) + s.wd * p);
        io.po[i] = p, io.mo[i] = m, io.vo[i] = v;
    }
    return PEAT_OK;
}

/* REDUCED_PRECISION. The second moment is stored in bf16 (a memory-saving optimizer state):
 * v' is rounded to bf16 and the update reads that rounded value. m and the update arithmetic are
 * fp32; only the v part loses precision. */
static peat_status v_bf16(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    adam_sc s = adam_sc_at(a, (double)a->p.i[1]);
    adam_io io = adam_io_of(a);
    for (int64_t i = 0; i < io.n; i++) {
        float p = io.p[i], g = io.g[i], m = io.m[i], v = io.v[i];
        m = s.b1 * m + s.c1 * g;
        v = zoo_bf16(s.b2 * v + s.c2 * g * g);
        p = p - s.lr * ((m / s.bc1) / (sqrtf(v / s.bc2) + s.eps) + s.wd * p);
        io.po[i] = p, io.mo[i] = m, io.vo[i] = v;
    }
    return PEAT_OK;
}

/* FTZ. Compiled with fast math (flush-to-zero on every operation): any subnormal result, g^2 for
 * |g| < ~1e-19 first, and small m' and v' values, becomes 0. Exact wherever every intermediate is a
 * normal number; a vanished g^2 leaves v' (and so the step's denominator) too small. */
static peat_status ftz_all(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    adam_sc s = adam_sc_at(a, (double)a->p.i[1]);
    adam_io io = adam_io_of(a);
    for (int64_t i = 0; i < io.n; i++) {
        float p = ho_ftz(io.p[i]), g = ho_ftz(io.g[i]), m = ho_ftz(io.m[i]), v = ho_ftz(io.v[i]);
        m = ho_ftz(ho_ftz(s.b1 * m) + ho_ftz(s.c1 * g));
        v = ho_ftz(ho_ftz(s.b2 * v) + ho_ftz(s.c2 * ho_ftz(g * g)));
        float mhat = ho_ftz(m / s.bc1), vhat = ho_ftz(v / s.bc2);
        float upd = ho_ftz(mhat / (sqrtf(vhat) + s.eps));
        p = ho_ftz(p - ho_ftz(s.lr * ho_ftz(upd + ho_ftz(s.wd * p))));
        io.po[i] = p, io.mo[i] = m, io.vo[i] = v;
    }
    return PEAT_OK;
}

/* NAN. The division by sqrt(vhat) + eps rewritten with one rsqrt "to save the divide":
 * mhat / (sqrt(vhat) + eps) = mhat r / (1 + eps r), r = rsqrt(vhat). Equal for vhat > 0, but an
 * element whose v and g are exactly 0 (an embedding row no token used, a dead unit) gets
 * r = Inf and 0 Inf / Inf = NaN, which the parameter then keeps. */
static peat_status rsqrt_zero(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    adam_sc s = adam_sc_at(a, (double)a->p.i[1]);
    adam_io io = adam_io_of(a);
    for (int64_t i = 0; i < io.n; i++) {
        float p = io.p[i], g = io.g[i], m = io.m[i], v = io.v[i];
        m = s.b1 * m + s.c1 * g;
        v = s.b2 * v + s.c2 * g * g;
        float mhat = m / s.bc1, r = 1.0f / sqrtf(v / s.bc2);
        p = p - s.lr * (mhat * r / (1.0f + s.eps * r) + s.wd * p);
        io.po[i] = p, io.mo[i] = m, io.vo[i] = v;
    }
    return PEAT_OK;
}

/* Honest (PASS). DeepSpeed's CPU Adam (Step_1, adamw_mode): step_size = -lr / bc1,
 * w_decay = -lr wd, bias_correction2 = 1 / sqrt(bc2) multiplied in; the parameter is decayed
 * first, then m = m b1 + g (1 - b1), v = v b2 + g g (1 - b2), denom = sqrt(v) bc2' + eps,
 * p += (m / denom) step_size. fp32 per element. */
static peat_status deepspeed(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    double lr = a->p.f[0], t = (double)a->p.i[1];
    float b1 = (float)a->p.f[1], b2 = (float)a->p.f[2], eps = (float)a->p.f[3];
    float c1 = (float)(1.0 - a->p.f[1]), c2 = (float)(1.0 - a->p.f[2]);
    float step_size = (float)(-lr / (1.0 - pow(a->p.f[1], t)));
    float w_decay = (float)(-lr * a->p.f[4]);
    float bc2 = (float)(1.0 / sqrt(1.0 - pow(a->p.f[2], t)));
    adam_io io = adam_io_of(a);
    for (int64_t i = 0; i < io.n; i++) {
        float p = io.p[i], g = io.g[i], m = io.m[i], v = io.v[i];
        if (w_decay != 0.0f) p = p + w_decay * p;
        m = m * b1;
        m = g * c1 + m;
        v = v * b2;
        v = g * g * c2 + v;
        float denom = sqrtf(v) * bc2 + eps;
        p = (m / denom) * step_size + p;
        io.po[i] = p, io.mo[i] = m, io.vo[i] = v;
    }
    return PEAT_OK;
}

int ho_register_optim(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("ho_adamw_bc_next_step", PEAT_OP_ADAMW, bc_next_step,
                   "bias corrections formed with beta^(t+1)"),
        ZOO_KERNEL("ho_adamw_decay_twice", PEAT_OP_ADAMW, decay_twice,
                   "weight decay applied in place and again in the update"),
        ZOO_KERNEL("ho_adamw_v_bf16", PEAT_OP_ADAMW, v_bf16,
                   "second moment stored (and read back) in bf16"),
        ZOO_KERNEL("ho_adamw_ftz", PEAT_OP_ADAMW, ftz_all,
                   "fast-math build: every subnormal intermediate flushed to zero"),
        ZOO_KERNEL("ho_adamw_rsqrt_zero", PEAT_OP_ADAMW, rsqrt_zero,
                   "mhat r / (1 + eps r) with r = rsqrt(vhat): NaN where v = g = 0"),
        ZOO_KERNEL("ho_adamw_deepspeed", PEAT_OP_ADAMW, deepspeed,
                   "honest: DeepSpeed CPU Adam order (decay first, 1/sqrt(bc2) multiplied)"),
    };
    return ho_register(host, ks, sizeof ks / sizeof ks[0]);
}
