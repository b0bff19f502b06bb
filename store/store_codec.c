/* store_codec.c: encodes one chunk exactly as HDF5's shuffle + deflate filters store it, fast. */
#include "store/store_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* A byte plane whose sampled order-0 entropy is above this many bits per byte is written as
 * deflate "stored" blocks: the mantissa bytes of float data are close to random (7.5-8 bits),
 * coding them costs time to save a few percent. Exponent and sign planes (2-5 bits), zero runs
 * and index data stay well below it and are compressed; measured on the bench campaigns, 6.0
 * instead of 7.2 cost 1% of file size and bought 10% of write speed. The stream is still one
 * valid zlib stream, so HDF5's own deflate filter (h5dump, h5py, ...) decodes it.
 * Float planes are Huffman-coded without LZ77 matching: their bytes are close to independent,
 * so matching finds little (exponent plane 3.0x Huffman-only vs 2.3x level-1 matching).
 * Integer and text chunks keep zlib with matching (index runs, JSON). */
#define STORE_STORED_ENTROPY 6.0
/* Bytes sampled per plane of an integer or text chunk for the choice between zlib and stored
 * (plane_entropy): the estimate is biased low by about 255 / (2 N ln 2) = 0.18 bit at 1024,
 * far from the margin between 6.0 and the ~7.9-8 bits of random bytes. */
#define STORE_ENTROPY_SAMPLES 1024

/* Bytes of a float chunk's plane sampled to choose between coding and storing it and to build
 * its Huffman code (a full histogram was a quarter of the encoder's time). */
#define STORE_PLANE_SAMPLES 4096

/* Elements sampled to decide whether a tensor is worth compressing (where a tensor goes, not how
 * it is coded: the encoder samples each plane again). With the Miller-Madow correction 256
 * samples read random mantissa bytes at 7.5-8 bits; on the gpt campaign's attention inputs the
 * estimate said 15% saved where coding saved 16%. */
#define STORE_ESTIMATE_SAMPLES 256

/* c * log2(c) for every count a sample can reach (<= STORE_PLANE_SAMPLES): the entropy is then
 * log2(cnt) - sum(c log2 c) / cnt, one table load per symbol instead of a log2 call (the log2
 * calls were ~4% of the write profile, as much as the Huffman coding). */
#define STORE_CLOG_N (STORE_PLANE_SAMPLES + 1)
static double clog_table[STORE_CLOG_N];
_Static_assert(2 * STORE_ESTIMATE_SAMPLES < STORE_CLOG_N, "estimate counts index clog_table");
static pthread_once_t clog_once = PTHREAD_ONCE_INIT;

static void clog_init(void)
{
    clog_table[0] = 0.0;
    for (int c = 1; c < STORE_CLOG_N; c++) clog_table[c] = (double)c * log2((double)c);
}

/* The k-th of a sample's positions in [0, n): a Weyl sequence (k times an odd constant, mod n)
 * scatters them over the data; an even stride hit the same few columns of a tensor whose
 * inner dimensions divide it (every sample a head dimension 0) and misjudged it. */
static size_t sample_pos(size_t k, size_t n)
{
    /* the fraction k * phi mod 1 in 32 bits, times n (n < 2^32 here: a plane or a tensor of
     * fewer than 2^32 elements; larger ones wrap, which only thins the sample) */
    uint32_t frac = (uint32_t)((uint64_t)k * UINT64_C(2654435769));
    return (size_t)(((uint64_t)frac * (uint64_t)(n & 0xffffffffu)) >> 32);
}

/* Order-0 entropy of a byte histogram of cnt counts (each < STORE_CLOG_N). */
static double hist_entropy(const uint32_t *hist, size_t cnt)
{
    pthread_once(&clog_once, clog_init);
    double sum = 0.0;
    for (int b = 0; b < 256; b++) sum += clog_table[hist[b]];
    return log2((double)cnt) - sum / (double)cnt;
}

