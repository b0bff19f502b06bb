/* fi_propagate.h: the propagated view of playback FI: a trial's faulted outputs put back into its
 * training step, replayed from the campaign's flow, and followed to the loss, the predictions and
 * the update (docs/fault-injection.md, "Propagated outcomes"). */
#ifndef PEAT_HARNESS_FI_PROPAGATE_H
#define PEAT_HARNESS_FI_PROPAGATE_H

#include "core/record.h"
#include "inject/inject.h"
#include "store/store.h"

typedef struct peat_fi_prop peat_fi_prop_t;
typedef struct peat_fi_prop_worker peat_fi_prop_worker_t;

/* Honest reruns of each step in its band (the golden step is the band's first member). */
#define PEAT_FI_PROP_BAND_RERUNS 2

/* Replays the campaign's golden flow (its configuration from the file's meta) from its start to
 * the last of the n iterations, keeping for each of them the state the step starts from, the
 * golden step's loss, predictions and end state, and the step's band: the largest deviations of
 * PEAT_FI_PROP_BAND_RERUNS reruns with honest reorderings of every GEMM. */
peat_status peat_fi_prop_alloc(const peat_store_meta *meta, const int64_t *iters, int64_t n,
                               peat_fi_prop_t **out);
void peat_fi_prop_free(peat_fi_prop_t *p);
/* Iterations replayed (the last needed one included) and steps rerun for the bands. */
int64_t peat_fi_prop_steps(const peat_fi_prop_t *p);
/* The band of the step at iteration it (NULL when it was not asked for). */
const peat_inject_step_band *peat_fi_prop_band(const peat_fi_prop_t *p, int64_t it);

/* A flow of its own for one worker thread. */
peat_status peat_fi_prop_worker_alloc(const peat_fi_prop_t *p, peat_fi_prop_worker_t **out);
void peat_fi_prop_worker_free(peat_fi_prop_worker_t *w);
/* Runs the training step of record r with `faulty`'s outputs in place of the call's (NULL: the
 * faulted computation failed, a DUE) and fills t->prop, pred_changed, d_loss and d_w. A replay
 * that does not reproduce the record's golden outputs at that call is an error (PEAT_ERR_FORMAT).
 */
peat_status peat_fi_prop_trial(peat_fi_prop_worker_t *w, const peat_record *r,
                               const peat_args *faulty, peat_inject_trial *t);

#endif
