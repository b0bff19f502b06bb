/* test_store.c: the HDF5 campaign store: round trips, dedup, refusal of bad files, kill/resume. */
#include <criterion/criterion.h>
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/record.h"
#include "harness/runtime/builtin.h"
#include "store/store_test.h"
#include "store/store.h"
#include "store/store_impl.h"
#include "store/store_latency.h"
#include "models/models.h"

/* ---- helpers ---- */

/* A stored record with its exact outputs (recomputed where the file does not keep them). */
static peat_status read_call(peat_store_t *s, int64_t i, peat_record **r)
{
    peat_status st = peat_runtime_builtin_init();
    if (st == PEAT_OK) st = peat_store_call_read(s, i, r);
    if (st == PEAT_OK) st = peat_record_compute_exact(*r);
    return st;
}

static char dir[256];

static void dir_make(void)
{
    snprintf(dir, sizeof dir, "/tmp/peat-test-store-XXXXXX");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp failed: %s", strerror(errno));
}

static void dir_remove(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static const char *path_in(const char *name)
{
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static peat_tensor *mk(peat_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    peat_tensor *t = NULL;
    cr_assert_eq(peat_tensor_alloc(dt, ndim, shape, &t), PEAT_OK, "alloc: %s", peat_error_last());
    peat_rng_t *r = peat_rng_new(seed);
    int64_t n = peat_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        peat_tensor_set(
            t, i, dt == PEAT_DTYPE_I32 ? (double)peat_rng_int(r, 1000) : peat_rng_gaussian(r, 1.0));
    peat_rng_free(r);
    return t;
}

static peat_tensor *mk2(peat_dtype dt, int64_t a, int64_t b, uint64_t seed)
{
    int64_t s[2] = {a, b};
    return mk(dt, 2, s, seed);
}

/* A GEMM record D = A B (M x K times K x N) with its golden output and its exact output. */
static peat_record *gemm_record(uint64_t id, int64_t m, int64_t n, int64_t k, uint64_t seed,
                                peat_tensor *shared_b)
{
    peat_record *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->id = id;
    r->op = PEAT_OP_GEMM;
    r->p.i[2] = m;
    r->p.i[3] = n;
    r->p.i[4] = k;
    r->p.i[5] = 1;
    r->p.f[0] = 1.0;
    r->n_in = 2;
    r->in[0] = mk2(PEAT_DTYPE_F32, m, k, seed);
    if (shared_b)
        cr_assert_eq(peat_tensor_clone(shared_b, &r->in[1]), PEAT_OK);
    else
        r->in[1] = mk2(PEAT_DTYPE_F32, k, n, seed + 1);
    r->n_out = 1;
    r->golden[0] = mk2(PEAT_DTYPE_F32, m, n, seed + 2); /* the store keeps what it is given */
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    cr_assert_eq(peat_record_compute_exact(r), PEAT_OK, "exact: %s", peat_error_last());
    snprintf(r->flow, sizeof r->flow, "mlp");
    snprintf(r->layer, sizeof r->layer, "fc%llu", (unsigned long long)(id % 3));
    snprintf(r->golden_kernel, sizeof r->golden_kernel, "gemm_golden");
    r->iter = (int64_t)(id / 4);
    r->phase = (peat_phase)(id % 2);
    r->call_index = (int64_t)id;
    r->op_call_index = (int64_t)id * 2 + 1;
    r->seed = 42;
    return r;
}

/* A record holding every dtype (the store does not interpret the op; exact given and small). */
static peat_record *mixed_record(uint64_t id, uint64_t seed)
{
    peat_record *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->id = id;
    r->op = PEAT_OP_EMBEDDING;
    r->p.i[0] = 5;
    r->p.i[1] = 7;
    r->p.i[2] = 3;
    r->p.f[7] = -0.0;
    r->p.f[3] = 1e-300;
    r->n_in = 4;
    r->in[0] = mk2(PEAT_DTYPE_F32, 7, 3, seed);
    int64_t s1[1] = {5};
    r->in[1] = mk(PEAT_DTYPE_I32, 1, s1, seed + 1);
    int64_t s3[3] = {2, 3, 4};
    r->in[2] = mk(PEAT_DTYPE_BF16, 3, s3, seed + 2);
    int64_t s4[4] = {1, 2, 3, 5};
    r->in[3] = mk(PEAT_DTYPE_F16, 4, s4, seed + 3);
    r->n_out = 2;
    r->golden[0] = mk2(PEAT_DTYPE_F32, 5, 3, seed + 4);
    r->golden[1] = mk2(PEAT_DTYPE_BF16, 5, 3, seed + 5);
    r->exact[0] = mk2(PEAT_DTYPE_F64, 5, 3, seed + 6);
    r->exact[1] = mk2(PEAT_DTYPE_F64, 5, 3, seed + 7);
    snprintf(r->flow, sizeof r->flow, "gpt");
    snprintf(r->layer, sizeof r->layer, "wte");
    snprintf(r->golden_kernel, sizeof r->golden_kernel, "embedding_golden");
    r->iter = 9;
    r->phase = PEAT_PHASE_BWD;
    r->call_index = 123456789012LL;
    r->op_call_index = 77;
    r->seed = 0xfedcba9876543210ULL;
    return r;
}

static void tensor_eq(const peat_tensor *a, const peat_tensor *b, const char *what, int k)
{
    cr_assert(a && b, "%s[%d]: one side missing (%p vs %p)", what, k, (const void *)a,
              (const void *)b);
    cr_assert_eq(a->dtype, b->dtype, "%s[%d]: dtype %d vs %d", what, k, a->dtype, b->dtype);
    cr_assert_eq(a->ndim, b->ndim, "%s[%d]: rank %d vs %d", what, k, a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++)
        cr_assert_eq(a->shape[d], b->shape[d], "%s[%d]: dim %d is %lld vs %lld", what, k, d,
                     (long long)a->shape[d], (long long)b->shape[d]);
    cr_assert(memcmp(a->data, b->data, peat_tensor_nbytes(a)) == 0, "%s[%d]: bytes differ", what,
              k);
}

static void record_eq(const peat_record *a, const peat_record *b)
{
    cr_assert_eq(a->id, b->id, "id %llu vs %llu", (unsigned long long)a->id,
                 (unsigned long long)b->id);
    cr_assert_eq(a->op, b->op, "op");
    cr_assert(memcmp(&a->p, &b->p, sizeof a->p) == 0, "params of record %llu differ",
              (unsigned long long)a->id);
    cr_assert_eq(a->n_in, b->n_in, "n_in");
    cr_assert_eq(a->n_out, b->n_out, "n_out");
    cr_assert_str_eq(a->flow, b->flow, "flow");
    cr_assert_str_eq(a->layer, b->layer, "layer");
    cr_assert_str_eq(a->golden_kernel, b->golden_kernel, "golden_kernel");
    cr_assert_eq(a->iter, b->iter, "iter");
    cr_assert_eq(a->phase, b->phase, "phase");
    cr_assert_eq(a->call_index, b->call_index, "call_index");
    cr_assert_eq(a->op_call_index, b->op_call_index, "op_call_index");
    cr_assert_eq(a->seed, b->seed, "seed");
    for (int k = 0; k < a->n_in; k++) tensor_eq(a->in[k], b->in[k], "in", k);
    for (int k = 0; k < a->n_out; k++) {
        tensor_eq(a->golden[k], b->golden[k], "golden", k);
        tensor_eq(a->exact[k], b->exact[k], "exact", k);
    }
}

static peat_store_meta test_meta(void)
{
    peat_store_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.flow, sizeof m.flow, "mlp");
    snprintf(m.kernel, sizeof m.kernel, "gemm_new");
    snprintf(m.backend, sizeof m.backend, "cpu");
    snprintf(m.device, sizeof m.device, "test cpu");
    m.seed = 42;
    m.iters = 10;
    snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_VERSION_STRING);
    snprintf(m.created, sizeof m.created, "2024-01-02T03:04:05Z");
    snprintf(m.argv, sizeof m.argv, "peat run --kernel gemm_new");
    snprintf(m.host, sizeof m.host, "testhost");
    snprintf(m.clocks, sizeof m.clocks, "cpu 2.0 GHz");
    snprintf(m.dtypes, sizeof m.dtypes, "storage f32, accumulate f32, exact f64");
    snprintf(m.build, sizeof m.build, "Debug");
    snprintf(m.policy, sizeof m.policy, "every_k=3");
    snprintf(m.blas, sizeof m.blas, "OpenBLAS 0.3.21 (core Haswell, 1 thread)");
    return m;
}

static peat_store_t *make_store(const char *path)
{
    peat_store_meta m = test_meta();
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(path, &m, &s), PEAT_OK, "create %s: %s", path,
                 peat_error_last());
    return s;
}

static peat_store_t *reopen(const char *path, int writable)
{
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_open(path, writable, &s), PEAT_OK, "open %s: %s", path,
                 peat_error_last());
    return s;
}

static void expect_format_error(const char *path, const char *needle)
{
    peat_store_t *s = NULL;
    peat_status st = peat_store_open(path, 0, &s);
    cr_assert_eq(st, PEAT_ERR_FORMAT, "opening %s gave %s (%s), expected a format error", path,
                 peat_status_str(st), peat_error_last());
    cr_assert_null(s, "a refused file still returned a store");
    cr_assert(strstr(peat_error_last(), needle), "message '%s' does not say '%s'",
              peat_error_last(), needle);
    cr_assert(!strchr(peat_error_last(), '\n'), "message spans several lines: '%s'",
              peat_error_last());
}

TestSuite(store, .init = dir_make, .fini = dir_remove);

/* ---- the hash ---- */

Test(store, hash_matches_xxh64_reference_vectors)
{
    cr_assert_eq(peat_store_hash64("", 0, 0), 0xEF46DB3751D8E999ULL, "XXH64('') = %llx",
                 (unsigned long long)peat_store_hash64("", 0, 0));
    cr_assert_eq(peat_store_hash64("abc", 3, 0), 0x44BC2CF5AD770999ULL, "XXH64('abc') = %llx",
                 (unsigned long long)peat_store_hash64("abc", 3, 0));
    const char *s = "Nobody inspects the spammish repetition";
    cr_assert_eq(peat_store_hash64(s, strlen(s), 0), 0xFBCEA83C8A378BF1ULL,
                 "XXH64(39 bytes) = %llx", (unsigned long long)peat_store_hash64(s, strlen(s), 0));
}

/* ---- round trips ---- */

