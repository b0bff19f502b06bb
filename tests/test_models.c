/* test_models.c: the training flows: they learn, are deterministic, finetune, and run every op
 * through the exec (hook coverage, swapped kernels, gradients against finite differences). */
#include <criterion/criterion.h>

#include "models/flow_impl.h" /* internal: the gradient check calls a flow's train directly */
#include "models/models.h"
#include "harness/runtime/builtin.h"
#include "golden/golden.h"
#include "flow_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const FLOWS[] = {"mlp",   "cnn",      "gpt",   "gpt_unfused",
                                    "llama", "mlp_silu", "resnet"};
#define N_FLOWS ((int)(sizeof FLOWS / sizeof FLOWS[0]))

static void init(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "registry: %s", peat_error_last());
}

static peat_flow_config config(uint64_t seed)
{
    peat_flow_config c;
    memset(&c, 0, sizeof c);
    c.seed = seed;
    c.weight_decay = -1;
    return c;
}

/* Runs n steps, storing the losses. */
static void steps(run *r, int n, double *loss)
{
    for (int s = 0; s < n; s++) {
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_step(r->f, &m), PEAT_OK, "step %d of %s: %s (%s)", s,
                     peat_error_where(), peat_error_last(), peat_error_where());
        cr_assert(isfinite(m.loss), "loss of step %d is %g", s, m.loss);
        cr_assert_eq(m.step, peat_models_flow_step_count(r->f));
        if (loss) loss[s] = m.loss;
    }
}

