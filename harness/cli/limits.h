/* limits.h: the resource limits peat checks at start-up (ulimit -v, ulimit -u), before OpenBLAS
 * or an isolation worker allocates (docs/cli.md, "Resource limits"). */
#ifndef PEAT_CLI_LIMITS_H
#define PEAT_CLI_LIMITS_H

/* Runs before any library's constructor (the executable's .preinit_array, harness/cli/main.c), with
 * main's arguments: under an address-space limit, peat executes itself again with
 * OPENBLAS_NUM_THREADS=1, so that OpenBLAS starts no pool threads that map buffers of their own. */
void peat_cli_limits_preinit(int argc, char **argv, char **envp);

/* The address space (MiB) command `cmd` needs on this machine; 0 for a command that runs no
 * kernel (help, list, inspect, ...). */
long peat_cli_limits_need_mib(const char *cmd);

/* 0 when the address-space limit leaves `cmd` what it needs; otherwise one line on stderr naming
 * the limit and the need, and 1 (the caller exits 2). */
int peat_cli_limits_check(const char *cmd);

#endif
