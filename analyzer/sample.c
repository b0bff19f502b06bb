/* sample.c: bottom-k uniform sample of elements (mergeable) and the radix sorts rank statistics
 * use.
 */
#include "analyzer/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

peat_status peat_analyzer_sample_set_init(peat_sample_set *ss, int64_t k)
{
    memset(ss, 0, sizeof *ss);
    ss->k = k;
    ss->thresh = UINT64_MAX;
    return PEAT_OK;
}

void peat_analyzer_sample_set_free(peat_sample_set *ss)
{
    peat_analyzer_big_free(ss->prio, (size_t)ss->cap * (sizeof *ss->prio + sizeof *ss->v));
    free(ss->key);
    memset(ss, 0, sizeof *ss);
}

/* The k-th smallest (1-based) of v[0..n) (priorities are hashes, so no adversarial order
 * exists for the quickselect). Reorders v. */
PEAT_ANALYZER_DEFINE_SELECT(select_u64, uint64_t)

/* The order statistics lo <= hi (0-based) of key[0..n) (n > hi), in *klo and *khi: a histogram
 * of 11 bits from the highest bit in which the keys differ (their common prefix says nothing about
 * their order) names the bins that hold them, the keys of those bins are gathered in place (no
 * branch to mispredict) and a quickselect among them finds the two. Two reads of the keys and a
 * write instead of a quickselect's dozen passes; any distribution gives the right answer, only
 * slower where one bin holds most keys. Reorders key. */
static void order_stats(uint64_t *key, size_t n, size_t lo, size_t hi, uint64_t *klo, uint64_t *khi)
{
    uint64_t any = 0, all = ~0ull;
    for (size_t i = 0; i < n; i++) any |= key[i], all &= key[i];
    if (any == all) {
        *klo = *khi = key[0];
        return;
    }
    int top = 63 - __builtin_clzll(any ^ all), shift = top > 10 ? top - 10 : 0;
    size_t cnt[2048];
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++) cnt[(key[i] >> shift) & 0x7ff]++;
    size_t below = 0, b0 = 0;
    while (below + cnt[b0] <= lo) below += cnt[b0++];
    size_t b1 = b0, upto = below + cnt[b0];
    while (upto <= hi) upto += cnt[++b1];
    size_t m = 0; /* the keys of bins b0..b1, in place (m <= i) */
    for (size_t i = 0; i < n; i++) {
        uint64_t k = key[i];
        key[m] = k;
        m += (((k >> shift) & 0x7ff) - b0) <= b1 - b0;
    }
    select_u64(key, (int64_t)m, (int64_t)(hi - below));
    *khi = key[hi - below];
    uint64_t l = *khi; /* the largest below it, when lo < hi */
    if (lo < hi) l = key[0];
    for (size_t i = 1; i < hi - below; i++) l = key[i] > l ? key[i] : l;
    *klo = l;
}

/* The k-th smallest (1-based, k <= n) of the set's priorities, found in a copy of them in the
 * set's scratch. Returns 0 and leaves thresh alone when the scratch cannot be had. */
static int kth_priority(peat_sample_set *ss, int64_t k, uint64_t *th)
{
    if (!ss->key) ss->key = malloc((size_t)ss->cap * sizeof *ss->key);
    if (!ss->key) return 0;
    memcpy(ss->key, ss->prio, (size_t)ss->n * sizeof *ss->key);
    order_stats(ss->key, (size_t)ss->n, (size_t)k - 1, (size_t)k - 1, th, th);
    return 1;
}

/* Keeps the k smallest priorities and lowers the entry threshold to the largest of them. The
 * entries kept stay where they are; each dropped slot below k takes a kept entry from above k,
 * so only the dropped entries' slots are written. */
static void cut(peat_sample_set *ss)
{
    uint64_t th;
    if (ss->n <= ss->k || !kth_priority(ss, ss->k, &th)) return; /* out of memory: stays larger */
    int64_t hi = ss->n;
    for (int64_t i = 0; i < ss->k; i++) {
        if (ss->prio[i] <= th) continue;
        while (ss->prio[--hi] > th) {
        }
        ss->prio[i] = ss->prio[hi], ss->v[i] = ss->v[hi]; /* priorities are unique: exactly k */
    }
    ss->n = ss->k;
    ss->thresh = th;
}

