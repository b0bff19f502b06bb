/* apply.c: runs one call through a kernel with a pseudo-error model applied (peat_inject_run). */
#include "inject/internal.h"
#include "peat/backend.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Enum indices, in the order of the choices in spec.c's table. */
enum { WHERE_INPUTS = 0, WHERE_OUTPUT, WHERE_BOTH, WHERE_ACC };
enum { KIND_ZERO = 0, KIND_STALE, KIND_RANDOM };
enum { FN_TANH = 0, FN_SMOOTH };

#define P(key)  peat_inject_param_get(m, key)
#define PI(key) ((int64_t)peat_inject_param_get(m, key))

/* ---- inputs ---------------------------------------------------------------------------------- */

/* Work copies of the float inputs (never a->in itself); index inputs stay shared. */
typedef struct inputs {
    peat_tensor *copy[PEAT_MAX_IO];
} inputs;

static void inputs_free(inputs *w)
{
    for (int i = 0; i < PEAT_MAX_IO; i++) peat_tensor_free(w->copy[i]);
}

static peat_status inputs_map(const peat_args *a, peat_args *b, inputs *w,
                              float (*fn)(float, const void *), const void *ctx)
{
    for (int i = 0; i < a->n_in; i++) {
        if (!a->in[i] || a->in[i]->dtype != PEAT_DTYPE_F32) continue;
        PEAT_TRY(peat_tensor_clone(a->in[i], &w->copy[i]));
        float *x = peat_f32(w->copy[i]);
        int64_t n = peat_tensor_numel(w->copy[i]);
        for (int64_t k = 0; k < n; k++) x[k] = fn(x[k], ctx);
        b->in[i] = w->copy[i];
    }
    return PEAT_OK;
}

typedef struct round_ctx {
    peat_inject_fmt fmt;
    int bits;
} round_ctx;

static float map_round(float x, const void *c)
{
    const round_ctx *r = c;
    return peat_inject_round(x, r->fmt, r->bits);
}

static float map_ftz(float x, const void *c)
{
    return x != 0.0f && fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

/* ---- outputs --------------------------------------------------------------------------------- */

static float *out_f32(const peat_args *a, int o, int64_t *n)
{
    *n = peat_tensor_numel(a->out[o]);
    return peat_f32(a->out[o]);
}

static void outputs_map(const peat_args *a, float (*fn)(float, const void *), const void *ctx)
{
    for (int o = 0; o < a->n_out; o++) {
        int64_t n;
        float *y = out_f32(a, o, &n);
        for (int64_t i = 0; i < n; i++) y[i] = fn(y[i], ctx);
    }
}

static peat_status check_out(const peat_inject_model_t *m, const peat_args *a, int o)
{
    if (o >= a->n_out)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: out=%d but %s has %d output(s)", m->spec, o,
                          peat_op_name(a->op), a->n_out);
    return PEAT_OK;
}

/* count distinct elements of n, chosen by rng, passed to fn one by one. */
static peat_status pick_distinct(peat_rng_t *r, int64_t n, int64_t count, float *y,
                                 void (*fn)(float *y, void *ctx), void *ctx)
{
    if (count > n) count = n;
    if (count <= 16) { /* the usual transient fault: a few picks, no mark array to clear */
        int64_t got[16];
        for (int64_t c = 0; c < count;) {
            int64_t i = (int64_t)peat_rng_int(r, (uint64_t)n), seen = 0;
            for (int64_t k = 0; k < c; k++) seen |= got[k] == i;
            if (seen) continue;
            got[c++] = i;
            fn(&y[i], ctx);
        }
        return PEAT_OK;
    }
    unsigned char *hit = calloc((size_t)n, 1);
    if (!hit) return PEAT_ERROR(PEAT_ERR_NOMEM, "inject: %lld marks", (long long)n);
    for (int64_t c = 0; c < count;) {
        int64_t i = (int64_t)peat_rng_int(r, (uint64_t)n);
        if (hit[i]) continue;
        hit[i] = 1;
        fn(&y[i], ctx);
        c++;
    }
    free(hit);
    return PEAT_OK;
}

