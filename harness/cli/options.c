/* options.c: the option tables of `peat run`, `list`, `calibrate` and `inspect`, and the one
 * parser and help writer that read them (ranges and choices live here only). */
#include "peat/backend.h"
#include "harness/cli/options.h"
#include "harness/latency/latency_cli.h"
#include "harness/runtime/runtime.h"
#include "harness/scale/scale.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- checks of the policy specs (policy.c parses them) ---- */

static peat_status check_op_list(const char *v)
{
    uint64_t mask;
    return peat_campaign_op_mask_parse(v, &mask);
}

static peat_status check_phases(const char *v)
{
    int fwd, bwd, opt;
    return peat_campaign_phase_parse(v, &fwd, &bwd, &opt);
}

static peat_status check_duration(const char *v)
{
    double s;
    return peat_latency_duration_parse(v, &s);
}

static peat_status check_model(const char *v)
{
    peat_inject_model_t *m = NULL;
    peat_status st = peat_inject_model_parse(v, &m);
    peat_inject_model_free(m);
    return st;
}

static peat_status check_compress(const char *v)
{
    int level, saving;
    return peat_campaign_compress_parse(v, &level, &saving);
}

#define STRINGIFY(x) #x
#define STR_OF(x)    STRINGIFY(x)
#define RUN(field)   offsetof(peat_campaign_opts, field)

static peat_status check_shard(const char *v);

