/* test_hooks.h: the one test interface of PEAT's programs (docs/architecture.md, "Test hooks"):
 * faults a test asks a `peat` process for through one environment variable,
 *   PEAT_TEST_HOOKS="items-fail-rank=1:Q,runtime-fail-rank=2,kill-rank=1:8"
 * read only in builds with PEAT_TEST_HOOKS (CMake option, on where the tests are built); without
 * it every hook answers "not set" and the variable is never read. */
#ifndef PEAT_CORE_TEST_HOOKS_H
#define PEAT_CORE_TEST_HOOKS_H

#include <stddef.h>

/* Whether hook `name` is set for MPI rank `rank` ("name=RANK" or "name=RANK:ARG" in
 * PEAT_TEST_HOOKS); *arg gets ARG ("" when none, at most n bytes). 0 in a build without hooks. */
int peat_test_hook_rank(const char *name, int rank, char *arg, size_t n);

#endif
