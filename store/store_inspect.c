/* store_inspect.c: `peat inspect [--verify] FILE`: a readable table of what a campaign file holds,
 * checked against its manifest (and with --verify, every tensor against its hash). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "store/store_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void human(char *buf, size_t n, double bytes)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%.0f B", bytes);
    else
        snprintf(buf, n, "%.1f %s", bytes, unit[u]);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    int64_t calls, phase[3], it_lo, it_hi;
    double in, golden, exact, recomputed;
} op_sum;

static double tbytes(const peat_store_t *s, int64_t row)
{
    const store_tensor_row *r = STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, row);
    return (double)r->numel * (double)peat_dtype_size((peat_dtype)r->dtype);
}

static void print_calls(const peat_store_t *s, FILE *out)
{
    int64_t n = s->rows[STORE_T_CALL].n;
    op_sum sum[PEAT_OP_COUNT];
    memset(sum, 0, sizeof sum);
    int64_t *iters = malloc((size_t)(n + 1) * sizeof *iters);
    for (int64_t i = 0; i < n; i++) {
        const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, i);
        op_sum *o = &sum[c->op];
        if (o->calls == 0 || c->iter < o->it_lo) o->it_lo = c->iter;
        if (o->calls == 0 || c->iter > o->it_hi) o->it_hi = c->iter;
        o->calls++;
        o->phase[c->phase]++;
        for (int k = 0; k < c->n_in; k++) o->in += tbytes(s, c->t_in[k]);
        for (int k = 0; k < c->n_out; k++) {
            if (c->t_golden[k] >= 0) o->golden += tbytes(s, c->t_golden[k]);
            if (c->t_exact[k] >= 0)
                o->exact += tbytes(s, c->t_exact[k]);
            else if (c->t_golden[k] >= 0)
                o->recomputed +=
                    8.0 *
                    (double)STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, c->t_golden[k])->numel;
        }
        if (iters) iters[i] = c->iter;
    }
    fprintf(out, "\nop calls\n  %-22s %7s %6s %6s %6s  %-13s %10s %10s %10s %12s\n", "op", "calls",
            "fwd", "bwd", "opt", "iterations", "inputs", "golden", "exact", "recomputed");
    op_sum tot;
    memset(&tot, 0, sizeof tot);
    char b[4][32], range[32];
    for (int op = 0; op < PEAT_OP_COUNT; op++) {
        const op_sum *o = &sum[op];
        if (!o->calls) continue;
        human(b[0], 32, o->in);
        human(b[1], 32, o->golden);
        human(b[2], 32, o->exact);
        human(b[3], 32, o->recomputed);
        snprintf(range, sizeof range, "%lld..%lld", (long long)o->it_lo, (long long)o->it_hi);
        fprintf(out, "  %-22s %7lld %6lld %6lld %6lld  %-13s %10s %10s %10s %12s\n",
                peat_op_name((peat_op_kind)op), (long long)o->calls, (long long)o->phase[0],
                (long long)o->phase[1], (long long)o->phase[2], range, b[0], b[1], b[2], b[3]);
        tot.calls += o->calls;
        for (int p = 0; p < 3; p++) tot.phase[p] += o->phase[p];
        tot.in += o->in;
        tot.golden += o->golden;
        tot.exact += o->exact;
        tot.recomputed += o->recomputed;
    }
    human(b[0], 32, tot.in);
    human(b[1], 32, tot.golden);
    human(b[2], 32, tot.exact);
    human(b[3], 32, tot.recomputed);
    fprintf(out, "  %-22s %7lld %6lld %6lld %6lld  %-13s %10s %10s %10s %12s\n", "total",
            (long long)tot.calls, (long long)tot.phase[0], (long long)tot.phase[1],
            (long long)tot.phase[2], "", b[0], b[1], b[2], b[3]);
    if (iters && n > 0) {
        qsort(iters, (size_t)n, sizeof *iters, cmp_i64);
        int64_t distinct = 1;
        for (int64_t i = 1; i < n; i++) distinct += iters[i] != iters[i - 1];
        fprintf(out, "  iterations covered: %lld..%lld (%lld distinct)\n", (long long)iters[0],
                (long long)iters[n - 1], (long long)distinct);
    }
    free(iters);
}

static void print_states(const peat_store_t *s, FILE *out)
{
    fprintf(out, "\nstates\n  %8s  %-31s %8s %12s\n", "iter", "tag", "tensors", "bytes");
    int64_t n = s->rows[STORE_T_STATE].n;
    for (int64_t i = 0; i < n;) {
        const store_state_row *r = STORE_ROW(s, STORE_T_STATE, store_state_row, i);
        double bytes = 0;
        int64_t j = i;
        for (; j < n && j < i + r->count; j++)
            bytes += tbytes(s, STORE_ROW(s, STORE_T_STATE, store_state_row, j)->tensor);
        char b[32];
        human(b, sizeof b, bytes);
        fprintf(out, "  %8lld  %-31s %8d %12s\n", (long long)r->iter, r->tag, r->count, b);
        i = j > i ? j : i + 1;
    }
}

static void print_metrics(const peat_store_t *s, FILE *out)
{
    int64_t n = s->rows[STORE_T_METRIC].n;
    const store_metric_row *m0 = STORE_ROW(s, STORE_T_METRIC, store_metric_row, 0);
    const store_metric_row *m1 = STORE_ROW(s, STORE_T_METRIC, store_metric_row, n - 1);
    fprintf(out, "\nmetrics: %lld rows, iterations %lld..%lld, loss %.6g -> %.6g", (long long)n,
            (long long)m0->iter, (long long)m1->iter, m0->loss, m1->loss);
    /* the flows measure accuracy on held-out data after training, not per iteration */
    if (isnan(m0->accuracy) && isnan(m1->accuracy))
        fputs(", accuracy not measured per iteration\n", out);
    else
        fprintf(out, ", accuracy %.4g -> %.4g\n", m0->accuracy, m1->accuracy);
}

