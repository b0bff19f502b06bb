/* test_campaign.c: whole campaigns: kill-and-resume through the CLI, bit-identical records for the
 * same seed, every candidate on every flow that calls its op, finetuning from a checkpoint; the
 * runner's own failure paths (device query, shared output buffers). */
#include <criterion/criterion.h>

#include "core/backend_impl.h"
#include "harness/run/run.h"
#include "harness/campaign/campaign.h"
#include "harness/runtime/builtin.h"
#include "harness/isolate/isolate.h"
#include "harness/nightly/jsonread.h"
#include "store/store_test.h"
#include "store/store.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A stored record with its exact outputs (recomputed where the file does not keep them). */
static peat_status read_call(peat_store_t *s, int64_t i, peat_record **r)
{
    peat_status st = peat_runtime_builtin_init();
    if (st == PEAT_OK) st = peat_store_call_read(s, i, r);
    if (st == PEAT_OK) st = peat_record_compute_exact(*r);
    return st;
}

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-campaign-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

/* every_candidate_on_every_flow runs ~40 whole campaigns: about 11 minutes under ASan+UBSan */
TestSuite(campaign, .init = setup, .fini = teardown, .timeout = 1800);

/* Runs the peat binary with an optional environment assignment; returns the raw wait status. */
static int run_peat(const char *env, const char *fmt, ...)
{
    char args[1024], cmd[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s %s >%s/log 2>&1", env ? env : "", PEAT_TEST_BIN, args, tmpdir);
    return system(cmd);
}

static int exited(int st, int code)
{
    return WIFEXITED(st) && WEXITSTATUS(st) == code;
}

/* The last run_peat's output (stdout and stderr), at most n - 1 bytes of it. */
static const char *run_log(char *buf, size_t n)
{
    char p[400];
    snprintf(p, sizeof p, "%s/log", tmpdir);
    buf[0] = 0;
    FILE *f = fopen(p, "r");
    if (f) buf[fread(buf, 1, n - 1, f)] = 0, fclose(f);
    return buf;
}

static peat_store_t *open_store(const char *dir, const char *name)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s/%s", tmpdir, dir, name);
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_open(p, 0, &s), PEAT_OK, "%s: %s", p, peat_error_last());
    return s;
}