Test(store, call_records_round_trip_bit_exactly)
{
    const char *p = path_in("calls.h5");
    peat_store_meta meta = test_meta();
    meta.exact_max_bytes = 64 * 1024; /* exercise both: stored and recomputed exact outputs */
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(p, &meta, &s), PEAT_OK, "%s", peat_error_last());
    /* small exact (stored), large exact (72 KiB of F64: recomputed on read), every dtype */
    peat_record *recs[3] = {gemm_record(10, 8, 8, 8, 1, NULL), gemm_record(11, 96, 96, 16, 2, NULL),
                            mixed_record(12, 3)};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(peat_store_call_write(s, recs[i]), PEAT_OK, "write %d: %s", i,
                     peat_error_last());
    cr_assert_eq(peat_store_call_count(s), 3);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* and again from the file, after closing it */
            cr_assert_eq(peat_store_close(s), PEAT_OK, "close: %s", peat_error_last());
            s = reopen(p, 0);
        }
        cr_assert_eq(peat_store_call_count(s), 3, "pass %d: %lld records", pass,
                     (long long)peat_store_call_count(s));
        for (int i = 0; i < 3; i++) {
            peat_record *back = NULL;
            cr_assert_eq(read_call(s, i, &back), PEAT_OK, "read %d: %s", i, peat_error_last());
            record_eq(recs[i], back);
            peat_record_free(back);
            peat_record h;
            cr_assert_eq(peat_store_call_header(s, i, &h), PEAT_OK);
            cr_assert_eq(h.id, recs[i]->id, "header id");
            cr_assert_null(h.in[0], "header carries no tensors");
            int64_t idx = -1;
            cr_assert_eq(peat_store_call_find(s, recs[i]->id, &idx), PEAT_OK);
            cr_assert_eq(idx, i, "find(%llu) = %lld", (unsigned long long)recs[i]->id,
                         (long long)idx);
        }
        cr_assert(!peat_store_call_has(s, 13), "record 13 was never written");
        peat_store_stats st;
        cr_assert_eq(peat_store_stats_get(s, &st), PEAT_OK);
        /* record 11's exact output (96x96 F64) is above the 64 KiB limit: recomputed, not stored */
        cr_assert_eq(st.exact_recomputed, 96 * 96 * 8, "exact recomputed bytes %lld",
                     (long long)st.exact_recomputed);
    }
    peat_store_close(s);
    for (int i = 0; i < 3; i++) peat_record_free(recs[i]);
}

/* ---- the chunk encoder: standard zlib streams of HDF5's shuffle layout ---- */

enum { K_ZEROS, K_RANDOM, K_RELU, K_GEOMETRIC, K_BF16_IN_F32, K_CONST, K_COUNT };

/* n bytes of element size es whose values follow kind (deterministic). */
static void fill_kind(unsigned char *b, size_t n, size_t es, int kind, uint64_t seed)
{
    peat_rng_t *r = peat_rng_new(seed);
    for (size_t i = 0; i < n; i++) b[i] = 0;
    for (size_t e = 0; e + es <= n; e += es) {
        if (kind == K_RANDOM)
            for (size_t j = 0; j < es; j++) b[e + j] = (unsigned char)peat_rng_int(r, 256);
        else if (kind == K_GEOMETRIC) /* byte k with probability 2^-(k+1): a deep Huffman tree */
            for (size_t j = 0; j < es; j++) {
                int k = 0;
                while (k < 40 && peat_rng_int(r, 2) == 0) k++;
                b[e + j] = (unsigned char)k;
            }
        else if (kind == K_CONST)
            for (size_t j = 0; j < es; j++) b[e + j] = (unsigned char)(0x5a + j);
        else if ((kind == K_RELU || kind == K_BF16_IN_F32) && es == 4) {
            float v = (float)peat_rng_gaussian(r, 1.0);
            if (kind == K_RELU && v < 0) v = 0;
            uint32_t u;
            memcpy(&u, &v, 4);
            if (kind == K_BF16_IN_F32) u &= 0xffff0000u;
            memcpy(b + e, &u, 4);
        } else if (kind == K_RELU || kind == K_BF16_IN_F32) /* other sizes: half zeros */
            for (size_t j = 0; j < es; j++)
                b[e + j] = peat_rng_int(r, 2) ? (unsigned char)peat_rng_int(r, 256) : 0;
    }
    peat_rng_free(r);
}

/* Inflates a chunk with zlib and undoes the shuffle: the first nvalid elements must come back,
 * the rest as zeros. */
static void chunk_check(const unsigned char *enc, size_t enc_len, const unsigned char *src,
                        size_t nelem, size_t nvalid, size_t es, const char *what)
{
    size_t n = nelem * es;
    unsigned char *flat = malloc(n), *back = calloc(n, 1);
    uLongf got = (uLongf)n;
    int zr = uncompress(flat, &got, enc, (uLong)enc_len);
    cr_assert_eq(zr, Z_OK, "%s: zlib refuses the stream (%d)", what, zr);
    cr_assert_eq(got, n, "%s: %lu bytes inflated, %zu expected", what, (unsigned long)got, n);
    for (size_t i = 0; i < nelem; i++)
        for (size_t j = 0; j < es; j++) back[i * es + j] = es > 1 ? flat[j * nelem + i] : flat[i];
    cr_assert(memcmp(back, src, nvalid * es) == 0, "%s: data differ", what);
    for (size_t i = nvalid * es; i < n; i++)
        cr_assert_eq(back[i], 0, "%s: padding byte %zu is %d", what, i, back[i]);
    free(flat);
    free(back);
}

Test(store, chunks_are_shuffled_and_deflated_as_hdf5_filters_store_them)
{
    /* every element size, data kind and fill of a chunk: zlib inflates the stream, un-shuffling
     * gives the data back, zeros after it */
    const size_t sizes[4] = {1, 2, 4, 8};
    const size_t shapes[4][2] = {{8192, 8192}, {8192, 5000}, {32768, 32768}, {32768, 1}};
    unsigned char *src = malloc(32768 * 8);
    store_codec codec;
    memset(&codec, 0, sizeof codec);
    for (int z = 0; z < 4; z++)
        for (int k = 0; k < K_COUNT; k++)
            for (int sh = 0; sh < 4; sh++) {
                size_t es = sizes[z], nelem = shapes[sh][0], nvalid = shapes[sh][1];
                char what[96];
                snprintf(what, sizeof what, "es %zu kind %d nelem %zu nvalid %zu", es, k, nelem,
                         nvalid);
                fill_kind(src, nvalid * es, es, k, 7 + (uint64_t)k);
                size_t la = 0;
                cr_assert_eq(peat_store_chunk_compress(&codec, src, nvalid, nelem, es, 1, &la),
                             PEAT_OK, "%s: %s", what, peat_error_last());
                chunk_check(codec.out, la, src, nelem, nvalid, es, what);
                if (k == K_ZEROS || k == K_CONST || k == K_GEOMETRIC)
                    cr_assert_lt(la, nelem * es / 2, "%s: %zu bytes, no compression", what, la);
            }
    peat_store_codec_free(&codec);
    free(src);
}

/* ---- where tensors go: compressed pool or in place ---- */

/* A GEMM record (m 128, n 8, k 128) whose first input (64 KiB) is almost all zeros (~7x smaller:
 * by the estimate); B and the golden output are small (4 KiB each:
 * never worth a compressed record). */
static peat_record *routing_record(uint64_t id)
{
    peat_record *r = gemm_record(id, 128, 8, 128, 40 + id, NULL);
    float *a = r->in[0]->data;
    for (int64_t i = 0; i < 128 * 128; i++) a[i] = i % 97 == 0 ? (float)(i % 5) : 0.0f;
    for (int k = 0; k < PEAT_MAX_IO; k++) {
        peat_tensor_free(r->exact[k]);
        r->exact[k] = NULL;
    }
    cr_assert_eq(peat_record_compute_exact(r), PEAT_OK, "exact: %s", peat_error_last());
    return r;
}

/* Reads every tensor row of a closed file with plain HDF5 (its own filters) and compares the
 * elements with the record's inputs; returns how many rows live in the compressed pool. */
static int pools_match_with_plain_hdf5(const char *path, const peat_record *r)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    cr_assert(f >= 0);
    hid_t d = H5Dopen2(f, "/tensors/index", H5P_DEFAULT);
    hid_t mt = peat_store_row_type(STORE_T_TENSOR, 0);
    store_tensor_row rows[8];
    hid_t fs = H5Dget_space(d);
    hsize_t st = 0, cnt = 3;
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &st, NULL, &cnt, NULL);
    cr_assert(H5Dread(d, mt, ms, fs, H5P_DEFAULT, rows) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Tclose(mt);
    H5Dclose(d);
    const peat_tensor *t[3] = {r->in[0], r->in[1], r->golden[0]};
    int deflated = 0;
    for (int i = 0; i < 3; i++) {
        deflated += rows[i].pool == STORE_POOL_DEFLATE;
        hid_t pd = H5Dopen2(f, rows[i].pool == STORE_POOL_RAW ? "/tensors/f32_raw" : "/tensors/f32",
                            H5P_DEFAULT);
        cr_assert(pd >= 0);
        hid_t pfs = H5Dget_space(pd);
        hsize_t off = (hsize_t)rows[i].offset, n = (hsize_t)rows[i].numel;
        hid_t pms = H5Screate_simple(1, &n, NULL);
        H5Sselect_hyperslab(pfs, H5S_SELECT_SET, &off, NULL, &n, NULL);
        float *buf = malloc(n * sizeof *buf);
        cr_assert(H5Dread(pd, H5T_NATIVE_FLOAT, pms, pfs, H5P_DEFAULT, buf) >= 0);
        cr_assert(memcmp(buf, t[i]->data, n * sizeof *buf) == 0,
                  "tensor %d read by plain HDF5 differs", i);
        free(buf);
        H5Sclose(pms);
        H5Sclose(pfs);
        H5Dclose(pd);
    }
    H5Fclose(f);
    return deflated;
}

Test(store, compressible_tensors_are_compressed_the_rest_written_in_place)
{
    struct {
        const char *name;
        int deflate_level, min_saving_pct, deflated; /* rows in the compressed pool */
    } cases[3] = {{"auto.h5", 0, 0, 1}, {"all.h5", 0, -1, 3}, {"none.h5", -1, 0, 0}};
    for (int c = 0; c < 3; c++) {
        const char *p = path_in(cases[c].name);
        peat_store_meta meta = test_meta();
        meta.deflate_level = cases[c].deflate_level;
        meta.min_saving_pct = cases[c].min_saving_pct;
        peat_store_t *s = NULL;
        cr_assert_eq(peat_store_create(p, &meta, &s), PEAT_OK, "%s", peat_error_last());
        peat_record *r = routing_record((uint64_t)c);
        cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
        peat_store_stats st;
        cr_assert_eq(peat_store_stats_get(s, &st), PEAT_OK);
        int64_t a_bytes = 128 * 128 * 4, total = a_bytes + 2 * 128 * 8 * 4; /* A, B, golden */
        int64_t want_deflate = cases[c].deflated == 1 ? a_bytes : cases[c].deflated ? total : 0;
        cr_assert_eq(st.deflate_bytes, want_deflate, "%s: %lld bytes compressed, %lld expected",
                     cases[c].name, (long long)st.deflate_bytes, (long long)want_deflate);
        cr_assert_eq(st.raw_bytes, total - want_deflate, "%s: raw bytes %lld", cases[c].name,
                     (long long)st.raw_bytes);
        if (cases[c].deflated == 0) { /* spare room: the rest of the last chunk of the raw pool
                                       * and of the two tables that have rows */
            int64_t want = store_round_up(total, STORE_RAW_CHUNK_BYTES) - total -
                           3 * (int64_t)sizeof(store_tensor_row) - (int64_t)sizeof(store_call_row);
            want += peat_store_table_chunk_rows(STORE_T_TENSOR) * (int64_t)sizeof(store_tensor_row);
            want += peat_store_table_chunk_rows(STORE_T_CALL) * (int64_t)sizeof(store_call_row);
            cr_assert_eq(st.spare_bytes, want, "spare %lld, expected %lld",
                         (long long)st.spare_bytes, (long long)want);
        }
        if (cases[c].deflated == 1) /* the sparse input: ~7x smaller in the file */
            cr_assert_lt(st.deflate_disk, a_bytes / 6, "compressed pool takes %lld bytes",
                         (long long)st.deflate_disk);
        cr_assert_eq(peat_store_close(s), PEAT_OK, "%s", peat_error_last());
        s = reopen(p, 0);
        peat_record *back = NULL;
        cr_assert_eq(read_call(s, 0, &back), PEAT_OK, "%s", peat_error_last());
        record_eq(r, back);
        peat_record_free(back);
        peat_store_close(s);
        cr_assert_eq(pools_match_with_plain_hdf5(p, r), cases[c].deflated, "%s", cases[c].name);
        peat_record_free(r);
    }
    peat_store_meta bad = test_meta();
    bad.min_saving_pct = 101;
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(path_in("bad.h5"), &bad, &s), PEAT_ERR_INVAL);
    cr_assert_null(s);
}

