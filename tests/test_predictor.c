/* test_predictor.c: the latency model: tile and wave arithmetic on hand-computed cases, GEMM
 * views against the op table's flops, interpolation, cache keys and invalidation, clock readers
 * without their sources, and the budget planner on synthetic cost tables. No timing asserted. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/runtime/builtin.h"
#include "harness/latency/latency.h"
#include "predictor/predictor.h"
#include "store/store_latency.h"

static peat_pred_device gpu_dev(int units)
{
    peat_pred_device d;
    peat_predictor_device_gpu(&d, "cuda", "test gpu", units, 1500, 3e12, 32, 64);
    return d;
}

Test(device, gpu_peak_is_an_fma_per_lane_per_clock)
{
    peat_pred_device d;
    /* an H100/H200 SM: 128 FP32 lanes at 1980 MHz */
    peat_predictor_device_gpu(&d, "cuda", "sm90", 132, 1980, 4.8e12, 32, 128);
    cr_assert_float_eq(d.peak_flops, 2.0 * 128 * 1980e6, 1.0, "got %g", d.peak_flops);
    cr_assert_eq(d.units, 132);
    cr_assert(d.edge_tiles_padded, "a GPU block keeps its whole tile busy");
    /* lanes unknown: 64; clock unknown: no peak */
    peat_predictor_device_gpu(&d, "opencl", "dev", 8, 1000, 0, 32, 0);
    cr_assert_float_eq(d.peak_flops, 2.0 * 64 * 1000e6, 1.0);
    peat_predictor_device_gpu(&d, "cuda", "dev", 8, 0, 1e12, 32, 128);
    cr_assert_float_eq(d.peak_flops, 0.0, 1e-12);
}

static peat_pred_device cpu_dev(int units)
{
    peat_pred_device d;
    memset(&d, 0, sizeof d);
    snprintf(d.backend, sizeof d.backend, "cpu");
    snprintf(d.name, sizeof d.name, "test cpu");
    d.units = units, d.simd_width = 8, d.peak_flops = 1e10, d.bandwidth = 1e10;
    return d;
}

/* ---- tiles and waves ---- */

Test(waves, gpu_tiles_quantised_to_whole_tiles)
{
    peat_pred_device d = gpu_dev(132);
    peat_kernel_config cfg = {.tile_m = 128, .tile_n = 128, .tile_k = 32, .threads = 256};
    peat_pred_gemm_view v = {.batch = 1, .m = 1000, .n = 1000, .k = 64, .scale = 1};
    peat_pred_waves w;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_OK);
    /* ceil(1000/128) = 8 per side: 64 tiles, one wave on 132 SMs */
    cr_assert_eq(w.tiles, 64);
    cr_assert_eq(w.units, 132);
    cr_assert_eq(w.waves, 1);
    cr_assert_float_eq(w.tile_flops, 2.0 * 128 * 128 * 64, 1e-6);
    cr_assert_float_eq(w.work, 2.0 * 128 * 128 * 64, 1e-6, "a partial tile costs a whole one");
    /* 2048: 16 x 16 = 256 tiles over 132 SMs = 2 waves */
    v.m = v.n = 2048;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_OK);
    cr_assert_eq(w.tiles, 256);
    cr_assert_eq(w.waves, 2);
    cr_assert_float_eq(w.work, 2 * 2.0 * 128 * 128 * 64, 1e-6);
    /* 2 resident blocks per SM: 264 units, one wave */
    cfg.blocks_per_sm = 2;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_OK);
    cr_assert_eq(w.units, 264);
    cr_assert_eq(w.waves, 1);
}

Test(waves, cpu_single_thread_trims_edges_rounds_vectors)
{
    peat_pred_device d = cpu_dev(4);
    peat_kernel_config cfg = {
        .tile_m = 64, .tile_n = 256, .tile_k = 128, .threads = 1, .vec_width = 8};
    peat_pred_gemm_view v = {.batch = 1, .m = 65, .n = 30, .k = 10, .scale = 1};
    peat_pred_waves w;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_OK);
    /* N 30 -> 32 (vectors of 8); tiles ceil(65/64) x ceil(32/256) = 2; one thread: 2 waves */
    cr_assert_eq(w.tiles, 2);
    cr_assert_eq(w.units, 1);
    cr_assert_eq(w.waves, 2);
    cr_assert_float_eq(w.work, 2.0 * 65 * 32 * 10, 1e-6, "work %g", w.work);
}

Test(waves, cpu_threads_share_tiles)
{
    peat_pred_device d = cpu_dev(4);
    peat_kernel_config cfg = {.tile_m = 50, .tile_n = 50, .threads = 2, .vec_width = 1};
    peat_pred_gemm_view v = {.batch = 1, .m = 100, .n = 100, .k = 10, .scale = 1};
    peat_pred_waves w;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_OK);
    /* 4 tiles over 2 threads: 2 waves of one average tile each */
    cr_assert_eq(w.tiles, 4);
    cr_assert_eq(w.units, 2);
    cr_assert_eq(w.waves, 2);
    cr_assert_float_eq(w.work, 2 * (2.0 * 100 * 100 * 10 / 4), 1e-6);
    /* more threads than cores: capped at the cores */
    cfg.threads = 16;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_OK);
    cr_assert_eq(w.units, 4);
    cr_assert_eq(w.waves, 1);
}

Test(waves, batch_multiplies_tiles_and_empty_view_refused)
{
    peat_pred_device d = gpu_dev(10);
    peat_kernel_config cfg = {.tile_m = 16, .tile_n = 16};
    peat_pred_gemm_view v = {.batch = 3, .m = 17, .n = 16, .k = 4, .scale = 1};
    peat_pred_waves w;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_OK);
    cr_assert_eq(w.tiles, 3 * 2 * 1);
    cr_assert_eq(w.waves, 1);
    v.k = 0;
    cr_assert_eq(peat_predictor_waves(&cfg, &d, &v, &w), PEAT_ERR_INVAL);
}

/* The GEMM view of each compute op accounts for exactly the op table's flops. */
Test(views, flops_match_the_op_table)
{
    peat_op_params p;
    peat_pred_gemm_view v;
    static const peat_op_kind ops[] = {PEAT_OP_GEMM, PEAT_OP_CONV2D, PEAT_OP_CONV2D_BWD_DATA,
                                       PEAT_OP_CONV2D_BWD_FILTER, PEAT_OP_ATTENTION};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int n = 2; n <= 96; n += 13)
            for (int odd = 0; odd < 2; odd++) {
                peat_predictor_shape(ops[o], n, odd, &p);
                cr_assert(peat_predictor_gemm_view(ops[o], &p, &v), "%s has a view",
                          peat_op_name(ops[o]));
                double f = 2.0 * v.batch * v.m * v.n * v.k * v.scale;
                double want = peat_op_info_get(ops[o])->flops(&p);
                cr_assert_float_eq(f, want, 1e-9 * want, "%s n=%d: view %g, table %g",
                                   peat_op_name(ops[o]), n, f, want);
            }
    peat_predictor_shape(PEAT_OP_SOFTMAX, 8, 0, &p);
    cr_assert_not(peat_predictor_gemm_view(PEAT_OP_SOFTMAX, &p, &v), "softmax has no tiles");
}

Test(views, conv_view_by_hand)
{
    peat_op_params p;
    memset(&p, 0, sizeof p);
    int64_t c[] = {2, 3, 5, 5, 4, 3, 3, 1, 1}; /* N C H W O KH KW stride pad: 5x5 out */
    memcpy(p.i, c, sizeof c);
    peat_pred_gemm_view v;
    cr_assert(peat_predictor_gemm_view(PEAT_OP_CONV2D, &p, &v));
    cr_assert(v.m == 4 && v.n == 50 && v.k == 27, "fwd %lld x %lld x %lld", (long long)v.m,
              (long long)v.n, (long long)v.k);
    cr_assert(peat_predictor_gemm_view(PEAT_OP_CONV2D_BWD_DATA, &p, &v));
    cr_assert(v.m == 27 && v.n == 50 && v.k == 4);
    cr_assert(peat_predictor_gemm_view(PEAT_OP_CONV2D_BWD_FILTER, &p, &v));
    cr_assert(v.m == 4 && v.n == 27 && v.k == 50);
}