double store_deflate_estimate(const peat_tensor *t)
{
    size_t es = peat_dtype_size(t->dtype), n = (size_t)peat_tensor_numel(t);
    const unsigned char *p = t->data;
    if (n == 0 || es > 8) return (double)(n * es);
    pthread_once(&clog_once, clog_init);
    /* one pass over STORE_ESTIMATE_SAMPLES elements spread over the tensor, a histogram per byte
     * plane; then what the encoder below does with each plane: Huffman-coded (about its
     * entropy, plus a block header) when the entropy is low enough, else stored */
    uint16_t hist[8][256];
    memset(hist, 0, es * sizeof hist[0]);
    size_t cnt = n < STORE_ESTIMATE_SAMPLES ? n : STORE_ESTIMATE_SAMPLES;
    for (size_t k = 0; k < cnt; k++) {
        const unsigned char *e = p + (cnt == n ? k : sample_pos(k, n)) * es;
        for (size_t j = 0; j < es; j++) hist[j][e[j]]++;
    }
    double est = 0.0, lc = log2((double)cnt);
    for (size_t j = 0; j < es; j++) {
        double sum = 0.0;
        int used = 0, top = 0;
        for (int b = 0; b < 256; b++) { /* branch-free: a sample's bins are hard to predict */
            int c = hist[j][b];
            sum += clog_table[c];
            used += c != 0;
            top = c > top ? c : top;
        }
        /* Miller-Madow: the plug-in entropy of a sample is low by about (K - 1) / (2 N ln 2);
         * uncorrected, planes just above the encoder's threshold read as compressible */
        double h =
            lc - sum / (double)cnt + (double)(used - 1) / (2.0 * (double)cnt * 0.69314718055994531);
        /* a Huffman code spends whole bits: at least 1 a symbol, and up to p_max + 0.086 above
         * the entropy (Gallager); with the entropy alone, skewed planes looked twice as
         * compressible as they came out (measured on the gpt campaign's attention inputs) */
        double bits = h + (double)top / (double)cnt + 0.086;
        bits = bits < 1.0 ? 1.0 : bits;
        est += h <= STORE_STORED_ENTROPY && bits < 8.0 ? (double)n * bits / 8.0 + 100.0 : (double)n;
    }
    return est;
}

/* Byte histogram in four interleaved tables: a plane of few distinct values (an exponent
 * plane) would otherwise stall on every increment of the same counter. */
static void byte_hist(const unsigned char *p, size_t n, uint32_t hist[256])
{
    uint32_t h[4][256];
    memset(h, 0, sizeof h);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        h[0][p[i]]++;
        h[1][p[i + 1]]++;
        h[2][p[i + 2]]++;
        h[3][p[i + 3]]++;
    }
    for (; i < n; i++) h[0][p[i]]++;
    for (int b = 0; b < 256; b++) hist[b] = h[0][b] + h[1][b] + h[2][b] + h[3][b];
}

/* A byte histogram of p[0..n): every byte when n <= samples, else `samples` bytes at Weyl
 * positions. Returns the number of bytes counted. */
static size_t sample_hist(const unsigned char *p, size_t n, size_t samples, uint32_t hist[256])
{
    if (n <= samples) {
        byte_hist(p, n, hist);
        return n;
    }
    memset(hist, 0, 256 * sizeof *hist);
    for (size_t k = 0; k < samples; k++) hist[p[sample_pos(k, n)]]++;
    return samples;
}

static double plane_entropy(const unsigned char *p, size_t n)
{
    if (n == 0) return 0.0;
    uint32_t hist[256];
    return hist_entropy(hist, sample_hist(p, n, STORE_ENTROPY_SAMPLES, hist));
}

/* Adler-32 (RFC 1950), SSE2 where available: zlib's scalar loop was ~1/6 of the chunk encoder's
 * time. The sums of a 16-byte vector are formed with psadbw (byte sum) and pmaddwd (byte sum
 * weighted 16..1); running totals stay in 64-bit lanes, reduced mod 65521 once per block. */
