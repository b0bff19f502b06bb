/* isolate.c: a candidate kernel run in a forked child with a deadline (a crash, hang or early exit
 * becomes a reported outcome), its outputs in guarded shared memory that the parent reads, its
 * inputs in read-only copies checked after the call. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, strsignal, REG_ERR */
#include "harness/isolate/isolate.h"
#include "core/clock.h"
#include "harness/isolate/isolate_impl.h"
#include "core/child_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <sys/wait.h>
#include <unistd.h>

static void *shared_alloc(size_t n)
{
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- guarded output buffers ----
 * [guard region][head page: guard_head, then sentinel][data, then sentinel to a page end][guard]
 * A write just outside the data changes a sentinel byte; one further out lands in a guard
 * region (PROT_NONE, at least GUARD_MIN bytes and four times the data): the fault handler below
 * notes its offset and lets the write go to a private page, so the call still completes and is
 * reported as OUT_OF_BOUNDS_WRITE with the offset, not as a crash. The guard regions cost
 * address space only. */

enum { SENTINEL = PEAT_ISOLATE_SENTINEL, TAIL_MIN = PEAT_ISOLATE_TAIL_MIN };
#define GUARD_MIN ((size_t)16 << 20)
static const uint64_t GUARD_MAGIC = 0x5045415447554152ull; /* "PEATGUAR" */

typedef peat_isolate_guard_head guard_head;

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static guard_head *head_of(const peat_tensor *t)
{
    return (guard_head *)((char *)t->data - page_size());
}

void peat_isolate_guard_geometry(size_t nb, size_t *data_len, size_t *guard)
{
    size_t pg = page_size();
    *data_len = (nb + TAIL_MIN + pg - 1) / pg * pg;
    *guard = 4 * *data_len > GUARD_MIN ? 4 * *data_len : GUARD_MIN;
}

void peat_isolate_guard_head_init(void *mid, size_t nb)
{
    size_t pg = page_size(), data_len, guard;
    peat_isolate_guard_geometry(nb, &data_len, &guard);
    memset(mid, SENTINEL, pg + data_len);
    guard_head *h = (guard_head *)mid;
    h->magic = GUARD_MAGIC, h->nbytes = nb, h->map_len = 2 * guard + pg + data_len,
    h->guard = guard;
}

static void *guarded_alloc(size_t nb)
{
    size_t pg = page_size(), data_len, guard;
    peat_isolate_guard_geometry(nb, &data_len, &guard);
    size_t len = 2 * guard + pg + data_len;
    /* the whole range reserved inaccessible, then the head and data mapped shared inside it */
    char *base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return NULL;
    char *mid = mmap(base + guard, pg + data_len, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (mid == MAP_FAILED) {
        munmap(base, len);
        return NULL;
    }
    peat_isolate_guard_head_init(mid, nb);
    return mid + pg;
}

/* The head an output of nb bytes starts with (what a stray write into it is measured against). */
static guard_head head_expected(size_t nb)
{
    size_t data_len, guard;
    peat_isolate_guard_geometry(nb, &data_len, &guard);
    guard_head h = {GUARD_MAGIC, nb, 2 * guard + page_size() + data_len, guard};
    return h;
}

/* The mapping's geometry comes from the size, not from the head a kernel may have written. */
static void guarded_free(void *data, size_t nb)
{
    guard_head h = head_expected(nb);
    munmap((char *)data - page_size() - h.guard, h.map_len);
}

/* The first byte of t's page before its data (head included) or of its tail that no longer holds
 * what was put there, as an offset from the data's start (negative: before it); 0 with *hit 0
 * when none changed. */
static long long sentinel_check(const peat_tensor *t, int *hit)
{
    size_t nb = (size_t)peat_tensor_numel(t) * sizeof(float);
    guard_head want = head_expected(nb);
    const unsigned char *data = t->data, *hb = (const unsigned char *)head_of(t),
                        *wb = (const unsigned char *)&want;
    size_t pg = page_size(), tail = want.map_len - 2 * want.guard - pg - nb;
    *hit = 1;
    for (size_t i = 0; i < sizeof want; i++)
        if (hb[i] != wb[i]) return (long long)(hb + i - data);
    for (const unsigned char *p = hb + sizeof want; p < data; p++)
        if (*p != SENTINEL) return (long long)(p - data);
    for (size_t i = 0; i < tail; i++)
        if (data[nb + i] != SENTINEL) return (long long)(nb + i);
    *hit = 0;
    return 0;
}

peat_status peat_isolate_outputs_alloc(peat_args *a, peat_tensor *const *tmpl, int n)
{
    for (int o = 0; o < PEAT_MAX_IO; o++) a->out[o] = NULL;
    a->n_out = n;
    peat_status st = PEAT_OK;
    for (int o = 0; o < n && st == PEAT_OK; o++) {
        size_t nb = (size_t)peat_tensor_numel(tmpl[o]) * sizeof(float);
        void *mem = guarded_alloc(nb);
        if (!mem) {
            st = PEAT_ERROR(PEAT_ERR_NOMEM,
                            "out of memory: a guarded output buffer of %zu bytes (and its guard "
                            "regions of address space): %s",
                            nb, strerror(errno));
            break;
        }
        st = peat_tensor_wrap(PEAT_DTYPE_F32, tmpl[o]->ndim, tmpl[o]->shape, mem, &a->out[o]);
        if (st != PEAT_OK) guarded_free(mem, nb);
    }
    /* a later buffer failed: the earlier ones must not outlive the call */
    if (st != PEAT_OK) peat_isolate_outputs_free(a);
    return st;
}

void peat_isolate_outputs_free(peat_args *a)
{
    for (int o = 0; o < a->n_out; o++) {
        if (!a->out[o]) continue;
        guarded_free(a->out[o]->data, (size_t)peat_tensor_numel(a->out[o]) * sizeof(float));
        peat_tensor_free(a->out[o]);
        a->out[o] = NULL;
    }
    a->n_out = 0;
}

/* ---- input copies ---- */

/* run: a with its inputs replaced by shared copies (a child's writes reach the parent). */
static peat_status inputs_copy(const peat_args *a, peat_args *run)
{
    *run = *a;
    for (int i = 0; i < a->n_in; i++) run->in[i] = NULL;
    for (int i = 0; i < a->n_in; i++) {
        if (!a->in[i]) continue;
        size_t nb = peat_tensor_nbytes(a->in[i]);
        void *mem = shared_alloc(nb);
        peat_tensor *t = NULL;
        if (!mem) return PEAT_ERROR(PEAT_ERR_NOMEM, "input copy of %zu bytes", nb);
        memcpy(mem, a->in[i]->data, nb);
        peat_status st =
            peat_tensor_wrap(a->in[i]->dtype, a->in[i]->ndim, a->in[i]->shape, mem, &t);
        if (st != PEAT_OK) {
            munmap(mem, nb ? nb : 1);
            return st;
        }
        run->in[i] = t;
    }
    return PEAT_OK;
}

static void inputs_free(peat_args *run)
{
    for (int i = 0; i < run->n_in; i++) {
        if (!run->in[i]) continue;
        size_t nb = peat_tensor_nbytes(run->in[i]);
        munmap(run->in[i]->data, nb ? nb : 1);
        peat_tensor_free((peat_tensor *)run->in[i]);
        run->in[i] = NULL;
    }
}

/* Compares the copies with the originals: 1 with the input and element of the first difference. */
static int inputs_changed(const peat_args *a, const peat_args *run, int *which, int64_t *elem)
{
    for (int i = 0; i < a->n_in; i++) {
        if (!a->in[i]) continue;
        size_t nb = peat_tensor_nbytes(a->in[i]), es = peat_dtype_size(a->in[i]->dtype);
        const unsigned char *x = a->in[i]->data, *y = run->in[i]->data;
        if (memcmp(x, y, nb) == 0) continue;
        size_t b = 0;
        while (x[b] == y[b]) b++;
        *which = i, *elem = (int64_t)(b / (es ? es : 1));
        return 1;
    }
    return 0;
}

/* ---- faults in guard regions and read-only inputs ----
 * During a call, the guard regions of the outputs and the input copies (mapped read-only) are
 * listed for on_fault. A SIGSEGV inside one is noted (the first write of each kind, with its
 * byte offset) and its page made writable (a private page in a guard region; the input copy
 * itself, which the parent compares afterwards), so the kernel goes on and the call completes.
 * Any other SIGSEGV goes to the handler that was there before (a crash, as before). */

typedef peat_isolate_fault_note fault_note;
typedef peat_isolate_report call_report;

/* What the report says when the kernel never returned. */
enum {
    CHILD_NEVER_RETURNED = PEAT_ISOLATE_NEVER_RETURNED,
    CHILD_CALLED_EXIT = PEAT_ISOLATE_CALLED_EXIT
};

enum { REGION_OUTPUT, REGION_INPUT };
typedef struct {
    uintptr_t lo, hi, base;
    int kind, index;
} fault_region;

static fault_region fault_regions[4 * PEAT_MAX_IO];
static volatile sig_atomic_t fault_n;
static call_report *fault_report;
static uintptr_t fault_pg; /* the page size, read before the call (sysconf is not signal-safe) */
static struct sigaction fault_prev;

/* Whether the faulting access was a write (x86-64's page-fault error code says; elsewhere every
 * access outside the buffers counts as one). */
static int fault_is_write(const void *ucv)
{
#if defined(__x86_64__) && defined(REG_ERR)
    const ucontext_t *uc = ucv;
    return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)ucv;
    return 1;
#endif
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    uintptr_t a = (uintptr_t)si->si_addr;
    /* only a fault has an address: a SIGSEGV sent by kill() or raise() (si_code <= 0) is not */
    for (int i = 0; si->si_code > 0 && i < fault_n; i++) {
        const fault_region *r = &fault_regions[i];
        if (a < r->lo || a >= r->hi) continue;
        fault_note *n = r->kind == REGION_OUTPUT ? &fault_report->oob : &fault_report->input;
        if (!n->hit && fault_is_write(uc))
            n->hit = 1, n->index = r->index, n->offset = (long long)(a - r->base);
        if (mprotect((void *)(a & ~(fault_pg - 1)), fault_pg, PROT_READ | PROT_WRITE) == 0) {
            fault_report->opened = 1; /* in the report: a static would be kernel state */
            return;                   /* the access is retried, and succeeds */
        }
        break;
    }
    /* not a guarded buffer: the previous handler takes it (a crash), as soon as this returns */
    sigaction(SIGSEGV, &fault_prev, NULL);
    raise(SIGSEGV);
}

/* The regions of run for on_fault (inputs made read-only first when protect_inputs). */
static void faults_list(const peat_args *run, call_report *rep, int protect_inputs)
{
    fault_pg = (uintptr_t)page_size();
    int n = 0;
    for (int o = 0; o < run->n_out; o++) {
        const guard_head *h = head_of(run->out[o]);
        guard_head g = head_expected((size_t)peat_tensor_numel(run->out[o]) * sizeof(float));
        uintptr_t data = (uintptr_t)run->out[o]->data, start = (uintptr_t)h - g.guard,
                  end = start + g.map_len;
        fault_regions[n++] = (fault_region){start, (uintptr_t)h, data, REGION_OUTPUT, o};
        fault_regions[n++] = (fault_region){end - g.guard, end, data, REGION_OUTPUT, o};
    }
    for (int i = 0; i < run->n_in; i++) {
        if (!run->in[i]) continue;
        uintptr_t data = (uintptr_t)run->in[i]->data;
        size_t nb = (peat_tensor_nbytes(run->in[i]) + fault_pg - 1) / fault_pg * fault_pg;
        if (nb == 0 || (protect_inputs && mprotect(run->in[i]->data, nb, PROT_READ) != 0)) continue;
        fault_regions[n++] = (fault_region){data, data + nb, data, REGION_INPUT, i};
    }
    fault_report = rep;
    fault_n = n;
}

/* Lists run's output guard regions and its input copies (made read-only) and installs
 * on_fault, which notes into rep. */
void peat_isolate_faults_arm(const peat_args *run, call_report *rep)
{
    faults_list(run, rep, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    /* the previous action's fields, not its bytes: glibc's copy leaves some of them undefined
     * (its kernel struct's), and a worker's child compares this module's statics call by call */
    struct sigaction old;
    memset(&old, 0, sizeof old);
    sigaction(SIGSEGV, &sa, &old);
    memset(&fault_prev, 0, sizeof fault_prev);
    if (old.sa_flags & SA_SIGINFO)
        fault_prev.sa_sigaction = old.sa_sigaction;
    else
        fault_prev.sa_handler = old.sa_handler;
    sigemptyset(&fault_prev.sa_mask); /* the kernel fills the first NSIG bits, glibc copies more */
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&old.sa_mask, sig) == 1) sigaddset(&fault_prev.sa_mask, sig);
    fault_prev.sa_flags = old.sa_flags;
}

