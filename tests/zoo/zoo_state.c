/* zoo_state.c: kernels that keep state from call to call. Nine defects, each a different
 * mechanism that audits of generated kernels keep finding (an output cache keyed by pointers or by
 * a cheap hash of the values, a switch after N calls, a warm-up keyed by pointer, accumulating into
 * the output, trusting a stale output buffer, a per-shape cache that leaks between layers,
 * buffers captured once and replayed, nondeterminism only across repeated calls), every one exact
 * on a freshly started call; and four honest kernels whose state changes nothing they compute (a
 * reused workspace, a shape-keyed plan cache, a lazily built table, per-thread scratch). */
#include "zoo.h"

#include <stdlib.h>

/* The plain forward-k dot product of output (b, i, j) from k0 to k1, rounding each input with rnd
 * (NULL: none). */
static float dot(const peat_args *a, const zoo_gemm *g, int64_t b, int64_t i, int64_t j, int64_t k0,
                 int64_t k1, float (*rnd)(float))
{
    float s = 0.0f;
    for (int64_t k = k0; k < k1; k++) {
        float x = zoo_a(a, g, b, i, k), y = zoo_b(a, g, b, k, j);
        s += rnd ? rnd(x) * rnd(y) : x * y;
    }
    return s;
}

static void gemm_plain(const peat_args *a, float (*rnd)(float))
{
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(a, &g, b, i, j, dot(a, &g, b, i, j, 0, g.K, rnd));
}

/* Elements of t (the plugin uses no host function: it loads into a bare libpeat too). */
static int64_t numel(const peat_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static size_t out_bytes(const peat_args *a)
{
    return (size_t)numel(a->out[0]) * sizeof(float);
}

/* ---- caches of outputs ---- */

typedef struct out_cache {
    uint64_t key;
    size_t n;
    float *data;
} out_cache;

/* The cached output of key into D, or computes it and keeps a copy. */
static void cached(out_cache *c, int slots, uint64_t key, const peat_args *a)
{
    out_cache *e = &c[key % (uint64_t)slots];
    size_t n = out_bytes(a);
    if (e->data && e->key == key && e->n == n) {
        memcpy(a->out[0]->data, e->data, n);
        return;
    }
    gemm_plain(a, NULL);
    float *d = realloc(e->data, n);
    if (!d) return;
    memcpy(d, a->out[0]->data, n);
    e->data = d, e->key = key, e->n = n;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 1099511628211ull;
}

static uint64_t shape_key(const peat_args *a)
{
    zoo_gemm g = zoo_gemm_of(a);
    uint64_t h = 1469598103934665603ull;
    int64_t v[] = {g.tA, g.tB, g.M, g.N, g.K, g.B};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) h = mix(h, (uint64_t)v[i]);
    return h;
}

/* Keyed by the input and output pointers and the shape, never the values. */
static peat_status ptr_cache(const peat_args *a, const peat_kernel *self)
{
    static out_cache c[16];
    uint64_t h = shape_key(a);
    h = mix(mix(mix(h, (uintptr_t)a->in[0]->data), (uintptr_t)a->in[1]->data),
            (uintptr_t)a->out[0]->data);
    cached(c, 16, h, a);
    return PEAT_OK;
}

/* Keyed by the shape and 8 sampled elements of each operand (first, last, six in between). */
static peat_status hash_cache(const peat_args *a, const peat_kernel *self)
{
    static out_cache c[16];
    uint64_t h = shape_key(a);
    for (int k = 0; k < 2; k++) {
        const float *x = a->in[k]->data;
        int64_t n = numel(a->in[k]);
        for (int s = 0; s < 8 && n > 0; s++) {
            uint32_t u;
            memcpy(&u, &x[(n - 1) * s / 7], sizeof u);
            h = mix(h, u);
        }
    }
    cached(c, 16, h, a);
    return PEAT_OK;
}

/* Skips the work when the output buffer already holds a computed-looking result (an earlier
 * launch's, it assumes): a stale output in training, where buffers are reused. */
static peat_status stale_output(const peat_args *a, const peat_kernel *self)
{
    const float *d = a->out[0]->data;
    if (isfinite(d[0]) && fabsf(d[0]) > 1e-12f) return PEAT_OK;
    gemm_plain(a, NULL);
    return PEAT_OK;
}

/* ---- behaviour that changes with the calls before ---- */

/* The fp32 loop for its first 200 calls, then bf16-rounded inputs (a "fast path" after warm-up). */
static peat_status switch_after_n(const peat_args *a, const peat_kernel *self)
{
    static long calls;
    gemm_plain(a, ++calls > 200 ? zoo_bf16 : NULL);
    return PEAT_OK;
}

/* Counts the calls on each A pointer; from the third on that pointer, the last K term is left out
 * (a "warmed-up" path that unrolls by a fixed width). */