Test(views, call_bytes_by_hand)
{
    peat_kernel k = {.name = "t", .op = PEAT_OP_GEMM, .out_dtype = PEAT_DTYPE_F32};
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[2] = 2, p.i[3] = 3, p.i[4] = 4, p.i[5] = 1; /* A 2x4, B 4x3, D 2x3 */
    cr_assert_float_eq(peat_predictor_call_bytes(&k, &p), 4.0 * (8 + 12 + 6), 1e-9);
    k.out_dtype = PEAT_DTYPE_F64;
    cr_assert_float_eq(peat_predictor_call_bytes(&k, &p), 4.0 * (8 + 12) + 8.0 * 6, 1e-9);
    p.f[1] = 1.0; /* beta != 0 reads C */
    cr_assert_float_eq(peat_predictor_call_bytes(&k, &p), 4.0 * (8 + 12 + 6) + 8.0 * 6, 1e-9);
}

/* ---- interpolation ---- */

static peat_pred_ktable table4(void)
{
    peat_pred_ktable kt;
    memset(&kt, 0, sizeof kt);
    double x[] = {8, 1, 4, 2}, t[] = {7, 2, 3.5, 3}; /* unsorted on purpose */
    cr_assert_eq(peat_predictor_ktable_build(&kt, 4, x, t, 1.0), PEAT_OK);
    return kt;
}

Test(interp, exact_at_calibration_points)
{
    peat_pred_ktable kt = table4();
    double x[] = {1, 2, 4, 8}, t[] = {2, 3, 3.5, 7};
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(peat_predictor_ktable_eval(&kt, x[i]), t[i], 1e-12, "at x=%g", x[i]);
    cr_assert_float_eq(peat_predictor_ktable_eval(&kt, 0), 1.0, 1e-12, "no work: the overhead");
    cr_assert_float_eq(peat_predictor_ktable_eval(&kt, 3), 3.25, 1e-12, "halfway 2..4");
    cr_assert_float_eq(peat_predictor_ktable_eval(&kt, 16), 7 + 8 * (3.5 / 4), 1e-12,
                       "beyond: the last slope");
}

Test(interp, monotone_between_points_even_from_noisy_points)
{
    peat_pred_ktable kt;
    /* a noisy measurement faster at more work: flattened, so more work is never faster */
    double x[] = {1, 2, 3, 5, 9}, t[] = {1.0, 2.5, 2.0, 4.0, 3.9};
    cr_assert_eq(peat_predictor_ktable_build(&kt, 5, x, t, 0.5), PEAT_OK);
    double prev = -1;
    for (double q = 0; q <= 12; q += 0.01) {
        double v = peat_predictor_ktable_eval(&kt, q);
        cr_assert(v >= prev - 1e-15, "not monotone at %g: %g after %g", q, v, prev);
        prev = v;
    }
    cr_assert_eq(peat_predictor_ktable_build(&kt, 0, x, t, 0), PEAT_ERR_INVAL);
    double bad[] = {1, -2};
    cr_assert_eq(peat_predictor_ktable_build(&kt, 2, bad, t, 0), PEAT_ERR_INVAL);
}

Test(interp, power_tail_between_linear_and_its_cap)
{
    peat_pred_ktable kt;
    double x[] = {1, 10, 100}, t[] = {1, 10, 400}; /* last segment grows as x^1.6 */
    cr_assert_eq(peat_predictor_ktable_build(&kt, 3, x, t, 0), PEAT_OK);
    kt.power_tail = 1;
    cr_assert_float_eq(peat_predictor_ktable_eval(&kt, 100), 400, 1e-9, "exact at the point");
    cr_assert_float_eq(peat_predictor_ktable_eval(&kt, 1000), 400 * pow(10, PEAT_PRED_TAIL_MAX),
                       1e-6, "capped growth");
    double t2[] = {1, 10, 50}; /* x^0.7: no slower than linear */
    cr_assert_eq(peat_predictor_ktable_build(&kt, 3, x, t2, 0), PEAT_OK);
    kt.power_tail = 1;
    cr_assert_float_eq(peat_predictor_ktable_eval(&kt, 1000), 500, 1e-9);
}

Test(interp, rows_round_trip)
{
    peat_pred_ktable kt = table4(), back;
    snprintf(kt.kernel, sizeof kt.kernel, "k");
    kt.desc_hash = 42, kt.cls = PEAT_PRED_COMPUTE, kt.clock_mhz = 1800;
    peat_pred_row r;
    peat_predictor_row_from(&kt, &r);
    cr_assert_eq(peat_predictor_row_to(&r, &back), PEAT_OK);
    cr_assert_eq(memcmp(back.x, kt.x, sizeof kt.x), 0);
    cr_assert_eq(memcmp(back.t, kt.t, sizeof kt.t), 0);
    cr_assert(back.desc_hash == 42 && back.cls == PEAT_PRED_COMPUTE && back.n == 4);
    r.n = 99;
    cr_assert_eq(peat_predictor_row_to(&r, &back), PEAT_ERR_FORMAT);
}

Test(interp, clock_scales_compute_part_only)
{
    peat_pred_device d = cpu_dev(1);
    peat_kernel k = {.name = "g",
                     .op = PEAT_OP_GEMM,
                     .backend = "cpu",
                     .out_dtype = PEAT_DTYPE_F32,
                     .cfg = {.threads = 1, .vec_width = 1}};
    peat_pred_table t = {.dev = d};
    peat_pred_ktable kt;
    memset(&kt, 0, sizeof kt);
    snprintf(kt.kernel, sizeof kt.kernel, "g");
    kt.desc_hash = peat_predictor_kernel_hash(&k);
    kt.cls = PEAT_PRED_COMPUTE;
    kt.clock_mhz = 2000;
    double x[] = {1000, 2000}, tt[] = {1.5, 2.5};
    cr_assert_eq(peat_predictor_ktable_build(&kt, 2, x, tt, 0.5), PEAT_OK);
    cr_assert_eq(peat_predictor_table_add(&t, &kt), PEAT_OK);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[2] = 10, p.i[3] = 10, p.i[4] = 10, p.i[5] = 1; /* 2000 flops */
    double s0, s1, s2;
    cr_assert_eq(peat_predictor_call(&t, &k, &p, 0, &s0), PEAT_OK);
    cr_assert_eq(peat_predictor_call(&t, &k, &p, 2000, &s1), PEAT_OK);
    cr_assert_eq(peat_predictor_call(&t, &k, &p, 1000, &s2), PEAT_OK);
    cr_assert_float_eq(s0, 2.5, 1e-12, "unknown clock: unscaled");
    cr_assert_float_eq(s1, 2.5, 1e-12, "calibration clock: unscaled");
    cr_assert_float_eq(s2, 0.5 + 2.0 * 2, 1e-12, "half the clock: twice the compute part");
    peat_predictor_table_free(&t);
}

/* ---- cache keys and invalidation ---- */

Test(cache, kernel_descriptor_change_invalidates_its_row)
{
    peat_kernel k = {.name = "gemm_x",
                     .op = PEAT_OP_GEMM,
                     .backend = "cpu",
                     .desc = "d",
                     .cfg = {.tile_m = 32, .tile_n = 64, .tile_k = 64, .threads = 1}};
    peat_pred_table t = {.dev = cpu_dev(2)};
    peat_pred_ktable kt = table4();
    snprintf(kt.kernel, sizeof kt.kernel, "gemm_x");
    kt.desc_hash = peat_predictor_kernel_hash(&k);
    cr_assert_eq(peat_predictor_table_add(&t, &kt), PEAT_OK);
    cr_assert_not_null(peat_predictor_table_find(&t, &k));
    char key0[17], key1[17];
    peat_predictor_table_key(&t, key0);
    peat_kernel k2 = k;
    k2.cfg.tile_k = 128;
    cr_assert_null(peat_predictor_table_find(&t, &k2), "another tile config is another kernel");
    k2 = k;
    k2.desc = "d, rewritten";
    cr_assert_null(peat_predictor_table_find(&t, &k2), "a new description is a new version");
    k2 = k;
    k2.in_dtype = PEAT_DTYPE_BF16;
    cr_assert_null(peat_predictor_table_find(&t, &k2));
    t.k[0].desc_hash = peat_predictor_kernel_hash(&k2);
    peat_predictor_table_key(&t, key1);
    cr_assert_str_neq(key0, key1);
    peat_predictor_table_free(&t);
}

