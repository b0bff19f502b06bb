/* golden_log.c: the profile's golden training kept for runtime FI: each iteration's loss in memory,
 * its weights in an unlinked temporary file (written once, read back once or twice). */
#define _GNU_SOURCE /* O_TMPFILE, pwritev, preadv */
#include "campaign/golden_log.h"

#include "campaign/campaign.h"
#include "core/child_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

struct peat_campaign_golden_log {
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
};

int peat_campaign_golden_log_wanted(const peat_campaign_opts *o, const peat_kernel *k)
{
    return !o->no_runtime && !o->capture && !o->finetune_from && strcmp(k->backend, "cpu") == 0 &&
           !getenv("PEAT_NO_GOLDEN_LOG");
}

int peat_campaign_golden_log_is_weight(const char *name)
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

peat_status peat_campaign_golden_log_open(peat_flow_t *f, const char *dir, int64_t iters,
                                          uint64_t max_bytes, peat_campaign_golden_log **out)
{
    *out = NULL;
    peat_campaign_golden_log *g = calloc(1, sizeof *g);
    int n = peat_models_flow_state_count(f);
    if (!g) return PEAT_ERROR(PEAT_ERR_NOMEM, "golden log");
    g->fd = -1, g->f = f;
    g->w_idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *g->w_idx);
    g->iov = malloc((size_t)(n > 0 ? n : 1) * sizeof *g->iov);
    g->cap = iters > 0 ? iters : 1;
    g->loss = malloc((size_t)g->cap * sizeof *g->loss);
    if (!g->w_idx || !g->iov || !g->loss) {
        peat_campaign_golden_log_free(g);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "golden log");
    }
    int f32 = 1;
    for (int i = 0; i < n; i++) {
        const char *name = NULL;
        const peat_tensor *t = peat_models_flow_state(f, i, &name);
        if (!name || !peat_campaign_golden_log_is_weight(name)) continue;
        g->w_idx[g->n_w++] = i;
        g->numel += peat_tensor_numel(t);
        f32 &= t->dtype == PEAT_DTYPE_F32;
    }
    const char *tmp = getenv("TMPDIR");
    uint64_t bytes = (uint64_t)g->numel * sizeof(float) * (uint64_t)g->cap;
    if (g->n_w == 0 || !f32 || bytes > max_bytes ||
        ((g->fd = temp_open(dir && *dir ? dir : ".")) < 0 &&
         (g->fd = temp_open(tmp && *tmp ? tmp : "/tmp")) < 0)) {
        peat_campaign_golden_log_free(g); /* no log: the runtime trains its golden run */
        return PEAT_OK;
    }
    /* a log that could fill the disk would starve the campaign file beside it */
    struct statvfs fs;
    if (fstatvfs(g->fd, &fs) != 0 ||
        (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize < 2 * bytes + ROOM_LEFT) {
        peat_campaign_golden_log_free(g);
        return PEAT_OK;
    }
    peat_child_fd_hold(g->fd); /* the isolation's children do not keep the file alive */
    *out = g;
    return PEAT_OK;
}

/* The iovecs of f's weight tensors. */
static void iov_fill(const peat_campaign_golden_log *g, peat_flow_t *f)
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

static off_t iter_off(const peat_campaign_golden_log *g, int64_t t)
{
    return (off_t)t * (off_t)g->numel * (off_t)sizeof(float);
}

void peat_campaign_golden_log_append(peat_campaign_golden_log *g, double loss)
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

void peat_campaign_golden_log_keep(peat_campaign_golden_log *g, peat_flow_t *f, peat_exec_t *ex)
{
    peat_exec_clear_hooks(ex);
    g->f = f, g->ex = ex, g->kept = 1;
}

int64_t peat_campaign_golden_log_iters(const peat_campaign_golden_log *g)
{
    return g && g->fd >= 0 && g->kept ? g->n : 0;
}

double peat_campaign_golden_log_loss(const peat_campaign_golden_log *g, int64_t t)
{
    return g->loss[t];
}

peat_flow_t *peat_campaign_golden_log_flow(const peat_campaign_golden_log *g)
{
    return g && g->kept ? g->f : NULL;
}

peat_exec_t *peat_campaign_golden_log_exec(const peat_campaign_golden_log *g)
{
    return g && g->kept ? g->ex : NULL;
}

int64_t peat_campaign_golden_log_numel(const peat_campaign_golden_log *g)
{
    return g->numel;
}

/* Iteration t's weights read back through n iovecs. */
static peat_status iter_read(const peat_campaign_golden_log *g, int64_t t, struct iovec *iov, int n)
{
    if (t < 0 || t >= g->n || !io_all(g->fd, iov, n, iter_off(g, t), 0))
        return PEAT_ERROR(PEAT_ERR_IO,
                          "reading the golden run's weights of iteration %lld back: %s",
                          (long long)t, t < 0 || t >= g->n ? "not logged" : strerror(errno));
    return PEAT_OK;
}

peat_status peat_campaign_golden_log_read(const peat_campaign_golden_log *g, int64_t t, float *buf)
{
    struct iovec v = {buf, (size_t)g->numel * sizeof(float)};
    return iter_read(g, t, &v, 1);
}

peat_status peat_campaign_golden_log_load(const peat_campaign_golden_log *g, int64_t t,
                                          peat_flow_t *f)
{
    iov_fill(g, f); /* the appends' iovecs: appends ended when the log was kept */
    return iter_read(g, t, g->iov, g->n_w);
}

void peat_campaign_golden_log_free(peat_campaign_golden_log *g)
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
