/* bench_flows.c: training speed of each flow's default config, and time per op kind (table). */
#include "models/models.h"
#include "core/clock.h"
#include "harness/runtime/builtin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    return peat_clock_now();
}

typedef struct op_time {
    double t0;
    double attn; /* the attention proper: fused ATTENTION(+BWD), or the unfused chain */
    double sec[PEAT_OP_COUNT];
    int64_t calls[PEAT_OP_COUNT];
} op_time;

/* The attention's own calls by layer name: "h<l>.attn" (fused) and "h<l>.attn.qk", ".mask",
 * ".softmax", ".pv" (unfused), not the QKV and output projections around it. */
static int attn_layer(const char *layer)
{
    const char *p = layer ? strstr(layer, ".attn") : NULL;
    if (!p) return 0;
    p += 5;
    return !*p || !strcmp(p, ".qk") || !strcmp(p, ".mask") || !strcmp(p, ".softmax") ||
           !strcmp(p, ".pv");
}

/* Times every call: calls do not nest, so one start time is enough. */
static peat_status time_hook(void *user, const peat_kernel *k, const peat_args *a,
                             const peat_call_info *info, int after)
{
    op_time *t = user;
    if (!after) {
        t->t0 = now();
    } else {
        double dt = now() - t->t0;
        t->sec[a->op] += dt;
        t->calls[a->op]++;
        if (attn_layer(info->layer)) t->attn += dt;
    }
    return PEAT_OK;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_flows: %s: %s (%s)\n", what, peat_error_last(), peat_error_where());
    return 1;
}

/* Runs warm-up steps, then n timed steps; with t != NULL the timing hook is attached. */
static int run_flow(const char *name, int n, op_time *t, double *sec, peat_flow_metrics *m)
{
    peat_exec_t *ex;
    peat_flow_t *f;
    peat_flow_config c;
    memset(&c, 0, sizeof c);
    c.seed = 1;
    c.weight_decay = -1;
    if (peat_exec_alloc(name, c.seed, &ex) != PEAT_OK) return fail("exec");
    if (peat_models_flow_alloc(name, &c, ex, &f) != PEAT_OK) {
        peat_exec_free(ex);
        return fail(name);
    }
    int rc = 0;
    for (int s = 0; s < 2 && !rc; s++) rc = peat_models_flow_step(f, m) != PEAT_OK;
    if (!rc && t) rc = peat_exec_add_hook(ex, time_hook, t) != PEAT_OK;
    double t0 = now();
    for (int s = 0; s < n && !rc; s++) rc = peat_models_flow_step(f, m) != PEAT_OK;
    *sec = now() - t0;
    if (rc) fail(name);
    peat_models_flow_free(f);
    peat_exec_free(ex);
    return rc;
}

int main(int argc, char **argv)
{
    /* steps timed per flow; the default keeps the whole table under ~10 s in Release */
    int n = argc > 1 ? atoi(argv[1]) : 30;
    if (n < 1) n = 1;
    if (peat_runtime_builtin_init() != PEAT_OK) return fail("registry");
#ifdef NDEBUG
    const char *build = "Release";
#else
    const char *build = "Debug (no NDEBUG)";
#endif
    printf("# bench_flows: default configs, golden CPU kernels, %d timed steps after 2 warm-up; "
           "build %s\n\n",
           n, build);
    printf("| flow | steps/s | ms/step | ms/step with timing hook | attention ms/step | last loss "
           "|\n");
    printf("|------|--------:|--------:|-------------------------:|------------------:|----------:|"
           "\n");
    const char *const *names = peat_models_flow_names();
    op_time tt[8];
    memset(tt, 0, sizeof tt);
    double hooked[8] = {0};
    for (int k = 0; names[k] && k < 8; k++) {
        double sec;
        peat_flow_metrics m;
        if (run_flow(names[k], n, NULL, &sec, &m)) return 1;
        if (run_flow(names[k], n, &tt[k], &hooked[k], &m)) return 1;
        printf("| %s | %.1f | %.2f | %.2f | %.3f | %.4f |\n", names[k], n / sec, 1e3 * sec / n,
               1e3 * hooked[k] / n, 1e3 * tt[k].attn / n, m.loss);
    }
    for (int k = 0; names[k] && k < 8; k++) {
        printf("\n## %s: time per op kind (per training step)\n\n", names[k]);
        printf("| op | calls/step | ms/step | %% of step |\n");
        printf("|----|-----------:|--------:|----------:|\n");
        double total = 0;
        for (int op = 0; op < PEAT_OP_COUNT; op++) total += tt[k].sec[op];
        for (int op = 0; op < PEAT_OP_COUNT; op++) {
            if (!tt[k].calls[op]) continue;
            printf("| %s | %.1f | %.3f | %.1f |\n", peat_op_name((peat_op_kind)op),
                   (double)tt[k].calls[op] / n, 1e3 * tt[k].sec[op] / n,
                   100.0 * tt[k].sec[op] / hooked[k]);
        }
        printf("| (glue: data, copies, hook) | | %.3f | %.1f |\n", 1e3 * (hooked[k] - total) / n,
               100.0 * (hooked[k] - total) / hooked[k]);
    }
    return 0;
}