/* h5py (HDF5's own shuffle and deflate filters) reads both pools, as docs/hdf5-schema.md shows:
 * the script there, its tensors written out as bytes and compared with the record's. Skipped
 * where h5py is not installed (scripts/install-deps.sh installs it). */
Test(store, h5py_reads_the_compressed_and_the_raw_pool)
{
    if (system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0)
        cr_skip_test("h5py is not installed");
    const char *p = path_in("h5py.h5");
    peat_store_t *s = make_store(p);
    peat_record *r = routing_record(9); /* A compressed, B and the golden output raw */
    cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_close(s), PEAT_OK, "%s", peat_error_last());
    char script[2048];
    snprintf(script, sizeof script,
             "import h5py\n"
             "f = h5py.File('%s', 'r')\n"
             "T, calls = f['/tensors/index'][:], f['/calls/index'][:]\n"
             "def tensor(row):\n"
             "    t = T[row]; dt = ['f64', 'f32', 'bf16', 'f16', 'i32'][t['dtype']]\n"
             "    pool = f['/tensors/' + dt + ('_raw' if t['pool'] == 1 else '')]\n"
             "    x = pool[t['offset']:t['offset'] + t['numel']]\n"
             "    return x.reshape(t['shape'][:t['ndim']])\n"
             "c = calls[0]\n"
             "for k, row in enumerate([c['in'][0], c['in'][1], c['golden'][0]]):\n"
             "    open('%s/h5py.%%d' %% k, 'wb').write(tensor(row).tobytes())\n"
             "print(sum(T['pool'] == 0))\n",
             p, dir);
    char sp[600], cmd[1400];
    snprintf(sp, sizeof sp, "%s/read.py", dir);
    FILE *f = fopen(sp, "w");
    cr_assert_not_null(f);
    fputs(script, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s > %s/h5py.out 2>&1", sp, dir);
    cr_assert_eq(system(cmd), 0, "the h5py script failed (%s/h5py.out)", dir);
    const peat_tensor *want[3] = {r->in[0], r->in[1], r->golden[0]};
    for (int k = 0; k < 3; k++) {
        char q[600];
        snprintf(q, sizeof q, "%s/h5py.%d", dir, k);
        size_t n = peat_tensor_nbytes(want[k]);
        char *got = malloc(n + 1);
        FILE *g = fopen(q, "rb");
        cr_assert_not_null(g, "h5py wrote no tensor %d", k);
        size_t m = fread(got, 1, n + 1, g);
        fclose(g);
        cr_assert(m == n && memcmp(got, want[k]->data, n) == 0,
                  "tensor %d as h5py reads it differs (%zu bytes, %zu expected)", k, m, n);
        free(got);
    }
    char out[64] = "";
    char o[600];
    snprintf(o, sizeof o, "%s/h5py.out", dir);
    f = fopen(o, "r");
    cr_assert(f && fgets(out, sizeof out, f));
    fclose(f);
    cr_assert_eq(atoi(out), 1, "h5py saw %d tensors in the compressed pool, 1 expected", atoi(out));
    peat_record_free(r);
}

