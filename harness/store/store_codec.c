/* store_codec.c: encodes one chunk exactly as HDF5's shuffle + deflate filters store it, fast. */
#include "harness/store/store_impl.h"

#include <math.h>
#include <string.h>
#include <zlib.h>

/* A byte plane whose order-0 entropy is above this many bits per byte is written as deflate
 * "stored" blocks: the low mantissa bytes of float data are close to random, deflate would
 * spend ~20x a memcpy on them to save a few percent. Exponent and sign planes, zero runs,
 * index data and padding stay well below it and are compressed. The stream is still one valid
 * zlib stream, so HDF5's own deflate filter (h5dump, h5py, ...) decodes it. */
#define STORE_STORED_ENTROPY 7.2

static double plane_entropy(const unsigned char *p, size_t n)
{
    if (n == 0) return 0.0;
    size_t hist[256] = {0};
    /* a strided sample is enough to tell random bytes from structured ones */
    size_t step = n > 16384 ? n / 16384 : 1, cnt = 0;
    for (size_t i = 0; i < n; i += step, cnt++) hist[p[i]]++;
    double h = 0.0;
    for (int b = 0; b < 256; b++)
        if (hist[b]) {
            double q = (double)hist[b] / (double)cnt;
            h -= q * log2(q);
        }
    return h;
}

peat_status store_chunk_encode(const void *src, size_t nelem, size_t elsize, int level,
                               unsigned char *shuf, unsigned char *dst, size_t dst_cap,
                               size_t *dst_len)
{
    size_t nbytes = nelem * elsize;
    const unsigned char *in = src;
    /* HDF5's shuffle filter: byte j of element i goes to j*nelem + i (no-op for 1-byte types) */
    if (elsize > 1) {
        for (size_t j = 0; j < elsize; j++) {
            unsigned char *plane = shuf + j * nelem;
            const unsigned char *s = in + j;
            for (size_t i = 0; i < nelem; i++) plane[i] = s[i * elsize];
        }
        in = shuf;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit(&z, level) != Z_OK) return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflateInit failed");
    z.next_out = dst;
    z.avail_out = (uInt)dst_cap;
    int cur = level, zr = Z_OK;
    size_t planes = elsize > 1 ? elsize : 1, plane_n = nbytes / planes;
    for (size_t j = 0; j < planes && zr == Z_OK; j++) {
        const unsigned char *plane = in + j * plane_n;
        int want = plane_entropy(plane, plane_n) > STORE_STORED_ENTROPY ? 0 : level;
        if (want != cur) {
            zr = deflateParams(&z, want, Z_DEFAULT_STRATEGY);
            cur = want;
            if (zr != Z_OK) break;
        }
        z.next_in = (unsigned char *)plane;
        z.avail_in = (uInt)plane_n;
        zr = deflate(&z, Z_NO_FLUSH);
        if (zr == Z_OK && z.avail_in != 0) zr = Z_BUF_ERROR;
    }
    if (zr == Z_OK) zr = deflate(&z, Z_FINISH);
    size_t len = dst_cap - z.avail_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END)
        return PEAT_ERROR(PEAT_ERR_INTERNAL, "deflate of a %zu-byte chunk failed (zlib %d)", nbytes, zr);
    *dst_len = len;
    return PEAT_OK;
}
