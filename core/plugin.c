/* plugin.c: loads external kernel libraries through the versioned plugin ABI (plugin.h), each
 * first in a child process with a deadline, so that a plugin that crashes, exits or hangs while
 * loading is reported. */
#define _GNU_SOURCE /* strsignal */
#include "core/backend_impl.h"
#include "core/clock.h"
#include "peat/peat.h"
#include "core/child_fds.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Seconds the child that loads a plugin first may take (PEAT_PLUGIN_TIMEOUT overrides). */
#define PLUGIN_TIMEOUT_S 30.0
#include <stddef.h>

static int plugin_count;

/* Registers a plugin's kernel from the first `size` bytes of its descriptor (a plugin built for
 * an older ABI has a shorter one: the fields it lacks are 0). */
static peat_status register_prefix(const peat_kernel *k, size_t size)
{
    if (!k) return PEAT_ERROR(PEAT_ERR_INVAL, "plugin registered a NULL kernel");
    peat_kernel c;
    memset(&c, 0, sizeof c);
    memcpy(&c, k, size);
    c.role = PEAT_ROLE_CANDIDATE; /* a plugin can never replace the exact or golden reference */
    if (!c.backend) c.backend = "cpu";
    peat_status st = peat_registry_add(&c);
    if (st == PEAT_OK) plugin_count++;
    return st;
}

static peat_status host_register(const peat_kernel *k)
{
    return register_prefix(k, sizeof *k);
}

/* ABI 2 descriptors end before `flags`. */
static peat_status host_register_v2(const peat_kernel *k)
{
    return register_prefix(k, offsetof(peat_kernel, flags));
}

static peat_status host_error(peat_status code, const char *file, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return peat_error_set(code, file, line, "%s", msg);
}

/* The host table a plugin built for ABI v sees: its own version number, and what that ABI had
 * (a plugin built for ABI 2 or 3 reads the table only up to `error`; the peat_device it is
 * handed keeps ABI 3's layout, core/backend_impl.h; ABI 4's table is ABI 5's: 5 only added op
 * kinds). */
static const peat_plugin_host *host_for(int v)
{
    static const peat_plugin_host host = {
        PEAT_PLUGIN_ABI_VERSION, PEAT_VERSION_STRING, host_register, peat_op_name, host_error,
        peat_device_cl_program};
    static const peat_plugin_host host_v4 = {
        4, PEAT_VERSION_STRING, host_register, peat_op_name, host_error, peat_device_cl_program};
    static const peat_plugin_host host_v3 = {
        3, PEAT_VERSION_STRING, host_register, peat_op_name, host_error, NULL};
    static const peat_plugin_host host_v2 = {
        2, PEAT_VERSION_STRING, host_register_v2, peat_op_name, host_error, NULL};
    return v == 2 ? &host_v2 : v == 3 ? &host_v3 : v == 4 ? &host_v4 : &host;
}

static peat_status plugin_load_here(const char *path, int *n_registered)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return PEAT_ERROR(PEAT_ERR_IO, "cannot load plugin %s: %s", path, dlerror());
    peat_plugin_abi_version_fn ver;
    peat_plugin_register_fn reg;
    *(void **)&ver = dlsym(h, "peat_plugin_abi_version");
    *(void **)&reg = dlsym(h, "peat_plugin_register");
    if (!ver || !reg) {
        dlclose(h);
        return PEAT_ERROR(PEAT_ERR_ABI,
                          "%s is not a PEAT plugin (missing peat_plugin_abi_version or "
                          "peat_plugin_register)",
                          path);
    }
    int v = ver();
    if (v < PEAT_PLUGIN_ABI_OLDEST || v > PEAT_PLUGIN_ABI_VERSION) {
        dlclose(h);
        return PEAT_ERROR(PEAT_ERR_ABI,
                          "plugin %s was built for PEAT plugin ABI %d, this peat speaks ABI %d: "
                          "rebuild it against this include/peat/plugin.h",
                          path, v, PEAT_PLUGIN_ABI_VERSION);
    }
    int before = plugin_count;
    peat_error_clear();
    int rc = reg(host_for(v));
    if (rc != 0) {
        /* the library stays loaded: kernels it registered before failing point into it */
        char why[400]; /* the message is about to be replaced: keep the plugin's reason */
        snprintf(why, sizeof why, "%s", peat_error_last());
        return PEAT_ERROR(PEAT_ERR_ABI, "plugin %s failed to register (code %d)%s%s", path, rc,
                          why[0] ? ": " : "", why);
    }
    if (n_registered) *n_registered = plugin_count - before;
    /* never dlclose a loaded plugin: the registry holds pointers to its functions and strings */
    return PEAT_OK;
}

