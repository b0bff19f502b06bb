/* test_plugin_threads.c: kernels and threads: a kernel that is not reentrant (the default) is
 * never run twice at once, whichever threads call it (the runtime stage's parallel runs
 * included), and a plugin built for the previous ABI loads with no flag read past its
 * descriptor (docs/plugin-abi.md). */
#include <criterion/criterion.h>

#include "harness/runtime/builtin.h"
#include "harness/runtime/runtime.h"
#include "peat/backend.h"
#include "peat/peat.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#define SCRATCH_LIB PEAT_TEST_PLUGIN_DIR "/libplugin_static_scratch.so"

static const peat_kernel *scratch_kernel(long (**overlaps)(void), long (**calls)(void))
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    if (!peat_registry_find("test_gemm_static_scratch"))
        cr_assert_eq(peat_plugin_load(SCRATCH_LIB, NULL), PEAT_OK, "%s", peat_error_last());
    void *h = dlopen(SCRATCH_LIB, RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(h, "the plugin is loaded");
    *(void **)overlaps = dlsym(h, "scratch_gemm_overlaps");
    *(void **)calls = dlsym(h, "scratch_gemm_calls");
    cr_assert(*overlaps && *calls);
    const peat_kernel *k = peat_registry_find("test_gemm_static_scratch");
    cr_assert_not_null(k);
    cr_assert_eq(k->flags & PEAT_KERNEL_REENTRANT, 0u, "declared nothing: not reentrant");
    return k;
}

enum { THREADS = 4, CALLS = 60, M = 24, N = 40, K = 96 };

typedef struct job {
    const peat_kernel *k;
    peat_args a;
    float want[M * N];
    int wrong; /* calls whose output differed from the single-threaded result */
} job;

static void *hammer(void *arg)
{
    job *j = arg;
    for (int c = 0; c < CALLS; c++) {
        if (peat_kernel_run(j->k, &j->a) != PEAT_OK)
            j->wrong++;
        else if (memcmp(j->a.out[0]->data, j->want, sizeof j->want))
            j->wrong++;
    }
    return NULL;
}

/* Four threads call the kernel 60 times each on their own inputs: every output equals the one
 * the kernel gave alone, no call started while another was inside, and its plain static counter
 * counted every call. */
Test(plugin_threads, a_kernel_that_is_not_reentrant_is_serialized)
{
    long (*overlaps)(void), (*calls)(void);
    const peat_kernel *k = scratch_kernel(&overlaps, &calls);
    long calls0 = calls(), over0 = overlaps();
    static job jobs[THREADS];
    peat_tensor *t[THREADS][3];
    peat_rng_t *r = peat_rng_new(7);
    for (int i = 0; i < THREADS; i++) {
        job *j = &jobs[i];
        memset(j, 0, sizeof *j);
        j->k = k;
        cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, K, &t[i][0]), PEAT_OK);
        cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, K, N, &t[i][1]), PEAT_OK);
        cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &t[i][2]), PEAT_OK);
        for (int e = 0; e < M * K; e++) peat_f32(t[i][0])[e] = (float)peat_rng_gaussian(r, 1);
        for (int e = 0; e < K * N; e++) peat_f32(t[i][1])[e] = (float)peat_rng_gaussian(r, 1);
        j->a.op = PEAT_OP_GEMM;
        j->a.p.i[2] = M, j->a.p.i[3] = N, j->a.p.i[4] = K, j->a.p.i[5] = 1;
        j->a.p.f[0] = 1.0;
        j->a.n_in = 2, j->a.n_out = 1;
        j->a.in[0] = t[i][0], j->a.in[1] = t[i][1], j->a.out[0] = t[i][2];
        cr_assert_eq(peat_kernel_run(k, &j->a), PEAT_OK, "%s", peat_error_last());
        memcpy(j->want, t[i][2]->data, sizeof j->want);
    }
    peat_rng_free(r);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, hammer, &jobs[i]);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(jobs[i].wrong, 0, "thread %d: %d of %d calls differed", i, jobs[i].wrong,
                     CALLS);
        for (int x = 0; x < 3; x++) peat_tensor_free(t[i][x]);
    }
    cr_assert_eq(overlaps() - over0, 0, "%ld calls ran beside another", overlaps() - over0);
    cr_assert_eq(calls() - calls0, THREADS * (CALLS + 1), "static counter %ld, calls made %d",
                 calls() - calls0, THREADS * (CALLS + 1));
}

static void train(const peat_kernel *k, peat_runtime_result *r)
{
    peat_runtime_opts o;
    memset(&o, 0, sizeof o);
    o.flow = "mlp";
    o.cfg.seed = 1;
    o.cfg.weight_decay = -1;
    o.iters = 12;
    o.op = PEAT_OP_GEMM;
    o.candidate = k;
    /* three runs with the kernel in the loop, side by side */
    cr_assert_eq(peat_freq_schedule_parse("1,1/2,1/3", &o.freqs), PEAT_OK);
    o.threads = 6;
    cr_assert_eq(peat_runtime_run_all(&o, r), PEAT_OK, "%s", peat_error_last());
}

