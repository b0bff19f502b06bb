/* sample.c: bottom-k uniform sample of elements (mergeable) and the radix sorts rank statistics
 * use.
 */
#include "analyzer/internal.h"

#include <stdlib.h>
#include <string.h>

peat_status peat_sample_set_init(peat_sample_set *ss, int64_t k)
{
    memset(ss, 0, sizeof *ss);
    ss->k = k;
    ss->thresh = UINT64_MAX;
    return PEAT_OK;
}

void peat_sample_set_free(peat_sample_set *ss)
{
    free(ss->s);
    free(ss->key);
    memset(ss, 0, sizeof *ss);
}

/* The k-th smallest (1-based) of v[0..n) (priorities are hashes, so no adversarial order
 * exists for the quickselect). Reorders v. */
PEAT_ANALYZER_DEFINE_SELECT(select_u64, uint64_t)
static uint64_t kth_smallest(uint64_t *v, int64_t n, int64_t k)
{
    select_u64(v, n, k - 1);
    return v[k - 1];
}

/* Keeps the k smallest priorities and lowers the entry threshold to the largest of them: the
 * threshold is found on a copy of the 8-byte keys (a scratch buffer kept for the set's life, so
 * that the cuts of a large add do not fault a fresh allocation in each time), then the entries
 * are compacted in one pass. */
static void cut(peat_sample_set *ss)
{
    if (ss->n <= ss->k) return;
    if (!ss->key) ss->key = calloc((size_t)(ss->k + ss->k / 2), sizeof *ss->key);
    if (!ss->key || ss->n > ss->k + ss->k / 2) return; /* out of memory: the set stays larger */
    uint64_t *key = ss->key;
    for (int64_t i = 0; i < ss->n; i++) key[i] = ss->s[i].prio;
    uint64_t th = kth_smallest(key, ss->n, ss->k);
    int64_t m = 0;
    for (int64_t i = 0; i < ss->n; i++)
        if (ss->s[i].prio <= th) ss->s[m++] = ss->s[i]; /* priorities are unique: exactly k */
    ss->n = m;
    ss->thresh = th;
}

void peat_sample_set_push(peat_sample_set *ss, const peat_sample *x)
{
    if (x->prio > ss->thresh) return;
    if (ss->n == ss->cap) {
        if (ss->cap >= ss->k + ss->k / 2) {
            cut(ss);
            if (x->prio > ss->thresh) return;
        } else {
            /* grow geometrically so that small accumulators stay small */
            int64_t want = ss->cap ? ss->cap * 2 : 1024;
            if (want > ss->k + ss->k / 2) want = ss->k + ss->k / 2;
            peat_sample *ns = realloc(ss->s, (size_t)want * sizeof *ns);
            if (!ns) { /* out of memory: fall back to cutting what is there */
                if (ss->n > ss->k) cut(ss);
                if (ss->n == ss->cap) return;
            } else {
                ss->s = ns;
                ss->cap = want;
            }
        }
    }
    ss->s[ss->n++] = *x;
}

/* Order-preserving image of a double as an unsigned integer (-0 < +0, NaN never passed in). */
static uint64_t dkey(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u >> 63 ? ~u : u | 0x8000000000000000ull;
}

/* perm = the stable ascending order of the 32-bit keys key[0..n) (LSD radix sort on 8-bit
 * digits: one read builds all four histograms, a digit every key shares costs no pass, and each
 * pass scatters into 256 streams, few enough to stay in cache). ka, kb and pb are scratch of n. */
static void radix_u32(const uint32_t *key, size_t n, uint32_t *perm, uint32_t *ka, uint32_t *kb,
                      uint32_t *pb)
{
    size_t cnt[4][256];
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++) {
        uint32_t k = key[i];
        ka[i] = k, perm[i] = (uint32_t)i;
        cnt[0][k & 0xff]++, cnt[1][(k >> 8) & 0xff]++;
        cnt[2][(k >> 16) & 0xff]++, cnt[3][k >> 24]++;
    }
    uint32_t *pa = perm;
    for (int d = 0; d < 4; d++) {
        size_t *c = cnt[d], sum = 0;
        if (c[(ka[0] >> (8 * d)) & 0xff] == n) continue; /* every key has this digit */
        for (int b = 0; b < 256; b++) {
            size_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++) {
            size_t at = c[(ka[i] >> (8 * d)) & 0xff]++;
            kb[at] = ka[i];
            pb[at] = pa[i];
        }
        uint32_t *tk = ka;
        ka = kb, kb = tk;
        uint32_t *tp = pa;
        pa = pb, pb = tp;
    }
    if (pa != perm) memcpy(perm, pa, n * sizeof *perm);
}

