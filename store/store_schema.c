/* store_schema.c: the tables of the later stages (mixed precision, runtime FI, playback FI and its
 * shards, the report state, a capture's unmapped ops, the manifest), created empty with every
 * file: HDF5's SWMR contract forbids creating objects in a file open in SWMR write mode, so a
 * stage only appends rows to tables that exist from the start. docs/hdf5-schema.md. */
#include "store/store_impl.h"

#include <string.h>

#define NCOLS(c) ((int)(sizeof c / sizeof c[0]))

static const peat_store_col amp_cols[] = {
    {"iter", PEAT_STORE_COL_I64, 0},
    {"loss_scale", PEAT_STORE_COL_F64, 0},
    {"skipped", PEAT_STORE_COL_I64, 0},
};

const peat_store_col peat_store_runtime_curve_cols[7] = {{"run", PEAT_STORE_COL_STR, 64},
                                                         {"kind", PEAT_STORE_COL_STR, 8},
                                                         {"iter", PEAT_STORE_COL_I64, 0},
                                                         {"loss", PEAT_STORE_COL_F64, 0},
                                                         {"weight_distance", PEAT_STORE_COL_F64, 0},
                                                         {"nonfinite", PEAT_STORE_COL_I64, 0},
                                                         {"eval_accuracy", PEAT_STORE_COL_F64, 0}};
const peat_store_col peat_store_runtime_wdist_cols[4] = {{"run", PEAT_STORE_COL_STR, 64},
                                                         {"iter", PEAT_STORE_COL_I64, 0},
                                                         {"tensor", PEAT_STORE_COL_STR, 64},
                                                         {"distance", PEAT_STORE_COL_F64, 0}};
const peat_store_col peat_store_runtime_verdict_cols[13] = {
    {"run", PEAT_STORE_COL_STR, 64},        {"freq", PEAT_STORE_COL_STR, 32},
    {"verdict", PEAT_STORE_COL_STR, 24},    {"iter", PEAT_STORE_COL_I64, 0},
    {"metric", PEAT_STORE_COL_STR, 16},     {"loss_excess", PEAT_STORE_COL_F64, 0},
    {"wdist_ratio", PEAT_STORE_COL_F64, 0}, {"acc_drop", PEAT_STORE_COL_F64, 0},
    {"final_loss", PEAT_STORE_COL_F64, 0},  {"band_lo", PEAT_STORE_COL_F64, 0},
    {"band_hi", PEAT_STORE_COL_F64, 0},     {"swapped", PEAT_STORE_COL_I64, 0},
    {"evidence", PEAT_STORE_COL_STR, 256}};
const peat_store_col peat_store_fi_trial_cols[24] = {
    {"model", PEAT_STORE_COL_STR, 256},     {"spec", PEAT_STORE_COL_STR, 256},
    {"site", PEAT_STORE_COL_STR, 8},        {"trial", PEAT_STORE_COL_I64, 0},
    {"seed", PEAT_STORE_COL_I64, 0},        {"record", PEAT_STORE_COL_I64, 0},
    {"record_id", PEAT_STORE_COL_I64, 0},   {"op", PEAT_STORE_COL_STR, 32},
    {"layer", PEAT_STORE_COL_STR, 64},      {"phase", PEAT_STORE_COL_I64, 0},
    {"iter", PEAT_STORE_COL_I64, 0},        {"bit", PEAT_STORE_COL_I64, 0},
    {"target", PEAT_STORE_COL_I64, 0},      {"outcome", PEAT_STORE_COL_STR, 12},
    {"n_diff", PEAT_STORE_COL_I64, 0},      {"n_over", PEAT_STORE_COL_I64, 0},
    {"n_nonfinite", PEAT_STORE_COL_I64, 0}, {"max_norm", PEAT_STORE_COL_F64, 0},
    {"why", PEAT_STORE_COL_STR, 96},        {"select", PEAT_STORE_COL_STR, 96},
    {"prop", PEAT_STORE_COL_STR, 12},       {"pred_changed", PEAT_STORE_COL_I64, 0},
    {"d_loss", PEAT_STORE_COL_F64, 0},      {"d_weights", PEAT_STORE_COL_F64, 0}};
const peat_store_col peat_store_fi_shard_cols[12] = {
    {"models", PEAT_STORE_COL_STR, 1024},  {"site", PEAT_STORE_COL_STR, 8},
    {"ops", PEAT_STORE_COL_STR, 256},      {"layers", PEAT_STORE_COL_STR, 256},
    {"phases", PEAT_STORE_COL_STR, 32},    {"iter_lo", PEAT_STORE_COL_I64, 0},
    {"iter_hi", PEAT_STORE_COL_I64, 0},    {"trials", PEAT_STORE_COL_I64, 0},
    {"local_only", PEAT_STORE_COL_I64, 0}, {"signature_trials", PEAT_STORE_COL_I64, 0},
    {"shard", PEAT_STORE_COL_I64, 0},      {"of", PEAT_STORE_COL_I64, 0}};
const peat_store_col peat_store_report_state_cols[5] = {
    {"part", PEAT_STORE_COL_STR, 16}, /* "result", "argv", "capture", "seed" */
    {"layout", PEAT_STORE_COL_I64, 0},
    {"offset", PEAT_STORE_COL_I64, 0},
    {"size", PEAT_STORE_COL_I64, 0},
    {"data", PEAT_STORE_COL_STR, PEAT_STORE_REPORT_STATE_DATA_WIDTH}};
