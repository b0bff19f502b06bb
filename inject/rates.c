/* rates.c: fault-injection statistics: Wilson intervals, trials for a margin, grouped tallies. */
#include "inject/internal.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

peat_inject_rate peat_inject_wilson(int64_t k, int64_t n, double z)
{
    peat_inject_rate r = {NAN, NAN, NAN};
    if (n <= 0 || k < 0 || k > n) return r;
    /* Wilson score interval: unlike p +- z sqrt(p(1-p)/n) it stays inside [0,1] and does not
     * collapse to a point at k = 0 or k = n, the usual case for rare outcomes */
    double nn = (double)n, p = (double)k / nn, z2 = z * z;
    double den = 1.0 + z2 / nn;
    double centre = (p + z2 / (2.0 * nn)) / den;
    double half = z / den * sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
    r.p = p;
    r.lo = k == 0 ? 0.0 : centre - half;
    r.hi = k == n ? 1.0 : centre + half;
    return r;
}

double peat_inject_z(double confidence)
{
    if (!(confidence > 0.0 && confidence < 1.0)) return NAN;
    return gsl_cdf_ugaussian_Pinv(0.5 + confidence / 2.0);
}

int64_t peat_inject_trials_for_margin(double margin, double confidence, double population)
{
    double z = peat_inject_z(confidence);
    if (!(margin > 0.0 && margin < 1.0) || !isfinite(z) || population < 0.0) return -1;
    double n0 = z * z / (4.0 * margin * margin);
    double n = population > 0.0 ? n0 / (1.0 + (n0 - 1.0) / population) : n0;
    return (int64_t)ceil(n - 1e-9);
}

static const char *const group_names[PEAT_INJECT_GROUP_COUNT] = {"model", "op", "layer", "phase",
                                                                 "bit"};

const char *peat_inject_group_name(peat_inject_group g)
{
    return (unsigned)g < PEAT_INJECT_GROUP_COUNT ? group_names[g] : "?";
}

static const char *phase_name(peat_phase p)
{
    return p == PEAT_PHASE_FWD ? "fwd" : p == PEAT_PHASE_BWD ? "bwd" : "opt";
}

/* The key of a trial in a grouping; NULL when the trial is not in it (non-bit trials by bit). */
static const char *key_of(const peat_inject_trial *t, peat_inject_group g, char *buf, size_t n)
{
    switch (g) {
    case PEAT_INJECT_BY_MODEL:
        /* a series: model, site and the records it was drawn from */
        snprintf(buf, n, "%s @%s%s%s", t->model, peat_inject_site_name(t->site),
                 t->select[0] ? " " : "", t->select);
        return buf;
    case PEAT_INJECT_BY_OP:
        return peat_op_name(t->op);
    case PEAT_INJECT_BY_LAYER:
        return t->layer;
    case PEAT_INJECT_BY_PHASE:
        return phase_name(t->phase);
    case PEAT_INJECT_BY_BIT:
        if (t->bit < 0) return NULL;
        snprintf(buf, n, "%d", t->bit);
        return buf;
    default:
        return NULL;
    }
}

static peat_status row_add(peat_inject_table *tab, int *cap, const char *key)
{
    if (tab->n == *cap) {
        int nc = *cap ? 2 * *cap : 32;
        peat_inject_row *r = realloc(tab->rows, (size_t)nc * sizeof *r);
        if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "fi table rows");
        tab->rows = r;
        *cap = nc;
    }
    peat_inject_row *r = &tab->rows[tab->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", key);
    return PEAT_OK;
}

peat_status peat_inject_table_build(const peat_inject_trial *t, int64_t n, peat_inject_group g,
                                    peat_inject_table *out)
{
    memset(out, 0, sizeof *out);
    out->group = g;
    if ((unsigned)g >= PEAT_INJECT_GROUP_COUNT)
        return PEAT_ERROR(PEAT_ERR_INVAL, "fi table: grouping %d", (int)g);
    int cap = 0;
    peat_status st = PEAT_OK;
    if (g == PEAT_INJECT_BY_BIT) /* all 32 positions, in order, so the curve has no holes */
        for (int b = 0; b < 32 && st == PEAT_OK; b++) {
            char k[8];
            snprintf(k, sizeof k, "%d", b);
            st = row_add(out, &cap, k);
        }
    int any = 0;
    for (int64_t i = 0; i < n && st == PEAT_OK; i++) {
        char buf[300];
        const char *key = key_of(&t[i], g, buf, sizeof buf);
        if (!key) continue;
        any = 1;
        int r = g == PEAT_INJECT_BY_BIT ? t[i].bit : 0;
        if (g != PEAT_INJECT_BY_BIT) {
            while (r < out->n && strcmp(out->rows[r].key, key) != 0) r++;
            if (r == out->n) st = row_add(out, &cap, key);
        }
        if (st != PEAT_OK || (unsigned)t[i].outcome >= PEAT_INJECT_OUTCOME_COUNT) continue;
        peat_inject_tally *ty = &out->rows[r].t;
        ty->n[t[i].outcome]++;
        ty->total++;
        if ((unsigned)t[i].prop < PEAT_INJECT_OUTCOME_COUNT) {
            ty->prop[t[i].prop]++;
            ty->prop_total++;
            ty->pred_changed += t[i].pred_changed > 0;
        }
    }
    if (st == PEAT_OK && g == PEAT_INJECT_BY_BIT && !any) out->n = 0;
    if (st != PEAT_OK) peat_inject_table_free(out);
    return st;
}

void peat_inject_table_free(peat_inject_table *tab)
{
    free(tab->rows);
    tab->rows = NULL;
    tab->n = 0;
}
