/* runtime_ranks.h: `mpirun -n N peat run` (docs/scale-out.md): rank 0 runs the campaign; at its
 * runtime FI stage it hands the other ranks the command line (GO), each trains the golden run
 * and its share of the lockstep's other runs, and answers rank 0 with their curves; or rank 0
 * ends without that stage (STOP). Harness-internal; the MPI calls are scale.c's. */
#ifndef PEAT_HARNESS_RUNTIME_RANKS_H
#define PEAT_HARNESS_RUNTIME_RANKS_H

#include "peat/peat.h"

#include <stddef.h>
#include <stdint.h>

/* A growing byte buffer (put) and a reader of one (get: bounds checked, err set past the end). */
typedef struct peat_campaign_pack {
    unsigned char *b;
    size_t n, cap, at;
    int err;
} peat_campaign_pack;

void peat_campaign_pack_put(peat_campaign_pack *p, const void *v, size_t n);
void peat_campaign_pack_put_str(peat_campaign_pack *p, const char *s);
void peat_campaign_pack_get(peat_campaign_pack *p, void *v, size_t n);
/* The next string (in the buffer; "" past its end). */
const char *peat_campaign_pack_get_str(peat_campaign_pack *p);
void peat_campaign_pack_free(peat_campaign_pack *p);

/* Which rank trains lockstep member i (i >= 1; the golden run, member 0, trains on every rank):
 * i mod ranks. By the member's index alone, so every member's computation is the same for any N. */
int peat_campaign_runtime_ranks_owner(int member, int ranks);

/* Whether this process is one of the ranks of `mpirun -n N peat run` that split its runtime FI:
 * rank 0 once its command line is set, a rank > 0 once GO came. Otherwise (another command, a
 * library caller under mpirun) every process runs a campaign as a single process does. */
int peat_campaign_runtime_ranks_active(void);
/* Rank 0: the command line (peat_cli_cmdline_join of `peat run`'s effective words) the other
 * ranks parse at GO. */
void peat_campaign_runtime_ranks_line(const char *line);
/* Rank 0, its runtime stage about to train: GO to the other ranks (once). After it, rank 0 must
 * take every rank's answer (peat_campaign_runtime_ranks_collect). */
peat_status peat_campaign_runtime_ranks_go(void);
/* Rank 0, at the end of `peat run`: STOP to the other ranks unless GO was sent. */
void peat_campaign_runtime_ranks_release(void);
/* Ranks > 0: waits (asleep) for rank 0: 1 and the command line (malloc'ed) at GO, 0 at STOP. */
int peat_campaign_runtime_ranks_wait(char **line);
/* Ranks > 0: the one answer to rank 0, its status (and error) in front of body (may be empty). */
peat_status peat_campaign_runtime_ranks_answer(peat_status st, const peat_campaign_pack *body);
/* Ranks > 0: whether the answer was sent (a rank that ends without one sends its failure). */
int peat_campaign_runtime_ranks_answered(void);
/* Rank 0: rank r's answer: its body into *body (read it with get), or its failure as this
 * process's error naming the rank. */
peat_status peat_campaign_runtime_ranks_collect(int r, peat_campaign_pack *body);

#endif
