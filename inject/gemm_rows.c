/* gemm_rows.c: the reorder models' plain fp32 sums (forward, reverse, pairwise, split-K in chunk
 * order) on register tiles of 4 output rows x 16 columns: each element goes through exactly the
 * additions its order's per-element definition says (tests/test_inject.c checks it bit for bit),
 * while the tile's 64 running sums stay in vector registers from the first k to the last. The
 * runtime band's reruns train with these GEMMs. */
#include "inject/internal.h"

#include <stdlib.h>
#include <string.h>

#define RB        4  /* rows a tile */
#define JW        16 /* columns a tile: two vectors of eight */
#define MAX_DEPTH 64

typedef float vec8 __attribute__((vector_size(32)));
typedef struct tsum {
    vec8 v[RB][2];
} tsum;

#define ALWAYS inline __attribute__((always_inline))

/* An AVX2 clone where the CPU has it (chosen at load time), without FMA: every product and sum
 * rounds on its own as in the baseline clone (this file also builds with -ffp-contract=off), so
 * both clones give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define ROWS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ROWS_CLONES
#endif

/* One tile's operands: op(A)'s RB rows as K groups of RB (rows past M zero), op(B)'s JW columns as
 * K rows of JW (columns past N zero); the padding's sums are dropped. */
typedef struct tile {
    const float *a, *b;
    int64_t K;
} tile;

static ALWAYS vec8 ld(const float *p)
{
    vec8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static ALWAYS void t_zero(tsum *s)
{
    for (int r = 0; r < RB; r++) s->v[r][0] = s->v[r][1] = (vec8){0};
}

static ALWAYS void t_add(tsum *s, const tsum *t)
{
    for (int r = 0; r < RB; r++) {
        s->v[r][0] = s->v[r][0] + t->v[r][0];
        s->v[r][1] = s->v[r][1] + t->v[r][1];
    }
}

/* s = ((0 + term lo) + term lo+1) + ... over [lo, hi), or from hi-1 down when rev; term k is
 * a[k][r] b[k][:] for each row r: one product and one sum per element. The 8 running vectors are
 * locals, so they stay in registers for the whole range. */
static ALWAYS void t_range(const tile *T, int64_t lo, int64_t hi, int rev, tsum *s)
{
    vec8 s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0};
    for (int64_t t = lo; t < hi; t++) {
        int64_t k = rev ? hi - 1 - (t - lo) : t;
        const float *a = T->a + k * RB;
        vec8 b0 = ld(T->b + k * JW), b1 = ld(T->b + k * JW + 8);
        s00 = s00 + a[0] * b0, s01 = s01 + a[0] * b1;
        s10 = s10 + a[1] * b0, s11 = s11 + a[1] * b1;
        s20 = s20 + a[2] * b0, s21 = s21 + a[2] * b1;
        s30 = s30 + a[3] * b0, s31 = s31 + a[3] * b1;
    }
    s->v[0][0] = s00, s->v[0][1] = s01, s->v[1][0] = s10, s->v[1][1] = s11;
    s->v[2][0] = s20, s->v[2][1] = s21, s->v[3][0] = s30, s->v[3][1] = s31;
}

/* A pairwise node of 1-4 terms, in the tree's own order (gemm.c's pair_leaf):
 * 1: t0; 2: t0 + t1; 3: t0 + (t1 + t2); 4: (t0 + t1) + (t2 + t3), each t_i as 0 + a b. */
static ALWAYS void t_leaf(const tile *T, int64_t lo, int64_t n, tsum *s)
{
    tsum u;
    if (n == 3) {
        t_range(T, lo, lo + 1, 0, s);
        t_range(T, lo + 1, lo + 3, 0, &u);
        t_add(s, &u);
        return;
    }
    t_range(T, lo, lo + (n < 2 ? n : 2), 0, s);
    if (n < 4) return;
    t_range(T, lo + 2, lo + 4, 0, &u);
    t_add(s, &u);
}

/* The pairwise tree (halves at lo + (hi - lo) / 2, leaves of at most 4 terms) evaluated
 * depth-first without recursion: frames on one stack, finished halves on another, each node's
 * value = left + right. */
static ALWAYS void t_pairwise(const tile *T, tsum *vals, tsum *out)
{
    struct frame {
        int64_t lo, hi;
        int stage;
    } fs[MAX_DEPTH];
    int sp = 0, vp = 0;
    fs[0] = (struct frame){0, T->K, 0};
    while (sp >= 0) {
        struct frame *f = &fs[sp];
        int64_t mid = f->lo + (f->hi - f->lo) / 2;
        if (f->hi - f->lo <= 4) {
            t_leaf(T, f->lo, f->hi - f->lo, &vals[vp++]);
            sp--;
        } else if (f->stage < 2) {
            fs[sp + 1] = f->stage++ ? (struct frame){mid, f->hi, 0} : (struct frame){f->lo, mid, 0};
            sp++;
        } else {
            t_add(&vals[vp - 2], &vals[vp - 1]);
            vp--;
            sp--;
        }
    }
    *out = vals[0];
}

/* Split-K in chunk order: S chunks summed forward, then s = ((0 + p_0) + p_1) + ... */
static ALWAYS void t_split(const tile *T, int S, tsum *out)
{
    int64_t K = T->K;
    S = S < K ? S : (int)K;
    t_zero(out);
    for (int c = 0; c < S; c++) {
        tsum p;
        t_range(T, K * c / S, K * (c + 1) / S, 0, &p);
        t_add(out, &p);
    }
}

