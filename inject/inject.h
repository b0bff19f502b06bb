/* inject.h: pseudo-error models (deterministic, seeded) and playback of recorded calls. */
#ifndef PEAT_INJECT_H
#define PEAT_INJECT_H

#include "peat/peat.h"

typedef struct peat_inject_model peat_inject_model_t;

/* Parses a model spec such as "bitflip(bit=30,count=1)", "precision(fmt=bf16,where=inputs)",
 * "truncate", "ftz", "noise(sigma=1e-5)", "stuck(bit=3,value=1,stride=4)", "tile(rows=16,cols=16)".
 * Unknown names or malformed specs: PEAT_ERR_INVAL with a one-line message. */
peat_status peat_inject_model_parse(const char *spec, peat_inject_model_t **out);
void peat_inject_model_free(peat_inject_model_t *m);
/* Canonical spec string of the model (with every parameter). */
const char *peat_inject_model_spec(const peat_inject_model_t *m);
/* Runs call a through kernel k with the model applied (to inputs, computation or outputs as the
 * model says); a->out must be allocated. seed makes it deterministic. */
peat_status peat_inject_run(const peat_inject_model_t *m, const peat_kernel *k, const peat_args *a,
                            uint64_t seed);
/* 1 when the model's effect differs between runs of the same call (transient faults, races:
 * bitflip, nan, nondeterministic), 0 for deterministic mechanisms. A runner measuring
 * repeatability passes a new seed per repeat to transient models and the same seed otherwise,
 * so that a simulated deterministic kernel repeats itself as a real one would. */
int peat_inject_model_transient(const peat_inject_model_t *m);
/* Names of all models, one per line, with a one-line description each. */
const char *peat_inject_catalogue(void);

#endif