static uint32_t store_adler32(uint32_t adler, const unsigned char *p, size_t n)
{
    uint64_t s1 = adler & 0xffff, s2 = (adler >> 16) & 0xffff;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    const __m128i w_lo = _mm_setr_epi16(16, 15, 14, 13, 12, 11, 10, 9);
    const __m128i w_hi = _mm_setr_epi16(8, 7, 6, 5, 4, 3, 2, 1);
    while (n >= 16) {
        /* up to 1 MiB per block: every lane stays far below 2^63, weighted sums below 2^31 */
        size_t k = n / 16 > 65536 ? 65536 : n / 16, len = k * 16;
        __m128i v1 = zero, vp = zero, v2 = zero;
        for (size_t i = 0; i < k; i++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * i));
            vp = _mm_add_epi64(vp, v1);
            v1 = _mm_add_epi64(v1, _mm_sad_epu8(v, zero));
            v2 = _mm_add_epi32(v2, _mm_madd_epi16(_mm_unpacklo_epi8(v, zero), w_lo));
            v2 = _mm_add_epi32(v2, _mm_madd_epi16(_mm_unpackhi_epi8(v, zero), w_hi));
        }
        uint64_t a1[2], ap[2];
        uint32_t a2[4];
        _mm_storeu_si128((__m128i *)a1, v1);
        _mm_storeu_si128((__m128i *)ap, vp);
        _mm_storeu_si128((__m128i *)a2, v2);
        s2 += (uint64_t)len * s1 + 16 * (ap[0] + ap[1]) + (uint64_t)a2[0] + a2[1] + a2[2] + a2[3];
        s1 += a1[0] + a1[1];
        s1 %= 65521;
        s2 %= 65521;
        p += len;
        n -= len;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        s1 += p[i];
        s2 += s1;
    }
    s1 %= 65521;
    s2 %= 65521;
    return (uint32_t)(s2 << 16 | s1);
}

void store_codec_free(store_codec *c)
{
    if (c->ready) deflateEnd(&c->z);
    memset(c, 0, sizeof *c);
}

/* Switches the stream to (level, strategy); a no-op when already there. */
static int set_params(store_codec *c, int level, int strategy)
{
    if (c->level == level && c->strategy == strategy) return Z_OK;
    c->level = level;
    c->strategy = strategy;
    return deflateParams(&c->z, level, strategy);
}

/* Adler-32 after n more zero bytes: the sum a is unchanged, b grows by n*a (mod 65521), so the
 * zero padding is checksummed without reading it. */
static uLong adler_zeros(uLong adler, size_t n)
{
    uLong a = adler & 0xffff, b = (adler >> 16) & 0xffff;
    b = (uLong)((b + (uint64_t)(n % 65521) * a) % 65521);
    return (b << 16) | a;
}

static int feed(store_codec *c, const unsigned char *p, size_t n, int zeros)
{
    if (n == 0) return Z_OK;
    c->adler = zeros ? adler_zeros(c->adler, n) : store_adler32((uint32_t)c->adler, p, n);
    c->z.next_in = (unsigned char *)p;
    c->z.avail_in = (uInt)n;
    int zr = deflate(&c->z, Z_NO_FLUSH);
    return zr == Z_OK && c->z.avail_in == 0 ? Z_OK : (zr == Z_OK ? Z_BUF_ERROR : zr);
}

/* ---- a deflate writer of our own for float chunks ----
 * Float planes need no LZ77 matching (see above), and zlib's Huffman-only mode still runs its
 * generic per-symbol machinery (~200 MB/s); this writer emits the same kinds of blocks (stored,
 * one dynamic Huffman block per plane, fixed-Huffman runs for the zero padding) at memcpy to
 * ~1 GB/s. Any inflate (HDF5's deflate filter) decodes them. */

typedef struct {
    unsigned char *p, *end;
    uint64_t buf;
    int n;
    int overflow;
} bitw;

static void bw_put(bitw *w, uint32_t bits, int len)
{
    w->buf |= (uint64_t)bits << w->n;
    w->n += len;
    while (w->n >= 8) {
        if (w->p == w->end) {
            w->overflow = 1;
            return;
        }
        *w->p++ = (unsigned char)w->buf;
        w->buf >>= 8;
        w->n -= 8;
    }
}

static void bw_align(bitw *w)
{
    if (w->n > 0) bw_put(w, 0, 8 - w->n);
}

/* The low len (<= 16) bits of code, reversed: two lookups in a byte-reversal table. */
static uint8_t rev8[256];
static pthread_once_t rev8_once = PTHREAD_ONCE_INIT;
static void rev8_init(void)
{
    for (int b = 0; b < 256; b++) {
        int r = 0;
        for (int i = 0; i < 8; i++) r |= ((b >> i) & 1) << (7 - i);
        rev8[b] = (uint8_t)r;
    }
}

static uint32_t bit_reverse(uint32_t code, int len)
{
    pthread_once(&rev8_once, rev8_init);
    uint32_t r = (uint32_t)rev8[code & 255] << 8 | rev8[(code >> 8) & 255];
    return r >> (16 - len);
}