/* Room for cap entries; 0 when it cannot be had (the set stays as it is). The priorities and the
 * values share one allocation, so that a full set's (7.5 MiB) is served by huge pages whole (the
 * priorities alone, 1.5 MiB, were below the huge page and faulted in 4 KiB at a time). */
static int set_grow(peat_sample_set *ss, int64_t cap)
{
    size_t n = (size_t)ss->n, old = (size_t)ss->cap, want = (size_t)cap;
    uint64_t *p = peat_analyzer_big_new(want * (sizeof *p + sizeof(peat_sample_val)));
    if (!p) return 0;
    peat_sample_val *v = (peat_sample_val *)(p + want);
    if (n) memcpy(p, ss->prio, n * sizeof *p), memcpy(v, ss->v, n * sizeof *v);
    peat_analyzer_big_free(ss->prio, old * (sizeof *p + sizeof *v));
    ss->prio = p, ss->v = v;
    ss->cap = cap;
    return 1;
}

void peat_analyzer_sample_set_push(peat_sample_set *ss, const peat_sample *x)
{
    if (x->prio > ss->thresh) return;
    if (ss->n == ss->cap) {
        /* geometric steps while small (a small accumulator stays small), then the whole capacity
         * at once, so that a large sample is copied to grow once, at 2^14 entries */
        int64_t full = ss->k + ss->k / 2, step = ss->cap ? 2 * ss->cap : 1024;
        step = step > 16384 ? full : step;
        if (ss->cap >= full || !set_grow(ss, step < full ? step : full)) {
            cut(ss); /* out of memory below full: cut what is there */
            if (x->prio > ss->thresh || ss->n == ss->cap) return;
        }
    }
    ss->prio[ss->n] = x->prio;
    ss->v[ss->n++] = (peat_sample_val){x->inv_s, x->key, x->x, x->d};
}

/* Order-preserving image of a double as an unsigned integer (-0 < +0, NaN never passed in). */
static uint64_t dkey(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u >> 63 ? ~u : u | 0x8000000000000000ull;
}

/* Sorts p[0..n) by the high 32 bits of each word, stably (the low 32 bits ride along): an LSD
 * radix sort on 11-bit digits, three passes, one read building all three histograms, and a digit
 * every word shares costs no pass. Keys and their payload move as one 8-byte word, so each pass
 * writes one stream per bin. Counting and scattering each run two independent chains (even and
 * odd words into two histograms; the first half of the words forward from each bin's start, the
 * second half backward from its end): where many words share a digit (an exponent), a counter
 * updated word after word would wait on its own store every time. t is scratch of n. */
static void radix_hi32(uint64_t *p, uint64_t *t, size_t n)
{
    uint32_t cnt[2][3][2048];
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++) {
        uint32_t h = (uint32_t)(p[i] >> 32), (*c)[2048] = cnt[i & 1];
        c[0][h & 0x7ff]++, c[1][(h >> 11) & 0x7ff]++, c[2][h >> 22]++;
    }
    uint64_t *a = p, *b = t;
    size_t half = n / 2;
    for (int d = 0; d < 3; d++) {
        uint32_t *c0 = cnt[0][d], *c1 = cnt[1][d], lo[2048], sum = 0;
        int sh = 32 + 11 * d;
        size_t first = (a[0] >> sh) & 0x7ff;
        if (c0[first] + c1[first] == n) continue; /* every word has this digit */
        for (int bin = 0; bin < 2048; bin++) {
            lo[bin] = sum;
            sum += c0[bin] + c1[bin];
            c1[bin] = sum; /* one past the bin's end */
        }
        for (size_t i = 0, j = n; i < half; i++) {
            uint64_t u = a[i], v = a[--j];
            b[lo[(u >> sh) & 0x7ff]++] = u;
            b[--c1[(v >> sh) & 0x7ff]] = v;
        }
        if (n % 2) b[lo[(a[half] >> sh) & 0x7ff]++] = a[half];
        uint64_t *x = a;
        a = b, b = x;
    }
    if (a != p) memcpy(p, a, n * sizeof *p);
}