/* What the probe child reports: its status, then its error message. */
typedef struct {
    int status;
    char msg[512];
} probe_report;

enum { PROBE_CALLED_EXIT = -2 }; /* status of a probe child whose plugin called exit() */
static int probe_fd = -1;        /* in the probe child: where the report goes */

/* Runs in the probe child when the plugin calls exit(): says so before the process ends. */
static void probe_atexit(void)
{
    probe_report r = {PROBE_CALLED_EXIT, ""};
    if (probe_fd >= 0 && write(probe_fd, &r, sizeof r) < 0) probe_fd = -1;
}

static double plugin_timeout_s(void)
{
    const char *e = getenv("PEAT_PLUGIN_TIMEOUT");
    double t = e ? strtod(e, NULL) : 0.0;
    return t > 0.0 ? t : PLUGIN_TIMEOUT_S;
}

/* Reads the child's report until the deadline: bytes read, or -2 when the deadline passed. */
static ssize_t probe_read(int fd, probe_report *r, double timeout_s)
{
    double t0 = peat_clock_now();
    for (;;) {
        double left = timeout_s - (peat_clock_now() - t0);
        if (left <= 0.0) return -2;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, left > 1.0 ? 1000 : (int)(left * 1e3) + 1);
        if (n > 0) return read(fd, r, sizeof *r);
        if (n < 0 && errno != EINTR) return -1;
    }
}

static void probe_child(const char *path, int fd, pid_t parent)
{
    peat_child_fds_close(); /* peat's locks and campaign file are not the probe's to hold */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* peat killed outright: the child goes too */
    if (getppid() != parent) _exit(1);
    probe_fd = fd;
    atexit(probe_atexit);
    /* quiet: what the plugin prints shows when the parent loads it; a sanitizer's report of
     * a crash here would be a second line beside peat's one */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1), dup2(null, 2);
    probe_report r = {0, ""};
    r.status = (int)plugin_load_here(path, NULL);
    snprintf(r.msg, sizeof r.msg, "%s", r.status ? peat_error_last() : "");
    _exit(write(fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
}

/* Loads and registers the plugin in a child first (its own process group, a deadline, killed
 * with peat): one that crashes, exits or hangs there ends only the child, and the parent
 * reports it in one line. */
static peat_status plugin_probe(const char *path)
{
    int fd[2];
    if (pipe(fd) != 0) return PEAT_ERROR(PEAT_ERR_INTERNAL, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        probe_child(path, fd[1], parent);
    }
    setpgid(pid, pid);
    close(fd[1]);
    probe_report r;
    double timeout_s = plugin_timeout_s();
    ssize_t got = probe_read(fd[0], &r, timeout_s);
    close(fd[0]);
    if (got == -2) kill(-pid, SIGKILL); /* past the deadline */
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) continue;
    kill(-pid, SIGKILL); /* nothing the plugin started stays behind */
    if (got == -2)
        return PEAT_ERROR(PEAT_ERR_ABI,
                          "plugin %s did not finish loading within %g s (a constructor or "
                          "peat_plugin_register that hangs; PEAT_PLUGIN_TIMEOUT sets the limit)",
                          path, timeout_s);
    int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
    if (got == (ssize_t)sizeof r && r.status == PROBE_CALLED_EXIT)
        return PEAT_ERROR(PEAT_ERR_ABI, "plugin %s ended the process while loading (exit code %d)",
                          path, code);
    if (got == (ssize_t)sizeof r)
        return r.status == PEAT_OK
                   ? PEAT_OK
                   : peat_error_set((peat_status)r.status, __FILE__, __LINE__, "%s", r.msg);
    if (WIFSIGNALED(wst))
        return PEAT_ERROR(PEAT_ERR_ABI, "plugin %s crashed while loading (signal %d, %s)", path,
                          WTERMSIG(wst), strsignal(WTERMSIG(wst)));
    /* no report and no exit(): a sanitizer (or _exit) turned a fault into an exit code */
    return PEAT_ERROR(PEAT_ERR_ABI, "plugin %s crashed while loading (exit code %d)", path, code);
}