/* Orders a run of perm whose keys share their high 32 bits by the low 32 bits, stably:
 * insertion sort for short runs, a radix sort of the low halves for long ones (so that no input,
 * however many near-equal keys it has, costs quadratic time). s is scratch of 4 n words. */
static void run_fix(const uint64_t *key, uint32_t *perm, size_t len, uint32_t *s)
{
    if (len <= 32) {
        for (size_t i = 1; i < len; i++) {
            uint32_t p = perm[i];
            size_t j = i;
            for (; j > 0 && key[perm[j - 1]] > key[p]; j--) perm[j] = perm[j - 1];
            perm[j] = p;
        }
        return;
    }
    uint32_t *lo = s, *order = s + len, *ka = s + 2 * len, *kb = s + 3 * len;
    for (size_t i = 0; i < len; i++) lo[i] = (uint32_t)key[perm[i]];
    radix_u32(lo, len, order, ka, kb, lo); /* lo is read into ka first, then reused */
    for (size_t i = 0; i < len; i++) ka[i] = perm[order[i]];
    memcpy(perm, ka, len * sizeof *perm);
}

/* perm = the stable ascending order of the 64-bit keys key[0..n): a radix sort of their high
 * halves, then each run of equal high halves ordered by the low halves. That is the same
 * permutation as a stable sort on the whole keys, for about half the passes and bytes. */
static peat_status sort_u64(const uint64_t *key, size_t n, uint32_t *perm)
{
    if (n < 2) {
        if (n == 1) perm[0] = 0;
        return PEAT_OK;
    }
    /* the high halves, then 4 n words of scratch for the sorts */
    uint32_t *s = malloc(5 * n * sizeof *s);
    if (!s) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: radix sort of %zu", n);
    uint32_t *hi = s, *work = s + n;
    for (size_t i = 0; i < n; i++) hi[i] = (uint32_t)(key[i] >> 32);
    radix_u32(hi, n, perm, work, work + n, work + 2 * n);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        uint32_t h = hi[perm[i]];
        while (j < n && hi[perm[j]] == h) j++;
        if (j - i > 1) run_fix(key, perm + i, j - i, work);
        i = j;
    }
    free(s);
    return PEAT_OK;
}

peat_status peat_sample_cols_take(const peat_sample_set *ss, peat_sample_cols *c)
{
    size_t n = (size_t)ss->n, m = (size_t)(ss->n < ss->k ? ss->n : ss->k);
    memset(c, 0, sizeof *c);
    uint64_t *key = malloc(n * sizeof *key + 1);
    uint32_t *perm = malloc(n * sizeof *perm + 1);
    double *cols = malloc(5 * m * sizeof *cols + 1);
    peat_status st =
        key && perm && cols ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: sample of %zu", n);
    for (size_t i = 0; st == PEAT_OK && i < n; i++) key[i] = ss->s[i].prio;
    if (st == PEAT_OK) st = sort_u64(key, n, perm);
    free(key);
    if (st != PEAT_OK) {
        free(perm), free(cols);
        return st;
    }
    c->n = m;
    c->a = cols, c->b = cols + m, c->key = cols + 2 * m, c->x = cols + 3 * m, c->d = cols + 4 * m;
    for (size_t i = 0; i < m; i++) {
        const peat_sample *e = &ss->s[perm[i]];
        c->a[i] = e->a, c->b[i] = e->b, c->key[i] = e->key, c->x[i] = e->x, c->d[i] = e->d;
    }
    free(perm);
    return PEAT_OK;
}

void peat_sample_cols_free(peat_sample_cols *c)
{
    free(c->a);
    memset(c, 0, sizeof *c);
}

peat_status peat_sample_argsort(const double *v, size_t n, uint32_t *perm)
{
    uint64_t *key = malloc(n * sizeof *key + 1);
    if (!key) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: radix sort of %zu", n);
    for (size_t i = 0; i < n; i++) key[i] = dkey(v[i]);
    peat_status st = sort_u64(key, n, perm);
    free(key);
    return st;
}