void peat_isolate_faults_watch(const peat_args *run, call_report *rep)
{
    faults_list(run, rep, 0);
}

void peat_isolate_faults_unwatch(void)
{
    fault_n = 0;
    memset(fault_regions, 0, sizeof fault_regions);
}

void peat_isolate_faults_disarm(void)
{
    fault_n = 0;
    /* nothing of one call's layout stays behind (the worker compares these statics too) */
    memset(fault_regions, 0, sizeof fault_regions);
    sigaction(SIGSEGV, &fault_prev, NULL);
    memset(&fault_prev, 0, sizeof fault_prev);
}

/* ---- in-process calls: a crash, an exit or a hang during the call ends peat with one line ---- */

static char inproc_crash_msg[320], inproc_exit_msg[320];
static _Atomic int inproc_calls; /* calls in flight (runtime FI runs them on several threads) */
static pthread_mutex_t inproc_mu = PTHREAD_MUTEX_INITIALIZER;

static void inproc_crash(int sig)
{
    if (inproc_calls > 0 && write(2, inproc_crash_msg, strlen(inproc_crash_msg)) >= 0) _exit(1);
    if (inproc_calls > 0) _exit(1);
    signal(sig, SIG_DFL); /* not in a call: peat's own crash, as without the handler */
    raise(sig);
}