/* Mixed precision: the loss scale's course and the steps the scaler skipped. */
static void print_amp(peat_store_t *s, FILE *out)
{
    int nc;
    const peat_store_col *cols = peat_store_amp_cols(&nc);
    peat_store_table_t *t = NULL;
    if (!peat_store_table_present(s, PEAT_STORE_AMP_TABLE) ||
        peat_store_table_open(s, PEAT_STORE_AMP_TABLE, cols, nc, &t) != PEAT_OK)
        return;
    int64_t n = peat_store_table_rows(t), skipped = 0;
    peat_store_value first = {.d = NAN}, last = {.d = NAN}, v;
    for (int64_t i = 0; i < n; i++)
        if (peat_store_table_get(t, i, 2, &v) == PEAT_OK) skipped += v.i != 0;
    if (n > 0) peat_store_table_get(t, 0, 1, &first), peat_store_table_get(t, n - 1, 1, &last);
    fprintf(out, "mixed precision (%s): %lld rows, loss scale %g -> %g, %lld skipped steps\n",
            PEAT_STORE_AMP_TABLE, (long long)n, first.d, last.d, (long long)skipped);
    peat_store_table_close(t);
}

static void print_sigs(const peat_store_t *s, FILE *out)
{
    fprintf(out, "\nsignatures\n");
    for (int64_t i = 0; i < s->rows[STORE_T_SIG].n; i++) {
        const store_sig_row *r = STORE_ROW(s, STORE_T_SIG, store_sig_row, i);
        char b[32];
        human(b, sizeof b, (double)r->text_len);
        fprintf(out, "  %-40s %10s of JSON\n", r->kernel, b);
    }
}

/* The status line: how the file was left, and what was checked of it (never "clean" for what
 * was not read). */
static void print_status(const peat_store_stats *st, const peat_store_check *chk, int verify,
                         FILE *out)
{
    const char *data = verify ? "every tensor and signature read back and matching its hash"
                              : "tensor data not read (--verify reads it)";
    if (chk->problems > 0)
        fprintf(out, "  status       DAMAGED: %lld problem%s (listed under integrity)\n",
                (long long)chk->problems, chk->problems == 1 ? "" : "s");
    else if (st->crashed)
        fprintf(out,
                "  status       not closed by its writer (killed, or still running); %lld rows of "
                "an incomplete record ignored; %s\n",
                (long long)st->dropped_rows, verify ? "its complete records verified" : data);
    else if (chk->has_manifest)
        fprintf(out,
                "  status       closed by its writer; every stage output its manifest lists "
                "is present; %s\n",
                data);
    else
        fprintf(out,
                "  status       closed by its writer; no manifest (unfinished, or written before "
                "manifests): stages not checked; %s\n",
                data);
}

