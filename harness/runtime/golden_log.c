/* golden_log.c: the profile's golden training kept for runtime FI: each iteration's loss in memory,
 * its weights in an unlinked temporary file (written once, read back once or twice). */
#define _GNU_SOURCE /* O_TMPFILE, pwritev, preadv */
#include "harness/runtime/golden_log.h"

#include "core/child_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

struct peat_runtime_golden_log {
    int fd;
    int n_w;
    int *w_idx;     /* the weight tensors' state indices */
    int64_t numel;  /* floats an iteration */
    int64_t n, cap; /* iterations logged, room in loss */
    double *loss;
    struct iovec *iov; /* one per weight tensor */
    peat_flow_t *f;    /* the flow it logs (kept: owned) */
    peat_exec_t *ex;
    int kept;
    int restored; /* read from a saved log: its flow did not train it, so cannot train on */
};

int peat_runtime_golden_log_is_weight(const char *name)
{
    return strncmp(name, "adam.", 5) && strncmp(name, "sgd.", 4);
}

/* Room the log leaves the campaign's own file on the same disk, beyond twice its own size. */
#define ROOM_LEFT ((uint64_t)256 << 20)

/* An unlinked file under dir: O_TMPFILE where the file system has it, else a named one removed at
 * once; -1 when neither can be made. */
static int temp_open(const char *dir)
{
#ifdef O_TMPFILE
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
#endif
    char path[640];
    snprintf(path, sizeof path, "%s/.peat-golden-XXXXXX", dir);
    int fd2 = mkostemp(path, O_CLOEXEC);
    if (fd2 >= 0) unlink(path);
    return fd2;
}

/* A log of f's weight tensors, no file yet (NULL when not every weight is fp32 or there is none).
 */
static peat_status log_new(peat_flow_t *f, int64_t iters, peat_runtime_golden_log **out)
{
    *out = NULL;
    peat_runtime_golden_log *g = calloc(1, sizeof *g);
    int n = peat_models_flow_state_count(f);
    if (!g) return PEAT_ERROR(PEAT_ERR_NOMEM, "golden log");
    g->fd = -1, g->f = f;
    g->w_idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *g->w_idx);
    g->iov = malloc((size_t)(n > 0 ? n : 1) * sizeof *g->iov);
    g->cap = iters > 0 ? iters : 1;
    g->loss = malloc((size_t)g->cap * sizeof *g->loss);
    if (!g->w_idx || !g->iov || !g->loss) {
        peat_runtime_golden_log_free(g);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "golden log");
    }
    int f32 = 1;
    for (int i = 0; i < n; i++) {
        const char *name = NULL;
        const peat_tensor *t = peat_models_flow_state(f, i, &name);
        if (!name || !peat_runtime_golden_log_is_weight(name)) continue;
        g->w_idx[g->n_w++] = i;
        g->numel += peat_tensor_numel(t);
        f32 &= t->dtype == PEAT_DTYPE_F32;
    }
    if (g->n_w == 0 || !f32)
        peat_runtime_golden_log_free(g);
    else
        *out = g;
    return PEAT_OK;
}