static const peat_cli_opt run_opts[] = {
    {"kernel", "NAME", PEAT_CLI_STR, RUN(kernel), 0, 0, 0, NULL, NULL, NULL,
     "candidate kernel to validate (see `peat list`); required", NULL},
    {"flow", "NAME", PEAT_CLI_STR, RUN(flow), 0, 0, 0, NULL, NULL,
     "the first flow that calls the kernel's op", "training flow (see `peat list`)", NULL},
    {"backend", "NAME", PEAT_CLI_CHOICE, RUN(backend), 0, 0, 0, "auto|cpu|cuda|hip|opencl", NULL,
     NULL, "backend; auto is the kernel's own; a device backend runs the whole flow there", NULL},
    {"iters", "N", PEAT_CLI_I64, RUN(iters), 0, 1, 1000000, NULL, NULL, "mlp 200, others 60",
     "training iterations to profile", NULL},
    {"calls", "N", PEAT_CLI_I64, RUN(calls), 0, 1, 1000000, NULL, NULL,
     STR_OF(PEAT_CAMPAIGN_DEFAULT_CALLS), "op calls to record and replay", NULL},
    {"seed", "S", PEAT_CLI_U64, RUN(seed), 0, 0, PEAT_CLI_NO_MAX, NULL, NULL, NULL,
     "seed of everything random", NULL},
    {"out", "DIR", PEAT_CLI_STR, RUN(out_dir), 0, 0, 0, NULL, NULL,
     "peat-out/<kernel>-<flow>-<backend>-<UTC time>", "output directory", NULL},
    {"plugin", "PATH", PEAT_CLI_MULTI, RUN(plugins), RUN(n_plugins), 0, PEAT_MAX_PLUGINS, NULL,
     NULL, NULL, "load kernels from a plugin library", NULL},
    {"resume", NULL, PEAT_CLI_FLAG, RUN(resume), 0, 1, 0, NULL, NULL, NULL,
     "continue an interrupted campaign: `--resume DIR` alone takes every option from the "
     "campaign file (others beside it are refused where they differ); `--resume --out DIR` "
     "with the same options also works",
     NULL},
    {"force", NULL, PEAT_CLI_FLAG, RUN(force), 0, 1, 0, NULL, NULL, NULL,
     "replace a campaign already in --out DIR", NULL},
    {"no-isolate", NULL, PEAT_CLI_FLAG, RUN(isolate), 0, 0, 0, NULL, NULL, NULL,
     "run the candidate in-process (default: an isolated child process kept from call to call, "
     "respawned after a fault, so that a crashing or "
     "hanging kernel is reported instead of ending the campaign)",
     NULL},
    {"no-probes", NULL, PEAT_CLI_FLAG, RUN(no_probes), 0, 1, 0, NULL, NULL, NULL,
     "skip the probe stage (shapes and values beyond the training data, GEMM properties)", NULL},
    {"timeout", "SEC", PEAT_CLI_REAL, RUN(kernel_timeout_s), 0, 0, 86400, NULL, NULL, NULL,
     "per-call deadline in seconds for a candidate (with --no-isolate: a watchdog ends peat)",
     NULL},
    {"hang-policy", "P", PEAT_CLI_CHOICE, RUN(hang_policy), 0, 0, 0, "skip|wait", NULL, NULL,
     "after a call hangs past --timeout: skip the remaining calls (counted), or wait for each",
     NULL},
    {"quiet", NULL, PEAT_CLI_FLAG, RUN(quiet), 0, 1, 0, NULL, NULL, NULL,
     "no progress lines, only the verdict table", NULL},
    {"json", NULL, PEAT_CLI_FLAG, RUN(json), 0, 1, 0, NULL, NULL, NULL,
     "print only the verdict, as one JSON object on stdout", NULL},
    {"budget", "TIME", PEAT_CLI_SPEC, RUN(budget), 0, 0, 0, NULL, check_duration, NULL,
     "plan --iters and --calls to fit TIME (90s, 5m, 1h) with the latency predictor; refused "
     "with the minimum when too small (docs/predictor.md)",
     NULL},
    {"cache-dir", "DIR", PEAT_CLI_STR, RUN(cache_dir), 0, 0, 0, NULL, NULL,
     "$PEAT_CACHE_DIR, else ~/.cache/peat", "where the latency calibration is kept", NULL},
    {"record-ops", "LIST", PEAT_CLI_SPEC, RUN(record_ops), 0, 0, 0, NULL, check_op_list,
     "the kernel's op", "ops to record: all, or e.g. gemm,softmax (the kernel's op always)",
     "recording policy (what the profiler stores in campaign.h5)"},
    {"record-exact", NULL, PEAT_CLI_FLAG, RUN(record_exact), 0, 1, 0, NULL, NULL, NULL,
     "also store every recorded call's fp64 exact outputs (default: recomputed on read; about "
     "twice the golden outputs' size), for readers such as h5py that cannot recompute them",
     NULL},
    {"record-every", "K", PEAT_CLI_I64, RUN(record_every), 0, 1, PEAT_CLI_NO_MAX, NULL, NULL,
     "spread --calls over the run", "every k-th call of each op", NULL},
    {"record-iters", "LO:HI", PEAT_CLI_SPAN, RUN(record_iter_lo), RUN(record_iter_hi), 0, 0, NULL,
     NULL, NULL, "only iterations LO <= it < HI", NULL},
    {"record-phase", "LIST", PEAT_CLI_SPEC, RUN(record_phase), 0, 0, 0, NULL, check_phases, "all",
     "phases to record: fwd,bwd,opt", NULL},
    {"checkpoints", "SPEC", PEAT_CLI_SPEC, RUN(checkpoint_iters), 0, 0, 0, NULL,
     peat_iter_spec_check, "last", "weights + optimizer state at: last, none, every:N or 0,10,59",
     NULL},
    {"activations", "SPEC", PEAT_CLI_SPEC, RUN(activation_iters), 0, 0, 0, NULL,
     peat_iter_spec_check, "none", "outputs of every forward op at these iterations (as above)",
     NULL},
    {"compress", "MODE", PEAT_CLI_SPEC, RUN(compress), 0, 0, 0, NULL, check_compress, "auto",
     "auto: shuffle + deflate for tensors it shrinks by >= 25%, the rest written as they are "
     "(fastest); all (smallest file); none; or a percent: the saving a tensor must reach to be "
     "compressed",
     NULL},
    {"optimizer", "NAME", PEAT_CLI_CHOICE, RUN(optimizer), 0, 0, 0, "adamw|sgd|sgd_nesterov", NULL,
     "the flow's",
     "optimizer of the flow (default: sgd for resnet, adamw for the others; "
     "sgd_nesterov: SGD with Nesterov momentum)",
     "training"},
    {"task", "N", PEAT_CLI_INT, RUN(task), 0, 0, 1, NULL, NULL, "0",
     "0 pretraining task, 1 shifted task (for finetuning)", NULL},
    {"finetune-from", "FILE", PEAT_CLI_STR, RUN(finetune_from), 0, 0, 0, NULL, NULL, NULL,
     "start from the last checkpoint in FILE (a campaign.h5)", NULL},
    {"capture", "FILE", PEAT_CLI_STR, RUN(capture), 0, 0, 0, NULL, NULL, NULL,
     "replay the calls captured from PyTorch in FILE (peat_torch.capture) instead of a built-in "
     "flow: no profile stage, no runtime FI (docs/pytorch.md)",
     NULL},
    {"size", "S", PEAT_CLI_CHOICE, RUN(size), 0, 0, 0, "tiny|small|base", NULL, "tiny",
     "size preset of the flow (docs/flows.md: base is gpt d=256 x 4 layers, language modelling "
     "over 128 tokens, vocabulary 1024; "
     "cnn 32x32x3 images, 32-64-128 channels; mlp 512 wide); --batch, --width, --depth and "
     "--seq override its sizes",
     NULL},
    {"precision", "P", PEAT_CLI_CHOICE, RUN(precision), 0, 0, 0, "fp32|amp-fp16|bf16|fp8", NULL,
     "fp32 (fp8 for an fp8 GEMM kernel)",
     "training precision of the flow, golden and candidate alike (docs/flows.md): amp-fp16 and "
     "bf16 round the inputs and outputs of GEMM, convolution and attention as autocast does, "
     "fp32 master weights; amp-fp16 adds dynamic loss scaling as GradScaler; fp8 runs the linear "
     "layers' GEMMs as fp8 GEMMs (e4m3 activations and weights, e5m2 gradients, per-tensor "
     "scales)",
     NULL},
    {"loss-scale-init", "X", PEAT_CLI_REAL, RUN(loss_scale_init), 0, 0, 1e30, NULL, NULL, "65536",
     "amp-fp16: the first loss scale", NULL},
    {"loss-scale-interval", "N", PEAT_CLI_INT, RUN(loss_scale_interval), 0, 1, 1000000000, NULL,
     NULL, "2000", "amp-fp16: steps without inf/nan gradients before the loss scale doubles", NULL},
    {"batch", "N", PEAT_CLI_INT, RUN(batch), 0, 1, 4096, NULL, NULL, "the flow's (docs/flows.md)",
     "batch size", NULL},
    {"width", "N", PEAT_CLI_INT, RUN(width), 0, 1, 4096, NULL, NULL, "the flow's",
     "hidden width (channels for cnn)", NULL},
    {"depth", "N", PEAT_CLI_INT, RUN(depth), 0, 1, 64, NULL, NULL, "the flow's", "layers", NULL},
    {"seq", "N", PEAT_CLI_INT, RUN(seq), 0, 1, 4096, NULL, NULL, "the flow's",
     "sequence length (gpt flows)", NULL},
    {"lr", "X", PEAT_CLI_REAL, RUN(lr), 0, 0, 10, NULL, NULL, "the flow's", "learning rate", NULL},
    {"runtime-freq", "LIST", PEAT_CLI_FREQ, RUN(runtime_freq), 0, 0, 0, NULL, NULL,
     PEAT_RUNTIME_DEFAULT_FREQS,
     "frequencies of the candidate in the training loop: 1 (every call), 1/K (every K-th), "
     "p=P (each call with probability P); up to 4, comma-separated",
     "runtime fault injection (docs/fault-injection.md)"},
    {"runtime-model", "SPEC", PEAT_CLI_SPEC, RUN(runtime_model), 0, 0, 0, NULL, check_model, NULL,
     "an error model (the `peat inject --model` language, e.g. 'bitflip(bit=30)') on the kernel "
     "in the loop at --runtime-freq; with --kernel gemm_golden: the model on the golden kernel",
     NULL},
    {"no-runtime", NULL, PEAT_CLI_FLAG, RUN(no_runtime), 0, 1, 0, NULL, NULL, NULL,
     "skip the runtime FI stage (no training-impact verdict)", NULL},
    {"no-diagnose", NULL, PEAT_CLI_FLAG, RUN(no_diagnose), 0, 1, 0, NULL, NULL, NULL,
     "skip the differential diagnosis (the experiments that decide a failure's class)", NULL},
    {"no-sequences", NULL, PEAT_CLI_FLAG, RUN(no_sequences), 0, 1, 0, NULL, NULL, NULL,
     "skip the call sequences that keep the candidate's state from call to call (no STATEFUL "
     "finding)",
     NULL},
    {"no-golden-cache", NULL, PEAT_CLI_FLAG, RUN(no_golden_cache), 0, 1, 0, NULL, NULL, NULL,
     "train the golden profile and band in this run, neither taken from nor stored in the golden "
     "cache ($PEAT_CACHE_DIR/golden; PEAT_GOLDEN_CACHE=off does the same)",
     NULL},
    {"runtime-band", "R", PEAT_CLI_INT, RUN(runtime_band), 0, 2, PEAT_RUNTIME_MAX_BAND, NULL, NULL,
     STR_OF(PEAT_RUNTIME_DEFAULT_BAND),
     "runs in the golden noise band: the golden run and R-1 reruns with `reorder`", NULL},
    {"shard", "I/N", PEAT_CLI_SPEC, RUN(shard), 0, 0, 0, NULL, check_shard, "the whole campaign",
     "train only the runtime FI runs #I, #I+N, ... beside the golden run (N >= 2), into "
     "OUT/run-shard-I-of-N.bin; shard 0 also runs every other stage and leaves the campaign "
     "pending; `peat merge OUT` judges the runs and completes it (docs/scale-out.md)",
     NULL},
    {"config", "FILE", PEAT_CLI_CONFIG, 0, 0, 0, 0, NULL, NULL, NULL,
     "read options from FILE (`key = value` lines, e.g. `record-ops = all`; `resume = true` for "
     "a flag); options on the command line override it",
     NULL},
};