static void print_header(const peat_store_t *s, const peat_store_stats *st,
                         const peat_store_check *chk, int verify, const char *path, FILE *out)
{
    const peat_store_meta *m = &s->meta;
    fprintf(out, "PEAT campaign %s\n", path);
    fprintf(out, "  schema       %s v%d, HDF5 %s, written by peat %s\n", PEAT_STORE_FORMAT,
            s->schema_version ? s->schema_version : PEAT_STORE_SCHEMA_VERSION, m->hdf5_version,
            m->peat_version);
    print_status(st, chk, verify, out);
    fprintf(out, "  campaign     flow %s, kernel %s, backend %s, seed %llu, %lld iterations\n",
            m->flow, m->kernel, m->backend, (unsigned long long)m->seed, (long long)m->iters);
    fprintf(out, "  device       %s\n", m->device[0] ? m->device : "-");
    fprintf(out, "  created      %s\n", m->created[0] ? m->created : "-");
    if (m->argv[0]) fprintf(out, "  command      %s\n", m->argv);
    fprintf(out, "  environment  host %s, clocks %s, dtypes %s, build %s\n",
            m->host[0] ? m->host : "-", m->clocks[0] ? m->clocks : "-",
            m->dtypes[0] ? m->dtypes : "-", m->build[0] ? m->build : "-");
    if (m->blas[0]) fprintf(out, "  golden GEMM  %s\n", m->blas);
    if (m->policy[0]) fprintf(out, "  policy       %s\n", m->policy);
}

static void print_storage(const peat_store_t *s, FILE *out)
{
    char lim[96], b0[32];
    if (s->exact_max < 0)
        snprintf(lim, sizeof lim, "exact outputs stored");
    else if (s->exact_max == 0)
        snprintf(lim, sizeof lim, "exact outputs recomputed on read");
    else {
        human(b0, sizeof b0, (double)s->exact_max);
        snprintf(lim, sizeof lim, "exact outputs stored up to %s per call", b0);
    }
    char codec[128];
    if (s->deflate < 0)
        snprintf(codec, sizeof codec, "uncompressed");
    else if (s->min_saving_pct < 0)
        snprintf(codec, sizeof codec, "shuffle + deflate level %d (every tensor)", s->deflate);
    else
        snprintf(codec, sizeof codec,
                 "shuffle + deflate level %d where it saves >= %d%%, the rest uncompressed",
                 s->deflate, s->min_saving_pct);
    fprintf(out, "  storage      %s, %s\n", codec, lim);
}

static void print_sizes(const peat_store_stats *st, FILE *out)
{
    char b[4][32], c[3][32], sp[32];
    human(b[0], 32, (double)st->logical_bytes);
    human(b[1], 32, (double)st->unique_bytes);
    human(b[2], 32, (double)st->exact_recomputed);
    human(b[3], 32, (double)st->file_bytes);
    human(c[0], 32, (double)st->deflate_bytes);
    human(c[1], 32, (double)st->deflate_disk);
    human(c[2], 32, (double)st->raw_bytes);
    human(sp, sizeof sp, (double)st->spare_bytes);
    fprintf(out, "\nsizes\n");
    fprintf(out, "  %-42s %12s (%lld tensor references)\n", "logical bytes (every reference)", b[0],
            (long long)st->tensor_refs);
    fprintf(out, "  %-42s %12s (%lld unique tensors)\n", "after dedup", b[1],
            (long long)st->tensors);
    fprintf(out, "  %-42s %12s (%s in the file)\n", "  compressed (shuffle + deflate)", c[0], c[1]);
    fprintf(out, "  %-42s %12s\n", "  uncompressed (would save too little)", c[2]);
    fprintf(out, "  %-42s %12s\n", "exact outputs recomputed on read", b[2]);
    fprintf(out, "  %-42s %12s (%s of it spare room in the last chunks)\n", "file on disk", b[3],
            sp);
    if (st->file_bytes > 0)
        fprintf(out, "  %-42s %11.2fx\n", "compression ratio (logical / on disk)",
                (double)st->logical_bytes / (double)st->file_bytes);
}

static void print_integrity(const peat_store_check *chk, int verify, const char *problems,
                            FILE *out)
{
    fprintf(out, "\nintegrity\n");
    if (chk->has_manifest)
        fprintf(out, "  manifest     %d stages (%d skipped), %lld stage outputs checked: %s\n",
                chk->stages, chk->skipped, (long long)chk->tables, chk->stage_list);
    else
        fprintf(out, "  manifest     none\n");
    if (verify) {
        char b[32];
        human(b, sizeof b, (double)chk->bytes);
        fprintf(out,
                "  verified     %lld calls, %lld snapshots, %lld signatures, %lld tensors (%s)\n",
                (long long)chk->calls, (long long)chk->states, (long long)chk->signatures,
                (long long)chk->tensors, b);
    }
    if (problems && problems[0]) fputs(problems, out);
}

static void problem_line(void *user, const char *line)
{
    fprintf((FILE *)user, "  DAMAGED      %s\n", line);
}

/* The checks, their problem lines collected (they are printed after the header they decide). */
static peat_status checks_run(peat_store_t *s, int verify, peat_store_check *chk, char **lines)
{
    size_t len = 0;
    FILE *mem = open_memstream(lines, &len);
    if (!mem) return PEAT_ERROR(PEAT_ERR_NOMEM, "inspect: problem list");
    peat_status st = verify ? peat_store_verify(s, problem_line, mem, chk)
                            : peat_store_manifest_check(s, problem_line, mem, chk);
    fclose(mem);
    return st;
}