/* The sort key of v[i]: its order-preserving image; where zeros are equal (zeq, as == says for
 * ranks), -0 is taken as +0. */
static inline uint64_t vkey(const double *v, uint32_t i, int zeq)
{
    double x = v[i];
    return dkey(zeq && x == 0.0 ? 0.0 : x);
}

/* Orders a run of p (words: a key's high half above its index) whose high halves are equal by the
 * keys' low halves, stably: insertion sort for short runs, a radix sort of the low halves, in
 * place, for long ones (so that no input, however many near-equal keys it has, costs quadratic
 * time). t is scratch of len words. */
static void run_fix(const double *v, int zeq, uint64_t *p, size_t len, uint64_t *t)
{
    if (len <= 32) {
        for (size_t i = 1; i < len; i++) {
            uint64_t w = p[i], kw = vkey(v, (uint32_t)w, zeq);
            size_t j = i;
            for (; j > 0 && vkey(v, (uint32_t)p[j - 1], zeq) > kw; j--) p[j] = p[j - 1];
            p[j] = w;
        }
        return;
    }
    uint64_t hi = p[0] & 0xffffffff00000000ull;
    for (size_t i = 0; i < len; i++) p[i] = vkey(v, (uint32_t)p[i], zeq) << 32 | (uint32_t)p[i];
    radix_hi32(p, t, len);
    for (size_t i = 0; i < len; i++) p[i] = hi | (uint32_t)p[i];
}

/* Orders a run of p whose keys are all equal by tie[index] (unique values): a radix sort of the
 * ties' high halves, in place, then an insertion sort on the whole ties, which only moves the
 * rare pairs whose high halves are equal (ties are hashes, so no input makes that quadratic). t is
 * scratch of len words. */
static void tie_fix(const uint64_t *tie, uint64_t *p, size_t len, uint64_t *t)
{
    uint64_t hi = p[0] & 0xffffffff00000000ull;
    if (len > 32) {
        for (size_t i = 0; i < len; i++)
            p[i] = (tie[(uint32_t)p[i]] & 0xffffffff00000000ull) | (uint32_t)p[i];
        radix_hi32(p, t, len);
        for (size_t i = 0; i < len; i++) p[i] = hi | (uint32_t)p[i];
    }
    for (size_t i = 1; i < len; i++) {
        uint64_t w = p[i], tw = tie[(uint32_t)w];
        size_t j = i;
        for (; j > 0 && tie[(uint32_t)p[j - 1]] > tw; j--) p[j] = p[j - 1];
        p[j] = w;
    }
}

/* Within a run of p with equal high halves, already ordered by the whole keys: each run of equal
 * keys ordered by tie. t is scratch of len words. */
static void ties_order(const double *v, const uint64_t *tie, uint64_t *p, size_t len, uint64_t *t)
{
    for (size_t i = 0; i < len;) {
        size_t j = i + 1;
        uint64_t k = vkey(v, (uint32_t)p[i], 0);
        while (j < len && vkey(v, (uint32_t)p[j], 0) == k) j++;
        if (j - i > 1) tie_fix(tie, p + i, j - i, t);
        i = j;
    }
}

/* Sorts p[0..n) (words: the high half of v[index]'s key above its index) into the ascending order
 * of the keys, equal keys in the order of tie[index] (or of their index when tie is NULL; tie is
 * only given where zeros differ): a radix sort of the high halves, then each run of equal high
 * halves ordered by the low halves. That is the same permutation as a stable sort on the whole
 * keys, for about half the passes and bytes. t is scratch of n words. */
