/* test_isolate.c: the isolated runner (harness/isolate/isolate.c) and its persistent worker
 * (harness/isolate/isolate_worker.c): a crash, an exit, a hang and a stray write each become their
 * outcome and the next call runs clean; state a kernel keeps in a static variable never reaches
 * another call unless the worker is asked to keep it (one training run). */
#define _GNU_SOURCE /* prlimit */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include <stdlib.h>
#include <string.h>

#include "harness/isolate/isolate.h"
#include "harness/isolate/isolate_impl.h"
#include "store/store.h"

enum { R = 4, C = 8 };

/* What the command kernel does, chosen by X[0] (the data decides, so one kernel covers all). */
enum {
    CMD_SUM = 0,
    CMD_CRASH = 13,
    CMD_EXIT = 14,
    CMD_SPIN = 15,
    CMD_OOB = 16,
    CMD_HEAD = 17,
    CMD_MUTATE = 18,
    CMD_FAIL = 19,
    CMD_PEEK = 20, /* reads the first byte of the guard region after the output's pages */
    CMD_POKE = 21  /* writes it */
};

static void row_sums(const peat_args *a, float extra)
{
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    for (int r = 0; r < (int)a->p.i[0]; r++) {
        float s = 0.0f;
        for (int c = 0; c < C; c++) s += x[r * C + c];
        y[r] = s + extra;
    }
}

static volatile int *volatile crash_at; /* NULL */
static size_t guard_at; /* bytes from an output's start to its guard region after it */

static peat_status k_command(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const float *x = a->in[0]->data;
    float *y = a->out[0]->data;
    switch ((int)x[0]) {
    case CMD_CRASH:
        *crash_at = 1;
        break;
    case CMD_EXIT:
        exit(0);
    case CMD_SPIN:
        for (volatile unsigned long n = 0;; n++) {
        }
    case CMD_OOB:
        y[R] = 1.0f; /* just past the end */
        break;
    case CMD_HEAD:
        ((volatile char *)y)[-4096] = 1; /* the first byte of the page before the output */
        break;
    case CMD_MUTATE:
        ((float *)x)[3] = 9.0f;
        break;
    case CMD_FAIL:
        return PEAT_ERROR(PEAT_ERR_KERNEL, "refused on purpose");
    case CMD_PEEK:
        (void)((volatile char *)y)[guard_at];
        break;
    case CMD_POKE:
        ((volatile char *)y)[guard_at] = 1;
        break;
    default:
        break;
    }
    row_sums(a, 0.0f);
    return PEAT_OK;
}

/* Right on the first call of its process, then off by the number of calls before: the state a
 * static variable keeps. */
static int state_calls;
static peat_status k_stateful(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    row_sums(a, (float)state_calls++);
    return PEAT_OK;
}

static const peat_kernel K_CMD = {.name = "test_command",
                                  .op = PEAT_OP_REDUCE,
                                  .role = PEAT_ROLE_CANDIDATE,
                                  .backend = "cpu",
                                  .fn = k_command};
static const peat_kernel K_STATE = {.name = "test_stateful",
                                    .op = PEAT_OP_REDUCE,
                                    .role = PEAT_ROLE_CANDIDATE,
                                    .backend = "cpu",
                                    .fn = k_stateful};

typedef struct {
    peat_tensor *x;
    peat_args a;
} call_case;

/* X[r][c] = r + c / 8 with X[0] = cmd (rows R, or more: another layout of the same call); the
 * output guarded (peat_isolate_outputs_alloc). */
static void case_make_rows(call_case *cc, int cmd, int rows)
{
    int64_t xs[2] = {rows, C}, ys[1] = {rows};
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, 2, xs, &cc->x), PEAT_OK);
    float *x = cc->x->data;
    for (int i = 0; i < rows * C; i++) x[i] = (float)(i / C) + (float)(i % C) / 8.0f;
    x[0] = (float)cmd;
    memset(&cc->a, 0, sizeof cc->a);
    cc->a.op = PEAT_OP_REDUCE;
    cc->a.p.i[0] = rows, cc->a.p.i[1] = C, cc->a.p.i[2] = 0;
    cc->a.n_in = 1;
    cc->a.in[0] = cc->x;
    peat_tensor *tmpl;
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, 1, ys, &tmpl), PEAT_OK);
    cr_assert_eq(peat_isolate_outputs_alloc(&cc->a, &tmpl, 1), PEAT_OK);
    peat_tensor_free(tmpl);
}

static void case_make(call_case *cc, int cmd)
{
    case_make_rows(cc, cmd, R);
}

static void case_free(call_case *cc)
{
    peat_isolate_outputs_free(&cc->a);
    peat_tensor_free(cc->x);
}