static void flip_one(float *y, void *ctx)
{
    *y = peat_f32_from_bits(peat_f32_bits(*y) ^ (1u << *(int *)ctx));
}
static void nan_one(float *y, void *ctx)
{
    *y = *(int *)ctx ? INFINITY : NAN;
}

static double rms_of(const float *y, int64_t n)
{
    double s = 0.0;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(y[i])) s += (double)y[i] * y[i], k++;
    return k ? sqrt(s / (double)k) : 0.0;
}

/* 2-D view of an output: the last dimension is the columns (the runner's view too). */
static void view2d(const peat_tensor *t, int64_t *rows, int64_t *cols)
{
    int64_t n = peat_tensor_numel(t);
    *cols = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
    if (*cols <= 0) *cols = 1;
    *rows = n / *cols;
}

/* The output the tile and boundary models write (out=), seen as rows x cols, and their tile
 * size R x C (rows=, cols=) clamped to it. */
static peat_status tile_view(const peat_inject_model_t *m, const peat_args *a, int *o,
                             int64_t *rows, int64_t *cols, int64_t *R, int64_t *C)
{
    *o = (int)PI("out");
    PEAT_TRY(check_out(m, a, *o));
    view2d(a->out[*o], rows, cols);
    *R = PI("rows") < *rows ? PI("rows") : *rows;
    *C = PI("cols") < *cols ? PI("cols") : *cols;
    return PEAT_OK;
}

/* Overwrites the region [r0,r1) x [c0,c1) by kind; stale takes the values dr rows and dc cols
 * away (wrapping) from a snapshot of the output, i.e. memory that held another tile's result. */
static peat_status fill_region(float *y, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                               int64_t c0, int64_t c1, int kind, int64_t dr, int64_t dc,
                               peat_rng_t *r)
{
    float *snap = NULL;
    double sd = 1.0;
    if (kind == KIND_STALE) {
        snap = malloc((size_t)(rows * cols) * sizeof *snap);
        if (!snap) return PEAT_ERROR(PEAT_ERR_NOMEM, "inject: snapshot");
        memcpy(snap, y, (size_t)(rows * cols) * sizeof *snap);
    } else if (kind == KIND_RANDOM) {
        sd = rms_of(y, rows * cols);
        if (sd == 0.0) sd = 1.0;
    }
    for (int64_t i = r0; i < r1; i++)
        for (int64_t j = c0; j < c1; j++) {
            float *d = &y[i * cols + j];
            if (kind == KIND_ZERO)
                *d = 0.0f;
            else if (kind == KIND_RANDOM)
                *d = (float)peat_rng_gaussian(r, sd);
            else {
                int64_t si = ((i + dr) % rows + rows) % rows, sj = ((j + dc) % cols + cols) % cols;
                *d = snap[si * cols + sj];
            }
        }
    free(snap);
    return PEAT_OK;
}

static peat_status apply_tile(const peat_inject_model_t *m, const peat_args *a, peat_rng_t *r)
{
    int o;
    int64_t rows, cols, R, C;
    PEAT_TRY(tile_view(m, a, &o, &rows, &cols, &R, &C));
    int64_t nti = (rows + R - 1) / R, ntj = (cols + C - 1) / C;
    int64_t ti = (int64_t)peat_rng_int(r, (uint64_t)nti),
            tj = (int64_t)peat_rng_int(r, (uint64_t)ntj);
    int64_t r0 = ti * R, c0 = tj * C;
    int64_t r1 = r0 + R < rows ? r0 + R : rows, c1 = c0 + C < cols ? c0 + C : cols;
    /* stale: the neighbouring tile's values; with a single tile, its own values shifted by half */
    int64_t dr = nti > 1 ? R : 0, dc = nti > 1 ? 0 : ntj > 1 ? C : (C + 1) / 2;
    if (nti == 1 && ntj == 1 && C == 1) dr = (R + 1) / 2;
    return fill_region(peat_f32(a->out[o]), rows, cols, r0, r1, c0, c1, (int)PI("kind"), dr, dc, r);
}

