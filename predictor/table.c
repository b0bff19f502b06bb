/* table.c: calibration tables: per-kernel interpolation, descriptor and device hashes, the cache
 * key, and plain rows for storage. */
#include "predictor/predictor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* FNV-1a, 64 bit: stable across runs and builds (no pointers, no padding bytes hashed) */
static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s ? s : "", strlen(s ? s : "") + 1);
}

static uint64_t fnv_i64(uint64_t h, int64_t v)
{
    return fnv(h, &v, sizeof v);
}

uint64_t peat_predictor_kernel_hash(const peat_kernel *k)
{
    uint64_t h = fnv_str(FNV0, k->name);
    h = fnv_str(h, k->backend);
    h = fnv_str(h, k->desc);
    const int64_t f[] = {k->op,
                         k->role,
                         k->in_dtype,
                         k->out_dtype,
                         k->acc_dtype,
                         k->cfg.tile_m,
                         k->cfg.tile_n,
                         k->cfg.tile_k,
                         k->cfg.threads,
                         k->cfg.blocks_per_sm,
                         k->cfg.vec_width,
                         k->cfg.split_k};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) h = fnv_i64(h, f[i]);
    /* and the code it runs: the contents of the executable or plugin its function lives in */
    void *code = NULL;
    memcpy(&code, &k->fn, sizeof code < sizeof k->fn ? sizeof code : sizeof k->fn);
    return fnv_i64(h, (int64_t)peat_predictor_module_hash(code));
}

uint64_t peat_predictor_device_hash(const peat_pred_device *d)
{
    uint64_t h = fnv_str(FNV0, d->backend);
    h = fnv_str(h, d->name);
    h = fnv_i64(h, d->units);
    h = fnv_i64(h, d->simd_width);
    h = fnv_i64(h, d->edge_tiles_padded);
    for (int i = 0; i < 3; i++) h = fnv_i64(h, d->cache_bytes[i]);
    return h;
}

void peat_predictor_table_key(const peat_pred_table *t, char key[17])
{
    uint64_t h = fnv_i64(FNV0, (int64_t)peat_predictor_device_hash(&t->dev));
    h = fnv_str(h, t->version);
    for (int i = 0; i < t->n; i++) h = fnv_i64(h, (int64_t)t->k[i].desc_hash);
    snprintf(key, 17, "%016llx", (unsigned long long)h);
}

const peat_pred_ktable *peat_predictor_table_find(const peat_pred_table *t, const peat_kernel *k)
{
    uint64_t h = peat_predictor_kernel_hash(k);
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->k[i].kernel, k->name) == 0) return t->k[i].desc_hash == h ? &t->k[i] : NULL;
    return NULL;
}

void peat_predictor_table_free(peat_pred_table *t)
{
    free(t->k);
    t->k = NULL;
    t->n = t->cap = 0;
}

peat_status peat_predictor_table_add(peat_pred_table *t, const peat_pred_ktable *kt)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 32;
        peat_pred_ktable *k = realloc(t->k, sizeof *k * (size_t)cap);
        if (!k) return PEAT_ERROR(PEAT_ERR_NOMEM, "calibration table");
        t->k = k, t->cap = cap;
    }
    t->k[t->n++] = *kt;
    return PEAT_OK;
}

