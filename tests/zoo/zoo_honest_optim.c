/* zoo_honest_optim.c: honest optimizer kernels in the orders PyTorch ships (expected PASS): AdamW
 * single-tensor, foreach and fused, apex's FusedAdam, SGD with momentum and weight decay. The op's
 * bound must admit every one of them (docs/bounds.md). Outputs may alias inputs: each element is
 * read first. */
#include "zoo.h"

/* Per-call scalars of AdamW as PyTorch forms them: Python doubles, rounded to fp32 where a tensor
 * op consumes them. */
typedef struct adamw_sc {
    float lr, b1, b2, eps, wd, decay, c1, c2, step, bc2_sqrt, lrwd;
} adamw_sc;

static adamw_sc adamw_scalars(const peat_args *a)
{
    double lr = a->p.f[0], b1 = a->p.f[1], b2 = a->p.f[2], eps = a->p.f[3], wd = a->p.f[4];
    double t = (double)a->p.i[1], bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    adamw_sc s = {(float)lr,         (float)b1,         (float)b2,
                  (float)eps,        (float)wd,         (float)(1.0 - lr * wd),
                  (float)(1.0 - b1), (float)(1.0 - b2), (float)(lr / bc1),
                  (float)sqrt(bc2),  (float)(lr * wd)};
    return s;
}

/* torch.lerp on CPU and CUDA: self + w (end - self) for w < 0.5, else end - (end - self)(1 - w) */
static float lerp(float self, float end, float w)
{
    return w < 0.5f ? self + w * (end - self) : end - (end - self) * (1.0f - w);
}

/* _single_tensor_adamw: p.mul_(1 - lr wd); m.lerp_(g, 1 - b1); v.mul_(b2).addcmul_(g, g, 1 - b2);
 * denom = (v.sqrt() / sqrt(bc2)).add_(eps); p.addcdiv_(m, denom, value=-lr/bc1). The CPU
 * addcmul/addcdiv kernels compute self + value * t1 * t2 and self + value * t1 / t2 left to
 * right. */
