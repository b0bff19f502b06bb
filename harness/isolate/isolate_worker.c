/* isolate_worker.c: the persistent isolated worker: one forked child per kernel that runs call
 * after call, its inputs and guarded outputs passed through a shared memory file, with every
 * guarantee of a fork per call (deadline, crash and exit as outcomes, guard regions, read-only
 * inputs) at a fraction of its cost (docs/architecture.md, "Isolation"). */
#define _GNU_SOURCE /* memfd_create, MAP_POPULATE, dl_iterate_phdr */
#include "harness/isolate/isolate_impl.h"
#include "core/clock.h"
#include "core/child_fds.h"

#include <errno.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* One tensor's place in the shared file: inputs are plain copies, outputs a head page followed
 * by the data pages (isolate_impl.h's layout without the guards, which the child adds). */
typedef struct {
    int present, dtype, ndim;
    int64_t shape[PEAT_MAX_DIMS];
    size_t off, nb, len; /* offset in the file, data bytes, bytes mapped */
} slot;

/* The request and the report, shared with the child (mapped before the fork). */
typedef struct {
    int op, n_in, n_out;
    peat_op_params p;
    slot in[PEAT_MAX_IO], out[PEAT_MAX_IO];
    peat_isolate_report rep;
    int state_changed; /* keep_state 0: the call changed the kernel module's writable data */
} ctl_block;

struct peat_isolate_worker {
    const peat_kernel *k;
    int keep_state, spawns;
    int shift;  /* pages before the first buffer: another layout, so other addresses in the child */
    pid_t pid;  /* the child, 0 when none runs */
    int sock;   /* the parent's end of the socket pair (one byte each way per call) */
    int mem_fd; /* the shared file */
    char *arena; /* the parent's mapping of it */
    size_t arena_len;
    ctl_block *ctl;
};

static size_t pg_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static size_t round_pg(size_t n)
{
    size_t pg = pg_size();
    return (n + pg - 1) / pg * pg;
}

/* ---- the worker's children die with peat: SIGTERM and SIGINT kill their process groups ---- */

enum { MAX_LIVE = 64 };
static volatile sig_atomic_t live[MAX_LIVE];
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_terminate(int sig)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] > 0) kill(-(pid_t)live[i], SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void live_set(pid_t old, pid_t pid)
{
    static int installed;
    pthread_mutex_lock(&live_mu);
    if (!installed && pid > 0) {
        struct sigaction sa, cur;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_terminate;
        int sigs[] = {SIGTERM, SIGINT};
        for (int i = 0; i < 2; i++)
            if (sigaction(sigs[i], NULL, &cur) == 0 && cur.sa_handler == SIG_DFL)
                sigaction(sigs[i], &sa, NULL);
        installed = 1;
    }
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == old) {
            live[i] = pid;
            break;
        }
    pthread_mutex_unlock(&live_mu);
}

/* ---- the kernel's own state: the writable segments of the module its function lives in ---- */

typedef struct {
    char *addr, *copy;
    size_t len;
} segment;

enum { MAX_SEG = 8 };
typedef struct {
    uintptr_t fn;
    int n;
    segment seg[MAX_SEG];
    char *got_lo, *got_hi; /* the PLT's part of the GOT */
} module_state;

/* The PLT's GOT: three reserved entries, then one per PLT relocation. */
static void plt_got(module_state *m, const ElfW(Dyn) * d)
{
    uintptr_t got = 0, relsz = 0, relent = sizeof(ElfW(Rela));
    for (; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_PLTGOT) got = d->d_un.d_ptr;
        if (d->d_tag == DT_PLTRELSZ) relsz = d->d_un.d_val;
        if (d->d_tag == DT_PLTREL && d->d_un.d_val == DT_REL) relent = sizeof(ElfW(Rel));
    }
    if (!got) return;
    m->got_lo = (char *)got;
    m->got_hi = m->got_lo + (3 + relsz / relent) * sizeof(void *);
}

