/* test_opencl_gpu.c: the device path on OpenCL (PoCL's CPU device in CI): staging and event
 * timing, every op's device golden and every device candidate against the fp64 exact reference,
 * device plugins end to end (honest PASS, planted edge-tile bug FAIL), and a whole campaign with
 * the gpt flow on the device. Skips (not passes) where OpenCL is not built or sees no device. */
#include <criterion/criterion.h>

#include "gpu_skip.h"
#include "core/clock.h"

#include "golden_cases.h"
#include "harness/runtime/builtin.h"
#include "peat/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void need_opencl(void)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
    if (!peat_backend_available("opencl"))
        cr_skip_test("OpenCL backend not built or no OpenCL device present");
}

TestSuite(opencl, .timeout = 600);

Test(opencl, buffers_round_trip_and_kernel_time_from_events)
{
    need_opencl();
    peat_backend_t b;
    cr_assert_eq(peat_backend_get("opencl", &b), PEAT_OK, "%s", peat_error_last());
    peat_device_info info;
    cr_assert_eq(peat_backend_device_info(b, &info), PEAT_OK, "%s", peat_error_last());
    cr_assert(info.mem_bytes > 0 && info.compute_units > 0 && info.name[0], "device info empty");
    float src[1000], dst[1000];
    for (int i = 0; i < 1000; i++) src[i] = (float)i * 0.5f - 7.0f;
    void *d;
    cr_assert_eq(peat_backend_alloc(b, sizeof src, &d), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_backend_copy_d2h(b, dst, d, sizeof dst), PEAT_OK);
    for (int i = 0; i < 1000; i++) cr_assert_eq(dst[i], 0.0f, "new buffer not zeroed at %d", i);
    cr_assert_eq(peat_backend_copy_h2d(b, d, src, sizeof src), PEAT_OK);
    cr_assert_eq(peat_backend_copy_d2h(b, dst, d, sizeof dst), PEAT_OK);
    cr_assert_eq(memcmp(src, dst, sizeof src), 0, "device round trip changed the data");
    peat_backend_free(b, d);

    /* a staged kernel run: outputs come back, and its device time is measured by events and
     * lies within the wall time of the whole call (staging included) */
    const peat_kernel *k = peat_registry_find_on("relu_golden", "opencl");
    cr_assert_not_null(k, "relu_golden on opencl");
    peat_tensor *x = tf(1000, src);
    peat_op_params p = {.i = {1000}};
    peat_args a = peat_args_make(PEAT_OP_RELU, &p, 1, (const peat_tensor *const *)&x, 0, NULL);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    double t0 = peat_clock_now();
    cr_assert_eq(peat_kernel_run(k, &a), PEAT_OK, "%s", peat_error_last());
    double wall = peat_clock_now() - t0;
    double dev = peat_kernel_last_device_seconds();
    cr_assert(dev > 0.0 && dev <= wall, "device time %g s, wall time of the call %g s", dev, wall);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(peat_f32(a.out[0])[i], src[i] > 0 ? src[i] : 0.0f, "relu[%d]", i);
    peat_args_free_outputs(&a);
    peat_tensor_free(x);
}

Test(opencl, every_op_golden_within_rounding_bound_of_exact)
{
    need_opencl();
    for (size_t k = 0; k < (size_t)DEVICE_OPS; k++)
        for (int variant = 0; variant < 2; variant++) {
            char name[64];
            snprintf(name, sizeof name, "%s_golden", peat_op_name(all_ops[k]));
            within_bound_on("opencl", name, all_ops[k], variant, 7000 + 10 * k + (uint64_t)variant);
        }
}

/* The bound is not vacuous on the device either: the device golden's outputs rounded to bf16
 * break it (so a kernel that lost precision on the device would be caught). */
Test(opencl, bf16_rounded_device_outputs_break_the_bound)
{
    need_opencl();
    gcase c = make_case(PEAT_OP_GEMM, 0, 77);
    peat_args g = run_on("opencl", "gemm_golden", &c);
    peat_args e = run_k("gemm_exact", PEAT_OP_GEMM, &c.p, c.n_in, c.in);
    int64_t bad;
    bound_ratio(&c, &g, &e, 0, 1, &bad);
    cr_assert(bad > 0, "bf16-rounded device GEMM stayed within the fp32 bound");
    peat_args_free_outputs(&g);
    peat_args_free_outputs(&e);
    gcase_free(&c);
}

Test(opencl, device_candidates_within_rounding_bound_of_exact)
{
    need_opencl();
    const struct {
        const char *name;
        peat_op_kind op;
    } cand[] = {{"gemm_new", PEAT_OP_GEMM},
                {"softmax_online", PEAT_OP_SOFTMAX},
                {"layernorm_welford", PEAT_OP_LAYERNORM},
                {"attention_flash", PEAT_OP_ATTENTION},
                {"rmsnorm_lanes", PEAT_OP_RMSNORM},
                {"batchnorm_welford", PEAT_OP_BATCHNORM}};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        for (int variant = 0; variant < 2; variant++)
            within_bound_on("opencl", cand[i].name, cand[i].op, variant,
                            8100 + 10 * i + (uint64_t)variant);
}

