/* store_codec.c: encodes one chunk exactly as HDF5's shuffle + deflate filters store it, fast. */
#include "harness/store/store_impl.h"

#include <math.h>
#include <string.h>

/* A byte plane whose order-0 entropy is above this many bits per byte is written as deflate
 * "stored" blocks: the low mantissa bytes of float data are close to random, deflate would
 * spend ~20x a memcpy on them to save a few percent. Exponent and sign planes, zero runs and
 * index data stay well below it and are compressed. The stream is still one valid zlib
 * stream, so HDF5's own deflate filter (h5dump, h5py, ...) decodes it. */
#define STORE_STORED_ENTROPY 7.2
/* Bytes sampled per plane for the entropy estimate (bias ~0.05 bit at 4096). */
#define STORE_ENTROPY_SAMPLES 4096

static double plane_entropy(const unsigned char *p, size_t n)
{
    if (n == 0) return 0.0;
    uint32_t hist[256] = {0};
    size_t step = n > STORE_ENTROPY_SAMPLES ? n / STORE_ENTROPY_SAMPLES : 1, cnt = 0;
    for (size_t i = 0; i < n; i += step, cnt++) hist[p[i]]++;
    double h = 0.0;
    for (int b = 0; b < 256; b++)
        if (hist[b]) {
            double q = (double)hist[b] / (double)cnt;
            h -= q * log2(q);
        }
    return h;
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

static int feed(store_codec *c, const unsigned char *p, size_t n)
{
    if (n == 0) return Z_OK;
    c->z.next_in = (unsigned char *)p;
    c->z.avail_in = (uInt)n;
    int zr = deflate(&c->z, Z_NO_FLUSH);
    return zr == Z_OK && c->z.avail_in == 0 ? Z_OK : (zr == Z_OK ? Z_BUF_ERROR : zr);
}

peat_status store_chunk_encode(store_codec *c, const void *src, size_t nelem, size_t nvalid, size_t elsize,
                               int level, unsigned char *shuf, unsigned char *dst, size_t dst_cap,
                               size_t *dst_len)
{
    size_t nbytes = nelem * elsize;
    const unsigned char *in = src;
    /* HDF5's shuffle filter: byte j of element i goes to j*nelem + i (no-op for 1-byte types) */
    if (elsize > 1) {
        for (size_t j = 0; j < elsize; j++) {
            unsigned char *plane = shuf + j * nelem;
            const unsigned char *s = in + j;
            for (size_t i = 0; i < nvalid; i++) plane[i] = s[i * elsize];
            memset(plane + nvalid, 0, nelem - nvalid); /* the padding is zeros */
        }
        in = shuf;
    }
    /* one stream per store, reset per chunk: deflateInit's allocations are not per chunk */
    if (!c->ready) {
        memset(&c->z, 0, sizeof c->z);
        if (deflateInit(&c->z, level) != Z_OK) return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflateInit failed");
        c->ready = 1;
        c->level = level;
        c->strategy = Z_DEFAULT_STRATEGY;
    } else if (deflateReset(&c->z) != Z_OK) {
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflateReset failed");
    }
    c->z.next_out = dst;
    c->z.avail_out = (uInt)dst_cap;
    int zr = Z_OK;
    size_t planes = elsize > 1 ? elsize : 1, plane_n = nbytes / planes, valid_n = elsize > 1 ? nvalid : nvalid * elsize;
    for (size_t j = 0; j < planes && zr == Z_OK; j++) {
        const unsigned char *plane = in + j * plane_n;
        int want = plane_entropy(plane, valid_n) > STORE_STORED_ENTROPY ? 0 : level;
        zr = set_params(c, want, Z_DEFAULT_STRATEGY);
        if (zr == Z_OK) zr = feed(c, plane, valid_n);
        /* the zero padding: run-length coding makes it a few bytes, at memset speed */
        if (zr == Z_OK && plane_n > valid_n) zr = set_params(c, level, Z_RLE);
        if (zr == Z_OK) zr = feed(c, plane + valid_n, plane_n - valid_n);
    }
    if (zr == Z_OK) zr = deflate(&c->z, Z_FINISH);
    if (zr != Z_STREAM_END)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflate of a %zu-byte chunk failed (zlib %d)", nbytes, zr);
    *dst_len = dst_cap - c->z.avail_out;
    return PEAT_OK;
}
