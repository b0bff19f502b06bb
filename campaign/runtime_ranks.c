/* runtime_ranks.c: the messages of `mpirun -n N peat run` between rank 0 and the ranks that train
 * runtime FI runs (runtime_ranks.h; the lockstep's side is runtime.c). */
#include "campaign/runtime_ranks.h"

#include "campaign/scale.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void peat_campaign_pack_put(peat_campaign_pack *p, const void *v, size_t n)
{
    if (p->err) return;
    if (p->n + n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->n + n) cap *= 2;
        unsigned char *b = realloc(p->b, cap);
        if (!b) {
            p->err = 1;
            return;
        }
        p->b = b, p->cap = cap;
    }
    if (n) memcpy(p->b + p->n, v, n);
    p->n += n;
}

void peat_campaign_pack_put_str(peat_campaign_pack *p, const char *s)
{
    peat_campaign_pack_put(p, s ? s : "", strlen(s ? s : "") + 1);
}

void peat_campaign_pack_get(peat_campaign_pack *p, void *v, size_t n)
{
    if (p->err || n > p->n - p->at) {
        p->err = 1;
        memset(v, 0, n);
        return;
    }
    memcpy(v, p->b + p->at, n);
    p->at += n;
}

const char *peat_campaign_pack_get_str(peat_campaign_pack *p)
{
    const unsigned char *end = p->err ? NULL : memchr(p->b + p->at, 0, p->n - p->at);
    if (!end) {
        p->err = 1;
        return "";
    }
    const char *s = (const char *)p->b + p->at;
    p->at = (size_t)(end - p->b) + 1;
    return s;
}

void peat_campaign_pack_free(peat_campaign_pack *p)
{
    free(p->b);
    memset(p, 0, sizeof *p);
}

int peat_campaign_runtime_ranks_owner(int member, int ranks)
{
    return ranks > 1 ? member % ranks : 0;
}

static char *line_of_run;
static int said, answered, joined;

int peat_campaign_runtime_ranks_active(void)
{
    if (peat_campaign_scale_mpi_size() < 2) return 0;
    return peat_campaign_scale_mpi_rank() == 0 ? line_of_run != NULL : joined;
}

void peat_campaign_runtime_ranks_line(const char *line)
{
    free(line_of_run);
    line_of_run = line ? strdup(line) : NULL;
}

/* 'G' and the command line, or 'S' */
static peat_status say(char what)
{
    if (said || peat_campaign_scale_mpi_size() < 2) return PEAT_OK;
    said = 1;
    peat_campaign_pack p = {0};
    peat_campaign_pack_put(&p, &what, 1);
    if (what == 'G') peat_campaign_pack_put_str(&p, line_of_run);
    void *b = p.b;
    size_t n = p.n;
    peat_status st = p.err ? PEAT_ERROR(PEAT_ERR_NOMEM, "the ranks' message")
                           : peat_campaign_scale_mpi_bcast(&b, &n);
    peat_campaign_pack_free(&p);
    return st;
}

peat_status peat_campaign_runtime_ranks_go(void)
{
    if (!line_of_run) return PEAT_ERROR(PEAT_ERR_INVAL, "the ranks have no command line");
    return say('G');
}

void peat_campaign_runtime_ranks_release(void)
{
    if (peat_campaign_scale_mpi_rank() == 0) say('S'); /* whether or not a line was set */
    free(line_of_run);
    line_of_run = NULL;
    joined = 0;
}

int peat_campaign_runtime_ranks_wait(char **line)
{
    *line = NULL;
    void *b = NULL;
    size_t n = 0;
    if (peat_campaign_scale_mpi_bcast(&b, &n) != PEAT_OK || n < 1) {
        free(b);
        return 0;
    }
    peat_campaign_pack p = {.b = b, .n = n, .cap = n};
    char what = 0;
    peat_campaign_pack_get(&p, &what, 1);
    const char *s = what == 'G' ? peat_campaign_pack_get_str(&p) : NULL;
    if (s && !p.err) *line = strdup(s);
    peat_campaign_pack_free(&p);
    joined = *line != NULL;
    return joined;
}

peat_status peat_campaign_runtime_ranks_answer(peat_status st, const peat_campaign_pack *body)
{
    if (answered) return PEAT_OK;
    answered = 1;
    peat_campaign_pack p = {0};
    int32_t s = st;
    peat_campaign_pack_put(&p, &s, sizeof s);
    peat_campaign_pack_put_str(&p, st == PEAT_OK ? "" : peat_error_last());
    if (st == PEAT_OK && body && body->n) peat_campaign_pack_put(&p, body->b, body->n);
    peat_status r = p.err ? PEAT_ERROR(PEAT_ERR_NOMEM, "the answer to rank 0") : PEAT_OK;
    if (r != PEAT_OK) { /* too big to say: say that */
        peat_campaign_pack_free(&p);
        s = r;
        peat_campaign_pack_put(&p, &s, sizeof s);
        peat_campaign_pack_put_str(&p, peat_error_last());
    }
    peat_status sent = peat_campaign_scale_mpi_send0(p.b, p.n);
    peat_campaign_pack_free(&p);
    return r != PEAT_OK ? r : sent;
}

int peat_campaign_runtime_ranks_answered(void)
{
    return answered;
}

peat_status peat_campaign_runtime_ranks_collect(int r, peat_campaign_pack *body)
{
    memset(body, 0, sizeof *body);
    void *b = NULL;
    size_t n = 0;
    int size = peat_campaign_scale_mpi_size();
    PEAT_TRY(peat_campaign_scale_mpi_recv(r, &b, &n));
    *body = (peat_campaign_pack){.b = b, .n = n, .cap = n};
    int32_t s = 0;
    peat_campaign_pack_get(body, &s, sizeof s);
    const char *err = peat_campaign_pack_get_str(body);
    if (body->err)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "rank %d of %d: its runtime FI answer is cut short", r,
                          size);
    if (s != PEAT_OK)
        return PEAT_ERROR(s > 0 ? (peat_status)s : PEAT_ERR_IO,
                          "rank %d of %d failed in runtime FI: %s", r, size, err);
    return PEAT_OK;
}
