/* bench_isolate.c: what isolation adds to one candidate call, a fork per call (PEAT_ISOLATE=fork)
 * against the persistent worker, side by side in one run, for small and large tensors and with
 * the process small or holding a training run's memory (a fork's cost grows with it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/isolate/isolate.h"
#include "core/clock.h"
#include "harness/isolate/isolate_impl.h"

static double now(void)
{
    return peat_clock_now();
}

/* Row sums: a kernel whose own cost is small next to isolation's. */
static peat_status k_sum(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    int64_t R = a->p.i[0], C = a->p.i[1];
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int64_t r = 0; r < R; r++) {
        float s = 0.0f;
        for (int64_t c = 0; c < C; c++) s += x[r * C + c];
        y[r] = s;
    }
    return PEAT_OK;
}

static const peat_kernel K = {.name = "bench_sum",
                              .op = PEAT_OP_REDUCE,
                              .role = PEAT_ROLE_CANDIDATE,
                              .backend = "cpu",
                              .fn = k_sum};

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median seconds of one call over n (after one warm-up; the median, as the machine may be
 * shared): mode 0 the kernel alone, 1 the in-process guarded call (input copies and checks, no
 * child), 2 a fork per call, 3 the worker. */
static double per_call(peat_args *a, int mode, int n)
{
    if (mode == 2)
        setenv("PEAT_ISOLATE", "fork", 1);
    else
        unsetenv("PEAT_ISOLATE");
    double t[400];
    for (int i = 0; i <= n; i++) {
        peat_call_outcome out = PEAT_CALL_DONE;
        char why[256];
        double t0 = now();
        peat_status st = mode == 0 ? peat_kernel_run(&K, a)
                                   : peat_isolate_call(&K, a, mode >= 2, 30.0, &out, why, 256);
        if (i > 0) t[i - 1] = now() - t0;
        if (st != PEAT_OK || out != PEAT_CALL_DONE) {
            fprintf(stderr, "bench_isolate: call failed: %s\n", st ? peat_error_last() : why);
            exit(1);
        }
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

static void row(const char *rss, int64_t R, int64_t C)
{
    int64_t xs[2] = {R, C}, ys[1] = {R};
    peat_tensor *x, *tmpl;
    if (peat_tensor_alloc(PEAT_DTYPE_F32, 2, xs, &x) != PEAT_OK ||
        peat_tensor_alloc(PEAT_DTYPE_F32, 1, ys, &tmpl) != PEAT_OK)
        exit(1);
    float *xd = x->data;
    for (int64_t i = 0; i < R * C; i++) xd[i] = (float)(i % 7);
    peat_args a;
    memset(&a, 0, sizeof a);
    a.op = PEAT_OP_REDUCE, a.p.i[0] = R, a.p.i[1] = C, a.n_in = 1, a.in[0] = x;
    if (peat_isolate_outputs_alloc(&a, &tmpl, 1) != PEAT_OK) exit(1);
    int n = R * C > 100000 ? 50 : 200;
    double t[4];
    for (int m = 0; m < 4; m++) t[m] = per_call(&a, m, m == 2 ? n / 4 : n);
    char shape[32];
    snprintf(shape, sizeof shape, "%lldx%lld", (long long)R, (long long)C);
    printf("| %-8s | %-10s | %9.1f | %9.1f | %12.1f | %12.1f | %8.1fx |\n", rss, shape, 1e6 * t[0],
           1e6 * (t[1] - t[0]), 1e6 * (t[2] - t[0]), 1e6 * (t[3] - t[0]),
           (t[2] - t[0]) / (t[3] - t[0]));
    peat_isolate_outputs_free(&a);
    peat_isolate_workers_close();
    peat_tensor_free(x);
    peat_tensor_free(tmpl);
}

int main(void)
{
    printf("isolation overhead per call (us; each column minus the kernel alone; median of 50-200 "
           "calls)\n\n");
    printf("| RSS      | X          | kernel us | in-process | fork per call | worker       | "
           "fork/worker |\n");
    printf("|----------|------------|-----------|------------|---------------|--------------|----"
           "-------|\n");
    static const int64_t shapes[][2] = {{16, 64}, {256, 256}, {1024, 1024}};
    for (int big = 0; big < 2; big++) {
        /* a training run's memory, touched (a fork copies its page tables) */
        size_t hold = big ? (size_t)256 << 20 : 0;
        char *mem = hold ? malloc(hold) : NULL;
        if (mem) memset(mem, 1, hold);
        for (int s = 0; s < 3; s++) row(big ? "+256 MiB" : "small", shapes[s][0], shapes[s][1]);
        free(mem);
    }
    printf("\n(in-process: input copies and write checks without a child, as --no-isolate; the "
           "worker's\n column includes the copies into and out of its shared memory)\n");
    return 0;
}
