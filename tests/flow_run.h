/* flow_run.h: what the flow tests share: one training flow with its exec context, made and
 * dropped in one call each (test_models.c, test_amp.c). */
#ifndef PEAT_TESTS_FLOW_RUN_H
#define PEAT_TESTS_FLOW_RUN_H

#include "models/models.h"

#include <criterion/criterion.h>

typedef struct run {
    peat_exec_t *ex;
    peat_flow_t *f;
} run;

static inline run make(const char *name, const peat_flow_config *c)
{
    run r;
    cr_assert_eq(peat_exec_alloc(name, c->seed, &r.ex), PEAT_OK);
    cr_assert_eq(peat_models_flow_alloc(name, c, r.ex, &r.f), PEAT_OK, "create %s: %s", name,
                 peat_error_last());
    return r;
}

static inline void drop(run *r)
{
    peat_models_flow_free(r->f);
    peat_exec_free(r->ex);
}

#endif