static int find_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    module_state *m = data;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && m->fn >= lo && m->fn < lo + ph->p_memsz) mine = 1;
    }
    if (!mine) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            plt_got(m, (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr));
    }
    for (int i = 0; i < info->dlpi_phnum && m->n < MAX_SEG - 1; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W) || ph->p_memsz == 0) continue;
        char *lo = (char *)(info->dlpi_addr + ph->p_vaddr), *hi = lo + ph->p_memsz;
        /* the PLT's GOT fills in as functions are first called (lazy binding): not state */
        if (m->got_lo >= lo && m->got_hi <= hi && m->got_hi > m->got_lo) {
            m->seg[m->n++] = (segment){lo, NULL, (size_t)(m->got_lo - lo)};
            lo = m->got_hi;
        }
        if (hi > lo) m->seg[m->n++] = (segment){lo, NULL, (size_t)(hi - lo)};
    }
    return 1;
}

/* Byte copy and compare of a module's writable segments, outside the sanitizer's view: the
 * segments hold the module's globals with ASan's redzones between them, which are no error to
 * read as raw bytes (the functions touch the bytes, never the objects). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PEAT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PEAT_ASAN 1
#endif
#ifdef PEAT_ASAN
__attribute__((no_sanitize_address)) static void raw_copy(char *dst, const volatile char *src,
                                                          size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

__attribute__((no_sanitize_address)) static int raw_differ(const char *a, const volatile char *b,
                                                           size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 1;
    return 0;
}
#else
static void raw_copy(char *dst, const char *src, size_t n)
{
    memcpy(dst, src, n);
}

static int raw_differ(const char *a, const char *b, size_t n)
{
    return memcmp(a, b, n) != 0;
}
#endif

/* Copies the writable data of the module holding fn (statics, globals); 0 when it cannot. */
static int state_snapshot(module_state *m, const void *fn)
{
    memset(m, 0, sizeof *m);
    m->fn = (uintptr_t)fn;
    dl_iterate_phdr(find_module, m);
    for (int i = 0; i < m->n; i++) {
        m->seg[i].copy = malloc(m->seg[i].len);
        if (!m->seg[i].copy) return 0;
        raw_copy(m->seg[i].copy, m->seg[i].addr, m->seg[i].len);
    }
    return m->n > 0;
}

static int state_changed(const module_state *m)
{
    for (int i = 0; i < m->n; i++)
        if (raw_differ(m->seg[i].copy, m->seg[i].addr, m->seg[i].len)) return 1;
    return 0;
}

/* ---- the child ---- */

static ctl_block *child_ctl; /* in the child: where it reports */

static void child_atexit(int code, void *unused)
{
    (void)unused;
    if (child_ctl->rep.status == PEAT_ISOLATE_NEVER_RETURNED)
        child_ctl->rep.status = PEAT_ISOLATE_CALLED_EXIT;
    /* no handler registered before the fork runs here: HDF5's would flush peat's campaign file
     * from this copy of its state */
    _exit(code);
}

/* The child's mappings of the tensors, kept from call to call while the layout stays the same
 * (a mapping costs more than a small call). */
typedef struct {
    void *map[PEAT_MAX_IO * 2];
    size_t len[PEAT_MAX_IO * 2];
    int n, valid;
    char *data[PEAT_MAX_IO * 2];
    char *guard_lo[PEAT_MAX_IO], *guard_hi[PEAT_MAX_IO];
    size_t guard_len[PEAT_MAX_IO];
    int n_in, n_out;
    slot in[PEAT_MAX_IO], out[PEAT_MAX_IO];
    peat_tensor t[PEAT_MAX_IO * 2];
} views;

static void views_unmap(views *v)
{
    for (int i = 0; i < v->n; i++) munmap(v->map[i], v->len[i]);
    v->n = 0, v->valid = 0;
}

static void *view_add(views *v, void *p, size_t len)
{
    if (p == MAP_FAILED) return NULL;
    v->map[v->n] = p, v->len[v->n++] = len;
    return p;
}

