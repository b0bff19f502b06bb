/* precision.c: the profile's record of mixed-precision training: each iteration's loss scale and
 * whether the scaler skipped its optimizer step (table /metrics/amp, next to the loss curve),
 * and the line the reports show. Nothing is written at fp32. */
#include "harness/campaign/stages.h"

#include <stdio.h>
#include <string.h>

#define N_AMP_COLS 3 /* peat_store_amp_cols: iter, loss_scale, skipped */

peat_status peat_campaign_amp_begin(peat_campaign *c, const peat_flow_config *cfg,
                                    peat_campaign_amp_log *log)
{
    memset(log, 0, sizeof *log);
    log->precision = cfg->precision;
    log->last_iter = -1;
    if (cfg->precision == PEAT_PRECISION_FP32 || !c->store) return PEAT_OK;
    int nc;
    const peat_store_col *cols = peat_store_amp_cols(&nc);
    PEAT_ASSERT(nc == N_AMP_COLS, "the amp table's columns");
    PEAT_TRY(peat_store_table_open(c->store, PEAT_STORE_AMP_TABLE, cols, nc, &log->t));
    /* rows are appended in iteration order: a resumed run skips those up to the last one */
    int64_t n = peat_store_table_rows(log->t);
    peat_store_value v;
    if (n > 0 && peat_store_table_get(log->t, n - 1, 0, &v) == PEAT_OK) log->last_iter = v.i;
    return PEAT_OK;
}

peat_status peat_campaign_amp_step(peat_campaign_amp_log *log, int64_t it,
                                   const peat_flow_metrics *m)
{
    if (log->precision == PEAT_PRECISION_FP32) return PEAT_OK;
    if (log->steps == 0) log->scale_first = m->loss_scale;
    log->scale_last = m->loss_scale;
    log->steps++;
    log->skipped += m->skipped != 0;
    if (!log->t || it <= log->last_iter) return PEAT_OK;
    peat_store_value row[N_AMP_COLS] = {{.i = it}, {.d = m->loss_scale}, {.i = m->skipped}};
    PEAT_TRY(peat_store_table_append(log->t, row, 1));
    log->last_iter = it;
    return PEAT_OK;
}

void peat_campaign_amp_end(peat_campaign *c, peat_campaign_amp_log *log)
{
    peat_store_table_close(log->t);
    log->t = NULL;
    peat_campaign_result *r = c->res;
    r->precision[0] = '\0';
    r->skipped_steps = log->skipped;
    if (log->precision == PEAT_PRECISION_FP32) return;
    if (log->precision == PEAT_PRECISION_AMP_FP16)
        snprintf(r->precision, sizeof r->precision,
                 "amp-fp16 (fp16 GEMM/conv/attention inputs and outputs, fp32 master weights); "
                 "loss scale %g -> %g, %lld of %lld steps skipped (inf/nan gradients)",
                 log->scale_first, log->scale_last, (long long)log->skipped, (long long)log->steps);
    else if (log->precision == PEAT_PRECISION_FP8)
        snprintf(r->precision, sizeof r->precision,
                 "fp8 (linear layers' GEMMs in fp8: e4m3 activations and weights, e5m2 "
                 "gradients, per-tensor power-of-two scales, fp32 accumulation; fp32 elsewhere)");
    else
        snprintf(r->precision, sizeof r->precision,
                 "%s (%s GEMM/conv/attention inputs and outputs, fp32 master weights)",
                 peat_models_flow_precision_name(log->precision), "bf16");
}
