/* store_test.h: the store's test interface, compiled only into builds with PEAT_TEST_HOOKS (the
 * CMake option, on where the tests are built): a hook at each step of the write path, the free
 * space a flush sees, the count of creations attempted in SWMR mode. Without the option this
 * header declares nothing, the store's code paths that consult a hook are no-ops
 * (peat_store_step in store_impl.h) and the libraries hold none of these functions
 * (docs/architecture.md, "Conventions"). */
#ifndef PEAT_STORE_TEST_H
#define PEAT_STORE_TEST_H

#include "store/store.h"

#ifdef PEAT_TEST_HOOKS
/* The store counts the step boundaries of its write path (tensor data, index rows, before and
 * after each flush) and calls hook(user, s, step) at each one when a hook is set. Tests set one
 * that kills the writer at a chosen step (tests/test_store.c); no PEAT program sets it, and a
 * build without the tests holds no way to trigger a kill. NULL removes the hook. */
typedef void (*peat_store_step_hook)(void *user, peat_store_t *s, int64_t step);
void peat_store_test_hook_set(peat_store_step_hook hook, void *user);
/* Steps counted so far in this process. */
int64_t peat_store_step_count(void);
/* The free bytes the store takes its filesystem to have before each flush (-1: ask the
 * filesystem), so that a full disk can be tested without filling one. */
void peat_store_test_room_set(int64_t free_bytes);
/* How many times this process tried to create an HDF5 object (group, dataset, attribute) in a
 * file open in SWMR write mode (HDF5's SWMR contract forbids it; the store refuses it). */
int64_t peat_store_test_swmr_creates(void);
#endif

#endif
