/* probe.h: probe inputs beyond the training data (shapes, values) and the crafted GEMM call whose
 * output reveals a kernel's arithmetic properties (input and accumulation precision, rounding,
 * subnormals, accumulation block). The harness runs them; the detector reads what they show. */
#ifndef PEAT_ANALYZER_PROBE_H
#define PEAT_ANALYZER_PROBE_H

#include "core/opdesc.h"
#include "core/record.h"
#include "peat/peat.h"

/* peat_probe_kind and peat_probe_tag: core/opdesc.h (an op's descriptor makes its probes) */

typedef struct peat_probe {
    char label[96]; /* "shape 33x65x17 tA", "value subnormal products" */
    peat_probe_kind kind;
    peat_probe_tag tag;
    peat_args args; /* inputs owned by the probe set; outputs empty */
} peat_probe;

typedef struct peat_probe_set {
    peat_probe *p;
    int n, cap;
} peat_probe_set;

/* Probes for the op of the recorded calls: GEMM gets generated shapes (dims 1..129 around
 * powers of two, K beyond the largest recorded, batch 3, every transpose, alpha/beta) and value
 * probes; softmax, layernorm, attention and conv get value probes built from a recorded call
 * (large logits, large mean over small spread, large scores, subnormal and large inputs).
 * Inputs are drawn with the recorded calls' input scale. */
peat_status peat_analyzer_probe_set_make(const peat_record_list *recs, uint64_t seed,
                                         peat_probe_set *out);
void peat_analyzer_probe_set_free(peat_probe_set *s);
const char *peat_analyzer_probe_kind_name(peat_probe_kind k);

/* Trailing rows / columns of one output's plane view (rows x cols; a tensor of several planes,
 * heads or images x channels, folds onto one) in which >= 90% of the elements are gross errors,
 * and whether every gross error lies in them (an edge region: an unwritten last tile); and
 * whether whole planes are wrong while the others are right (a batch entry never computed). */
typedef struct peat_edge_region {
    int64_t rows, cols; /* the plane */
    int64_t edge_rows, edge_cols;
    int64_t n_gross;
    int confined; /* all gross errors inside the trailing rows/columns, and they are not all */
    /* the tensor's planes (batch entries, images x channels, heads): whole planes wrong (>= 90%
     * gross errors each, planes of >= PEAT_PLANE_MIN elements) and every other plane within the
     * bound, at least one of them: the op's leading axis partitioned, not a formula's error */
    int64_t planes, wrong_planes, first_wrong_plane;
    int plane_confined;
} peat_edge_region;
#define PEAT_PLANE_MIN 16
peat_status peat_analyzer_edge_region(const peat_tensor *test, const peat_tensor *exact,
                                      const double *mag, int64_t depth, int64_t rows, int64_t cols,
                                      peat_edge_region *out);

/* ---- arithmetic properties of a GEMM (one crafted call, read from its output) ---- */

typedef struct peat_gemm_props {
    int input_bits;    /* significand bits the kernel keeps of its inputs (24 fp32, 11, 8) */
    int input_range16; /* 1: inputs overflow at 2^17 (fp16's range) */
    int acc_bits;      /* significand bits of the accumulator (24, 11, 8, ...) */
    int extra_bits;    /* accumulator bits beyond acc_bits that small terms survive in (0..9) */
    char rounding[8];  /* "RN", "RZ", "RU", "RD", "RNA" (ties away) or "?" */
    int subnormal_in;  /* fp32 subnormal inputs kept */
    int subnormal_out; /* subnormal products and sums kept */
    int subnormal16;   /* 2^-20 (fp16 subnormal, fp32 normal) kept */
    int nan_prop;      /* a NaN input gives NaN, an Inf input a non-finite output */
    int consistent;    /* the same tests read from two columns agreed */
    int block;         /* small terms survive from this many terms on: accumulation block
                          (0 = sequential: every small term absorbed) */
} peat_gemm_props;

/* The crafted call: A [rows x K] each row one test, B [K x 32] with column 0 all ones and
 * column 1 all 2^-70; the rest ones. */
peat_status peat_analyzer_gemm_props_call(peat_args *a);
/* Reads the properties from the output D of that call. */
void peat_analyzer_gemm_props_read(const peat_tensor *D, peat_gemm_props *p);
/* One line per property, "name|value" into buf (for the report's table). */
int peat_analyzer_gemm_props_row(const peat_gemm_props *p, int i, const char **name, char *val,
                                 size_t n);

#endif