/* Whether the output holds the row sums (plus extra) of X. */
static int sums_right(const call_case *cc, float extra)
{
    const float *x = cc->x->data, *y = cc->a.out[0]->data;
    for (int r = 0; r < (int)cc->a.p.i[0]; r++) {
        float s = 0.0f;
        for (int c = 0; c < C; c++) s += x[r * C + c];
        if (y[r] != s + extra) return 0;
    }
    return 1;
}

/* One call of k with command cmd through w: its outcome, why in `why`; the output checked when
 * the call is expected DONE. */
static peat_call_outcome call_rows(peat_isolate_worker *w, int cmd, int rows, double timeout_s,
                                   char *why)
{
    call_case cc;
    case_make_rows(&cc, cmd, rows);
    peat_call_outcome out;
    cr_assert_eq(peat_isolate_worker_call(w, &cc.a, timeout_s, &out, why, 256), PEAT_OK,
                 "the runner itself failed: %s", peat_error_last());
    if (out == PEAT_CALL_DONE)
        cr_assert(sums_right(&cc, 0.0f), "cmd %d: DONE but the output is not the row sums", cmd);
    case_free(&cc);
    return out;
}

static peat_call_outcome call_w(peat_isolate_worker *w, int cmd, double timeout_s, char *why)
{
    return call_rows(w, cmd, R, timeout_s, why);
}

