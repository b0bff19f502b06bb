/* store_util.c: small helpers of the store: rows, id/hash maps, strings, HDF5 errors, test hook. */
#include "store/store_impl.h"
#include "store/store_test.h"
#include "core/clock.h"
#include "core/io_cause.h"

#include <errno.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

peat_status peat_store_vec_push(store_vec *v, const void *item)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 64;
        void *d = realloc(v->data, (size_t)cap * v->elem);
        if (!d) return PEAT_ERROR(PEAT_ERR_NOMEM, "store index of %lld rows", (long long)cap);
        v->data = d;
        v->cap = cap;
    }
    memcpy((char *)v->data + (size_t)v->n * v->elem, item, v->elem);
    v->n++;
    return PEAT_OK;
}

void peat_store_vec_free(store_vec *v)
{
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

/* Keys are already well-mixed hashes or small ids; the finaliser spreads ids over the slots. */
static uint64_t slot_of(uint64_t key, int64_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return key & (uint64_t)(cap - 1);
}

static peat_status map_grow(store_map *m)
{
    int64_t cap = m->cap ? 2 * m->cap : 256;
    uint64_t *keys = malloc((size_t)cap * sizeof *keys);
    int64_t *vals = malloc((size_t)cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "store map of %lld slots", (long long)cap);
    }
    for (int64_t i = 0; i < cap; i++) vals[i] = -1;
    for (int64_t i = 0; i < m->cap; i++) {
        if (m->vals[i] < 0) continue;
        uint64_t j = slot_of(m->keys[i], cap);
        while (vals[j] >= 0) j = (j + 1) & (uint64_t)(cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return PEAT_OK;
}

peat_status peat_store_map_put(store_map *m, uint64_t key, int64_t val)
{
    if (2 * (m->n + 1) > m->cap) PEAT_TRY(map_grow(m)); /* load <= 1/2 keeps probes short */
    uint64_t j = slot_of(key, m->cap);
    while (m->vals[j] >= 0) j = (j + 1) & (uint64_t)(m->cap - 1);
    m->keys[j] = key;
    m->vals[j] = val;
    m->n++;
    return PEAT_OK;
}

int peat_store_map_next(const store_map *m, uint64_t key, int64_t *cursor, int64_t *val)
{
    if (!m->cap) return 0;
    uint64_t j =
        *cursor < 0 ? slot_of(key, m->cap) : (((uint64_t)*cursor + 1) & (uint64_t)(m->cap - 1));
    for (; m->vals[j] >= 0; j = (j + 1) & (uint64_t)(m->cap - 1)) {
        if (m->keys[j] == key) {
            *cursor = (int64_t)j;
            *val = m->vals[j];
            return 1;
        }
    }
    return 0;
}

void peat_store_map_free(store_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

peat_status peat_store_str_field(char *dst, size_t n, const char *src, const char *what)
{
    if (!src) src = "";
    size_t len = strlen(src);
    if (len >= n)
        return PEAT_ERROR(PEAT_ERR_INVAL, "%s '%.40s...' is longer than %zu characters", what, src,
                          n - 1);
    memset(dst, 0, n); /* the whole field is hashed and stored: no stale bytes after the string */
    memcpy(dst, src, len);
    return PEAT_OK;
}

static _Thread_local int device_errno; /* of the last peat_store_h5_msg: ENOSPC, EFBIG or 0 */

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *user)
{
    /* H5E_WALK_DOWNWARD starts at the API call; the last frame visited is the innermost cause */
    char *buf = user;
    if (e->desc && e->desc[0]) snprintf(buf, 256, "%s", e->desc);
    /* HDF5's file drivers put the system's errno into their message */
    const char *at = e->desc ? strstr(e->desc, "errno = ") : NULL;
    if (at) device_errno = atoi(at + 8);
    (void)n;
    return 0;
}

int peat_store_h5_errno(void)
{
    return device_errno;
}

void peat_store_write_failed(peat_store_t *s)
{
    if (device_errno == ENOSPC || device_errno == EFBIG) s->abandon = 1;
    device_errno = 0;
}

void peat_store_h5_quiet(void)
{
    /* Nothing to do: every caller runs inside STORE_GUARDED, whose H5E_BEGIN_TRY has turned
     * HDF5's printing off and puts the handler it found back afterwards. Setting it off here
     * (H5Eset_auto2(H5E_DEFAULT, NULL, NULL)) would outlive the call and silence HDF5 for a
     * host program too (h5py next to the Python bridge). */
}

const char *peat_store_h5_msg(void)
{
    static _Thread_local char buf[256];
    buf[0] = 0;
    device_errno = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, buf);
    /* a full disk or a file-size limit is said as such, not as HDF5's words for a failed write */
    if (device_errno == ENOSPC || device_errno == EFBIG)
        snprintf(buf, sizeof buf, "%s", peat_io_cause(device_errno));
    return buf;
}

/* ---- the test hook (store_test.h): set only by tests, compiled only into their builds ---- */

#ifdef PEAT_TEST_HOOKS
static peat_store_step_hook step_hook;
static void *step_user;
static int64_t steps;

void peat_store_test_hook_set(peat_store_step_hook hook, void *user)
{
    step_hook = hook;
    step_user = user;
}

int64_t peat_store_step_count(void)
{
    return steps;
}

void peat_store_step(peat_store_t *s)
{
    int64_t n = steps++;
    if (step_hook) step_hook(step_user, s, n);
}
#endif

/* ---- the SWMR contract: no object is created in SWMR write mode ---- */

#ifdef PEAT_TEST_HOOKS
static int64_t swmr_creates; /* peat_store_test_swmr_creates */
#endif

int peat_store_may_create(hid_t loc)
{
    hid_t f = H5Iget_file_id(loc);
    unsigned intent = 0;
    int swmr = f >= 0 && H5Fget_intent(f, &intent) >= 0 && (intent & H5F_ACC_SWMR_WRITE);
    if (f >= 0) H5Fclose(f);
#ifdef PEAT_TEST_HOOKS
    swmr_creates += swmr;
#endif
    return !swmr;
}

#ifdef PEAT_TEST_HOOKS
int64_t peat_store_test_swmr_creates(void)
{
    return swmr_creates;
}
#endif

/* ---- time spent in the store (benchmarks) ---- */

static _Thread_local int busy_depth;
static double busy_total;

static double clock_now(void)
{
    return peat_clock_now();
}

double peat_store_busy_begin(void)
{
    /* before HDF5's first call in this process: HDF5 then does not shut itself down at exit.
     * After a damaged file's object header failed to load it cannot (a cache entry stays
     * behind) and prints "infinite loop closing library" to stderr; the store closes every
     * file it opens itself, so nothing is left for the shutdown but memory */
    static int once;
    if (!once) {
        once = 1;
        H5dont_atexit();
    }
    return busy_depth++ == 0 ? clock_now() : -1.0; /* nested calls count once, at the top */
}

void peat_store_busy_end(double t0)
{
    busy_depth--;
    if (t0 >= 0) busy_total += clock_now() - t0;
}

double peat_store_busy_seconds(void)
{
    return busy_total;
}