static void inproc_atexit(void)
{
    if (inproc_calls <= 0) return;
    if (write(2, inproc_exit_msg, strlen(inproc_exit_msg)) < 0) _exit(1);
    _exit(1); /* an exit inside the kernel is a DUE: never the status the kernel chose */
}

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
enum { N_CRASH = sizeof crash_signals / sizeof crash_signals[0] };

/* The lines a crash and an exit of k print; the exit handler, once. */
static void inproc_prepare(const peat_kernel *k)
{
    static int atexit_done;
    pthread_mutex_lock(&inproc_mu);
    if (!atexit_done) atexit_done = atexit(inproc_atexit) == 0;
    snprintf(inproc_crash_msg, sizeof inproc_crash_msg,
             "peat: error: kernel '%s' crashed in-process (--no-isolate): DUE; run isolated to "
             "have the campaign report it\n",
             k->name);
    snprintf(inproc_exit_msg, sizeof inproc_exit_msg,
             "peat: error: kernel '%s' ended the process during a call (--no-isolate): DUE\n",
             k->name);
    pthread_mutex_unlock(&inproc_mu);
}

/* The watchdog of in-process calls: a call past its deadline ends peat with one line (a hung
 * call cannot be taken back from its thread). One thread, started with the first call. */
enum { WATCH_SLOTS = 64 };
static struct {
    double deadline, timeout; /* deadline 0: free */
    char name[64];
} watch[WATCH_SLOTS];

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double now = peat_clock_now();
        pthread_mutex_lock(&inproc_mu);
        for (int i = 0; i < WATCH_SLOTS; i++) {
            if (watch[i].deadline <= 0.0 || now < watch[i].deadline) continue;
            char line[256];
            int n = snprintf(line, sizeof line,
                             "peat: error: kernel '%s' hung in-process (--no-isolate): no return "
                             "within %g s (--timeout): DUE\n",
                             watch[i].name, watch[i].timeout);
            if (write(2, line, (size_t)n) < 0) _exit(1);
            _exit(1);
        }
        pthread_mutex_unlock(&inproc_mu);
    }
    return NULL;
}

