/* rope.c: rotary position embedding (RoPE) and its backward, layout [B,H,T,D], interleaved or
 * half-split pairs (include/peat/plugin.h); the references are golden/rope.c. */
#include "core/opdesc.h"

#include <math.h>
#include <stdio.h>

#define P(k) (a->p.i[k])

static peat_status rope_check(const peat_args *a)
{
    PEAT_TRY(peat_op_positive(a, 4));
    if (P(3) % 2)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: head dim D=%lld is odd (pairs are rotated)",
                          peat_op_name(a->op), (long long)P(3));
    if (P(4) < 0 || P(4) > 1)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: layout must be 0 (interleaved) or 1 (half-split)",
                          peat_op_name(a->op));
    if (P(5) < 0 || P(5) > (1LL << 24))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: position offset %lld outside [0, 2^24]",
                          peat_op_name(a->op), (long long)P(5));
    if (!(a->p.f[0] > 1.0))
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: base must be > 1", peat_op_name(a->op));
    int64_t n = P(0) * P(1) * P(2) * P(3);
    if ((double)P(0) * P(1) * P(2) * P(3) > 4e9)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "%s: absurd shape", peat_op_name(a->op));
    int bwd = a->op == PEAT_OP_ROPE_BWD;
    PEAT_TRY(peat_op_expect(a, a->in[0], bwd ? "dY" : "X", PEAT_DTYPE_F32, n));
    return peat_op_expect(a, peat_op_out(a, 0), bwd ? "dX" : "Y", PEAT_DTYPE_F32, n);
}
static peat_status rope_shapes(const peat_args *a, int *nd, int64_t s[][PEAT_MAX_DIMS])
{
    peat_op_out_shape(nd, s, 0, 4, P(0), P(1), P(2), P(3));
    return PEAT_OK;
}
static double rope_flops(const peat_op_params *p)
{
    return 3.0 * (double)p->i[0] * p->i[1] * p->i[2] * p->i[3];
}

/* ---- rounding bound (docs/bounds.md, "RoPE") ----
 * The angle a = (pos0 + t) base^(-e), e = 2j/D: e's rounding, which the power amplifies by
 * ln(base) e, the power and the reciprocal (or the exp2 form exp2(-e log2 base): log2 base's
 * rounding and the product, amplified the same way), and the product by the position: a's
 * relative error / u, R_a = 3 ln(base) e + 5. cos and sin of a carry |a| R_a u through their
 * derivative and round once (2); each output is two products and an add. */
static peat_status rope_mag(const peat_args *a, int o, const peat_op_mag_in *in, int64_t n,
                            const peat_tensor *exact_out, double *mag)
{
    (void)o, (void)n, (void)exact_out;
    int64_t BH = P(0) * P(1), T = P(2), D = P(3), lay = P(4), pos0 = P(5);
    double base = a->p.f[0], lnb = log(base);
    const double *x = in->x[0];
    for (int64_t p = 0; p < BH; p++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < D / 2; j++) {
                int64_t row = (p * T + t) * D, i0 = lay ? j : 2 * j,
                        i1 = lay ? j + D / 2 : 2 * j + 1;
                double e = 2.0 * (double)j / (double)D, ang = (double)(pos0 + t) * exp(-e * lnb);
                double Ra = 3.0 * lnb * e + 5.0, c = fabs(cos(ang)), s = fabs(sin(ang));
                double x0 = fabs(x[row + i0]), x1 = fabs(x[row + i1]), aa = fabs(ang) * Ra;
                /* y0 = x0 c - x1 s, y1 = x0 s + x1 c (signs of s differ in the backward: the
                 * magnitudes do not) */
                double y0 = fabs(x[row + i0] * cos(ang) - x[row + i1] * sin(ang));
                double y1 = fabs(x[row + i0] * sin(ang) + x[row + i1] * cos(ang));
                double y0b = fabs(x[row + i0] * cos(ang) + x[row + i1] * sin(ang));
                double y1b = fabs(-x[row + i0] * sin(ang) + x[row + i1] * cos(ang));
                double ya = a->op == PEAT_OP_ROPE_BWD ? y0b : y0;
                double yb = a->op == PEAT_OP_ROPE_BWD ? y1b : y1;
                mag[row + i0] = x0 * (s * aa + 3.0 * c) + x1 * (c * aa + 3.0 * s) + ya;
                mag[row + i1] = x0 * (c * aa + 3.0 * s) + x1 * (s * aa + 3.0 * c) + yb;
            }
    return PEAT_OK;
}

/* ---- probes: a position offset (a decoding step's), the other pair layout, head dims 2, 6
 * and 130 (off every vector width), one row ---- */
