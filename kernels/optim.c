/* optim.c: the fused single-pass AdamW candidate. */
#include "kernels/kcommon.h"
#include "peat/backend.h"
#include "kernels/kernels.h"

#include <math.h>

/* One read and one write of param, grad, m, v per element. The scalar factors (1 - beta),
 * 1/(1 - beta^t) are computed once per call in double and then used as fp32 multipliers, the
 * way fused optimizers pass them as kernel arguments; so the bias corrections cost a multiply
 * instead of a divide, and beta^t is not computed in fp32 (where 1 - 0.999f^t loses digits).
 * Each element is read completely before any output is written, so outputs may alias inputs. */
static peat_status adamw_fused(const peat_args *a, const peat_kernel *self)
{
    PEAT_TRY(peat_kernels_io_check(a, self));
    int64_t n = a->p.i[0], t = a->p.i[1];
    double lr = a->p.f[0], b1 = a->p.f[1], b2 = a->p.f[2], eps = a->p.f[3], wd = a->p.f[4];
    float f_b1 = (float)b1, f_1mb1 = (float)(1.0 - b1), f_b2 = (float)b2,
          f_1mb2 = (float)(1.0 - b2);
    float f_bc1 = (float)(1.0 / (1.0 - pow(b1, (double)t)));
    float f_bc2 = (float)(1.0 / (1.0 - pow(b2, (double)t)));
    float f_lr = (float)lr, f_eps = (float)eps, f_wd = (float)wd;
    const float *p = peat_f32(a->in[0]), *g = peat_f32(a->in[1]), *m = peat_f32(a->in[2]),
                *v = peat_f32(a->in[3]);
    float *po = peat_f32(a->out[0]), *mo = peat_f32(a->out[1]), *vo = peat_f32(a->out[2]);
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i], mi = m[i], vi = v[i];
        float mn = f_b1 * mi + f_1mb1 * gi;
        float vn = f_b2 * vi + f_1mb2 * gi * gi;
        float upd = (mn * f_bc1) / (sqrtf(vn * f_bc2) + f_eps) + f_wd * pi;
        po[i] = pi - f_lr * upd;
        mo[i] = mn;
        vo[i] = vn;
    }
    return PEAT_OK;
}

static const peat_kernel optim_kernels[] = {
    PEAT_KERNELS_F32("adamw_fused", PEAT_OP_ADAMW, adamw_fused,
                     "AdamW in one pass over p,g,m,v with precomputed 1/(1-beta^t) factors"),
};

peat_status peat_kernels_register_optim(void)
{
    return peat_kernels_add_all(optim_kernels,
                                (int)(sizeof optim_kernels / sizeof optim_kernels[0]));
}