Test(store, states_metrics_signatures_and_meta_round_trip)
{
    const char *p = path_in("kinds.h5");
    peat_store_t *s = make_store(p);
    peat_tensor *w = mk2(PEAT_DTYPE_F32, 33, 17, 5), *m = mk2(PEAT_DTYPE_F32, 33, 17, 6);
    int64_t s1[1] = {1000};
    peat_tensor *idx = mk(PEAT_DTYPE_I32, 1, s1, 7);
    const peat_tensor *ts[3] = {w, m, idx};
    const char *names[3] = {"fc1.w", "adam.m.fc1.w", "data.idx"};
    cr_assert_eq(peat_store_state_write(s, 4, "checkpoint", 3, ts, names), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(peat_store_state_write(s, 4, "activations", 1, ts, names), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(peat_store_state_write(s, 4, "checkpoint", 1, ts, names), PEAT_ERR_INVAL,
                 "duplicate snapshot accepted");
    double loss[3] = {2.5, 1.25, -0.0}, acc[3] = {NAN, 0.5, INFINITY};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(peat_store_metrics_append(s, i, loss[i], acc[i]), PEAT_OK);
    cr_assert_eq(peat_store_metrics_append(s, 1, 0.0, 0.0), PEAT_ERR_INVAL,
                 "duplicate metrics accepted");
    const char *j1 = "{\"schema\":1,\"kernel\":\"gemm_new\",\"ulp\":[1,2,3]}",
               *j2 = "{\"schema\":1,\"v\":2}";
    cr_assert_eq(peat_store_signature_write(s, "gemm_new", j1), PEAT_OK);
    cr_assert_eq(peat_store_signature_write(s, "gemm_golden", "{}"), PEAT_OK);
    cr_assert_eq(peat_store_signature_write(s, "gemm_new", j2), PEAT_OK);
    cr_assert_eq(peat_store_close(s), PEAT_OK, "%s", peat_error_last());

    s = reopen(p, 0);
    peat_store_meta want = test_meta(), got;
    cr_assert_eq(peat_store_meta_get(s, &got), PEAT_OK);
    cr_assert_str_eq(got.flow, want.flow);
    cr_assert_str_eq(got.kernel, want.kernel);
    cr_assert_str_eq(got.device, want.device);
    cr_assert_str_eq(got.argv, want.argv);
    cr_assert_str_eq(got.policy, want.policy);
    cr_assert_str_eq(got.clocks, want.clocks);
    cr_assert_str_eq(got.blas, want.blas, "the golden GEMM's BLAS read back: '%s'", got.blas);
    cr_assert_eq(got.seed, want.seed);
    cr_assert_eq(got.iters, want.iters);
    cr_assert(strlen(got.hdf5_version) > 0, "hdf5 version not recorded");

    cr_assert_eq(peat_store_state_count(s), 2);
    int64_t it = -1;
    char tag[32];
    int n = 0;
    cr_assert_eq(peat_store_state_info(s, 1, &it, tag, &n), PEAT_OK);
    cr_assert(it == 4 && strcmp(tag, "activations") == 0 && n == 1, "snapshot 1 is (%lld, %s, %d)",
              (long long)it, tag, n);
    peat_store_state *st = NULL;
    cr_assert_eq(peat_store_state_read(s, 4, "checkpoint", &st), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(st->n, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(st->names[i], names[i], "name %d", i);
        tensor_eq(ts[i], st->t[i], "state", i);
    }
    peat_store_state_free(st);
    cr_assert_eq(peat_store_state_read(s, 5, "checkpoint", &st), PEAT_ERR_NOTFOUND);

    cr_assert_eq(peat_store_metrics_count(s), 3);
    for (int i = 0; i < 3; i++) {
        int64_t mi;
        double l, a;
        cr_assert_eq(peat_store_metrics_read(s, i, &mi, &l, &a), PEAT_OK);
        cr_assert(mi == i && memcmp(&l, &loss[i], 8) == 0 && memcmp(&a, &acc[i], 8) == 0,
                  "metrics %d: (%lld, %g, %g)", i, (long long)mi, l, a);
    }
    char *json = NULL;
    cr_assert_eq(peat_store_signature_read(s, "gemm_new", &json), PEAT_OK);
    cr_assert_str_eq(json, j2, "the later signature of a kernel wins");
    free(json);
    char kname[64];
    cr_assert_eq(peat_store_signature_at(s, 0, kname, &json), PEAT_OK);
    cr_assert_str_eq(kname, "gemm_new");
    cr_assert_str_eq(json, j1);
    free(json);
    cr_assert_eq(peat_store_signature_read(s, "nope", &json), PEAT_ERR_NOTFOUND);
    peat_store_close(s);
    peat_tensor_free(w);
    peat_tensor_free(m);
    peat_tensor_free(idx);
}

/* ---- dedup ---- */

Test(store, shared_tensors_are_stored_once)
{
    const char *p = path_in("dedup.h5");
    peat_store_meta meta = test_meta();
    meta.exact_max_bytes = -1; /* exact outputs stored too: they are deduplicated like the rest */
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(p, &meta, &s), PEAT_OK, "%s", peat_error_last());
    peat_tensor *w = mk2(PEAT_DTYPE_F32, 16, 16, 99);
    /* four calls sharing the weight w; the third repeats the first's inputs exactly */
    peat_record *r[4] = {gemm_record(0, 8, 16, 16, 1, w), gemm_record(1, 8, 16, 16, 2, w),
                         gemm_record(2, 8, 16, 16, 1, w), gemm_record(3, 8, 16, 16, 10, w)};
    /* same bytes as w under another shape: a different tensor */
    peat_tensor_free(r[3]->in[1]);
    int64_t flat[1] = {256};
    cr_assert_eq(peat_tensor_wrap(PEAT_DTYPE_F32, 1, flat, w->data, &r[3]->in[1]), PEAT_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(peat_store_call_write(s, r[i]), PEAT_OK, "%s", peat_error_last());
    peat_store_stats st;
    cr_assert_eq(peat_store_stats_get(s, &st), PEAT_OK);
    /* distinct: A0 A1 A3, w, w-flat, golden0 golden1 golden3, exact0 exact1 exact3
     * (record 2 repeats record 0 entirely: inputs, golden and exact) */
    cr_assert_eq(st.tensor_refs, 16, "references %lld", (long long)st.tensor_refs);
    cr_assert_eq(st.tensors, 11, "unique tensors %lld (expected 11)", (long long)st.tensors);
    peat_store_close(s);
    s = reopen(p, 0);
    for (int i = 0; i < 4; i++) {
        peat_record *b = NULL;
        cr_assert_eq(read_call(s, i, &b), PEAT_OK, "%s", peat_error_last());
        record_eq(r[i], b);
        peat_record_free(b);
    }
    peat_store_close(s);
    for (int i = 0; i < 4; i++) peat_record_free(r[i]);
    peat_tensor_free(w);
}

Test(store, duplicates_are_refused_and_the_sink_skips_them)
{
    const char *p = path_in("dup.h5");
    peat_store_t *s = make_store(p);
    peat_record *a = gemm_record(5, 4, 4, 4, 1, NULL);
    cr_assert_eq(peat_store_call_write(s, a), PEAT_OK);
    cr_assert_eq(peat_store_call_write(s, a), PEAT_ERR_INVAL, "a second record 5 was accepted");
    cr_assert_eq(peat_store_sink(s, gemm_record(5, 4, 4, 4, 1, NULL)), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(peat_store_sink(s, gemm_record(6, 4, 4, 4, 2, NULL)), PEAT_OK, "%s",
                 peat_error_last());
    cr_assert_eq(peat_store_call_count(s), 2, "%lld records", (long long)peat_store_call_count(s));
    char longname[80];
    memset(longname, 'x', sizeof longname - 1);
    longname[79] = 0;
    peat_record *b = gemm_record(7, 4, 4, 4, 3, NULL);
    memcpy(b->layer, longname, sizeof b->layer - 1); /* fills the field: no terminator room */
    b->layer[63] = 'x';
    cr_assert_eq(peat_store_call_write(s, b), PEAT_ERR_INVAL,
                 "an unterminated layer name was accepted");
    const peat_tensor *t[1] = {a->in[0]};
    const char *nm[1] = {longname};
    cr_assert_eq(peat_store_state_write(s, 0, "checkpoint", 1, t, nm), PEAT_ERR_INVAL,
                 "an 79-char name was accepted");
    peat_store_close(s);
    peat_record_free(a);
    peat_record_free(b);
}

/* ---- refusing what is not a good campaign file ---- */

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static long file_size(const char *path)
{
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    return (long)sb.st_size;
}

static const char *small_campaign(const char *name, int n)
{
    const char *p = path_in(name);
    peat_store_t *s = make_store(p);
    for (int i = 0; i < n; i++) {
        peat_record *r = gemm_record((uint64_t)i, 64, 64, 64, (uint64_t)i + 1, NULL);
        cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
        peat_record_free(r);
    }
    cr_assert_eq(peat_store_close(s), PEAT_OK);
    return p;
}

Test(store, existing_files_are_never_overwritten)
{
    const char *p = small_campaign("keep.h5", 1);
    long before = file_size(p);
    peat_store_meta m = test_meta();
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(p, &m, &s), PEAT_ERR_IO, "create over an existing file: %s",
                 peat_error_last());
    cr_assert_null(s);
    cr_assert_eq(file_size(p), before, "the existing file changed size");
    s = reopen(p, 0);
    cr_assert_eq(peat_store_call_count(s), 1);
    peat_store_close(s);
}

Test(store, non_hdf5_file_is_refused)
{
    const char *p = path_in("text.h5");
    const char *txt =
        "this is not HDF5 at all, just some text that is long enough to look like a file\n";
    write_bytes(p, txt, strlen(txt));
    expect_format_error(p, "not an HDF5 file");
    write_bytes(p, "", 0);
    expect_format_error(p, "not an HDF5 file");
}

Test(store, truncated_file_is_refused)
{
    const char *p = small_campaign("trunc.h5", 4);
    long full = file_size(p);
    char *buf = malloc((size_t)full);
    FILE *f = fopen(p, "rb");
    cr_assert_eq(fread(buf, 1, (size_t)full, f), (size_t)full);
    fclose(f);
    /* cut inside the superblock, early, in the middle and just before the end */
    long cuts[5] = {40, 2000, full / 2, full - 4096, full - 1};
    for (int i = 0; i < 5; i++) {
        const char *q = path_in("trunc-cut.h5");
        unlink(q);
        write_bytes(q, buf, (size_t)cuts[i]);
        peat_store_t *s = NULL;
        peat_status st = peat_store_open(q, 0, &s);
        cr_assert_eq(st, PEAT_ERR_FORMAT, "file cut at %ld of %ld bytes: open gave %s (%s)",
                     cuts[i], full, peat_status_str(st), peat_error_last());
        cr_assert_null(s);
        cr_assert(strlen(peat_error_last()) > 0 && !strchr(peat_error_last(), '\n'),
                  "message: '%s'", peat_error_last());
        if (cuts[i] > 1000)
            cr_assert(strstr(peat_error_last(), "truncated"),
                      "cut at %ld: '%s' does not say truncated", cuts[i], peat_error_last());
    }
    free(buf);
}

Test(store, wrong_schema_version_is_refused)
{
    const char *p = small_campaign("ver.h5", 1);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    cr_assert(f >= 0);
    hid_t a = H5Aopen(f, "peat_schema_version", H5P_DEFAULT);
    int32_t v = 99;
    cr_assert(a >= 0 && H5Awrite(a, H5T_NATIVE_INT32, &v) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    expect_format_error(p, "schema version 99");
    /* schema 2 (PEAT before the store used only the public HDF5 API): refused, in one line */
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    a = H5Aopen(f, "peat_schema_version", H5P_DEFAULT);
    v = 2;
    cr_assert(a >= 0 && H5Awrite(a, H5T_NATIVE_INT32, &v) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    expect_format_error(p, "has schema version 2; this build reads versions 3 to 5");
}

Test(store, foreign_hdf5_and_missing_datasets_are_refused)
{
    const char *p = path_in("foreign.h5");
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 4;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
    expect_format_error(p, "not a PEAT campaign");

    const char *q = small_campaign("missing.h5", 1);
    f = H5Fopen(q, H5F_ACC_RDWR, H5P_DEFAULT);
    cr_assert(f >= 0 && H5Ldelete(f, "/calls/index", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    expect_format_error(q, "/calls/index is missing");
}

Test(store, a_table_with_another_row_layout_is_read_but_not_appended_to)
{
    /* a later schema may add a column: readers convert by name, a writer appending raw rows
     * must refuse */
    const char *p = small_campaign("layout.h5", 2);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    cr_assert(f >= 0 && H5Ldelete(f, "/metrics/index", H5P_DEFAULT) >= 0);
    hid_t mine = peat_store_row_type(STORE_T_METRIC, 1);
    size_t sz = H5Tget_size(mine);
    hid_t wider = H5Tcreate(H5T_COMPOUND, sz + 4);
    for (int m = 0; m < H5Tget_nmembers(mine); m++) {
        char *name = H5Tget_member_name(mine, (unsigned)m);
        hid_t mt = H5Tget_member_type(mine, (unsigned)m);
        cr_assert(H5Tinsert(wider, name, H5Tget_member_offset(mine, (unsigned)m), mt) >= 0);
        H5Tclose(mt);
        H5free_memory(name);
    }
    cr_assert(H5Tinsert(wider, "added_later", sz, H5T_STD_I32LE) >= 0);
    hsize_t zero = 0, unlim = H5S_UNLIMITED, chunk = 64;
    hid_t sp = H5Screate_simple(1, &zero, &unlim), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t d = H5Dcreate2(f, "/metrics/index", wider, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    cr_assert(d >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Tclose(wider);
    H5Tclose(mine);
    H5Fclose(f);
    peat_store_t *s = reopen(p, 0); /* readable: the two calls are there */
    cr_assert_eq(peat_store_call_count(s), 2);
    peat_store_close(s);
    s = NULL;
    cr_assert_eq(peat_store_open(p, 1, &s), PEAT_ERR_FORMAT);
    cr_assert_null(s);
    cr_assert(strstr(peat_error_last(), "another row layout"), "%s", peat_error_last());
}

Test(store, damaged_rows_and_data_are_detected)
{
    const char *p = small_campaign("damage.h5", 3);
    /* 1. a middle call row altered (its checksum no longer holds, rows after it do) */
    char *q = strdup(path_in("damage-row.h5"));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", p, q);
    cr_assert_eq(system(cmd), 0);
    hid_t f = H5Fopen(q, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/calls/index", H5P_DEFAULT);
    hid_t mt = peat_store_row_type(STORE_T_CALL, 0);
    /* the table's extent is exactly its rows */
    hsize_t nrows = 3;
    hid_t tfs = H5Dget_space(d);
    hsize_t ext = 0;
    cr_assert(H5Sget_simple_extent_dims(tfs, &ext, NULL) == 1 && ext == nrows, "extent %llu",
              (unsigned long long)ext);
    H5Sclose(tfs);
    store_call_row *rows = calloc(nrows, sizeof *rows);
    cr_assert(H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    cr_assert(rows[2].check != 0);
    rows[1].iter += 1;
    cr_assert(H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    free(rows);
    H5Tclose(mt);
    H5Dclose(d);
    H5Fclose(f);
    expect_format_error(q, "row 1 of /calls/index is damaged");
    free(q);

    /* 2. tensor data replaced in the pool (valid HDF5, wrong bytes): the read notices */
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    d = H5Dopen2(f, "/tensors/index", H5P_DEFAULT);
    hid_t tmt = peat_store_row_type(STORE_T_TENSOR, 0);
    store_tensor_row *trow =
        calloc((size_t)peat_store_table_chunk_rows(STORE_T_TENSOR), sizeof *trow);
    cr_assert(H5Dread(d, tmt, H5S_ALL, H5S_ALL, H5P_DEFAULT, trow) >= 0);
    cr_assert(trow[0].dtype == PEAT_DTYPE_F32 && trow[0].offset == 0 && trow[0].numel > 5);
    const char *pool = trow[0].pool == STORE_POOL_RAW ? "/tensors/f32_raw" : "/tensors/f32";
    free(trow);
    H5Tclose(tmt);
    H5Dclose(d);
    d = H5Dopen2(f, pool, H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hsize_t st = 5, cnt = 1;
    float v = 12345.0f;
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &st, NULL, &cnt, NULL);
    cr_assert(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
    peat_store_t *s = reopen(p, 0); /* the first record is not the last: opening is fine */
    peat_record *r = NULL;
    peat_status e = read_call(s, 0, &r);
    cr_assert_eq(e, PEAT_ERR_FORMAT, "a record with altered data was read back (%s)",
                 peat_status_str(e));
    cr_assert(strstr(peat_error_last(), "does not match its hash"), "message: %s",
              peat_error_last());
    peat_record *r1 = NULL;
    cr_assert_eq(read_call(s, 1, &r1), PEAT_OK, "an intact record is unreadable: %s",
                 peat_error_last());
    peat_record_free(r1);
    peat_store_close(s);
}

/* ---- inspect ---- */

Test(store, inspect_lists_stages_ops_iterations_and_sizes)
{
    const char *p = path_in("inspect.h5");
    peat_store_t *s = make_store(p);
    for (int i = 0; i < 6; i++) { /* ids 0..5: iterations 0,0,0,0,1,1; phases fwd,bwd alternating */
        peat_record *r = gemm_record((uint64_t)i, 8, 8, 8, (uint64_t)i + 1, NULL);
        cr_assert_eq(peat_store_call_write(s, r), PEAT_OK);
        peat_record_free(r);
    }
    peat_record *m = mixed_record(100, 7);
    cr_assert_eq(peat_store_call_write(s, m), PEAT_OK);
    const peat_tensor *t[1] = {m->in[0]};
    const char *nm[1] = {"wte"};
    cr_assert_eq(peat_store_state_write(s, 3, "checkpoint", 1, t, nm), PEAT_OK);
    cr_assert_eq(peat_store_metrics_append(s, 0, 2.0, 0.1), PEAT_OK);
    cr_assert_eq(peat_store_signature_write(s, "gemm_new", "{\"a\":1}"), PEAT_OK);
    peat_store_close(s);
    peat_record_free(m);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(peat_store_inspect(p, 0, out), PEAT_OK, "%s", peat_error_last());
    fclose(out);
    cr_assert(
        strstr(text, "stages present: meta, calls (7), states (1), metrics (1), signatures (1)"),
        "stages line missing in:\n%s", text);
    const char *g = strstr(text, "\n  gemm ");
    cr_assert_not_null(g, "no gemm row in:\n%s", text);
    long long calls, fwd, bwd, opt;
    cr_assert_eq(sscanf(g, " gemm %lld %lld %lld %lld", &calls, &fwd, &bwd, &opt), 4);
    cr_assert(calls == 6 && fwd == 3 && bwd == 3 && opt == 0,
              "gemm row says %lld calls (%lld/%lld/%lld)", calls, fwd, bwd, opt);
    cr_assert(strstr(text, "\n  embedding "), "no embedding row in:\n%s", text);
    cr_assert(strstr(text, "iterations covered: 0..9 (3 distinct)"),
              "iterations line wrong in:\n%s", text);
    cr_assert(strstr(text, "compression ratio"), "no compression ratio in:\n%s", text);
    cr_assert(strstr(text, "closed by its writer; no manifest"), "status missing in:\n%s", text);
    free(text);
    out = fopen("/dev/null", "w");
    cr_assert_eq(peat_store_inspect(path_in("absent.h5"), 0, out), PEAT_ERR_IO,
                 "inspect of a missing file");
    fclose(out);
}

/* ---- the manifest ---- */

static void manifest_problem(void *user, const char *line)
{
    char *buf = user;
    size_t len = strlen(buf);
    snprintf(buf + len, 2048 - len, "%s\n", line);
}

Test(store, manifest_lists_every_stage_and_a_lost_output_is_an_error)
{
    const char *p = path_in("manifest.h5");
    peat_store_t *s = make_store(p);
    for (int i = 0; i < 3; i++) {
        peat_record *r = gemm_record((uint64_t)i, 8, 8, 8, (uint64_t)i + 1, NULL);
        cr_assert_eq(peat_store_call_write(s, r), PEAT_OK);
        peat_record_free(r);
    }
    cr_assert_eq(peat_store_signature_write(s, "k", "{\"a\":1}"), PEAT_OK);
    /* a stage table (every file has them, empty until their stage writes) */
    peat_store_table_t *t = NULL;
    cr_assert_eq(peat_store_table_open(s, PEAT_STORE_CAPTURE_UNMAPPED,
                                       peat_store_capture_unmapped_cols, 3, &t),
                 PEAT_OK, "%s", peat_error_last());
    peat_store_value v[9] = {{.s = "aten.a"}, {.i = 1}, {.s = "x"},
                             {.s = "aten.b"}, {.i = 2}, {.s = "y"},
                             {.s = "aten.c"}, {.i = 3}, {.s = "z"}};
    cr_assert_eq(peat_store_table_append(t, v, 3), PEAT_OK);
    peat_store_table_close(t);
    const peat_store_stage stages[] = {
        {"a", NULL, NULL},
        {"b", "/calls/index " PEAT_STORE_CAPTURE_UNMAPPED, NULL},
        {"c", "/signatures/index", NULL},
        {"d", "/never/written", "--no-d"},
    };
    /* as the campaign does: the manifest is written by the session that commits */
    peat_store_close(s);
    cr_assert_eq(peat_store_open(p, 1, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_manifest_write(s, stages, 4), PEAT_OK, "%s", peat_error_last());
    peat_store_close(s);

    peat_store_check chk;
    char lines[2048] = "";
    cr_assert_eq(peat_store_open(p, 0, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_manifest_check(s, manifest_problem, lines, &chk), PEAT_OK);
    cr_assert_eq(chk.has_manifest, 1);
    cr_assert_eq(chk.problems, 0, "%s", lines);
    cr_assert_eq(chk.stages, 4);
    cr_assert_eq(chk.skipped, 1);
    cr_assert_eq(chk.tables, 3); /* /calls/index, /capture/unmapped, /signatures/index */
    cr_assert_str_eq(chk.stage_list, "a, b, c, d (skipped: --no-d)");
    cr_assert_eq(peat_store_verify(s, manifest_problem, lines, &chk), PEAT_OK);
    cr_assert_eq(chk.problems, 0, "%s", lines);
    cr_assert_eq(chk.calls, 3);
    cr_assert_eq(chk.signatures, 1);
    peat_store_close(s);

    /* what damage does: a table gone, a table's rows gone (the signature, the last record) */
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    cr_assert_geq(f, 0);
    cr_assert_geq(H5Ldelete(f, PEAT_STORE_CAPTURE_UNMAPPED, H5P_DEFAULT), 0);
    hid_t d = H5Dopen2(f, "/signatures/index", H5P_DEFAULT);
    hsize_t zero = 0;
    cr_assert_geq(H5Dset_extent(d, &zero), 0);
    H5Dclose(d);
    H5Fclose(f);
    cr_assert_eq(peat_store_open(p, 0, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_signature_count(s), 0);
    cr_assert_eq(peat_store_manifest_check(s, manifest_problem, lines, &chk), PEAT_OK);
    cr_assert_eq(chk.problems, 2, "%s", lines);
    cr_assert(strstr(lines, "stage b: /capture/unmapped is missing (its manifest lists 3 rows)"),
              "%s", lines);
    cr_assert(strstr(lines, "stage c: /signatures/index holds 0 of the 1 rows its manifest lists"),
              "%s", lines);
    peat_store_close(s);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(peat_store_inspect(p, 0, out), PEAT_ERR_FORMAT);
    fclose(out);
    cr_assert(strstr(text, "status       DAMAGED: 2 problems"), "%s", text);
    free(text);
}

Test(store, a_regenerated_record_is_compared_with_the_stored_one)
{
    /* what --resume asks of each record it skips: is the regeneration the stored record? */
    const char *p = path_in("same.h5");
    peat_store_t *s = make_store(p);
    peat_record *r = gemm_record(7, 8, 8, 8, 3, NULL);
    cr_assert_eq(peat_store_call_write(s, r), PEAT_OK);
    char what[64] = "";
    cr_assert_eq(peat_store_call_same(s, r, what, sizeof what), 1);
    peat_f32(r->golden[0])[5] += 1e-6f; /* one output value moved: not the same run */
    cr_assert_eq(peat_store_call_same(s, r, what, sizeof what), 0);
    cr_assert_str_eq(what, "golden output 0");
    peat_f32(r->golden[0])[5] -= 1e-6f;
    peat_f32(r->in[1])[0] = -peat_f32(r->in[1])[0];
    cr_assert_eq(peat_store_call_same(s, r, what, sizeof what), 0);
    cr_assert_str_eq(what, "input 1");
    r->id = 8;
    cr_assert_eq(peat_store_call_same(s, r, what, sizeof what), -1, "id 8 is not stored");
    peat_record_free(r);
    peat_store_close(s);
}

/* An object of the file: a 1-D int64 dataset of n values v, v+1, ... at path. */
static void extra_write(hid_t file, const char *path, int n, int64_t v)
{
    hsize_t dims = (hsize_t)n;
    hid_t sp = H5Screate_simple(1, &dims, NULL), lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t d = H5Dcreate2(file, path, H5T_STD_I64LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    int64_t buf[16];
    for (int i = 0; i < n; i++) buf[i] = v + i;
    cr_assert(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(d);
    H5Pclose(lcpl);
    H5Sclose(sp);
}

static void extra_check(hid_t file, const char *path, int n, int64_t v)
{
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    cr_assert(d >= 0, "%s did not survive the resume", path);
    int64_t buf[16] = {0};
    cr_assert(H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    for (int i = 0; i < n; i++)
        cr_assert_eq(buf[i], v + i, "%s[%d] = %lld", path, i, (long long)buf[i]);
    H5Dclose(d);
}

/* Objects the store does not know (added to a closed file by another tool) survive the resume
 * of a killed writer, whose complete records are copied into a new file, and a stage table the
 * file lacks (a file written before every file had them) is added by that copy. */
Test(store, a_resume_keeps_the_objects_other_tools_added)
{
    const char *p = path_in("others.h5");
    peat_store_t *s = make_store(p);
    peat_record *r = gemm_record(1, 8, 8, 8, 5, NULL);
    cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
    peat_record_free(r);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT); /* plain write mode: objects may be made */
    cr_assert_geq(f, 0);
    extra_write(f, "/metrics/extra", 3, 7);
    extra_write(f, "/other/x", 5, 100);
    cr_assert_geq(H5Ldelete(f, PEAT_STORE_FI_TRIALS, H5P_DEFAULT), 0);
    H5Fclose(f);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) { /* a writer that dies without closing the file */
        s = reopen(p, 1);
        r = gemm_record(2, 8, 8, 8, 6, NULL);
        if (peat_store_call_write(s, r) != PEAT_OK) _exit(3);
        raise(SIGKILL);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFSIGNALED(st), "the writer was not killed (status %d)", st);
    int64_t creates = peat_store_test_swmr_creates();
    s = reopen(p, 1); /* the copy */
    cr_assert_eq(peat_store_test_swmr_creates(), creates, "the copy is made in plain write mode");
    cr_assert_eq(peat_store_call_count(s), 2);
    extra_check(s->file, "/metrics/extra", 3, 7);
    extra_check(s->file, "/other/x", 5, 100);
    cr_assert(peat_store_table_exists(s, PEAT_STORE_FI_TRIALS), "the copy has every stage table");
    cr_assert(!peat_store_table_present(s, PEAT_STORE_FI_TRIALS));
    r = gemm_record(3, 8, 8, 8, 7, NULL);
    cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
    peat_record_free(r);
    cr_assert_eq(peat_store_close(s), PEAT_OK, "%s", peat_error_last());
    s = reopen(p, 0);
    cr_assert_eq(peat_store_call_count(s), 3);
    extra_check(s->file, "/other/x", 5, 100);
    peat_store_close(s);
}

/* ---- a writer is alone; readers see a live file ---- */

Test(store, second_writer_is_refused_while_readers_see_the_live_file)
{
    const char *p = small_campaign("live.h5", 2);
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) {
        peat_store_t *s = NULL;
        if (peat_store_open(p, 1, &s) != PEAT_OK) _exit(3);
        peat_record *r = gemm_record(2, 64, 64, 64, 3, NULL);
        if (peat_store_call_write(s, r) != PEAT_OK) _exit(4);
        char c = 'k';
        if (write(ready[1], &c, 1) != 1) _exit(5);
        for (;;) pause();
    }
    char c;
    cr_assert_eq(read(ready[0], &c, 1), 1, "the writer did not start");
    peat_store_t *s = NULL;
    peat_status st = peat_store_open(p, 1, &s);
    int ok_refused =
        st == PEAT_ERR_IO && strstr(peat_error_last(), "being written by another process");
    char msg[512];
    snprintf(msg, sizeof msg, "%s", peat_error_last());
    peat_store_t *rd = NULL;
    peat_status rst = peat_store_open(p, 0, &rd);
    int64_t n = rd ? peat_store_call_count(rd) : -1;
    peat_store_close(rd);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    cr_assert(ok_refused, "a second writer got %s: %s", peat_status_str(st), msg);
    cr_assert_eq(rst, PEAT_OK, "reading the live file failed: %s", peat_error_last());
    cr_assert_eq(n, 3, "the reader saw %lld records of 3 flushed", (long long)n);
}

/* ---- crash safety: kill the writer, reopen, resume ---- */

#define KR_RECORDS 48

/* The records of the kill/resume campaign: deterministic in i; every 6th also writes a
 * checkpoint and every record a metrics row, so all record kinds are killed mid-write. Every
 * 4th record has a large sparse input (compressed: chunk writes and an HDF5 flush), every 8th
 * a large dense one (raw pool chunks grown mid-record, writes across chunk boundaries). */
static peat_record *kr_record(int i)
{
    static peat_tensor *w;
    if (!w) w = mk2(PEAT_DTYPE_F32, 24, 40, 1234); /* shared by every record: dedup across kills */
    int64_t m = i % 4 == 1 ? 400 : i % 8 == 3 ? 3000 : 16 + i % 5;
    peat_record *r = gemm_record((uint64_t)i * 3 + 1, m, 40, 24, 1000 + (uint64_t)i, NULL);
    if (i % 4 == 1) {
        float *a = r->in[0]->data;
        for (int64_t e = 0; e < m * 24; e++) a[e] = e % 13 ? 0.0f : a[e];
    }
    peat_tensor_free(r->in[1]);
    cr_assert_eq(peat_tensor_clone(w, &r->in[1]), PEAT_OK);
    peat_tensor_free(r->exact[0]);
    r->exact[0] = NULL;
    cr_assert_eq(peat_record_compute_exact(r), PEAT_OK);
    return r;
}

static peat_tensor *kr_state(int i, int k)
{
    return mk2(PEAT_DTYPE_F32, 20 + k, 30, 5000 + (uint64_t)i * 7 + (uint64_t)k);
}

static int64_t kr_kill_at = -1;
static int kr_partial;

/* The store's test hook in the writer: at step kr_kill_at the process dies; with kr_partial,
 * after flushing every dataset but not the file, as a kill in the middle of H5Fflush can leave
 * it (datasets' chunks, indexes and extents on disk, the superblock not). */
static void kr_hook(void *user, peat_store_t *s, int64_t step)
{
    (void)user;
    if (step != kr_kill_at) return;
    if (kr_partial) {
        hid_t ids[64];
        ssize_t n = H5Fget_obj_ids(s->file, H5F_OBJ_DATASET | H5F_OBJ_LOCAL, 64, ids);
        for (ssize_t i = 0; i < n; i++) H5Dflush(ids[i]);
    }
    raise(SIGKILL);
}

/* Child: writes what is missing, reporting each completed record on fd. Never returns. */
static void kr_child(const char *path, int fd, int64_t kill_step)
{
    peat_store_t *s = NULL;
    struct stat sb;
    peat_status st = stat(path, &sb) == 0
                         ? peat_store_open(path, 1, &s)
                         : peat_store_create(path, &(peat_store_meta){.seed = 42}, &s);
    if (st != PEAT_OK) {
        fprintf(stderr, "kr child: %s\n", peat_error_last());
        _exit(10);
    }
    if (kill_step >= 0) {
        kr_partial = kill_step >= 100;
        kr_kill_at = peat_store_step_count() + kill_step % 100;
        peat_store_test_hook_set(kr_hook, NULL);
    }
    for (int i = 0; i < KR_RECORDS; i++) {
        peat_record *r = kr_record(i);
        if (!peat_store_call_has(s, r->id)) {
            if (peat_store_call_write(s, r) != PEAT_OK) _exit(11);
            int msg = i;
            if (write(fd, &msg, sizeof msg) != sizeof msg) _exit(12);
        }
        peat_record_free(r);
        if (!peat_store_metrics_has(s, i)) {
            if (peat_store_metrics_append(s, i, 1.0 / (i + 1), i * 0.01) != PEAT_OK) _exit(13);
            int msg = 1000 + i;
            if (write(fd, &msg, sizeof msg) != sizeof msg) _exit(12);
        }
        if (i % 6 == 0 && !peat_store_state_has(s, i, "checkpoint")) {
            peat_tensor *t[2] = {kr_state(i, 0), kr_state(i, 1)};
            const char *nm[2] = {"w", "m"};
            if (peat_store_state_write(s, i, "checkpoint", 2, (const peat_tensor *const *)t, nm) !=
                PEAT_OK)
                _exit(14);
            peat_tensor_free(t[0]);
            peat_tensor_free(t[1]);
            int msg = 2000 + i;
            if (write(fd, &msg, sizeof msg) != sizeof msg) _exit(12);
        }
    }
    _exit(peat_store_close(s) == PEAT_OK ? 0 : 15);
}

/* Everything reported complete is present and bit-exact; nothing is doubled. */
static void kr_verify(const char *path, const unsigned char *reported, int final)
{
    peat_store_t *s = reopen(path, 0);
    int64_t n = peat_store_call_count(s);
    unsigned char seen[KR_RECORDS] = {0};
    for (int64_t k = 0; k < n; k++) {
        peat_record *got = NULL;
        cr_assert_eq(read_call(s, k, &got), PEAT_OK, "record %lld unreadable: %s", (long long)k,
                     peat_error_last());
        cr_assert_eq((got->id - 1) % 3, 0, "foreign id %llu", (unsigned long long)got->id);
        int i = (int)((got->id - 1) / 3);
        cr_assert(i >= 0 && i < KR_RECORDS && !seen[i], "record %d stored twice or unknown", i);
        seen[i] = 1;
        peat_record *want = kr_record(i);
        record_eq(want, got);
        peat_record_free(want);
        peat_record_free(got);
    }
    for (int i = 0; i < KR_RECORDS; i++) {
        if (reported[i] || final)
            cr_assert(seen[i], "record %d was reported complete but is missing", i);
        if (reported[1000 + i] || final)
            cr_assert(peat_store_metrics_has(s, i), "metrics %d missing", i);
        if ((reported[2000 + i] || final) && i % 6 == 0) {
            peat_store_state *st = NULL;
            cr_assert_eq(peat_store_state_read(s, i, "checkpoint", &st), PEAT_OK,
                         "checkpoint %d: %s", i, peat_error_last());
            for (int k = 0; k < 2; k++) {
                peat_tensor *want = kr_state(i, k);
                tensor_eq(want, st->t[k], "checkpoint", k);
                peat_tensor_free(want);
            }
            peat_store_state_free(st);
        }
    }
    for (int64_t k = 0; k < peat_store_metrics_count(s); k++)
        for (int64_t j = 0; j < k; j++) {
            int64_t a, b;
            peat_store_metrics_read(s, k, &a, NULL, NULL);
            peat_store_metrics_read(s, j, &b, NULL, NULL);
            cr_assert_neq(a, b, "metrics of iteration %lld stored twice", (long long)a);
        }
    if (final) {
        cr_assert_eq(n, KR_RECORDS, "%lld records after completion", (long long)n);
        cr_assert_eq(peat_store_metrics_count(s), KR_RECORDS);
        cr_assert_eq(peat_store_state_count(s), (KR_RECORDS + 5) / 6);
    }
    peat_store_close(s);
}

#define KR_TIMED (-1) /* kill at a random instant instead of at a step */
#define KR_NONE  (-2) /* let the writer finish */

/* One life of the writer: returns whether it finished; `reported` accumulates completions. */
static int kr_life(const char *path, unsigned char *reported, int64_t kill_step, int wait_records,
                   int delay_us)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        kr_child(path, fds[1], kill_step >= 0 ? kill_step : -1);
    }
    close(fds[1]);
    int got = 0, msg, status = 0;
    if (kill_step == KR_TIMED) { /* after some completions, at a random instant */
        while (got < wait_records && read(fds[0], &msg, sizeof msg) == sizeof msg) {
            reported[msg] = 1;
            got++;
        }
        struct timespec ts = {0, (long)delay_us * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
    }
    while (read(fds[0], &msg, sizeof msg) == sizeof msg) reported[msg] = 1;
    close(fds[0]);
    waitpid(pid, &status, 0);
    if (getenv("KR_DEBUG")) {
        int nrep = 0;
        for (int i = 0; i < 3000; i++) nrep += reported[i];
        fprintf(stderr, "life: step %lld, exited %d signaled %d, reported so far %d\n",
                (long long)kill_step, WIFEXITED(status), WIFSIGNALED(status), nrep);
    }
    if (WIFEXITED(status))
        cr_assert_eq(WEXITSTATUS(status), 0, "writer failed with %d", WEXITSTATUS(status));
    return WIFEXITED(status);
}

Test(store, killed_writer_loses_nothing_and_resume_doubles_nothing, .timeout = 600)
{
    const char *p = path_in("kill.h5");
    unsigned char reported[3000] = {0};
    /* kills at chosen steps of the write path (data chunks, index rows, before and after the
     * flush), each followed by a resume that carries on from the survivors */
    int lives = 0, finished = 0;
    for (int64_t k = 0; k < 52 && !finished; k++, lives++) {
        /* a record is 4..8 steps: every position; every other round the datasets were flushed
         * but not the file when the kill came (steps + 100) */
        finished = kr_life(p, reported, k % 13 + (k / 13 % 2) * 100, 0, 0);
        if (access(p, F_OK) == 0) kr_verify(p, reported, 0);
    }
    /* kills at random instants while records are being written (PEAT_KR_SEED picks other
     * instants, for stress runs outside the suite) */
    uint64_t lcg = getenv("PEAT_KR_SEED") ? strtoull(getenv("PEAT_KR_SEED"), NULL, 10) : 7;
    for (int k = 0; k < 30 && !finished; k++, lives++) {
        lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
        int delay = (int)((lcg >> 33) % 1500);
        finished = kr_life(p, reported, KR_TIMED, 1 + k % 3, delay);
        kr_verify(p, reported, 0);
    }
    if (!finished) cr_assert(kr_life(p, reported, KR_NONE, 0, 0), "the last writer did not finish");
    kr_verify(p, reported, 1);
    cr_assert_gt(lives, 20, "only %d writer lives", lives);
}

/* ---- what a kill leaves is the file as it is on disk: check it after every write ---- */

/* Copies the writer's file as the kernel has it now: what a SIGKILL at this instant leaves. */
static void snapshot(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    cr_assert(a && b);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) cr_assert_eq(fwrite(buf, 1, n, b), n);
    fclose(a);
    cr_assert_eq(fclose(b), 0);
}

Test(store, every_write_is_in_the_file_when_it_returns, .timeout = 600)
{
    /* deterministic and kill-free: after each write returns, a copy of the file must open and
     * hold that record, bit-exact (a missing flush, like the one the kill test once found, shows
     * here at the first record it affects) */
    const char *p = path_in("durable.h5"), *q = path_in("durable-copy.h5");
    peat_store_t *s = make_store(p);
    int n_states = 0;
    for (int i = 0; i < 24; i++) {
        peat_record *r = kr_record(i); /* small, compressed (sparse) and pool-growing records */
        cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(peat_store_metrics_append(s, i, 1.0 / (i + 1), 0.5), PEAT_OK);
        if (i % 5 == 0) {
            peat_tensor *t[2] = {kr_state(i, 0), kr_state(i, 1)};
            const char *nm[2] = {"w", "m"};
            cr_assert_eq(
                peat_store_state_write(s, i, "checkpoint", 2, (const peat_tensor *const *)t, nm),
                PEAT_OK);
            peat_tensor_free(t[0]);
            peat_tensor_free(t[1]);
            n_states++;
        }
        if (i == 17) cr_assert_eq(peat_store_signature_write(s, "k", "{\"i\": 17}"), PEAT_OK);
        snapshot(p, q);
        peat_store_t *c = reopen(q, 0);
        cr_assert_eq(peat_store_call_count(c), i + 1, "after record %d the file holds %lld", i,
                     (long long)peat_store_call_count(c));
        cr_assert_eq(peat_store_metrics_count(c), i + 1);
        cr_assert_eq(peat_store_state_count(c), n_states);
        cr_assert_eq(peat_store_signature_count(c), i >= 17);
        peat_store_stats st;
        cr_assert_eq(peat_store_stats_get(c, &st), PEAT_OK);
        cr_assert_eq(st.dropped_rows, 0, "record %d: %lld rows of an unfinished record", i,
                     (long long)st.dropped_rows);
        peat_record *back = NULL;
        cr_assert_eq(read_call(c, i, &back), PEAT_OK, "record %d: %s", i, peat_error_last());
        record_eq(r, back);
        peat_record_free(back);
        if (i % 5 == 0) {
            peat_store_state *ss = NULL;
            cr_assert_eq(peat_store_state_read(c, i, "checkpoint", &ss), PEAT_OK, "%s",
                         peat_error_last());
            peat_store_state_free(ss);
        }
        peat_store_close(c);
        peat_record_free(r);
    }
    peat_store_close(s);
}

/* ---- same seed, same flags: bit-identical records ---- */

static void profile_mlp(const char *path, uint64_t seed)
{
    peat_store_meta m = test_meta();
    m.seed = seed;
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_create(path, &m, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_runtime_builtin_init(), PEAT_OK);
    peat_profile_policy pol;
    memset(&pol, 0, sizeof pol);
    pol.every_k = 3;
    pol.max_calls = 40;
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_profiler_t *prof = peat_profiler_new(&pol, peat_store_sink, s);
    cr_assert_not_null(prof);
    cr_assert_eq(peat_exec_alloc("mlp", seed, &ex), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_profiler_attach(prof, ex), PEAT_OK);
    peat_flow_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seed = seed;
    cfg.batch = 16;
    cfg.width = 32;
    cfg.weight_decay = -1.0;
    cr_assert_eq(peat_models_flow_alloc("mlp", &cfg, ex, &f), PEAT_OK, "%s", peat_error_last());
    for (int it = 0; it < 2; it++) {
        peat_flow_metrics fm;
        cr_assert_eq(peat_models_flow_step(f, &fm), PEAT_OK, "%s", peat_error_last());
        cr_assert_eq(peat_store_metrics_append(s, it, fm.loss, fm.accuracy), PEAT_OK);
    }
    cr_assert_eq(peat_profiler_status(prof), PEAT_OK, "%s", peat_error_last());
    const peat_tensor *ts[64];
    const char *nm[64];
    int n = peat_models_flow_state_count(f);
    cr_assert(n > 0 && n <= 64);
    for (int i = 0; i < n; i++) ts[i] = peat_models_flow_state(f, i, &nm[i]);
    cr_assert_eq(peat_store_state_write(s, 2, "checkpoint", n, ts, nm), PEAT_OK, "%s",
                 peat_error_last());
    peat_models_flow_free(f);
    peat_exec_free(ex);
    peat_profiler_free(prof);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
}

/* Whether two campaign files hold the same records, bit for bit. */
static int same_records(const char *a, const char *b, int64_t *n_out)
{
    peat_store_t *x = reopen(a, 0), *y = reopen(b, 0);
    int same = peat_store_call_count(x) == peat_store_call_count(y);
    *n_out = peat_store_call_count(x);
    for (int64_t k = 0; same && k < peat_store_call_count(x); k++) {
        peat_record *r1 = NULL, *r2 = NULL;
        cr_assert_eq(read_call(x, k, &r1), PEAT_OK);
        cr_assert_eq(read_call(y, k, &r2), PEAT_OK);
        same = r1->id == r2->id && r1->n_in == r2->n_in && r1->n_out == r2->n_out;
        for (int i = 0; same && i < r1->n_in; i++)
            same = memcmp(r1->in[i]->data, r2->in[i]->data, peat_tensor_nbytes(r1->in[i])) == 0;
        for (int i = 0; same && i < r1->n_out; i++)
            same = memcmp(r1->golden[i]->data, r2->golden[i]->data,
                          peat_tensor_nbytes(r1->golden[i])) == 0 &&
                   memcmp(r1->exact[i]->data, r2->exact[i]->data,
                          peat_tensor_nbytes(r1->exact[i])) == 0;
        peat_record_free(r1);
        peat_record_free(r2);
    }
    peat_store_state *s1 = NULL, *s2 = NULL;
    cr_assert_eq(peat_store_state_read(x, 2, "checkpoint", &s1), PEAT_OK);
    cr_assert_eq(peat_store_state_read(y, 2, "checkpoint", &s2), PEAT_OK);
    same = same && s1->n == s2->n;
    for (int i = 0; same && i < s1->n; i++)
        same = memcmp(s1->t[i]->data, s2->t[i]->data, peat_tensor_nbytes(s1->t[i])) == 0;
    peat_store_state_free(s1);
    peat_store_state_free(s2);
    peat_store_close(x);
    peat_store_close(y);
    return same;
}

Test(store, same_seed_gives_bit_identical_records, .timeout = 120)
{
    const char *a = path_in("run-a.h5"), *b = path_in("run-b.h5"), *c = path_in("run-c.h5");
    profile_mlp(a, 7);
    profile_mlp(b, 7);
    profile_mlp(c, 8);
    int64_t n = 0;
    cr_assert(same_records(a, b, &n), "two runs with seed 7 recorded different tensors");
    cr_assert_gt(n, 5, "only %lld records", (long long)n);
    cr_assert(!same_records(a, c, &n),
              "seeds 7 and 8 recorded identical tensors: the comparison sees nothing");
}

/* Runs a Python script with the system interpreter (where python3-h5py lives); its stdout goes
 * to out (a short text). Skips the test where h5py is missing. */
static void h5py_run(const char *name, const char *script, char *out, size_t n)
{
    if (system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0)
        cr_skip_test("h5py is not installed");
    char sp[600], op[600], cmd[1400];
    snprintf(sp, sizeof sp, "%s/%s.py", dir, name);
    snprintf(op, sizeof op, "%s/%s.out", dir, name);
    FILE *f = fopen(sp, "w");
    cr_assert_not_null(f);
    fputs(script, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s > %s 2>&1", sp, op);
    int rc = system(cmd);
    f = fopen(op, "r");
    cr_assert_not_null(f);
    size_t k = fread(out, 1, n - 1, f);
    out[k] = 0;
    fclose(f);
    cr_assert_eq(rc, 0, "the h5py script %s failed:\n%s", sp, out);
}

/* h5py shows the names of op, phase, dtype and pool (HDF5 enumerations) without the docs. */
Test(store, h5py_shows_the_names_of_coded_columns)
{
    const char *p = small_campaign("enum.h5", 2);
    char script[1500], out[4096];
    snprintf(
        script, sizeof script,
        "import h5py\n"
        "f = h5py.File('%s', 'r')\n"
        "C, T = f['/calls/index'], f['/tensors/index']\n"
        "names = lambda d, col: {v: k for k, v in h5py.check_enum_dtype(d.dtype[col]).items()}\n"
        "c, t = C[0], T[C[0]['in'][0]]\n"
        "print('op', names(C, 'op')[c['op']])\n"
        "print('phase', names(C, 'phase')[c['phase']])\n"
        "print('dtype', names(T, 'dtype')[t['dtype']])\n"
        "print('pool', names(T, 'pool')[t['pool']])\n"
        "print('phases', ','.join(sorted(h5py.check_enum_dtype(C.dtype['phase']))))\n"
        "print('ops', len(h5py.check_enum_dtype(C.dtype['op'])))\n",
        p);
    h5py_run("h5py_names", script, out, sizeof out);
    peat_store_t *s = reopen(p, 0);
    peat_record h;
    cr_assert_eq(peat_store_call_header(s, 0, &h), PEAT_OK, "%s", peat_error_last());
    peat_store_close(s);
    char want[200];
    snprintf(want, sizeof want, "op %s\nphase %s\n", peat_op_name(h.op),
             h.phase == PEAT_PHASE_FWD   ? "fwd"
             : h.phase == PEAT_PHASE_BWD ? "bwd"
                                         : "opt");
    cr_assert(strstr(out, want), "h5py does not name the op and phase the store reads (%s):\n%s",
              want, out);
    cr_assert(strstr(out, "dtype f32\n"), "the gemm input's dtype is not named f32:\n%s", out);
    cr_assert(strstr(out, "pool deflate\n") || strstr(out, "pool raw\n"), "pool unnamed:\n%s", out);
    cr_assert(strstr(out, "phases bwd,fwd,opt\n"), "%s", out);
    snprintf(want, sizeof want, "ops %d\n", PEAT_OP_COUNT);
    cr_assert(strstr(out, want), "every op kind is a name of the op enumeration:\n%s", out);
}

/* A schema-3 file (op, phase, dtype, pool as plain integers) is still read, and refused for
 * appending with one line. */
Test(store, schema_3_files_are_read_not_appended)
{
    const char *p = small_campaign("v3.h5", 2);
    char script[1500], out[4096];
    snprintf(script, sizeof script,
             "import h5py, numpy as np\n"
             "f = h5py.File('%s', 'r+')\n"
             "for path in ['/tensors/index', '/calls/index']:\n"
             "    d = f[path]; a = d[...]; attrs = dict(d.attrs); ch = d.chunks\n"
             "    dt = np.dtype([(n, np.dtype(d.dtype[n].str) if d.dtype[n].shape == () else "
             "d.dtype[n]) for n in d.dtype.names])\n"
             "    del f[path]\n"
             "    n = f.create_dataset(path, data=a.astype(dt), maxshape=(None,), chunks=ch)\n"
             "    for k, v in attrs.items(): n.attrs[k] = v\n"
             "    print(path, h5py.check_enum_dtype(n.dtype['op' if 'op' in dt.names else "
             "'dtype']))\n"
             "f.attrs['peat_schema_version'] = np.int32(3)\n",
             p);
    h5py_run("h5py_v3", script, out, sizeof out);
    cr_assert(strstr(out, "/calls/index None"), "the rewrite left an enumeration:\n%s", out);
    peat_store_t *s = reopen(p, 0);
    cr_assert_eq(peat_store_call_count(s), 2);
    peat_record *r = NULL;
    cr_assert_eq(peat_store_call_read(s, 1, &r), PEAT_OK, "a schema-3 record: %s",
                 peat_error_last());
    cr_assert_eq(r->op, PEAT_OP_GEMM, "op read back as %d", (int)r->op);
    cr_assert_eq(r->in[0]->dtype, PEAT_DTYPE_F32);
    peat_record_free(r);
    peat_store_close(s);
    s = NULL;
    peat_status st = peat_store_open(p, 1, &s);
    cr_assert_eq(st, PEAT_ERR_FORMAT, "appending to a schema-3 file: %s", peat_error_last());
    cr_assert(strstr(peat_error_last(), "can be read but not appended to"), "%s",
              peat_error_last());
}

/* A full disk (the filesystem's free bytes taken as 0 through the store's test hook, in a child
 * that then exits as peat would): the write is refused before HDF5 flushes, in one line naming
 * the file and the cause, and the file keeps every record before it, resumable. Without root no
 * filesystem can be filled for real; the hook stands in for statvfs, the check and the
 * abandonment after it are the code a real full disk runs (an EFBIG from a real file-size
 * limit is tested end to end in test_write_errors.c). */
Test(store, a_full_disk_is_said_as_such_and_keeps_what_was_recorded)
{
    const char *path = path_in("full.h5");
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        peat_store_t *s = make_store(path);
        for (uint64_t id = 1; id <= 3; id++) {
            peat_record *r = gemm_record(id, 8, 8, 8, id, NULL);
            if (peat_store_call_write(s, r) != PEAT_OK) _exit(10);
            peat_record_free(r);
        }
        peat_store_test_room_set(0);
        peat_record *r = gemm_record(4, 8, 8, 8, 4, NULL);
        peat_status st = peat_store_call_write(s, r);
        const char *m = peat_error_last();
        int said = strstr(m, "no space left on device") && strstr(m, "full.h5") && !strchr(m, '\n');
        peat_store_close(s);
        _exit(st == PEAT_OK ? 11 : said ? 0 : 12);
    }
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
              "child: status %d (10: setup, 11: a full disk was not refused, 12: not said as "
              "'no space left on device' naming the file in one line)",
              ws);
    peat_store_resume_info info;
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_open_resume(path, &info, &s), PEAT_OK, "resume: %s", peat_error_last());
    cr_assert_eq(peat_store_call_count(s), 3, "records kept: %lld, want the 3 before the full disk",
                 (long long)peat_store_call_count(s));
    cr_assert_eq(info.damaged, 0);
    peat_store_close(s);
}

/* Whether the store's file is in SWMR write mode, as HDF5 says. */
static int swmr_writing(const peat_store_t *s)
{
    unsigned intent = 0;
    cr_assert_geq(H5Fget_intent(s->file, &intent), 0);
    return (intent & H5F_ACC_SWMR_WRITE) != 0;
}

/* HDF5's SWMR contract: while a file is open in SWMR write mode its writer creates no group,
 * dataset or attribute, only extends existing datasets. Every write path of a campaign's stages
 * (creation, a stage table's first rows, the manifest at commit, a reopened writer) creates
 * nothing in that mode: the store's creation sites count what they were asked to create while
 * HDF5 reported SWMR write mode. */
Test(store, swmr_writer_creates_no_object)
{
    const char *p = path_in("swmr.h5");
    int64_t before = peat_store_test_swmr_creates();
    peat_store_t *s = make_store(p);
    cr_assert(swmr_writing(s), "a new campaign file is written in SWMR write mode");
    static const char *const stage_tables[] = {
        PEAT_STORE_AMP_TABLE,        PEAT_STORE_RUNTIME_CURVES,   PEAT_STORE_RUNTIME_WDIST,
        PEAT_STORE_RUNTIME_VERDICTS, PEAT_STORE_FI_TRIALS,        PEAT_STORE_FI_SHARDS,
        PEAT_STORE_REPORT_STATE,     PEAT_STORE_CAPTURE_UNMAPPED, PEAT_STORE_MANIFEST};
    for (size_t i = 0; i < sizeof stage_tables / sizeof stage_tables[0]; i++) {
        cr_assert(peat_store_table_exists(s, stage_tables[i]), "%s is made with the file",
                  stage_tables[i]);
        cr_assert(!peat_store_table_present(s, stage_tables[i]), "%s is empty", stage_tables[i]);
    }
    /* the count is real: an attribute asked for now is refused and counted */
    cr_assert_lt(peat_store_attr_str(s->file, "late", "x"), 0);
    cr_assert_eq(peat_store_test_swmr_creates() - before, 1);
    before++;
    /* a table the file lacks is not made by a writer */
    static const peat_store_col other[] = {{"x", PEAT_STORE_COL_I64, 0}};
    peat_store_table_t *t = NULL;
    cr_assert_eq(peat_store_table_open(s, "/extra/t", other, 1, &t), PEAT_ERR_NOTFOUND);
    cr_assert(strstr(peat_error_last(), "created with the file"), "%s", peat_error_last());
    peat_record *r = gemm_record(1, 8, 8, 8, 1, NULL);
    cr_assert_eq(peat_store_call_write(s, r), PEAT_OK, "%s", peat_error_last());
    peat_record_free(r);
    int nc;
    const peat_store_col *cols = peat_store_amp_cols(&nc);
    cr_assert_eq(peat_store_table_open(s, PEAT_STORE_AMP_TABLE, cols, nc, &t), PEAT_OK, "%s",
                 peat_error_last());
    peat_store_value row[3] = {{.i = 0}, {.d = 65536.0}, {.i = 0}};
    cr_assert_eq(peat_store_table_append(t, row, 1), PEAT_OK, "%s", peat_error_last());
    peat_store_table_close(t);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
    cr_assert_eq(peat_store_open(p, 1, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert(swmr_writing(s), "a reopened writer is in SWMR write mode");
    const peat_store_stage stages[] = {{"profile", "/calls/index " PEAT_STORE_AMP_TABLE, NULL}};
    cr_assert_eq(peat_store_manifest_write(s, stages, 1), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_close(s), PEAT_OK);
    /* a version-4 file (written before every file had the stage tables): read as it is, and
     * its writer gets them by a copy into version 5 */
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    cr_assert_geq(f, 0);
    cr_assert_geq(H5Ldelete(f, PEAT_STORE_RUNTIME_CURVES, H5P_DEFAULT), 0);
    int32_t ver = 4;
    hid_t a = H5Aopen(f, "peat_schema_version", H5P_DEFAULT);
    cr_assert(a >= 0 && H5Awrite(a, H5T_NATIVE_INT32, &ver) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    cr_assert_eq(peat_store_open(p, 0, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert(!peat_store_table_exists(s, PEAT_STORE_RUNTIME_CURVES));
    cr_assert_eq(peat_store_close(s), PEAT_OK);
    cr_assert_eq(peat_store_open(p, 1, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert(swmr_writing(s));
    cr_assert(peat_store_table_exists(s, PEAT_STORE_RUNTIME_CURVES));
    cr_assert_eq(peat_store_call_count(s), 1);
    cr_assert_eq(peat_store_attr_num_read(s->file, "peat_schema_version", H5T_NATIVE_INT32, &ver),
                 1);
    cr_assert_eq(ver, PEAT_STORE_SCHEMA_VERSION, "the copy is of version %d", (int)ver);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
    cr_assert_eq(peat_store_test_swmr_creates() - before, 0,
                 "%lld objects were created in a file in SWMR write mode",
                 (long long)(peat_store_test_swmr_creates() - before));
    /* the file holds what was written */
    cr_assert_eq(peat_store_open(p, 0, &s), PEAT_OK, "%s", peat_error_last());
    peat_store_check chk;
    cr_assert_eq(peat_store_manifest_check(s, NULL, NULL, &chk), PEAT_OK);
    cr_assert(chk.has_manifest && chk.problems == 0, "manifest: %lld problems",
              (long long)chk.problems);
    cr_assert_eq(peat_store_table_open(s, PEAT_STORE_AMP_TABLE, cols, nc, &t), PEAT_OK);
    cr_assert_eq(peat_store_table_rows(t), 1);
    peat_store_table_close(t);
    cr_assert_eq(peat_store_close(s), PEAT_OK);
}

/* ---- a well-behaved library: HDF5's error handling is the host program's ---- */

static int host_handler_calls;

static herr_t host_handler(hid_t stack, void *client_data)
{
    (void)stack;
    (void)client_data;
    host_handler_calls++;
    return 0;
}

/* The host's handler is still the one installed, with its client data. */
static void expect_host_handler(H5E_auto2_t want, void *want_data, const char *after)
{
    H5E_auto2_t fn = NULL;
    void *data = NULL;
    cr_assert_geq(H5Eget_auto2(H5E_DEFAULT, &fn, &data), 0);
    cr_assert(fn == want, "after %s: HDF5's error handler is no longer the host's", after);
    cr_assert(data == want_data, "after %s: the handler's client data changed", after);
}

Test(store, host_hdf5_error_handler_is_left_as_the_host_set_it)
{
    /* before: peat_store_latency_write turned HDF5's printing off for the whole process
     * (H5Eset_auto2(H5E_DEFAULT, NULL, NULL)), h5py's next to the Python bridge included */
    static int host_data;
    H5E_auto2_t old_fn = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, host_handler, &host_data);
    host_handler_calls = 0;

    peat_store_t *s = make_store(path_in("c.h5"));
    cr_assert_eq(peat_store_metrics_append(s, 0, 1.0, 0.5), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_close(s), PEAT_OK, "%s", peat_error_last());
    expect_host_handler(host_handler, &host_data, "creating and writing a campaign file");
    cr_assert_eq(peat_store_close(reopen(path_in("c.h5"), 0)), PEAT_OK);
    expect_host_handler(host_handler, &host_data, "reopening it");

    FILE *f = fopen(path_in("junk.h5"), "w");
    cr_assert_not_null(f);
    fputs("not an HDF5 file at all\n", f);
    fclose(f);
    expect_format_error(path_in("junk.h5"), "junk.h5");
    expect_host_handler(host_handler, &host_data, "refusing a non-HDF5 campaign file");

    peat_store_latency_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.key, sizeof m.key, "cpu-test");
    snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_VERSION_STRING);
    peat_store_latency_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.kernel, sizeof row.kernel, "gemm_new");
    cr_assert_eq(peat_store_latency_write(path_in("lat.h5"), &m, &row, 1), PEAT_OK, "%s",
                 peat_error_last());
    expect_host_handler(host_handler, &host_data, "writing a latency cache");
    peat_store_latency_row *rows = NULL;
    int n = 0;
    cr_assert_eq(peat_store_latency_read(path_in("lat.h5"), &m, &rows, &n), PEAT_OK, "%s",
                 peat_error_last());
    free(rows);
    cr_assert_eq(peat_store_latency_read(path_in("junk.h5"), &m, &rows, &n), PEAT_ERR_FORMAT);
    cr_assert(!strchr(peat_error_last(), '\n'), "%s", peat_error_last());
    cr_assert_eq(peat_store_latency_read(path_in("c.h5"), &m, &rows, &n), PEAT_ERR_FORMAT);
    expect_host_handler(host_handler, &host_data, "reading latency caches, good and bad");
    cr_assert_eq(peat_store_latency_write(path_in("no/such/dir/lat.h5"), &m, &row, 1), PEAT_ERR_IO);
    expect_host_handler(host_handler, &host_data, "failing to write a latency cache");

    /* the errors PEAT handled (and said in one line) were never the host's to print */
    cr_assert_eq(host_handler_calls, 0, "the host's handler ran %d times for PEAT's own errors",
                 host_handler_calls);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
}
