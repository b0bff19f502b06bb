/* limits.c: the resource limits peat checks at start-up: OpenBLAS held to one thread before it
 * loads, and a command refused in one line when the address-space limit is below its need. */
#include "harness/cli/limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* What `peat run --kernel gemm_new` needs, measured (docs/cli.md, "Resource limits"): about
 * 87 MiB of libraries mapped before main, OpenBLAS's 128 MiB buffer (mapped at the first sgemm
 * and, when the limit refuses it, asked for again forever: a hang, not an error), the heap, the
 * isolation worker's guard regions; the smallest `ulimit -v` it passed under on 2 CPUs was
 * 288 MiB. Each CPU adds threads (stacks, allocator arenas): a margin of 16 MiB apiece. */
enum { NEED_BASE_MIB = 288, NEED_PER_CPU_MIB = 16 };

/* 1 when envp sets OPENBLAS_NUM_THREADS to exactly 1 (getenv is not ready in a preinit
 * function: libc's own initialiser sets environ after it). */
static int blas_one_thread(char **envp)
{
    static const char want[] = "OPENBLAS_NUM_THREADS=1";
    for (char **e = envp; e && *e; e++)
        if (strcmp(*e, want) == 0) return 1;
    return 0;
}

void peat_cli_limits_preinit(int argc, char **argv, char **envp)
{
    (void)argc;
    /* Under ulimit -v, OpenBLAS's constructor (after this function, before main) starts pool
     * threads that map a 128 MiB buffer each and ask again forever when the limit refuses it; a
     * setenv here would not last (libc's initialiser, later, sets environ from envp): peat runs
     * itself again with OPENBLAS_NUM_THREADS=1 in its environment. PEAT runs OpenBLAS on one
     * thread per call anyway (golden/gemm_blas.c), so results are the same. */
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY || blas_one_thread(envp))
        return;
    enum { MAX_ENV = 4096 };
    static char *env[MAX_ENV + 2];
    static char one[] = "OPENBLAS_NUM_THREADS=1";
    static const char key[] = "OPENBLAS_NUM_THREADS=";
    int n = 0;
    for (char **e = envp; e && *e && n < MAX_ENV; e++)
        if (strncmp(*e, key, sizeof key - 1) != 0) env[n++] = *e;
    env[n++] = one;
    env[n] = NULL;
    execve("/proc/self/exe", argv, env); /* only returns on failure: go on as before */
}

long peat_cli_limits_need_mib(const char *cmd)
{
    /* the commands that train flows or run kernels (and so OpenBLAS and isolation workers) */
    static const char *const heavy[] = {"run",     "ci",    "calibrate", "calibrate-latency",
                                        "predict", "inject"};
    for (size_t i = 0; i < sizeof heavy / sizeof heavy[0]; i++)
        if (cmd && strcmp(cmd, heavy[i]) == 0) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            return NEED_BASE_MIB + NEED_PER_CPU_MIB * (cpus > 0 ? cpus : 1);
        }
    return 0;
}

int peat_cli_limits_check(const char *cmd)
{
    long need = peat_cli_limits_need_mib(cmd);
    struct rlimit as;
    if (need == 0 || getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return 0;
    if (as.rlim_cur >= (rlim_t)need << 20) return 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(stderr,
            "peat: error: the address-space limit (ulimit -v) is %llu KiB; peat %s needs at "
            "least %ld MiB here (%d MiB + %d MiB for each of %ld CPUs; OpenBLAS alone maps "
            "128 MiB): raise it to %ld or more\n",
            (unsigned long long)(as.rlim_cur >> 10), cmd, need, NEED_BASE_MIB, NEED_PER_CPU_MIB,
            cpus > 0 ? cpus : 1, need << 10);
    return 1;
}
