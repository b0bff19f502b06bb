/* calibrate.c: `peat calibrate`: the detector's measured accuracy: every pseudo-error model of the
 * catalogue injected into the golden GEMM on random shapes and seeds, the primary finding
 * tabulated against the model's expected class (a confusion matrix). */
#include "harness/run/calibrate.h"
#include "harness/runtime/builtin.h"

#include "golden/golden.h"
#include "inject/inject.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Inputs scaled so that the mechanism has something to act on: subnormal outputs for ftz,
 * outputs crossing fp16's 65504 for range. */
typedef enum { DATA_NORMAL = 0, DATA_SUBNORMAL, DATA_LARGE } data_kind;

typedef struct {
    const char *model; /* catalogue name */
    const char *spec;
    data_kind data;
    peat_finding_class expect;
} cal_case;

static const cal_case CASES[] = {
    {"reorder", "reorder(order=reverse)", DATA_NORMAL, PEAT_FIND_WITHIN_BOUND},
    {"precision", "precision(fmt=bf16,where=inputs)", DATA_NORMAL, PEAT_FIND_REDUCED_PRECISION},
    {"truncate", "truncate", DATA_NORMAL, PEAT_FIND_TRUNCATION},
    {"ftz", "ftz", DATA_SUBNORMAL, PEAT_FIND_FTZ},
    {"range", "range(fmt=fp16)", DATA_LARGE, PEAT_FIND_RANGE},
    {"bitflip", "bitflip(bit=27,count=2)", DATA_NORMAL, PEAT_FIND_BITFLIP},
    {"stuck", "stuck(bit=26,value=1,stride=3)", DATA_NORMAL, PEAT_FIND_STUCK_BIT},
    {"tile", "tile(rows=8,cols=4,kind=stale)", DATA_NORMAL, PEAT_FIND_TILE},
    {"boundary", "boundary(rows=2,kind=random)", DATA_NORMAL, PEAT_FIND_TILE},
    {"nan", "nan(count=4)", DATA_NORMAL, PEAT_FIND_NAN},
    {"noise", "noise(sigma=3e-5)", DATA_NORMAL, PEAT_FIND_NOISE},
    {"approx", "approx(fn=smooth,amp=3e-4)", DATA_NORMAL, PEAT_FIND_APPROX},
    {"nondeterministic", "nondeterministic(split=6)", DATA_NORMAL, PEAT_FIND_NONDETERMINISTIC},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

int peat_run_calibrate_cases(void)
{
    return N_CASES;
}
const char *peat_run_calibrate_case_model(int i)
{
    return i >= 0 && i < N_CASES ? CASES[i].model : NULL;
}
peat_finding_class peat_run_calibrate_case_expect(int i)
{
    return CASES[i].expect;
}

/* One GEMM call: inputs, exact output, magnitudes. */
typedef struct {
    peat_tensor *A, *B, *E, *D, *D2;
    double *mag;
    peat_args a, a2;
    int64_t M, N, K;
} cal_call;

static void call_free(cal_call *c)
{
    peat_tensor_free(c->A), peat_tensor_free(c->B), peat_tensor_free(c->E);
    peat_tensor_free(c->D), peat_tensor_free(c->D2);
    free(c->mag);
}

static peat_status call_new(cal_call *c, peat_rng_t *r, data_kind kind)
{
    memset(c, 0, sizeof *c);
    c->M = 16 + (int64_t)peat_rng_int(r, 113), c->N = 16 + (int64_t)peat_rng_int(r, 113);
    c->K = 16 + (int64_t)peat_rng_int(r, 497);
    PEAT_TRY(peat_tensor_alloc2(PEAT_DTYPE_F32, c->M, c->K, &c->A));
    PEAT_TRY(peat_tensor_alloc2(PEAT_DTYPE_F32, c->K, c->N, &c->B));
    PEAT_TRY(peat_tensor_alloc2(PEAT_DTYPE_F32, c->M, c->N, &c->D));
    PEAT_TRY(peat_tensor_alloc2(PEAT_DTYPE_F32, c->M, c->N, &c->D2));
    PEAT_TRY(peat_tensor_alloc2(PEAT_DTYPE_F64, c->M, c->N, &c->E));
    double sa = 1.0, sb = 1.0, sk = sqrt((double)c->K);
    if (kind == DATA_SUBNORMAL) sa = 1e-19, sb = 1e-19 / sk; /* outputs straddle FLT_MIN */
    if (kind == DATA_LARGE) sa = 3e4 / sk;                   /* outputs cross 65504 */
    peat_rng_fill_gaussian(r, c->A, sa);
    peat_rng_fill_gaussian(r, c->B, sb);
    peat_op_params p;
    memset(&p, 0, sizeof p);
    p.i[2] = c->M, p.i[3] = c->N, p.i[4] = c->K, p.i[5] = 1, p.f[0] = 1.0;
    const peat_tensor *in[2] = {c->A, c->B};
    peat_tensor *oe[1] = {c->E}, *od[1] = {c->D}, *od2[1] = {c->D2};
    peat_args ae = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, oe);
    PEAT_TRY(peat_kernel_run(peat_registry_find("gemm_exact"), &ae));
    c->mag = malloc(sizeof(double) * (size_t)(c->M * c->N));
    if (!c->mag) return PEAT_ERROR(PEAT_ERR_NOMEM, "calibrate magnitudes");
    PEAT_TRY(peat_golden_magnitude(&ae, 0, c->E, c->mag));
    c->a = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, od);
    c->a2 = peat_args_make(PEAT_OP_GEMM, &p, 2, in, 1, od2);
    return PEAT_OK;
}

