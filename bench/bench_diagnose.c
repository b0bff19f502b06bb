/* bench_diagnose.c: the differential diagnosis's share of a run: the default run of an honest
 * candidate (nothing to diagnose), and failing zoo kernels of several ops and classes, each a
 * whole `peat run` (runtime FI off, as the campaigns of `peat calibrate --zoo` keep it on: the
 * share printed is the larger one), with the experiments' seconds beside the run's. */
#include "harness/campaign/campaign.h"
#include "harness/run/run.h"
#include "harness/runtime/builtin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int row(const char *kernel, const char *flow, int runtime)
{
    peat_campaign_opts o;
    peat_campaign_opts_default(&o);
    char out[256];
    snprintf(out, sizeof out, "bench-out/diagnose-%s", kernel);
    o.kernel = kernel, o.flow = flow, o.out_dir = out, o.force = 1, o.quiet = 1;
    o.no_runtime = !runtime;
    peat_campaign_result *r = malloc(sizeof *r);
    if (!r || peat_run_campaign(&o, r) != PEAT_OK) {
        fprintf(stderr, "bench_diagnose: %s: %s\n", kernel, peat_error_last());
        free(r);
        return 1;
    }
    const peat_diagnosis *d = &r->diagnosis;
    printf("%-28s %-12s %-8s %-18s %-16s %8.2f %9.2f %7.1f%%\n", kernel, flow,
           peat_detector_acceptance_name(r->verdict),
           peat_detector_finding_name(r->findings[0].cls),
           r->findings[0].experiment[0] ? r->findings[0].experiment : "-", r->t_total, d->seconds,
           r->t_total > 0 ? 100.0 * d->seconds / r->t_total : 0.0);
    free(r);
    return 0;
}

int main(void)
{
    if (peat_runtime_builtin_init() != PEAT_OK ||
        peat_plugin_load(PEAT_BENCH_ZOO, NULL) != PEAT_OK) {
        fprintf(stderr, "bench_diagnose: %s\n", peat_error_last());
        return 1;
    }
    static const char *k[][2] = {
        {"zoo_gemm_k_tail", "mlp"},
        {"zoo_gemm_acc_fp16", "mlp"},
        {"zoo_gemm_edge_tile", "mlp"},
        {"zoo_softmax_no_max", "gpt_unfused"},
        {"zoo_layernorm_unbiased", "gpt"},
        {"zoo_attention_wrong_scale", "gpt"},
        {"zoo_adamw_bc2", "mlp"},
        {"zoo_conv_acc_fp16", "cnn"},
        /* the new ops: a batch-norm backward formula (small integers, read by exactness), a
         * rounded RoPE table (the pair lengths), a pooled gradient's dropped row (the edge region)
         */
        {"zoo_batchnorm_bwd_no_mean", "resnet"},
        {"zoo_rope_table_bf16", "llama"},
        {"zoo_maxpool_bwd_last_row", "resnet"},
    };
    printf("%-28s %-12s %-8s %-18s %-16s %8s %9s %8s\n", "kernel", "flow", "verdict", "class",
           "decided by", "run s", "diagnose", "share");
    int bad = row("gemm_new", "mlp", 1); /* the default run: an honest candidate */
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) bad |= row(k[i][0], k[i][1], 0);
    return bad;
}