Test(isolate, worker_survives_each_misbehaving_call_and_the_next_is_clean, .timeout = 120)
{
    peat_isolate_worker *w;
    cr_assert_eq(peat_isolate_worker_create(&K_CMD, 0, &w), PEAT_OK);
    char why[256];
    cr_assert_eq(call_w(w, CMD_SUM, 60, why), PEAT_CALL_DONE, "%s", why);
    static const struct {
        int cmd;
        peat_call_outcome want;
        const char *says;
    } bad[] = {
        {CMD_CRASH, PEAT_CALL_FAILED, "crashed"},
        {CMD_EXIT, PEAT_CALL_DUE, "ended its process (exit code 0)"},
        {CMD_SPIN, PEAT_CALL_HUNG, "hung: killed after 1 s"},
        {CMD_OOB, PEAT_CALL_OOB_WRITE, "element 4, byte offset 16 (past the end of its 4)"},
        {CMD_HEAD, PEAT_CALL_OOB_WRITE, "byte offset -4096 (before the start of its 4)"},
        {CMD_MUTATE, PEAT_CALL_INPUT_MUTATION, "wrote into input 0 at element 3"},
        {CMD_FAIL, PEAT_CALL_FAILED, "refused on purpose"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* the spin needs the deadline; the others a deadline no slow build reaches */
        double t = bad[i].cmd == CMD_SPIN ? 1.0 : 60.0;
        peat_call_outcome out = call_w(w, bad[i].cmd, t, why);
        cr_assert_eq(out, bad[i].want, "cmd %d: outcome %d, want %d (%s)", bad[i].cmd, out,
                     bad[i].want, why);
        cr_assert_not_null(strstr(why, bad[i].says), "cmd %d: \"%s\" lacks \"%s\"", bad[i].cmd, why,
                           bad[i].says);
        cr_assert_not_null(strstr(why, "test_command"), "cmd %d: kernel not named: %s", bad[i].cmd,
                           why);
        out = call_w(w, CMD_SUM, 60, why);
        cr_assert_eq(out, PEAT_CALL_DONE, "the call after cmd %d: outcome %d (%s)", bad[i].cmd, out,
                     why);
    }
    /* the first child, and a new one after each crash, exit, hang and stray write (six); none
     * after a returned error */
    cr_assert_eq(peat_isolate_worker_spawns(w), 7, "spawns %d", peat_isolate_worker_spawns(w));
    peat_isolate_worker_free(w);
}

/* The child keeps its mappings per call layout: calls that alternate between layouts reuse them
 * and stay guarded. A read of a guard region is no finding, but the page it opened is closed
 * again: a write there on a later call of the same layout, after a call of another, is caught. */
Test(isolate, mappings_kept_per_layout_stay_guarded)
{
    size_t data_len, guard;
    peat_isolate_guard_geometry(R * sizeof(float), &data_len, &guard);
    guard_at = data_len;
    peat_isolate_worker *w;
    cr_assert_eq(peat_isolate_worker_create(&K_CMD, 0, &w), PEAT_OK);
    char why[256];
    for (int i = 0; i < 6; i++)
        cr_assert_eq(call_rows(w, CMD_SUM, i % 2 ? 3 * R : R, 60, why), PEAT_CALL_DONE,
                     "call %d: %s", i, why);
    cr_assert_eq(call_rows(w, CMD_PEEK, R, 60, why), PEAT_CALL_DONE, "a read: %s", why);
    cr_assert_eq(call_rows(w, CMD_SUM, 3 * R, 60, why), PEAT_CALL_DONE, "%s", why);
    cr_assert_eq(peat_isolate_worker_spawns(w), 1, "one child so far: %d",
                 peat_isolate_worker_spawns(w));
    peat_call_outcome out = call_rows(w, CMD_POKE, R, 60, why);
    cr_assert_eq(out, PEAT_CALL_OOB_WRITE, "a write where a read had opened the guard: %d (%s)",
                 out, why);
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu", data_len);
    cr_assert_not_null(strstr(why, want), "\"%s\" lacks \"%s\"", why, want);
    cr_assert_eq(call_rows(w, CMD_SUM, 3 * R, 60, why), PEAT_CALL_DONE, "%s", why);
    peat_isolate_worker_free(w);
}

/* n clean calls through w all done, and w has had one child in all. */
static void clean_calls_in_one_child(peat_isolate_worker *w, int n)
{
    char why[256];
    for (int i = 0; i < n; i++)
        cr_assert_eq(call_w(w, CMD_SUM, 60, why), PEAT_CALL_DONE, "call %d: %s", i, why);
    cr_assert_eq(peat_isolate_worker_spawns(w), 1, "spawns %d", peat_isolate_worker_spawns(w));
}

Test(isolate, clean_calls_share_one_child)
{
    peat_isolate_worker *w;
    cr_assert_eq(peat_isolate_worker_create(&K_CMD, 0, &w), PEAT_OK);
    clean_calls_in_one_child(w, 20);
    peat_isolate_worker_free(w);
}

/* A worker started before any call (as runtime FI starts its own before the band's threads) runs
 * every call in that first child. */
Test(isolate, started_worker_serves_the_calls_in_its_first_child)
{
    peat_isolate_worker *w;
    cr_assert_eq(peat_isolate_worker_create(&K_CMD, 1, &w), PEAT_OK);
    cr_assert_eq(peat_isolate_worker_spawns(w), 0, "a created worker has no child yet");
    cr_assert_eq(peat_isolate_worker_start(w), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_isolate_worker_start(w), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_isolate_worker_spawns(w), 1, "started twice: %d children",
                 peat_isolate_worker_spawns(w));
    clean_calls_in_one_child(w, 5);
    peat_isolate_worker_free(w);
}

/* n calls of the stateful kernel through w: how many came out right on the first try's terms. */
static int stateful_right(peat_isolate_worker *w, int n, int keep)
{
    int right = 0;
    for (int i = 0; i < n; i++) {
        call_case cc;
        case_make(&cc, CMD_SUM);
        peat_call_outcome out;
        char why[256];
        cr_assert_eq(peat_isolate_worker_call(w, &cc.a, 60, &out, why, sizeof why), PEAT_OK);
        cr_assert_eq(out, PEAT_CALL_DONE, "%s", why);
        /* keep_state: call i sees the i calls before it */
        right += sums_right(&cc, keep ? (float)i : 0.0f);
        case_free(&cc);
    }
    return right;
}

Test(isolate, static_state_never_reaches_another_call)
{
    peat_isolate_worker *w;
    cr_assert_eq(peat_isolate_worker_create(&K_STATE, 0, &w), PEAT_OK);
    int right = stateful_right(w, 5, 0);
    cr_assert_eq(right, 5, "%d of 5 calls started from the kernel's first state", right);
    cr_assert_eq(peat_isolate_worker_spawns(w), 5, "a fresh child after each changed state: %d",
                 peat_isolate_worker_spawns(w));
    peat_isolate_worker_free(w);
    cr_assert_eq(state_calls, 0, "the kernel ran in this process");
}

Test(isolate, kept_state_carries_through_one_run)
{
    peat_isolate_worker *w;
    cr_assert_eq(peat_isolate_worker_create(&K_STATE, 1, &w), PEAT_OK);
    int right = stateful_right(w, 5, 1);
    cr_assert_eq(right, 5, "%d of 5 calls saw the calls before them", right);
    cr_assert_eq(peat_isolate_worker_spawns(w), 1, "spawns %d", peat_isolate_worker_spawns(w));
    peat_isolate_worker_free(w);
}

/* The same outcomes and offsets through a fork per call and through the worker. */
Test(isolate, fork_per_call_and_worker_agree)
{
    static const int cmds[] = {CMD_SUM, CMD_CRASH, CMD_EXIT, CMD_OOB, CMD_HEAD, CMD_MUTATE};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        peat_call_outcome out[2];
        char why[2][256];
        for (int mode = 0; mode < 2; mode++) {
            if (mode)
                setenv("PEAT_ISOLATE", "fork", 1);
            else
                unsetenv("PEAT_ISOLATE");
            call_case cc;
            case_make(&cc, cmds[i]);
            cr_assert_eq(peat_isolate_call(&K_CMD, &cc.a, 1, 60, &out[mode], why[mode], 256),
                         PEAT_OK);
            case_free(&cc);
        }
        unsetenv("PEAT_ISOLATE");
        cr_assert_eq(out[0], out[1], "cmd %d: worker %d (%s), fork %d (%s)", cmds[i], out[0],
                     why[0], out[1], why[1]);
        cr_assert_str_eq(why[0], why[1], "cmd %d", cmds[i]);
    }
    peat_isolate_workers_close();
}

