/* freq.h: the runtime-FI frequency schedule (`--runtime-freq 1,1/10,p=0.01`): how often the
 * kernel under test stands in for the golden one in the training loop, parsed once from its text
 * (internal, not the host API; docs/fault-injection.md). */
#ifndef PEAT_CORE_FREQ_H
#define PEAT_CORE_FREQ_H

#include "peat/peat.h"

#include <stdint.h>

#define PEAT_FREQ_MAX   4  /* frequencies in one schedule (one faulty run each) */
#define PEAT_FREQ_LABEL 64 /* a frequency's text, its terminating NUL included */

typedef enum {
    PEAT_FREQ_EVERY, /* every k-th eligible call: "1" (k 1, all), "1/K", "0" (k 0: none, idle) */
    PEAT_FREQ_PROB,  /* each eligible call with probability p: "p=P", p in (0, 1] */
} peat_freq_kind;

/* One frequency, in the terms of the exec swap hook (core/exec_swap.h): every (PEAT_FREQ_EVERY)
 * or prob (PEAT_FREQ_PROB), the other 0; label is its text as written ("1/10", "p=0.01"), which
 * names the faulty run ("gemm_new @ 1/10"), its table rows and checkpoints, and seeds its draws. */
typedef struct peat_freq {
    peat_freq_kind kind;
    int64_t every;
    double prob;
    char label[PEAT_FREQ_LABEL];
} peat_freq;

typedef struct peat_freq_schedule {
    int n; /* 1..PEAT_FREQ_MAX once parsed; 0: none parsed */
    peat_freq f[PEAT_FREQ_MAX];
} peat_freq_schedule;

/* Parses a comma list of frequencies ("1", "1/10", "1/100", "0", "p=0.01"; empty items are
 * skipped) into *out: the one reader of `--runtime-freq` text. PEAT_ERR_INVAL with a one-line
 * message naming the bad item, or the count outside 1..PEAT_FREQ_MAX. */
peat_status peat_freq_schedule_parse(const char *text, peat_freq_schedule *out);
/* The share of eligible calls frequency f swaps: 1/k, p, or 0 (idle). */
double peat_freq_share(const peat_freq *f);

#endif