static double mean(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

/* Number of state elements that differ bitwise between two flows of the same config. */
static int64_t state_diff(peat_flow_t *a, peat_flow_t *b)
{
    int64_t d = 0;
    cr_assert_eq(peat_models_flow_state_count(a), peat_models_flow_state_count(b));
    for (int i = 0; i < peat_models_flow_state_count(a); i++) {
        peat_tensor *x = peat_models_flow_state(a, i, NULL),
                    *y = peat_models_flow_state(b, i, NULL);
        cr_assert_eq(peat_tensor_numel(x), peat_tensor_numel(y));
        for (int64_t k = 0; k < peat_tensor_numel(x); k++)
            d += memcmp(peat_f32(x) + k, peat_f32(y) + k, sizeof(float)) != 0;
    }
    return d;
}

/* ---- interface --------------------------------------------------------------------------- */

Test(models, names_masks_and_refusals, .init = init)
{
    const char *const *n = peat_models_flow_names();
    for (int k = 0; k < N_FLOWS; k++) {
        cr_assert_str_eq(n[k], FLOWS[k]);
        cr_assert_not_null(peat_models_flow_describe(n[k]));
        uint64_t m = peat_models_flow_op_mask(n[k]);
        cr_assert(m & PEAT_OP_BIT(PEAT_OP_GEMM), "%s does not declare gemm", n[k]);
        cr_assert(m & PEAT_OP_BIT(PEAT_OP_CROSS_ENTROPY_BWD), "%s lacks cross_entropy_bwd", n[k]);
        /* the default optimizer: SGD with momentum on resnet, AdamW elsewhere */
        int sgd = strcmp(n[k], "resnet") == 0;
        cr_assert_eq(peat_models_flow_optimizer(n[k], NULL),
                     sgd ? PEAT_OPTIM_SGD : PEAT_OPTIM_ADAMW, "%s default optimizer", n[k]);
        cr_assert(m & PEAT_OP_BIT(sgd ? PEAT_OP_SGD : PEAT_OP_ADAMW), "%s default optimizer's op",
                  n[k]);
        cr_assert_not(m & PEAT_OP_BIT(sgd ? PEAT_OP_ADAMW : PEAT_OP_SGD),
                      "%s declares the other optimizer under the default config", n[k]);
        m = (m & ~PEAT_OP_BIT(PEAT_OP_SGD)) | PEAT_OP_BIT(PEAT_OP_ADAMW);
        peat_flow_config c = config(1);
        c.optimizer = PEAT_OPTIM_SGD;
        uint64_t ms = peat_models_flow_op_mask_for(n[k], &c);
        cr_assert_eq(ms, (m & ~PEAT_OP_BIT(PEAT_OP_ADAMW)) | PEAT_OP_BIT(PEAT_OP_SGD),
                     "%s sgd mask", n[k]);
    }
    cr_assert_null(n[N_FLOWS]);
    cr_assert(peat_models_flow_op_mask("cnn") & PEAT_OP_BIT(PEAT_OP_CONV2D_BWD_DATA));
    cr_assert(peat_models_flow_op_mask("gpt") & PEAT_OP_BIT(PEAT_OP_ATTENTION_BWD));
    /* gpt_unfused: the same ops as gpt with the fused attention pair replaced by softmax and
     * its backward (the score and value products are GEMMs, the mask a BIAS_ADD) */
    uint64_t attn = PEAT_OP_BIT(PEAT_OP_ATTENTION) | PEAT_OP_BIT(PEAT_OP_ATTENTION_BWD);
    uint64_t smax = PEAT_OP_BIT(PEAT_OP_SOFTMAX) | PEAT_OP_BIT(PEAT_OP_SOFTMAX_BWD);
    cr_assert_eq(peat_models_flow_op_mask("gpt_unfused"),
                 (peat_models_flow_op_mask("gpt") & ~attn) | smax, "gpt_unfused mask 0x%llx",
                 (unsigned long long)peat_models_flow_op_mask("gpt_unfused"));
    /* llama: gpt's ops with RMSNorm for layernorm, the SwiGLU product for GELU, the rotary
     * embedding for the position table and no projection biases (the backward's sums still add
     * with BIAS_ADD); mlp_silu: mlp's with SiLU for ReLU */
    uint64_t ln = PEAT_OP_BIT(PEAT_OP_LAYERNORM) | PEAT_OP_BIT(PEAT_OP_LAYERNORM_BWD);
    uint64_t gelu = PEAT_OP_BIT(PEAT_OP_GELU) | PEAT_OP_BIT(PEAT_OP_GELU_BWD);
    uint64_t rms = PEAT_OP_BIT(PEAT_OP_RMSNORM) | PEAT_OP_BIT(PEAT_OP_RMSNORM_BWD);
    uint64_t swi = PEAT_OP_BIT(PEAT_OP_SWIGLU) | PEAT_OP_BIT(PEAT_OP_SWIGLU_BWD) |
                   PEAT_OP_BIT(PEAT_OP_ROPE) | PEAT_OP_BIT(PEAT_OP_ROPE_BWD);
    cr_assert_eq(
        peat_models_flow_op_mask("llama"),
        (peat_models_flow_op_mask("gpt") & ~ln & ~gelu & ~PEAT_OP_BIT(PEAT_OP_BIAS_ADD_BWD)) | rms |
            swi,
        "llama mask 0x%llx", (unsigned long long)peat_models_flow_op_mask("llama"));
    uint64_t relu = PEAT_OP_BIT(PEAT_OP_RELU) | PEAT_OP_BIT(PEAT_OP_RELU_BWD);
    uint64_t silu = PEAT_OP_BIT(PEAT_OP_SILU) | PEAT_OP_BIT(PEAT_OP_SILU_BWD);
    uint64_t rn = peat_models_flow_op_mask("resnet");
    cr_assert(rn & PEAT_OP_BIT(PEAT_OP_BATCHNORM_BWD) && rn & PEAT_OP_BIT(PEAT_OP_MAXPOOL2D_BWD) &&
                  rn & PEAT_OP_BIT(PEAT_OP_AVGPOOL2D_BWD) &&
                  rn & PEAT_OP_BIT(PEAT_OP_CONV2D_BWD_DATA),
              "resnet mask 0x%llx", (unsigned long long)rn);
    cr_assert_eq(peat_models_flow_op_mask("mlp_silu"),
                 (peat_models_flow_op_mask("mlp") & ~relu) | silu, "mlp_silu mask 0x%llx",
                 (unsigned long long)peat_models_flow_op_mask("mlp_silu"));
    cr_assert_eq(peat_models_flow_op_mask("nope"), 0u);
    cr_assert_null(peat_models_flow_describe("nope"));

    peat_exec_t *ex;
    cr_assert_eq(peat_exec_alloc("t", 1, &ex), PEAT_OK);
    peat_flow_t *f = (peat_flow_t *)1;
    peat_flow_config c = config(1);
    cr_assert_eq(peat_models_flow_alloc("nope", &c, ex, &f), PEAT_ERR_NOTFOUND);
    cr_assert_null(f, "a refused create must leave *out NULL");
    cr_assert_eq(peat_models_flow_alloc("mlp", &c, NULL, &f), PEAT_ERR_INVAL);
    c.task = 2;
    cr_assert_eq(peat_models_flow_alloc("mlp", &c, ex, &f), PEAT_ERR_INVAL, "task 2 accepted");
    c = config(1);
    c.batch = -3;
    cr_assert_eq(peat_models_flow_alloc("cnn", &c, ex, &f), PEAT_ERR_INVAL,
                 "negative batch accepted");
    c = config(1);
    c.seq = 4; /* too short for "a+b=" with an answer */
    cr_assert_eq(peat_models_flow_alloc("gpt", &c, ex, &f), PEAT_ERR_INVAL, "seq 4 accepted");
    c.seq = 5; /* one-digit operands: fine */
    cr_assert_eq(peat_models_flow_alloc("gpt", &c, ex, &f), PEAT_OK, "%s", peat_error_last());
    peat_models_flow_free(f);
    peat_exec_free(ex);
}

Test(models, state_names_and_checkpoint_copy, .init = init)
{
    peat_flow_config c = config(5);
    run a = make("mlp", &c);
    /* 3 linear layers -> 6 parameters; AdamW: weights, then m, then v */
    cr_assert_eq(peat_models_flow_state_count(a.f), 18);
    const char *nm;
    peat_models_flow_state(a.f, 0, &nm);
    cr_assert_str_eq(nm, "fc1.w");
    peat_models_flow_state(a.f, 1, &nm);
    cr_assert_str_eq(nm, "fc1.b");
    peat_models_flow_state(a.f, 6, &nm);
    cr_assert_str_eq(nm, "adam.m.fc1.w");
    peat_models_flow_state(a.f, 17, &nm);
    cr_assert_str_eq(nm, "adam.v.fc3.b");
    cr_assert_null(peat_models_flow_state(a.f, 18, &nm));
    cr_assert_eq(peat_tensor_numel(peat_models_flow_state(a.f, 0, NULL)), 16 * 64);

    peat_flow_config cs = config(5);
    cs.optimizer = PEAT_OPTIM_SGD;
    run s = make("mlp", &cs);
    cr_assert_eq(peat_models_flow_state_count(s.f), 12);
    peat_models_flow_state(s.f, 11, &nm);
    cr_assert_str_eq(nm, "sgd.mom.fc3.b");
    cr_assert_eq(peat_models_flow_state_copy(a.f, s.f), PEAT_ERR_SHAPE, "copy across optimizers");
    run g = make("gpt", &c), gu = make("gpt_unfused", &c);
    cr_assert_eq(peat_models_flow_state_copy(a.f, g.f), PEAT_ERR_INVAL, "copy across flows");
    /* same parameters, but still two flows: their names line up, the copy is refused */
    cr_assert_eq(peat_models_flow_state_count(g.f), peat_models_flow_state_count(gu.f));
    cr_assert_eq(peat_models_flow_state_copy(g.f, gu.f), PEAT_ERR_INVAL, "copy gpt -> gpt_unfused");
    drop(&s);
    drop(&g);
    drop(&gu);

    /* a checkpoint after 5 steps, loaded into a fresh flow, continues bit-identically; both
     * ways of loading: peat_models_flow_state_copy, and copying the tensors +
     * peat_models_flow_set_step */
    for (int k = 0; k < N_FLOWS; k++) {
        peat_flow_config cc = config(9);
        cc.batch = 4;
        run x = make(FLOWS[k], &cc), y = make(FLOWS[k], &cc), z = make(FLOWS[k], &cc);
        steps(&x, 5, NULL);
        cr_assert_eq(peat_models_flow_state_copy(x.f, y.f), PEAT_OK);
        cr_assert_eq(peat_models_flow_step_count(y.f), 5);
        for (int i = 0; i < peat_models_flow_state_count(x.f); i++) {
            peat_tensor *t = peat_models_flow_state(x.f, i, NULL);
            memcpy(peat_models_flow_state(z.f, i, NULL)->data, t->data, peat_tensor_nbytes(t));
        }
        peat_models_flow_set_step(z.f, 5);
        double lx[3], ly[3], lz[3];
        steps(&x, 3, lx);
        steps(&y, 3, ly);
        steps(&z, 3, lz);
        for (int s2 = 0; s2 < 3; s2++) {
            cr_assert_eq(lx[s2], ly[s2], "%s: resumed (copy) loss differs at step %d", FLOWS[k],
                         s2);
            cr_assert_eq(lx[s2], lz[s2], "%s: resumed (set_step) loss differs at step %d", FLOWS[k],
                         s2);
        }
        cr_assert_eq(state_diff(x.f, y.f), 0, "%s: resumed weights differ", FLOWS[k]);
        cr_assert_eq(state_diff(x.f, z.f), 0, "%s: resumed weights differ", FLOWS[k]);
        drop(&x);
        drop(&y);
        drop(&z);
    }
    drop(&a);
}

/* ---- determinism ------------------------------------------------------------------------- */

Test(models, same_seed_bit_identical_other_seed_differs, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++) {
        peat_flow_config c = config(42), c2 = config(43);
        run a = make(FLOWS[k], &c), b = make(FLOWS[k], &c), d = make(FLOWS[k], &c2);
        double la[4], lb[4], ld[4];
        /* an eval in between must not change training (forward only, no state written) */
        steps(&a, 2, la);
        peat_flow_metrics m;
        cr_assert_eq(peat_models_flow_eval(a.f, &m), PEAT_OK, "%s", peat_error_last());
        steps(&a, 2, la + 2);
        steps(&b, 4, lb);
        steps(&d, 4, ld);
        int same_d = 1;
        for (int s = 0; s < 4; s++) {
            cr_assert_eq(memcmp(&la[s], &lb[s], sizeof(double)), 0, "%s: step %d loss %.9g vs %.9g",
                         FLOWS[k], s, la[s], lb[s]);
            same_d &= la[s] == ld[s];
        }
        cr_assert_eq(state_diff(a.f, b.f), 0, "%s: same seed, weights differ", FLOWS[k]);
        cr_assert_not(same_d, "%s: seeds 42 and 43 give the same losses", FLOWS[k]);
        cr_assert_gt(state_diff(a.f, d.f),
                     peat_tensor_numel(peat_models_flow_state(a.f, 0, NULL)) / 2,
                     "%s: seeds 42 and 43 give nearly the same weights", FLOWS[k]);
        drop(&a);
        drop(&b);
        drop(&d);
    }
}