/* The worker's child that w started (the only child of this process that is not a zombie). */
static pid_t worker_child(void)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f, "cannot read %s", p);
    int pid = 0;
    int n = fscanf(f, "%d", &pid);
    fclose(f);
    cr_assert_eq(n, 1, "no child process");
    return (pid_t)pid;
}

/* Bytes of address space pid holds (VmSize). */
static long vm_bytes(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f);
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1) break;
    fclose(f);
    cr_assert_gt(kb, 0);
    return kb * 1024;
}

/* The worker's child cannot map a call's buffers (its address space capped at what it holds, as
 * `ulimit -v` would): that is peat out of memory, an error that ends the run, never a failure of
 * the kernel (which never ran). */
Test(isolate, a_worker_out_of_memory_is_an_error_not_a_kernel_failure)
{
    peat_isolate_worker *w = NULL;
    cr_assert_eq(peat_isolate_worker_create(&K_CMD, 1, &w), PEAT_OK);
    char why[256];
    cr_assert_eq(call_w(w, CMD_SUM, 60, why), PEAT_CALL_DONE, "%s", why);
    pid_t child = worker_child();
    long vm = vm_bytes(child);
    struct rlimit rl = {(rlim_t)vm, (rlim_t)vm};
    cr_assert_eq(prlimit(child, RLIMIT_AS, &rl, NULL), 0, "prlimit: %s", strerror(errno));
    /* a call whose input is 64 times larger: the child must map it anew */
    call_case cc;
    case_make(&cc, CMD_SUM);
    int64_t big[2] = {R * 64, C};
    peat_tensor *x = NULL;
    cr_assert_eq(peat_tensor_alloc(PEAT_DTYPE_F32, 2, big, &x), PEAT_OK);
    memcpy(x->data, cc.x->data, sizeof(float) * R * C);
    cc.a.in[0] = x;
    peat_call_outcome out = PEAT_CALL_DONE;
    peat_status st = peat_isolate_worker_call(w, &cc.a, 60, &out, why, sizeof why);
    cr_assert_eq(st, PEAT_ERR_NOMEM,
                 "the worker's failed mapping came back as status %d (outcome %d: %s), not as "
                 "peat out of memory",
                 (int)st, (int)out, why);
    cr_assert(strstr(peat_error_last(), "out of memory"), "%s", peat_error_last());
    cc.a.in[0] = cc.x;
    peat_tensor_free(x);
    case_free(&cc);
    peat_isolate_worker_free(w);
}

/* A worker forked while peat held its campaign file open keeps none of that file's locks: peat
 * closes the file and a writer (the --resume after a kill) opens it while the worker still
 * lives. Before, the worker shared the writer lock's open file description (fork) and the
 * reopen was refused as "being written by another process". */
Test(isolate, a_live_worker_holds_no_lock_of_peats_campaign_file)
{
    char dir[] = "/tmp/peat_isolock_XXXXXX", path[64];
    cr_assert_not_null(mkdtemp(dir), "mkdtemp failed: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/c.h5", dir);
    peat_store_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.kernel, sizeof m.kernel, "k");
    snprintf(m.flow, sizeof m.flow, "mlp");
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(path, &m, &s), PEAT_OK, "create %s: %s", path,
                 peat_error_last());
    peat_isolate_worker *w;
    cr_assert_eq(peat_isolate_worker_create(&K_CMD, 0, &w), PEAT_OK);
    char why[256];
    cr_assert_eq(call_w(w, CMD_SUM, 60, why), PEAT_CALL_DONE, "%s", why);
    cr_assert_eq(peat_store_close(s), PEAT_OK, "%s", peat_error_last());
    peat_store_t *again = NULL;
    peat_status st = peat_store_open(path, 1, &again);
    cr_assert_eq(st, PEAT_OK, "reopening for writing while the worker lives: %s",
                 peat_error_last());
    cr_assert_eq(peat_isolate_worker_spawns(w), 1, "the worker was respawned");
    peat_store_close(again);
    peat_isolate_worker_free(w);
    unlink(path);
    rmdir(dir);
}