/* Stored blocks (the plane's bytes as they are, 5 bytes of header per 64 KiB). */
static void put_stored(bitw *w, const unsigned char *src, size_t n)
{
    while (n > 0) {
        size_t take = n < 65535 ? n : 65535;
        bw_put(w, 0, 3); /* BFINAL 0, BTYPE 00 */
        bw_align(w);
        if ((size_t)(w->end - w->p) < take + 4) {
            w->overflow = 1;
            return;
        }
        w->p[0] = (unsigned char)take;
        w->p[1] = (unsigned char)(take >> 8);
        w->p[2] = (unsigned char)~take;
        w->p[3] = (unsigned char)(~take >> 8);
        memcpy(w->p + 4, src, take);
        w->p += 4 + take;
        src += take;
        n -= take;
    }
}

/* n zero bytes as one fixed-Huffman block: a literal 0, then copies at distance 1. */
static const uint16_t len_base[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};

static void put_fixed_sym(bitw *w, int sym)
{
    if (sym < 144)
        bw_put(w, bit_reverse(0x30u + (uint32_t)sym, 8), 8);
    else if (sym < 256)
        bw_put(w, bit_reverse(0x190u + (uint32_t)(sym - 144), 9), 9);
    else if (sym < 280)
        bw_put(w, bit_reverse((uint32_t)(sym - 256), 7), 7);
    else
        bw_put(w, bit_reverse(0xc0u + (uint32_t)(sym - 280), 8), 8);
}

static void put_zeros(bitw *w, size_t n)
{
    if (n == 0) return;
    bw_put(w, 1u << 1, 3); /* BFINAL 0, BTYPE 01 (fixed) */
    put_fixed_sym(w, 0);
    n--;
    while (n >= 3) {
        size_t len = n > 258 ? 258 : n;
        if (n - len > 0 && n - len < 3) len = n - 3; /* leave a copyable remainder */
        int c = 28;
        while (len_base[c] > len) c--;
        put_fixed_sym(w, 257 + c);
        if (len_extra[c]) bw_put(w, (uint32_t)(len - len_base[c]), len_extra[c]);
        bw_put(w, 0, 5); /* distance code 0: distance 1 */
        n -= len;
    }
    while (n-- > 0) put_fixed_sym(w, 0);
    put_fixed_sym(w, 256);
}

/* Longest literal code: 4 codes and the 7 bits a buffer may hold fit 64 bits (the literal loop
 * writes 4 codes a step); a byte plane of <= 32 Ki symbols loses nothing measurable to it. */
#define STORE_HUFF_MAXBITS 12

/* Sorts m <= 288 distinct keys ascending: LSD radix, 8 bits a pass, only as many passes as the
 * largest key needs (qsort's indirect compares were ~3% of the write profile). The keys are
 * distinct, so the order is the one any sort gives. */