/* Every record of a holds the same tensors as the record of the same id in b. */
static void assert_same_records(peat_store_t *a, peat_store_t *b)
{
    cr_assert_eq(peat_store_call_count(a), peat_store_call_count(b),
                 "record counts differ: %lld vs %lld", (long long)peat_store_call_count(a),
                 (long long)peat_store_call_count(b));
    for (int64_t i = 0; i < peat_store_call_count(a); i++) {
        peat_record *ra = NULL, *rb = NULL;
        int64_t j;
        cr_assert_eq(read_call(a, i, &ra), PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(peat_store_call_find(b, ra->id, &j), PEAT_OK, "record %llu missing",
                     (unsigned long long)ra->id);
        cr_assert_eq(read_call(b, j, &rb), PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(ra->op, rb->op);
        cr_assert_eq(ra->n_in, rb->n_in);
        cr_assert_eq(ra->n_out, rb->n_out);
        for (int k = 0; k < ra->n_in; k++)
            cr_assert_eq(memcmp(ra->in[k]->data, rb->in[k]->data, peat_tensor_nbytes(ra->in[k])), 0,
                         "record %llu input %d differs", (unsigned long long)ra->id, k);
        for (int k = 0; k < ra->n_out; k++) {
            cr_assert_eq(
                memcmp(ra->golden[k]->data, rb->golden[k]->data, peat_tensor_nbytes(ra->golden[k])),
                0);
            cr_assert_eq(
                memcmp(ra->exact[k]->data, rb->exact[k]->data, peat_tensor_nbytes(ra->exact[k])),
                0);
        }
        peat_record_free(ra);
        peat_record_free(rb);
    }
    cr_assert_eq(peat_store_state_count(a), peat_store_state_count(b));
    cr_assert_eq(peat_store_metrics_count(a), peat_store_metrics_count(b));
}

#define FLAGS "--kernel gemm_new --iters 10 --calls 20 --checkpoints every:4 --activations 3"

Test(campaign, same_seed_bit_identical_records)
{
    cr_assert(exited(run_peat(NULL, "run " FLAGS " --out %s/a", tmpdir), 0));
    cr_assert(exited(run_peat(NULL, "run " FLAGS " --out %s/b", tmpdir), 0));
    peat_store_t *a = open_store("a", "campaign.h5"), *b = open_store("b", "campaign.h5");
    cr_assert(peat_store_call_count(a) > 20, "activations should add records beyond --calls");
    assert_same_records(a, b);
    peat_store_close(a);
    peat_store_close(b);
    cr_assert(exited(run_peat(NULL, "run " FLAGS " --seed 2 --out %s/c", tmpdir), 0));
    peat_store_t *c = open_store("c", "campaign.h5");
    peat_record *r0 = NULL, *r1 = NULL;
    a = open_store("a", "campaign.h5");
    cr_assert_eq(read_call(a, 0, &r0), PEAT_OK);
    cr_assert_eq(read_call(c, 0, &r1), PEAT_OK);
    cr_assert_neq(memcmp(r0->in[0]->data, r1->in[0]->data, peat_tensor_nbytes(r0->in[0])), 0,
                  "another seed must record other tensors");
    peat_record_free(r0), peat_record_free(r1);
    peat_store_close(a), peat_store_close(c);
}

/* The options of FLAGS, for in-process runs. */
static void flags_opts(peat_campaign_opts *o, const char *dir, char *out, size_t n)
{
    peat_campaign_opts_default(o);
    o->kernel = "gemm_new", o->iters = 10, o->calls = 20, o->checkpoint_iters = "every:4",
    o->activation_iters = "3", o->quiet = 1;
    snprintf(out, n, "%s/%s", tmpdir, dir);
    o->out_dir = out;
    /* recorded in the file as `peat run` records its own (`--resume DIR` alone reads it back) */
    static char argv[600];
    snprintf(argv, sizeof argv, "peat run " FLAGS " --out %s", out);
    o->argv = argv;
}

static int64_t kill_step = -1;

/* The store's test hook: the process dies at store write step kill_step. */
static void kill_hook(void *user, peat_store_t *s, int64_t step)
{
    (void)user, (void)s;
    if (step == kill_step) raise(SIGKILL);
}

/* Runs the FLAGS campaign into dir in a child process killed at its kill-th store write step;
 * returns the child's wait status. */
static int run_killed(const char *dir, int64_t kill)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        peat_campaign_opts o;
        char out[300];
        flags_opts(&o, dir, out, sizeof out);
        kill_step = peat_store_step_count() + kill;
        peat_store_test_hook_set(kill_hook, NULL);
        peat_campaign_result res;
        _exit(peat_run_campaign(&o, &res) == PEAT_OK ? 0 : 3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

/* The uninterrupted reference campaign (the flags options, into "ref"), run in-process: the
 * store write steps a whole campaign takes. */
static int64_t reference_steps(peat_campaign_opts *o, char *ref, size_t cap)
{
    flags_opts(o, "ref", ref, cap);
    peat_campaign_result res;
    int64_t s0 = peat_store_step_count();
    cr_assert_eq(peat_run_campaign(o, &res), PEAT_OK, "%s", peat_error_last());
    return peat_store_step_count() - s0;
}

Test(campaign, killed_runs_resume_without_loss_or_duplicates)
{
    /* reference run, in-process, to learn how many store write steps a whole campaign takes */
    peat_campaign_opts o;
    char ref[300];
    int64_t steps = reference_steps(&o, ref, sizeof ref);
    cr_assert(steps > 20, "a campaign should take many store steps, saw %lld", (long long)steps);
    peat_store_t *r = open_store("ref", "campaign.h5");

    const double at[] = {0.05, 0.3, 0.55, 0.8, 0.97};
    for (int i = 0; i < 5; i++) {
        int64_t kill = (int64_t)(at[i] * (double)steps);
        char dir[32], partial[400];
        snprintf(dir, sizeof dir, "k%d", i);
        int st = run_killed(dir, kill);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "kill at step %lld: the run was not killed (status %d)", (long long)kill, st);
        snprintf(partial, sizeof partial, "%s/%s/campaign.h5", tmpdir, dir);
        struct stat sb;
        cr_assert_neq(stat(partial, &sb), 0, "a killed run must not leave a file looking complete");
        /* what survived is readable */
        snprintf(partial, sizeof partial, "%s/%s/campaign.h5.partial", tmpdir, dir);
        if (stat(partial, &sb) == 0) {
            peat_store_t *p = NULL;
            cr_assert_eq(peat_store_open(partial, 0, &p), PEAT_OK, "kill at %lld: %s",
                         (long long)kill, peat_error_last());
            cr_assert(peat_store_call_count(p) <= peat_store_call_count(r));
            peat_store_close(p);
        }
        st = run_peat(NULL, "run --resume " FLAGS " --out %s/%s", tmpdir, dir);
        char log[4096];
        /* the resumed run's own words (a sanitizer's report among them) */
        cr_assert(exited(st, 0), "resume after a kill at step %lld failed (status %d): %s",
                  (long long)kill, st, run_log(log, sizeof log));
        peat_store_t *k = open_store(dir, "campaign.h5");
        assert_same_records(r, k);
        peat_store_close(k);
    }
    peat_store_close(r);
}

/* Overwrites element 1 of the tensor whose first bytes are head (found in the file's raw pool,
 * where small tensors are stored as they are) with 1.48e22, as a damaged disk would. */
static void damage_tensor(const char *path, const void *head, size_t n)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    unsigned char *b = malloc((size_t)len);
    cr_assert_not_null(b);
    rewind(f);
    cr_assert_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    long at = -1;
    for (long i = 0; i + (long)n <= len && at < 0; i++)
        if (memcmp(b + i, head, n) == 0) at = i;
    cr_assert(at >= 0, "the tensor's bytes are not in %s as they are", path);
    float big = 1.48e22f;
    fseek(f, at + 4, SEEK_SET);
    cr_assert_eq(fwrite(&big, 4, 1, f), 1u);
    fclose(f);
    free(b);
}

Test(campaign, resume_rewrites_a_damaged_record_from_its_regeneration)
{
    /* before: resume kept the damaged tensor (1.48e22 where the run had 0.54) and finished */
    peat_campaign_opts o;
    char ref[300];
    int64_t steps = reference_steps(&o, ref, sizeof ref);
    int st = run_killed("d", steps * 6 / 10);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the run was not killed (status %d)", st);
    /* damage input 0 of a record in the middle of what the killed run kept */
    char partial[400];
    snprintf(partial, sizeof partial, "%s/d/campaign.h5.partial", tmpdir);
    peat_store_t *p = open_store("d", "campaign.h5.partial");
    int64_t kept = peat_store_call_count(p);
    cr_assert(kept >= 4, "the killed run kept %lld records", (long long)kept);
    peat_record *victim = NULL;
    cr_assert_eq(peat_store_call_read(p, kept / 2, &victim), PEAT_OK, "%s", peat_error_last());
    peat_store_close(p);
    uint64_t id = victim->id;
    float was = ((const float *)victim->in[0]->data)[1];
    size_t head = peat_tensor_nbytes(victim->in[0]) < 64 ? peat_tensor_nbytes(victim->in[0]) : 64;
    damage_tensor(partial, victim->in[0]->data, head);
    peat_record_free(victim);
    p = open_store("d", "campaign.h5.partial");
    peat_record *bad = NULL;
    cr_assert_eq(peat_store_call_read(p, kept / 2, &bad), PEAT_ERR_FORMAT,
                 "the damage must show in the record's hash");
    peat_store_close(p);

    st = run_peat(NULL, "run --resume " FLAGS " --out %s/d", tmpdir);
    char log[400], text[8192], want[64];
    snprintf(log, sizeof log, "%s/log", tmpdir);
    FILE *lf = fopen(log, "r");
    size_t nt = lf ? fread(text, 1, sizeof text - 1, lf) : 0;
    text[nt] = 0;
    if (lf) fclose(lf);
    cr_assert(exited(st, 0), "resume over a damaged record failed (status %d):\n%s", st, text);
    /* the id among the damaged ones (a deduplicated tensor is also the output of another call) */
    const char *ids = strstr(text, "call ids: "), *end = ids ? strchr(ids, ';') : NULL;
    cr_assert(ids && end, "the damaged records' ids must be named:\n%s", text);
    char list[256];
    snprintf(list, sizeof list, "%.*s", (int)(end - ids - 10), ids + 10); /* "83, 84" */
    snprintf(want, sizeof want, "%llu", (unsigned long long)id);
    int named = 0;
    for (char *tok = strtok(list, ", "); tok; tok = strtok(NULL, ", ")) named |= !strcmp(tok, want);
    cr_assert(named, "call id %llu must be among the damaged:\n%s", (unsigned long long)id, text);
    cr_assert_null(strstr(text, "not deterministic"), "%s", text);
    /* the final file holds the regenerated record: the reference run's tensors, bit for bit */
    peat_store_t *r = open_store("ref", "campaign.h5"), *k = open_store("d", "campaign.h5");
    assert_same_records(r, k);
    int64_t j;
    cr_assert_eq(peat_store_call_find(k, id, &j), PEAT_OK);
    peat_record *now = NULL;
    cr_assert_eq(peat_store_call_read(k, j, &now), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(((const float *)now->in[0]->data)[1], was);
    peat_record_free(now);
    peat_store_close(r);
    peat_store_close(k);
    st = run_peat(NULL, "inspect --verify %s/d/campaign.h5", tmpdir);
    cr_assert(exited(st, 0), "the resumed file must verify");
}

Test(campaign, resume_refuses_other_options)
{
    int st = run_killed("x", 40);
    cr_assert(!exited(st, 0));
    st = run_peat(NULL, "run --resume --kernel gemm_new --iters 11 --calls 20 --out %s/x", tmpdir);
    cr_assert(exited(st, 2), "resume with other --iters must be refused");
    st = run_peat(NULL,
                  "run --resume --kernel gemm_new --iters 10 --calls 21 --checkpoints every:4 "
                  "--activations 3 --out %s/x",
                  tmpdir);
    cr_assert(exited(st, 2), "resume with another recording policy must be refused");
    st = run_peat(NULL, "run --resume " FLAGS " --out %s/nothing-here", tmpdir);
    cr_assert(exited(st, 2), "resume without an unfinished campaign must be refused");
}

/* The verdict, findings and the candidate's output hash of a finished campaign. */
static void verdict_of(const char *dir, char *buf, size_t n)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s/signature.json", tmpdir, dir);
    peat_json j;
    cr_assert_eq(peat_nightly_json_load(p, &j), PEAT_OK, "%s", peat_error_last());
    size_t len = (size_t)snprintf(buf, n, "%s hash=%s", peat_nightly_json_str(&j, "verdict", "?"),
                                  peat_nightly_json_str(&j, "candidate.test_hash", "?"));
    const peat_json *fs = peat_nightly_json_get(&j, "findings");
    for (int i = 0; fs && i < fs->n && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, " %s(%s)",
                                peat_nightly_json_str(&fs->items[i], "class", "?"),
                                peat_nightly_json_str(&fs->items[i], "params", "?"));
    peat_nightly_json_free(&j);
}

Test(campaign, resume_dir_alone_after_sigkill_matches_an_uninterrupted_run)
{
    cr_assert(exited(run_peat(NULL, "run " FLAGS " --out %s/u", tmpdir), 0));
    int st = run_killed("k", 40);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the run was not killed (status %d)", st);
    /* options beside --resume DIR that contradict the file are refused, naming the option */
    st = run_peat(NULL, "run --resume %s/k --calls 21", tmpdir);
    cr_assert(exited(st, 2), "a contradicting --calls must be refused");
    char log[400], line[1024];
    snprintf(log, sizeof log, "%s/log", tmpdir);
    FILE *f = fopen(log, "r");
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_assert_null(fgets(line + strlen(line), (int)(sizeof line - strlen(line)), f),
                   "one line expected");
    fclose(f);
    cr_assert(strstr(line, "--calls 21 contradicts") && strstr(line, "started with --calls 20"),
              "%s", line);
    /* DIR alone: every option comes from the campaign file */
    st = run_peat(NULL, "run --resume %s/k --quiet", tmpdir);
    cr_assert(exited(st, 0), "resume of DIR alone failed (status %d)", st);
    peat_store_t *u = open_store("u", "campaign.h5"), *k = open_store("k", "campaign.h5");
    assert_same_records(u, k);
    peat_store_close(u);
    peat_store_close(k);
    char vu[512], vk[512];
    verdict_of("u", vu, sizeof vu);
    verdict_of("k", vk, sizeof vk);
    cr_assert_str_eq(vk, vu, "the resumed run's verdict differs from the uninterrupted one's");
}

static peat_campaign_result run_inproc(const char *kernel, int64_t iters, int task,
                                       const char *from, const char *dir)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = kernel, o.iters = iters, o.calls = 8, o.task = task, o.finetune_from = from;
    char out[300];
    snprintf(out, sizeof out, "%s/%s", tmpdir, dir);
    o.out_dir = out;
    peat_campaign_result res;
    cr_assert_eq(peat_run_campaign(&o, &res), PEAT_OK, "%s: %s", dir, peat_error_last());
    return res;
}