/* The address space slot s takes in the child: an input its pages, an output its head and data
 * pages (s->len) between two guard regions. */
static size_t view_len(const slot *s, int output)
{
    size_t data_len, guard;
    peat_isolate_guard_geometry(s->nb, &data_len, &guard);
    return output ? 2 * guard + s->len : s->len;
}

/* Maps slot s (input or output o): an input read-only, an output between guard regions. */
static char *view_map(views *v, const slot *s, int fd, int o)
{
    if (o < 0)
        return view_add(
            v, mmap(NULL, s->len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)s->off), s->len);
    size_t pg = pg_size(), data_len, guard;
    peat_isolate_guard_geometry(s->nb, &data_len, &guard);
    size_t len = view_len(s, 1);
    char *base = view_add(
        v, mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0), len);
    if (!base) return NULL;
    char *mid = mmap(base + guard, pg + data_len, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, (off_t)s->off);
    if (mid == MAP_FAILED) return NULL;
    v->guard_lo[o] = base, v->guard_hi[o] = mid + pg + data_len, v->guard_len[o] = guard;
    return mid + pg;
}

static int views_same(const views *v, const ctl_block *c)
{
    return v->valid && v->n_in == c->n_in && v->n_out == c->n_out &&
           memcmp(v->in, c->in, sizeof v->in) == 0 && memcmp(v->out, c->out, sizeof v->out) == 0;
}

/* The child's mappings, one set per call layout it has seen lately: a training step cycles
 * through a few dozen GEMM shapes, and mapping a call's buffers costs more than a small call.
 * The least recently used set goes when VC_SETS are kept or their mappings pass VC_BYTES (address
 * space, mostly guard regions reserved without memory). */
enum { VC_SETS = 48 };
#define VC_BYTES ((size_t)1 << 31)
typedef struct {
    views set[VC_SETS];
    uint64_t used[VC_SETS], clock;
    int opened; /* a call's read opened a guard page: all are closed before the next call */
} view_cache;

static size_t views_bytes(const views *v)
{
    size_t n = 0;
    for (int i = 0; i < v->n; i++) n += v->len[i];
    return n;
}

/* The set to map a new layout into: a free one, else the least recently used (unmapped), and
 * older ones unmapped too while the kept mappings with `need` more bytes pass VC_BYTES. */
static views *cache_victim(view_cache *vc, size_t need)
{
    size_t total = need;
    for (int i = 0; i < VC_SETS; i++) total += views_bytes(&vc->set[i]);
    views *free_set = NULL;
    for (;;) {
        int lru = -1;
        for (int i = 0; i < VC_SETS; i++) {
            if (!vc->set[i].valid) {
                if (!free_set) free_set = &vc->set[i];
                continue;
            }
            if (lru < 0 || vc->used[i] < vc->used[lru]) lru = i;
        }
        if (lru < 0 || (free_set && total <= VC_BYTES)) return free_set;
        total -= views_bytes(&vc->set[lru]);
        views_unmap(&vc->set[lru]);
        if (!free_set) free_set = &vc->set[lru];
    }
}

/* Bytes c's buffers map (inputs, outputs with their guard regions). */
static size_t layout_bytes(const ctl_block *c)
{
    size_t n = 0;
    for (int i = 0; i < c->n_in + c->n_out; i++) {
        const slot *s = i < c->n_in ? &c->in[i] : &c->out[i - c->n_in];
        if (s->present) n += view_len(s, i >= c->n_in);
    }
    return n;
}

/* c's tensors mapped into a set of vc (a free one or the least recently used); NULL with errno
 * when a mapping failed (nothing of that set kept). */
static views *views_map_new(const ctl_block *c, int fd, view_cache *vc)
{
    views *v = cache_victim(vc, layout_bytes(c));
    for (int i = 0; i < c->n_in + c->n_out; i++) {
        const slot *s = i < c->n_in ? &c->in[i] : &c->out[i - c->n_in];
        if (s->present && !(v->data[i] = view_map(v, s, fd, i < c->n_in ? -1 : i - c->n_in))) {
            int e = errno;
            views_unmap(v);
            errno = e;
            return NULL;
        }
    }
    v->n_in = c->n_in, v->n_out = c->n_out, v->valid = 1;
    memcpy(v->in, c->in, sizeof v->in);
    memcpy(v->out, c->out, sizeof v->out);
    return v;
}