static peat_status apply_boundary(const peat_inject_model_t *m, const peat_args *a, peat_rng_t *r)
{
    int o;
    int64_t rows, cols, R, C;
    PEAT_TRY(tile_view(m, a, &o, &rows, &cols, &R, &C));
    float *y = peat_f32(a->out[o]);
    int kind = (int)PI("kind");
    /* stale edge rows/cols hold what the tile before them computed */
    if (R > 0) PEAT_TRY(fill_region(y, rows, cols, rows - R, rows, 0, cols, kind, -R, 0, r));
    if (C > 0) PEAT_TRY(fill_region(y, rows, cols, 0, rows, cols - C, cols, kind, 0, -C, r));
    return PEAT_OK;
}

static peat_status apply_stuck(const peat_inject_model_t *m, const peat_args *a, peat_rng_t *r)
{
    int o = (int)PI("out");
    PEAT_TRY(check_out(m, a, o));
    int64_t n, stride = PI("stride"), off = PI("offset");
    float *y = out_f32(a, o, &n);
    int b = (int)PI("bit");
    uint32_t bit = 1u << (b < 0 ? (int)peat_rng_int(r, 32) : b);
    int value = (int)PI("value");
    for (int64_t i = off; i < n; i += stride)
        y[i] = peat_f32_from_bits(value ? peat_f32_bits(y[i]) | bit : peat_f32_bits(y[i]) & ~bit);
    return PEAT_OK;
}

static void outputs_noise(const peat_args *a, double sigma, peat_rng_t *r)
{
    for (int o = 0; o < a->n_out; o++) {
        int64_t n;
        float *y = out_f32(a, o, &n);
        for (int64_t i = 0; i < n; i++)
            y[i] = (float)((double)y[i] * (1.0 + peat_rng_gaussian(r, sigma)));
    }
}

/* y + k ulps for integer k ~ round(N(0, sigma)): what a different order does at rounding level. */
static void outputs_ulp_noise(const peat_args *a, double sigma, peat_rng_t *r)
{
    for (int o = 0; o < a->n_out; o++) {
        int64_t n;
        float *y = out_f32(a, o, &n);
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(y[i]) || y[i] == 0.0f) continue;
            double k = nearbyint(peat_rng_gaussian(r, sigma));
            float ulp = nextafterf(fabsf(y[i]), INFINITY) - fabsf(y[i]);
            y[i] = (float)((double)y[i] + k * (double)ulp);
        }
    }
}

/* y + amp S sin(3 y / S): a deviation that is a smooth, non-monotone function of the value. */
static void outputs_smooth(const peat_args *a, double amp)
{
    for (int o = 0; o < a->n_out; o++) {
        int64_t n;
        float *y = out_f32(a, o, &n);
        double S = rms_of(y, n);
        if (S == 0.0) continue;
        for (int64_t i = 0; i < n; i++)
            if (isfinite(y[i]))
                y[i] = (float)((double)y[i] + amp * S * sin(3.0 * (double)y[i] / S));
    }
}

typedef struct range_ctx {
    int fp16;
} range_ctx;

/* Inf or 0 exactly where the narrower format's RN would give Inf or 0; other values untouched. */
static float map_range(float x, const void *c)
{
    float r = ((const range_ctx *)c)->fp16 ? peat_round_f16(x) : peat_round_bf16(x);
    if (isinf(r) && isfinite(x)) return r;
    if (r == 0.0f && x != 0.0f) return copysignf(0.0f, x);
    return x;
}