static ALWAYS void t_sum(const tile *T, const peat_inject_gemm_variant *v, tsum *vals, tsum *out)
{
    switch (v->order) {
    case PEAT_ORDER_REVERSE:
        t_range(T, 0, T->K, 1, out);
        return;
    case PEAT_ORDER_PAIRWISE:
        t_pairwise(T, vals, out);
        return;
    case PEAT_ORDER_SPLIT:
        t_split(T, v->split > 1 ? v->split : 1, out);
        return;
    default:
        t_range(T, 0, T->K, 0, out);
    }
}

/* One batch entry's output: every RB x JW tile, B's panel outermost (it stays in cache while the
 * row tiles pass); the same epilogue as the golden GEMM, so only the order differs. */
typedef struct job {
    const float *ap, *bp, *C;
    float *D;
    int64_t M, N, K;
    float alpha, beta;
    tsum *vals;
} job;

ROWS_CLONES
static void tiles_run(const job *J, const peat_inject_gemm_variant *v)
{
    int64_t M = J->M, N = J->N, K = J->K;
    for (int64_t j0 = 0; j0 < N; j0 += JW)
        for (int64_t i0 = 0; i0 < M; i0 += RB) {
            tile T = {J->ap + i0 * K, J->bp + j0 * K, K};
            tsum s;
            t_sum(&T, v, J->vals, &s);
            float o[RB][JW];
            memcpy(o, &s, sizeof o);
            for (int64_t i = i0; i < M && i < i0 + RB; i++)
                for (int64_t j = j0; j < N && j < j0 + JW; j++) {
                    float x = o[i - i0][j - j0];
                    J->D[i * N + j] =
                        J->C ? J->alpha * x + J->beta * J->C[i * N + j] : J->alpha * x;
                }
        }
}

/* op(A) as row tiles: ap[i0 * K + k * RB + r] = op(A)[i0 + r][k] (zeros past M). The layouts'
 * loops are split by transposition and edge (no test inside the copies), so packing stays a small
 * share of a call; it moves values only. */
static void pack_a(const float *A, int tA, int64_t M, int64_t K, float *ap)
{
    for (int64_t i0 = 0; i0 < M; i0 += RB) {
        int64_t rows = M - i0 < RB ? M - i0 : RB;
        float *p = ap + i0 * K;
        if (rows < RB) memset(p, 0, (size_t)(K * RB) * sizeof *p);
        if (tA) /* op(A)[i][k] = A[k * M + i]: row k of A holds the tile's rows side by side */
            for (int64_t k = 0; k < K; k++)
                for (int64_t r = 0; r < rows; r++) p[k * RB + r] = A[k * M + i0 + r];
        else
            for (int64_t r = 0; r < rows; r++) {
                const float *a = A + (i0 + r) * K;
                for (int64_t k = 0; k < K; k++) p[k * RB + r] = a[k];
            }
    }
}

/* op(B) as column panels: bp[j0 * K + k * JW + q] = op(B)[k][j0 + q] (zeros past N). */
static void pack_b(const float *B, int tB, int64_t K, int64_t N, float *bp)
{
    for (int64_t j0 = 0; j0 < N; j0 += JW) {
        int64_t cols = N - j0 < JW ? N - j0 : JW;
        float *p = bp + j0 * K;
        if (cols < JW) memset(p, 0, (size_t)(K * JW) * sizeof *p);
        if (tB) /* op(B)[k][j] = B[j * K + k]: row j of B is column j of op(B) */
            for (int64_t q = 0; q < cols; q++) {
                const float *b = B + (j0 + q) * K;
                for (int64_t k = 0; k < K; k++) p[k * JW + q] = b[k];
            }
        else
            for (int64_t k = 0; k < K; k++)
                memcpy(p + k * JW, B + k * N + j0, (size_t)cols * sizeof *p);
    }
}

peat_status peat_inject_gemm_rows(const peat_args *a, const peat_inject_gemm_variant *v)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    int64_t Mp = (M + RB - 1) / RB * RB, Np = (N + JW - 1) / JW * JW;
    float *ap = malloc(((size_t)(Mp * K) + (size_t)(Np * K) + 1) * sizeof *ap);
    tsum *vals = aligned_alloc(sizeof(vec8), MAX_DEPTH * sizeof *vals); /* vectors' alignment */
    if (!ap || !vals) {
        free(ap), free(vals);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "inject gemm: K=%lld N=%lld", (long long)K, (long long)N);
    }
    job J = {ap, ap + Mp * K, NULL, NULL, M, N, K, (float)a->p.f[0], (float)a->p.f[1], vals};
    for (int64_t b = 0; b < B; b++) {
        pack_a(peat_f32(a->in[0]) + b * M * K, tA, M, K, ap);
        pack_b(peat_f32(a->in[1]) + b * K * N, tB, K, N, ap + Mp * K);
        J.C = J.beta != 0.0f ? peat_f32(a->in[2]) + b * M * N : NULL;
        J.D = peat_f32(a->out[0]) + b * M * N;
        tiles_run(&J, v);
    }
    free(ap);
    free(vals);
    return PEAT_OK;
}
