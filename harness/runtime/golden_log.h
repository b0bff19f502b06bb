/* golden_log.h: the profile's golden training kept for runtime FI. The profile stage trains the
 * same golden run the runtime band starts from (same flow, seed and sizes, CPU goldens): it logs
 * each iteration's loss and weights into a temporary file and hands its flow, at its last
 * iteration, to the runtime stage, whose golden member replays the log instead of training again
 * and trains on from there when the runs go further (docs/fault-injection.md). */
#ifndef PEAT_RUNTIME_GOLDEN_LOG_H
#define PEAT_RUNTIME_GOLDEN_LOG_H

#include "models/models.h"

typedef struct peat_runtime_golden_log peat_runtime_golden_log;

/* Whether state tensor `name` is a weight (optimizer moments are not): what the runtime's weight
 * distances and the log cover. */
int peat_runtime_golden_log_is_weight(const char *name);

/* A log of f's weights in a temporary file under dir (else $TMPDIR); NULL in *out, and PEAT_OK,
 * when no file can be made, the log would pass max_bytes, or the disk has less than twice its size
 * and 256 MiB free (the campaign file beside it must not run short): the runtime then trains its
 * golden run as without one. The log takes f and ex at peat_runtime_golden_log_keep. */
peat_status peat_runtime_golden_log_open(peat_flow_t *f, const char *dir, int64_t iters,
                                         uint64_t max_bytes, peat_runtime_golden_log **out);
/* After an iteration: its loss and f's weights. A write that fails (a full disk) drops the log
 * (later appends do nothing, peat_runtime_golden_log_iters says 0): never the profile's error. */
void peat_runtime_golden_log_append(peat_runtime_golden_log *g, double loss);
/* The flow that trained the log, at its last iteration, and its exec (hooks cleared): the log
 * owns both from here. */
void peat_runtime_golden_log_keep(peat_runtime_golden_log *g, peat_flow_t *f, peat_exec_t *ex);
/* Whether the runtime may train on from the log's last iteration: its flow trained the log
 * (optimizer state and loss scale included). A restored log's flow did not. */
int peat_runtime_golden_log_trains_on(const peat_runtime_golden_log *g);
/* The logged weights into a new file at path and the losses into path.loss (files of the golden
 * cache, harness/campaign/golden_cache.h); the log's own file is linked there where it can be. */
peat_status peat_runtime_golden_log_save(const peat_runtime_golden_log *g, const char *path);
/* A saved log (peat_runtime_golden_log_save) read back, kept with f (a flow of the same config,
 * for the tensors' names and held-out evaluations) and ex, which it owns from here (on an error
 * they stay the caller's). */
peat_status peat_runtime_golden_log_restore(const char *path, peat_flow_t *f, peat_exec_t *ex,
                                            peat_runtime_golden_log **out);
/* Iterations logged (0: none usable). */
int64_t peat_runtime_golden_log_iters(const peat_runtime_golden_log *g);
double peat_runtime_golden_log_loss(const peat_runtime_golden_log *g, int64_t t);
/* The kept flow and exec (NULL before peat_runtime_golden_log_keep). */
peat_flow_t *peat_runtime_golden_log_flow(const peat_runtime_golden_log *g);
peat_exec_t *peat_runtime_golden_log_exec(const peat_runtime_golden_log *g);
/* Floats of one iteration's weights (the weight tensors in state order, concatenated). */
int64_t peat_runtime_golden_log_numel(const peat_runtime_golden_log *g);
/* Iteration t's weights into buf (peat_runtime_golden_log_numel floats). */
peat_status peat_runtime_golden_log_read(const peat_runtime_golden_log *g, int64_t t, float *buf);
/* Iteration t's weights into f's weight tensors (f: the kept flow). */
peat_status peat_runtime_golden_log_load(const peat_runtime_golden_log *g, int64_t t,
                                         peat_flow_t *f);
void peat_runtime_golden_log_free(peat_runtime_golden_log *g);

#endif