/* ---- computations that replace the kernel ---------------------------------------------------- */

/* Runs the exact kernel of the op into fp64 buffers; then out = conv(exact) per element. */
static peat_status via_exact(const peat_kernel *k, const peat_args *b, const peat_args *a,
                             float (*conv)(double, int), int bits)
{
    const peat_kernel *ek = peat_registry_role(k->op, PEAT_ROLE_EXACT, PEAT_BACKEND_HOST);
    if (!ek)
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "inject: no exact kernel for %s",
                          peat_op_name(k->op));
    peat_args e = *b;
    PEAT_TRY(peat_op_alloc_outputs(&e, PEAT_DTYPE_F64));
    peat_status st = peat_kernel_run(ek, &e);
    for (int o = 0; st == PEAT_OK && o < a->n_out && o < e.n_out; o++) {
        int64_t n = peat_tensor_numel(a->out[o]);
        if (peat_tensor_numel(e.out[o]) != n) {
            st = PEAT_ERROR(PEAT_ERR_SHAPE, "inject: exact output %d has another shape", o);
            break;
        }
        const double *x = peat_f64(e.out[o]);
        float *y = peat_f32(a->out[o]);
        for (int64_t i = 0; i < n; i++) y[i] = conv(x[i], bits);
    }
    peat_args_free_outputs(&e);
    return st;
}

static float conv_rn(double x, int bits)
{
    return (float)x;
}
static float conv_rtz(double x, int bits)
{
    return peat_inject_round_bits_rtz(x, bits);
}

#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

/* The tanh-form GELU (and its derivative) in fp32, as fast kernels compute it. */
static peat_status gelu_tanh(const peat_args *b, const peat_args *a)
{
    int64_t n = b->p.i[0];
    const float *x = peat_f32(b->in[0]);
    float *y = peat_f32(a->out[0]);
    if (b->op == PEAT_OP_GELU) {
        for (int64_t i = 0; i < n; i++) {
            float v = x[i], t = tanhf(GELU_K * (v + GELU_C * v * v * v));
            y[i] = 0.5f * v * (1.0f + t);
        }
        return PEAT_OK;
    }
    const float *dy = peat_f32(b->in[1]);
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], d;
        if (fabsf(v) > 1.0e4f)
            d = v > 0.0f ? 1.0f : 0.0f; /* keeps v^3 from overflowing */
        else {
            float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
            d = 0.5f * (1.0f + t) +
                0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        }
        y[i] = dy[i] * d;
    }
    return PEAT_OK;
}

static void fmt_of(const peat_inject_model_t *m, peat_inject_fmt *f, int *bits)
{
    *f = (peat_inject_fmt)PI("fmt");
    *bits = (int)PI("bits");
}

/* ---- the run --------------------------------------------------------------------------------- */

static peat_status compute(const peat_inject_model_t *m, const peat_kernel *k, const peat_args *b,
                           const peat_args *a, peat_rng_t *r)
{
    peat_inject_gemm_variant v = {.order = PEAT_ORDER_FORWARD, .split = 1, .rng = r};
    switch (m->def->id) {
    case PEAT_INJ_REORDER:
        if (k->op != PEAT_OP_GEMM) return via_exact(k, b, a, conv_rn, 24);
        v.order = (peat_inject_order)PI("order");
        v.split = (int)PI("split");
        v.block = (int)PI("block");
        return peat_inject_gemm(b, &v);
    case PEAT_INJ_PRECISION:
        if ((int)PI("where") != WHERE_ACC) break;
        if (k->op != PEAT_OP_GEMM)
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                              "inject %s: where=acc is modelled for gemm only, not %s", m->spec,
                              peat_op_name(k->op));
        v.round_acc = 1;
        fmt_of(m, &v.fmt, &v.bits);
        return peat_inject_gemm(b, &v);
    case PEAT_INJ_TRUNCATE:
        return via_exact(k, b, a, conv_rtz, (int)PI("bits"));
    case PEAT_INJ_APPROX:
        if ((int)PI("fn") != FN_TANH) break;
        if (k->op != PEAT_OP_GELU && k->op != PEAT_OP_GELU_BWD)
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                              "inject %s: fn=tanh approximates gelu and gelu_bwd, not %s", m->spec,
                              peat_op_name(k->op));
        return gelu_tanh(b, a);
    case PEAT_INJ_NONDETERMINISTIC:
        if (k->op != PEAT_OP_GEMM) break;
        v.order = PEAT_ORDER_SPLIT_RANDOM;
        v.split = (int)PI("split");
        return peat_inject_gemm(b, &v);
    default:
        break;
    }
    return peat_kernel_run(k, b);
}