static void key_sort(uint64_t *key, int m)
{
    uint64_t tmp[288], maxk = 0, *a = key, *b = tmp;
    for (int i = 0; i < m; i++) maxk = key[i] > maxk ? key[i] : maxk;
    for (int shift = 0; shift < 64 && (maxk >> shift) != 0; shift += 8) {
        int count[257] = {0};
        for (int i = 0; i < m; i++) count[((a[i] >> shift) & 255) + 1]++;
        for (int d = 0; d < 256; d++) count[d + 1] += count[d];
        for (int i = 0; i < m; i++) b[count[(a[i] >> shift) & 255]++] = a[i];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    if (a != key) memcpy(key, a, (size_t)m * sizeof *key);
}

/* Huffman code lengths for freq[0..n) (n <= 288), none longer than maxbits: a Huffman tree
 * built by the two-queue method on sorted weights; leaves deeper than maxbits are cut to maxbits
 * and the Kraft sum brought back to 1 (below), and the lengths go to the symbols by frequency,
 * longest to the rarest. At least two symbols get a length: inflate refuses an incomplete
 * code-length code. */
static void huff_lengths(const uint32_t *freq_in, int n, int maxbits, uint8_t *len)
{
    uint32_t freq[288];
    int sym[288], m = 0;
    for (int i = 0; i < n; i++) {
        freq[i] = freq_in[i];
        len[i] = 0;
    }
    for (int i = 0; i < n && m < 2; i++)
        if (freq[i]) m++;
    for (int i = 0; i < n && m < 2; i++)
        if (!freq[i]) {
            freq[i] = 1;
            m++;
        }
    m = 0;
    for (int i = 0; i < n; i++)
        if (freq[i]) sym[m++] = i;
    uint64_t key[288];
    for (int i = 0; i < m; i++) key[i] = (uint64_t)freq[sym[i]] << 9 | (uint64_t)sym[i];
    key_sort(key, m);
    for (int i = 0; i < m; i++) sym[i] = (int)(key[i] & 511);
    uint64_t w[576];
    int parent[576], leaf = 0, inner = m, inner_take = m;
    for (int i = 0; i < m; i++) w[i] = freq[sym[i]];
    for (int k = m; k < 2 * m - 1; k++) {
        int pick[2];
        for (int t = 0; t < 2; t++) {
            if (leaf < m && (inner_take >= inner || w[leaf] <= w[inner_take]))
                pick[t] = leaf++;
            else
                pick[t] = inner_take++;
        }
        w[k] = w[pick[0]] + w[pick[1]];
        parent[pick[0]] = parent[pick[1]] = k;
        inner = k + 1;
    }
    int depth[576], count[290] = {0};
    depth[2 * m - 2] = 0;
    for (int k = 2 * m - 3; k >= 0; k--) depth[k] = depth[parent[k]] + 1;
    for (int i = 0; i < m; i++) count[depth[i] < maxbits ? depth[i] : maxbits]++;
    /* the Kraft sum in units of 2^-maxbits: exactly 2^maxbits for the tree; capping the deep
     * leaves raised it. Each step takes one leaf off maxbits and splits a shorter one into two
     * a level down, which lowers the sum by exactly one unit (miniz's enforce_max_code_size) */
    uint32_t total = 0;
    for (int b = 1; b <= maxbits; b++) total += (uint32_t)count[b] << (maxbits - b);
    while (total > (1u << maxbits)) {
        count[maxbits]--;
        for (int b = maxbits - 1; b > 0; b--)
            if (count[b]) {
                count[b]--;
                count[b + 1] += 2;
                break;
            }
        total--;
    }
    /* sym[] is sorted by rising frequency: the rarest take the longest codes */
    for (int b = maxbits, i = 0; b >= 1; b--)
        for (int c = count[b]; c > 0; c--) len[sym[i++]] = (uint8_t)b;
}

/* Canonical codes (RFC 1951 3.2.2), bit-reversed for the LSB-first stream. */
static void huff_codes(const uint8_t *len, int n, uint16_t *code)
{
    int count[16] = {0}, next[16];
    for (int i = 0; i < n; i++) count[len[i]]++;
    count[0] = 0;
    int c = 0;
    for (int b = 1; b < 16; b++) {
        c = (c + count[b - 1]) << 1;
        next[b] = c;
    }
    for (int i = 0; i < n; i++)
        code[i] = len[i] ? (uint16_t)bit_reverse((uint32_t)next[len[i]]++, len[i]) : 0;
}

static const uint8_t clen_order[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                       11, 4,  12, 3, 13, 2, 14, 1, 15};

/* One dynamic-Huffman block of the bytes src[0..n) with their histogram; literals only. */
static void put_huffman(bitw *w, const unsigned char *src, size_t n, const uint32_t *hist)
{
    uint32_t freq[257];
    uint8_t len[258];
    uint16_t code[257];
    memcpy(freq, hist, 256 * sizeof *freq);
    freq[256] = 1; /* end of block */
    huff_lengths(freq, 257, STORE_HUFF_MAXBITS, len);
    huff_codes(len, 257, code);
    len[257] = 1; /* one distance code (never used): inflate accepts a lone 1-bit code */
    /* the 258 code lengths, zero runs as symbols 17/18 */
    int csym[258], cext[258], nc = 0;
    uint32_t cfreq[19] = {0};
    for (int i = 0; i < 258;) {
        int run = 1;
        if (len[i] == 0)
            while (i + run < 258 && len[i + run] == 0 && run < 138) run++;
        if (run >= 11) {
            csym[nc] = 18;
            cext[nc++] = run - 11;
        } else if (run >= 3) {
            csym[nc] = 17;
            cext[nc++] = run - 3;
        } else {
            run = 1;
            csym[nc] = len[i];
            cext[nc++] = 0;
        }
        cfreq[csym[nc - 1]]++;
        i += run;
    }
    uint8_t clen[19];
    uint16_t ccode[19];
    huff_lengths(cfreq, 19, 7, clen);
    huff_codes(clen, 19, ccode);
    int hclen = 19;
    while (hclen > 4 && clen[clen_order[hclen - 1]] == 0) hclen--;
    bw_put(w, 2u << 1, 3); /* BFINAL 0, BTYPE 10 (dynamic) */
    bw_put(w, 0, 5);       /* HLIT: 257 literal/length codes */
    bw_put(w, 0, 5);       /* HDIST: 1 distance code */
    bw_put(w, (uint32_t)(hclen - 4), 4);
    for (int i = 0; i < hclen; i++) bw_put(w, clen[clen_order[i]], 3);
    for (int i = 0; i < nc; i++) {
        bw_put(w, ccode[csym[i]], clen[csym[i]]);
        if (csym[i] == 17)
            bw_put(w, (uint32_t)cext[i], 3);
        else if (csym[i] == 18)
            bw_put(w, (uint32_t)cext[i], 7);
    }
    /* the literals: four codes (at most 48 bits) joined pairwise first (independent of the
     * buffer's fill, so the four shifts overlap), then into a 64-bit buffer holding fewer than
     * 8 bits, all 8 bytes stored and the whole bytes consumed, without a branch; the 8-byte
     * store needs 8 bytes of slack, inside the n * 2 + 16 checked here */
    if ((size_t)(w->end - w->p) < n * 2 + 16) {
        w->overflow = 1;
        return;
    }
    uint32_t cl[256]; /* code | length << 16: one load per symbol */
    for (int b = 0; b < 256; b++) cl[b] = (uint32_t)code[b] | (uint32_t)len[b] << 16;
    uint64_t buf = w->buf;
    int nb = w->n; /* < 8: bw_put leaves whole bytes written */
    unsigned char *o = w->p;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t a = cl[src[i]], b = cl[src[i + 1]], c = cl[src[i + 2]], d = cl[src[i + 3]];
        uint32_t la = a >> 16, lc = c >> 16;
        uint64_t ab = (uint64_t)(a & 0xffff) | (uint64_t)(b & 0xffff) << la;
        uint64_t cd = (uint64_t)(c & 0xffff) | (uint64_t)(d & 0xffff) << lc;
        uint32_t lab = la + (b >> 16), lcd = lc + (d >> 16);
        buf |= (ab | cd << lab) << nb;
        nb += (int)(lab + lcd);
        memcpy(o, &buf, 8); /* little-endian hosts only (HDF5 pools are LE; store_pool_type) */
        o += nb >> 3;
        buf >>= nb & ~7;
        nb &= 7;
    }
    for (; i < n; i++) {
        uint32_t a = cl[src[i]];
        buf |= (uint64_t)(a & 0xffff) << nb;
        nb += (int)(a >> 16);
        memcpy(o, &buf, 8);
        o += nb >> 3;
        buf >>= nb & ~7;
        nb &= 7;
    }
    w->buf = buf;
    w->n = nb;
    w->p = o;
    bw_put(w, code[256], len[256]);
}