/* The request's tensors in the child: the mappings kept for its layout (their guard regions made
 * inaccessible again if the fault handler opened a page of one), new ones otherwise; run gets the
 * request's params and tensors. NULL when a mapping failed (nothing of that set kept). */
static views *views_map(const ctl_block *c, int fd, view_cache *vc, peat_args *run)
{
    for (int k = 0; vc->opened && k < VC_SETS; k++)
        for (int o = 0; vc->set[k].valid && o < vc->set[k].n_out; o++)
            if (vc->set[k].out[o].present &&
                (mprotect(vc->set[k].guard_lo[o], vc->set[k].guard_len[o], PROT_NONE) != 0 ||
                 mprotect(vc->set[k].guard_hi[o], vc->set[k].guard_len[o], PROT_NONE) != 0))
                return NULL;
    vc->opened = 0;
    views *v = NULL;
    for (int i = 0; i < VC_SETS && !v; i++)
        if (views_same(&vc->set[i], c)) v = &vc->set[i];
    if (!v) v = views_map_new(c, fd, vc);
    if (!v && errno == ENOMEM) {
        /* an address-space limit (ulimit -v) below VC_BYTES: the kept sets make way */
        for (int i = 0; i < VC_SETS; i++) views_unmap(&vc->set[i]);
        v = views_map_new(c, fd, vc);
    }
    if (!v) return NULL;
    vc->used[v - vc->set] = ++vc->clock;
    memset(run, 0, sizeof *run);
    run->op = (peat_op_kind)c->op, run->p = c->p, run->n_in = c->n_in, run->n_out = c->n_out;
    peat_tensor *t = v->t;
    for (int i = 0; i < c->n_in + c->n_out; i++) {
        const slot *s = i < c->n_in ? &c->in[i] : &c->out[i - c->n_in];
        if (!s->present) continue;
        t[i] = (peat_tensor){.dtype = (peat_dtype)s->dtype, .ndim = s->ndim, .data = v->data[i]};
        memcpy(t[i].shape, s->shape, sizeof t[i].shape);
        if (i < c->n_in)
            run->in[i] = &t[i];
        else
            run->out[i - c->n_in] = &t[i];
    }
    return v;
}

/* One request: the kernel on the views, its status and stray writes in the report. */
static void child_call(const peat_kernel *k, ctl_block *c, int fd, view_cache *vc,
                       const module_state *ms)
{
    peat_args run;
    peat_isolate_report *rep = &c->rep;
    if (!views_map(c, fd, vc, &run)) {
        snprintf(rep->msg, sizeof rep->msg, "isolation worker: mapping the call's buffers: %s",
                 strerror(errno));
        rep->status = PEAT_ISOLATE_WORKER_NOMEM;
        return;
    }
    peat_isolate_faults_watch(&run, rep);
    peat_status st = peat_kernel_run(k, &run);
    peat_isolate_faults_unwatch();
    vc->opened |= rep->opened;
    if (st != PEAT_OK) snprintf(rep->msg, sizeof rep->msg, "%s", peat_error_last());
    rep->status = (int)st;
    c->state_changed = ms && state_changed(ms);
}

