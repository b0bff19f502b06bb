/* test_capture.c: `peat run --capture` on a file written as peat_torch writes one (the store's
 * writer, flow "torch:<model>") and libpeat.so's exports, without torch. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "store/store.h"

static char dir[256];
static char out_buf[1 << 16];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/peat_test_capture_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK, "%s", peat_error_last());
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Runs `peat ARGS` in the folder cwd (NULL: this one), stdout and stderr into out_buf; returns
 * the exit status. */
static int peat_in(const char *cwd, const char *args)
{
    char cmd[2048], path[300];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd, "cd %s && %s %s >%s 2>&1", cwd ? cwd : ".", PEAT_TEST_BIN, args,
             path);
    int rc = system(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out_buf, 1, sizeof out_buf - 1, f) : 0;
    out_buf[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

static int peat(const char *args)
{
    return peat_in(NULL, args);
}

/* One GEMM record of shape M x N x K (B given as B^T, as a linear layer's weight), golden output
 * by the golden kernel, as peat_torch records an aten.mm of a layer. */
static peat_record *gemm_record(peat_rng_t *rng, uint64_t id, int64_t M, int64_t N, int64_t K,
                                const char *layer, peat_phase phase)
{
    peat_record *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->id = r->call_index = id;
    r->op = PEAT_OP_GEMM;
    r->p.i[1] = 1, r->p.i[2] = M, r->p.i[3] = N, r->p.i[4] = K, r->p.i[5] = 1;
    r->p.f[0] = 1.0;
    r->n_in = 2, r->n_out = 1;
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, M, K, &r->in[0]), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc2(PEAT_DTYPE_F32, N, K, &r->in[1]), PEAT_OK);
    peat_rng_fill_gaussian(rng, r->in[0], 1.0);
    peat_rng_fill_gaussian(rng, r->in[1], 0.1);
    peat_args a = peat_record_args(r);
    cr_assert_eq(peat_op_alloc_outputs(&a, PEAT_DTYPE_F32), PEAT_OK);
    cr_assert_eq(peat_kernel_run(peat_registry_find("gemm_golden"), &a), PEAT_OK, "%s",
                 peat_error_last());
    r->golden[0] = a.out[0];
    snprintf(r->flow, sizeof r->flow, "torch:FakeNet");
    snprintf(r->layer, sizeof r->layer, "%s", layer);
    snprintf(r->golden_kernel, sizeof r->golden_kernel, "torch:aten.mm[f32]");
    r->iter = (int64_t)id / 4;
    r->phase = phase;
    return r;
}

/* A capture of 24 GEMM calls over 6 iterations (odd sizes: partial tiles everywhere), with the
 * loss of each iteration logged (peat_torch's cap.log()) or none. */
static void write_capture_logged(const char *path, int log_loss)
{
    peat_store_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.flow, sizeof m.flow, "torch:FakeNet");
    snprintf(m.kernel, sizeof m.kernel, "torch");
    m.iters = 6;
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(path, &m, &s), PEAT_OK, "%s", peat_error_last());
    peat_rng_t *rng = peat_rng_new(7);
    static const int64_t shapes[4][3] = {{37, 65, 33}, {37, 33, 65}, {65, 33, 37}, {33, 37, 65}};
    static const char *const layers[4] = {"blocks.0.fc1", "blocks.0.fc2", "blocks.1.fc1", "head"};
    for (uint64_t id = 0; id < 24; id++) {
        const int64_t *sh = shapes[id % 4];
        peat_record *r = gemm_record(rng, id, sh[0], sh[1], sh[2], layers[id % 4],
                                     id % 2 ? PEAT_PHASE_BWD : PEAT_PHASE_FWD);
        cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
        peat_record_free(r);
    }
    for (int64_t it = 0; it < 6 && log_loss; it++)
        cr_assert_eq(peat_store_metrics_append(s, it, 2.0 - 0.1 * (double)it, NAN), PEAT_OK);
    peat_rng_free(rng);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
}

static void write_capture(const char *path)
{
    write_capture_logged(path, 1);
}

TestSuite(capture, .init = setup, .fini = teardown, .timeout = 600);

