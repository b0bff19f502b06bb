/* plugin.c: loads external kernel libraries through the versioned plugin ABI (plugin.h), each
 * first in a child process so that a plugin that crashes or exits while loading is reported. */
#define _DEFAULT_SOURCE /* strsignal */
#include "peat/peat.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

static peat_status plugin_load_here(const char *path, int *n_registered)
{
    /* dlopen searches the library path for names without '/': make "./x.so" explicit */
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
    static const peat_plugin_host host = {PEAT_PLUGIN_ABI_VERSION, PEAT_VERSION_STRING,
                                          host_register, peat_op_name, host_error};
    static const peat_plugin_host host_v2 = {2, PEAT_VERSION_STRING, host_register_v2, peat_op_name,
                                             host_error};
    int before = plugin_count;
    peat_error_clear();
    int rc = reg(v == 2 ? &host_v2 : &host);
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

/* Loads and registers the plugin in a child first: one that crashes, exits or hangs there ends
 * only the child, and the parent reports it in one line. */
static peat_status plugin_probe(const char *path)
{
    int fd[2];
    if (pipe(fd) != 0) return PEAT_ERROR(PEAT_ERR_INTERNAL, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        probe_fd = fd[1];
        atexit(probe_atexit);
        /* quiet: what the plugin prints shows when the parent loads it; a sanitizer's report of
         * a crash here would be a second line beside peat's one */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1), dup2(null, 2);
        probe_report r = {0, ""};
        r.status = (int)plugin_load_here(path, NULL);
        snprintf(r.msg, sizeof r.msg, "%s", r.status ? peat_error_last() : "");
        _exit(write(fd[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    probe_report r;
    ssize_t got = read(fd[0], &r, sizeof r);
    close(fd[0]);
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) continue;
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

peat_status peat_plugin_load(const char *path, int *n_registered)
{
    if (n_registered) *n_registered = 0;
    if (!path || !*path) return PEAT_ERROR(PEAT_ERR_INVAL, "empty plugin path");
    PEAT_TRY(plugin_probe(path));
    return plugin_load_here(path, n_registered);
}
