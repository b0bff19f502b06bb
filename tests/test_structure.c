/* test_structure.c: structure along the op's axes and per call, on constructed error fields with
 * known answers: planes folded in the gross-error box and the edge region (an unwritten last
 * tile repeated in every head is one edge), and the per-call repeat and gross counts the
 * transient rule reads. */
#include <criterion/criterion.h>

#include "analyzer/analyzer.h"
#include "analyzer/probe.h"
#include "peat/peat.h"

#include <math.h>

enum { PLANES = 3, T = 7, D = 16, N = PLANES * T * D, LAST = 3 };

/* exact values 1 + (i % 13) / 13 (away from 0), test equal to exact rounded to fp32 except the
 * last LAST rows of every T x D plane, left 0 (unwritten) */
static void field(peat_tensor **test, peat_tensor **exact)
{
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, N, test), PEAT_OK);
    cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, N, exact), PEAT_OK);
    for (int i = 0; i < N; i++) {
        double x = 1.0 + (double)(i % 13) / 13.0;
        peat_f64(*exact)[i] = x;
        peat_f32(*test)[i] = i / D % T >= T - LAST ? 0.0f : (float)x;
    }
}

static peat_signature sig_of(const peat_tensor *t, const peat_tensor *e, int64_t rows, int64_t cols)
{
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("t", PEAT_OP_ATTENTION);
    cr_assert_not_null(acc);
    cr_assert_eq(peat_analyzer_acc_add(acc, t, e, NULL, 4, rows, cols), PEAT_OK, "%s",
                 peat_error_last());
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    peat_analyzer_acc_free(acc);
    return s;
}

/* In the T x D plane the unwritten rows are one full box at the bottom (fill 1, share 3/7); in
 * the flat [3T, D] view the box spans from the first plane's rows to the last (fill 9/17). */
Test(structure, planes_fold_into_one_box)
{
    peat_tensor *t, *e;
    field(&t, &e);
    peat_signature p = sig_of(t, e, T, D);
    cr_assert_eq(p.n_gross, PLANES * LAST * D);
    cr_assert_eq(p.box_rows, LAST, "box rows %lld", (long long)p.box_rows);
    cr_assert_eq(p.box_cols, D);
    cr_assert_float_eq(p.box_fill, 1.0, 1e-12, "fill %g", p.box_fill);
    cr_assert_float_eq(p.box_share, (double)LAST / T, 1e-12, "share %g", p.box_share);
    cr_assert(p.box_at_bottom, "the box touches the plane's last row");
    peat_signature f = sig_of(t, e, PLANES * T, D);
    cr_assert_eq(f.box_rows, 2 * T + LAST, "flat box rows %lld", (long long)f.box_rows);
    cr_assert_float_eq(f.box_fill, (double)(PLANES * LAST) / (2 * T + LAST), 1e-12, "fill %g",
                       f.box_fill);
    peat_tensor_free(t);
    peat_tensor_free(e);
}

/* The edge region of the plane: the last 3 rows, every gross error inside them (confined); in the
 * flat view the same 3 trailing rows leave the other planes' rows outside (not confined). */
Test(structure, edge_region_follows_the_plane)
{
    peat_tensor *t, *e;
    field(&t, &e);
    peat_edge_region r;
    cr_assert_eq(peat_analyzer_edge_region(t, e, NULL, 4, T, D, &r), PEAT_OK);
    cr_assert_eq(r.edge_rows, LAST, "edge rows %lld", (long long)r.edge_rows);
    cr_assert_eq(r.edge_cols, 0);
    cr_assert(r.confined, "every gross error in the plane's last rows");
    cr_assert_eq(peat_analyzer_edge_region(t, e, NULL, 4, PLANES * T, D, &r), PEAT_OK);
    cr_assert_eq(r.edge_rows, LAST);
    cr_assert(!r.confined, "flat view: the other planes' rows lie outside");
    peat_tensor_free(t);
    peat_tensor_free(e);
}

/* Whole planes: the T x D planes 1 and 2 left 0 (a batch loop that stops after entry 0), plane 0
 * exact: a partition (2 of 3 wrong, from plane 1), though no edge of the folded plane is. One
 * element of plane 0 off by 2 bounds, or plane 1 only half wrong: no partition. Planes of fewer
 * than PEAT_PLANE_MIN elements: none either (a wrong element is no plane). */