/* ---- learning and finetuning ------------------------------------------------------------- */

enum { LEARN_STEPS = 60, FT_STEPS = 15 };

/* Trains the default config for LEARN_STEPS: the mean loss of the last 5 steps must be below
 * 0.7x that of the first 5. Returns the pretrained run. */
static run learn(const char *name, peat_optimizer opt, double *first5)
{
    peat_flow_config c = config(1);
    c.optimizer = opt;
    run r = make(name, &c);
    double l[LEARN_STEPS];
    steps(&r, LEARN_STEPS, l);
    double a = mean(l, 5), b = mean(l + LEARN_STEPS - 5, 5);
    cr_assert_lt(b, 0.7 * a, "%s: loss of the last 5 steps %.4f is not < 0.7 x first 5 %.4f", name,
                 b, a);
    if (first5) *first5 = a;
    return r;
}

/* Task 1 for FT_STEPS from the pretrained state and from random init; returns the mean train
 * losses and the held-out metrics after the steps. */
static void finetune(const char *name, run *pre, double *ft_train, double *rnd_train,
                     peat_flow_metrics *ft_eval, peat_flow_metrics *rnd_eval)
{
    peat_flow_config c = config(1);
    c.task = 1;
    run ft = make(name, &c), rnd = make(name, &c);
    cr_assert_eq(peat_models_flow_state_copy(pre->f, ft.f), PEAT_OK, "%s", peat_error_last());
    double a[FT_STEPS], b[FT_STEPS];
    steps(&ft, FT_STEPS, a);
    steps(&rnd, FT_STEPS, b);
    *ft_train = mean(a, FT_STEPS);
    *rnd_train = mean(b, FT_STEPS);
    if (ft_eval) {
        cr_assert_eq(peat_models_flow_eval(ft.f, ft_eval), PEAT_OK);
        cr_assert_eq(peat_models_flow_eval(rnd.f, rnd_eval), PEAT_OK);
    }
    drop(&ft);
    drop(&rnd);
}