static peat_status rope_probes(peat_probe_sink *s, const peat_record_list *recs, uint64_t seed)
{
    const peat_record *rec = recs->items[0];
    peat_rng_t *r = peat_rng_new(seed ^ 0x726f7065ull);
    if (!r) return PEAT_ERROR(PEAT_ERR_NOMEM, "probe rng");
    peat_status st = PEAT_OK;
    char label[96];
    struct {
        int64_t D, T, layout, pos0;
        const char *what;
    } pr[] = {{rec->p.i[3], rec->p.i[2], rec->p.i[4], 1000, "position offset 1000"},
              {rec->p.i[3], rec->p.i[2], !rec->p.i[4], rec->p.i[5], "the other pair layout"},
              {2, rec->p.i[2], rec->p.i[4], rec->p.i[5], "head dim 2"},
              {6, rec->p.i[2], rec->p.i[4], rec->p.i[5], "head dim 6"},
              {130, rec->p.i[2], rec->p.i[4], rec->p.i[5], "head dim 130"},
              {rec->p.i[3], 1, rec->p.i[4], 7, "one row at position 7"}};
    for (size_t i = 0; st == PEAT_OK && i < sizeof pr / sizeof pr[0]; i++) {
        if (pr[i].D == rec->p.i[3] && pr[i].T == rec->p.i[2] && pr[i].layout == rec->p.i[4] &&
            pr[i].pos0 == rec->p.i[5])
            continue;
        peat_op_params q = rec->p;
        q.i[3] = pr[i].D, q.i[2] = pr[i].T, q.i[4] = pr[i].layout, q.i[5] = pr[i].pos0;
        int64_t sz = q.i[0] * q.i[1] * q.i[2] * q.i[3];
        snprintf(label, sizeof label, "shape %s (layout %s)", pr[i].what,
                 pr[i].layout ? "half-split" : "interleaved");
        st = peat_op_probe_fresh(s, rec, r, &q, &sz, 1, label);
    }
    peat_rng_free(r);
    return st;
}

/* the batch x heads planes and the rotated pairs, whole and in order, in either layout (the
 * exact result follows: each pair turns by its own index's angle); positions do not commute
 * with the rotation */
static int rope_perm(const peat_args *a, peat_op_perm *out)
{
    int64_t Pn = P(0) * P(1), D = P(3);
    if (Pn < 2 && D < 4) return 0;
    out->len[0] = Pn, out->len[1] = D;
    out->pairs[1] = P(4) ? PEAT_PERM_PAIRS_HALVES : PEAT_PERM_PAIRS_ADJACENT;
    out->in_mask = 1u;
    out->in[0] = peat_op_view(Pn, P(2), D, 0, -1, 1);
    out->out = peat_op_view(Pn, P(2), D, 0, -1, 1);
    return 1;
}

static void rope_cal(int n, int off, peat_op_params *p)
{
    peat_op_params_set(p, 4, (int64_t[]){1 + n / 16, 2, 2 + n / 2 + off, 2 * (4 + n / 8)});
    p->i[4] = 1, p->i[5] = 0;
    p->f[0] = 10000.0;
}
static void rope_inputs(const peat_op_params *p, int *n_in, int nd[], int64_t s[][PEAT_MAX_DIMS],
                        peat_dtype dt[])
{
    int k = 0;
    peat_op_shape(nd, s, dt, &k, 4, p->i[0], p->i[1], p->i[2], p->i[3], PEAT_DTYPE_F32);
    *n_in = k;
}

/* ---- invariant: the rotation keeps each pair's length; the largest relative change of
 * |(y0, y1)|^2 against |(x0, x1)|^2 over the pairs not near zero ---- */
static double rope_invariant(const peat_args *a)
{
    int64_t rows = P(0) * P(1) * P(2), D = P(3), lay = P(4);
    const float *x = a->in[0]->data, *y = a->out[0]->data;
    if (a->out[0]->dtype != PEAT_DTYPE_F32) return NAN;
    double worst = 0.0, scale = 0.0;
    for (int64_t i = 0; i < rows * D; i++) scale = fmax(scale, fabs((double)x[i]));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < D / 2; j++) {
            int64_t i0 = r * D + (lay ? j : 2 * j), i1 = r * D + (lay ? j + D / 2 : 2 * j + 1);
            double rx = (double)x[i0] * x[i0] + (double)x[i1] * x[i1],
                   ry = (double)y[i0] * y[i0] + (double)y[i1] * y[i1];
            if (!(rx > 1e-6 * scale * scale)) continue; /* a pair near zero: its roundings rule */
            double d = fabs(ry / rx - 1.0);
            if (!(d <= worst)) worst = d; /* NaN wins */
        }
    return worst;
}

const peat_op_desc peat_opd_rope = {
    .info = {PEAT_OP_ROPE, "rope", 1, 1, 1, 0, rope_check, rope_shapes, peat_op_depth_one,
             rope_flops},
    .magnitude = rope_mag,
    .terms = peat_op_terms_one,
    .probes = rope_probes,
    .range_low = 1u << 0, /* X */
    .range_high = 1u << 0,
    .perm = rope_perm,
    .integers = peat_op_integers_none,
    .invariant = rope_invariant,
    .cal_params = rope_cal,
    .input_shapes = rope_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "",
};

const peat_op_desc peat_opd_rope_bwd = {
    .info = {PEAT_OP_ROPE_BWD, "rope_bwd", 1, 1, 1, 1, rope_check, rope_shapes, peat_op_depth_one,
             rope_flops},
    .magnitude = rope_mag,
    .terms = peat_op_terms_one,
    .probes = rope_probes,
    .range_low = 1u << 0, /* dY */
    .range_high = 1u << 0,
    .perm = rope_perm,
    .integers = peat_op_integers_none,
    .invariant = rope_invariant,
    .cal_params = rope_cal,
    .input_shapes = rope_inputs,
    .positive_inputs = 0,
    .gemm_view = peat_op_gemm_view_none,
    .amp_masks = peat_op_amp_none,
    .aten = "",
};