/* The runtime stage trains its runs on several threads: with the non-reentrant kernel in three
 * of them, the curves are the same twice over and no call overlapped another. */
Test(plugin_threads, runtime_runs_with_a_non_reentrant_kernel_are_deterministic)
{
    long (*overlaps)(void), (*calls)(void);
    const peat_kernel *k = scratch_kernel(&overlaps, &calls);
    long over0 = overlaps(), calls0 = calls();
    peat_runtime_result a, b;
    train(k, &a);
    train(k, &b);
    int64_t swapped = 0;
    for (int j = 0; j < a.n_faulty; j++) {
        swapped += a.faulty[j].swapped + b.faulty[j].swapped;
        cr_assert_gt(a.faulty[j].swapped, 0);
        for (int64_t t = 0; t < a.n; t++)
            cr_assert(a.faulty[j].loss[t] == b.faulty[j].loss[t] &&
                          a.faulty[j].wdist[t] == b.faulty[j].wdist[t],
                      "run %s, iteration %lld: loss %.9g then %.9g", a.faulty[j].label,
                      (long long)t, a.faulty[j].loss[t], b.faulty[j].loss[t]);
    }
    cr_assert_eq(overlaps() - over0, 0, "%ld calls ran beside another", overlaps() - over0);
    cr_assert_eq(calls() - calls0, swapped, "static counter %ld, calls swapped %lld",
                 calls() - calls0, (long long)swapped);
    peat_runtime_result_free(&a);
    peat_runtime_result_free(&b);
}

/* A plugin built for ABI 2 passes a shorter descriptor: the host copies only that much, so the
 * kernel is not reentrant whatever follows it in the plugin's memory. */
Test(plugin_threads, an_abi2_plugin_loads_and_reads_as_not_reentrant)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    int n = 0;
    cr_assert_eq(peat_plugin_load(PEAT_TEST_PLUGIN_DIR "/libplugin_abi2.so", &n), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(n, 1);
    const peat_kernel *k = peat_registry_find("test_abi2_gemm");
    cr_assert_not_null(k);
    cr_assert_eq(k->flags, 0u, "flags %u read past an ABI 2 descriptor", k->flags);
}

/* The built-in kernels keep no state: declared reentrant, they run side by side unlocked. */
Test(plugin_threads, builtin_kernels_are_declared_reentrant)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    const char *names[] = {"gemm_golden", "gemm_new",       "gemm_exact",
                           "conv_im2col", "softmax_online", "adamw_fused"};
    for (int i = 0; i < 6; i++) {
        const peat_kernel *k = peat_registry_find(names[i]);
        cr_assert_not_null(k, "%s", names[i]);
        cr_assert(k->flags & PEAT_KERNEL_REENTRANT, "%s not declared reentrant", names[i]);
    }
}

/* A plugin built for ABI 3 still loads (docs/plugin-abi.md, "Older plugins"): its GEMM reads the
 * tensors through ABI 3's layout and computes the bits of the same loop here; on OpenCL it builds
 * a program through ABI 3's peat_device.cl_program, which the host still fills. */
Test(plugin_threads, an_abi3_plugin_loads_and_reads_the_abi3_layout)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    int n = 0;
    cr_assert_eq(peat_plugin_load(PEAT_TEST_PLUGIN_DIR "/libplugin_abi3.so", &n), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(n, 2, "%d kernels registered by the ABI 3 plugin, expected 2", n);
    const peat_kernel *k = peat_registry_find_on("test_abi3_gemm", "cpu");
    cr_assert_not_null(k);
    enum { M = 3, N = 4, K = 5 };
    peat_tensor *A, *B, *D;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, K, &A), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, K, N, &B), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, N, &D), PEAT_OK);
    for (int i = 0; i < M * K; i++) peat_f32(A)[i] = 0.25f * (float)(i % 7) - 0.5f;
    for (int i = 0; i < K * N; i++) peat_f32(B)[i] = 0.125f * (float)(i % 5) + 0.1f;
    peat_args a = {.op = PEAT_OP_GEMM, .n_in = 2, .n_out = 1, .in = {A, B}, .out = {D}};
    a.p.i[2] = M, a.p.i[3] = N, a.p.i[4] = K, a.p.i[5] = 1, a.p.f[0] = 1.5;
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_OK, "%s", peat_error_last());
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int q = 0; q < K; q++) s += peat_f32(A)[i * K + q] * peat_f32(B)[q * N + j];
            cr_assert_eq(peat_f32(D)[i * N + j], 1.5f * s, "D[%d,%d] = %g, the loop gives %g", i, j,
                         peat_f32(D)[i * N + j], 1.5f * s);
        }
    const peat_kernel *kc = peat_registry_find_on("test_abi3_cl_build", "opencl");
    cr_assert_not_null(kc);
    if (peat_backend_available("opencl"))
        cr_assert_eq(peat_kernel_run(kc, &a), PEAT_OK, "ABI 3 cl_program: %s", peat_error_last());
    peat_tensor_free(A), peat_tensor_free(B), peat_tensor_free(D);
}