static peat_status adamw_single(const peat_args *a, const peat_kernel *self)
{
    adamw_sc s = adamw_scalars(a);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float p = pi[i], g = gi[i], m = mi[i], v = vi[i];
        p = p * s.decay;
        m = lerp(m, g, s.c1);
        v = v * s.b2;
        v = v + s.c2 * g * g;
        float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
        p = p + -s.step * m / denom;
        po[i] = p, mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* _multi_tensor_adamw on CUDA: the same steps through _foreach ops, whose pointwise kernels apply
 * the scalar last: addcmul is v + c2 (g g), addcdiv is p + (-step) (m / denom). */
static peat_status adamw_foreach(const peat_args *a, const peat_kernel *self)
{
    adamw_sc s = adamw_scalars(a);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float p = pi[i], g = gi[i], m = mi[i], v = vi[i];
        p = p * s.decay;
        m = lerp(m, g, s.c1);
        v = v * s.b2;
        v = v + s.c2 * (g * g);
        float denom = sqrtf(v);
        denom = denom / s.bc2_sqrt;
        denom = denom + s.eps;
        p = p + -s.step * (m / denom);
        po[i] = p, mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* _fused_adamw (fused_adam_utils.cuh, ADAMW mode): p -= lr wd p; m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g g; denom = sqrt(v) / sqrt(bc2) + eps; p -= step m / denom. */
static peat_status adamw_fused(const peat_args *a, const peat_kernel *self)
{
    adamw_sc s = adamw_scalars(a);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float p = pi[i], g = gi[i], m = mi[i], v = vi[i];
        p -= s.lrwd * p;
        m = s.b1 * m + s.c1 * g;
        v = s.b2 * v + s.c2 * g * g;
        float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
        p -= s.step * m / denom;
        po[i] = p, mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* apex's FusedAdam (multi_tensor_adam.cu, ADAM_MODE_1, AdamW): the hyperparameters arrive as
 * fp32 kernel arguments and every scalar is formed from them in fp32 (1 - b2 from 0.999f is
 * 1.3e-5 off 0.001); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g; p -= lr (mhat / (sqrt(vhat)
 * + eps) + wd p). */
static peat_status adamw_apex(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    float lr = (float)a->p.f[0], b1 = (float)a->p.f[1], b2 = (float)a->p.f[2],
          eps = (float)a->p.f[3], wd = (float)a->p.f[4], t = (float)a->p.i[1];
    float bc1 = 1.0f - powf(b1, t), bc2 = 1.0f - powf(b2, t);
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *mi = a->in[2]->data,
                *vi = a->in[3]->data;
    float *po = a->out[0]->data, *mo = a->out[1]->data, *vo = a->out[2]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float p = pi[i], g = gi[i];
        float m = b1 * mi[i] + (1.0f - b1) * g, v = b2 * vi[i] + (1.0f - b2) * g * g;
        float upd = (m / bc1) / (sqrtf(v / bc2) + eps) + wd * p;
        po[i] = p - lr * upd, mo[i] = m, vo[i] = v;
    }
    return PEAT_OK;
}

/* _single_tensor_sgd (dampening 0, no nesterov): g = g.add(p, alpha=wd);
 * buf.mul_(mu).add_(g); p.add_(buf, alpha=-lr). */
static peat_status sgd_torch(const peat_args *a, const peat_kernel *self)
{
    float lr = (float)a->p.f[0], mu = (float)a->p.f[1], wd = (float)a->p.f[2];
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *bi = a->in[2]->data;
    float *po = a->out[0]->data, *bo = a->out[1]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float p = pi[i], g = gi[i] + wd * pi[i], b = bi[i];
        b = b * mu;
        b = b + g;
        po[i] = p + -lr * b, bo[i] = b;
    }
    return PEAT_OK;
}

/* _single_tensor_sgd with nesterov=True (dampening 0): g = g.add(p, alpha=wd);
 * buf.mul_(mu).add_(g); g = g.add(buf, alpha=mu); p.add_(g, alpha=-lr). The op's nesterov
 * parameter (p.i[1]) chooses the step; without it this is zoo_sgd_torch's order. */
static peat_status sgd_torch_nesterov(const peat_args *a, const peat_kernel *self)
{
    float lr = (float)a->p.f[0], mu = (float)a->p.f[1], wd = (float)a->p.f[2];
    const float *pi = a->in[0]->data, *gi = a->in[1]->data, *bi = a->in[2]->data;
    float *po = a->out[0]->data, *bo = a->out[1]->data;
    for (int64_t i = 0; i < a->p.i[0]; i++) {
        float p = pi[i], g = gi[i] + wd * pi[i], b = bi[i];
        b = b * mu;
        b = b + g;
        float d = a->p.i[1] ? g + mu * b : b;
        po[i] = p + -lr * d, bo[i] = b;
    }
    return PEAT_OK;
}

int zoo_register_honest_optim(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_adamw_torch_single", PEAT_OP_ADAMW, adamw_single,
                   "honest: PyTorch _single_tensor_adamw order (decay first, lerp, addcdiv)"),
        ZOO_KERNEL("zoo_adamw_torch_foreach", PEAT_OP_ADAMW, adamw_foreach,
                   "honest: PyTorch _multi_tensor_adamw (foreach) order"),
        ZOO_KERNEL("zoo_adamw_torch_fused", PEAT_OP_ADAMW, adamw_fused,
                   "honest: PyTorch fused AdamW kernel order"),
        ZOO_KERNEL("zoo_adamw_apex", PEAT_OP_ADAMW, adamw_apex,
                   "honest: apex FusedAdam, fp32 hyperparameters and scalars"),
        ZOO_KERNEL("zoo_sgd_torch", PEAT_OP_SGD, sgd_torch,
                   "honest: PyTorch _single_tensor_sgd order (wd into the gradient first)"),
        ZOO_KERNEL("zoo_sgd_torch_nesterov", PEAT_OP_SGD, sgd_torch_nesterov,
                   "honest: PyTorch _single_tensor_sgd order with nesterov=True"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