const peat_cli_cmd peat_cli_run = {
    "run",
    "validate a kernel:  peat run --kernel gemm_new",
    "peat run --kernel NAME [options]",
    "Profiles a golden training flow, replays the recorded calls of the kernel's op through the\n"
    "candidate, and reports a verdict with evidence.",
    run_opts,
    (int)(sizeof run_opts / sizeof run_opts[0]),
    "Writes DIR/campaign.h5, DIR/report.html, DIR/signature.json, DIR/summary.md, DIR/junit.xml.\n"
    "Exit status: 0 the kernel passes (or warnings only), 1 it fails, 2 usage or input error.",
};

static const peat_cli_opt list_opts[] = {
    {"plugin", "PATH", PEAT_CLI_MULTI, offsetof(peat_cli_list_opts, plugins),
     offsetof(peat_cli_list_opts, n_plugins), 0, PEAT_MAX_PLUGINS, NULL, NULL, NULL,
     "also list the kernels of a plugin library", NULL},
};

const peat_cli_cmd peat_cli_list = {
    "list",
    "kernels, flows, backends, ops and error models",
    "peat list [--plugin PATH]",
    "Lists kernels (by op, with role, backend, dtypes), flows, backends and error models.",
    list_opts,
    (int)(sizeof list_opts / sizeof list_opts[0]),
    NULL,
};

static const peat_cli_opt calibrate_opts[] = {
    {"trials", "N", PEAT_CLI_I64, offsetof(peat_cli_calibrate_opts, trials), 0, 1, 10000, NULL,
     NULL, NULL, "random GEMM shapes per error model", NULL},
    {"seed", "S", PEAT_CLI_U64, offsetof(peat_cli_calibrate_opts, seed), 0, 0, PEAT_CLI_NO_MAX,
     NULL, NULL, NULL, "seed of the shapes, data and injections", NULL},
    {"zoo", "LIB", PEAT_CLI_STR, offsetof(peat_cli_calibrate_opts, zoo), 0, 0, 0, NULL, NULL, NULL,
     "also score the defect zoo plugin (build/tests/zoo/libpeat_zoo.so) end to end", NULL},
    {"manifest", "FILE", PEAT_CLI_STR, offsetof(peat_cli_calibrate_opts, manifest), 0, 0, 0, NULL,
     NULL, "tests/zoo/manifest.tsv", "the zoo's expected classes (read only for scoring)", NULL},
};

const peat_cli_cmd peat_cli_calibrate = {
    "calibrate",
    "the detector's confusion matrix over the error-model catalogue",
    "peat calibrate [--trials N] [--seed S] [--zoo LIB [--manifest FILE]]",
    "Injects every pseudo-error model of the catalogue into the golden GEMM on N random shapes\n"
    "and prints which finding the detector names for each: the detector's measured accuracy.\n"
    "Exit 0 when at least 95% of the primary findings name the injected model. With --zoo, every\n"
    "zoo kernel also runs through `peat run` and the zoo's confusion matrix is printed; exit 0\n"
    "then also needs every defect caught, no honest kernel flagged and >= 90% right classes.",
    calibrate_opts,
    (int)(sizeof calibrate_opts / sizeof calibrate_opts[0]),
    NULL,
};

#define LAT(field) offsetof(peat_cli_latency_opts, field)