static int watch_arm(const peat_kernel *k, double timeout_s)
{
    static int started;
    int slot = -1;
    pthread_mutex_lock(&inproc_mu);
    pthread_t th;
    if (!started && pthread_create(&th, NULL, watchdog, NULL) == 0) {
        pthread_detach(th);
        started = 1;
    }
    for (int i = 0; i < WATCH_SLOTS && slot < 0 && timeout_s > 0.0; i++)
        if (watch[i].deadline <= 0.0) {
            slot = i;
            watch[i].deadline = peat_clock_now() + timeout_s, watch[i].timeout = timeout_s;
            snprintf(watch[i].name, sizeof watch[i].name, "%s", k->name);
        }
    pthread_mutex_unlock(&inproc_mu);
    return slot;
}

static void watch_disarm(int slot)
{
    if (slot < 0) return;
    pthread_mutex_lock(&inproc_mu);
    watch[slot].deadline = 0.0;
    pthread_mutex_unlock(&inproc_mu);
}

/* The working directory around an in-process call: a kernel that changes it must not move
 * peat's relative paths (--out). */
static int cwd_save(void)
{
    return open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void cwd_restore(int fd)
{
    if (fd < 0) return;
    int r = fchdir(fd); /* the directory is held open: only an I/O error can fail it */
    (void)r;
    close(fd);
}

static peat_status run_here(const peat_kernel *k, const peat_args *a, double timeout_s,
                            call_report *rep, peat_call_outcome *out, char *why, size_t nwhy)
{
    inproc_prepare(k);
    struct sigaction sa, old[N_CRASH];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = inproc_crash;
    for (int i = 0; i < N_CRASH; i++) sigaction(crash_signals[i], &sa, &old[i]);
    peat_isolate_faults_arm(a, rep); /* a fault outside the guarded buffers goes to inproc_crash */
    int slot = watch_arm(k, timeout_s), cwd = cwd_save();
    inproc_calls++;
    peat_status st = peat_kernel_run(k, a);
    inproc_calls--;
    cwd_restore(cwd);
    watch_disarm(slot);
    peat_isolate_faults_disarm();
    for (int i = 0; i < N_CRASH; i++) sigaction(crash_signals[i], &old[i], NULL);
    *out = PEAT_CALL_DONE;
    if (st == PEAT_OK) return PEAT_OK;
    snprintf(why, nwhy, "kernel '%s' failed: %s", k->name, peat_error_last());
    *out = PEAT_CALL_FAILED;
    return PEAT_OK;
}

static void inproc_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = inproc_crash;
    for (int i = 0; i < N_CRASH; i++) sigaction(crash_signals[i], &sa, NULL);
}