static peat_status corrupt(const peat_inject_model_t *m, const peat_args *a, peat_rng_t *r)
{
    switch (m->def->id) {
    case PEAT_INJ_PRECISION: {
        int where = (int)PI("where");
        if (where != WHERE_OUTPUT && where != WHERE_BOTH) return PEAT_OK;
        round_ctx c;
        fmt_of(m, &c.fmt, &c.bits);
        outputs_map(a, map_round, &c);
        return PEAT_OK;
    }
    case PEAT_INJ_FTZ:
        if ((int)PI("where") != WHERE_INPUTS) outputs_map(a, map_ftz, NULL);
        return PEAT_OK;
    case PEAT_INJ_RANGE: {
        range_ctx c = {(int)PI("fmt") == 1};
        outputs_map(a, map_range, &c);
        return PEAT_OK;
    }
    case PEAT_INJ_BITFLIP: {
        int o = (int)PI("out"), bit = (int)PI("bit");
        if (bit < 0) bit = (int)peat_rng_int(r, 32); /* a transient upset in any bit */
        PEAT_TRY(check_out(m, a, o));
        int64_t n;
        float *y = out_f32(a, o, &n);
        return pick_distinct(r, n, PI("count"), y, flip_one, &bit);
    }
    case PEAT_INJ_STUCK:
        return apply_stuck(m, a, r);
    case PEAT_INJ_TILE:
        return apply_tile(m, a, r);
    case PEAT_INJ_BOUNDARY:
        return apply_boundary(m, a, r);
    case PEAT_INJ_NAN: {
        int o = (int)PI("out"), inf = (int)PI("value");
        PEAT_TRY(check_out(m, a, o));
        int64_t n;
        float *y = out_f32(a, o, &n);
        return pick_distinct(r, n, PI("count"), y, nan_one, &inf);
    }
    case PEAT_INJ_NOISE:
        outputs_noise(a, P("sigma"), r);
        return PEAT_OK;
    case PEAT_INJ_APPROX:
        if ((int)PI("fn") == FN_SMOOTH) outputs_smooth(a, P("amp"));
        return PEAT_OK;
    case PEAT_INJ_NONDETERMINISTIC:
        if (a->op != PEAT_OP_GEMM) outputs_ulp_noise(a, P("sigma"), r);
        return PEAT_OK;
    default:
        return PEAT_OK;
    }
}