Test(cache, device_change_changes_key_but_noise_does_not)
{
    peat_pred_device a = cpu_dev(2), b = a;
    cr_assert(peat_predictor_device_hash(&a) == peat_predictor_device_hash(&b));
    b.peak_flops *= 1.3, b.bandwidth *= 0.7, b.clock_mhz = 3000;
    cr_assert(peat_predictor_device_hash(&a) == peat_predictor_device_hash(&b),
              "measured numbers are not identity");
    b = a, b.units = 4;
    cr_assert(peat_predictor_device_hash(&a) != peat_predictor_device_hash(&b));
    b = a, b.cache_bytes[2] = 1 << 20;
    cr_assert(peat_predictor_device_hash(&a) != peat_predictor_device_hash(&b));
    b = a;
    snprintf(b.name, sizeof b.name, "other cpu");
    cr_assert(peat_predictor_device_hash(&a) != peat_predictor_device_hash(&b));
}

static char tmpdir[64];
static void mktmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-pred-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

/* The HDF5 cache: rows round-trip; another device's file is not used; a stale kernel row is
 * found stale. */
Test(cache, hdf5_file_round_trip_and_invalidation, .init = mktmp)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    peat_pred_device d = cpu_dev(2);
    peat_pred_table t = {.dev = d};
    const peat_kernel *g = peat_registry_find("gemm_golden");
    peat_pred_ktable kt = table4();
    snprintf(kt.kernel, sizeof kt.kernel, "%s", g->name);
    kt.desc_hash = peat_predictor_kernel_hash(g);
    cr_assert_eq(peat_predictor_table_add(&t, &kt), PEAT_OK);
    char path[512];
    cr_assert_eq(peat_latency_cache_path(tmpdir, &d, path, sizeof path), PEAT_OK);
    cr_assert_eq(peat_latency_cache_save(path, &t), PEAT_OK, "%s", peat_error_last());
    peat_pred_table back = {.dev = d};
    cr_assert_eq(peat_latency_cache_load(path, &d, &back), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(back.n, 1);
    const peat_pred_ktable *r = peat_predictor_table_find(&back, g);
    cr_assert_not_null(r);
    for (double q = 0; q < 20; q += 0.5)
        cr_assert_float_eq(peat_predictor_ktable_eval(r, q), peat_predictor_ktable_eval(&kt, q),
                           1e-15);
    /* a changed descriptor: the stored row no longer matches */
    peat_kernel g2 = *g;
    g2.cfg.tile_m = 7;
    cr_assert_null(peat_predictor_table_find(&back, &g2));
    /* another device: its cache path differs, and this file is refused for it */
    peat_pred_device d2 = cpu_dev(8);
    char path2[512];
    cr_assert_eq(peat_latency_cache_path(tmpdir, &d2, path2, sizeof path2), PEAT_OK);
    cr_assert_str_neq(path, path2);
    peat_pred_table other = {.dev = d2};
    cr_assert_eq(peat_latency_cache_load(path, &d2, &other), PEAT_ERR_NOTFOUND);
    cr_assert_eq(peat_latency_cache_load(path2, &d2, &other), PEAT_ERR_NOTFOUND, "no file");
    /* a foreign file */
    FILE *f = fopen(path2, "w");
    fputs("not hdf5", f);
    fclose(f);
    cr_assert_eq(peat_latency_cache_load(path2, &d2, &other), PEAT_ERR_FORMAT);
    peat_predictor_table_free(&t), peat_predictor_table_free(&back);
    peat_predictor_table_free(&other);
    remove(path), remove(path2), rmdir(tmpdir);
}

/* ---- clocks ---- */

/* Copies file src to dst, then appends extra bytes of 'x' (0: a verbatim copy). */
static void copy_file(const char *src, const char *dst, int extra)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    cr_assert(in && out, "copy %s -> %s", src, dst);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(fwrite(buf, 1, n, out), n);
    for (int i = 0; i < extra; i++) fputc('x', out);
    fclose(in);
    cr_assert_eq(fclose(out), 0);
}

/* A plugin rebuilt under the same descriptor is another kernel to the cache: copies of one plugin
 * loaded side by side, one of them a byte longer (the same code, another file); the hash follows
 * the contents, not the path. */
Test(cache, rebuilt_code_is_another_kernel, .init = mktmp)
{
    char a[128], b[128], c[128];
    snprintf(a, sizeof a, "%s/copy_a.so", tmpdir);
    snprintf(b, sizeof b, "%s/copy_b.so", tmpdir);
    snprintf(c, sizeof c, "%s/copy_c.so", tmpdir);
    copy_file(PEAT_TEST_PLUGIN_DIR "/libplugin_test_gemms.so", a, 0);
    copy_file(PEAT_TEST_PLUGIN_DIR "/libplugin_test_gemms.so", b, 1);
    copy_file(PEAT_TEST_PLUGIN_DIR "/libplugin_test_gemms.so", c, 0);
    void *ha = dlopen(a, RTLD_NOW | RTLD_LOCAL), *hb = dlopen(b, RTLD_NOW | RTLD_LOCAL),
         *hc = dlopen(c, RTLD_NOW | RTLD_LOCAL);
    cr_assert(ha && hb && hc, "%s", dlerror());
    void *fa = dlsym(ha, "peat_plugin_register"), *fb = dlsym(hb, "peat_plugin_register"),
         *fc = dlsym(hc, "peat_plugin_register");
    cr_assert(fa && fb && fc && fa != fb && fa != fc);
    uint64_t ma = peat_predictor_module_hash(fa), mb = peat_predictor_module_hash(fb);
    cr_assert(ma != 0 && mb != 0, "both files read");
    cr_assert_neq(ma, mb, "another file's contents, another hash");
    cr_assert_eq(peat_predictor_module_hash(fc), ma, "the same contents at another path");
    cr_assert_eq(peat_predictor_module_hash(fa), ma, "the same module, the same hash");
    peat_kernel ka = {.name = "k", .op = PEAT_OP_GEMM, .backend = "cpu", .desc = "d"}, kb = ka;
    memcpy(&ka.fn, &fa, sizeof fa);
    memcpy(&kb.fn, &fb, sizeof fb);
    cr_assert_neq(peat_predictor_kernel_hash(&ka), peat_predictor_kernel_hash(&kb),
                  "one descriptor, two builds: two rows");
    /* built-in kernels: this executable, one hash for all of them */
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    const peat_kernel *g = peat_registry_find("gemm_golden"), *x = peat_registry_find("relu_exact");
    cr_assert(g && x);
    void *fg, *fx;
    memcpy(&fg, &g->fn, sizeof fg);
    memcpy(&fx, &x->fn, sizeof fx);
    uint64_t mg = peat_predictor_module_hash(fg);
    cr_assert(mg != 0 && mg != ma && mg == peat_predictor_module_hash(fx));
    cr_assert_eq(peat_predictor_module_hash(NULL), 0);
    dlclose(ha), dlclose(hb), dlclose(hc);
    unlink(a), unlink(b), unlink(c), rmdir(tmpdir);
}

