/* test_backend_gpu.c: the CUDA or HIP backend and its GEMMs (golden: vendor BLAS; gemm_new: tiled)
 * against the exact reference; skips (not passes) where the build has no CUDA/HIP backend or the
 * machine no device. The other ops' device kernels share their source and host code with OpenCL,
 * which test_opencl_gpu.c checks op by op on every submission. */
#include <criterion/criterion.h>

#include "gpu_skip.h"

#include "golden_cases.h"
#include "harness/runtime/builtin.h"
#include "peat/backend.h"

#include <math.h>
#include <string.h>

static const char *gpu_backend(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
    const char *names[] = {"cuda", "hip"};
    for (int i = 0; i < 2; i++)
        if (peat_backend_available(names[i])) return names[i];
    return NULL;
}

Test(gpu, backend_buffers_round_trip)
{
    const char *name = gpu_backend();
    if (!name) cr_skip_test("no GPU backend built or no device present");
    peat_backend_t b;
    cr_assert_eq(peat_backend_create(name, 0, &b), PEAT_OK, "%s", peat_error_last());
    peat_device_info info;
    cr_assert_eq(peat_backend_device_info(b, &info), PEAT_OK);
    cr_assert(info.mem_bytes > 0 && info.compute_units > 0);
    /* from the memory clock and bus width: any GPU of the last decade moves over 100 GB/s, and
     * none over 100 TB/s */
    cr_assert(info.mem_bandwidth > 1e11 && info.mem_bandwidth < 1e14, "%s: bandwidth %g B/s",
              info.name, info.mem_bandwidth);
    /* the runtime's peak clock, and lanes from the architecture: 64 or 128 per SM/CU */
    cr_assert(info.clock_mhz > 300 && info.clock_mhz < 5000, "%s: clock %g MHz", info.name,
              info.clock_mhz);
    cr_assert(info.fp32_lanes == 64 || info.fp32_lanes == 128, "%s: %d FP32 lanes", info.name,
              info.fp32_lanes);
    float src[1000], dst[1000];
    for (int i = 0; i < 1000; i++) src[i] = (float)i * 0.5f;
    void *d;
    cr_assert_eq(peat_backend_alloc(b, sizeof src, &d), PEAT_OK);
    cr_assert_eq(peat_backend_copy_h2d(b, d, src, sizeof src), PEAT_OK);
    cr_assert_eq(peat_backend_synchronize(b), PEAT_OK);
    cr_assert_eq(peat_backend_copy_d2h(b, dst, d, sizeof dst), PEAT_OK);
    cr_assert_eq(memcmp(src, dst, sizeof src), 0, "device round trip changed the data");
    peat_backend_free(b, d);
    peat_backend_close(b);
}

Test(gpu, gemm_kernels_within_fp32_bound)
{
    const char *be = gpu_backend();
    if (!be) cr_skip_test("no GPU backend built or no device present");
    const char *ks[] = {"gemm_new", "gemm_golden"};
    const int64_t shapes[][3] = {{1, 1, 1}, {17, 33, 65}, {128, 96, 300}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++) {
            peat_op_params p;
            memset(&p, 0, sizeof p);
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            p.i[0] = t & 1, p.i[1] = t >> 1, p.i[2] = M, p.i[3] = N, p.i[4] = K, p.i[5] = 2;
            p.f[0] = 1.25, p.f[1] = t == 3 ? -0.5 : 0.0;
            peat_tensor *A, *B, *C;
            peat_tensor_alloc3(PEAT_DTYPE_F32, 2, M, K, &A);
            peat_tensor_alloc3(PEAT_DTYPE_F32, 2, K, N, &B);
            peat_tensor_alloc3(PEAT_DTYPE_F32, 2, M, N, &C);
            peat_rng_t *r = peat_rng_new(40 + s * 4 + t);
            peat_rng_fill_gaussian(r, A, 1.0), peat_rng_fill_gaussian(r, B, 1.0),
                peat_rng_fill_gaussian(r, C, 1.0);
            peat_rng_free(r);
            const peat_tensor *in[3] = {A, B, C};
            peat_args ex = peat_args_make(PEAT_OP_GEMM, &p, p.f[1] != 0 ? 3 : 2, in, 0, NULL);
            cr_assert_eq(peat_op_alloc_outputs(&ex, PEAT_DTYPE_F64), PEAT_OK);
            cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_exact"), &ex), PEAT_OK);
            double *mag = malloc(sizeof(double) * (size_t)(2 * M * N));
            cr_assert_eq(peat_golden_magnitude(&ex, 0, ex.out[0], mag), PEAT_OK);
            double u = ldexp(1, -24), kk = (double)(K + 1), gk = kk * u / (1 - kk * u);
            for (int i = 0; i < 2; i++) {
                const peat_kernel *k = peat_registry_find_on(ks[i], be);
                cr_assert_not_null(k, "%s is not registered on %s", ks[i], be);
                peat_args a = peat_args_make(PEAT_OP_GEMM, &p, ex.n_in, in, 0, NULL);
                cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
                cr_assert_eq(peat_kernel_run(k, &a), PEAT_OK, "%s: %s", ks[i], peat_error_last());
                cr_assert(peat_kernel_last_device_seconds() > 0.0, "%s: no event time", ks[i]);
                for (int64_t e = 0; e < 2 * M * N; e++) {
                    double err = fabs(peat_tensor_get(a.out[0], e) - peat_f64(ex.out[0])[e]);
                    cr_assert(err <= gk * mag[e],
                              "%s shape %d trans %d element %lld: error %.3g > bound %.3g", ks[i],
                              s, t, (long long)e, err, gk * mag[e]);
                }
                peat_args_free_outputs(&a);
            }
            free(mag);
            peat_args_free_outputs(&ex);
            peat_tensor_free(A), peat_tensor_free(B), peat_tensor_free(C);
        }
}

/* Every op's device golden and the device candidates on CUDA/HIP, as test_opencl_gpu.c does on
 * OpenCL (the same kernel source, compiled as CUDA here). */
Test(gpu, every_op_golden_and_candidate_within_rounding_bound_of_exact)
{
    const char *be = gpu_backend();
    if (!be) cr_skip_test("no GPU backend built or no device present");
    for (size_t k = 0; k < (size_t)DEVICE_OPS; k++)
        for (int variant = 0; variant < 2; variant++) {
            char name[64];
            snprintf(name, sizeof name, "%s_golden", peat_op_name(all_ops[k]));
            within_bound_on(be, name, all_ops[k], variant, 7000 + 10 * k + (uint64_t)variant);
        }
    const char *cand[] = {"gemm_new", "softmax_online", "layernorm_welford", "attention_flash"};
    const peat_op_kind ops[] = {PEAT_OP_GEMM, PEAT_OP_SOFTMAX, PEAT_OP_LAYERNORM,
                                PEAT_OP_ATTENTION};
    for (int i = 0; i < 4; i++)
        for (int variant = 0; variant < 2; variant++)
            within_bound_on(be, cand[i], ops[i], variant,
                            8100 + 10 * (uint64_t)i + (uint64_t)variant);
}