static void sort_words(const double *v, int zeq, const uint64_t *tie, uint64_t *p, size_t n,
                       uint64_t *t)
{
    if (n < 2) return;
    radix_hi32(p, t, n);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && (p[j] >> 32) == (p[i] >> 32)) j++;
        if (j - i > 1) {
            run_fix(v, zeq, p + i, j - i, t);
            if (tie) ties_order(v, tie, p + i, j - i, t);
        }
        i = j;
    }
}

void peat_analyzer_sample_cols_take(const peat_sample_set *ss, double *cols, uint64_t *prio,
                                    uint64_t *scratch, peat_sample_cols *c)
{
    size_t n = (size_t)ss->n, m = (size_t)(ss->n < ss->k ? ss->n : ss->k);
    uint64_t th = UINT64_MAX; /* the m-th smallest priority: every entry up to it is taken */
    if (n > m) {
        memcpy(scratch, ss->prio, n * sizeof *scratch);
        order_stats(scratch, n, m - 1, m - 1, &th, &th);
    }
    c->n = m;
    c->a = cols, c->d = cols + (prio ? 4 : 1) * m;
    c->b = c->key = c->x = NULL, c->prio = prio;
    if (!prio) { /* lean: a and d */
        for (size_t i = 0, j = 0; i < n; i++) {
            if (ss->prio[i] > th) continue;
            const peat_sample_val *e = &ss->v[i];
            c->a[j] = e->inv_s > 0.0 ? fabs(e->d) * e->inv_s : NAN;
            c->d[j++] = e->d;
        }
        return;
    }
    c->b = cols + m, c->key = cols + 2 * m, c->x = cols + 3 * m;
    for (size_t i = 0, j = 0; i < n; i++) {
        if (ss->prio[i] > th) continue;
        const peat_sample_val *e = &ss->v[i];
        int sok = e->inv_s > 0.0;
        c->a[j] = sok ? fabs(e->d) * e->inv_s : NAN;
        c->b[j] = sok ? fabs(e->x) * e->inv_s : NAN;
        c->key[j] = e->key, c->x[j] = e->x, c->d[j] = e->d;
        c->prio[j++] = ss->prio[i];
    }
}

void peat_analyzer_sample_argsort(const double *v, const uint64_t *tie, size_t n, uint32_t *perm,
                                  uint64_t *scratch)
{
    uint64_t *p = scratch;
    for (size_t i = 0; i < n; i++) p[i] = (dkey(v[i]) & 0xffffffff00000000ull) | i;
    sort_words(v, 0, tie, p, n, p + n);
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)p[i];
}

void peat_analyzer_sample_ranks(const double *v, size_t n, double *rank, uint64_t *scratch)
{
    uint64_t *p = scratch;
    for (size_t i = 0; i < n; i++) p[i] = (vkey(v, (uint32_t)i, 1) & 0xffffffff00000000ull) | i;
    sort_words(v, 1, NULL, p, n, p + n);
    /* equal keys are adjacent, and only keys with equal high halves need a look at the whole;
     * the values of a group are read before its ranks are written (rank may be v), and later
     * groups are other elements */
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && (p[j] >> 32) == (p[i] >> 32) &&
               vkey(v, (uint32_t)p[j], 1) == vkey(v, (uint32_t)p[i], 1))
            j++;
        double r = 0.5 * (double)(i + j + 1); /* mean of ranks i+1 .. j */
        for (size_t t = i; t < j; t++) rank[(uint32_t)p[t]] = r;
        i = j;
    }
}

/* The double whose dkey is u. */
static double undkey(uint64_t u)
{
    u = u >> 63 ? u & ~0x8000000000000000ull : ~u;
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

double peat_analyzer_sample_median(const double *v, size_t n, uint64_t *scratch)
{
    if (n == 0) return NAN;
    for (size_t i = 0; i < n; i++) scratch[i] = dkey(v[i]);
    size_t hi = n / 2, lo = n % 2 ? hi : hi - 1; /* the middle order statistics (0-based) */
    uint64_t l, h;
    order_stats(scratch, n, lo, hi, &l, &h);
    return n % 2 ? undkey(h) : 0.5 * (undkey(l) + undkey(h));
}