static void child_main(peat_isolate_worker *w, int sock, pid_t parent)
{
    peat_child_fds_close(); /* peat's locks and campaign file are not the worker's to hold */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* peat killed outright: no worker left behind */
    if (getppid() != parent) _exit(1);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    peat_isolate_crash_default();
    child_ctl = w->ctl;
    on_exit(child_atexit, NULL); /* glibc: sees the exit code */
    /* the fault handler stays installed for every call (each lists its own regions); the state
     * every call starts from is taken after the handler's own statics settled */
    peat_args none;
    memset(&none, 0, sizeof none);
    peat_isolate_faults_arm(&none, &w->ctl->rep);
    view_cache *vc = calloc(1, sizeof *vc); /* on the heap: the state compared is the module's */
    if (!vc) _exit(1);
    module_state ms;
    int watch = !w->keep_state && state_snapshot(&ms, (const void *)(uintptr_t)w->k->fn);
    for (;;) {
        char b;
        ssize_t r = read(sock, &b, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r != 1) _exit(0); /* peat closed its end: done */
        child_call(w->k, w->ctl, w->mem_fd, vc, watch ? &ms : NULL);
        if (send(sock, &b, 1, MSG_NOSIGNAL) != 1) _exit(0);
    }
}

/* ---- the parent ---- */

peat_status peat_isolate_worker_create(const peat_kernel *k, int keep_state,
                                       peat_isolate_worker **out)
{
    *out = NULL;
    peat_isolate_worker *w = calloc(1, sizeof *w);
    if (!w) return PEAT_ERROR(PEAT_ERR_NOMEM, "isolation worker");
    w->k = k, w->keep_state = keep_state, w->sock = -1;
    w->ctl = mmap(NULL, sizeof *w->ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    w->mem_fd = memfd_create("peat-isolate", MFD_CLOEXEC);
    if (w->ctl == MAP_FAILED || w->mem_fd < 0) {
        int e = errno;
        if (w->ctl != MAP_FAILED) munmap(w->ctl, sizeof *w->ctl);
        if (w->mem_fd >= 0) close(w->mem_fd);
        free(w);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "out of memory: the isolation worker's shared memory: %s",
                          strerror(e));
    }
    *out = w;
    return PEAT_OK;
}

/* Ends the child and its process group, reaps it. */
static void worker_stop(peat_isolate_worker *w)
{
    if (w->pid > 0) {
        kill(-w->pid, SIGKILL);
        kill(w->pid, SIGKILL);
        waitpid(w->pid, NULL, 0);
        live_set(w->pid, 0);
    }
    if (w->sock >= 0) close(w->sock);
    w->pid = 0, w->sock = -1;
}

void peat_isolate_worker_free(peat_isolate_worker *w)
{
    if (!w) return;
    worker_stop(w);
    if (w->arena) munmap(w->arena, w->arena_len);
    close(w->mem_fd);
    munmap(w->ctl, sizeof *w->ctl);
    free(w);
}

int peat_isolate_worker_spawns(const peat_isolate_worker *w)
{
    return w ? w->spawns : 0;
}

static peat_status worker_spawn(peat_isolate_worker *w)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "socketpair failed: %s", strerror(errno));
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        close(sv[0]);
        child_main(w, sv[1], parent);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "fork failed: %s", strerror(errno));
    }
    setpgid(pid, pid); /* whichever of parent and child gets there first */
    w->pid = pid, w->sock = sv[0], w->spawns++;
    live_set(0, pid);
    return PEAT_OK;
}

peat_status peat_isolate_worker_start(peat_isolate_worker *w)
{
    return w->pid > 0 ? PEAT_OK : worker_spawn(w);
}

/* The file holds at least n bytes, and the parent's mapping covers them. */
static peat_status arena_reserve(peat_isolate_worker *w, size_t n)
{
    if (n <= w->arena_len) return PEAT_OK;
    size_t len = n > 2 * w->arena_len ? n : 2 * w->arena_len;
    if (ftruncate(w->mem_fd, (off_t)len) != 0)
        return PEAT_ERROR(PEAT_ERR_NOMEM,
                          "out of memory: the isolation worker's shared memory of %zu bytes: %s",
                          len, strerror(errno));
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, w->mem_fd, 0);
    if (p == MAP_FAILED)
        return PEAT_ERROR(PEAT_ERR_NOMEM,
                          "out of memory: mapping the isolation worker's %zu bytes: %s", len,
                          strerror(errno));
    if (w->arena) munmap(w->arena, w->arena_len);
    w->arena = p, w->arena_len = len;
    return PEAT_OK;
}

