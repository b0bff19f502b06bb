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
    memset(ss, 0, sizeof *ss);
}

/* splitmix64's finaliser: a bijection of 64-bit words with full avalanche. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t peat_sample_prio(int64_t call, int64_t i)
{
    /* the id (call, i) packed into one word is unique for i < 2^40 and call < 2^24; the mixer is
     * a bijection, so priorities never tie and the k smallest are one well-defined set */
    return mix64(((uint64_t)call << 40) ^ (uint64_t)i ^ 0x9e3779b97f4a7c15ull);
}

/* Moves the k smallest priorities of s[0..n) to the front (quickselect, O(n) expected; the pivot
 * is the median of three, and priorities are hashes, so no adversarial order exists). */
static void select_k(peat_sample *s, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t a = s[lo].prio, b = s[(lo + hi) / 2].prio, c = s[hi].prio;
        uint64_t p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (s[i].prio < p) i++;
            while (s[j].prio > p) j--;
            if (i <= j) {
                peat_sample t = s[i];
                s[i++] = s[j];
                s[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
}

/* Keeps the k smallest and lowers the entry threshold to the largest of them. */
static void cut(peat_sample_set *ss)
{
    if (ss->n <= ss->k) return;
    select_k(ss->s, ss->n, ss->k);
    ss->n = ss->k;
    uint64_t mx = 0;
    for (int64_t i = 0; i < ss->n; i++)
        if (ss->s[i].prio > mx) mx = ss->s[i].prio;
    ss->thresh = mx;
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

static int by_prio(const void *a, const void *b)
{
    uint64_t x = ((const peat_sample *)a)->prio, y = ((const peat_sample *)b)->prio;
    return x < y ? -1 : x > y;
}

void peat_sample_set_finish(peat_sample_set *ss)
{
    cut(ss);
    if (ss->n > 1) qsort(ss->s, (size_t)ss->n, sizeof *ss->s, by_prio);
}

/* Order-preserving image of a double as an unsigned integer (-0 < +0, NaN never passed in). */
static uint64_t dkey(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u >> 63 ? ~u : u | 0x8000000000000000ull;
}

peat_status peat_sample_argsort(const double *v, size_t n, uint32_t *perm)
{
    uint64_t *key = malloc(2 * n * sizeof *key + 1);
    uint32_t *tmp = malloc(n * sizeof *tmp + 1);
    if (!key || !tmp) {
        free(key), free(tmp);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: radix sort of %zu", n);
    }
    uint64_t *k2 = key + n;
    for (size_t i = 0; i < n; i++) key[i] = dkey(v[i]), perm[i] = (uint32_t)i;
    /* LSD radix, 8 passes of 8 bits, skipping passes where every key has the same byte */
    for (int sh = 0; sh < 64; sh += 8) {
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++) cnt[((key[i] >> sh) & 0xff) + 1]++;
        int trivial = 0;
        for (int b = 1; b <= 256; b++) trivial |= cnt[b] == n;
        if (trivial) continue;
        for (int b = 0; b < 256; b++) cnt[b + 1] += cnt[b];
        for (size_t i = 0; i < n; i++) {
            size_t d = cnt[(key[i] >> sh) & 0xff]++;
            k2[d] = key[i];
            tmp[d] = perm[i];
        }
        memcpy(key, k2, n * sizeof *key);
        memcpy(perm, tmp, n * sizeof *perm);
    }
    free(key);
    free(tmp);
    return PEAT_OK;
}

peat_status peat_sample_sort(double *v, size_t n)
{
    uint32_t *perm = malloc(n * sizeof *perm + 1);
    double *tmp = malloc(n * sizeof *tmp + 1);
    peat_status st = perm && tmp ? peat_sample_argsort(v, n, perm)
                                 : PEAT_ERROR(PEAT_ERR_NOMEM, "analyzer: sort of %zu", n);
    if (st == PEAT_OK) {
        for (size_t i = 0; i < n; i++) tmp[i] = v[perm[i]];
        memcpy(v, tmp, n * sizeof *v);
    }
    free(perm);
    free(tmp);
    return st;
}