Test(models, mlp_learns_and_finetunes, .init = init)
{
    run r = learn("mlp", PEAT_OPTIM_ADAMW, NULL);
    peat_flow_metrics m;
    cr_assert_eq(peat_models_flow_eval(r.f, &m), PEAT_OK);
    cr_assert_gt(m.accuracy, 0.6, "mlp held-out accuracy %.3f (chance 0.25)", m.accuracy);
    cr_assert(m.accuracy <= 1.0);
    /* task 1 relabels a third of the clusters: the pretrained features carry over, so the
     * held-out loss after 15 steps is below that of a random init after the same steps */
    double fa, fb;
    peat_flow_metrics fe, re;
    finetune("mlp", &r, &fa, &fb, &fe, &re);
    cr_assert_lt(fe.loss, re.loss, "mlp finetuned held-out loss %.4f not < random init %.4f",
                 fe.loss, re.loss);
    drop(&r);
}

Test(models, mlp_learns_with_sgd, .init = init)
{
    run r = learn("mlp", PEAT_OPTIM_SGD, NULL);
    peat_flow_metrics m;
    cr_assert_eq(peat_models_flow_eval(r.f, &m), PEAT_OK);
    cr_assert_gt(m.accuracy, 0.6, "mlp (sgd) held-out accuracy %.3f (chance 0.25)", m.accuracy);
    drop(&r);
}

Test(models, cnn_learns_and_finetunes, .init = init)
{
    run r = learn("cnn", PEAT_OPTIM_ADAMW, NULL);
    peat_flow_metrics m;
    cr_assert_eq(peat_models_flow_eval(r.f, &m), PEAT_OK);
    cr_assert_gt(m.accuracy, 0.6, "cnn held-out accuracy %.3f (chance 0.25)", m.accuracy);
    /* task 1: smaller, more shifted, noisier shapes and the other diagonal */
    double fa, fb;
    peat_flow_metrics fe, re;
    finetune("cnn", &r, &fa, &fb, &fe, &re);
    cr_assert_lt(fe.loss, re.loss, "cnn finetuned held-out loss %.4f not < random init %.4f",
                 fe.loss, re.loss);
    cr_assert_gt(fe.accuracy, re.accuracy, "cnn finetuned accuracy %.3f not > random init %.3f",
                 fe.accuracy, re.accuracy);
    drop(&r);
}

Test(models, gpt_learns_and_finetunes, .init = init)
{
    double first5;
    run r = learn("gpt", PEAT_OPTIM_ADAMW, &first5);
    /* 60 steps teach the answer digits' distribution, not yet the sum (exact match needs about
     * 600-1000 steps, see docs/flows.md): the held-out loss must have fallen with the train
     * loss, and exact match is a fraction */
    peat_flow_metrics m;
    cr_assert_eq(peat_models_flow_eval(r.f, &m), PEAT_OK);
    cr_assert_lt(m.loss, 0.7 * first5, "gpt held-out loss %.4f vs first train steps %.4f", m.loss,
                 first5);
    cr_assert(m.accuracy >= 0.0 && m.accuracy <= 1.0, "exact match %g", m.accuracy);
    /* task 1 is subtraction: same digits and format, so the mean train loss of the first 15
     * finetuning steps is below that of a random init */
    double fa, fb;
    finetune("gpt", &r, &fa, &fb, NULL, NULL);
    cr_assert_lt(fa, fb, "gpt finetuned mean loss %.4f not < random init %.4f", fa, fb);
    drop(&r);
}

Test(models, gpt_unfused_learns, .init = init)
{
    /* the unfused attention trains the same model: the same training-loss margin as gpt (the
     * held-out eval and finetuning are the shared code, tested with gpt; the eval of this
     * variant runs in the determinism and op-coverage tests) */
    run r = learn("gpt_unfused", PEAT_OPTIM_ADAMW, NULL);
    drop(&r);
}

/* ---- every op through the exec ------------------------------------------------------------ */

typedef struct seen {
    uint64_t ops;
    int64_t iter_expected;
    int bad_phase, bad_iter;
} seen;

static peat_status seen_hook(void *user, const peat_kernel *k, const peat_args *a,
                             const peat_call_info *info, int after)
{
    seen *s = user;
    if (after) return PEAT_OK;
    s->ops |= PEAT_OP_BIT(a->op);
    int opt = a->op == PEAT_OP_ADAMW || a->op == PEAT_OP_SGD;
    if (opt != (info->phase == PEAT_PHASE_OPT)) s->bad_phase++;
    if (peat_op_info_get(a->op)->is_backward && info->phase != PEAT_PHASE_BWD) s->bad_phase++;
    if (s->iter_expected >= 0 && info->iter != s->iter_expected) s->bad_iter++;
    return PEAT_OK;
}