const peat_store_col peat_store_capture_unmapped_cols[3] = {{"op", PEAT_STORE_COL_STR, 96},
                                                            {"calls", PEAT_STORE_COL_I64, 0},
                                                            {"why", PEAT_STORE_COL_STR, 160}};
const peat_store_col peat_store_manifest_cols[7] = {
    {"stage", PEAT_STORE_COL_STR, 32},  {"state", PEAT_STORE_COL_STR, 16}, /* "done", "skipped" */
    {"object", PEAT_STORE_COL_STR, 64}, /* a table the stage wrote; "" for none */
    {"rows", PEAT_STORE_COL_I64, 0},    /* its rows that passed their checks */
    {"digest", PEAT_STORE_COL_I64, 0},  /* XXH64 chain of those rows' checks (uint64 bits) */
    {"note", PEAT_STORE_COL_STR, 128},  /* why a stage was skipped */
    {"entries", PEAT_STORE_COL_I64, 0}, /* rows of the manifest: a torn one is told apart */
};

static const struct {
    const char *path;
    const peat_store_col *cols;
    int n;
} stage_tables[] = {
    {PEAT_STORE_AMP_TABLE, amp_cols, NCOLS(amp_cols)},
    {PEAT_STORE_RUNTIME_CURVES, peat_store_runtime_curve_cols,
     NCOLS(peat_store_runtime_curve_cols)},
    {PEAT_STORE_RUNTIME_WDIST, peat_store_runtime_wdist_cols, NCOLS(peat_store_runtime_wdist_cols)},
    {PEAT_STORE_RUNTIME_VERDICTS, peat_store_runtime_verdict_cols,
     NCOLS(peat_store_runtime_verdict_cols)},
    {PEAT_STORE_FI_TRIALS, peat_store_fi_trial_cols, NCOLS(peat_store_fi_trial_cols)},
    {PEAT_STORE_FI_SHARDS, peat_store_fi_shard_cols, NCOLS(peat_store_fi_shard_cols)},
    {PEAT_STORE_REPORT_STATE, peat_store_report_state_cols, NCOLS(peat_store_report_state_cols)},
    {PEAT_STORE_CAPTURE_UNMAPPED, peat_store_capture_unmapped_cols,
     NCOLS(peat_store_capture_unmapped_cols)},
    {PEAT_STORE_MANIFEST, peat_store_manifest_cols, NCOLS(peat_store_manifest_cols)},
};
#define N_STAGE_TABLES ((int)(sizeof stage_tables / sizeof stage_tables[0]))

/* The groups holding them, each with the description attribute every group of the layout has. */
static const char *const stage_groups[][2] = {
    {"/fi", "playback fault injection (peat inject): /fi/trials, one row per trial with its "
            "model, site, outcome and error; /fi/shards, the runs of a shard file (peat inject "
            "--shard); docs/fault-injection.md"},
    {"/runtime", "runtime fault injection: the candidate in the training loop; per-iteration "
                 "loss and weight distance of every run (curves, weight_distance) and one "
                 "verdict per run (verdicts); docs/fault-injection.md"},
    {"/report", "what the reports are made from (state), so that peat report DIR writes them "
                "again; docs/hdf5-schema.md"},
    {"/capture", "a PyTorch capture's aten ops that map to no PEAT op (unmapped); "
                 "docs/pytorch.md"},
};
#define N_STAGE_GROUPS ((int)(sizeof stage_groups / sizeof stage_groups[0]))

const peat_store_col *peat_store_amp_cols(int *n)
{
    *n = NCOLS(amp_cols);
    return amp_cols;
}

/* A group of the stage tables, created when missing, and its description when it has none (a
 * group a rebuild copied, or one written before groups were described). */
static peat_status group_make(peat_store_t *s, int g)
{
    const char *path = stage_groups[g][0];
    hid_t gid = -1;
    if (peat_store_table_exists(s, path))
        gid = H5Gopen2(s->file, path, H5P_DEFAULT);
    else if (peat_store_may_create(s->file))
        gid = H5Gcreate2(s->file, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int has = gid >= 0 ? H5Aexists(gid, "description") : -1;
    int bad = has < 0 || (!has && peat_store_attr_str(gid, "description", stage_groups[g][1]) < 0);
    if (gid >= 0) H5Gclose(gid);
    if (bad)
        return PEAT_ERROR(PEAT_ERR_IO, "%s: creating %s failed: %s", s->path, path,
                          peat_store_h5_msg());
    return PEAT_OK;
}

peat_status peat_store_stage_tables_create(peat_store_t *s)
{
    for (int g = 0; g < N_STAGE_GROUPS; g++) PEAT_TRY(group_make(s, g));
    for (int t = 0; t < N_STAGE_TABLES; t++)
        if (!peat_store_table_exists(s, stage_tables[t].path))
            PEAT_TRY(peat_store_table_make(s, stage_tables[t].path, stage_tables[t].cols,
                                           stage_tables[t].n));
    return PEAT_OK;
}

int peat_store_stage_tables_complete(peat_store_t *s)
{
    for (int t = 0; t < N_STAGE_TABLES; t++)
        if (!peat_store_table_exists(s, stage_tables[t].path)) return 0;
    return 1;
}