peat_status peat_isolate_watched_run(const peat_kernel *k, const peat_args *a, double timeout_s)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    inproc_prepare(k);
    /* several threads call at once: the handlers stay (outside a call they step aside) */
    pthread_once(&once, inproc_install);
    int slot = watch_arm(k, timeout_s), cwd = cwd_save();
    inproc_calls++;
    peat_status st = peat_kernel_run(k, a);
    inproc_calls--;
    cwd_restore(cwd);
    watch_disarm(slot);
    return st;
}

/* ---- isolated calls ---- */

/* The running child, for the SIGTERM/SIGINT handler: its whole group dies with peat. */
static volatile sig_atomic_t child_pid;

static void on_terminate(int sig)
{
    if (child_pid > 0) kill(-(pid_t)child_pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Waits for the child, whose exit closes fd, until the deadline; kills its group past it.
 * Returns 1 when the child ended (wst set), 0 when it was killed, -1 when waitpid failed. */
static int wait_deadline(pid_t pid, int fd, double timeout_s, int *wst)
{
    double t0 = peat_clock_now();
    for (;;) {
        double left = timeout_s - (peat_clock_now() - t0);
        if (left <= 0.0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, wst, 0);
            return 0;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        /* slices of at most 0.2 s: a descendant holding the pipe cannot hide the child's end */
        int r = poll(&p, 1, left > 0.2 ? 200 : (int)(left * 1e3) + 1);
        if (r > 0 || (r < 0 && errno != EINTR)) break; /* closed (or poll failed): reap it */
        if (waitpid(pid, wst, WNOHANG) == pid) return 1;
    }
    return waitpid(pid, wst, 0) < 0 ? -1 : 1;
}

/* What the child's end says about the kernel: rep holds what it returned (or one of the above)
 * and its error message. */
peat_call_outcome peat_isolate_child_verdict(const char *name, int wst, const call_report *rep,
                                             char *why, size_t nwhy)
{
    int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
    if (WIFSIGNALED(wst)) {
        snprintf(why, nwhy, "kernel '%s' crashed with signal %d (%s)", name, WTERMSIG(wst),
                 strsignal(WTERMSIG(wst)));
        return PEAT_CALL_FAILED;
    }
    if (rep->status == CHILD_NEVER_RETURNED && code != 0) {
        /* no exit() (its handlers never ran): a sanitizer or _exit turned a fault into a code */
        snprintf(why, nwhy, "kernel '%s' crashed (exit code %d before returning)", name, code);
        return PEAT_CALL_FAILED;
    }
    if (rep->status == CHILD_NEVER_RETURNED || rep->status == CHILD_CALLED_EXIT) {
        snprintf(why, nwhy,
                 "kernel '%s' ended its process (exit code %d) without completing the call", name,
                 code);
        return PEAT_CALL_DUE;
    }
    if (rep->status != PEAT_OK) {
        snprintf(why, nwhy, "kernel '%s' failed: %s", name, rep->msg);
        return PEAT_CALL_FAILED;
    }
    return PEAT_CALL_DONE;
}

static call_report *child_report_at; /* in the child: where it reports */

/* Runs in the child when the kernel calls exit(): whatever the code, the call never completed. */
static void child_atexit(int code, void *unused)
{
    (void)unused;
    if (child_report_at->status == CHILD_NEVER_RETURNED)
        child_report_at->status = CHILD_CALLED_EXIT;
    /* no handler registered before the fork runs here: HDF5's would flush peat's campaign file
     * from this copy of its state */
    _exit(code);
}

void peat_isolate_crash_default(void)
{
    /* a kernel's crash ends the child by its signal, which the parent reports in one line; a
     * sanitizer's handler (sanitizer builds) would print a page of its own first */
    for (int i = 0; i < N_CRASH; i++) signal(crash_signals[i], SIG_DFL);
}

typedef peat_status (*child_fn)(void *arg);

static void child_run(child_fn fn, void *arg, call_report *rep, pid_t parent, int done_fd)
{
    close(done_fd);         /* the read end: the parent's */
    peat_child_fds_close(); /* peat's locks and campaign file are not the child's to hold */
    child_report_at = rep;
    on_exit(child_atexit, NULL); /* glibc: sees the exit code */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* peat killed outright: no orphan left spinning */
    if (getppid() != parent) _exit(1);
    peat_isolate_crash_default();
    peat_status st = fn(arg);
    if (st != PEAT_OK) snprintf(rep->msg, sizeof rep->msg, "%s", peat_error_last());
    rep->status = (int)st;
    _exit(0);
}

/* One kernel call in the child: a fault outside the guarded buffers kills it (a crash). */
typedef struct kernel_job {
    const peat_kernel *k;
    const peat_args *a;
    call_report *rep;
} kernel_job;

static peat_status kernel_job_run(void *arg)
{
    kernel_job *j = arg;
    peat_isolate_faults_arm(j->a, j->rep);
    return peat_kernel_run(j->k, j->a);
}

/* Runs fn(arg) in a forked child (its own process group, killed with peat) until timeout_s;
 * *out says how it ended, why (naming `name`) when not DONE. */
static peat_status run_child(const char *name, child_fn fn, void *arg, call_report *rep,
                             double timeout_s, peat_call_outcome *out, char *why, size_t nwhy)
{
    rep->status = CHILD_NEVER_RETURNED;
    /* the child holds the write end of a pipe until it exits: poll() on the read end wakes the
     * parent the moment the child is done */
    int fds[2];
    if (pipe(fds) != 0) return PEAT_ERROR(PEAT_ERR_INTERNAL, "pipe failed: %s", strerror(errno));
    struct sigaction sa, old_term, old_int;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_terminate;
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) child_run(fn, arg, rep, parent, fds[0]);
    close(fds[1]);
    peat_status st = PEAT_OK;
    if (pid < 0)
        st = PEAT_ERROR(PEAT_ERR_INTERNAL, "fork failed: %s", strerror(errno));
    else {
        setpgid(pid, pid); /* whichever of parent and child gets there first */
        child_pid = pid;
        int wst = 0, ended = wait_deadline(pid, fds[0], timeout_s, &wst);
        kill(-pid, SIGKILL); /* what the kernel started in the call's group ends with it */
        child_pid = 0;
        if (ended == 0) {
            snprintf(why, nwhy, "kernel '%s' hung: killed after %g s", name, timeout_s);
            *out = PEAT_CALL_HUNG;
        } else if (ended < 0)
            st = PEAT_ERROR(PEAT_ERR_INTERNAL, "waitpid failed: %s", strerror(errno));
        else
            *out = peat_isolate_child_verdict(name, wst, rep, why, nwhy);
    }
    close(fds[0]);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    return st;
}

/* "element E, byte offset B (before the start of | past the end of its N)" of output o. */
static void oob_why(const peat_kernel *k, const peat_tensor *t, int o, long long off, char *why,
                    size_t nwhy)
{
    long long n = peat_tensor_numel(t);
    long long el = off < 0 ? -((-off + 3) / 4) : off / 4;
    snprintf(why, nwhy,
             "kernel '%s' wrote outside output %d: element %lld, byte offset %lld (%s its %lld)",
             k->name, o, el, off, off < 0 ? "before the start of" : "past the end of", n);
}

/* After a completed call: writes outside the outputs (sentinels just around them, the guard
 * regions further out), then into the inputs (the read-only copies' faults, or a difference
 * from the originals). */
void peat_isolate_writes_check(const peat_kernel *k, const peat_args *a, const peat_args *run,
                               const call_report *rep, peat_call_outcome *out, char *why,
                               size_t nwhy)
{
    for (int o = 0; o < run->n_out; o++) {
        int hit;
        long long off = sentinel_check(run->out[o], &hit);
        if (!hit) continue;
        oob_why(k, run->out[o], o, off, why, nwhy);
        *out = PEAT_CALL_OOB_WRITE;
        return;
    }
    if (rep->oob.hit) {
        oob_why(k, run->out[rep->oob.index], rep->oob.index, rep->oob.offset, why, nwhy);
        *out = PEAT_CALL_OOB_WRITE;
        return;
    }
    int which;
    int64_t elem;
    if (rep->input.hit) {
        size_t es = peat_dtype_size(run->in[rep->input.index]->dtype);
        snprintf(why, nwhy, "kernel '%s' wrote into input %d at element %lld (byte offset %lld)",
                 k->name, rep->input.index, rep->input.offset / (long long)(es ? es : 1),
                 rep->input.offset);
        *out = PEAT_CALL_INPUT_MUTATION;
    } else if (inputs_changed(a, run, &which, &elem)) {
        snprintf(why, nwhy, "kernel '%s' wrote into input %d at element %lld", k->name, which,
                 (long long)elem);
        *out = PEAT_CALL_INPUT_MUTATION;
    }
}

peat_status peat_isolate_call(const peat_kernel *k, const peat_args *a, int isolate,
                              double timeout_s, peat_call_outcome *out, char *why, size_t nwhy)
{
    why[0] = 0;
    *out = PEAT_CALL_FAILED;
    if (isolate && !peat_isolate_fork_per_call())
        return peat_isolate_worker_shared_call(k, a, timeout_s, out, why, nwhy);
    call_report *rep = shared_alloc(sizeof *rep);
    if (!rep) return PEAT_ERROR(PEAT_ERR_NOMEM, "shared call report");
    memset(rep, 0, sizeof *rep);
    peat_args run;
    peat_status st = inputs_copy(a, &run);
    if (st == PEAT_OK)
        st = isolate ? run_child(k->name, kernel_job_run, &(kernel_job){k, &run, rep}, rep,
                                 timeout_s, out, why, nwhy)
                     : run_here(k, &run, timeout_s, rep, out, why, nwhy);
    if (st == PEAT_OK && *out == PEAT_CALL_DONE)
        peat_isolate_writes_check(k, a, &run, rep, out, why, nwhy);
    inputs_free(&run);
    munmap(rep, sizeof *rep);
    return st;
}

peat_status peat_isolate_run(const peat_kernel *k, const peat_args *a, int isolate,
                             double timeout_s, char *why, size_t nwhy)
{
    peat_call_outcome out;
    PEAT_TRY(peat_isolate_call(k, a, isolate, timeout_s, &out, why, nwhy));
    return out == PEAT_CALL_DONE ? PEAT_OK : PEAT_ERR_KERNEL;
}

void *peat_isolate_shared(size_t n)
{
    return shared_alloc(n);
}

void peat_isolate_shared_free(void *p, size_t n)
{
    if (p) munmap(p, n ? n : 1);
}

peat_status peat_isolate_work(const char *name, peat_status (*fn)(void *arg), void *arg,
                              double timeout_s, char *why, size_t nwhy)
{
    why[0] = 0;
    call_report *rep = shared_alloc(sizeof *rep);
    if (!rep) return PEAT_ERROR(PEAT_ERR_NOMEM, "shared work report");
    memset(rep, 0, sizeof *rep);
    peat_call_outcome out = PEAT_CALL_FAILED;
    peat_status st = run_child(name, fn, arg, rep, timeout_s, &out, why, nwhy);
    munmap(rep, sizeof *rep);
    PEAT_TRY(st);
    return out == PEAT_CALL_DONE ? PEAT_OK : PEAT_ERR_KERNEL;
}
