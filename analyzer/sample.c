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

/* perm = the stable ascending order of key[0..n); key is clobbered. LSD radix sort, 11-bit
 * digits (six passes over 64 bits), skipping a pass where every key has the same digit; the
 * buffers alternate between passes instead of being copied back. */
static peat_status radix_u64(uint64_t *key, size_t n, uint32_t *perm)
{
    uint64_t *k2 = malloc(n * sizeof *k2 + 1);
    uint32_t *p2 = malloc(n * sizeof *p2 + 1);
    size_t *cnt = malloc(2049 * sizeof *cnt);
    if (!k2 || !p2 || !cnt) {
        free(k2), free(p2), free(cnt);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: radix sort of %zu", n);
    }
    uint64_t *ka = key, *kb = k2;
    uint32_t *pa = perm, *pb = p2;
    for (size_t i = 0; i < n; i++) pa[i] = (uint32_t)i;
    for (int sh = 0; sh < 64; sh += 11) {
        memset(cnt, 0, 2049 * sizeof *cnt);
        for (size_t i = 0; i < n; i++) cnt[((ka[i] >> sh) & 0x7ff) + 1]++;
        int trivial = 0;
        for (int b = 1; b <= 2048; b++) trivial |= cnt[b] == n;
        if (trivial) continue;
        for (int b = 0; b < 2048; b++) cnt[b + 1] += cnt[b];
        for (size_t i = 0; i < n; i++) {
            size_t d = cnt[(ka[i] >> sh) & 0x7ff]++;
            kb[d] = ka[i];
            pb[d] = pa[i];
        }
        uint64_t *tk = ka;
        ka = kb, kb = tk;
        uint32_t *tp = pa;
        pa = pb, pb = tp;
    }
    if (pa != perm) memcpy(perm, pa, n * sizeof *perm);
    free(k2), free(p2), free(cnt);
    return PEAT_OK;
}

peat_status peat_sample_set_finish(peat_sample_set *ss)
{
    cut(ss);
    size_t n = (size_t)ss->n;
    if (n < 2) return PEAT_OK;
    uint64_t *key = malloc(n * sizeof *key);
    uint32_t *perm = malloc(n * sizeof *perm);
    peat_sample *out = malloc(n * sizeof *out);
    peat_status st =
        key && perm && out ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: sample of %zu", n);
    for (size_t i = 0; st == PEAT_OK && i < n; i++) key[i] = ss->s[i].prio;
    if (st == PEAT_OK) st = radix_u64(key, n, perm);
    if (st == PEAT_OK) {
        for (size_t i = 0; i < n; i++) out[i] = ss->s[perm[i]];
        memcpy(ss->s, out, n * sizeof *out);
    }
    free(key), free(perm), free(out);
    return st;
}

peat_status peat_sample_argsort(const double *v, size_t n, uint32_t *perm)
{
    uint64_t *key = malloc(n * sizeof *key + 1);
    if (!key) return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: radix sort of %zu", n);
    for (size_t i = 0; i < n; i++) key[i] = dkey(v[i]);
    peat_status st = radix_u64(key, n, perm);
    free(key);
    return st;
}