/* Byte `plane` of each of the first nvalid elements: one plane of HDF5's shuffle filter. */
static void gather_plane(const unsigned char *src, size_t nvalid, size_t elsize, size_t plane,
                         unsigned char *out)
{
    size_t i = 0;
#if defined(__SSE2__)
    if (elsize == 4) { /* 16 elements a step: shift the byte down, mask, pack 32 -> 16 -> 8 */
        const __m128i mask = _mm_set1_epi32(0xff);
        const __m128i sh = _mm_cvtsi32_si128((int)(8 * plane));
        for (; i + 16 <= nvalid; i += 16) {
            const unsigned char *q = src + 4 * i;
            __m128i v0 =
                _mm_and_si128(_mm_srl_epi32(_mm_loadu_si128((const __m128i *)q), sh), mask);
            __m128i v1 =
                _mm_and_si128(_mm_srl_epi32(_mm_loadu_si128((const __m128i *)(q + 16)), sh), mask);
            __m128i v2 =
                _mm_and_si128(_mm_srl_epi32(_mm_loadu_si128((const __m128i *)(q + 32)), sh), mask);
            __m128i v3 =
                _mm_and_si128(_mm_srl_epi32(_mm_loadu_si128((const __m128i *)(q + 48)), sh), mask);
            __m128i lo = _mm_packs_epi32(v0, v1), hi = _mm_packs_epi32(v2, v3);
            _mm_storeu_si128((__m128i *)(out + i), _mm_packus_epi16(lo, hi));
        }
    }
#endif
    for (; i < nvalid; i++) out[i] = src[i * elsize + plane];
}