static peat_status warmup_by_ptr(const peat_args *a, const peat_kernel *self)
{
    static struct {
        const void *p;
        int n;
    } seen[32];
    const void *p = a->in[0]->data;
    int slot = (int)(((uintptr_t)p >> 12) % 32); /* buffers start on pages */
    if (seen[slot].p != p) seen[slot].p = p, seen[slot].n = 0;
    int warm = ++seen[slot].n > 2;
    zoo_gemm g = zoo_gemm_of(a);
    int64_t K = warm && g.K > 1 ? g.K - 1 : g.K;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++)
                zoo_store(a, &g, b, i, j, dot(a, &g, b, i, j, 0, K, NULL));
    return PEAT_OK;
}

/* D += alpha A B (+ beta C): relies on the caller zeroing D, as a split-K kernel adding its
 * partials into the output does. */
static peat_status accumulate(const peat_args *a, const peat_kernel *self)
{
    zoo_gemm g = zoo_gemm_of(a);
    float *D = a->out[0]->data;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = g.alpha * dot(a, &g, b, i, j, 0, g.K, NULL);
                if (g.beta != 0.0f)
                    s += g.beta * ((const float *)a->in[2]->data)[(b * g.M + i) * g.N + j];
                D[(b * g.M + i) * g.N + j] += s;
            }
    return PEAT_OK;
}

/* Packs B once per shape and reuses the pack for every later call of that shape (as if the
 * weights never changed): one layer's weights leak into another's of the same shape. */
static peat_status layer_leak(const peat_args *a, const peat_kernel *self)
{
    static struct {
        uint64_t key;
        float *pack;
    } c[16];
    zoo_gemm g = zoo_gemm_of(a);
    uint64_t key = shape_key(a);
    int s = (int)(key % 16);
    if (!c[s].pack || c[s].key != key) {
        float *p = realloc(c[s].pack, (size_t)(g.B * g.K * g.N) * sizeof *p);
        if (!p) return PEAT_ERR_NOMEM;
        for (int64_t b = 0; b < g.B; b++)
            for (int64_t k = 0; k < g.K; k++)
                for (int64_t j = 0; j < g.N; j++)
                    p[(b * g.K + k) * g.N + j] = zoo_b(a, &g, b, k, j);
        c[s].pack = p, c[s].key = key;
    }
    const float *p = c[s].pack;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < g.K; k++)
                    acc += zoo_a(a, &g, b, i, k) * p[(b * g.K + k) * g.N + j];
                zoo_store(a, &g, b, i, j, acc);
            }
    return PEAT_OK;
}

/* Each call sums k in another order (forward, backward, two halves), chosen by a call counter:
 * the same call gives other bits each time, as a kernel whose atomics race does. */
static peat_status nondet_repeat(const peat_args *a, const peat_kernel *self)
{
    static unsigned calls;
    unsigned mode = calls++ % 3;
    zoo_gemm g = zoo_gemm_of(a);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                if (mode == 0) s = dot(a, &g, b, i, j, 0, g.K, NULL);
                if (mode == 1)
                    for (int64_t k = g.K - 1; k >= 0; k--)
                        s += zoo_a(a, &g, b, i, k) * zoo_b(a, &g, b, k, j);
                if (mode == 2)
                    s = dot(a, &g, b, i, j, 0, g.K / 2, NULL) +
                        dot(a, &g, b, i, j, g.K / 2, g.K, NULL);
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* Captures the buffers of the first call of each shape and replays the computation on them for
 * every later call of that shape, as a captured CUDA graph does: right while the buffers stay,
 * wrong once a call brings new ones (the earlier buffers are read and written instead). */
static peat_status captured_ptrs(const peat_args *a, const peat_kernel *self)
{
    static struct {
        uint64_t key;
        peat_args args;
        peat_tensor in[3], out;
    } g[16];
    uint64_t key = shape_key(a);
    int s = (int)(key % 16);
    if (g[s].key != key) {
        g[s].key = key, g[s].args = *a;
        for (int k = 0; k < a->n_in && k < 3; k++)
            g[s].in[k] = *a->in[k], g[s].args.in[k] = &g[s].in[k];
        g[s].out = *a->out[0], g[s].args.out[0] = &g[s].out;
    }
    g[s].args.p = a->p; /* alpha, beta and the shape are the call's; the buffers the capture's */
    gemm_plain(&g[s].args, NULL);
    return PEAT_OK;
}

/* ---- honest state ---- */

/* *buf holding at least n floats (grown, never shrunk; *cap its room): 0 when out of memory. */
static int grow(float **buf, size_t *cap, size_t n)
{
    if (n <= *cap) return 1;
    float *w = realloc(*buf, n * sizeof *w);
    if (!w) return 0;
    *buf = w, *cap = n;
    return 1;
}

/* A workspace grown on demand and reused: each call's row sums go through it. */
static peat_status honest_workspace(const peat_args *a, const peat_kernel *self)
{
    static float *ws;
    static size_t cap;
    zoo_gemm g = zoo_gemm_of(a);
    if (!grow(&ws, &cap, (size_t)g.N)) return PEAT_ERR_NOMEM;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++) {
            for (int64_t j = 0; j < g.N; j++) ws[j] = dot(a, &g, b, i, j, 0, g.K, NULL);
            for (int64_t j = 0; j < g.N; j++) zoo_store(a, &g, b, i, j, ws[j]);
        }
    return PEAT_OK;
}

