/* plugin.c: loads external kernel libraries through the versioned plugin ABI (plugin.h). */
#include "peat/peat.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int plugin_count;

static peat_status host_register(const peat_kernel *k)
{
    if (!k) return PEAT_ERROR(PEAT_ERR_INVAL, "plugin registered a NULL kernel");
    peat_kernel c = *k;
    c.role = PEAT_ROLE_CANDIDATE; /* a plugin can never replace the exact or golden reference */
    if (!c.backend) c.backend = "cpu";
    peat_status st = peat_registry_add(&c);
    if (st == PEAT_OK) plugin_count++;
    return st;
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

peat_status peat_plugin_load(const char *path, int *n_registered)
{
    if (n_registered) *n_registered = 0;
    if (!path || !*path) return PEAT_ERROR(PEAT_ERR_INVAL, "empty plugin path");
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
    if (v != PEAT_PLUGIN_ABI_VERSION) {
        dlclose(h);
        return PEAT_ERROR(PEAT_ERR_ABI,
                          "plugin %s was built for PEAT plugin ABI %d, this peat speaks ABI %d: "
                          "rebuild it against this include/peat/plugin.h",
                          path, v, PEAT_PLUGIN_ABI_VERSION);
    }
    static const peat_plugin_host host = {PEAT_PLUGIN_ABI_VERSION, PEAT_VERSION_STRING,
                                          host_register, peat_op_name, host_error};
    int before = plugin_count;
    peat_error_clear();
    int rc = reg(&host);
    if (rc != 0) {
        /* the library stays loaded: kernels it registered before failing point into it */
        const char *why = peat_error_last();
        return PEAT_ERROR(PEAT_ERR_ABI, "plugin %s failed to register (code %d)%s%s", path, rc,
                          why[0] ? ": " : "", why);
    }
    if (n_registered) *n_registered = plugin_count - before;
    /* never dlclose a loaded plugin: the registry holds pointers to its functions and strings */
    return PEAT_OK;
}