Test(models, exec_sees_exactly_the_declared_ops, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++)
        for (int o = 0; o < 2; o++) {
            peat_flow_config c = config(3);
            c.batch = 4;
            c.optimizer = o ? PEAT_OPTIM_SGD : PEAT_OPTIM_ADAMW;
            run r = make(FLOWS[k], &c);
            seen s = {0, 0, 0, 0};
            cr_assert_eq(peat_exec_add_hook(r.ex, seen_hook, &s), PEAT_OK);
            steps(&r, 1, NULL);
            s.iter_expected = 1;
            steps(&r, 1, NULL);
            s.iter_expected = -1;
            peat_flow_metrics m;
            /* the eval (forward only) is the same under either optimizer: checked once */
            if (o == 0) cr_assert_eq(peat_models_flow_eval(r.f, &m), PEAT_OK);
            uint64_t want = peat_models_flow_op_mask_for(FLOWS[k], &c);
            cr_assert_eq(s.ops, want, "%s/%s: exec saw ops 0x%x, flow declares 0x%x", FLOWS[k],
                         o ? "sgd" : "adamw", s.ops, want);
            cr_assert_eq(s.bad_phase, 0, "%s: %d calls in the wrong phase", FLOWS[k], s.bad_phase);
            cr_assert_eq(s.bad_iter, 0, "%s: %d calls with the wrong iter", FLOWS[k], s.bad_iter);
            drop(&r);
        }
}

/* A kernel that runs the golden one and then adds 0.01 to every element of its first output:
 * if a flow computed an op itself instead of calling the exec, swapping in this kernel for that
 * op would change nothing. */
static peat_status perturbed(const peat_args *a, const peat_kernel *self)
{
    const peat_kernel *g = peat_registry_role(a->op, PEAT_ROLE_GOLDEN, "cpu");
    PEAT_TRY(g->fn(a, g));
    float *y = peat_f32(a->out[0]);
    for (int64_t i = 0; i < peat_tensor_numel(a->out[0]); i++) y[i] += 0.01f;
    return PEAT_OK;
}

static const peat_kernel *perturbed_kernel(peat_op_kind op)
{
    static char names[PEAT_OP_COUNT][48];
    snprintf(names[op], sizeof names[op], "test_perturbed_%s", peat_op_name(op));
    const peat_kernel *have = peat_registry_find(names[op]);
    if (have) return have;
    const peat_kernel *g = peat_registry_role(op, PEAT_ROLE_GOLDEN, "cpu");
    cr_assert_not_null(g, "no golden kernel for %s", peat_op_name(op));
    peat_kernel k = *g;
    k.name = names[op];
    k.role = PEAT_ROLE_CANDIDATE;
    k.fn = perturbed;
    k.desc = "golden + 0.01 (test)";
    cr_assert_eq(peat_registry_add(&k), PEAT_OK, "%s", peat_error_last());
    return peat_registry_find(names[op]);
}

Test(models, swapping_any_declared_kernel_changes_training, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++) {
        peat_flow_config c = config(7);
        c.batch = 4;
        run base = make(FLOWS[k], &c);
        double lb[2];
        steps(&base, 2, lb);
        uint64_t mask = peat_models_flow_op_mask_for(FLOWS[k], &c);
        for (int op = 0; op < PEAT_OP_COUNT; op++) {
            if (!(mask & PEAT_OP_BIT(op))) continue;
            run r = make(FLOWS[k], &c);
            cr_assert_eq(
                peat_exec_set_kernel(r.ex, (peat_op_kind)op, perturbed_kernel((peat_op_kind)op)),
                PEAT_OK);
            double l[2];
            steps(&r, 2, l);
            /* the loss ops only change the reported loss; all others change the weights */
            int64_t d = state_diff(base.f, r.f);
            int loss_diff = l[0] != lb[0] || l[1] != lb[1];
            cr_assert(d > 0 || loss_diff, "%s: swapping %s changed neither loss nor weights",
                      FLOWS[k], peat_op_name((peat_op_kind)op));
            drop(&r);
        }
        drop(&base);
    }
}

/* ---- gradients against central finite differences of the loss --------------------------- */

Test(models, gradients_match_finite_differences, .init = init)
{
    for (int k = 0; k < N_FLOWS; k++) {
        peat_flow_config c = config(3);
        c.batch = 4;
        run r = make(FLOWS[k], &c);
        peat_flow_t *f = r.f;
        double L;
        cr_assert_eq(f->ops->train(f, &L), PEAT_OK);
        /* all gradients first: each finite-difference train call overwrites them */
        float **g = calloc((size_t)f->n_params, sizeof *g);
        cr_assert_not_null(g);
        for (int i = 0; i < f->n_params; i++) {
            g[i] = malloc(peat_tensor_nbytes(f->params[i]->g));
            cr_assert_not_null(g[i]);
            memcpy(g[i], f->params[i]->g->data, peat_tensor_nbytes(f->params[i]->g));
        }
        int checked = 0;
        for (int i = 0; i < f->n_params; i++) {
            peat_models_param *p = f->params[i];
            int64_t n = peat_tensor_numel(p->w);
            int64_t last = p->w->shape[p->w->ndim - 1];
            /* the largest gradient element; for the fused QKV also the largest of each of Q, K
             * and V's columns, so that every part of the attention backward is checked */
            int parts = strstr(p->name, "qkv") ? 3 : 1;
            for (int part = 0; part < parts; part++) {
                int64_t best = -1;
                for (int64_t e = 0; e < n; e++) {
                    if (parts == 3 && (e % last) / (last / 3) != part) continue;
                    if (best < 0 || fabsf(g[i][e]) > fabsf(g[i][best])) best = e;
                }
                float *w = peat_f32(p->w), w0 = w[best];
                double h = 1e-3 * fmax(1.0, fabs(w0)), lp, lm;
                w[best] = (float)(w0 + h);
                double hp = (double)w[best] - w0;
                cr_assert_eq(f->ops->train(f, &lp), PEAT_OK);
                w[best] = (float)(w0 - h);
                double hm = w0 - (double)w[best];
                cr_assert_eq(f->ops->train(f, &lm), PEAT_OK);
                w[best] = w0;
                double fd = (lp - lm) / (hp + hm);
                cr_assert_leq(fabs(fd - g[i][best]), 0.05 * fabs(g[i][best]) + 2e-3,
                              "%s: d loss / d %s[%lld] = %.6g by backward, %.6g by differences",
                              FLOWS[k], p->name, (long long)best, g[i][best], fd);
                checked++;
            }
        }
        cr_assert_gt(checked, 5);
        for (int i = 0; i < f->n_params; i++) free(g[i]);
        free(g);
        drop(&r);
    }
}