static const peat_cli_opt calibrate_latency_opts[] = {
    {"backend", "NAME", PEAT_CLI_CHOICE, LAT(backend), 0, 0, 0, PEAT_BACKEND_NAMES, NULL,
     PEAT_BACKEND_HOST, "the device whose kernels are timed", NULL},
    {"plugin", "PATH", PEAT_CLI_MULTI, LAT(plugins), LAT(n_plugins), 0, PEAT_MAX_PLUGINS, NULL,
     NULL, NULL, "also time the kernels of a plugin library (each in a forked child)", NULL},
    {"force", NULL, PEAT_CLI_FLAG, LAT(force), 0, 1, 0, NULL, NULL, NULL,
     "time every kernel again, even those the cache holds", NULL},
    {"cache-dir", "DIR", PEAT_CLI_STR, LAT(cache_dir), 0, 0, 0, NULL, NULL,
     "$PEAT_CACHE_DIR, else ~/.cache/peat", "where the calibration is kept", NULL},
};

const peat_cli_cmd peat_cli_calibrate_latency = {
    "calibrate-latency",
    "time every kernel at a few shapes for the latency predictor",
    "peat calibrate-latency [--backend B] [--plugin PATH]... [--force]",
    "Warms the device up, times every registered kernel of the backend (and the harness's own\n"
    "per-call work) at a small set of shapes spanning waves and sizes, and keeps the table in\n"
    "an HDF5 cache per device, reused until a kernel's descriptor or the device changes. Says\n"
    "what the calibration cost.",
    calibrate_latency_opts,
    (int)(sizeof calibrate_latency_opts / sizeof calibrate_latency_opts[0]),
    NULL,
};

static const peat_cli_opt predict_opts[] = {
    {"kernel", "NAME", PEAT_CLI_STR, LAT(kernel), 0, 0, 0, NULL, NULL, NULL,
     "candidate kernel; required", NULL},
    {"plugin", "PATH", PEAT_CLI_MULTI, LAT(plugins), LAT(n_plugins), 0, PEAT_MAX_PLUGINS, NULL,
     NULL, NULL, "load kernels from a plugin library", NULL},
    {"flow", "NAME", PEAT_CLI_STR, LAT(flow), 0, 0, 0, NULL, NULL,
     "the first flow that calls the kernel's op", "training flow", NULL},
    {"backend", "NAME", PEAT_CLI_CHOICE, LAT(backend), 0, 0, 0, "auto|cpu|cuda|hip|opencl", NULL,
     NULL, "device backend; auto is the kernel's own", NULL},
    {"iters", "N", PEAT_CLI_I64, LAT(iters), 0, 1, 1000000, NULL, NULL, "the flow's default",
     "training iterations of the campaign to predict", NULL},
    {"calls", "N", PEAT_CLI_I64, LAT(calls), 0, 1, 1000000, NULL, NULL,
     STR_OF(PEAT_CAMPAIGN_DEFAULT_CALLS), "recorded calls of the campaign to predict", NULL},
    {"no-isolate", NULL, PEAT_CLI_FLAG, LAT(no_isolate), 0, 1, 0, NULL, NULL, NULL,
     "predict a run with --no-isolate (no fork per candidate call)", NULL},
    {"no-probes", NULL, PEAT_CLI_FLAG, LAT(no_probes), 0, 1, 0, NULL, NULL, NULL,
     "predict a run with --no-probes", NULL},
    {"no-runtime", NULL, PEAT_CLI_FLAG, LAT(no_runtime), 0, 1, 0, NULL, NULL, NULL,
     "predict a run with --no-runtime", NULL},
    {"runtime-freq", "LIST", PEAT_CLI_FREQ, LAT(runtime_freq), 0, 0, 0, NULL, NULL,
     PEAT_RUNTIME_DEFAULT_FREQS, "runtime-FI frequencies, as `peat run` takes them", NULL},
    {"runtime-band", "R", PEAT_CLI_INT, LAT(runtime_band), 0, 2, PEAT_RUNTIME_MAX_BAND, NULL, NULL,
     STR_OF(PEAT_RUNTIME_DEFAULT_BAND), "runtime-FI band runs, as `peat run` takes them", NULL},
    {"cache-dir", "DIR", PEAT_CLI_STR, LAT(cache_dir), 0, 0, 0, NULL, NULL,
     "$PEAT_CACHE_DIR, else ~/.cache/peat", "where the latency calibration is kept", NULL},
};

const peat_cli_cmd peat_cli_predict = {
    "predict",
    "what a campaign will cost:  peat predict --kernel gemm_new --flow gpt",
    "peat predict --kernel NAME [--plugin PATH]... [--flow F] [options]",
    "Predicts, from the latency calibration (made first if missing), the time of each op call of\n"
    "the kernel's op in one training iteration (golden, candidate, exact, recorded, replayed),\n"
    "of an iteration, and of each stage of the campaign `peat run` runs with the same options\n"
    "(profile, playback, probes, analyze, runtime FI) with the total.",
    predict_opts,
    (int)(sizeof predict_opts / sizeof predict_opts[0]),
    NULL,
};

static peat_status check_site(const char *v)
{
    peat_inject_site site;
    return peat_inject_site_parse(v, &site);
}

static peat_status check_shard(const char *v)
{
    peat_scale_shard sh;
    return peat_scale_shard_parse(v, &sh);
}

