/* isolate.c: a candidate kernel run in a forked child with a deadline (a crash or hang becomes a
 * reported failure), its outputs in shared memory that the parent reads. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, strsignal, usleep */
#include "harness/isolate.h"
#include "harness/campaign.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void *shared_alloc(size_t n)
{
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

peat_status peat_isolate_outputs_alloc(peat_args *a, peat_tensor *const *tmpl, int n)
{
    for (int o = 0; o < PEAT_MAX_IO; o++) a->out[o] = NULL;
    a->n_out = n;
    peat_status st = PEAT_OK;
    for (int o = 0; o < n && st == PEAT_OK; o++) {
        size_t nb = peat_tensor_nbytes(tmpl[o]);
        void *mem = shared_alloc(nb);
        if (!mem) {
            st = PEAT_ERROR(PEAT_ERR_NOMEM, "shared output buffer of %zu bytes", nb);
            break;
        }
        st = peat_tensor_wrap(PEAT_DTYPE_F32, tmpl[o]->ndim, tmpl[o]->shape, mem, &a->out[o]);
        if (st != PEAT_OK) munmap(mem, nb ? nb : 1);
    }
    /* a later buffer failed: the earlier ones must not outlive the call */
    if (st != PEAT_OK) peat_isolate_outputs_free(a);
    return st;
}

void peat_isolate_outputs_free(peat_args *a)
{
    for (int o = 0; o < a->n_out; o++) {
        if (!a->out[o]) continue;
        size_t nb = peat_tensor_nbytes(a->out[o]);
        munmap(a->out[o]->data, nb ? nb : 1);
        peat_tensor_free(a->out[o]);
        a->out[o] = NULL;
    }
    a->n_out = 0;
}

/* In-process: the call's shapes come from a valid record, so any error is the kernel's. */
static peat_status run_here(const peat_kernel *k, const peat_args *a, char *why, size_t nwhy)
{
    peat_status st = peat_kernel_run(k, a);
    if (st == PEAT_OK) return PEAT_OK;
    snprintf(why, nwhy, "kernel '%s' failed: %s", k->name, peat_error_last());
    return PEAT_ERR_KERNEL;
}

/* Waits for the child, whose exit closes fd, until the deadline; kills it past it.
 * Returns 1 when the child ended (wst set), 0 when it was killed, -1 when waitpid failed. */
static int wait_deadline(pid_t pid, int fd, double timeout_s, int *wst)
{
    double t0 = peat_now();
    for (;;) {
        double left = timeout_s - (peat_now() - t0);
        if (left <= 0.0) {
            kill(pid, SIGKILL);
            waitpid(pid, wst, 0);
            return 0;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1e3) + 1);
        if (r > 0 || (r < 0 && errno != EINTR)) break; /* closed (or poll failed): reap it */
    }
    return waitpid(pid, wst, 0) < 0 ? -1 : 1;
}

/* What the child's end says about the kernel: child_status is what it returned (-1: it never
 * returned), msg its error message. */
static peat_status child_verdict(const peat_kernel *k, int wst, int child_status, const char *msg,
                                 char *why, size_t nwhy)
{
    if (WIFSIGNALED(wst)) {
        snprintf(why, nwhy, "kernel '%s' crashed with signal %d (%s)", k->name, WTERMSIG(wst),
                 strsignal(WTERMSIG(wst)));
        return PEAT_ERR_KERNEL;
    }
    if (child_status == -1 && WIFEXITED(wst) && WEXITSTATUS(wst) != 0) {
        /* a sanitizer or the kernel itself turned the fault into an exit */
        snprintf(why, nwhy, "kernel '%s' crashed (exit code %d before returning)", k->name,
                 WEXITSTATUS(wst));
        return PEAT_ERR_KERNEL;
    }
    if (child_status != PEAT_OK) {
        snprintf(why, nwhy, "kernel '%s' failed: %s", k->name,
                 child_status == -1 ? "exited without finishing" : msg);
        return PEAT_ERR_KERNEL;
    }
    return PEAT_OK;
}

enum { CHILD_MSG = 256, CHILD_SHARED = sizeof(int) + CHILD_MSG };

peat_status peat_isolate_run(const peat_kernel *k, const peat_args *a, int isolate,
                             double timeout_s, char *why, size_t nwhy)
{
    why[0] = 0;
    if (!isolate) return run_here(k, a, why, nwhy);
    int *child_status = shared_alloc(CHILD_SHARED);
    if (!child_status) return PEAT_ERROR(PEAT_ERR_NOMEM, "shared status");
    char *child_msg = (char *)(child_status + 1);
    *child_status = -1;
    /* the child holds the write end of a pipe until it exits: poll() on the read end wakes the
     * parent the moment the child is done (polling waitpid with sleeps overshot by up to 20 ms
     * a call) */
    int fds[2];
    if (pipe(fds) != 0) {
        munmap(child_status, CHILD_SHARED);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "pipe failed: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        munmap(child_status, CHILD_SHARED);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        peat_status st = peat_kernel_run(k, a);
        *child_status = (int)st;
        if (st != PEAT_OK) snprintf(child_msg, CHILD_MSG, "%s", peat_error_last());
        _exit(0);
    }
    close(fds[1]);
    int wst = 0;
    int ended = wait_deadline(pid, fds[0], timeout_s, &wst);
    close(fds[0]);
    peat_status st;
    if (ended == 0) {
        snprintf(why, nwhy, "kernel '%s' hung: killed after %.0f s", k->name, timeout_s);
        st = PEAT_ERR_KERNEL;
    } else if (ended < 0)
        st = PEAT_ERROR(PEAT_ERR_INTERNAL, "waitpid failed: %s", strerror(errno));
    else
        st = child_verdict(k, wst, *child_status, child_msg, why, nwhy);
    munmap(child_status, CHILD_SHARED);
    return st;
}
