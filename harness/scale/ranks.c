/* runtime_ranks.c: the messages of `mpirun -n N peat run` between rank 0 and the ranks that train
 * runtime FI runs (runtime_ranks.h; the lockstep's side is runtime.c). */
#include "harness/scale/ranks.h"

#include "harness/scale/scale.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void peat_scale_pack_put(peat_scale_pack *p, const void *v, size_t n)
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

void peat_scale_pack_put_str(peat_scale_pack *p, const char *s)
{
    peat_scale_pack_put(p, s ? s : "", strlen(s ? s : "") + 1);
}

void peat_scale_pack_get(peat_scale_pack *p, void *v, size_t n)
{
    if (p->err || n > p->n - p->at) {
        p->err = 1;
        memset(v, 0, n);
        return;
    }
    memcpy(v, p->b + p->at, n);
    p->at += n;
}

const char *peat_scale_pack_get_str(peat_scale_pack *p)
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

void peat_scale_pack_free(peat_scale_pack *p)
{
    free(p->b);
    memset(p, 0, sizeof *p);
}

int peat_scale_ranks_owner(int member, int ranks)
{
    return ranks > 1 ? member % ranks : 0;
}

static char *line_of_run;
static int said, answered, joined, ended, released;
/* ranks > 0: the message wait took first, until next hands it out */
static peat_scale_pack first;
static char first_what;

int peat_scale_ranks_active(void)
{
    if (peat_scale_mpi_size() < 2) return 0;
    return peat_scale_mpi_rank() == 0 ? line_of_run != NULL : joined;
}

void peat_scale_ranks_line(const char *line)
{
    free(line_of_run);
    line_of_run = line ? strdup(line) : NULL;
}

/* A message to every rank: its kind, the command line and body (may be NULL). 'G' and 'S' end
 * the conversation (once); 'P' and 'Q' (items ahead) may come before them. */
static peat_status say(char what, const peat_scale_pack *body)
{
    if (said || peat_scale_mpi_size() < 2) return PEAT_OK;
    said = what == 'G' || what == 'S';
    peat_scale_pack p = {0};
    peat_scale_pack_put(&p, &what, 1);
    if (what != 'S') peat_scale_pack_put_str(&p, line_of_run);
    if (body && body->n) peat_scale_pack_put(&p, body->b, body->n);
    void *b = p.b;
    size_t n = p.n;
    peat_status st =
        p.err ? PEAT_ERROR(PEAT_ERR_NOMEM, "the ranks' message") : peat_scale_mpi_bcast(&b, &n);
    peat_scale_pack_free(&p);
    return st;
}

peat_status peat_scale_ranks_go(void)
{
    if (!line_of_run) return PEAT_ERROR(PEAT_ERR_INVAL, "the ranks have no command line");
    return say('G', NULL);
}

void peat_scale_ranks_release(void)
{
    if (peat_scale_mpi_rank() == 0) say('S', NULL); /* whether or not a line was set */
    free(line_of_run);
    line_of_run = NULL;
    joined = 0;
}

/* Ranks > 0: rank 0's next message: its kind, its command line (NULL for 'S') and body after it. */
static char hear(peat_scale_pack *p, const char **line)
{
    memset(p, 0, sizeof *p);
    *line = NULL;
    void *b = NULL;
    size_t n = 0;
    if (peat_scale_mpi_bcast(&b, &n) != PEAT_OK || n < 1) {
        free(b);
        return 'S';
    }
    *p = (peat_scale_pack){.b = b, .n = n, .cap = n};
    char what = 0;
    peat_scale_pack_get(p, &what, 1);
    if (what != 'S') *line = peat_scale_pack_get_str(p);
    return p->err || !strchr("GPQ", what) ? 'S' : what;
}

int peat_scale_ranks_wait(char **line)
{
    const char *s = NULL;
    *line = NULL;
    first_what = hear(&first, &s);
    if (first_what != 'S') *line = strdup(s);
    if (!*line) {
        peat_scale_pack_free(&first);
        first_what = 0, ended = released = 1;
    }
    joined = *line != NULL;
    return joined;
}

char peat_scale_ranks_next(peat_scale_pack *body)
{
    memset(body, 0, sizeof *body);
    if (ended) return 'S';
    char what = first_what;
    if (what) {
        *body = first, first_what = 0;
        memset(&first, 0, sizeof first);
    } else {
        const char *s;
        what = hear(body, &s);
    }
    ended = what == 'G' || what == 'S';
    released |= what == 'S';
    return what;
}

int peat_scale_ranks_released(void)
{
    return released;
}

void peat_scale_ranks_drain(peat_status st)
{
    if (st == PEAT_OK) st = PEAT_ERROR(PEAT_ERR_INTERNAL, "it never reached the runtime stage");
    while (!ended) {
        peat_scale_pack body;
        char what = peat_scale_ranks_next(&body);
        peat_scale_pack_free(&body);
        if (what == 'P' || what == 'Q') peat_scale_ranks_reply(st, NULL);
    }
    if (!released) peat_scale_ranks_answer(st, NULL); /* GO came: rank 0 waits */
}

peat_status peat_scale_ranks_reply(peat_status st, const peat_scale_pack *body)
{
    peat_scale_pack p = {0};
    int32_t s = st;
    peat_scale_pack_put(&p, &s, sizeof s);
    peat_scale_pack_put_str(&p, st == PEAT_OK ? "" : peat_error_last());
    if (st == PEAT_OK && body && body->n) peat_scale_pack_put(&p, body->b, body->n);
    peat_status r = p.err ? PEAT_ERROR(PEAT_ERR_NOMEM, "the answer to rank 0") : PEAT_OK;
    if (r != PEAT_OK) { /* too big to say: say that */
        peat_scale_pack_free(&p);
        s = r;
        peat_scale_pack_put(&p, &s, sizeof s);
        peat_scale_pack_put_str(&p, peat_error_last());
    }
    peat_status sent = peat_scale_mpi_send0(p.b, p.n);
    peat_scale_pack_free(&p);
    return r != PEAT_OK ? r : sent;
}

peat_status peat_scale_ranks_answer(peat_status st, const peat_scale_pack *body)
{
    if (answered) return PEAT_OK;
    answered = 1;
    return peat_scale_ranks_reply(st, body);
}

int peat_scale_ranks_answered(void)
{
    return answered;
}

peat_status peat_scale_ranks_take(int r, const char *stage, peat_scale_pack *body)
{
    memset(body, 0, sizeof *body);
    void *b = NULL;
    size_t n = 0;
    int size = peat_scale_mpi_size();
    PEAT_TRY(peat_scale_mpi_recv(r, &b, &n));
    *body = (peat_scale_pack){.b = b, .n = n, .cap = n};
    int32_t s = 0;
    peat_scale_pack_get(body, &s, sizeof s);
    const char *err = peat_scale_pack_get_str(body);
    if (body->err)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "rank %d of %d: its %s answer is cut short", r, size,
                          stage);
    if (s != PEAT_OK)
        return PEAT_ERROR(s > 0 ? (peat_status)s : PEAT_ERR_IO, "rank %d of %d failed in %s: %s", r,
                          size, stage, err);
    return PEAT_OK;
}

peat_status peat_scale_ranks_collect(int r, peat_scale_pack *body)
{
    return peat_scale_ranks_take(r, "runtime FI", body);
}

peat_status peat_scale_ranks_tell(char what, const peat_scale_pack *body)
{
    if (!line_of_run) return PEAT_ERROR(PEAT_ERR_INVAL, "the ranks have no command line");
    return say(what, body);
}