#define FI(field) offsetof(peat_fi_opts, field)
static const peat_cli_opt inject_opts[] = {
    {"campaign", "DIR", PEAT_CLI_STR, FI(campaign), 0, 0, 0, NULL, NULL, NULL,
     "a finished campaign (its directory or campaign.h5); required", NULL},
    {"model", "SPECS", PEAT_CLI_STR, FI(models), 0, 0, 0, NULL, NULL, NULL,
     "pseudo-error models, ';'-separated (`peat list`), e.g. 'bitflip(bit=-1);nan'; bit=-1 "
     "draws the bit per trial (a 32-row per-bit table); required",
     NULL},
    {"trials", "N", PEAT_CLI_I64, FI(trials), 0, 1, 100000000, NULL, NULL,
     "what --margin needs (1068 for +-3% at 95%)", "trials per model", NULL},
    {"ops", "LIST", PEAT_CLI_SPEC, FI(ops), 0, 0, 0, NULL, check_op_list, "every recorded op",
     "recorded ops to inject into, e.g. gemm,softmax", NULL},
    {"site", "SITE", PEAT_CLI_SPEC, FI(site), 0, 0, 0, NULL, check_site, NULL,
     "where the fault lands: output, input (a copy of one input), acc (a GEMM running sum)", NULL},
    {"layer", "LIST", PEAT_CLI_STR, FI(layers), 0, 0, 0, NULL, NULL, "every recorded layer",
     "recorded layers to inject into, e.g. fc1 or fc1,h0.* (a trailing * is a prefix)", NULL},
    {"phase", "LIST", PEAT_CLI_SPEC, FI(phases), 0, 0, 0, NULL, check_phases, "all",
     "phases to inject into: fwd,bwd,opt", NULL},
    {"iters", "LO:HI", PEAT_CLI_SPAN, FI(iter_lo), FI(iter_hi), 0, 0, NULL, NULL, NULL,
     "records of iterations LO <= it < HI only", NULL},
    {"local-only", NULL, PEAT_CLI_FLAG, FI(local_only), 0, 1, 0, NULL, NULL, NULL,
     "judge each trial on its op's output only (default: also follow it to the end of its "
     "training step: the propagated view)",
     NULL},
    {"show", NULL, PEAT_CLI_FLAG, FI(show), 0, 1, 0, NULL, NULL, NULL,
     "run nothing: print every series the campaign file holds", NULL},
    {"pool", NULL, PEAT_CLI_FLAG, FI(pool), 0, 1, 0, NULL, NULL, NULL,
     "also print tables pooled over every series of the file (headed POOLED; default: every "
     "table is one series)",
     NULL},
    {"margin", "E", PEAT_CLI_REAL, FI(margin), 0, 0, 0.5, NULL, NULL, NULL,
     "half-width wanted for the rates (prints the trials it needs)", NULL},
    {"confidence", "C", PEAT_CLI_REAL, FI(confidence), 0, 0, 1, NULL, NULL, NULL,
     "confidence of that margin", NULL},
    {"threads", "N", PEAT_CLI_INT, FI(threads), 0, 1, 64, NULL, NULL, "online CPUs",
     "worker threads running trials", NULL},
    {"batch", "N", PEAT_CLI_I64, FI(batch), 0, 1, 1000000, NULL, NULL, "128 per thread",
     "trials per durable write (a kill loses at most one batch, which a rerun redoes)", NULL},
    {"quiet", NULL, PEAT_CLI_FLAG, FI(quiet), 0, 1, 0, NULL, NULL, NULL, "print only the tables",
     NULL},
    {"shard", "I/N", PEAT_CLI_SPEC, FI(shard), 0, 0, 0, NULL, check_shard, "the whole campaign",
     "run only the trials whose number % N is I, into DIR/fi-shard-I-of-N.h5 (the campaign file "
     "is only read); `peat merge DIR` combines the shards (docs/scale-out.md)",
     NULL},
};

const peat_cli_cmd peat_cli_inject = {
    "inject",
    "playback fault injection:  peat inject --campaign DIR --model 'bitflip(bit=-1)'",
    "peat inject --campaign DIR --model SPEC[;SPEC...] [options]",
    "Runs seeded fault-injection trials of each model on the campaign's recorded calls and\n"
    "classifies each in two views. Local (the op's output): MASKED (bit-identical to golden),\n"
    "TOLERABLE (within the rounding bound), SDC (finite, beyond it), DUE (failure, or NaN/Inf\n"
    "where golden is finite). Propagated (the rest of the training step replayed with the\n"
    "faulted output): MASKED (loss, predictions, update bit-identical), TOLERABLE (within the\n"
    "step's band of honest reorderings), SDC (beyond it; prediction changes counted apart), DUE\n"
    "(non-finite or failed). Prints rates per series (model, site, selection) by op, layer,\n"
    "phase and bit with 95% Wilson intervals. Trials go into the campaign file as they finish:\n"
    "the same command resumes a killed campaign, nothing redone or doubled.",
    inject_opts,
    (int)(sizeof inject_opts / sizeof inject_opts[0]),
    "Writes /fi/trials and the reference signatures fi:<spec>@<site> into DIR/campaign.h5, and\n"
    "DIR/fi-summary.md, DIR/fi-report.html. Exit status: 0 done, 2 usage or input error.",
};

static const peat_cli_opt inspect_opts[] = {
    {"verify", NULL, PEAT_CLI_FLAG, offsetof(peat_cli_inspect_opts, verify), 0, 1, 0, NULL, NULL,
     NULL,
     "also read every tensor and signature back and check it against its hash (one line per "
     "damaged record)",
     NULL},
};

const peat_cli_cmd peat_cli_inspect = {
    "inspect",
    "what a campaign file holds:  peat inspect [--verify] DIR/campaign.h5",
    "peat inspect [--verify] FILE",
    "Prints what a campaign file holds: stages, op calls per op, iterations, sizes and the\n"
    "compression ratio, and checks it against its manifest (every stage output present and\n"
    "unchanged). Refuses files that are not PEAT campaigns of this schema version.",
    inspect_opts,
    (int)(sizeof inspect_opts / sizeof inspect_opts[0]),
    "Exit status: 0 the file reads whole (with --verify: every tensor matches its hash),\n"
    "2 unreadable or damaged (the problems are listed under integrity, one line each).",
};

