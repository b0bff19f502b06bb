/* store_verify.c: every tensor and signature text read back and compared with its hash, per
 * record (`peat inspect --verify`, `peat run --resume`), and a regenerated record compared with
 * the stored one. */
#include "store/store_impl.h"

#include <stdlib.h>
#include <string.h>

enum { T_UNREAD = 0, T_GOOD, T_DAMAGED };

/* Reads every tensor once (dedup shares them between records): state[row] good or damaged. */
static peat_status tensors_read(peat_store_t *s, unsigned char *state, peat_store_check *out)
{
    for (int64_t row = 0; row < s->rows[STORE_T_TENSOR].n; row++) {
        peat_tensor *t = NULL;
        peat_status st = peat_store_tensor_read(s, row, &t);
        if (st == PEAT_ERR_NOMEM) return st;
        state[row] = st == PEAT_OK ? T_GOOD : T_DAMAGED;
        if (t) out->bytes += (int64_t)peat_tensor_nbytes(t);
        peat_tensor_free(t);
        out->tensors++;
    }
    return PEAT_OK;
}

/* A damaged record: its sequence number, call id (calls only) and what is wrong, in words. */
typedef void (*damage_fn)(void *user, int64_t seq, int is_call, uint64_t id, const char *line);

static void call_check(const peat_store_t *s, int64_t i, unsigned char *state, damage_fn fn,
                       void *user)
{
    const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, i);
    static const char *const what[3] = {"input", "golden output", "exact output"};
    const int64_t *lists[3] = {c->t_in, c->t_golden, c->t_exact};
    int counts[3] = {c->n_in, c->n_out, c->n_out}, bad = 0;
    char first[96] = "";
    for (int l = 0; l < 3; l++)
        for (int k = 0; k < counts[l]; k++) {
            int64_t row = lists[l][k];
            if (row < 0 || state[row] != T_DAMAGED) continue;
            if (!bad++)
                snprintf(first, sizeof first, "%s %d (tensor %lld)", what[l], k, (long long)row);
        }
    if (!bad) return;
    char line[400];
    snprintf(line, sizeof line,
             "call id %llu (%s %s, iteration %lld, layer %s): %s%s does not match its hash",
             (unsigned long long)c->id, peat_op_name((peat_op_kind)c->op),
             c->phase == 0   ? "fwd"
             : c->phase == 1 ? "bwd"
                             : "opt",
             (long long)c->iter, c->layer[0] ? c->layer : "-", first, bad > 1 ? " and others" : "");
    fn(user, c->seq, 1, c->id, line);
}

/* The snapshot starting at state row i (its rows share a sequence number); returns its end. */
static int64_t state_check(const peat_store_t *s, int64_t i, unsigned char *state, damage_fn fn,
                           void *user)
{
    const store_state_row *r0 = STORE_ROW(s, STORE_T_STATE, store_state_row, i);
    int64_t j = i, bad = 0;
    const store_state_row *first = NULL;
    for (; j < s->rows[STORE_T_STATE].n; j++) {
        const store_state_row *r = STORE_ROW(s, STORE_T_STATE, store_state_row, j);
        if (r->seq != r0->seq) break;
        if (state[r->tensor] == T_DAMAGED && !bad++) first = r;
    }
    if (bad) {
        char line[400];
        snprintf(line, sizeof line,
                 "snapshot '%s' of iteration %lld: tensor %s (tensor %lld)%s does not match its "
                 "hash",
                 r0->tag, (long long)r0->iter, first->name, (long long)first->tensor,
                 bad > 1 ? " and others" : "");
        fn(user, r0->seq, 0, 0, line);
    }
    return j;
}

static peat_status sig_check(peat_store_t *s, int64_t i, damage_fn fn, void *user)
{
    const store_sig_row *g = STORE_ROW(s, STORE_T_SIG, store_sig_row, i);
    char *text = NULL;
    peat_status st = peat_store_text_read(s, g->text_offset, g->text_len, &text);
    if (st == PEAT_ERR_NOMEM) return st;
    if (st != PEAT_OK || peat_store_hash64(text, (size_t)g->text_len, 0) != g->text_hash) {
        char line[200];
        snprintf(line, sizeof line, "signature of %s: its JSON text does not match its hash",
                 g->kernel);
        fn(user, g->seq, 0, 0, line);
    }
    free(text);
    return PEAT_OK;
}