Test(clock, missing_sources_read_unknown, .init = mktmp)
{
    peat_pred_clock c = {123, "x"};
    cr_assert_eq(peat_predictor_clock_cpufreq(tmpdir, 0, &c), PEAT_ERR_UNSUPPORTED);
    cr_assert_eq(c.mhz, 0);
    cr_assert_str_eq(c.source, "unknown");
    c.mhz = 5;
    cr_assert_eq(peat_predictor_clock_nvml("libpeat-no-such-nvml.so", 0, &c), PEAT_ERR_UNSUPPORTED);
    cr_assert(c.mhz == 0 && strcmp(c.source, "unknown") == 0);
    c.mhz = 5;
    cr_assert_eq(peat_predictor_clock_rocm("libpeat-no-such-rsmi.so", 0, &c), PEAT_ERR_UNSUPPORTED);
    cr_assert(c.mhz == 0 && strcmp(c.source, "unknown") == 0);
    /* a library that exists but is not NVML: the symbols are missing, still "unknown" */
    c.mhz = 5;
    cr_assert_eq(peat_predictor_clock_nvml("libm.so.6", 0, &c), PEAT_ERR_UNSUPPORTED);
    cr_assert(c.mhz == 0 && strcmp(c.source, "unknown") == 0);
    rmdir(tmpdir);
}

Test(clock, cpufreq_file_read, .init = mktmp)
{
    char p[256];
    snprintf(p, sizeof p, "%s/cpu3", tmpdir);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/cpu3/cpufreq", tmpdir);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/cpu3/cpufreq/scaling_cur_freq", tmpdir);
    FILE *f = fopen(p, "w");
    fputs("2450000\n", f);
    fclose(f);
    peat_pred_clock c;
    cr_assert_eq(peat_predictor_clock_cpufreq(tmpdir, 3, &c), PEAT_OK);
    cr_assert_float_eq(c.mhz, 2450.0, 1e-9);
    cr_assert_str_eq(c.source, "cpufreq");
    f = fopen(p, "w");
    fputs("garbage\n", f);
    fclose(f);
    cr_assert_eq(peat_predictor_clock_cpufreq(tmpdir, 3, &c), PEAT_ERR_UNSUPPORTED);
    cr_assert_str_eq(c.source, "unknown");
    remove(p);
    snprintf(p, sizeof p, "%s/cpu3/cpufreq", tmpdir), rmdir(p);
    snprintf(p, sizeof p, "%s/cpu3", tmpdir), rmdir(p);
    rmdir(tmpdir);
}

static void count_work(void *user)
{
    (*(int *)user)++;
}

Test(clock, warmup_returns_and_reports_its_source)
{
    int calls = 0, steady = -1;
    peat_pred_clock c;
    cr_assert_eq(peat_predictor_warmup("cpu", count_work, &calls, 0.1, &steady, &c), PEAT_OK);
    cr_assert(calls > 0, "the work ran");
    cr_assert(steady == 0 || steady == 1);
    cr_assert(strcmp(c.source, "unknown") == 0 || strcmp(c.source, "cpufreq") == 0);
}

/* ---- planner ---- */

static peat_pred_limits limits(void)
{
    peat_pred_limits l;
    memset(&l, 0, sizeof l);
    l.min.iters = 10, l.min.calls = 8, l.min.probes = 4, l.min.trials = 10;
    l.min.runtime_freqs = 1, l.min.runtime_iters = 10;
    l.max.iters = 1000, l.max.calls = 4000, l.max.probes = 500, l.max.trials = 5000;
    l.max.runtime_freqs = 3, l.max.runtime_iters = 1000;
    return l;
}

/* Every stage by hand: CPU seconds from counts x unit costs, wall seconds over the core share,
 * runtime FI's lockstep at the slower of its busiest thread and the cores the process gets. */
Test(plan, cost_by_hand)
{
    peat_pred_costs c = {.share = 0.5,
                         .cores = 0.8,
                         .iter_s = 0.01,
                         .record_s = 0.002,
                         .replay_s = 0.003,
                         .repeat_s = 0.001,
                         .setup_s = 0.2,
                         .probe_s = 0.004,
                         .probe_fixed_s = 0.05,
                         .trial_s = 0.001,
                         .runtime_iter_s = 0.04,
                         .runtime_iter_crit_s = 0.015,
                         .runtime_eval_s = 0.02,
                         .runtime_eval_crit_s = 0.012,
                         .runtime_fixed_s = 0.3,
                         .analyze_fixed_s = 0.1,
                         .other_s = 0.05};
    peat_pred_plan p = {.iters = 100,
                        .calls = 50,
                        .repeats = 2,
                        .probes = 10,
                        .trials = 200,
                        .runtime_runs = 4,
                        .runtime_freqs = 1,
                        .runtime_iters = 30};
    peat_predictor_plan_cost(&c, &p);
    double cpu[PEAT_STAGE_COUNT] = {0};
    cpu[PEAT_STAGE_PROFILE] = 0.2 + 100 * 0.01 + 50 * 0.002;
    cpu[PEAT_STAGE_PLAYBACK] = 50 * 0.003 + 2 * 0.001;
    cpu[PEAT_STAGE_PROBES] = 10 * 0.004 + 0.05;
    cpu[PEAT_STAGE_ANALYZE] = 0.1;
    cpu[PEAT_STAGE_RUNTIME] = 0.3 + 30 * 0.04 + 5 * 0.02; /* 30 iterations: 5 evaluations */
    cpu[PEAT_STAGE_FI] = 200 * 0.001;
    cpu[PEAT_STAGE_OTHER] = 0.05;
    double total = 0, total_cpu = 0;
    for (int s = 0; s < PEAT_STAGE_COUNT; s++) {
        double wall = s == PEAT_STAGE_RUNTIME
                          /* 0.3 / 0.5 + 30 max(0.015 / 0.5, 0.04 / 0.8) + 5 max(.., 0.02 / 0.8) */
                          ? 0.6 + 30 * 0.05 + 5 * 0.025
                          : cpu[s] / 0.5;
        cr_assert_float_eq(p.stage_cpu_s[s], cpu[s], 1e-12, "stage %d", s);
        cr_assert_float_eq(p.stage_s[s], wall, 1e-12, "stage %d", s);
        total += wall, total_cpu += cpu[s];
    }
    cr_assert_float_eq(p.total_s, total, 1e-12);
    cr_assert_float_eq(p.total_cpu_s, total_cpu, 1e-12);
}

/* Isolation: each replayed call (and repeat) and each probe forks a process holding its start,
 * what the analyzer holds and every record (the profile stage recorded them all). */
Test(plan, isolation_forks_by_hand)
{
    peat_pred_costs c = {.replay_s = 0.003,
                         .repeat_s = 0.001,
                         .probe_s = 0.004,
                         .probe_fixed_s = 0.05,
                         .probe_fixed_forks = 2,
                         .base_bytes = 1e6,
                         .held_bytes = 5e5,
                         .bytes_per_call = 1e5};
    double x[] = {1e6, 1e8}, t[] = {1e-3, 1.1e-2};
    cr_assert_eq(peat_predictor_ktable_build(&c.isolate, 2, x, t, 1e-3), PEAT_OK);
    peat_pred_plan p = {.calls = 20, .repeats = 2, .probes = 5};
    peat_predictor_plan_cost(&c, &p);
    double all = 1e-3 + (3.5e6 - 1e6) / (1e8 - 1e6) * 1e-2; /* at 1e6 + 5e5 + 20 x 1e5 */
    cr_assert_float_eq(peat_predictor_isolate_s(&c, 20), all, 1e-15);
    cr_assert_float_eq(p.stage_cpu_s[PEAT_STAGE_PLAYBACK], 20 * 0.003 + 2 * 0.001 + 22 * all,
                       1e-12);
    cr_assert_float_eq(p.stage_cpu_s[PEAT_STAGE_PROBES], 5 * (0.004 + all) + 0.05 + 2 * all, 1e-12);
}

/* Runtime FI cut to the time left: 1 s fixed + 0.1 s an iteration + 0.05 s an evaluation (share
 * 1); 60 planned iterations cost 1 + 6 + 5 x 0.05 = 7.25 s. */