static const peat_cli_opt report_opts[] = {
    {"json", NULL, PEAT_CLI_FLAG, offsetof(peat_cli_report_opts, json), 0, 1, 0, NULL, NULL, NULL,
     "print the verdict as one JSON object instead of the table (as `peat run --json`)", NULL},
};

const peat_cli_cmd peat_cli_report = {
    "report",
    "write a finished campaign's reports again:  peat report DIR",
    "peat report [--json] DIR",
    "Writes every report of the finished campaign in DIR again (signature.json, summary.md,\n"
    "junit.xml, report.html, and the verdict table on the terminal) from DIR/campaign.h5 alone:\n"
    "for a run whose reports could not be written (a full disk, a file-size limit, killed after\n"
    "the campaign finished) or were deleted. The reports equal the run's own but for its time\n"
    "fields. An unfinished campaign (campaign.h5.partial: `peat run --resume DIR`), a damaged\n"
    "file, or one written by a peat too old to keep what reports are made from is refused.",
    report_opts,
    (int)(sizeof report_opts / sizeof report_opts[0]),
    "Exit status: as the run's: 0 the kernel passes (or warnings only), 1 it fails, 2 usage or\n"
    "input error (no finished campaign in DIR, damaged, a report that cannot be written).",
};

/* ---- the parser ---- */

static const peat_cli_opt *find_opt(const peat_cli_cmd *cmd, const char *name, size_t len)
{
    for (int i = 0; i < cmd->n_opts; i++)
        if (strlen(cmd->opts[i].name) == len && strncmp(cmd->opts[i].name, name, len) == 0)
            return &cmd->opts[i];
    return NULL;
}

const peat_cli_opt *peat_cli_find(const peat_cli_cmd *cmd, const char *arg)
{
    if (strncmp(arg, "--", 2) != 0) return NULL;
    return find_opt(cmd, arg + 2, strcspn(arg + 2, "="));
}

int peat_cli_positionals(const peat_cli_cmd *cmd, int argc, char **argv, char **pos, int max_pos,
                         int *n_pos, char **opts)
{
    int n = 0;
    *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const peat_cli_opt *opt = peat_cli_find(cmd, argv[i]);
        if (strncmp(argv[i], "--", 2) == 0 || (argv[i][0] == '-' && argv[i][1])) {
            opts[n++] = argv[i];
            /* the value of "--name VALUE" stays with its option */
            if (opt && opt->kind != PEAT_CLI_FLAG && !strchr(argv[i], '=') && i + 1 < argc)
                opts[n++] = argv[++i];
        } else if (*n_pos < max_pos)
            pos[(*n_pos)++] = argv[i];
        else
            return -1 - i;
    }
    return n;
}

static int is_integer_kind(peat_cli_kind k)
{
    return k == PEAT_CLI_INT || k == PEAT_CLI_I64 || k == PEAT_CLI_U64;
}

/* What an option takes, in words ("an integer in 1..1000000", "adamw or sgd"). */
static void expect_words(const peat_cli_opt *opt, char *buf, size_t n)
{
    if (is_integer_kind(opt->kind) && opt->hi >= PEAT_CLI_NO_MAX)
        snprintf(buf, n, opt->lo == 0 ? "a non-negative integer" : "an integer >= %.0f", opt->lo);
    else if (is_integer_kind(opt->kind))
        snprintf(buf, n, "an integer in %.0f..%.0f", opt->lo, opt->hi);
    else if (opt->kind == PEAT_CLI_REAL)
        snprintf(buf, n, "a number in (%g, %g)", opt->lo, opt->hi);
    else if (opt->kind == PEAT_CLI_SPAN)
        snprintf(buf, n, "LO:HI with %.0f <= LO < HI", opt->lo);
    else if (opt->kind == PEAT_CLI_CHOICE) {
        /* "a or b", "one of a, b or c" */
        int count = 1;
        for (const char *c = opt->choices; *c; c++) count += *c == '|';
        size_t used = (size_t)snprintf(buf, n, "%s", count > 2 ? "one of " : "");
        const char *c = opt->choices;
        for (int k = 0; k < count && used < n; k++) {
            int len = (int)strcspn(c, "|");
            const char *sep = k == 0 ? "" : k == count - 1 ? " or " : ", ";
            used += (size_t)snprintf(buf + used, n - used, "%s%.*s", sep, len, c);
            c += len + (c[len] == '|');
        }
    } else
        snprintf(buf, n, "a value");
}

static peat_status bad_value(const peat_cli_opt *opt, const char *v)
{
    char want[128];
    expect_words(opt, want, sizeof want);
    return PEAT_ERROR(PEAT_ERR_INVAL, "--%s must be %s, got '%s'", opt->name, want, v);
}

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, "|");
        if (len == n && strncmp(c, v, n) == 0) return 1;
        c += len + (c[len] == '|');
    }
    return 0;
}

/* An integer option's value, range-checked, into the field of its type. */
static peat_status set_integer(const peat_cli_opt *opt, const char *v, char *dst)
{
    char *end;
    errno = 0;
    if (opt->kind == PEAT_CLI_U64) { /* the whole unsigned range (a seed is any 64-bit value) */
        unsigned long long u = strtoull(v, &end, 10);
        if (!*v || *v == '-' || errno || *end || (double)u < opt->lo ||
            (opt->hi < PEAT_CLI_NO_MAX && (double)u > opt->hi))
            return bad_value(opt, v);
        *(uint64_t *)dst = (uint64_t)u;
        return PEAT_OK;
    }
    long long x = strtoll(v, &end, 10);
    if (!*v || errno || *end || (double)x < opt->lo || (double)x > opt->hi)
        return bad_value(opt, v);
    if (opt->kind == PEAT_CLI_INT) *(int *)dst = (int)x;
    if (opt->kind == PEAT_CLI_I64) *(int64_t *)dst = (int64_t)x;
    return PEAT_OK;
}