/* Every record of the file against its hashes; fn for each damaged one. */
static peat_status records_verify(peat_store_t *s, damage_fn fn, void *user, peat_store_check *out)
{
    unsigned char *state = calloc((size_t)s->rows[STORE_T_TENSOR].n + 1, 1);
    if (!state) return PEAT_ERROR(PEAT_ERR_NOMEM, "tensor states");
    peat_status st = tensors_read(s, state, out);
    for (int64_t i = 0; st == PEAT_OK && i < s->rows[STORE_T_CALL].n; i++, out->calls++)
        call_check(s, i, state, fn, user);
    for (int64_t i = 0; st == PEAT_OK && i < s->rows[STORE_T_STATE].n; out->states++)
        i = state_check(s, i, state, fn, user);
    for (int64_t i = 0; st == PEAT_OK && i < s->rows[STORE_T_SIG].n; i++, out->signatures++)
        st = sig_check(s, i, fn, user);
    free(state);
    return st;
}

/* ---- peat inspect --verify ---- */

typedef struct {
    peat_store_report_fn fn;
    void *user;
    peat_store_check *out;
} report_ctx;

static void report_line(void *user, int64_t seq, int is_call, uint64_t id, const char *line)
{
    (void)seq, (void)is_call, (void)id;
    report_ctx *r = user;
    peat_store_report(r->fn, r->user, r->out, "%s", line);
}

static peat_status verify_impl(peat_store_t *s, peat_store_report_fn fn, void *user,
                               peat_store_check *out)
{
    PEAT_TRY(peat_store_manifest_check(s, fn, user, out));
    report_ctx r = {fn, user, out};
    return records_verify(s, report_line, &r, out);
}

peat_status peat_store_verify(peat_store_t *s, peat_store_report_fn fn, void *user,
                              peat_store_check *out)
{
    if (!s || !out) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_verify: bad arguments");
    memset(out, 0, sizeof *out);
    peat_status st;
    STORE_GUARDED(st, verify_impl(s, fn, user, out));
    return st;
}

/* ---- --resume: the records kept are verified; the first damaged one and all after it go ---- */

typedef struct {
    peat_store_resume_info *info;
    int64_t first_seq; /* of the first damaged record, -1: none */
} resume_ctx;

static void resume_damage(void *user, int64_t seq, int is_call, uint64_t id, const char *line)
{
    resume_ctx *r = user;
    peat_store_resume_info *info = r->info;
    if (is_call && info->n_ids < (int)(sizeof info->damaged_ids / sizeof info->damaged_ids[0]))
        info->damaged_ids[info->n_ids++] = id;
    if (r->first_seq < 0 || seq < r->first_seq) {
        r->first_seq = seq;
        snprintf(info->first_damaged, sizeof info->first_damaged, "%s", line);
    }
    info->damaged++;
}

peat_status peat_store_resume_verify(peat_store_t *s, peat_store_resume_info *info)
{
    resume_ctx r = {info, -1};
    peat_store_check chk;
    memset(&chk, 0, sizeof chk);
    PEAT_TRY(records_verify(s, resume_damage, &r, &chk));
    int64_t before = s->seq_next;
    if (r.first_seq >= 0) peat_store_truncate(s, r.first_seq);
    info->kept = s->seq_next;
    info->dropped = before - s->seq_next;
    return PEAT_OK;
}

peat_status peat_store_open_resume(const char *path, peat_store_resume_info *info,
                                   peat_store_t **out)
{
    if (!info) return PEAT_ERROR(PEAT_ERR_INVAL, "peat_store_open_resume: info is NULL");
    memset(info, 0, sizeof *info);
    peat_status st;
    STORE_GUARDED(st, peat_store_open_impl(path, 1, -1, info, out));
    return st;
}

/* ---- a regenerated record against the stored one ---- */

static int tensor_same(const peat_store_t *s, int64_t row, const peat_tensor *t)
{
    if (!t || row < 0) return (!t) == (row < 0);
    return STORE_ROW(s, STORE_T_TENSOR, store_tensor_row, row)->hash == peat_store_tensor_hash(t);
}

int peat_store_call_same(const peat_store_t *s, const peat_record *r, char *what, size_t n)
{
    int64_t idx;
    if (!s || !r || peat_store_call_find(s, r->id, &idx) != PEAT_OK) return -1;
    const store_call_row *c = STORE_ROW(s, STORE_T_CALL, store_call_row, idx);
    if (c->n_in != r->n_in || c->n_out != r->n_out) {
        snprintf(what, n, "its inputs or outputs");
        return 0;
    }
    for (int k = 0; k < r->n_in; k++)
        if (!tensor_same(s, c->t_in[k], r->in[k])) {
            snprintf(what, n, "input %d", k);
            return 0;
        }
    for (int k = 0; k < r->n_out; k++)
        if (!tensor_same(s, c->t_golden[k], r->golden[k])) {
            snprintf(what, n, "golden output %d", k);
            return 0;
        }
    return 1;
}
