/* gemm_props.c: a GEMM's arithmetic properties from one crafted call, in the manner of the
 * tensor-core numerics studies (Fasi, Higham, Mikaitis, Pranesh 2021): each row of A is one test
 * whose exact answer is representable in fp32, so the output shows what the arithmetic kept. */
#include "analyzer/probe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define P_ROWS 96
#define P_K    520
#define P_N    32
#define BIG    4096.0 /* 2^12: every test term stays inside fp16's and bf16's normal range */

/* row layout */
enum {
    R_IN = 0,                  /* 23 rows: BIG (1 + 2^-k), k = 1..23 */
    R_ACC = R_IN + 23,         /* 23 rows: BIG + BIG 2^-k */
    R_EXTRA = R_ACC + 23,      /* 9 rows: BIG + 2^(e+1) terms BIG 2^-(24+e) */
    R_ROUND = R_EXTRA + 9,     /* 3 x 5 rows: rounding tests at 24, 11, 8 bits */
    R_SUB_IN = R_ROUND + 15,   /* 2^-130 (fp32 subnormal input) */
    R_SUB_PROD = R_SUB_IN + 1, /* 2^-70 x 2^-70 (column 1): subnormal product */
    R_SUB16 = R_SUB_PROD + 1,  /* 2^-20: fp16 subnormal, fp32 normal */
    R_RANGE16 = R_SUB16 + 1,   /* 2^17: beyond fp16 */
    R_NAN = R_RANGE16 + 1,     /* NaN, then Inf */
    R_BLOCK = R_NAN + 2,       /* 9 rows: BIG + n terms of half an fp32 ulp of BIG */
    R_END = R_BLOCK + 9
};

static const int BLOCK_N[9] = {3, 5, 9, 17, 33, 65, 129, 257, 513};
static const int ROUND_BITS[3] = {24, 11, 8};
/* rounding tests: sign, fraction of an ulp added */
static const double ROUND_T[5][2] = {{1, 0.25}, {1, 0.75}, {-1, 0.25}, {-1, 0.75}, {1, 0.5}};

peat_status peat_analyzer_gemm_props_call(peat_args *a)
{
    _Static_assert(R_END <= P_ROWS, "property rows fit");
    peat_tensor *A = NULL, *B = NULL;
    PEAT_TRY(peat_tensor_alloc3(PEAT_DTYPE_F32, 1, P_ROWS, P_K, &A));
    peat_status st = peat_tensor_alloc3(PEAT_DTYPE_F32, 1, P_K, P_N, &B);
    if (st != PEAT_OK) {
        peat_tensor_free(A);
        return st;
    }
    float *x = A->data, *b = B->data;
    memset(x, 0, (size_t)P_ROWS * P_K * sizeof *x);
    for (int k = 0; k < P_K; k++)
        for (int j = 0; j < P_N; j++) b[k * P_N + j] = j == 1 ? 0x1p-70f : 1.0f;
    for (int k = 1; k <= 23; k++) {
        x[(R_IN + k - 1) * P_K] = (float)(BIG * (1.0 + ldexp(1.0, -k)));
        x[(R_ACC + k - 1) * P_K] = (float)BIG, x[(R_ACC + k - 1) * P_K + 1] = (float)ldexp(BIG, -k);
    }
    for (int e = 0; e < 9; e++) {
        float *r = x + (R_EXTRA + e) * P_K;
        r[0] = (float)BIG;
        for (int t = 1; t <= (2 << e); t++) r[t] = (float)ldexp(BIG, -24 - e);
    }
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 5; t++) {
            float *r = x + (R_ROUND + 5 * s + t) * P_K;
            double u = ldexp(BIG, 1 - ROUND_BITS[s]);
            r[0] = (float)(ROUND_T[t][0] * BIG), r[1] = (float)(ROUND_T[t][0] * ROUND_T[t][1] * u);
        }
    x[R_SUB_IN * P_K] = 0x1p-130f, x[R_SUB_PROD * P_K] = 0x1p-70f;
    x[R_SUB16 * P_K] = 0x1p-20f, x[R_RANGE16 * P_K] = 0x1p17f;
    x[R_NAN * P_K] = NAN, x[(R_NAN + 1) * P_K] = INFINITY;
    for (int i = 0; i < 9; i++) {
        float *r = x + (R_BLOCK + i) * P_K;
        r[0] = (float)BIG;
        for (int t = 1; t <= BLOCK_N[i]; t++) r[t] = (float)ldexp(BIG, -24);
    }
    memset(a, 0, sizeof *a);
    a->op = PEAT_OP_GEMM;
    a->p.i[2] = P_ROWS, a->p.i[3] = P_N, a->p.i[4] = P_K, a->p.i[5] = 1, a->p.f[0] = 1.0;
    a->in[0] = A, a->in[1] = B, a->n_in = 2;
    return PEAT_OK;
}

static int col_off; /* 0, or 2: the same tests read from another all-ones column of B */
static double at(const peat_tensor *D, int row, int col)
{
    return (double)((const float *)D->data)[row * P_N + (col == 0 ? col_off : col)];
}