/* Signature of the golden with model m (NULL: the golden itself), with a repeat run as the
 * campaign does it: a new seed for transient models, the same one otherwise. */
static peat_status signature_of(cal_call *c, const peat_inject_model_t *m, uint64_t seed,
                                peat_signature *out)
{
    const peat_kernel *g = peat_registry_find("gemm_golden");
    uint64_t s2 = m && peat_inject_model_transient(m) ? peat_seed_derive(seed, "repeat") : seed;
    PEAT_TRY(m ? peat_inject_run(m, g, &c->a, seed) : peat_kernel_run(g, &c->a));
    PEAT_TRY(m ? peat_inject_run(m, g, &c->a2, s2) : peat_kernel_run(g, &c->a2));
    peat_analyzer_acc_t *acc =
        peat_analyzer_acc_new(m ? peat_inject_model_spec(m) : g->name, PEAT_OP_GEMM);
    if (!acc) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer");
    peat_status st = peat_analyzer_acc_add(acc, c->D, c->E, c->mag, c->K, c->M, c->N);
    peat_analyzer_acc_add_repeat(acc, c->D, c->D2);
    if (st == PEAT_OK) st = peat_analyzer_signature(acc, out);
    peat_analyzer_acc_free(acc);
    return st;
}

peat_status peat_run_calibrate(uint64_t seed, int trials, int counts[][PEAT_FIND_COUNT], FILE *log)
{
    PEAT_TRY(peat_runtime_builtin_init());
    if (trials < 1 || trials > 10000)
        return PEAT_ERROR(PEAT_ERR_INVAL, "trials must be in 1..10000");
    memset(counts, 0, sizeof(int) * PEAT_FIND_COUNT * (size_t)N_CASES);
    for (int e = 0; e < N_CASES; e++) {
        peat_inject_model_t *m = NULL;
        PEAT_TRY(peat_inject_model_parse(CASES[e].spec, &m));
        peat_rng_t *r = peat_rng_new(peat_seed_derive(seed, CASES[e].model));
        peat_status st = r ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "rng");
        for (int t = 0; st == PEAT_OK && t < trials; t++) {
            cal_call c;
            peat_signature gs, cs;
            uint64_t s = peat_seed_derive(seed, CASES[e].spec) + (uint64_t)t;
            st = call_new(&c, r, CASES[e].data);
            if (st == PEAT_OK) st = signature_of(&c, NULL, s, &gs);
            if (st == PEAT_OK) st = signature_of(&c, m, s, &cs);
            if (st == PEAT_OK) {
                peat_finding f[8];
                int n = peat_detector_run(&cs, &gs, NULL, f, 8);
                counts[e][n > 0 ? f[0].cls : PEAT_FIND_UNKNOWN]++;
                if (log && (n < 1 || f[0].cls != CASES[e].expect))
                    fprintf(log, "  miss: %s on %lldx%lldx%lld -> %s %s\n", CASES[e].spec,
                            (long long)c.M, (long long)c.N, (long long)c.K,
                            peat_detector_finding_name(f[0].cls), f[0].params);
            }
            call_free(&c);
        }
        peat_rng_free(r);
        peat_inject_model_free(m);
        PEAT_TRY(st);
    }
    return PEAT_OK;
}

/* The columns are the signature's classes: the runner's own (DUE, ...) never come from it. */
void peat_run_calibrate_print(FILE *f, int counts[][PEAT_FIND_COUNT], int trials)
{
    int diag = 0, total = 0;
    fprintf(f, "%-17s", "injected \\ found");
    for (int k = 0; k < PEAT_FIND_SIGNATURE_COUNT; k++)
        fprintf(f, " %5.5s", peat_detector_finding_name((peat_finding_class)k));
    fprintf(f, "  %s\n", "correct");
    for (int e = 0; e < N_CASES; e++) {
        fprintf(f, "%-17s", CASES[e].model);
        for (int k = 0; k < PEAT_FIND_SIGNATURE_COUNT; k++) {
            if (counts[e][k])
                fprintf(f, " %5d", counts[e][k]);
            else
                fprintf(f, " %5s", ".");
        }
        int ok = counts[e][CASES[e].expect];
        fprintf(f, "  %3d/%d\n", ok, trials);
        diag += ok;
        total += trials;
    }
    fprintf(f, "\naccuracy: %d of %d (%.1f%%) primary findings name the injected model\n", diag,
            total, 100.0 * diag / (total ? total : 1));
}
