/* runtime_ranks.h: `mpirun -n N peat run` (docs/scale-out.md): rank 0 runs the campaign; at its
 * runtime FI stage it hands the other ranks the command line (GO), each trains the golden run
 * and its share of the lockstep's other runs, and answers rank 0 with their curves; or rank 0
 * ends without that stage (STOP). Harness-internal; the MPI calls are scale.c's. */
#ifndef PEAT_HARNESS_RUNTIME_RANKS_H
#define PEAT_HARNESS_RUNTIME_RANKS_H

#include "peat/peat.h"

#include "core/record.h"

#include <stddef.h>
#include <stdint.h>

/* A growing byte buffer (put) and a reader of one (get: bounds checked, err set past the end). */
typedef struct peat_scale_pack {
    unsigned char *b;
    size_t n, cap, at;
    int err;
} peat_scale_pack;

void peat_scale_pack_put(peat_scale_pack *p, const void *v, size_t n);
void peat_scale_pack_put_str(peat_scale_pack *p, const char *s);
void peat_scale_pack_get(peat_scale_pack *p, void *v, size_t n);
/* The next string (in the buffer; "" past its end). */
const char *peat_scale_pack_get_str(peat_scale_pack *p);
void peat_scale_pack_free(peat_scale_pack *p);

/* Which rank trains lockstep member i (i >= 1; the golden run, member 0, trains on every rank):
 * i mod ranks. By the member's index alone, so every member's computation is the same for any N. */
int peat_scale_ranks_owner(int member, int ranks);

/* Whether this process is one of the ranks of `mpirun -n N peat run` that split its runtime FI:
 * rank 0 once its command line is set, a rank > 0 once GO came. Otherwise (another command, a
 * library caller under mpirun) every process runs a campaign as a single process does. */
int peat_scale_ranks_active(void);
/* Rank 0: the command line (peat_cli_cmdline_join of `peat run`'s effective words) the other
 * ranks parse at GO. */
void peat_scale_ranks_line(const char *line);
/* Rank 0, its runtime stage about to train: GO to the other ranks (once). After it, rank 0 must
 * take every rank's answer (peat_scale_ranks_collect). */
peat_status peat_scale_ranks_go(void);
/* Rank 0, at the end of `peat run`: STOP to the other ranks unless GO was sent. */
void peat_scale_ranks_release(void);
/* Rank 0, its playback ('P') or probe ('Q') stage about to split its items across the ranks
 * (docs/scale-out.md): the kind, the command line and body to every rank, which answer with
 * peat_scale_ranks_reply; rank 0 takes every rank's answer
 * (peat_scale_ranks_take) before its next message. */
peat_status peat_scale_ranks_tell(char what, const peat_scale_pack *body);
/* Ranks > 0: waits (asleep) for rank 0's first message: 1 and the command line (malloc'ed) at
 * GO, P or Q (kept for peat_scale_ranks_next), 0 at STOP. */
int peat_scale_ranks_wait(char **line);
/* Ranks > 0: rank 0's next message (the first one wait took, then each in turn): 'P', 'Q' with
 * their body after the command line, 'G' (GO: the runtime stage) or 'S' (STOP); 'S' after
 * either of those. */
char peat_scale_ranks_next(peat_scale_pack *body);
/* Ranks > 0: whether STOP came (rank 0 ended without a runtime stage). */
int peat_scale_ranks_released(void);
/* Ranks > 0: an answer to P or Q, its status (and error) in front of body (may be NULL). */
peat_status peat_scale_ranks_reply(peat_status st, const peat_scale_pack *body);
/* Ranks > 0 that failed before GO or STOP (st): answer every message with the failure until one
 * of them, so that rank 0 names this rank and no collective waits for it. */
void peat_scale_ranks_drain(peat_status st);
/* Ranks > 0: the one answer to rank 0, its status (and error) in front of body (may be empty). */
peat_status peat_scale_ranks_answer(peat_status st, const peat_scale_pack *body);
/* Ranks > 0: whether the answer was sent (a rank that ends without one sends its failure). */
int peat_scale_ranks_answered(void);
/* Rank 0: rank r's answer: its body into *body (read it with get), or its failure as this
 * process's error naming the rank and the stage ("rank 1 of 2 failed in playback: ..."). */
peat_status peat_scale_ranks_take(int r, const char *stage, peat_scale_pack *body);
/* The same for the runtime FI answer. */
peat_status peat_scale_ranks_collect(int r, peat_scale_pack *body);

/* The pack of tensors and recorded calls (stage_items_rank.c): a tensor (NULL allowed), and the
 * records rank 0 hands the ranks for playback and probes (inputs, goldens, exact outputs where
 * present, and what names each call). get_* set p->err on a short or bad buffer. */
void peat_scale_pack_put_tensor(peat_scale_pack *p, const peat_tensor *t);
peat_tensor *peat_scale_pack_get_tensor(peat_scale_pack *p);
void peat_scale_pack_put_records(peat_scale_pack *p, const peat_record_list *l);
peat_status peat_scale_pack_get_records(peat_scale_pack *p, peat_record_list *l);

#endif