/* Lays a's tensors out in the file, copies them in (outputs between sentinels) and builds run,
 * the parent's view of them. */
static peat_status request_fill(peat_isolate_worker *w, const peat_args *a, peat_args *run,
                                peat_tensor *t)
{
    ctl_block *c = w->ctl;
    size_t pg = pg_size(), off = (size_t)w->shift * pg;
    c->op = (int)a->op, c->p = a->p, c->n_in = a->n_in, c->n_out = a->n_out;
    /* the layout is the child's key to its mappings: nothing of an earlier call's stays in it */
    memset(c->in, 0, sizeof c->in);
    memset(c->out, 0, sizeof c->out);
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const peat_tensor *x = i < a->n_in ? a->in[i] : a->out[i - a->n_in];
        slot *s = i < a->n_in ? &c->in[i] : &c->out[i - a->n_in];
        s->present = x != NULL;
        if (!x) continue;
        s->dtype = (int)x->dtype, s->ndim = x->ndim, s->nb = peat_tensor_nbytes(x), s->off = off;
        memcpy(s->shape, x->shape, sizeof s->shape);
        size_t data_len, guard;
        peat_isolate_guard_geometry(s->nb, &data_len, &guard);
        s->len = i < a->n_in ? round_pg(s->nb ? s->nb : 1) : pg + data_len;
        off += s->len;
    }
    PEAT_TRY(arena_reserve(w, off));
    *run = *a;
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const peat_tensor *x = i < a->n_in ? a->in[i] : a->out[i - a->n_in];
        const slot *s = i < a->n_in ? &c->in[i] : &c->out[i - a->n_in];
        if (!x) continue;
        char *p = w->arena + s->off;
        if (i >= a->n_in) {
            peat_isolate_guard_head_init(p, s->nb);
            p += pg;
        }
        memcpy(p, x->data, s->nb);
        t[i] = *x;
        t[i].data = p;
        if (i < a->n_in)
            run->in[i] = &t[i];
        else
            run->out[i - a->n_in] = &t[i];
    }
    return PEAT_OK;
}

/* Sends the request and waits for the reply until the deadline: 1 when the call returned, 0 when
 * the child ended (*wst), -1 when it was killed at the deadline. */
static int request_wait(peat_isolate_worker *w, double timeout_s, int *wst)
{
    char b = 1;
    double t0 = peat_clock_now();
    if (send(w->sock, &b, 1, MSG_NOSIGNAL) == 1) {
        for (;;) {
            double left = timeout_s - (peat_clock_now() - t0);
            if (left <= 0.0) {
                kill(-w->pid, SIGKILL);
                kill(w->pid, SIGKILL);
                waitpid(w->pid, wst, 0);
                return -1;
            }
            /* slices of at most 0.2 s: a descendant holding the socket cannot hide an exit */
            struct pollfd p = {.fd = w->sock, .events = POLLIN};
            int r = poll(&p, 1, left > 0.2 ? 200 : (int)(left * 1e3) + 1);
            if (r > 0 && read(w->sock, &b, 1) == 1) return 1;
            if (r > 0 || (r < 0 && errno != EINTR)) break; /* closed: the child ended */
            if (waitpid(w->pid, wst, WNOHANG) == w->pid) return 0;
        }
    }
    waitpid(w->pid, wst, 0);
    return 0;
}

/* The outcome of a call that reached the child (ended: 0 returned, 1 the child ended, 2 killed at
 * the deadline). */
static void call_outcome(peat_isolate_worker *w, int ended, int wst, double timeout_s,
                         peat_call_outcome *out, char *why, size_t nwhy)
{
    const peat_isolate_report *rep = &w->ctl->rep;
    if (ended == 2) {
        snprintf(why, nwhy, "kernel '%s' hung: killed after %g s", w->k->name, timeout_s);
        *out = PEAT_CALL_HUNG;
    } else if (ended == 1) {
        *out = peat_isolate_child_verdict(w->k->name, wst, rep, why, nwhy);
    } else if (rep->status != PEAT_OK) {
        snprintf(why, nwhy, "kernel '%s' failed: %s", w->k->name, rep->msg);
        *out = PEAT_CALL_FAILED;
    } else {
        *out = PEAT_CALL_DONE;
    }
}

