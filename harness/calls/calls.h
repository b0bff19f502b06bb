/* calls.h: the file protocol (docs/calls.md): a candidate from any runtime judged through files.
 * `peat calls export` runs `peat run`'s pipeline with a taping kernel in the candidate's place
 * (the golden's outputs, every call's inputs kept) and writes calls.h5; a harness in the user's
 * runtime writes each call's outputs into outs.h5; `peat judge` runs the same pipeline again with
 * a kernel that answers each call from outs.h5, so the verdict, findings and reports are
 * `peat run`'s own. Runtime FI (the kernel in the training loop) needs the kernel live: the file
 * protocol judges every call PEAT can hand over ahead of time. */
#ifndef PEAT_CALLS_CALLS_H
#define PEAT_CALLS_CALLS_H

#include "harness/campaign/campaign.h"

/* Runs the pipeline of run (its flow or capture, size, seed, recording options; its kernel,
 * output folder, runtime and isolation are the export's) with the taping kernel of op and writes
 * every call the candidate would get into path (calls.h5); words: the `peat run` options that
 * make these calls, one per line, which `peat judge` runs again. *n_calls: the calls written. */
peat_status peat_calls_export(const peat_campaign_opts *run, const char *op, const char *words,
                              const char *path, int64_t *n_calls);

typedef struct peat_calls_judge peat_calls_judge;

/* Opens calls.h5 and outs.h5, checks that outs.h5 holds every call's outputs with the shapes and
 * dtypes calls.h5 asks (a missing call or output is one line naming it), and registers the kernel
 * that answers the calls from them: *kernel is its name (outs.h5's "kernel" attribute, else
 * "external"), *words the `peat run` options of the export. */
peat_status peat_calls_judge_open(const char *calls, const char *outs, peat_calls_judge **out,
                                  const char **kernel, const char **words);
/* After the run: PEAT_OK when every call of the run was one of calls.h5, else an error naming
 * the first that was not (calls.h5 made by another peat or with other options). */
peat_status peat_calls_judge_check(const peat_calls_judge *j);
void peat_calls_judge_close(peat_calls_judge *j);

#endif