static peat_status set_spec(const peat_cli_opt *opt, const char *v, char *dst)
{
    if (opt->check(v) != PEAT_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", peat_error_last());
        return PEAT_ERROR(PEAT_ERR_INVAL, "--%s: %s", opt->name, why);
    }
    *(const char **)dst = v;
    return PEAT_OK;
}

/* A frequency list: parsed here, once, into the options' peat_freq_schedule. */
static peat_status set_freq(const peat_cli_opt *opt, const char *v, char *dst)
{
    peat_freq_schedule f;
    if (peat_freq_schedule_parse(v, &f) != PEAT_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", peat_error_last());
        return PEAT_ERROR(PEAT_ERR_INVAL, "--%s: %s", opt->name, why);
    }
    *(peat_freq_schedule *)dst = f;
    return PEAT_OK;
}

static peat_status set_span(const peat_cli_opt *opt, const char *v, char *base)
{
    long long lo, hi;
    char tail;
    if (sscanf(v, "%lld:%lld%c", &lo, &hi, &tail) != 2 || (double)lo < opt->lo || hi <= lo)
        return bad_value(opt, v);
    *(int64_t *)(base + opt->off) = lo;
    *(int64_t *)(base + opt->off2) = hi;
    return PEAT_OK;
}

/* Stores v (the option's value) into the command's options struct at base. */
static peat_status set_value(const peat_cli_opt *opt, const char *v, char *base)
{
    char *dst = base + opt->off;
    double x;
    char *end;
    switch (opt->kind) {
    case PEAT_CLI_INT:
    case PEAT_CLI_I64:
    case PEAT_CLI_U64:
        return set_integer(opt, v, dst);
    case PEAT_CLI_REAL:
        x = strtod(v, &end);
        if (!*v || *end || !(x > opt->lo && x < opt->hi)) return bad_value(opt, v);
        *(double *)dst = x;
        return PEAT_OK;
    case PEAT_CLI_CHOICE:
        if (!choice_ok(opt->choices, v)) return bad_value(opt, v);
        *(const char **)dst = v;
        return PEAT_OK;
    case PEAT_CLI_SPEC:
        return set_spec(opt, v, dst);
    case PEAT_CLI_FREQ:
        return set_freq(opt, v, dst);
    case PEAT_CLI_SPAN:
        return set_span(opt, v, base);
    case PEAT_CLI_MULTI: {
        int *n = (int *)(base + opt->off2);
        if (*n >= (int)opt->hi)
            return PEAT_ERROR(PEAT_ERR_INVAL, "at most %.0f --%s options", opt->hi, opt->name);
        ((const char **)dst)[(*n)++] = v;
        return PEAT_OK;
    }
    default: /* PEAT_CLI_STR */
        *(const char **)dst = v;
        return PEAT_OK;
    }
}

/* One option at argv[*i] ("--name", "--name=VALUE" or "--name VALUE"); *i moves past it. */
static peat_status parse_one(const peat_cli_cmd *cmd, int argc, char **argv, int *i, char *base)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    const peat_cli_opt *opt =
        strncmp(arg, "--", 2) == 0
            ? find_opt(cmd, arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2))
            : NULL;
    if (!opt || opt->kind == PEAT_CLI_CONFIG)
        return PEAT_ERROR(PEAT_ERR_INVAL, "unknown option '%s' for %s (see `peat help %s`)", arg,
                          cmd->name, cmd->name);
    if (opt->kind == PEAT_CLI_FLAG) {
        if (eq) return PEAT_ERROR(PEAT_ERR_INVAL, "--%s takes no value", opt->name);
        *(int *)(base + opt->off) = (int)opt->lo;
        return PEAT_OK;
    }
    const char *v = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!v || !*v)
        return PEAT_ERROR(PEAT_ERR_INVAL, "--%s needs a value (see `peat help %s`)", opt->name,
                          cmd->name);
    return set_value(opt, v, base);
}

/* ---- --config FILE ---- */

/* Reads a config file of `key = value` lines (the long option names without dashes; `#`
 * comments; `[section]` headers ignored) into arguments: "--key" "value", or "--key" alone for
 * `key = true`. The strings live in store (cap bytes); args holds at most max. */
static peat_status config_args(const char *path, char **args, int max, int *n, char *store,
                               size_t cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot read config %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return PEAT_ERROR(PEAT_ERR_INVAL, "--config %s is not a regular file", path);
    FILE *f = fopen(path, "r");
    if (!f) return PEAT_ERROR(PEAT_ERR_IO, "cannot read config %s: %s", path, strerror(errno));
    char *line = NULL; /* any length: a long line is one setting, never split */
    size_t line_cap = 0, used = 0;
    int lineno = 0;
    peat_status st = PEAT_OK;
    *n = 0;
    while (st == PEAT_OK && getline(&line, &line_cap, f) >= 0) {
        lineno++;
        char *c = line + strspn(line, " \t");
        c[strcspn(c, "#\r\n")] = 0;
        if (!*c || *c == '[') continue;
        char *eq = strchr(c, '=');
        if (!eq) {
            st = PEAT_ERROR(PEAT_ERR_INVAL, "%s:%d: expected `key = value`", path, lineno);
            break;
        }
        *eq = 0;
        char *key = c, *val = eq + 1 + strspn(eq + 1, " \t");
        for (char *e = key + strlen(key); e > key && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
        for (char *e = val + strlen(val); e > val && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
        int flag = !strcmp(val, "true");
        if (!strcmp(key, "config")) { /* one file: a second would be read by nobody */
            st = PEAT_ERROR(PEAT_ERR_INVAL,
                            "%s:%d: `config` inside a config file is not followed (give one "
                            "--config)",
                            path, lineno);
            break;
        }
        if (*n + 2 > max || used + strlen(key) + strlen(val) + 4 > cap) {
            st = PEAT_ERROR(PEAT_ERR_INVAL,
                            "%s:%d: the settings exceed what a config file may hold (%d settings, "
                            "%zu bytes)",
                            path, lineno, max / 2, cap);
            break;
        }
        args[(*n)++] = store + used;
        used += (size_t)sprintf(store + used, "--%s", key) + 1;
        if (flag) continue;
        args[(*n)++] = store + used;
        used += (size_t)sprintf(store + used, "%s", val) + 1;
    }
    free(line);
    fclose(f);
    return st;
}

/* The --config FILE on the command line, if any (the last one counts). */
static peat_status find_config(const peat_cli_cmd *cmd, int argc, char **argv, const char **path)
{
    *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc || !*argv[i + 1])
                return PEAT_ERROR(PEAT_ERR_INVAL, "--config needs a file");
            *path = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0)
            *path = argv[i] + 9;
    }
    if (*path && !find_opt(cmd, "config", 6))
        return PEAT_ERROR(PEAT_ERR_INVAL, "unknown option '--config' for %s (see `peat help %s`)",
                          cmd->name, cmd->name);
    return PEAT_OK;
}

