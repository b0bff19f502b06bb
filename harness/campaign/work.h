/* work.h: the stages' units of work that the latency planner times on this machine
 * (harness/latency): playback's analysis of one replayed output, one probe, GEMM's
 * arithmetic-property calls. Each runs on its arguments alone, not on a campaign. */
#ifndef PEAT_CAMPAIGN_WORK_H
#define PEAT_CAMPAIGN_WORK_H

#include "analyzer/analyzer.h"
#include "harness/campaign/campaign.h"

/* Playback's analysis of output o of one replayed call (stage_playback.c): its magnitudes, the
 * candidate's (test) and golden's errors against exact added to ac and ag in one pass, and the
 * report's plots; seconds added to *t_ref (magnitudes) and *t_an (the rest). The planner times it
 * on a flow's own calls (peat_latency_replay_now). */
/* The plane (rows x cols) output o is analysed in, along the op's logical axes (attention:
 * heads of T x D; conv: images x channels of H x W; else the matrix of the last axis). */
void peat_campaign_playback_plane(const peat_args *in, int o, const peat_tensor *exact,
                                  int64_t *rows, int64_t *cols);
peat_status peat_campaign_playback_accumulate(peat_analyzer_acc_t *ac, peat_analyzer_acc_t *ag,
                                              peat_plot_data *plots, int64_t call,
                                              const peat_args *in, int o, const peat_tensor *test,
                                              const peat_tensor *golden, const peat_tensor *exact,
                                              double *t_ref, double *t_an);
/* The same with the magnitudes (peat_golden_magnitude of exact) already at hand. */
peat_status
peat_campaign_playback_accumulate_mag(peat_analyzer_acc_t *ac, peat_analyzer_acc_t *ag,
                                      peat_plot_data *plots, int64_t call, const peat_args *in,
                                      int o, const peat_tensor *test, const peat_tensor *golden,
                                      const peat_tensor *exact, const double *mag, double *t_an);

/* One probe as the probe stage runs it (stage_probe.c): exact and golden references, candidate k
 * (forked when o->isolate), its judgement into po; and GEMM's arithmetic-property call through
 * golden and candidate (res->have_props when both ran). The planner times both with the golden
 * in the candidate's place (harness/latency/latency_predict.c). */
peat_status peat_campaign_stage_probe_one(const peat_campaign_opts *o, const peat_kernel *k,
                                          const peat_probe *p, const peat_detector_ctx *ctx,
                                          peat_probe_outcome *po);
/* The probe's parts, for other crafted calls (the differential diagnosis): `in` through the
 * exact and golden kernels and through k (forked when o->isolate) into e, g and c (released by
 * peat_campaign_probe_call_free whatever the status; PEAT_ERR_KERNEL with why when k failed);
 * and the judgement of c against g and e into po, with both signatures (NULL: not wanted). */
peat_status peat_campaign_probe_call(const peat_campaign_opts *o, const peat_kernel *k,
                                     const peat_args *in, peat_args *c, peat_args *g, peat_args *e,
                                     char *why, size_t n);
void peat_campaign_probe_call_free(peat_args *c, peat_args *g, peat_args *e);
peat_status peat_campaign_probe_judge(const peat_kernel *k, const peat_args *c, const peat_args *g,
                                      const peat_args *e, const peat_detector_ctx *ctx,
                                      peat_probe_outcome *po, peat_signature *sc_out,
                                      peat_signature *sg_out);
peat_status peat_campaign_stage_probe_props(const peat_campaign_opts *o, const peat_kernel *k,
                                            peat_campaign_result *res);

#endif