/* 1 + the largest k such that rows base+0 .. base+k-1 all kept their exact answer. */
static int bits_kept(const peat_tensor *D, int base, int acc)
{
    int k = 1;
    for (; k <= 23; k++) {
        double want = acc ? BIG + ldexp(BIG, -k) : BIG * (1.0 + ldexp(1.0, -k));
        if (at(D, base + k - 1, 0) != want) break;
    }
    return k; /* k - 1 rows kept: k significand bits */
}

static void read_rounding(const peat_tensor *D, int acc_bits, char *out)
{
    int s = acc_bits == 24 ? 0 : acc_bits == 11 ? 1 : acc_bits == 8 ? 2 : -1;
    snprintf(out, 8, "?");
    if (s < 0) return;
    double u = ldexp(BIG, 1 - acc_bits);
    int up[5]; /* the magnitude went up to the next ulp */
    for (int t = 0; t < 5; t++) {
        double v = fabs(at(D, R_ROUND + 5 * s + t, 0));
        if (v != BIG && v != BIG + u) return;
        up[t] = v == BIG + u;
    }
    if (!up[0] && up[1] && !up[2] && up[3])
        snprintf(out, 8, up[4] ? "RNA" : "RN");
    else if (!up[0] && !up[1] && !up[2] && !up[3])
        snprintf(out, 8, "RZ");
    else if (up[0] && up[1] && !up[2] && !up[3])
        snprintf(out, 8, "RU");
    else if (!up[0] && !up[1] && up[2] && up[3])
        snprintf(out, 8, "RD");
}

static void props_read_col(const peat_tensor *D, peat_gemm_props *p)
{
    memset(p, 0, sizeof *p);
    p->input_bits = bits_kept(D, R_IN, 0);
    p->acc_bits = bits_kept(D, R_ACC, 1);
    read_rounding(D, p->acc_bits, p->rounding);
    p->subnormal_in = at(D, R_SUB_IN, 0) == 0x1p-130;
    p->subnormal_out = at(D, R_SUB_PROD, 1) == 0x1p-140;
    p->subnormal16 = at(D, R_SUB16, 0) == 0x1p-20;
    p->input_range16 = isinf(at(D, R_RANGE16, 0));
    /* a non-finite input must give a non-finite output (a compensated sum turns Inf into
     * NaN through Inf - Inf, which still reports the fault) */
    p->nan_prop = isnan(at(D, R_NAN, 0)) && !isfinite(at(D, R_NAN + 1, 0));
    for (int i = 0; i < 9 && !p->block; i++)
        if (at(D, R_BLOCK + i, 0) > BIG) p->block = BLOCK_N[i] - 1;
    /* extra bits: small terms that survive while all of them sit in the first block */
    for (int e = 0; e < 9; e++) {
        if (p->block && (2 << e) + 1 > p->block) break;
        if (at(D, R_EXTRA + e, 0) == BIG + ldexp(BIG, -23)) p->extra_bits = e + 1;
    }
}

void peat_analyzer_gemm_props_read(const peat_tensor *D, peat_gemm_props *p)
{
    /* every test is read from two columns; a kernel that corrupts one of them (or any element
     * the tests use) shows two answers, and then it has no properties to report */
    peat_gemm_props q;
    col_off = 0;
    props_read_col(D, p);
    col_off = 2;
    props_read_col(D, &q);
    col_off = 0;
    p->consistent = !memcmp(p, &q, sizeof q);
}

int peat_analyzer_gemm_props_row(const peat_gemm_props *p, int i, const char **name, char *val,
                                 size_t n)
{
    switch (i) {
    case 0:
        *name = "input precision (significand bits)";
        snprintf(val, n, "%d%s", p->input_bits, p->input_range16 ? " (fp16 range)" : "");
        return 1;
    case 1:
        *name = "accumulation precision (bits)";
        snprintf(val, n, "%d", p->acc_bits);
        return 1;
    case 2:
        *name = "extra accumulator bits";
        snprintf(val, n, "%d%s", p->extra_bits, p->extra_bits >= 9 ? "+" : "");
        return 1;
    case 3:
        *name = "rounding mode";
        snprintf(val, n, "%s", p->rounding);
        return 1;
    case 4:
        *name = "subnormals (fp32 inputs / products / fp16-range inputs)";
        snprintf(val, n, "%s / %s / %s", p->subnormal_in ? "kept" : "flushed",
                 p->subnormal_out ? "kept" : "flushed", p->subnormal16 ? "kept" : "flushed");
        return 1;
    case 5:
        *name = "NaN/Inf propagation";
        snprintf(val, n, "%s", p->nan_prop ? "yes" : "no");
        return 1;
    case 6:
        *name = "accumulation block (terms)";
        if (p->block)
            snprintf(val, n, "<= %d", p->block);
        else
            snprintf(val, n, "sequential");
        return 1;
    default:
        return 0;
    }
}