peat_status peat_runtime_golden_log_open(peat_flow_t *f, const char *dir, int64_t iters,
                                         uint64_t max_bytes, peat_runtime_golden_log **out)
{
    *out = NULL;
    peat_runtime_golden_log *g = NULL;
    PEAT_TRY(log_new(f, iters, &g));
    if (!g) return PEAT_OK; /* no log: the runtime trains its golden run */
    const char *tmp = getenv("TMPDIR");
    uint64_t bytes = (uint64_t)g->numel * sizeof(float) * (uint64_t)g->cap;
    if (bytes > max_bytes || ((g->fd = temp_open(dir && *dir ? dir : ".")) < 0 &&
                              (g->fd = temp_open(tmp && *tmp ? tmp : "/tmp")) < 0)) {
        peat_runtime_golden_log_free(g);
        return PEAT_OK;
    }
    /* a log that could fill the disk would starve the campaign file beside it */
    struct statvfs fs;
    if (fstatvfs(g->fd, &fs) != 0 ||
        (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize < 2 * bytes + ROOM_LEFT) {
        peat_runtime_golden_log_free(g);
        return PEAT_OK;
    }
    peat_child_fd_hold(g->fd); /* the isolation's children do not keep the file alive */
    *out = g;
    return PEAT_OK;
}

/* The iovecs of f's weight tensors. */
static void iov_fill(const peat_runtime_golden_log *g, peat_flow_t *f)
{
    for (int k = 0; k < g->n_w; k++) {
        peat_tensor *t = peat_models_flow_state(f, g->w_idx[k], NULL);
        g->iov[k] = (struct iovec){t->data, peat_tensor_nbytes(t)};
    }
}

/* All of n bytes at off through the iovecs (short transfers resumed); 0 on an error. */
static int io_all(int fd, struct iovec *iov, int n, off_t off, int wr)
{
    while (n > 0) {
        ssize_t r = wr ? pwritev(fd, iov, n, off) : preadv(fd, iov, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        off += r;
        while (n > 0 && (size_t)r >= iov->iov_len) r -= (ssize_t)iov->iov_len, iov++, n--;
        if (n > 0) iov->iov_base = (char *)iov->iov_base + r, iov->iov_len -= (size_t)r;
    }
    return 1;
}

static off_t iter_off(const peat_runtime_golden_log *g, int64_t t)
{
    return (off_t)t * (off_t)g->numel * (off_t)sizeof(float);
}

void peat_runtime_golden_log_append(peat_runtime_golden_log *g, double loss)
{
    if (!g || g->fd < 0 || g->kept) return;
    if (g->n == g->cap) {
        double *l = realloc(g->loss, (size_t)(2 * g->cap) * sizeof *l);
        if (!l) goto drop;
        g->loss = l, g->cap *= 2;
    }
    iov_fill(g, g->f);
    if (!io_all(g->fd, g->iov, g->n_w, iter_off(g, g->n), 1)) goto drop;
    g->loss[g->n++] = loss;
    return;
drop: /* the runtime trains its golden run instead */
    peat_child_fd_drop(g->fd);
    close(g->fd);
    g->fd = -1, g->n = 0;
}

void peat_runtime_golden_log_keep(peat_runtime_golden_log *g, peat_flow_t *f, peat_exec_t *ex)
{
    peat_exec_clear_hooks(ex);
    g->f = f, g->ex = ex, g->kept = 1;
}

int64_t peat_runtime_golden_log_iters(const peat_runtime_golden_log *g)
{
    return g && g->fd >= 0 && g->kept ? g->n : 0;
}

int peat_runtime_golden_log_trains_on(const peat_runtime_golden_log *g)
{
    return g && !g->restored;
}

double peat_runtime_golden_log_loss(const peat_runtime_golden_log *g, int64_t t)
{
    return g->loss[t];
}

peat_flow_t *peat_runtime_golden_log_flow(const peat_runtime_golden_log *g)
{
    return g && g->kept ? g->f : NULL;
}

peat_exec_t *peat_runtime_golden_log_exec(const peat_runtime_golden_log *g)
{
    return g && g->kept ? g->ex : NULL;
}

int64_t peat_runtime_golden_log_numel(const peat_runtime_golden_log *g)
{
    return g->numel;
}

/* Iteration t's weights read back through n iovecs. */
static peat_status iter_read(const peat_runtime_golden_log *g, int64_t t, struct iovec *iov, int n)
{
    if (t < 0 || t >= g->n || !io_all(g->fd, iov, n, iter_off(g, t), 0))
        return PEAT_ERROR(PEAT_ERR_IO,
                          "reading the golden run's weights of iteration %lld back: %s",
                          (long long)t, t < 0 || t >= g->n ? "not logged" : strerror(errno));
    return PEAT_OK;
}

peat_status peat_runtime_golden_log_read(const peat_runtime_golden_log *g, int64_t t, float *buf)
{
    struct iovec v = {buf, (size_t)g->numel * sizeof(float)};
    return iter_read(g, t, &v, 1);
}

peat_status peat_runtime_golden_log_load(const peat_runtime_golden_log *g, int64_t t,
                                         peat_flow_t *f)
{
    iov_fill(g, f); /* the appends' iovecs: appends ended when the log was kept */
    return iter_read(g, t, g->iov, g->n_w);
}

void peat_runtime_golden_log_free(peat_runtime_golden_log *g)
{
    if (!g) return;
    if (g->fd >= 0) {
        peat_child_fd_drop(g->fd);
        close(g->fd);
    }
    if (g->kept) {
        peat_models_flow_free(g->f);
        peat_exec_free(g->ex);
    }
    free(g->w_idx);
    free(g->iov);
    free(g->loss);
    free(g);
}

/* ---- a log kept across runs (the golden cache): PATH holds the weights as the log wrote them,
 * PATH.loss a header and the losses ---- */

#define SAVED_MAGIC "PEATGLG2"
typedef struct {
    char magic[8];
    int64_t n, numel;
} saved_head;

/* All of n bytes of buf at off (short transfers resumed); 0 on an error. */
static int bytes_io(int fd, void *buf, size_t n, off_t off, int wr)
{
    struct iovec v = {buf, n};
    return io_all(fd, &v, 1, off, wr);
}

/* The weights into a new file at path: the log's own file linked there when the file system
 * allows it (an O_TMPFILE file on the same file system: no copy), else copied. */
static int weights_save(const peat_runtime_golden_log *g, const char *path)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", g->fd);
    size_t total = (size_t)g->n * (size_t)g->numel * sizeof(float);
    struct stat sb;
    if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0) {
        /* the log may hold room past its last iteration: the saved file is exactly the weights */
        if (stat(path, &sb) == 0 && (size_t)sb.st_size == total) return 1;
        unlink(path);
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    size_t block = (size_t)4 << 20;
    char *buf = fd >= 0 ? malloc(block) : NULL;
    int ok = buf != NULL;
    for (size_t done = 0; ok && done < total; done += block) {
        size_t m = total - done < block ? total - done : block;
        ok = bytes_io(g->fd, buf, m, (off_t)done, 0) && bytes_io(fd, buf, m, (off_t)done, 1);
    }
    free(buf);
    if (fd >= 0 && close(fd) != 0) ok = 0;
    if (!ok && fd >= 0) unlink(path);
    return ok;
}

peat_status peat_runtime_golden_log_save(const peat_runtime_golden_log *g, const char *path)
{
    int64_t n = peat_runtime_golden_log_iters(g);
    if (n <= 0) return PEAT_ERROR(PEAT_ERR_INVAL, "golden log: nothing logged to save");
    char lpath[1100];
    snprintf(lpath, sizeof lpath, "%s.loss", path);
    saved_head h = {SAVED_MAGIC, n, g->numel};
    int fd = open(lpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int ok = fd >= 0 && bytes_io(fd, &h, sizeof h, 0, 1) &&
             bytes_io(fd, g->loss, (size_t)n * sizeof *g->loss, sizeof h, 1);
    if (fd >= 0 && close(fd) != 0) ok = 0;
    ok = ok && weights_save(g, path);
    return ok ? PEAT_OK
              : PEAT_ERROR(PEAT_ERR_IO, "golden log: cannot save it as %s: %s", path,
                           strerror(errno));
}

/* The header and losses of a saved log into g (0 when they are not a log of g's weights). */
static int losses_read(peat_runtime_golden_log *g, const char *path)
{
    char lpath[1100];
    snprintf(lpath, sizeof lpath, "%s.loss", path);
    int fd = open(lpath, O_RDONLY | O_CLOEXEC);
    saved_head h;
    int ok = fd >= 0 && bytes_io(fd, &h, sizeof h, 0, 0) &&
             !memcmp(h.magic, SAVED_MAGIC, sizeof h.magic) && h.n > 0 && h.numel == g->numel;
    double *l = ok ? realloc(g->loss, (size_t)h.n * sizeof *l) : NULL;
    if (l) g->loss = l, g->cap = h.n;
    ok = ok && l && bytes_io(fd, g->loss, (size_t)h.n * sizeof *l, sizeof h, 0);
    if (fd >= 0) close(fd);
    if (ok) g->n = h.n;
    return ok;
}

peat_status peat_runtime_golden_log_restore(const char *path, peat_flow_t *f, peat_exec_t *ex,
                                            peat_runtime_golden_log **out)
{
    *out = NULL;
    peat_runtime_golden_log *g = NULL;
    PEAT_TRY(log_new(f, 1, &g));
    struct stat sb;
    int ok = g && losses_read(g, path) && (g->fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0 &&
             fstat(g->fd, &sb) == 0 &&
             (uint64_t)sb.st_size == (uint64_t)g->n * (uint64_t)g->numel * sizeof(float);
    if (!ok) {
        peat_runtime_golden_log_free(g); /* not kept: f and ex stay the caller's */
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not a golden log of this flow", path);
    }
    g->restored = 1;
    peat_child_fd_hold(g->fd);
    peat_runtime_golden_log_keep(g, f, ex);
    *out = g;
    return PEAT_OK;
}
