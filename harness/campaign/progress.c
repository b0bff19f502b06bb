/* progress.c: a terminal progress bar with ETA (TTY) or plain milestone lines (logs). */
#define _DEFAULT_SOURCE
#include "harness/campaign/progress.h"
#include "core/clock.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#define BAR_WIDTH 28

static double now_s(void)
{
    return peat_clock_now();
}

void peat_campaign_progress_format_time(double s, char *buf, size_t n)
{
    if (!(s >= 0)) s = 0;
    if (s < 10)
        snprintf(buf, n, "%.1f s", s);
    else if (s < 60)
        snprintf(buf, n, "%.0f s", s);
    else
        snprintf(buf, n, "%d:%02d", (int)(s / 60), (int)s % 60);
}

void peat_campaign_progress_begin(peat_progress *p, FILE *f, int quiet, const char *label,
                                  int64_t total)
{
    memset(p, 0, sizeof *p);
    p->f = quiet ? NULL : f;
    p->tty = p->f && isatty(fileno(p->f));
    snprintf(p->label, sizeof p->label, "%s", label);
    p->total = total > 0 ? total : 1;
    p->t0 = now_s();
    if (p->f && !p->tty) {
        fprintf(p->f, "%s: %lld steps\n", p->label, (long long)total);
        fflush(p->f);
    }
}

static void draw(peat_progress *p)
{
    double el = now_s() - p->t0;
    int fill = (int)(BAR_WIDTH * p->done / p->total);
    char bar[BAR_WIDTH + 1], eta[16] = "?";
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = 0;
    if (p->done > 0)
        peat_campaign_progress_format_time(el / (double)p->done * (double)(p->total - p->done), eta,
                                           sizeof eta);
    /* \033[K clears what a longer previous line left */
    fprintf(p->f, "\r%s [%s] %lld/%lld  ETA %s\033[K", p->label, bar, (long long)p->done,
            (long long)p->total, eta);
    fflush(p->f);
    p->t_drawn = now_s();
}

void peat_campaign_progress_step(peat_progress *p, int64_t done, const char *note)
{
    if (!p->f) return;
    p->done = done > p->total ? p->total : done;
    if (p->tty) {
        if (note) fprintf(p->f, "\r%s\033[K\n", note);
        if (note || now_s() - p->t_drawn > 0.1 || p->done == p->total) draw(p);
        return;
    }
    int q = (int)(4 * p->done / p->total);
    if (note)
        fprintf(p->f, "%s\n", note);
    else if (q > p->quarter && q < 4)
        fprintf(p->f, "%s: %lld/%lld\n", p->label, (long long)p->done, (long long)p->total);
    p->quarter = q > p->quarter ? q : p->quarter;
    fflush(p->f);
}

void peat_campaign_progress_end(peat_progress *p)
{
    if (!p->f) return;
    char el[16];
    peat_campaign_progress_format_time(now_s() - p->t0, el, sizeof el);
    fprintf(p->f, "%s%s: %lld/%lld done in %s%s\n", p->tty ? "\r" : "", p->label,
            (long long)p->done, (long long)p->total, el, p->tty ? "\033[K" : "");
    fflush(p->f);
}