Test(campaign, finetune_from_checkpoint)
{
    peat_campaign_result pre = run_inproc("gemm_new", 60, 0, NULL, "pre");
    char from[300];
    snprintf(from, sizeof from, "%s/pre/campaign.h5", tmpdir);
    peat_campaign_result scratch = run_inproc("gemm_new", 20, 1, NULL, "scratch");
    peat_campaign_result ft = run_inproc("gemm_new", 20, 1, from, "ft");
    /* the shifted task keeps most of the pretraining task: starting from the trained weights the
     * held-out loss after the same number of steps is lower than from random init */
    cr_assert(ft.eval_loss < scratch.eval_loss,
              "finetuned held-out loss %.4f not below from-scratch %.4f (pretrained %.4f)",
              ft.eval_loss, scratch.eval_loss, pre.eval_loss);
    /* a checkpoint of another model is refused */
    int st = run_peat(
        NULL, "run --kernel conv_im2col --iters 2 --calls 2 --finetune-from %s --out %s/bad", from,
        tmpdir);
    cr_assert(exited(st, 2), "a checkpoint of another flow must be refused");
}

/* Every candidate runs on every flow that calls its op; honest fp32 ones pass. */
Test(campaign, every_candidate_on_every_flow)
{
    const char *const *flows = peat_models_flow_names();
    int runs = 0;
    for (int i = 0; i < peat_registry_count(); i++) {
        const peat_kernel *k = peat_registry_at(i);
        if (k->role != PEAT_ROLE_CANDIDATE || strcmp(k->backend, "cpu")) continue;
        int honest = k->in_dtype == PEAT_DTYPE_F32 && k->acc_dtype == PEAT_DTYPE_F32 &&
                     strncmp(k->name, "gelu_tanh", 9);
        int any = 0;
        /* an fp8 GEMM kernel's run trains in fp8 (its op is called nowhere else) */
        peat_flow_config fc;
        memset(&fc, 0, sizeof fc);
        fc.optimizer = PEAT_OPTIM_DEFAULT;
        fc.precision = k->op == PEAT_OP_GEMM_FP8 ? PEAT_PRECISION_FP8 : PEAT_PRECISION_FP32;
        for (int f = 0; flows[f]; f++) {
            if (!(peat_models_flow_op_mask_for(flows[f], &fc) & PEAT_OP_BIT(k->op))) continue;
            any = 1;
            int st = run_peat(NULL, "run --kernel %s --flow %s --iters 6 --calls 8 --out %s/%s-%s",
                              k->name, flows[f], tmpdir, k->name, flows[f]);
            char log[400];
            snprintf(log, sizeof log, "%s/log", tmpdir);
            cr_assert(exited(st, 0) || exited(st, 1), "%s on %s: exit status %d", k->name, flows[f],
                      st);
            if (honest)
                cr_assert(exited(st, 0), "honest fp32 kernel %s fails on %s", k->name, flows[f]);
            runs++;
        }
        cr_assert(any, "candidate %s has no flow that calls %s", k->name, peat_op_name(k->op));
    }
    cr_assert(runs >= 20, "only %d runs", runs);
}

