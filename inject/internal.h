/* internal.h: the inject module's model table, parsed models and helpers (not public). */
#ifndef PEAT_INJECT_INTERNAL_H
#define PEAT_INJECT_INTERNAL_H

#include "inject/inject.h"

typedef enum peat_inject_id {
    PEAT_INJ_REORDER = 0,
    PEAT_INJ_PRECISION,
    PEAT_INJ_TRUNCATE,
    PEAT_INJ_FTZ,
    PEAT_INJ_RANGE,
    PEAT_INJ_BITFLIP,
    PEAT_INJ_STUCK,
    PEAT_INJ_TILE,
    PEAT_INJ_BOUNDARY,
    PEAT_INJ_NAN,
    PEAT_INJ_NOISE,
    PEAT_INJ_APPROX,
    PEAT_INJ_NONDETERMINISTIC,
    PEAT_INJ_COUNT
} peat_inject_id;

#define PEAT_INJ_MAX_PARAMS 6

/* One parameter: integer ('i'), real ('d') or one of the '|'-separated choices ('e', stored as
 * the choice's index). */
typedef struct peat_inject_param {
    const char *key;
    char type;
    double def, lo, hi;
    const char *choices;
    const char *help;
} peat_inject_param;

typedef struct peat_inject_def {
    peat_inject_id id;
    const char *name;
    const char *desc;
    int n_params;
    peat_inject_param params[PEAT_INJ_MAX_PARAMS];
} peat_inject_def;

struct peat_inject_model {
    const peat_inject_def *def;
    double v[PEAT_INJ_MAX_PARAMS];
    char spec[256];
};

/* Value of parameter key (the table guarantees it exists). */
double peat_inject_param_get(const peat_inject_model_t *m, const char *key);

/* A copy of m with parameter key set to v (range-checked) and its spec rebuilt. */
peat_status peat_inject_model_clone_with(const peat_inject_model_t *m, const char *key, double v,
                                         peat_inject_model_t **out);
/* The model's corruption applied to one tensor t (F32) as if it were output 0 of an op-kind op
 * call: what the input site of a fault-injection trial does to a copy of an input. Models that
 * change the computation instead (reorder, precision, truncate, approx tanh, ...) are refused. */
peat_status peat_inject_corrupt_tensor(const peat_inject_model_t *m, peat_op_kind op,
                                       peat_tensor *t, uint64_t seed);
/* The model's action on a->out alone, with the random stream peat_inject_run draws from: on
 * outputs equal to the kernel's, the same bits as peat_inject_run (output-only models). */
peat_status peat_inject_outputs(const peat_inject_model_t *m, const peat_args *a, uint64_t seed);
/* 1 when the model only acts on the outputs of an unchanged computation (bitflip, stuck, tile,
 * boundary, nan, noise, range, ftz/precision where=output, approx fn=smooth; nondeterministic
 * off GEMM): a trial may start from the recorded golden outputs instead of rerunning the kernel. */
int peat_inject_model_output_only(const peat_inject_model_t *m, peat_op_kind op);

/* Number formats the models round to: p significand bits, fp32's exponent range unless said. */
typedef enum peat_inject_fmt {
    PEAT_FMT_BF16 = 0,
    PEAT_FMT_FP16,
    PEAT_FMT_TF32,
    PEAT_FMT_FP8, /* e4m3: 4 bits, normals from 2^-6, saturating at 448 */
    PEAT_FMT_BITS /* p bits given by a parameter, fp32 range */
} peat_inject_fmt;
float peat_inject_round(float x, peat_inject_fmt f, int bits);
/* x rounded to p significand bits, to nearest even (RN) or toward zero (RTZ), in fp32's range. */
float peat_inject_round_bits(double x, int p);
float peat_inject_round_bits_rtz(double x, int p);

/* GEMM with a chosen summation order and an optional rounding of the running sum: the honest
 * alternative orders (reorder, nondeterministic) and reduced-precision accumulation. */
typedef enum peat_inject_order {
    PEAT_ORDER_FORWARD = 0,
    PEAT_ORDER_REVERSE,
    PEAT_ORDER_PAIRWISE,
    PEAT_ORDER_SPLIT, /* split K into `split` chunks, partial sums added in chunk order */
    /* the golden GEMM's own library (OpenBLAS; the plain loop when it is off) on parts of K:
     * serial split-K, chunk by chunk into the output (beta = 1 after the first) */
    PEAT_ORDER_BLAS_SPLIT,
    /* blocked pairwise: K halved down to leaves of `block`..2 `block` - 1 terms, each leaf one
     * library GEMM into a temporary, halves added pairwise, then the golden's epilogue */
    PEAT_ORDER_BLAS_PAIRWISE,
    PEAT_ORDER_SPLIT_RANDOM /* split, partials added in a random order per element (atomics) */
} peat_inject_order;
typedef struct peat_inject_gemm_variant {
    peat_inject_order order;
    int split;
    int block;     /* PEAT_ORDER_BLAS_PAIRWISE: least terms a leaf */
    int round_acc; /* 1: round the running sum to fmt/bits after every addition */
    peat_inject_fmt fmt;
    int bits;
    peat_rng_t *rng; /* for PEAT_ORDER_SPLIT_RANDOM */
} peat_inject_gemm_variant;
peat_status peat_inject_gemm(const peat_args *a, const peat_inject_gemm_variant *v);
/* The same for the plain fp32 orders (round_acc 0; forward, reverse, pairwise, split in chunk
 * order), four rows at a time (gemm_rows.c): peat_inject_gemm hands them over. */
peat_status peat_inject_gemm_rows(const peat_args *a, const peat_inject_gemm_variant *v);
/* The library orders (PEAT_ORDER_BLAS_SPLIT, PEAT_ORDER_BLAS_PAIRWISE; gemm_lib.c):
 * peat_inject_gemm hands them over. */
peat_status peat_inject_gemm_lib(const peat_args *a, const peat_inject_gemm_variant *v);

#endif