Test(plan, runtime_cut_to_the_time_left)
{
    peat_pred_costs c = {.runtime_fixed_s = 1.0,
                         .runtime_iter_s = 0.1,
                         .runtime_iter_crit_s = 0.1,
                         .runtime_eval_s = 0.05,
                         .runtime_eval_crit_s = 0.05};
    peat_pred_plan p = {.runtime_runs = 4, .runtime_freqs = 1, .runtime_iters = 60};
    cr_assert_eq(peat_predictor_runtime_fit(&c, &p, 10, 1.0, 7.5), 60, "it fits: all of them");
    /* 4.8 s: 1 + 0.1 n + 0.05 evals(n) <= 4.8. n = 35 (every 7: 5 evaluations) costs 4.75 s;
     * every n from 36 (every 7 and the last: 6 evaluations, 4.9 s) to 60 costs more */
    int64_t n = peat_predictor_runtime_fit(&c, &p, 10, 1.0, 4.8);
    cr_assert_eq(n, 35);
    peat_pred_plan q = p;
    q.runtime_iters = n;
    peat_predictor_plan_cost(&c, &q);
    cr_assert_float_eq(q.stage_s[PEAT_STAGE_RUNTIME], 4.75, 1e-9);
    /* twice as slow as predicted: half the time */
    cr_assert_eq(peat_predictor_runtime_fit(&c, &p, 10, 2.0, 9.6), 35);
    cr_assert_eq(peat_predictor_runtime_fit(&c, &p, 10, 1.0, 0.5), 10, "never below the minimum");
}

/* Runtime FI's runs side by side: their iterations and evaluations cost contention x the
 * measured alone, in CPU and wall seconds; the set-up does not. */
Test(plan, runtime_contention_by_hand)
{
    peat_pred_costs c = {.share = 0.5,
                         .cores = 0.8,
                         .contention = 1.5,
                         .runtime_iter_s = 0.04,
                         .runtime_iter_crit_s = 0.015,
                         .runtime_eval_s = 0.02,
                         .runtime_eval_crit_s = 0.012,
                         .runtime_fixed_s = 0.3};
    peat_pred_plan p = {.runtime_runs = 4, .runtime_freqs = 1, .runtime_iters = 30};
    peat_predictor_plan_cost(&c, &p);
    cr_assert_float_eq(p.stage_cpu_s[PEAT_STAGE_RUNTIME], 0.3 + 1.5 * (30 * 0.04 + 5 * 0.02),
                       1e-12);
    /* 0.3 / 0.5 + 30 max(1.5 x 0.015 / 0.5, 1.5 x 0.04 / 0.8) + 5 max(.., 1.5 x 0.02 / 0.8) */
    cr_assert_float_eq(p.stage_s[PEAT_STAGE_RUNTIME], 0.6 + 30 * 0.075 + 5 * 0.0375, 1e-12);
}

/* Runtime FI steered while it trains, by hand: 0.1 s an iteration, 0.2 s an evaluation (share 1,
 * one run), evaluations every 6 iterations; 12 iterations done (2 evaluations), 5.02 s left. */
static peat_pred_costs steer_costs(void)
{
    peat_pred_costs c = {.runtime_iter_s = 0.1,
                         .runtime_iter_crit_s = 0.1,
                         .runtime_eval_s = 0.2,
                         .runtime_eval_crit_s = 0.2};
    return c;
}

/* The steering state of those 12 iterations, done in elapsed_s, with room for 10 to 120. */
static peat_pred_steer steer_state(double elapsed_s)
{
    peat_pred_steer s = {.done = 12,
                         .every = 6,
                         .elapsed_s = elapsed_s,
                         .left_s = 5.02,
                         .min_iters = 10,
                         .max_iters = 120};
    return s;
}

Test(steer, runtime_twice_as_slow_cuts_by_hand)
{
    peat_pred_costs c = steer_costs();
    /* predicted for the 12 done: 1.2 + 0.4 = 1.6 s; they took 3.2 s: pace 2 */
    peat_pred_steer s = steer_state(3.2);
    cr_assert_float_eq(peat_predictor_steer_pace(&c, &s), 2.0, 1e-12);
    /* n = 30: 2 x (18 x 0.1 + 3 x 0.2) = 4.8 s fits; n = 31 adds its own evaluation: 2 x (1.9 +
     * 4 x 0.2) = 5.4 s; every n above costs more */
    cr_assert_eq(peat_predictor_runtime_steer(&c, &s), 30);
    /* on time (pace 1): n = 48 costs 3.6 + 6 x 0.2 = 4.8 s, n = 49 3.7 + 1.4 = 5.1 s */
    s.elapsed_s = 1.6;
    cr_assert_eq(peat_predictor_runtime_steer(&c, &s), 48);
}

Test(steer, runtime_ahead_extends_by_hand)
{
    peat_pred_costs c = steer_costs();
    /* twice as fast: 0.5 x ((n - 12) 0.1 + (evals(n) - 2) 0.2) <= 5.02: n = 86 costs 0.5 x (7.4 +
     * 13 x 0.2) = 5.0 s, n = 87 0.5 x (7.5 + 2.6) = 5.05 s: the run grows from 60 to 86 */
    peat_pred_steer s = steer_state(0.8);
    cr_assert_eq(peat_predictor_runtime_steer(&c, &s), 86);
    s.max_iters = 70;
    cr_assert_eq(peat_predictor_runtime_steer(&c, &s), 70, "never above the room it has");
    s.left_s = 0.01;
    cr_assert_eq(peat_predictor_runtime_steer(&c, &s), 13, "out of time: the next is the last");
    s.min_iters = 20;
    cr_assert_eq(peat_predictor_runtime_steer(&c, &s), 20, "never below the smallest campaign");
}

/* The window's pace: the last 6 iterations (one evaluation, 0.8 s predicted) took 2.4 s, the
 * whole 12 3.2 s: the window's pace 3 steers, not the whole run's 2. */
Test(steer, runtime_window_follows_a_change_of_load)
{
    peat_pred_costs c = steer_costs();
    peat_pred_steer s = steer_state(3.2);
    s.window_n = 6, s.window_s = 2.4;
    cr_assert_float_eq(peat_predictor_steer_pace(&c, &s), 3.0, 1e-12);
    /* 3 x (0.1 (n - 12) + 0.2 (evals(n) - 2)) <= 5.02: n = 24 costs 3 x 1.6 = 4.8 s, n = 25 3 x
     * (1.3 + 0.4) = 5.1 s, n = 26..29 more */
    cr_assert_eq(peat_predictor_runtime_steer(&c, &s), 24);
    s.window_n = PEAT_PRED_STEER_WINDOW - 1;
    cr_assert_float_eq(peat_predictor_steer_pace(&c, &s), 2.0, 1e-12, "too short a window");
}

/* A simulated clock: runtime FI's iterations take pace x their prediction, the pace jumping at a
 * random iteration (seeded); steered every iteration, the stage never ends past its time by more
 * than what one iteration and its evaluation take once the change is seen, and not at all when
 * the pace stays. */