peat_status peat_predictor_ktable_build(peat_pred_ktable *kt, int n, const double *x,
                                        const double *t, double overhead_s)
{
    if (n < 1 || n > PEAT_PRED_MAX_POINTS)
        return PEAT_ERROR(PEAT_ERR_INVAL, "calibration: %d points (1..%d)", n,
                          PEAT_PRED_MAX_POINTS);
    kt->n = 0;
    kt->overhead_s = overhead_s > 0 ? overhead_s : 0.0;
    for (int i = 0; i < n; i++) {
        if (!(x[i] > 0) || !(t[i] >= 0))
            return PEAT_ERROR(PEAT_ERR_INVAL, "calibration point %d: x %g, t %g", i, x[i], t[i]);
        /* insertion by x; equal x (two shapes of one quantised work) keep their median-free max */
        int j = kt->n;
        while (j > 0 && kt->x[j - 1] > x[i]) {
            kt->x[j] = kt->x[j - 1], kt->t[j] = kt->t[j - 1];
            j--;
        }
        kt->x[j] = x[i], kt->t[j] = t[i];
        kt->n++;
    }
    /* more work never takes less time: noise that says otherwise is flattened (running max) */
    double floor_t = kt->overhead_s;
    for (int i = 0; i < kt->n; i++) {
        if (kt->t[i] < floor_t) kt->t[i] = floor_t;
        floor_t = kt->t[i];
    }
    return PEAT_OK;
}

double peat_predictor_ktable_eval(const peat_pred_ktable *kt, double x)
{
    if (kt->n == 0) return kt->overhead_s;
    if (x <= kt->x[0]) {
        double f = x > 0 ? x / kt->x[0] : 0.0;
        return kt->overhead_s + f * (kt->t[0] - kt->overhead_s);
    }
    for (int i = 1; i < kt->n; i++)
        if (x <= kt->x[i]) {
            double f = (x - kt->x[i - 1]) / (kt->x[i] - kt->x[i - 1]);
            return kt->t[i - 1] + f * (kt->t[i] - kt->t[i - 1]);
        }
    int l = kt->n - 1;
    if (kt->power_tail && l > 0 && kt->t[l - 1] > 0 && kt->t[l] > kt->t[l - 1]) {
        /* the growth of the last segment, held between linear and N^1.15 (N log N over about a
         * decade): beyond the measured range an overestimate cannot be undone by the budget
         * control (a plan sized too small ends early), an underestimate can */
        double b = log(kt->t[l] / kt->t[l - 1]) / log(kt->x[l] / kt->x[l - 1]);
        b = b < 1.0 ? 1.0 : b > PEAT_PRED_TAIL_MAX ? PEAT_PRED_TAIL_MAX : b;
        return kt->t[l] * pow(x / kt->x[l], b);
    }
    /* beyond the last point: the throughput of the last segment (or of the only point) */
    double slope = l > 0 ? (kt->t[l] - kt->t[l - 1]) / (kt->x[l] - kt->x[l - 1])
                         : (kt->t[0] - kt->overhead_s) / kt->x[0];
    return kt->t[l] + (x - kt->x[l]) * slope;
}

void peat_predictor_row_from(const peat_pred_ktable *kt, peat_pred_row *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->kernel, sizeof r->kernel, "%s", kt->kernel);
    r->desc_hash = kt->desc_hash;
    r->cls = (int32_t)kt->cls;
    r->n = kt->n;
    r->power_tail = kt->power_tail;
    r->overhead_s = kt->overhead_s;
    r->clock_mhz = kt->clock_mhz;
    for (int i = 0; i < kt->n; i++) r->x[i] = kt->x[i], r->t[i] = kt->t[i];
}

peat_status peat_predictor_row_to(const peat_pred_row *r, peat_pred_ktable *kt)
{
    if (r->n < 1 || r->n > PEAT_PRED_MAX_POINTS ||
        (r->cls != PEAT_PRED_COMPUTE && r->cls != PEAT_PRED_MEMORY))
        return PEAT_ERROR(PEAT_ERR_FORMAT, "calibration row '%.64s': %d points, class %d",
                          r->kernel, r->n, r->cls);
    memset(kt, 0, sizeof *kt);
    snprintf(kt->kernel, sizeof kt->kernel, "%.63s", r->kernel);
    kt->desc_hash = r->desc_hash;
    kt->cls = (peat_pred_class)r->cls;
    kt->clock_mhz = r->clock_mhz;
    kt->power_tail = r->power_tail != 0;
    return peat_predictor_ktable_build(kt, r->n, r->x, r->t, r->overhead_s);
}