Test(capture, replay_judges_captured_calls)
{
    char cap[300], args[1024];
    snprintf(cap, sizeof cap, "%s/cap.h5", dir);
    write_capture(cap);
    snprintf(args, sizeof args, "run --kernel gemm_new --capture %s --out %s/new", cap, dir);
    cr_assert_eq(peat(args), 0, "gemm_new on captured calls: %s", out_buf);
    cr_assert_not_null(strstr(out_buf, "states from PyTorch: model FakeNet, 24 gemm calls"),
                       "the run says where its calls came from: %s", out_buf);
    cr_assert_not_null(strstr(out_buf, "runtime FI skipped"), "%s", out_buf);
    cr_assert_not_null(strstr(out_buf, "verdict: PASS"), "%s", out_buf);
    snprintf(args, sizeof args, "run --kernel gemm_bf16 --capture %s --out %s/bf16 --no-probes",
             cap, dir);
    peat(args);
    cr_assert_not_null(strstr(out_buf, "REDUCED_PRECISION"), "gemm_bf16: %s", out_buf);
    snprintf(args, sizeof args, "inspect %s/new/campaign.h5", dir);
    cr_assert_eq(peat(args), 0, "%s", out_buf);
    cr_assert_not_null(strstr(out_buf, "flow torch:FakeNet"), "%s", out_buf);
    cr_assert_not_null(strstr(out_buf, "runtime (skipped: captured calls"), "%s", out_buf);
    char md[400];
    snprintf(md, sizeof md, "grep -q \"States from PyTorch: .* model FakeNet\" %s/new/summary.md",
             dir);
    cr_assert_eq(system(md), 0, "summary.md says where the calls came from");
}

/* The class tests/zoo/manifest.tsv gives a zoo kernel on the built-in flows. */
static void manifest_class(const char *kernel, char *cls, size_t n)
{
    char path[400], line[512];
    snprintf(path, sizeof path, "%s/tests/zoo/manifest.tsv", PEAT_TEST_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    cls[0] = 0;
    while (fgets(line, sizeof line, f)) {
        char k[128], flow[32], c[64];
        if (sscanf(line, "%127s %31s %63s", k, flow, c) == 3 && !strcmp(k, kernel))
            snprintf(cls, n, "%s", c);
    }
    fclose(f);
    cr_assert(cls[0], "%s is not in the zoo's manifest", kernel);
}

Test(capture, zoo_defect_keeps_its_class)
{
    char cap[300], args[1024], cls[64], want[80];
    snprintf(cap, sizeof cap, "%s/cap.h5", dir);
    write_capture(cap);
    manifest_class("zoo_gemm_edge_tile", cls, sizeof cls);
    snprintf(args, sizeof args,
             "run --plugin %s --kernel zoo_gemm_edge_tile --capture %s --out %s/z", PEAT_TEST_ZOO,
             cap, dir);
    cr_assert_eq(peat(args), 1, "a defect FAILs: %s", out_buf);
    /* the primary finding is the first one printed after the table */
    snprintf(want, sizeof want, "\n%s ", cls);
    cr_assert_not_null(strstr(out_buf, want), "primary class %s as on the built-in flow: %s", cls,
                       out_buf);
}

Test(capture, bad_uses_are_refused_in_one_line)
{
    char cap[300], args[1024];
    snprintf(cap, sizeof cap, "%s/cap.h5", dir);
    write_capture(cap);
    snprintf(args, sizeof args, "run --kernel softmax_online --capture %s --out %s/a", cap, dir);
    cr_assert_neq(peat(args), 0, "a capture without the kernel's op: %s", out_buf);
    cr_assert_not_null(strstr(out_buf, "holds no softmax calls"), "%s", out_buf);
    snprintf(args, sizeof args, "run --kernel gemm_new --capture %s --flow mlp --out %s/b", cap,
             dir);
    cr_assert_neq(peat(args), 0);
    cr_assert_not_null(strstr(out_buf, "--capture replaces the flow"), "%s", out_buf);
    snprintf(args, sizeof args, "run --kernel gemm_new --capture %s/none.h5 --out %s/c", dir, dir);
    cr_assert_neq(peat(args), 0, "a missing capture file: %s", out_buf);
}

Test(capture, libpeat_exports_the_host_api_only)
{
    char path[400];
    snprintf(path, sizeof path, "%s/libpeat.so", PEAT_TEST_BUILD_DIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "dlopen %s: %s", path, dlerror());
    static const char *const api[] = {"peat_tensor_alloc",     "peat_kernel_run",
                                      "peat_registry_find",    "peat_error_last",
                                      "peat_pyapi_call_write", "peat_pyapi_runtime_judge"};
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++)
        cr_assert_not_null(dlsym(h, api[i]), "%s is exported", api[i]);
    static const char *const hidden[] = {"peat_store_call_write", "peat_campaign_stage_profile",
                                         "peat_detector_band_build", "peat_runtime_builtin_init"};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        cr_assert_null(dlsym(h, hidden[i]), "%s (internal) is not exported", hidden[i]);
    dlclose(h);
}