Test(steer, runtime_simulated_never_over)
{
    peat_rng_t *r = peat_rng_new(5);
    for (int trial = 0; trial < 500; trial++) {
        peat_pred_costs c = {.share = 0.3 + 0.7 * peat_rng_uniform(r),
                             .runtime_iter_s = 1e-3 + 0.05 * peat_rng_uniform(r),
                             .runtime_eval_s = 1e-3 + 0.2 * peat_rng_uniform(r)};
        c.cores = c.share * (1 + peat_rng_uniform(r));
        c.runtime_iter_crit_s = c.runtime_iter_s * (0.5 + 0.5 * peat_rng_uniform(r));
        c.runtime_eval_crit_s = c.runtime_eval_s * (0.5 + 0.5 * peat_rng_uniform(r));
        peat_pred_plan p = {.runtime_runs = 4, .runtime_freqs = 1, .runtime_iters = 60};
        peat_predictor_plan_cost(&c, &p);
        double budget = p.stage_s[PEAT_STAGE_RUNTIME] * (0.3 + 1.5 * peat_rng_uniform(r));
        int steady = trial % 2;
        double pace0 = 0.5 + 2.0 * peat_rng_uniform(r);
        double pace1 = steady ? pace0 : 0.5 + 2.0 * peat_rng_uniform(r);
        int64_t jump = 1 + (int64_t)(40 * peat_rng_uniform(r)), every = 6, n = 60, min = 10;
        /* a lockstep iteration and evaluation: the busiest thread or all over the cores */
        double unit_it = fmax(c.runtime_iter_crit_s / c.share, c.runtime_iter_s / c.cores);
        double unit_ev = fmax(c.runtime_eval_crit_s / c.share, c.runtime_eval_s / c.cores);
        double t = 0, ends[200] = {0};
        for (int64_t done = 0; done < n; done++) {
            double pace = done < jump ? pace0 : pace1;
            t += pace * unit_it;
            if ((done + 1) % every == 0 || done == n - 1) t += pace * unit_ev;
            ends[done + 1] = t;
            if (done + 1 >= n) break;
            int64_t w = done + 1 < PEAT_PRED_STEER_WINDOW ? done + 1 : PEAT_PRED_STEER_WINDOW;
            peat_pred_steer s = {.done = done + 1,
                                 .every = every,
                                 .elapsed_s = t,
                                 .window_n = w,
                                 .window_s = t - ends[done + 1 - w],
                                 .left_s = budget - t,
                                 .min_iters = min,
                                 .max_iters = 180};
            n = peat_predictor_runtime_steer(&c, &s);
        }
        /* the smallest campaign at the final pace: what no steering can go below */
        double floor = 0;
        for (int64_t d = 0; d < min; d++) {
            double pace = d < jump ? pace0 : pace1;
            floor += pace * (unit_it + ((d + 1) % every == 0 || d == min - 1 ? unit_ev : 0));
        }
        if (floor > budget) continue;
        double slack = steady ? 1e-9 : pace1 * (unit_it + unit_ev) + 1e-9;
        cr_assert(t <= budget + slack, "trial %d: %.4f s for a budget of %.4f s (%lld iterations)",
                  trial, t, budget, (long long)n);
        cr_assert(n >= min && n <= 180);
    }
    peat_rng_free(r);
}

/* Playback steered before each call, by hand: 10 ms a replayed call (no isolation curve), probes
 * 0.5 s, analyze 0.2 s, runtime FI at its smallest 1 s (share 1): at pace 2 and 2.9 s left, a call
 * fits while 2 x (0.01 + 0.5) + (0.2 + 1) = 2.22 s does; later stages at 1.5x: 2.82 s. */
Test(steer, playback_by_hand)
{
    peat_pred_costs c = {.replay_s = 0.01,
                         .probe_s = 0.05,
                         .analyze_fixed_s = 0.2,
                         .runtime_iter_s = 0.1,
                         .runtime_iter_crit_s = 0.1};
    peat_pred_plan p = {
        .calls = 100, .probes = 10, .runtime_runs = 2, .runtime_freqs = 1, .runtime_iters = 40};
    peat_pred_playback_steer s = {.replayed = 50,
                                  .min_calls = 8,
                                  .min_runtime_iters = 10,
                                  .pace = 2.0,
                                  .later_pace = 1.0,
                                  .left_s = 2.3};
    cr_assert(peat_predictor_playback_go(&c, &p, &s), "2.22 s fits 2.3 s");
    s.later_pace = 1.5; /* 1.02 + 1.5 x 1.2 = 2.82 s */
    cr_assert(!peat_predictor_playback_go(&c, &p, &s), "2.82 s does not fit 2.3 s");
    s.left_s = 2.83;
    cr_assert(peat_predictor_playback_go(&c, &p, &s));
    s.left_s = 0, s.replayed = 8;
    cr_assert(peat_predictor_playback_go(&c, &p, &s), "the smallest campaign's calls always run");
}

/* Analyze: the two signatures (one curve for both) on two threads, the commit on one. */
Test(plan, analyze_signatures_on_two_threads)
{
    peat_pred_costs c = {.share = 0.5, .cores = 0.8, .analyze_fixed_s = 0.1, .elems_per_call = 1e3};
    double x[] = {1e4, 1e6}, t[] = {0.01, 0.2};
    cr_assert_eq(peat_predictor_ktable_build(&c.analysis, 2, x, t, 0), PEAT_OK);
    peat_pred_plan p = {.calls = 100}; /* 1e5 elements: 0.01 + (9e4 / 9.9e5) 0.19 s */
    peat_predictor_plan_cost(&c, &p);
    double sig = 0.01 + 9e4 / 9.9e5 * 0.19;
    cr_assert_float_eq(p.stage_cpu_s[PEAT_STAGE_ANALYZE], 0.1 + sig, 1e-12);
    /* each thread one signature: max(sig / 2 / 0.5, sig / 0.8) = sig / 0.8 */
    cr_assert_float_eq(p.stage_s[PEAT_STAGE_ANALYZE], 0.1 / 0.5 + sig / 0.8, 1e-12);
}

/* The runtime stage's evaluations as harness/runtime/runtime.c schedules them. */
Test(plan, runtime_evaluations_by_hand)
{
    /* every iters/5 (at least 1) and the last: 19 -> every 3, 3..18 and 19 */
    int64_t iters[] = {0, 1, 4, 9, 10, 19, 20, 60, 61, 200};
    int64_t evals[] = {0, 1, 4, 9, 5, 7, 5, 5, 6, 5};
    for (size_t i = 0; i < sizeof iters / sizeof iters[0]; i++)
        cr_assert_eq(peat_predictor_runtime_evals(iters[i]), evals[i], "%lld iterations",
                     (long long)iters[i]);
}

/* Random cost tables and budgets (seeded): a plan never exceeds its budget, stays within the
 * limits, and a larger budget never gives a smaller plan. */
Test(plan, never_over_budget_on_synthetic_costs)
{
    peat_rng_t *r = peat_rng_new(11);
    peat_pred_limits l = limits();
    for (int trial = 0; trial < 2000; trial++) {
        peat_pred_costs c = {.share = 0.2 + 0.8 * peat_rng_uniform(r),
                             .iter_s = 1e-4 + 0.05 * peat_rng_uniform(r),
                             .record_s = 0.01 * peat_rng_uniform(r),
                             .replay_s = 0.02 * peat_rng_uniform(r),
                             .repeat_s = 0.01 * peat_rng_uniform(r),
                             .probe_s = 0.01 * peat_rng_uniform(r),
                             .trial_s = 0.005 * peat_rng_uniform(r),
                             .runtime_iter_s = 0.06 * peat_rng_uniform(r),
                             .runtime_eval_s = 0.5 * peat_rng_uniform(r),
                             .runtime_fixed_s = peat_rng_uniform(r),
                             .analyze_fixed_s = 2 * peat_rng_uniform(r)};
        c.cores = c.share * (1 + peat_rng_uniform(r));
        c.runtime_iter_crit_s = c.runtime_iter_s * (0.5 + 0.5 * peat_rng_uniform(r));
        c.runtime_eval_crit_s = c.runtime_eval_s * (0.5 + 0.5 * peat_rng_uniform(r));
        /* half the tables also carry the superlinear playback curves (signatures, isolation) */
        if (trial % 2) {
            double ax[] = {1e3, 1e4, 1e5}, at[] = {1e-3, 2e-2 * (1 + peat_rng_uniform(r)), 0.5};
            double ix[] = {1, 1e6, 1e8}, it[] = {1e-3, 2e-3, 0.05 * peat_rng_uniform(r) + 2e-3};
            cr_assert_eq(peat_predictor_ktable_build(&c.analysis, 3, ax, at, 0), PEAT_OK);
            cr_assert_eq(peat_predictor_ktable_build(&c.isolate, 3, ix, it, 1e-3), PEAT_OK);
            c.analysis.power_tail = 1;
            c.elems_per_call = 1e4 * peat_rng_uniform(r);
            c.bytes_per_call = 1e6 * peat_rng_uniform(r);
        }
        double budget = 300 * peat_rng_uniform(r);
        peat_pred_plan p, p2;
        peat_status st = peat_predictor_plan_fit(&c, &l, budget, &p);
        peat_pred_plan lo = l.min;
        peat_predictor_plan_cost(&c, &lo);
        if (lo.total_s > budget) {
            cr_assert_eq(st, PEAT_ERR_INVAL, "below the minimum must be refused");
            cr_assert(strstr(peat_error_last(), "needs") != NULL, "%s", peat_error_last());
            continue;
        }
        cr_assert_eq(st, PEAT_OK);
        cr_assert(p.total_s <= budget, "trial %d: plan %.6f s over budget %.6f s", trial, p.total_s,
                  budget);
        cr_assert(p.iters >= l.min.iters && p.iters <= l.max.iters);
        cr_assert(p.calls >= l.min.calls && p.calls <= l.max.calls);
        cr_assert(p.trials >= l.min.trials && p.trials <= l.max.trials);
        cr_assert_eq(peat_predictor_plan_fit(&c, &l, budget * 1.5, &p2), PEAT_OK);
        cr_assert(p2.iters >= p.iters && p2.calls >= p.calls, "larger budget, smaller plan");
        cr_assert(p.runtime_iters >= l.min.runtime_iters && p.probes >= l.min.probes);
    }
    peat_rng_free(r);
}