peat_status store_plane_encode(const unsigned char *src, size_t nelem, size_t nvalid, size_t elsize,
                               size_t plane, int level, unsigned char *scratch, unsigned char *dst,
                               size_t dst_cap, size_t *dst_len, uint32_t *adler)
{
    const unsigned char *p = src;
    if (elsize > 1) {
        gather_plane(src, nvalid, elsize, plane, scratch);
        p = scratch;
    }
    size_t valid_n = elsize > 1 ? nvalid : nvalid * elsize,
           plane_n = elsize > 1 ? nelem : nelem * elsize;
    uint32_t a = store_adler32(1u, p, valid_n);
    bitw w = {dst, dst + dst_cap, 0, 0, 0};
    int packed = 0;
    if (level > 0 && valid_n > 0) {
        /* the code is built from a sample of the plane (a full histogram was a quarter of the
         * encoder's time): counts scaled by 8, plus 1 for every byte value, so a value the sample
         * missed still has a (long) code */
        uint32_t hist[256];
        size_t cnt = sample_hist(p, valid_n, STORE_PLANE_SAMPLES, hist);
        if (hist_entropy(hist, cnt) <= STORE_STORED_ENTROPY) {
            if (cnt < valid_n)
                for (int b = 0; b < 256; b++) hist[b] = 8 * hist[b] + 1;
            bitw before = w;
            put_huffman(&w, p, valid_n, hist);
            /* the sample misjudged the plane (or the output would not fit): stored after all */
            packed = !w.overflow && (size_t)(w.p - before.p) <= valid_n;
            if (!packed) w = before;
        }
    }
    if (!packed) put_stored(&w, p, valid_n);
    if (plane_n > valid_n) {
        a = (uint32_t)adler_zeros(a, plane_n - valid_n);
        put_zeros(&w, plane_n - valid_n); /* the padding is never read: encoded as zeros */
    }
    /* end on a byte boundary with an empty stored block, so planes encoded apart (in parallel)
     * are joined by concatenation */
    bw_put(&w, 0, 3);
    bw_align(&w);
    if (w.overflow || w.end - w.p < 4)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "plane output buffer too small");
    memcpy(w.p, "\x00\x00\xff\xff", 4);
    *dst_len = (size_t)(w.p + 4 - dst);
    *adler = a;
    return PEAT_OK;
}

peat_status store_chunk_join(unsigned char *const *parts, const size_t *lens,
                             const uint32_t *adlers, size_t n_parts, size_t part_bytes,
                             unsigned char *dst, size_t dst_cap, size_t *dst_len)
{
    size_t len = 2;
    for (size_t j = 0; j < n_parts; j++) len += lens[j];
    if (dst_cap < len + 9) return PEAT_ERROR(PEAT_ERR_INTERNAL, "chunk output buffer too small");
    dst[0] = 0x78; /* deflate, 32 KiB window */
    dst[1] = 0x01; /* no dictionary; 0x7801 is a multiple of 31 as the header check requires */
    unsigned char *o = dst + 2;
    uLong a = adlers[0];
    for (size_t j = 0; j < n_parts; j++) {
        if (parts[j] != o) memmove(o, parts[j], lens[j]);
        o += lens[j];
        if (j > 0) a = adler32_combine(a, adlers[j], (z_off_t)part_bytes);
    }
    memcpy(o, "\x01\x00\x00\xff\xff", 5); /* last block: empty, stored, BFINAL 1 */
    o += 5;
    for (int i = 0; i < 4; i++) *o++ = (unsigned char)(a >> (24 - 8 * i)); /* big-endian */
    *dst_len = (size_t)(o - dst);
    return PEAT_OK;
}

/* A float chunk as one zlib stream: its byte planes one after another (store_plane_encode),
 * the same bytes whether the planes are encoded here or in parallel. */
static peat_status encode_float_chunk(const unsigned char *src, size_t nelem, size_t nvalid,
                                      size_t elsize, int level, unsigned char *scratch,
                                      unsigned char *dst, size_t dst_cap, size_t *dst_len)
{
    unsigned char *parts[8];
    size_t lens[8];
    uint32_t adlers[8];
    size_t pos = 2;
    if (elsize > 8 || dst_cap < 16) return PEAT_ERROR(PEAT_ERR_INTERNAL, "bad float chunk");
    for (size_t j = 0; j < elsize; j++) {
        parts[j] = dst + pos;
        PEAT_TRY(store_plane_encode(src, nelem, nvalid, elsize, j, level, scratch, dst + pos,
                                    dst_cap - pos - 9, &lens[j], &adlers[j]));
        pos += lens[j];
    }
    return store_chunk_join(parts, lens, adlers, elsize, nelem, dst, dst_cap, dst_len);
}

