/* store_hash.c: 64-bit content hashes (XXH64 algorithm) for tensor dedup and row checksums. */
#include "store/store_impl.h"

#include <string.h>

/* XXH64 (public-domain algorithm by Y. Collet): fast enough that hashing every tensor costs far
 * less than compressing it, and well mixed, so dedup rarely has to compare bytes in vain. */
static const uint64_t P1 = 11400714785074694791ULL, P2 = 14029467366897019727ULL,
                      P3 = 1609587929392839161ULL, P4 = 9650029242287828579ULL,
                      P5 = 2870177450012600261ULL;

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}
static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian hosts only: the store's files are little-endian too */
    return v;
}
static inline uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t round1(uint64_t acc, uint64_t in)
{
    acc += in * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}
static inline uint64_t merge(uint64_t acc, uint64_t v)
{
    acc ^= round1(0, v);
    return acc * P1 + P4;
}

uint64_t peat_store_hash64(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data, *end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const unsigned char *limit = end - 32;
        do {
            v1 = round1(v1, rd64(p));
            v2 = round1(v2, rd64(p + 8));
            v3 = round1(v3, rd64(p + 16));
            v4 = round1(v4, rd64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
        h = merge(h, v1);
        h = merge(h, v2);
        h = merge(h, v3);
        h = merge(h, v4);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)n;
    while (p + 8 <= end) {
        h ^= round1(0, rd64(p));
        h = rotl(h, 27) * P1 + P4;
        p += 8;
    }
    if (p + 4 <= end) {
        h ^= (uint64_t)rd32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        h ^= (*p) * P5;
        h = rotl(h, 11) * P1;
        p++;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t peat_store_tensor_hash(const peat_tensor *t)
{
    /* dtype and shape are part of the identity: equal bytes under another shape are another
     * tensor (a reader must get the shape it wrote back) */
    int64_t head[2 + PEAT_MAX_DIMS] = {(int64_t)t->dtype, (int64_t)t->ndim};
    for (int d = 0; d < t->ndim && d < PEAT_MAX_DIMS; d++) head[2 + d] = t->shape[d];
    uint64_t h = peat_store_hash64(t->data, peat_tensor_nbytes(t), 0);
    return peat_store_hash64(head, sizeof head, h);
}

uint64_t peat_store_row_check(int table, const void *row, size_t size)
{
    /* the table number seeds the hash, so a row copied into another table does not validate */
    return peat_store_hash64(row, size - sizeof(uint64_t), 0x5045415400000000ULL + (uint64_t)table);
}