Test(plan, refuses_with_the_minimum_it_needs)
{
    peat_pred_limits l = limits();
    peat_pred_costs c = {.iter_s = 1.0, .analyze_fixed_s = 5.0};
    peat_pred_plan p;
    cr_assert_eq(peat_predictor_plan_fit(&c, &l, 3.0, &p), PEAT_ERR_INVAL);
    /* 10 iterations + 1 runtime frequency x 10 iterations (runtime_iter_s 0) + 5 s fixed */
    cr_assert(strstr(peat_error_last(), "needs 15.0 s") != NULL, "%s", peat_error_last());
    cr_assert_eq(peat_predictor_plan_fit(&c, &l, 1e9, &p), PEAT_OK);
    cr_assert_eq(p.iters, l.max.iters, "an ample budget runs the largest campaign");
}

/* ---- the quiet gate: timings taken while the core ran slow are left out ---- */

Test(gate, median_of_the_quiet_timings_by_hand)
{
    /* seven timings, three of them taken while a neighbour slowed the core 1.7x (their probes
     * 1.4x the best): the median of the four quiet ones, 1.05 and 1.1 averaged */
    const double t[7] = {1.0, 1.7, 1.1, 1.75, 1.2, 1.05, 1.8};
    const double p[7] = {2.0, 2.8, 2.1, 2.8, 2.2, 2.0, 2.9};
    double med = 0;
    cr_assert_eq(peat_predictor_quiet_median(t, p, 7, 2.0, 3, &med), 4);
    cr_assert_float_eq(med, 1.075, 1e-15, "the four quiet ones' median, got %g", med);
    /* a probe exactly at the threshold is quiet, one just above is not */
    const double p2[7] = {2.0, 2.5, 2.0 * PEAT_PRED_QUIET, 2.4, 2.0 * PEAT_PRED_QUIET * 1.001,
                          2.0, 3.0};
    cr_assert_eq(peat_predictor_quiet_median(t, p2, 7, 2.0, 3, &med), 3);
    cr_assert_float_eq(med, 1.05, 1e-15, "1.0, 1.05 and 1.1: got %g", med);
    /* fewer quiet than needed: the median of all seven */
    cr_assert_eq(peat_predictor_quiet_median(t, p, 7, 2.0, 5, &med), 4);
    cr_assert_float_eq(med, 1.2, 1e-15, "the median of all seven, got %g", med);
    /* ungated timings (device kernels, probe 0) count as quiet */
    const double p0[3] = {0, 0, 0};
    cr_assert_eq(peat_predictor_quiet_median(t, p0, 3, 2.0, 3, &med), 3);
    cr_assert_float_eq(med, 1.1, 1e-15);
    cr_assert_eq(peat_predictor_quiet_median(t, p0, PEAT_PRED_GATE_MAX + 1, 2.0, 3, &med), 0,
                 "more timings than the gate holds are refused");
}

Test(gate, median_standard_error_by_hand)
{
    /* 1..5: median 3, absolute deviations 2 1 0 1 2, MAD 1: 1.2533 x 1.4826 / sqrt(5) / 3 */
    const double t[5] = {4, 1, 5, 3, 2};
    cr_assert_float_eq(peat_predictor_median_se(t, 5), 1.2533 * 1.4826 / sqrt(5.0) / 3.0, 1e-12);
    /* one far outlier does not move it: MAD of {1, 1.01, 1.02, 1.03, 9} is 0.01 around 1.02 */
    const double o[5] = {1.0, 1.01, 1.02, 1.03, 9.0};
    cr_assert_float_eq(peat_predictor_median_se(o, 5), 1.2533 * 1.4826 * 0.01 / sqrt(5.0) / 1.02,
                       1e-9);
    const double same[4] = {2, 2, 2, 2};
    cr_assert_float_eq(peat_predictor_median_se(same, 4), 0.0, 1e-15, "no spread, no error");
    cr_assert(isinf(peat_predictor_median_se(t, 1)), "one timing says nothing of its spread");
    cr_assert(isinf(peat_predictor_median_se(t, PEAT_PRED_GATE_MAX + 1)));
    const double zero[3] = {0, 0, 0};
    cr_assert(isinf(peat_predictor_median_se(zero, 3)), "a zero median has no relative error");
}

Test(gate, probe_sets_the_best_and_judges_by_it)
{
    double first = peat_predictor_probe();
    cr_assert(first > 0 && first < 0.01, "a probe is a few microseconds, got %g s", first);
    for (int i = 0; i < 20; i++) peat_predictor_probe();
    double best = peat_predictor_probe_best();
    cr_assert(best > 0 && best <= first, "the best is the fastest probe seen");
    cr_assert(peat_predictor_probe_quiet(best));
    cr_assert(peat_predictor_probe_quiet(best * PEAT_PRED_QUIET));
    cr_assert(!peat_predictor_probe_quiet(best * PEAT_PRED_QUIET * 1.01));
    cr_assert(peat_predictor_probe_quiet(0), "an ungated timing counts as quiet");
}

/* ---- the model on real kernels: a calibration table predicts its own points ---- */

Test(calibrate, table_reproduces_its_points_and_classes)
{
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    peat_pred_device d = cpu_dev(2);
    const char *names[] = {"gemm_new", "softmax_online"};
    for (int i = 0; i < 2; i++) {
        const peat_kernel *k = peat_registry_find(names[i]);
        peat_pred_ktable kt;
        cr_assert_eq(peat_predictor_calibrate_kernel(k, &d, 0.0, 3, &kt), PEAT_OK, "%s",
                     peat_error_last());
        /* 10 sizes timed; a point timed again and confirmed far over its neighbours' line is
         * left out (retime_outliers), which a loaded machine can cause: the count is not the
         * property, the table's own points are */
        cr_assert(kt.n >= 2 && kt.n <= 10, "%s: %d points kept of 10", names[i], kt.n);
        cr_assert(kt.desc_hash == peat_predictor_kernel_hash(k));
        for (int j = 0; j < kt.n; j++)
            cr_assert_float_eq(peat_predictor_ktable_eval(&kt, kt.x[j]), kt.t[j], 1e-15);
        for (int j = 1; j < kt.n; j++) cr_assert(kt.t[j] >= kt.t[j - 1] && kt.x[j] > kt.x[j - 1]);
        if (i == 1) cr_assert_eq(kt.cls, PEAT_PRED_MEMORY, "softmax has no tiles: memory");
    }
}

/* A kernel that notes where its first input is and the distinct values it starts with (and
 * writes nothing). */
static const void *where;
static float firsts[64];
static int n_seen, moved;

static peat_status note_inputs(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    if (!where) where = a->in[0]->data;
    moved |= where != a->in[0]->data;
    float v = peat_f32(a->in[0])[0];
    for (int i = 0; i < n_seen; i++)
        if (firsts[i] == v) return PEAT_OK;
    if (n_seen < 64) firsts[n_seen++] = v;
    return PEAT_OK;
}

