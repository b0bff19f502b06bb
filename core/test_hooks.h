/* test_hooks.h: the one test interface of PEAT's programs (docs/architecture.md, "Conventions"):
 * faults a test asks a `peat` process for through one environment variable,
 *   PEAT_TEST_HOOKS="items-fail-rank=1:Q,runtime-fail-rank=2,kill-rank=1:8"
 * read only in builds with PEAT_TEST_HOOKS (CMake option, on where the tests are built); without
 * it every hook is an inline "not set", test_hooks.c is not compiled and the variable is never
 * read. The hooks: items-fail-rank=R[:P|Q] (stage_items_rank.c: rank R fails its playback and
 * probe shares, or the one named), runtime-fail-rank=R (runtime.c: rank R fails its runtime
 * runs), kill-rank=R:ROWS (fi_shard.c: rank R dies once it wrote ROWS rows). */
#ifndef PEAT_CORE_TEST_HOOKS_H
#define PEAT_CORE_TEST_HOOKS_H

#include <stddef.h>

/* Whether hook `name` is set for MPI rank `rank` ("name=RANK" or "name=RANK:ARG" in
 * PEAT_TEST_HOOKS); *arg gets ARG ("" when none, at most n bytes). 0 in a build without hooks. */
#ifdef PEAT_TEST_HOOKS
int peat_test_hook_rank(const char *name, int rank, char *arg, size_t n);
#else
static inline int peat_test_hook_rank(const char *name, int rank, char *arg, size_t n)
{
    (void)name, (void)rank;
    if (n) arg[0] = 0;
    return 0;
}
#endif

#endif