/* ---- the runner's failure paths ---- */

static const char *broken_name(peat_backend_t b)
{
    return "broken";
}
static int broken_count(void)
{
    return 1;
}
static peat_status broken_info(peat_backend_t b, peat_device_info *out)
{
    return PEAT_ERROR(PEAT_ERR_BACKEND, "device query failed (test backend)");
}

/* A backend whose device query fails stops the run with that error, before any file exists
 * (the device name would otherwise be read from an unfilled description). */
Test(campaign, failed_device_query_stops_the_run)
{
    static struct peat_backend_iface broken;
    broken = peat_backend_cpu_iface;
    broken.get_name = broken_name;
    broken.device_count = broken_count;
    broken.device_info = broken_info;
    cr_assert_eq(peat_backend_register("broken", &broken), PEAT_OK);
    peat_kernel k = *peat_registry_find("gemm_new");
    k.name = "gemm_on_broken";
    k.backend = "broken";
    cr_assert_eq(peat_registry_add(&k), PEAT_OK, "%s", peat_error_last());
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    o.kernel = "gemm_on_broken";
    o.iters = 2, o.calls = 2;
    char out[300];
    snprintf(out, sizeof out, "%s/dev", tmpdir);
    o.out_dir = out;
    peat_campaign_result res;
    cr_assert_eq(peat_run_campaign(&o, &res), PEAT_ERR_BACKEND, "%s", peat_error_last());
    cr_assert(strstr(peat_error_last(), "device query failed"), "%s", peat_error_last());
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "no output directory may be made for a failed run");
}