/* ---- gpt_unfused against gpt ---------------------------------------------------------- */

/* Largest |a - b| and largest |a| over the gradients of two flows with the same parameters. */
static void grad_diff(peat_flow_t *a, peat_flow_t *b, int i, double *diff, double *amax)
{
    peat_tensor *x = a->params[i]->g, *y = b->params[i]->g;
    cr_assert_str_eq(a->params[i]->name, b->params[i]->name);
    cr_assert_eq(peat_tensor_numel(x), peat_tensor_numel(y));
    *diff = *amax = 0;
    for (int64_t e = 0; e < peat_tensor_numel(x); e++) {
        *diff = fmax(*diff, fabs((double)peat_f32(x)[e] - peat_f32(y)[e]));
        *amax = fmax(*amax, fabs((double)peat_f32(x)[e]));
    }
}

Test(models, gpt_unfused_is_the_same_model_as_gpt, .init = init)
{
    /* Same seed: same weights and batch. The fused attention and the GEMM / -1e9 mask / softmax
     * / GEMM chain differ only in rounding (the masked scores' exp underflows to exactly 0),
     * so the loss agrees to fp32 rounding: 1e-5 relative is ~80 ulp of the loss after two
     * blocks of ~100 rounded ops each. Every parameter gradient agrees to 1e-4 of its largest
     * element, which checks the unfused backward against the fused one. */
    peat_flow_config c = config(11);
    run a = make("gpt", &c), b = make("gpt_unfused", &c);
    double la, lb;
    cr_assert_eq(a.f->ops->train(a.f, &la), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(b.f->ops->train(b.f, &lb), PEAT_OK, "%s", peat_error_last());
    cr_assert(isfinite(la) && la > 1.0, "initial loss %g", la);
    cr_assert_leq(fabs(la - lb), 1e-5 * fabs(la), "initial loss: gpt %.9g, gpt_unfused %.9g", la,
                  lb);
    cr_assert_eq(a.f->n_params, b.f->n_params);
    for (int i = 0; i < a.f->n_params; i++) {
        double d, amax;
        grad_diff(a.f, b.f, i, &d, &amax);
        cr_assert_gt(amax, 0.0, "gradient of %s is zero", a.f->params[i]->name);
        cr_assert_leq(d, 1e-4 * amax, "gradient of %s: fused and unfused differ by %.3g (max %.3g)",
                      a.f->params[i]->name, d, amax);
    }
    /* control: the tolerance is tight enough to see a wrong softmax (golden + 0.01) */
    run p = make("gpt_unfused", &c);
    cr_assert_eq(peat_exec_set_kernel(p.ex, PEAT_OP_SOFTMAX, perturbed_kernel(PEAT_OP_SOFTMAX)),
                 PEAT_OK);
    double lp;
    cr_assert_eq(p.f->ops->train(p.f, &lp), PEAT_OK, "%s", peat_error_last());
    cr_assert_gt(fabs(la - lp), 1e-5 * fabs(la), "a perturbed softmax keeps the loss %.9g vs %.9g",
                 lp, la);
    drop(&a);
    drop(&b);
    drop(&p);
}

/* ---- size presets and the BLAS golden ------------------------------------------------------- */

static const int64_t *state_shape(peat_flow_t *f, const char *name)
{
    for (int i = 0; i < peat_models_flow_state_count(f); i++) {
        const char *nm;
        peat_tensor *t = peat_models_flow_state(f, i, &nm);
        if (strcmp(nm, name) == 0) return t->shape;
    }
    cr_assert_fail("no state tensor %s", name);
    return NULL;
}

Test(models, size_presets_build_the_documented_shapes, .init = init)
{
    /* docs/flows.md's table: base gpt d=256 x 4 blocks with a 1024-token vocabulary, cnn on
     * 32x32x3 images with 32-64-128 channels, mlp 512 wide; tiny is the flows' defaults */
    peat_flow_config c = config(1);
    c.size = PEAT_FLOW_BASE;
    run g = make("gpt", &c), k = make("cnn", &c), m = make("mlp", &c);
    const int64_t *wte = state_shape(g.f, "wte"), *c1 = state_shape(k.f, "conv1.w"),
                  *c3 = state_shape(k.f, "conv3.w"), *fc = state_shape(m.f, "fc2.w");
    cr_assert(wte[0] == 1024 && wte[1] == 256, "gpt base wte %lldx%lld", (long long)wte[0],
              (long long)wte[1]);
    state_shape(g.f, "h3.attn.qkv.w");            /* a fourth block */
    const int64_t *wpe = state_shape(g.f, "wpe"); /* base: language modelling over 128 tokens */
    cr_assert(wpe[0] >= 128 && wpe[1] == 256, "gpt base wpe %lldx%lld (T >= 128)",
              (long long)wpe[0], (long long)wpe[1]);
    cr_assert(c1[0] == 32 && c1[1] == 3, "cnn base conv1 %lld <- %lld", (long long)c1[0],
              (long long)c1[1]);
    cr_assert(c3[0] == 128 && c3[1] == 64, "cnn base conv3 %lld <- %lld", (long long)c3[0],
              (long long)c3[1]);
    cr_assert(fc[0] == 512 && fc[1] == 512, "mlp base fc2 %lldx%lld", (long long)fc[0],
              (long long)fc[1]);
    drop(&g), drop(&k), drop(&m);
    int sz = -1;
    cr_assert_eq(peat_models_flow_size_parse("huge", &sz), PEAT_ERR_INVAL, "unknown size refused");
    cr_assert_eq(peat_models_flow_size_parse("small", &sz), PEAT_OK);
    cr_assert_eq(sz, PEAT_FLOW_SMALL);
    c.size = 7;
    peat_exec_t *ex;
    peat_flow_t *f = NULL;
    cr_assert_eq(peat_exec_alloc("mlp", 1, &ex), PEAT_OK);
    cr_assert_eq(peat_models_flow_alloc("mlp", &c, ex, &f), PEAT_ERR_INVAL, "size 7 refused");
    peat_exec_free(ex);
}

/* After each golden GEMM call of a flow: the plain loop on the same inputs, and both against the
 * fp64 exact output within gamma_(K+2) u sum|terms| (the scale and C add two roundings). */
typedef struct blas_check {
    int64_t calls, differ;
    double worst_blas, worst_plain;
} blas_check;

static peat_status blas_hook(void *user, const peat_kernel *k, const peat_args *a,
                             const peat_call_info *info, int after)
{
    blas_check *s = user;
    if (!after || a->op != PEAT_OP_GEMM) return PEAT_OK;
    int64_t n = peat_tensor_numel(a->out[0]), K = a->p.i[4];
    peat_tensor *plain, *ex;
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, a->out[0]->ndim, a->out[0]->shape, &plain),
                 PEAT_OK);
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F64, a->out[0]->ndim, a->out[0]->shape, &ex),
                 PEAT_OK);
    peat_args ap = *a, ae = *a;
    ap.out[0] = plain, ae.out[0] = ex;
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_plain"), &ap), PEAT_OK);
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_exact"), &ae), PEAT_OK);
    double *mag = malloc((size_t)n * sizeof *mag);
    cr_assert_eq(peat_golden_magnitude(&ae, 0, ex, mag), PEAT_OK);
    double u = ldexp(1, -24), gk = (double)(K + 2) * u / (1 - (double)(K + 2) * u);
    for (int64_t i = 0; i < n; i++) {
        double e = peat_f64(ex)[i], b = peat_f32(a->out[0])[i], p = peat_f32(plain)[i];
        double rb = fabs(b - e) / (gk * mag[i]), rp = fabs(p - e) / (gk * mag[i]);
        if (mag[i] == 0) rb = b == e ? 0 : INFINITY, rp = p == e ? 0 : INFINITY;
        s->worst_blas = rb > s->worst_blas ? rb : s->worst_blas;
        s->worst_plain = rp > s->worst_plain ? rp : s->worst_plain;
        s->differ += b != p;
    }
    s->calls++;
    free(mag);
    peat_tensor_free(plain), peat_tensor_free(ex);
    return PEAT_OK;
}