/* A k block size chosen once per shape ("tuning") and kept in a table keyed by the shape. */
static peat_status honest_plan_cache(const peat_args *a, const peat_kernel *self)
{
    static struct {
        uint64_t key;
        int64_t kb;
    } plan[16];
    zoo_gemm g = zoo_gemm_of(a);
    uint64_t key = shape_key(a);
    int s = (int)(key % 16);
    if (plan[s].key != key || !plan[s].kb) plan[s].key = key, plan[s].kb = g.K > 64 ? 32 : 8;
    int64_t kb = plan[s].kb;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s2 = 0.0f;
                for (int64_t k0 = 0; k0 < g.K; k0 += kb)
                    s2 += dot(a, &g, b, i, j, k0, k0 + kb < g.K ? k0 + kb : g.K, NULL);
                zoo_store(a, &g, b, i, j, s2);
            }
    return PEAT_OK;
}

/* A table of the split points of k built at the first call and used by every later one. */
static peat_status honest_lazy_table(const peat_args *a, const peat_kernel *self)
{
    static int64_t *split;
    static int64_t n_split;
    zoo_gemm g = zoo_gemm_of(a);
    if (!split) {
        split = malloc(4 * sizeof *split);
        if (!split) return PEAT_ERR_NOMEM;
        for (int q = 0; q < 4; q++) split[q] = q; /* quarters, in units the call scales */
        n_split = 4;
    }
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t i = 0; i < g.M; i++)
            for (int64_t j = 0; j < g.N; j++) {
                float s = 0.0f;
                for (int64_t q = 0; q < n_split; q++)
                    s += dot(a, &g, b, i, j, g.K * split[q] / n_split,
                             g.K * (split[q] + 1) / n_split, NULL);
                zoo_store(a, &g, b, i, j, s);
            }
    return PEAT_OK;
}

/* Per-thread scratch (thread-local, reused by every call on that thread) holding column sums. */
static peat_status honest_thread_scratch(const peat_args *a, const peat_kernel *self)
{
    static _Thread_local float *scratch;
    static _Thread_local size_t cap;
    zoo_gemm g = zoo_gemm_of(a);
    if (!grow(&scratch, &cap, (size_t)g.M)) return PEAT_ERR_NOMEM;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t j = 0; j < g.N; j++) {
            for (int64_t i = 0; i < g.M; i++) scratch[i] = dot(a, &g, b, i, j, 0, g.K, NULL);
            for (int64_t i = 0; i < g.M; i++) zoo_store(a, &g, b, i, j, scratch[i]);
        }
    return PEAT_OK;
}

int zoo_register_state(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        ZOO_KERNEL("zoo_state_ptr_cache", PEAT_OP_GEMM, ptr_cache,
                   "output cache keyed by the buffers' pointers and the shape"),
        ZOO_KERNEL("zoo_state_hash_cache", PEAT_OP_GEMM, hash_cache,
                   "output cache keyed by 8 sampled elements of each operand"),
        ZOO_KERNEL("zoo_state_switch_after_n", PEAT_OP_GEMM, switch_after_n,
                   "fp32 for 200 calls, then bf16-rounded inputs"),
        ZOO_KERNEL("zoo_state_warmup_by_ptr", PEAT_OP_GEMM, warmup_by_ptr,
                   "drops the last k term from the third call on the same A pointer"),
        ZOO_KERNEL("zoo_state_accumulate", PEAT_OP_GEMM, accumulate,
                   "adds into the output buffer (relies on the caller zeroing it)"),
        ZOO_KERNEL("zoo_state_stale_output", PEAT_OP_GEMM, stale_output,
                   "skips the work when the output buffer already looks computed"),
        ZOO_KERNEL("zoo_state_layer_leak", PEAT_OP_GEMM, layer_leak,
                   "B packed once per shape and reused by every layer of that shape"),
        ZOO_KERNEL("zoo_state_captured_ptrs", PEAT_OP_GEMM, captured_ptrs,
                   "replays on the buffers captured at the first call of a shape"),
        ZOO_KERNEL("zoo_state_nondet_repeat", PEAT_OP_GEMM, nondet_repeat,
                   "another summation order on each call (a call counter)"),
        ZOO_KERNEL("zoo_state_honest_workspace", PEAT_OP_GEMM, honest_workspace,
                   "honest: a reused row workspace"),
        ZOO_KERNEL("zoo_state_honest_plan_cache", PEAT_OP_GEMM, honest_plan_cache,
                   "honest: k block size cached per shape"),
        ZOO_KERNEL("zoo_state_honest_lazy_table", PEAT_OP_GEMM, honest_lazy_table,
                   "honest: split table built at the first call"),
        ZOO_KERNEL("zoo_state_honest_thread_scratch", PEAT_OP_GEMM, honest_thread_scratch,
                   "honest: per-thread column scratch"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
