/* progress.h: progress of a long stage on the terminal: a bar with ETA when the stream is a TTY,
 * plain lines otherwise (CI logs), nothing when quiet. */
#ifndef PEAT_PROGRESS_H
#define PEAT_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct peat_progress {
    FILE *f; /* NULL: quiet */
    int tty;
    char label[48];
    int64_t total, done;
    int quarter;        /* plain mode: the last quarter reported */
    double t0, t_drawn; /* start, last redraw (TTY) */
} peat_progress;

/* Starts a stage of `total` steps on f (NULL or quiet: silent). */
void peat_campaign_progress_begin(peat_progress *p, FILE *f, int quiet, const char *label,
                                  int64_t total);
/* Reports `done` steps finished; note (may be NULL) is a line worth keeping in a log, printed in
 * plain mode and above the bar on a TTY. */
void peat_campaign_progress_step(peat_progress *p, int64_t done, const char *note);
/* Ends the stage (the bar is replaced by one line with the elapsed time). */
void peat_campaign_progress_end(peat_progress *p);
/* "1:05" / "12 s" for an ETA or an elapsed time. */
void peat_campaign_progress_format_time(double seconds, char *buf, size_t n);

#endif