static void planes_field(peat_tensor **test, peat_tensor **exact, int half)
{
    field(test, exact);
    for (int i = 0; i < N; i++) {
        int plane = i / (T * D);
        double x = peat_f64(*exact)[i];
        int wrong = plane > 0 && !(half && plane == 1 && i % 2);
        peat_f32(*test)[i] = wrong ? 0.0f : (float)x;
    }
}

Test(structure, whole_planes_wrong_are_a_partition)
{
    peat_tensor *t, *e;
    peat_edge_region r;
    planes_field(&t, &e, 0);
    cr_assert_eq(peat_analyzer_edge_region(t, e, NULL, 4, T, D, &r), PEAT_OK);
    cr_assert(!r.confined, "2 of 3 planes wrong fill every folded row: no edge");
    cr_assert_eq(r.planes, PLANES);
    cr_assert(r.plane_confined, "planes 1-2 wrong, plane 0 exact: a partition");
    cr_assert_eq(r.wrong_planes, 2, "wrong planes %lld", (long long)r.wrong_planes);
    cr_assert_eq(r.first_wrong_plane, 1, "first wrong plane %lld", (long long)r.first_wrong_plane);
    /* plane 0 no longer within the bound: 2 bounds (peat_analyzer_bound, depth 4) off */
    double x = peat_f64(e)[5];
    peat_f32(t)[5] = (float)(x + 2.0 * peat_analyzer_bound(fabs(x), 4));
    cr_assert_eq(peat_analyzer_edge_region(t, e, NULL, 4, T, D, &r), PEAT_OK);
    cr_assert(!r.plane_confined, "an error over the bound in the clean plane: no partition");
    peat_tensor_free(t), peat_tensor_free(e);
    planes_field(&t, &e, 1);
    cr_assert_eq(peat_analyzer_edge_region(t, e, NULL, 4, T, D, &r), PEAT_OK);
    cr_assert(!r.plane_confined, "plane 1 half wrong: the error does not follow the planes");
    /* as 1 x 1 planes of one element each, the same field is no partition */
    cr_assert_eq(peat_analyzer_edge_region(t, e, NULL, 4, 1, 1, &r), PEAT_OK);
    cr_assert(!r.plane_confined, "planes of 1 element");
    peat_tensor_free(t), peat_tensor_free(e);
}

/* Per call: three calls of 16 elements run twice, differing in 0, 1 and 10 elements (a few is at
 * most 2 here, two runs 4); per output tensor, gross errors 0, 1 and 5. */
Test(structure, per_call_repeat_and_gross_counts)
{
    peat_analyzer_acc_t *acc = peat_analyzer_acc_new("t", PEAT_OP_BIAS_ADD_BWD);
    int diffs[3] = {0, 1, 10}, gross[3] = {0, 1, 5};
    for (int c = 0; c < 3; c++) {
        peat_tensor *a, *b, *e;
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, 16, &a), PEAT_OK);
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F32, 16, &b), PEAT_OK);
        cr_assert_eq(peat_tensor_alloc1(PEAT_DTYPE_F64, 16, &e), PEAT_OK);
        for (int i = 0; i < 16; i++) {
            peat_f64(e)[i] = 1.0 + i;
            peat_f32(a)[i] = (float)(1.0 + i) * (i < gross[c] ? 4.0f : 1.0f);
            peat_f32(b)[i] = peat_f32(a)[i] + (i < diffs[c] ? 1.0f : 0.0f);
        }
        cr_assert_eq(peat_analyzer_acc_add(acc, a, e, NULL, 4, 1, 16), PEAT_OK);
        peat_analyzer_acc_add_repeat(acc, a, b);
        peat_tensor_free(a), peat_tensor_free(b), peat_tensor_free(e);
    }
    peat_signature s;
    cr_assert_eq(peat_analyzer_signature(acc, &s), PEAT_OK);
    cr_assert_eq(s.repeat_calls, 3);
    cr_assert_eq(s.repeat_calls_diff, 2, "calls that differed: %lld",
                 (long long)s.repeat_calls_diff);
    cr_assert_eq(s.repeat_calls_many, 1, "calls with many differences: %lld",
                 (long long)s.repeat_calls_many);
    cr_assert_eq(s.gross_tensors, 2, "tensors with gross errors: %lld", (long long)s.gross_tensors);
    cr_assert_eq(s.gross_tensors_many, 1, "tensors with more than a few: %lld",
                 (long long)s.gross_tensors_many);
    cr_assert_eq(peat_few_per_call(16), 2);
    cr_assert_eq(peat_few_per_call(1000), 10);
    peat_analyzer_acc_free(acc);
}