peat_status peat_inject_run(const peat_inject_model_t *m, const peat_kernel *k, const peat_args *a,
                            uint64_t seed)
{
    if (!m || !k || !a) return PEAT_ERROR(PEAT_ERR_INVAL, "inject: NULL model, kernel or call");
    if (k->role == PEAT_ROLE_EXACT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: kernel '%s' is an exact kernel (F64 outputs)",
                          m->spec, k->name);
    if (a->op != k->op)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: kernel '%s' implements %s, call is %s",
                          m->spec, k->name, peat_op_name(k->op), peat_op_name(a->op));
    for (int o = 0; o < a->n_out; o++)
        if (!a->out[o] || a->out[o]->dtype != PEAT_DTYPE_F32)
            return PEAT_ERROR(PEAT_ERR_INVAL,
                              "inject %s: output %d must be an allocated F32 tensor", m->spec, o);
    PEAT_TRY(peat_op_check(a));
    /* one independent stream per model name: the same seed gives the same faults */
    peat_rng_t *r = peat_rng_new(peat_seed_derive(seed, m->def->name));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "inject: rng");
    peat_args b = *a;
    inputs w = {{0}};
    peat_status st = PEAT_OK;
    if (m->def->id == PEAT_INJ_PRECISION) {
        int where = (int)PI("where");
        round_ctx c;
        fmt_of(m, &c.fmt, &c.bits);
        if (where == WHERE_INPUTS || where == WHERE_BOTH) st = inputs_map(a, &b, &w, map_round, &c);
    } else if (m->def->id == PEAT_INJ_FTZ && (int)PI("where") != WHERE_OUTPUT) {
        st = inputs_map(a, &b, &w, map_ftz, NULL);
    }
    if (st == PEAT_OK) st = compute(m, k, &b, a, r);
    if (st == PEAT_OK) st = corrupt(m, a, r);
    inputs_free(&w);
    peat_rng_free(r);
    return st;
}

int peat_inject_model_output_only(const peat_inject_model_t *m, peat_op_kind op)
{
    switch (m->def->id) {
    case PEAT_INJ_BITFLIP:
    case PEAT_INJ_STUCK:
    case PEAT_INJ_TILE:
    case PEAT_INJ_BOUNDARY:
    case PEAT_INJ_NAN:
    case PEAT_INJ_NOISE:
    case PEAT_INJ_RANGE:
        return 1;
    case PEAT_INJ_FTZ:
    case PEAT_INJ_PRECISION:
        return (int)PI("where") == WHERE_OUTPUT;
    case PEAT_INJ_APPROX:
        return (int)PI("fn") == FN_SMOOTH;
    case PEAT_INJ_NONDETERMINISTIC:
        return op != PEAT_OP_GEMM;
    default:
        return 0;
    }
}

/* The models that corrupt stored values (not the computation) can hit any tensor. */
static int corrupts_values(const peat_inject_model_t *m)
{
    switch (m->def->id) {
    case PEAT_INJ_BITFLIP:
    case PEAT_INJ_STUCK:
    case PEAT_INJ_TILE:
    case PEAT_INJ_BOUNDARY:
    case PEAT_INJ_NAN:
    case PEAT_INJ_NOISE:
    case PEAT_INJ_RANGE:
        return 1;
    default:
        return 0;
    }
}

peat_status peat_inject_corrupt_tensor(const peat_inject_model_t *m, peat_op_kind op,
                                       peat_tensor *t, uint64_t seed)
{
    if (!corrupts_values(m))
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED,
                          "inject %s: changes the computation, it cannot corrupt a stored tensor",
                          m->spec);
    if (!t || t->dtype != PEAT_DTYPE_F32)
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: the corrupted tensor must be F32", m->spec);
    if (P("out") > 0) /* the tensor stands for output 0; out= names another */
        return PEAT_ERROR(PEAT_ERR_INVAL, "inject %s: out= does not apply to one tensor", m->spec);
    peat_args a;
    memset(&a, 0, sizeof a);
    a.op = op;
    a.n_out = 1;
    a.out[0] = t;
    peat_rng_t *r = peat_rng_new(peat_seed_derive(seed, m->def->name));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "inject: rng");
    peat_status st = corrupt(m, &a, r);
    peat_rng_free(r);
    return st;
}

peat_status peat_inject_outputs(const peat_inject_model_t *m, const peat_args *a, uint64_t seed)
{
    peat_rng_t *r = peat_rng_new(peat_seed_derive(seed, m->def->name));
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "inject: rng");
    peat_status st = corrupt(m, a, r);
    peat_rng_free(r);
    return st;
}
