/* plugin.h: the versioned ABI through which a shared library registers its own kernels.
 *
 * A plugin is a shared library that exports two functions:
 *
 *     int peat_plugin_abi_version(void);              // must return PEAT_PLUGIN_ABI_VERSION
 *     int peat_plugin_register(const peat_plugin_host *host);   // 0 on success
 *
 * PEAT loads it with dlopen, calls peat_plugin_abi_version() first and refuses the library
 * (PEAT_ERR_ABI, one clear line) unless the number equals the host's. Only then it calls
 * peat_plugin_register(), in which the plugin calls host->register_kernel() once per kernel.
 * Kernels receive peat_args (inputs and outputs in host memory for the "cpu" backend) and
 * must fill every output element. Descriptor strings must live as long as the library.
 *
 * The version changes whenever peat_args, peat_tensor, peat_kernel or peat_plugin_host change
 * layout or meaning. See docs/plugin-abi.md. */
#ifndef PEAT_PLUGIN_H
#define PEAT_PLUGIN_H

#include "peat/peat.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PEAT_PLUGIN_ABI_VERSION 1

typedef struct peat_plugin_host {
    int abi_version; /* PEAT_PLUGIN_ABI_VERSION of the host */
    const char *peat_version;
    /* Registers one kernel; role is forced to PEAT_ROLE_CANDIDATE. */
    peat_status (*register_kernel)(const peat_kernel *k);
    /* Host helpers so that plugins need not link libpeat. */
    const char *(*op_name)(peat_op_kind op);
    peat_status (*error)(peat_status code, const char *file, int line, const char *fmt, ...);
} peat_plugin_host;

typedef int (*peat_plugin_abi_version_fn)(void);
typedef int (*peat_plugin_register_fn)(const peat_plugin_host *host);

/* Host side: loads a plugin and registers its kernels; returns the number registered. */
peat_status peat_plugin_load(const char *path, int *n_registered);

#ifdef __cplusplus
}
#endif
#endif
