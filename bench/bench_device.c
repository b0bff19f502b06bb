/* bench_device.c: what a device call costs, side by side in one run: the CPU golden, the device
 * golden and candidate timed by the backend's events (kernel alone), and the whole staged call
 * (copies in and out included), per op, on each device backend present. Prints a table. */
#include "harness/runtime/builtin.h"
#include "core/clock.h"
#include "peat/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { REPS = 5 };

static double now(void)
{
    return peat_clock_now();
}

typedef struct {
    const char *label;
    peat_op_kind op;
    const char *candidate;
    int64_t i[6];
    double f[2];
    int n_in;
    int64_t in_numel[3];
} bench_case;

static const bench_case cases[] = {
    {"gemm 256x256x256",
     PEAT_OP_GEMM,
     "gemm_new",
     {0, 0, 256, 256, 256, 1},
     {1.0, 0.0},
     2,
     {65536, 65536}},
    {"softmax 512x1024", PEAT_OP_SOFTMAX, "softmax_online", {512, 1024}, {0}, 1, {524288}},
    {"layernorm 512x1024",
     PEAT_OP_LAYERNORM,
     "layernorm_welford",
     {512, 1024},
     {1e-5},
     3,
     {524288, 1024, 1024}},
    {"attention 2x4x128x32",
     PEAT_OP_ATTENTION,
     "attention_flash",
     {2, 4, 128, 32, 1},
     {0.1767767},
     3,
     {32768, 32768, 32768}},
};

/* Best of REPS: wall seconds of peat_kernel_run, and the device (event) seconds of that call. */
static peat_status time_kernel(const peat_kernel *k, const peat_args *tmpl, double *wall,
                               double *dev)
{
    *wall = *dev = 1e30;
    for (int r = 0; r < REPS; r++) {
        peat_args a = *tmpl;
        PEAT_TRY(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32));
        double t0 = now();
        peat_status st = peat_kernel_run(k, &a);
        double t = now() - t0;
        peat_args_free_outputs(&a);
        PEAT_TRY(st);
        if (t < *wall) *wall = t;
        double d = peat_kernel_last_device_seconds();
        if (d < *dev) *dev = d;
    }
    return PEAT_OK;
}

static void bench_backend(const char *be)
{
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bench_case *bc = &cases[c];
        peat_op_params p;
        memset(&p, 0, sizeof p);
        memcpy(p.i, bc->i, sizeof bc->i);
        p.f[0] = bc->f[0], p.f[1] = bc->f[1];
        peat_tensor *in[3] = {NULL, NULL, NULL};
        peat_rng_t *r = peat_rng_new(11 + c);
        for (int j = 0; j < bc->n_in; j++) {
            peat_tensor_alloc1(PEAT_DTYPE_F32, bc->in_numel[j], &in[j]);
            peat_rng_fill_gaussian(r, in[j], 1.0);
        }
        peat_rng_free(r);
        peat_args a = peat_args_make(bc->op, &p, bc->n_in, (const peat_tensor *const *)in, 0, NULL);
        char gname[64];
        snprintf(gname, sizeof gname, "%s_golden", peat_op_name(bc->op));
        double cpu_w, cpu_d, gw, gd, cw, cd;
        peat_status st = time_kernel(peat_registry_find_on(gname, "cpu"), &a, &cpu_w, &cpu_d);
        if (st == PEAT_OK) st = time_kernel(peat_registry_find_on(gname, be), &a, &gw, &gd);
        if (st == PEAT_OK) st = time_kernel(peat_registry_find_on(bc->candidate, be), &a, &cw, &cd);
        if (st != PEAT_OK)
            printf("%-8s %-22s error: %s\n", be, bc->label, peat_error_last());
        else
            printf("%-8s %-22s %10.3f %10.3f %10.3f %10.3f %-18s %10.3f %9.2f\n", be, bc->label,
                   1e3 * cpu_w, 1e3 * gd, 1e3 * gw, 1e3 * (gw - gd), bc->candidate, 1e3 * cd,
                   gd / cd);
        for (int j = 0; j < bc->n_in; j++) peat_tensor_free(in[j]);
    }
}

int main(void)
{
    if (peat_runtime_builtin_init() != PEAT_OK) {
        fprintf(stderr, "bench_device: %s\n", peat_error_last());
        return 2;
    }
    printf("best of %d; ms; device times from the backend's events (kernel alone), staged = whole\n"
           "peat_kernel_run (copies in and out included), staging = staged - device golden\n\n",
           REPS);
    printf("%-8s %-22s %10s %10s %10s %10s %-18s %10s %9s\n", "backend", "call", "cpu gold",
           "dev gold", "staged", "staging", "candidate", "dev cand", "gold/cand");
    const char *bes[] = {"opencl", "cuda", "hip"};
    int any = 0;
    for (int b = 0; b < 3; b++)
        if (peat_backend_available(bes[b])) bench_backend(bes[b]), any = 1;
    if (!any) printf("(no device backend with a device in this build)\n");
    return 0;
}