Test(models, blas_golden_agrees_with_the_plain_golden_on_every_flow_shape, .init = init)
{
    /* every GEMM shape each flow calls at each size (one training step and its optimizer) */
    for (int k = 0; k < N_FLOWS; k++)
        for (int size = 0; size < PEAT_FLOW_SIZES; size++) {
            peat_flow_config c = config(4);
            c.size = size;
            run r = make(FLOWS[k], &c);
            cr_assert_str_eq(peat_exec_kernel(r.ex, PEAT_OP_GEMM)->name, "gemm_golden");
            blas_check s = {0, 0, 0, 0};
            cr_assert_eq(peat_exec_add_hook(r.ex, blas_hook, &s), PEAT_OK);
            steps(&r, 1, NULL);
            cr_assert_gt(s.calls, 0, "%s %s: no GEMM call", FLOWS[k],
                         peat_models_flow_size_name(size));
            cr_assert_leq(s.worst_blas, 1.0, "%s %s: golden GEMM %.3g x the fp32 bound", FLOWS[k],
                          peat_models_flow_size_name(size), s.worst_blas);
            cr_assert_leq(s.worst_plain, 1.0, "%s %s: gemm_plain %.3g x the fp32 bound", FLOWS[k],
                          peat_models_flow_size_name(size), s.worst_plain);
            drop(&r);
        }
}

/* ---- gpt base: language modelling on the Zipf-bigram corpus ---------------------------------- */

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