static peat_status parse_args(const peat_cli_cmd *cmd, int argc, char **argv, char *base)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            i++; /* read before the command line's options */
            continue;
        }
        if (strncmp(argv[i], "--config=", 9) == 0) continue;
        PEAT_TRY(parse_one(cmd, argc, argv, &i, base));
    }
    return PEAT_OK;
}

peat_status peat_cli_parse(const peat_cli_cmd *cmd, int argc, char **argv, void *opts)
{
    /* the config file's settings come first, so the command line's override them; its strings
     * must outlive the parse (options point into them): they stay valid until the next parse
     * of a config file */
    static char store[8192];
    static char *cargs[256];
    const char *path;
    PEAT_TRY(find_config(cmd, argc, argv, &path));
    if (path) {
        int n = 0;
        PEAT_TRY(config_args(path, cargs, 256, &n, store, sizeof store));
        PEAT_TRY(parse_args(cmd, n, cargs, opts));
    }
    return parse_args(cmd, argc, argv, opts);
}

/* ---- help ---- */

/* The default as help shows it: the words of the table, else the value in defaults. */
static void default_words(const peat_cli_opt *opt, const char *base, char *buf, size_t n)
{
    buf[0] = 0;
    if (opt->def) {
        snprintf(buf, n, "%s", opt->def);
        return;
    }
    if (!base) return;
    const char *p = base + opt->off;
    if (opt->kind == PEAT_CLI_FLAG || opt->kind == PEAT_CLI_MULTI || opt->kind == PEAT_CLI_SPAN ||
        opt->kind == PEAT_CLI_CONFIG || opt->kind == PEAT_CLI_FREQ)
        return;
    if (opt->kind == PEAT_CLI_INT && *(const int *)p)
        snprintf(buf, n, "%d", *(const int *)p);
    else if (opt->kind == PEAT_CLI_I64 && *(const int64_t *)p)
        snprintf(buf, n, "%lld", (long long)*(const int64_t *)p);
    else if (opt->kind == PEAT_CLI_U64 && *(const uint64_t *)p)
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p);
    else if (opt->kind == PEAT_CLI_REAL && *(const double *)p != 0)
        snprintf(buf, n, "%g", *(const double *)p);
    else if ((opt->kind == PEAT_CLI_STR || opt->kind == PEAT_CLI_CHOICE ||
              opt->kind == PEAT_CLI_SPEC) &&
             *(const char *const *)p)
        snprintf(buf, n, "%s", *(const char *const *)p);
}

/* Writes text from column col, wrapped at 100 columns with continuation lines at indent. */
static void wrap(FILE *f, const char *text, int col, int indent)
{
    const int width = 100;
    while (*text) {
        int len = (int)strcspn(text, " ");
        if (col > indent && col + 1 + len > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", len, text);
        col += len;
        text += len;
        text += strspn(text, " ");
    }
    fputc('\n', f);
}

static void help_line(FILE *f, const peat_cli_opt *opt, const char *base)
{
    char head[64], range[128] = "", def[128], text[1024];
    snprintf(head, sizeof head, "--%s%s%s", opt->name, opt->meta ? " " : "",
             opt->meta ? opt->meta : "");
    if (opt->kind == PEAT_CLI_MULTI)
        snprintf(range, sizeof range, "repeatable, at most %.0f", opt->hi);
    else if (opt->kind != PEAT_CLI_FLAG && opt->kind != PEAT_CLI_STR &&
             opt->kind != PEAT_CLI_SPEC && opt->kind != PEAT_CLI_FREQ &&
             opt->kind != PEAT_CLI_CONFIG)
        expect_words(opt, range, sizeof range);
    default_words(opt, base, def, sizeof def);
    snprintf(text, sizeof text, "%s%s%s%s%s%s", opt->help, range[0] || def[0] ? " (" : "", range,
             range[0] && def[0] ? "; " : "", def[0] ? "default " : "", def);
    if (range[0] || def[0]) strcat(text, ")");
    fprintf(f, "  %-22s", head);
    wrap(f, text, 24, 24);
}

void peat_cli_help(FILE *f, const peat_cli_cmd *cmd, const void *defaults)
{
    fprintf(f, "usage: %s\n\n%s\n", cmd->usage, cmd->about);
    if (cmd->n_opts) fputc('\n', f);
    for (int i = 0; i < cmd->n_opts; i++) {
        if (cmd->opts[i].section) fprintf(f, "\n%s:\n", cmd->opts[i].section);
        help_line(f, &cmd->opts[i], defaults);
    }
    if (cmd->epilog) fprintf(f, "\n%s\n", cmd->epilog);
}

int peat_cli_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("peat: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}
