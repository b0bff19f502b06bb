/* golden_cache.h: the golden work of a campaign paid once across runs and suites. A campaign's
 * profile (the golden training, its recorded calls and states, its weight log) and its honest
 * band (the runtime stage's reorder reruns) depend on the flow, the op, the recording options and
 * the golden kernels, never on the candidate: they are kept under $PEAT_CACHE_DIR/golden/, keyed
 * by everything they depend on, and copied into each campaign that has the same key, so every
 * campaign file stays complete and verdicts are those of an independent run (docs/flows.md). */
#ifndef PEAT_CAMPAIGN_GOLDEN_CACHE_H
#define PEAT_CAMPAIGN_GOLDEN_CACHE_H

#include "peat/peat.h"

#include <stdint.h>

/* What a campaign knows of its cache entry (set at open; "off" when the campaign does not use it).
 */
typedef struct peat_campaign_golden_cache {
    int on;         /* the campaign reads and writes the cache */
    int hit;        /* the profile is the entry's (else trained here and stored after) */
    int band_hit;   /* the band's reruns are the entry's */
    uint64_t hash;  /* of the key */
    char key[4096]; /* the key: everything the golden work depends on, as text (key.txt) */
    char band[64];  /* the band's file in the entry, named at band_get ("" before) */
    char dir[600];  /* the entry's folder */
    char why[96];   /* why the cache is off, or what went wrong with it ("" when fine) */
} peat_campaign_golden_cache;

struct peat_campaign;
struct peat_scale_pack;
/* At open, once the recording policy is known: whether the campaign uses the cache, its key, and
 * whether an entry holds its profile. */
void peat_campaign_golden_cache_find(struct peat_campaign *c);
/* The entry's campaign file (what the open stage copies into the new campaign), or NULL. */
const char *peat_campaign_golden_cache_seed(struct peat_campaign *c, char *buf, size_t n);
/* Profile stage, on a hit: the records of the candidate's op read back from the copied file, the
 * profile's results, and its golden log restored (when the runtime stage can use it). */
peat_status peat_campaign_golden_cache_profile_take(struct peat_campaign *c);
/* Profile stage, on a miss, its file closed: the profile into a new entry (a failure to store it
 * is said on stderr and never the campaign's error). */
void peat_campaign_golden_cache_profile_put(struct peat_campaign *c);
/* Runtime stage: the entry's band reruns for a lockstep of R runs over iters iterations,
 * evaluated every `every` (into *band, 1 when found); after the runs, band (the reruns' pack of
 * that same lockstep) stored when the entry had none. */
int peat_campaign_golden_cache_band_get(struct peat_campaign *c, int R, int64_t iters,
                                        int64_t every, struct peat_scale_pack *band);
void peat_campaign_golden_cache_band_put(struct peat_campaign *c,
                                         const struct peat_scale_pack *band);

/* Whether the profile of a campaign with options o and candidate k logs its training for the
 * runtime stage (stage_profile.c): the runtime stage will run, on the CPU goldens its band trains
 * with, from the same start (not a finetune's checkpoint, not captured calls), and
 * PEAT_NO_GOLDEN_LOG is not set. The planner counts the golden run's steps as replayed then. */
struct peat_campaign_opts;
int peat_campaign_golden_log_wanted(const struct peat_campaign_opts *o, const peat_kernel *k);

#endif