/* ---- the load in peat itself, after the child's went well ---- */

static const char *loading_path; /* set while peat loads a plugin itself */

static void load_crash(int sig)
{
    char line[600];
    int n = snprintf(line, sizeof line,
                     "peat: error: plugin %s crashed while loading in peat (signal %d), though it "
                     "loaded cleanly in a child\n",
                     loading_path, sig);
    if (write(2, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) _exit(2);
    _exit(2);
}

static void load_atexit(void)
{
    if (!loading_path) return;
    char line[600];
    int n = snprintf(line, sizeof line,
                     "peat: error: plugin %s ended the process while loading in peat, though it "
                     "loaded cleanly in a child\n",
                     loading_path);
    if (write(2, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) _exit(2);
    _exit(2); /* never the status the plugin chose */
}

/* Loads in this process with what the plugin prints sent to stderr (stdout is peat's: --json),
 * and a crash or exit during the load ends peat with one line. */
static peat_status plugin_load_guarded(const char *path, int *n_registered)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    static int atexit_done;
    if (!atexit_done) atexit_done = atexit(load_atexit) == 0;
    struct sigaction sa, old[5];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = load_crash;
    for (int i = 0; i < 5; i++) sigaction(sigs[i], &sa, &old[i]);
    fflush(stdout);
    int saved = dup(1);
    if (saved >= 0) dup2(2, 1);
    loading_path = path;
    peat_status st = plugin_load_here(path, n_registered);
    loading_path = NULL;
    fflush(stdout);
    if (saved >= 0) dup2(saved, 1), close(saved);
    for (int i = 0; i < 5; i++) sigaction(sigs[i], &old[i], NULL);
    return st;
}

peat_status peat_plugin_load(const char *path, int *n_registered)
{
    if (n_registered) *n_registered = 0;
    if (!path || !*path) return PEAT_ERROR(PEAT_ERR_INVAL, "empty plugin path");
    struct stat sb;
    int here = stat(path, &sb) == 0;
    if (!here && strchr(path, '/'))
        return PEAT_ERROR(PEAT_ERR_IO, "cannot load plugin %s: %s", path, strerror(errno));
    /* a FIFO or a device would block the load: only files */
    if (here && !S_ISREG(sb.st_mode))
        return PEAT_ERROR(PEAT_ERR_IO, "cannot load plugin %s: not a regular file", path);
    /* dlopen searches the library path for a name without '/': a file of that name here is
     * meant (one that is not here is still looked up on the library path) */
    char local[4096];
    if (here && !strchr(path, '/')) {
        if (snprintf(local, sizeof local, "./%s", path) >= (int)sizeof local)
            return PEAT_ERROR(PEAT_ERR_INVAL, "plugin path longer than %zu bytes",
                              sizeof local - 3);
        path = local;
    }
    PEAT_TRY(plugin_probe(path));
    return plugin_load_guarded(path, n_registered);
}