Test(models, lm_corpus_is_deterministic_per_seed_and_zipf_distributed)
{
    enum { V = 1024, T = 128, ROWS = 4000 };
    peat_models_corpus a, b, o;
    cr_assert_eq(peat_models_corpus_alloc(&a, V, PEAT_MODELS_LM_ZIPF, PEAT_MODELS_LM_COPY, 3),
                 PEAT_OK, "corpus: %s", peat_error_last());
    cr_assert_eq(peat_models_corpus_alloc(&b, V, PEAT_MODELS_LM_ZIPF, PEAT_MODELS_LM_COPY, 3),
                 PEAT_OK);
    cr_assert_eq(peat_models_corpus_alloc(&o, V, PEAT_MODELS_LM_ZIPF, PEAT_MODELS_LM_COPY, 4),
                 PEAT_OK);
    /* same seed: the same chain and the same rows; another seed: another chain */
    cr_assert_eq(a.edges, b.edges, "edges %lld vs %lld", (long long)a.edges, (long long)b.edges);
    cr_assert(memcmp(a.nb, b.nb, (size_t)a.edges * sizeof *a.nb) == 0, "same seed, other chain");
    int32_t ra[T], rb[T], ro[T];
    peat_models_corpus_sample(&a, 11, 5, 6, T, ra);
    peat_models_corpus_sample(&b, 11, 5, 6, T, rb);
    peat_models_corpus_sample(&o, 11, 5, 6, T, ro);
    cr_assert(memcmp(ra, rb, sizeof ra) == 0, "same seed and row, other tokens");
    cr_assert(memcmp(ra, ro, sizeof ra) != 0, "another chain seed gives the same row");
    peat_models_corpus_sample(&a, 11, 5, 7, T, rb);
    cr_assert(memcmp(ra, rb, sizeof ra) != 0, "another row gives the same tokens");
    /* entropies: the next token given the current one is far more predictable than a token */
    cr_assert(a.h_bigram > 1 && a.h_bigram < a.h_unigram - 1 && a.h_unigram < log(V),
              "entropies: bigram %g, unigram %g, log V %g", a.h_bigram, a.h_unigram, log(V));
    /* heavy tail: over 512k tokens the most frequent token over the 100th most frequent is
     * 100^s (Zipf's law, the chain's stationary law; the copy rule keeps it) within 15% */
    int64_t *cnt = calloc(V, sizeof *cnt);
    int32_t row[T];
    for (int r = 0; r < ROWS; r++) {
        peat_models_corpus_sample(&a, 21, 0, (uint64_t)r, T, row);
        for (int t = 0; t < T; t++) {
            cr_assert(row[t] >= 0 && row[t] < V, "token %d out of the vocabulary", row[t]);
            cnt[row[t]]++;
        }
    }
    qsort(cnt, V, sizeof *cnt, cmp_desc);
    double ratio = (double)cnt[0] / (double)cnt[99], want = pow(100.0, PEAT_MODELS_LM_ZIPF);
    cr_assert(fabs(ratio / want - 1) < 0.15, "f(1)/f(100) = %.1f, Zipf(%g) gives %.1f", ratio,
              PEAT_MODELS_LM_ZIPF, want);
    /* and the top token's share is the Zipf law's 1/H(V, s) within 5% */
    double share = (double)cnt[0] / ((double)ROWS * T);
    cr_assert(fabs(share / a.pi[0] - 1) < 0.05, "top token %.4f of the tokens, Zipf %.4f", share,
              a.pi[0]);
    free(cnt);
    peat_models_corpus_free(&a), peat_models_corpus_free(&b), peat_models_corpus_free(&o);
    cr_assert_eq(peat_models_corpus_alloc(&a, 8, 1.0, 0.1, 1), PEAT_ERR_INVAL, "V 8 refused");
}

Test(models, gpt_base_language_modelling_learns, .init = init)
{
    /* the base preset's task (T 128, vocabulary 1024) at a smaller width and depth: a few steps
     * take the next-token loss from about log(1024) clearly down, on the held-out rows too */
    const char *flows[2] = {"gpt", "gpt_unfused"};
    for (int k = 0; k < 2; k++) {
        peat_flow_config c = config(1);
        c.size = PEAT_FLOW_BASE;
        c.width = 64, c.depth = 1, c.batch = 2, c.lr = 1e-2;
        run r = make(flows[k], &c);
        peat_flow_metrics e0, e1;
        cr_assert_eq(peat_models_flow_eval(r.f, &e0), PEAT_OK, "%s", peat_error_last());
        double loss[16];
        steps(&r, 16, loss);
        cr_assert_eq(peat_models_flow_eval(r.f, &e1), PEAT_OK, "%s", peat_error_last());
        cr_assert(fabs(loss[0] - log(1024.0)) < 1.0, "%s: first loss %g, log V %g", flows[k],
                  loss[0], log(1024.0));
        cr_assert_lt(loss[15], 0.85 * loss[0], "%s: loss %g -> %g", flows[k], loss[0], loss[15]);
        cr_assert_lt(e1.loss, 0.85 * e0.loss, "%s: held-out loss %g -> %g", flows[k], e0.loss,
                     e1.loss);
        cr_assert(e1.accuracy > e0.accuracy && e1.accuracy > 0.05,
                  "%s: held-out next-token accuracy %g -> %g", flows[k], e0.accuracy, e1.accuracy);
        drop(&r);
    }
    /* --seq sets the row length at base, up to 256 (a ragged 200 included) */
    peat_flow_config c = config(1);
    c.size = PEAT_FLOW_BASE;
    c.width = 64, c.depth = 1, c.batch = 1, c.seq = 200;
    run r = make("gpt", &c);
    const int64_t *wpe = state_shape(r.f, "wpe");
    cr_assert_eq(wpe[0], 200, "base --seq 200: wpe has %lld rows", (long long)wpe[0]);
    steps(&r, 1, NULL);
    drop(&r);
    c.seq = 257;
    peat_exec_t *ex;
    peat_flow_t *f = NULL;
    cr_assert_eq(peat_exec_alloc("gpt", 1, &ex), PEAT_OK);
    cr_assert_neq(peat_models_flow_alloc("gpt", &c, ex, &f), PEAT_OK, "base seq 257 accepted");
    cr_assert_null(f);
    peat_exec_free(ex);
}