/* gemm_new's tiles against partial edge tiles: M, N, K not multiples of 16, all transposes. */
Test(opencl, gemm_new_edge_tiles_match_exact)
{
    need_opencl();
    const int64_t shapes[][3] = {{3, 2, 5}, {17, 33, 65}, {40, 9, 16}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++) {
            gcase c = {.op = PEAT_OP_GEMM};
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            int64_t v[6] = {t & 1, t >> 1, M, N, K, 2};
            memcpy(c.p.i, v, sizeof v);
            c.p.f[0] = 1.25, c.p.f[1] = t == 3 ? -0.5 : 0.0;
            peat_rng_t *r = peat_rng_new(40 + (uint64_t)(s * 4 + t));
            c.in[0] = rnd(r, 2 * M * K, 0, 1), c.in[1] = rnd(r, 2 * K * N, 0, 1);
            c.in[2] = rnd(r, 2 * M * N, 0, 1);
            c.n_in = c.p.f[1] != 0.0 ? 3 : 2;
            peat_rng_free(r);
            peat_args g = run_on("opencl", "gemm_new", &c);
            peat_args e = run_k("gemm_exact", PEAT_OP_GEMM, &c.p, c.n_in, c.in);
            int64_t bad;
            double w = bound_ratio(&c, &g, &e, 0, 0, &bad);
            cr_assert_eq(bad, 0, "gemm_new %lldx%lldx%lld trans %d: worst %.3g x bound",
                         (long long)M, (long long)N, (long long)K, t, w);
            peat_args_free_outputs(&g);
            peat_args_free_outputs(&e);
            if (c.n_in == 2) peat_tensor_free(c.in[2]);
            gcase_free(&c);
        }
}

/* ---- whole campaigns through the peat executable ---- */

static char out_buf[1 << 15];

/* Runs `peat run ARGS --out <fresh dir>`; returns the exit status, stdout in out_buf. */
static int peat_run(const char *args)
{
    char dir[] = "/tmp/peat_cl_XXXXXX", cmd[2048], path[300];
    cr_assert_not_null(mkdtemp(dir), "mkdtemp");
    snprintf(path, sizeof path, "%s/stdout", dir);
    snprintf(cmd, sizeof cmd, "%s run %s --out %s/run --quiet >%s 2>&1", PEAT_TEST_BIN, args, dir,
             path);
    int rc = system(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out_buf, 1, sizeof out_buf - 1, f) : 0;
    out_buf[n] = 0;
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0, "cleanup");
    cr_assert(WIFEXITED(rc), "peat run %s did not exit normally", args);
    return WEXITSTATUS(rc);
}

/* width 20, batch 12: GEMMs whose M and N are not multiples of the plugin's 8x8 tiles */
Test(opencl, example_device_plugin_passes_and_edge_tile_bug_fails)
{
    need_opencl();
    int rc = peat_run("--plugin " PEAT_TEST_BUILD_DIR "/libpeat_example_gemm_opencl_ok.so "
                      "--kernel example_gemm_cl --backend opencl --flow mlp --iters 3 --calls 6 "
                      "--width 20 --batch 12");
    cr_assert_eq(rc, 0, "honest device plugin: exit %d\n%s", rc, out_buf);
    cr_assert(strstr(out_buf, "verdict: PASS") || strstr(out_buf, "PASS"), "%s", out_buf);
    rc = peat_run(
        "--plugin " PEAT_TEST_BUILD_DIR "/libpeat_example_gemm_opencl_bug.so "
        "--kernel example_gemm_cl_edgebug --backend opencl --flow mlp --iters 3 --width 20 "
        "--batch 12 --calls 6");
    cr_assert_eq(rc, 1, "edge-tile bug: exit %d (1 = FAIL expected)\n%s", rc, out_buf);
    cr_assert(strstr(out_buf, "FAIL"), "%s", out_buf);
}

Test(opencl, whole_gpt_campaign_on_the_device)
{
    need_opencl();
    int rc = peat_run("--kernel attention_flash --backend opencl --flow gpt --iters 2 --calls 6");
    cr_assert_eq(rc, 0, "gpt flow on opencl: exit %d\n%s", rc, out_buf);
    cr_assert(strstr(out_buf, "attention_golden"), "golden row missing:\n%s", out_buf);
}

Test(opencl, backend_without_device_or_build_is_one_line_exit_2)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
    const char *absent = !peat_backend_available("cuda") ? "cuda" : "hip";
    if (peat_backend_available(absent)) cr_skip_test("both CUDA and HIP devices are present");
    char args[128];
    snprintf(args, sizeof args, "--kernel gemm_new --backend %s --iters 1 --calls 1", absent);
    int rc = peat_run(args);
    cr_assert_eq(rc, 2, "exit %d for --backend %s\n%s", rc, absent, out_buf);
    int lines = 0;
    for (const char *s = out_buf; *s; s++) lines += *s == '\n';
    cr_assert_eq(lines, 1, "expected one line, got:\n%s", out_buf);
}
