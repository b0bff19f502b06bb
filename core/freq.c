/* freq.c: the runtime-FI frequency schedule parsed from its text (core/freq.h): every k-th call
 * or a probability per call, and the text each frequency names its run with. */
#include "core/freq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One item of the list ("1", "1/K", "0", "p=P") into *f. */
static peat_status freq_item(const char *s, peat_freq *f)
{
    memset(f, 0, sizeof *f);
    if (strlen(s) >= sizeof f->label)
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime frequency '%s': over %d characters", s,
                          PEAT_FREQ_LABEL - 1);
    snprintf(f->label, sizeof f->label, "%s", s);
    char *end;
    errno = 0;
    if (!strncmp(s, "p=", 2)) {
        double p = strtod(s + 2, &end);
        if (end == s + 2 || *end || errno || !(p > 0.0 && p <= 1.0))
            return PEAT_ERROR(PEAT_ERR_INVAL, "runtime frequency '%s': p must be in (0, 1]", s);
        f->kind = PEAT_FREQ_PROB, f->prob = p;
        return PEAT_OK;
    }
    f->kind = PEAT_FREQ_EVERY;
    long long num = strtoll(s, &end, 10);
    if (end == s || errno || num < 0 || num > 1 || (*end && (*end != '/' || num != 1)))
        return PEAT_ERROR(PEAT_ERR_INVAL,
                          "runtime frequency '%s': use 1, 1/K (every K-th call), 0 or p=P", s);
    if (*end == 0) {
        f->every = num; /* 1: every call; 0: idle */
        return PEAT_OK;
    }
    const char *d = end + 1;
    long long k = strtoll(d, &end, 10);
    if (end == d || *end || errno || k < 1 || k > 1000000000LL)
        return PEAT_ERROR(PEAT_ERR_INVAL, "runtime frequency '%s': K in 1/K must be 1..1e9", s);
    f->every = k;
    return PEAT_OK;
}

peat_status peat_freq_schedule_parse(const char *text, peat_freq_schedule *out)
{
    memset(out, 0, sizeof *out);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text ? text : "");
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
        peat_freq f;
        PEAT_TRY(freq_item(t, &f));
        if (n < PEAT_FREQ_MAX) out->f[n] = f;
    }
    if (n < 1 || n > PEAT_FREQ_MAX) {
        memset(out, 0, sizeof *out);
        return PEAT_ERROR(PEAT_ERR_INVAL, "--runtime-freq: 1 to %d frequencies, got %d",
                          PEAT_FREQ_MAX, n);
    }
    out->n = n;
    return PEAT_OK;
}

double peat_freq_share(const peat_freq *f)
{
    if (f->kind == PEAT_FREQ_PROB) return f->prob;
    return f->every > 0 ? 1.0 / (double)f->every : 0.0;
}