peat_status peat_store_capture_unmapped_list(peat_store_t *s, char *buf, size_t n, int *n_ops)
{
    buf[0] = 0, *n_ops = 0;
    if (!peat_store_table_present(s, PEAT_STORE_CAPTURE_UNMAPPED)) return PEAT_OK;
    peat_store_table_t *t = NULL;
    PEAT_TRY(peat_store_table_open(s, PEAT_STORE_CAPTURE_UNMAPPED, peat_store_capture_unmapped_cols,
                                   3, &t));
    int64_t rows = peat_store_table_rows(t);
    char *done = calloc((size_t)(rows > 0 ? rows : 1), 1);
    peat_status st = done ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "unmapped list");
    /* most calls first: a few rows, a selection each time */
    for (int64_t k = 0; st == PEAT_OK && k < rows; k++) {
        int64_t best = -1, best_calls = -1;
        for (int64_t r = 0; st == PEAT_OK && r < rows; r++) {
            peat_store_value c, why;
            st = peat_store_table_get(t, r, 1, &c);
            if (st == PEAT_OK) st = peat_store_table_get(t, r, 2, &why);
            /* views, copies and allocations compute nothing a kernel could get wrong */
            if (st == PEAT_OK && !done[r] &&
                strncmp(why.s, PEAT_STORE_UNMAPPED_NO_MATH, strlen(PEAT_STORE_UNMAPPED_NO_MATH)) &&
                c.i > best_calls)
                best = r, best_calls = c.i;
        }
        if (st != PEAT_OK || best < 0) break;
        done[best] = 1;
        peat_store_value op, why;
        st = peat_store_table_get(t, best, 0, &op);
        if (st == PEAT_OK) st = peat_store_table_get(t, best, 2, &why);
        size_t w = strlen(buf);
        if (st == PEAT_OK && w + 1 < n)
            snprintf(buf + w, n - w, "%s%s (%lld call%s: %s)", w ? "; " : "", op.s,
                     (long long)best_calls, best_calls == 1 ? "" : "s", why.s);
        if (st == PEAT_OK) (*n_ops)++;
    }
    free(done);
    peat_store_table_close(t);
    return st;
}

/* A capture's unmapped aten ops, when it has any. */
static void print_unmapped(peat_store_t *s, FILE *out)
{
    char buf[2048];
    int n = 0;
    if (peat_store_capture_unmapped_list(s, buf, sizeof buf, &n) != PEAT_OK || n == 0) return;
    fprintf(out, "\nunmapped: %d aten op%s the capture could not map (most calls first): %s\n", n,
            n == 1 ? "" : "s", buf);
}

static peat_status inspect_impl(const char *path, int verify, FILE *out)
{
    peat_store_t *s = NULL;
    PEAT_TRY(peat_store_open(path, 0, &s));
    peat_store_stats st;
    peat_store_check chk;
    char *lines = NULL;
    peat_status e = peat_store_stats_get(s, &st);
    if (e == PEAT_OK) e = checks_run(s, verify, &chk, &lines);
    if (e != PEAT_OK) {
        free(lines);
        peat_store_close(s);
        return e;
    }
    print_header(s, &st, &chk, verify, path, out);
    print_storage(s, out);
    fprintf(out, "\nstages present: meta");
    if (st.calls) fprintf(out, ", calls (%lld)", (long long)st.calls);
    if (st.states) fprintf(out, ", states (%lld)", (long long)st.states);
    if (st.metrics) fprintf(out, ", metrics (%lld)", (long long)st.metrics);
    if (st.signatures) fprintf(out, ", signatures (%lld)", (long long)st.signatures);
    fprintf(out, "\n");
    if (st.calls) print_calls(s, out);
    if (st.states) print_states(s, out);
    if (st.metrics) print_metrics(s, out);
    print_amp(s, out);
    print_unmapped(s, out);
    if (st.signatures) print_sigs(s, out);
    print_sizes(&st, out);
    print_integrity(&chk, verify, lines, out);
    free(lines);
    e = peat_store_close(s);
    if (e == PEAT_OK && chk.problems > 0)
        e = PEAT_ERROR(PEAT_ERR_FORMAT, "%s is damaged: %lld problem%s (listed under integrity)",
                       path, (long long)chk.problems, chk.problems == 1 ? "" : "s");
    return e;
}

peat_status peat_store_inspect(const char *path, int verify, FILE *out)
{
    if (!out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_inspect: out is NULL");
    peat_status st;
    STORE_GUARDED(st, inspect_impl(path, verify, out));
    return st;
}