peat_status store_chunk_encode(store_codec *c, const void *src, size_t nelem, size_t nvalid,
                               size_t elsize, int is_float, int level, unsigned char *shuf,
                               unsigned char *dst, size_t dst_cap, size_t *dst_len)
{
    int strategy = is_float ? Z_HUFFMAN_ONLY : Z_DEFAULT_STRATEGY;
    size_t nbytes = nelem * elsize;
    const unsigned char *in = src;
    if (is_float && elsize > 1)
        return encode_float_chunk(src, nelem, nvalid, elsize, level, shuf, dst, dst_cap, dst_len);
    /* HDF5's shuffle filter: byte j of element i goes to j*nelem + i (no-op for 1-byte types) */
    if (elsize > 1) {
        for (size_t j = 0; j < elsize; j++) gather_plane(src, nvalid, elsize, j, shuf + j * nelem);
        in = shuf;
    }
    size_t planes = elsize > 1 ? elsize : 1, plane_n = nbytes / planes,
           valid_n = elsize > 1 ? nvalid : nvalid * elsize;
    if (elsize > 1) /* zlib reads the padding: zero it */
        for (size_t j = 0; j < planes; j++)
            memset(shuf + j * plane_n + valid_n, 0, plane_n - valid_n);
    /* one stream per store, reset per chunk: deflateInit's allocations are not per chunk. It is a
     * raw deflate stream wrapped here in the zlib header and Adler-32 trailer HDF5 expects, so
     * that the checksum of the zero padding is computed instead of read. */
    if (!c->ready) {
        memset(&c->z, 0, sizeof c->z);
        if (deflateInit2(&c->z, level < 0 ? 0 : level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) !=
            Z_OK)
            return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflateInit failed");
        c->ready = 1;
        c->level = level < 0 ? 0 : level;
        c->strategy = Z_DEFAULT_STRATEGY;
    } else if (deflateReset(&c->z) != Z_OK) {
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflateReset failed");
    }
    if (dst_cap < 6) return PEAT_ERROR(PEAT_ERR_INTERNAL, "chunk output buffer too small");
    dst[0] = 0x78; /* deflate, 32 KiB window */
    dst[1] = 0x01; /* no dictionary; 0x7801 is a multiple of 31 as the header check requires */
    c->adler = adler32(0L, Z_NULL, 0);
    c->z.next_out = dst + 2;
    c->z.avail_out = (uInt)(dst_cap - 6);
    int zr = Z_OK;
    for (size_t j = 0; j < planes && zr == Z_OK; j++) {
        const unsigned char *plane = in + j * plane_n;
        int want = level <= 0 || plane_entropy(plane, valid_n) > STORE_STORED_ENTROPY ? 0 : level;
        zr = set_params(c, want, want ? strategy : Z_DEFAULT_STRATEGY);
        if (zr == Z_OK) zr = feed(c, plane, valid_n, 0);
        /* the zero padding: run-length coding makes it a few bytes, at memset speed */
        if (zr == Z_OK && plane_n > valid_n) zr = set_params(c, 1, Z_RLE);
        /* from a block of zeros, not the source: past nvalid the caller's bytes are anything */
        static const unsigned char zeros[4096];
        for (size_t left = plane_n - valid_n; zr == Z_OK && left > 0;) {
            size_t take = left < sizeof zeros ? left : sizeof zeros;
            zr = feed(c, zeros, take, 1);
            left -= take;
        }
    }
    if (zr == Z_OK) zr = deflate(&c->z, Z_FINISH);
    if (zr != Z_STREAM_END)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflate of a %zu-byte chunk failed (zlib %d)", nbytes,
                          zr);
    size_t len = 2 + (dst_cap - 6 - c->z.avail_out);
    for (int i = 0; i < 4; i++)
        dst[len + (size_t)i] = (unsigned char)(c->adler >> (24 - 8 * i)); /* big-endian */
    *dst_len = len + 4;
    return PEAT_OK;
}