/* The line of text that starts with prefix in text (without its newline), into buf. */
static void line_of(const char *text, const char *prefix, char *buf, size_t n)
{
    const char *p = strstr(text, prefix);
    cr_assert_not_null(p, "no line \"%s\" in: %s", prefix, text);
    size_t len = strcspn(p, "\n");
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

static void slurp_file(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
}

Test(capture, output_names_are_safe_characters_only)
{
    char name[64] = "torch:Tiny GPT/v1.2_a-b";
    peat_campaign_safe_name(name);
    cr_assert_str_eq(name, "torch_Tiny_GPT_v1.2_a-b",
                     "every byte but letters, digits, '-', '_', '.' becomes '_': got %s", name);
    /* the default output folder of a capture run (flow "torch:FakeNet") */
    char cap[300], args[1024], out[300];
    snprintf(cap, sizeof cap, "%s/cap.h5", dir);
    write_capture(cap);
    snprintf(args, sizeof args, "run --kernel gemm_new --capture %s --no-probes --quiet", cap);
    cr_assert_eq(peat_in(dir, args), 0, "%s", out_buf);
    snprintf(out, sizeof out, "%s/peat-out", dir);
    DIR *d = opendir(out);
    cr_assert_not_null(d, "the run made no %s: %s", out, out_buf);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        n++;
        cr_assert_eq(strncmp(e->d_name, "gemm_new-torch_FakeNet-cpu-", 27), 0,
                     "the folder is named kernel-flow-backend-time, the colon made safe: %s",
                     e->d_name);
        cr_assert_eq(strspn(e->d_name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789-_."),
                     strlen(e->d_name), "an unsafe character in %s", e->d_name);
    }
    closedir(d);
    cr_assert_eq(n, 1, "one output folder, found %d", n);
}

Test(capture, reports_say_what_a_capture_has)
{
    char cap[300], args[1024], line[512], path[400];
    static char text[1 << 18];
    snprintf(cap, sizeof cap, "%s/quiet.h5", dir);
    write_capture_logged(cap, 0);
    snprintf(args, sizeof args, "run --kernel gemm_new --capture %s --no-probes --out %s/nolog",
             cap, dir);
    cr_assert_eq(peat(args), 0, "%s", out_buf);
    line_of(out_buf, "verdict:", line, sizeof line);
    cr_assert_null(strstr(line, "loss"), "no loss logged, none shown: %s", line);
    cr_assert_null(strstr(line, "profile"), "a capture has no profile stage: %s", line);
    cr_assert_null(strstr(line, "runtime FI"), "nor runtime FI of its own: %s", line);
    cr_assert_not_null(strstr(line, "playback"), "the stages it has are timed: %s", line);
    snprintf(path, sizeof path, "%s/nolog/summary.md", dir);
    slurp_file(path, text, sizeof text);
    cr_assert_null(strstr(text, "Training ("), "summary.md without a loss: %s", text);
    cr_assert_null(strstr(text, "nan"), "summary.md shows no NaN: %s", text);
    snprintf(path, sizeof path, "%s/nolog/report.html", dir);
    slurp_file(path, text, sizeof text);
    line_of(text, "</pre><p><small>peat ", line, sizeof line);
    cr_assert_null(strstr(line, "profile"), "report.html times no profile stage: %s", line);
    cr_assert_null(strstr(line, "runtime FI"), "report.html: %s", line);
    /* with a logged loss the capture shows it, still without profile time */
    snprintf(cap, sizeof cap, "%s/logged.h5", dir);
    write_capture_logged(cap, 1);
    snprintf(args, sizeof args, "run --kernel gemm_new --capture %s --no-probes --out %s/log", cap,
             dir);
    cr_assert_eq(peat(args), 0, "%s", out_buf);
    line_of(out_buf, "verdict:", line, sizeof line);
    cr_assert_not_null(strstr(line, "loss 2 -> 1.5;"), "the logged loss: %s", line);
    cr_assert_null(strstr(line, "profile"), "%s", line);
    snprintf(path, sizeof path, "%s/log/summary.md", dir);
    slurp_file(path, text, sizeof text);
    cr_assert_not_null(strstr(text, "Training (PyTorch, as captured): loss 2 -> 1.5. "),
                       "summary.md says whose loss it is: %s", text);
}