Test(calibrate, cpu_calls_take_fresh_input_sets_in_turn)
{
    peat_kernel k = {.name = "note",
                     .op = PEAT_OP_RELU_BWD,
                     .role = PEAT_ROLE_CANDIDATE,
                     .backend = "cpu",
                     .out_dtype = PEAT_DTYPE_F32,
                     .fn = note_inputs};
    /* relu_bwd of n elements reads 8n bytes: 1 MiB / (8 x 16384) = 8 sets */
    peat_op_params p = {.i = {16384}};
    peat_pred_call c;
    cr_assert_eq(peat_predictor_call_alloc(&k, &p, 3, &c), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(c.n_sets, 8);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(peat_tensor_numel(c.pool[i]), 8 * 16384);
        cr_assert(!memcmp(c.pool[i]->data, c.in[i]->data, 16384 * 4), "set 0: the call's values");
        /* the others: other values from the same range */
        int differ = 0;
        for (int64_t e = 0; e < 16384; e++) {
            float v = peat_f32(c.pool[i])[7 * 16384 + e];
            cr_assert(v >= -1.0f && v <= 1.0f);
            differ += v != peat_f32(c.in[i])[e];
        }
        cr_assert_gt(differ, 16000);
    }
    float set_first[8];
    for (int s = 0; s < 8; s++) set_first[s] = peat_f32(c.pool[0])[s * 16384];
    n_seen = 0, moved = 0, where = NULL;
    double t;
    /* min_s out of reach: exactly 64 timed batches of one or more calls whatever the machine's
     * speed (a fast one batches calls, a slow one does not), so the calls cycle through all 8
     * sets on any machine */
    cr_assert_eq(peat_predictor_time_call(&k, &c, 1e9, 64, &t), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(n_seen, 8, "timing took %d of the 8 input sets", n_seen);
    cr_assert_not(moved, "every call reads the same buffers");
    for (int s = 0; s < 8; s++) cr_assert(firsts[s] == set_first[s], "set %d taken in turn", s);
    peat_predictor_call_free(&c);
    /* a call of 1 MiB or more, and a device kernel's, keep their one set */
    p.i[0] = 1 << 17;
    cr_assert_eq(peat_predictor_call_alloc(&k, &p, 3, &c), PEAT_OK);
    cr_assert_eq(c.n_sets, 1);
    cr_assert_null(c.pool[0]);
    peat_predictor_call_free(&c);
    k.backend = "opencl", p.i[0] = 16;
    cr_assert_eq(peat_predictor_call_alloc(&k, &p, 3, &c), PEAT_OK);
    cr_assert_eq(c.n_sets, 1);
    peat_predictor_call_free(&c);
}

/* ---- the commands (the peat binary) ---- */

static char out_buf[1 << 16], err_buf[1 << 12];

static void slurp(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
}

/* Runs `peat ARGS` with stdout and stderr captured; returns the exit status. */
static int peat(const char *args)
{
    char cmd[2048], o[128], e[128];
    snprintf(o, sizeof o, "%s/stdout", tmpdir);
    snprintf(e, sizeof e, "%s/stderr", tmpdir);
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", PEAT_TEST_BIN, args, o, e);
    int rc = system(cmd);
    slurp(o, out_buf, sizeof out_buf);
    slurp(e, err_buf, sizeof err_buf);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The probe count of a `peat predict` report's stage line (-1 when missing). */
static int probes_of(const char *out)
{
    const char *q = strstr(out, "repeated), ");
    int n = -1;
    if (!q || sscanf(q, "repeated), %d probes", &n) != 1) return -1;
    return n;
}

Test(cli, calibrate_predict_budget, .init = mktmp, .timeout = 600)
{
    char a[512];
    snprintf(a, sizeof a, "calibrate-latency --cache-dir %s", tmpdir);
    cr_assert_eq(peat(a), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "calibration cost") && strstr(out_buf, "reused 0 from the cache"),
              "first calibration measures everything:\n%s", out_buf);
    cr_assert(strstr(out_buf, "gemm_new") && strstr(out_buf, "harness.signature"));
    cr_assert(strstr(out_buf, "clock: "), "the clock (or that it is unknown) is reported");
    cr_assert_eq(peat(a), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "calibrated 0 kernels"), "the cache is reused:\n%s", out_buf);

    snprintf(a, sizeof a, "predict --kernel gemm_new --flow mlp --cache-dir %s", tmpdir);
    cr_assert_eq(peat(a), 0, "%s", err_buf);
    const char *want[] = {"per op call", "golden iteration", "profile",    "playback",
                          "probes",      "analyze",          "runtime-fi", "total"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(out_buf, want[i]), "predict shows '%s':\n%s", want[i], out_buf);
    /* the stages the default run runs: probes (GEMM's shape and value probes) and runtime FI
     * with its default band (3 runs) and frequency (1) over the profiled iterations */
    cr_assert_gt(probes_of(out_buf), 0, "%s", out_buf);
    cr_assert(strstr(out_buf, "runtime FI: 4 runs (1 frequencies) x 200 iterations"), "%s",
              out_buf);
    snprintf(a, sizeof a,
             "predict --kernel gemm_new --flow mlp --no-probes --runtime-freq 1,1/10 "
             "--runtime-band 2 --cache-dir %s",
             tmpdir);
    cr_assert_eq(peat(a), 0, "%s", err_buf);
    cr_assert_eq(probes_of(out_buf), 0, "%s", out_buf);
    cr_assert(strstr(out_buf, "runtime FI: 4 runs (2 frequencies)"), "%s", out_buf);
    snprintf(a, sizeof a, "predict --kernel gemm_new --flow mlp --no-runtime --cache-dir %s",
             tmpdir);
    cr_assert_eq(peat(a), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "runtime FI: 0 runs"), "%s", out_buf);

    snprintf(a, sizeof a, "run --kernel gemm_new --budget 0.001s --cache-dir %s --out %s/r", tmpdir,
             tmpdir);
    cr_assert_eq(peat(a), 2, "a budget below the minimum is refused");
    cr_assert(strstr(err_buf, "too small") && strstr(err_buf, "needs"), "%s", err_buf);
    snprintf(a, sizeof a, "run --kernel gemm_new --budget 90x --out %s/r", tmpdir);
    cr_assert_eq(peat(a), 2);
    cr_assert(strstr(err_buf, "budget"), "%s", err_buf);
    snprintf(a, sizeof a, "run --kernel gemm_new --budget 60s --calls 5 --cache-dir %s --out %s/r",
             tmpdir, tmpdir);
    cr_assert_eq(peat(a), 2, "--budget and --calls exclude each other");
    cr_assert(strstr(err_buf, "--budget"), "%s", err_buf);
    snprintf(a, sizeof a, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(a), 0);
}

/* The roofline class: intensity against the device's ridge point (hand-computed intensities). */
Test(views, roofline_class_by_intensity)
{
    peat_pred_device d = cpu_dev(1); /* peak 1e10, bandwidth 1e10: ridge 1 flop/byte */
    peat_kernel g = {.name = "g", .op = PEAT_OP_GEMM, .out_dtype = PEAT_DTYPE_F32};
    peat_kernel s = {.name = "s", .op = PEAT_OP_SOFTMAX, .out_dtype = PEAT_DTYPE_F32};
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[2] = p.i[3] = p.i[4] = 64, p.i[5] = 1; /* 2*64^3 flops over 3*64^2*4 bytes: 10.7 */
    cr_assert_eq(peat_predictor_classify(&g, &p, &d), PEAT_PRED_COMPUTE);
    d.peak_flops = 2e11; /* ridge 20 */
    cr_assert_eq(peat_predictor_classify(&g, &p, &d), PEAT_PRED_MEMORY);
    peat_op_params q;
    peat_predictor_shape(PEAT_OP_SOFTMAX, 48, 0, &q);
    d.peak_flops = 1e9; /* ridge 0.1: softmax still has no tiles */
    cr_assert_eq(peat_predictor_classify(&s, &q, &d), PEAT_PRED_MEMORY);
}