/* Shared (MAP_SHARED | MAP_ANONYMOUS) mappings show in /proc/self/maps as /dev/zero; all: every
 * mapping (the guard regions are private and inaccessible). */
static int mappings(int all)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) n += all || strstr(line, "/dev/zero") != NULL;
    fclose(f);
    return n;
}

static int shared_mappings(void)
{
    return mappings(0);
}

/* When a later output buffer cannot be mapped, the earlier ones are released, not leaked. */
Test(campaign, shared_outputs_released_when_one_fails)
{
    peat_tensor small = {.dtype = PEAT_DTYPE_F32, .ndim = 2, .shape = {64, 64}};
    /* 2^56 bytes: more than any address space maps */
    peat_tensor huge = {.dtype = PEAT_DTYPE_F32, .ndim = 3, .shape = {1 << 20, 1 << 20, 1 << 14}};
    peat_tensor *ok[2] = {&small, &small}, *bad[3] = {&small, &small, &huge};
    int before = shared_mappings(), before_all = mappings(1);
    peat_args a;
    memset(&a, 0, sizeof a);
    cr_assert_eq(peat_isolate_outputs_alloc(&a, ok, 2), PEAT_OK, "%s", peat_error_last());
    /* each buffer: the data between sentinels shared, inside a private inaccessible reservation
     * (the guard regions before and after it; adjacent reservations may merge into one entry) */
    cr_assert_eq(shared_mappings(), before + 2, "two buffers, two shared mappings");
    peat_isolate_outputs_free(&a);
    cr_assert_eq(shared_mappings(), before);
    cr_assert_eq(mappings(1), before_all, "guard regions left behind");
    cr_assert_eq(peat_isolate_outputs_alloc(&a, bad, 3), PEAT_ERR_NOMEM);
    cr_assert_eq(a.n_out, 0);
    cr_assert(a.out[0] == NULL && a.out[1] == NULL);
    cr_assert_eq(shared_mappings(), before, "mappings of the first two buffers leaked");
}

/* The small preset's default run: its runtime stage creates the /runtime tables when it begins.
 * Created after the stage's checkpoints (as before), HDF5 1.10's flush failed in SWMR write mode
 * ("slist not empty") and the run ended in exit 2 with no reports. */
Test(campaign, gpt_small_default_run_finishes_with_runtime_tables)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("a whole small-preset campaign: minutes under ASan (the Release suite runs it)");
#endif
    int st = run_peat(NULL, "run --kernel gemm_new --flow gpt --size small --out %s/gs", tmpdir);
    char log[4096];
    run_log(log, sizeof log);
    cr_assert(exited(st, 0), "gpt --size small did not finish: %s", log);
    cr_assert(strstr(log, "TRAINING_EQUIVALENT") || strstr(log, "DEGRADES") ||
                  strstr(log, "DIVERGES"),
              "no runtime verdict in the output: %s", log);
    st = run_peat(NULL, "inspect --verify %s/gs/campaign.h5", tmpdir);
    cr_assert(exited(st, 0), "the finished campaign does not verify");
    st = run_peat(NULL, "inspect %s/gs", tmpdir);
    cr_assert(strstr(run_log(log, sizeof log), "runtime, commit, report"),
              "the manifest lacks the runtime stage: %s", log);
}