peat_status peat_isolate_worker_call(peat_isolate_worker *w, const peat_args *a, double timeout_s,
                                     peat_call_outcome *out, char *why, size_t nwhy)
{
    why[0] = 0;
    *out = PEAT_CALL_FAILED;
    peat_args run;
    peat_tensor t[PEAT_MAX_IO * 2];
    PEAT_TRY(request_fill(w, a, &run, t));
    if (w->pid <= 0) PEAT_TRY(worker_spawn(w));
    peat_isolate_report *rep = &w->ctl->rep;
    memset(rep, 0, sizeof *rep);
    rep->status = PEAT_ISOLATE_NEVER_RETURNED;
    w->ctl->state_changed = 0;
    int wst = 0, r = request_wait(w, timeout_s, &wst);
    if (r == 1 && rep->status == PEAT_ISOLATE_WORKER_NOMEM) /* before the kernel ran */
        return PEAT_ERROR(PEAT_ERR_NOMEM,
                          "out of memory: the isolation worker could not map the %s call's "
                          "buffers (%s); raise the memory limit (ulimit -v)",
                          w->k->name,
                          rep->msg + strlen("isolation worker: mapping the call's buffers: "));
    call_outcome(w, r == 1 ? 0 : r == 0 ? 1 : 2, wst, timeout_s, out, why, nwhy);
    if (r != 1) { /* the child is gone (reaped above): its descendants go with its group */
        kill(-w->pid, SIGKILL);
        live_set(w->pid, 0);
        w->pid = 0;
        worker_stop(w);
    }
    if (*out == PEAT_CALL_DONE) peat_isolate_writes_check(w->k, a, &run, rep, out, why, nwhy);
    for (int o = 0; o < a->n_out; o++)
        if (a->out[o]) memcpy(a->out[o]->data, run.out[o]->data, w->ctl->out[o].nb);
    /* a stray write may have damaged the child's own memory, and a call that changed the
     * kernel's state would pass it on: the next call gets a fresh child */
    if (*out == PEAT_CALL_OOB_WRITE || *out == PEAT_CALL_INPUT_MUTATION ||
        (r == 1 && w->ctl->state_changed))
        worker_stop(w);
    return PEAT_OK;
}

/* ---- one worker per thread for peat_isolate_call ---- */

static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;

static void tl_free(void *w)
{
    peat_isolate_worker_free(w);
}

static void tl_init(void)
{
    pthread_key_create(&tl_key, tl_free);
}

peat_status peat_isolate_worker_shared_call(const peat_kernel *k, const peat_args *a,
                                            double timeout_s, peat_call_outcome *out, char *why,
                                            size_t nwhy)
{
    pthread_once(&tl_once, tl_init);
    peat_isolate_worker *w = pthread_getspecific(tl_key);
    if (w && w->k != k) {
        peat_isolate_worker_free(w);
        w = NULL;
        pthread_setspecific(tl_key, NULL);
    }
    if (!w) {
        PEAT_TRY(peat_isolate_worker_create(k, 0, &w));
        pthread_setspecific(tl_key, w);
    }
    return peat_isolate_worker_call(w, a, timeout_s, out, why, nwhy);
}

void peat_isolate_workers_close(void)
{
    pthread_once(&tl_once, tl_init);
    peat_isolate_worker_free(pthread_getspecific(tl_key));
    pthread_setspecific(tl_key, NULL);
}

void peat_isolate_worker_shift(peat_isolate_worker *w, int pages)
{
    w->shift = pages > 0 ? pages : 0;
}

int peat_isolate_fork_per_call(void)
{
    const char *e = getenv("PEAT_ISOLATE");
    return e && strcmp(e, "fork") == 0;
}
