/* store_calls.c: calls.h5 and outs.h5 of the file protocol (store_calls.h, docs/calls.md): one
 * group per call under /calls, written and read with HDF5's high-level (H5LT) calls inside
 * STORE_GUARDED, so that a damaged or foreign file is one line, never an HDF5 error stack. */
#include "store/store_calls.h"
#include "store/store_impl.h"

#include <hdf5_hl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct peat_store_calls {
    hid_t file;
    char kind[8]; /* "calls" or "outs" */
    char op[32], kernel[64];
    char *words;
    int64_t n;
    char path[512];
};

uint64_t peat_store_calls_sum(peat_op_kind op, const peat_op_params *p, int n_in,
                              const peat_tensor *const *in)
{
    uint64_t h = 1469598103934665603ull;
#define FNV(ptr, len)                                                                              \
    for (size_t b_ = 0; b_ < (size_t)(len); b_++)                                                  \
        h = (h ^ ((const unsigned char *)(ptr))[b_]) * 1099511628211ull;
    int32_t o = (int32_t)op;
    FNV(&o, sizeof o);
    FNV(p->i, sizeof p->i);
    FNV(p->f, sizeof p->f);
    for (int k = 0; k < n_in; k++) {
        if (!in[k]) continue;
        FNV(in[k]->shape, (size_t)in[k]->ndim * sizeof in[k]->shape[0]);
        FNV(in[k]->data, peat_tensor_nbytes(in[k]));
    }
#undef FNV
    return h;
}

static hid_t h5_type(peat_dtype t)
{
    switch (t) {
    case PEAT_DTYPE_F64:
        return H5T_NATIVE_DOUBLE;
    case PEAT_DTYPE_I32:
        return H5T_NATIVE_INT32;
    default:
        return H5T_NATIVE_FLOAT;
    }
}

static herr_t put_tensor(hid_t g, const char *name, const peat_tensor *t)
{
    hsize_t dims[PEAT_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) dims[d] = (hsize_t)t->shape[d];
    return H5LTmake_dataset(g, name, t->ndim, dims, h5_type(t->dtype), t->data);
}

static herr_t put_i64(hid_t g, const char *attr, const int64_t *v, int n)
{
    long long buf[PEAT_PARAM_I > PEAT_MAX_IO ? PEAT_PARAM_I : PEAT_MAX_IO];
    for (int k = 0; k < n; k++) buf[k] = v[k];
    return H5LTset_attribute_long_long(g, ".", attr, buf, (size_t)(n > 0 ? n : 1));
}

static herr_t put_call(hid_t calls, int64_t idx, const peat_store_calls_call *c)
{
    char name[32];
    snprintf(name, sizeof name, "%06lld", (long long)idx);
    hid_t g = H5Gcreate2(calls, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    herr_t e = H5LTset_attribute_string(g, ".", "op", peat_op_name(c->op));
    if (e >= 0) e = put_i64(g, "i", c->p.i, PEAT_PARAM_I);
    if (e >= 0) e = H5LTset_attribute_double(g, ".", "f", c->p.f, PEAT_PARAM_F);
    if (e >= 0) e = H5LTset_attribute_string(g, ".", "stage", c->stage);
    int in_order = c->in_order;
    if (e >= 0) e = H5LTset_attribute_int(g, ".", "in_order", &in_order, 1);
    if (e >= 0) e = put_i64(g, "in_buffer", c->in_buf, c->n_in);
    if (e >= 0) e = put_i64(g, "out_buffer", c->out_buf, c->n_out);
    unsigned long long sum = c->sum;
    if (e >= 0) e = H5LTset_attribute_ulong(g, ".", "checksum", (unsigned long *)&sum, 1);
    for (int k = 0; k < c->n_in && e >= 0; k++) {
        snprintf(name, sizeof name, "in%d", k);
        e = put_tensor(g, name, c->in[k]);
    }
    for (int k = 0; k < c->n_out && e >= 0; k++) {
        snprintf(name, sizeof name, "out%d", k);
        e = put_tensor(g, name, c->out[k]);
    }
    H5Gclose(g);
    return e;
}

static peat_status write_file(const char *path, const char *op, const char *words,
                              const peat_store_calls_call *calls, int64_t n)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return PEAT_ERROR(PEAT_ERR_IO, "cannot create %s", path);
    int version = PEAT_STORE_CALLS_VERSION;
    long long count = n;
    herr_t e = H5LTset_attribute_string(f, "/", "peat", "calls");
    if (e >= 0) e = H5LTset_attribute_int(f, "/", "version", &version, 1);
    if (e >= 0) e = H5LTset_attribute_string(f, "/", "op", op);
    if (e >= 0) e = H5LTset_attribute_string(f, "/", "run", words);
    if (e >= 0) e = H5LTset_attribute_string(f, "/", "peat_version", PEAT_VERSION_STRING);
    if (e >= 0) e = H5LTset_attribute_long_long(f, "/", "n_calls", &count, 1);
    hid_t g = e >= 0 ? H5Gcreate2(f, "calls", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    for (int64_t i = 0; i < n && g >= 0 && e >= 0; i++) e = put_call(g, i, &calls[i]);
    if (g >= 0) H5Gclose(g);
    if (H5Fclose(f) < 0 || g < 0 || e < 0) {
        unlink(path);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot write %s (disk full?)", path);
    }
    return PEAT_OK;
}

peat_status peat_store_calls_write(const char *path, const char *op, const char *words,
                                   const peat_store_calls_call *calls, int64_t n)
{
    peat_status st;
    STORE_GUARDED(st, write_file(path, op, words, calls, n));
    return st;
}

/* A string attribute of obj into a fresh buffer (NULL when absent or not a string). */
static char *get_str(hid_t loc, const char *obj, const char *attr)
{
    hsize_t dims[1] = {0};
    H5T_class_t cls;
    size_t size = 0;
    if (H5Aexists_by_name(loc, obj, attr, H5P_DEFAULT) <= 0 ||
        H5LTget_attribute_info(loc, obj, attr, dims, &cls, &size) < 0 || cls != H5T_STRING)
        return NULL;
    char *s = calloc(1, size + 1);
    if (s && H5LTget_attribute_string(loc, obj, attr, s) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

static peat_status open_file(const char *path, const char *kind, peat_store_calls *f)
{
    if (access(path, R_OK) != 0) return PEAT_ERROR(PEAT_ERR_IO, "cannot read %s", path);
    if (H5Fis_hdf5(path) <= 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not an HDF5 file (a %s.h5 of docs/calls.md)",
                          path, kind);
    f->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f->file < 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s cannot be opened (damaged?)", path);
    char *k = get_str(f->file, "/", "peat");
    int version = 0;
    int ok = k && strcmp(k, kind) == 0;
    free(k);
    if (!ok)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s is not a %s file of PEAT's file protocol (its root attribute "
                          "\"peat\" must be \"%s\": docs/calls.md)",
                          path, kind, kind);
    if (H5LTget_attribute_int(f->file, "/", "version", &version) < 0 ||
        version != PEAT_STORE_CALLS_VERSION)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s is version %d of the file protocol, this peat reads %d", path,
                          version, PEAT_STORE_CALLS_VERSION);
    if (strcmp(kind, "calls") == 0) {
        char *op = get_str(f->file, "/", "op");
        f->words = get_str(f->file, "/", "run");
        long long n = -1;
        if (!op || !f->words || H5LTget_attribute_long_long(f->file, "/", "n_calls", &n) < 0 ||
            n < 0) {
            free(op);
            return PEAT_ERROR(PEAT_ERR_FORMAT, "%s lacks its op, run words or call count", path);
        }
        snprintf(f->op, sizeof f->op, "%s", op);
        free(op);
        f->n = n;
    } else {
        char *kn = get_str(f->file, "/", "kernel");
        snprintf(f->kernel, sizeof f->kernel, "%s", kn ? kn : "");
        free(kn);
    }
    return PEAT_OK;
}

peat_status peat_store_calls_open(const char *path, const char *kind, peat_store_calls **out)
{
    *out = NULL;
    peat_store_calls *f = calloc(1, sizeof *f);
    if (!f) return PEAT_ERROR(PEAT_ERR_NOMEM, "call file");
    f->file = -1;
    snprintf(f->kind, sizeof f->kind, "%s", kind);
    snprintf(f->path, sizeof f->path, "%s", path);
    peat_status st;
    STORE_GUARDED(st, open_file(path, kind, f));
    if (st != PEAT_OK) {
        peat_store_calls_close(f);
        return st;
    }
    *out = f;
    return PEAT_OK;
}

peat_status peat_store_calls_close(peat_store_calls *f)
{
    if (!f) return PEAT_OK;
    herr_t e = 0;
    if (f->file >= 0) STORE_GUARDED(e, H5Fclose(f->file));
    free(f->words);
    free(f);
    return e < 0 ? PEAT_ERROR(PEAT_ERR_IO, "closing a call file failed") : PEAT_OK;
}

int64_t peat_store_calls_count(const peat_store_calls *f)
{
    return f->n;
}

const char *peat_store_calls_op(const peat_store_calls *f)
{
    return f->op;
}

const char *peat_store_calls_words(const peat_store_calls *f)
{
    return f->words ? f->words : "";
}

const char *peat_store_calls_kernel(const peat_store_calls *f)
{
    return f->kernel;
}

/* Dataset name of group g as a tensor of the dtype its file type says; want (when not NULL) the
 * shape and dtype it must have. */
static peat_status get_tensor(hid_t g, const char *gname, const char *name, const peat_tensor *want,
                              peat_tensor **out, const char *path)
{
    int ndim = -1;
    hsize_t dims[PEAT_MAX_DIMS + 1];
    H5T_class_t cls;
    size_t size = 0;
    if (H5LTfind_dataset(g, name) <= 0 || H5LTget_dataset_ndims(g, name, &ndim) < 0 || ndim < 1 ||
        ndim > PEAT_MAX_DIMS || H5LTget_dataset_info(g, name, dims, &cls, &size) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: call %s has no %s (or not a 1- to %d-d array)",
                          path, gname, name, PEAT_MAX_DIMS);
    peat_dtype t = cls == H5T_INTEGER && size == 4 ? PEAT_DTYPE_I32
                   : cls == H5T_FLOAT && size == 8 ? PEAT_DTYPE_F64
                   : cls == H5T_FLOAT && size == 4 ? PEAT_DTYPE_F32
                                                   : PEAT_DTYPE_COUNT;
    int64_t shape[PEAT_MAX_DIMS];
    for (int d = 0; d < ndim; d++) shape[d] = (int64_t)dims[d];
    if (want) {
        int same = t == want->dtype && ndim == want->ndim;
        for (int d = 0; same && d < ndim; d++) same = shape[d] == want->shape[d];
        if (!same)
            return PEAT_ERROR(
                PEAT_ERR_FORMAT,
                "%s: call %s %s is not the %s %lldx%lld... array calls.h5 asks for "
                "(%d-d, %s)",
                path, gname, name, peat_dtype_name(want->dtype), (long long)want->shape[0],
                (long long)(want->ndim > 1 ? want->shape[1] : 1), ndim,
                t == PEAT_DTYPE_COUNT ? "not float32/float64/int32" : peat_dtype_name(t));
    }
    if (t == PEAT_DTYPE_COUNT)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: call %s %s is not float32, float64 or int32", path,
                          gname, name);
    PEAT_TRY(peat_tensor_alloc(t, ndim, shape, out));
    if (H5LTread_dataset(g, name, h5_type(t), (*out)->data) < 0) {
        peat_tensor_free(*out);
        *out = NULL;
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: call %s %s cannot be read", path, gname, name);
    }
    return PEAT_OK;
}

static peat_status get_i64(hid_t g, const char *attr, int64_t *v, int n, const char *what)
{
    long long buf[PEAT_PARAM_I > PEAT_MAX_IO ? PEAT_PARAM_I : PEAT_MAX_IO];
    hsize_t dims[1] = {0};
    H5T_class_t cls;
    size_t size;
    if (H5Aexists_by_name(g, ".", attr, H5P_DEFAULT) <= 0 ||
        H5LTget_attribute_info(g, ".", attr, dims, &cls, &size) < 0 ||
        dims[0] != (hsize_t)(n > 0 ? n : 1) || H5LTget_attribute_long_long(g, ".", attr, buf) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s lacks its attribute %s", what, attr);
    for (int k = 0; k < n; k++) v[k] = buf[k];
    return PEAT_OK;
}

/* Counts the datasets prefix0, prefix1, ... of g. */
static int count_sets(hid_t g, const char *prefix)
{
    int n = 0;
    char name[16];
    for (; n < PEAT_MAX_IO; n++) {
        snprintf(name, sizeof name, "%s%d", prefix, n);
        if (H5LTfind_dataset(g, name) <= 0) break;
    }
    return n;
}

static peat_status get_call(peat_store_calls *f, hid_t g, const char *name,
                            peat_store_calls_call *c)
{
    char what[600];
    snprintf(what, sizeof what, "%s: call %s", f->path, name);
    char *op = get_str(g, ".", "op"), *stage = get_str(g, ".", "stage");
    peat_status st = op && peat_op_parse(op, &c->op) == PEAT_OK
                         ? PEAT_OK
                         : PEAT_ERROR(PEAT_ERR_FORMAT, "%s has no known op", what);
    snprintf(c->stage, sizeof c->stage, "%s", stage ? stage : "");
    free(op), free(stage);
    PEAT_TRY(st);
    PEAT_TRY(get_i64(g, "i", c->p.i, PEAT_PARAM_I, what));
    if (H5LTget_attribute_double(g, ".", "f", c->p.f) < 0 ||
        H5LTget_attribute_int(g, ".", "in_order", &c->in_order) < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s lacks its attribute f or in_order", what);
    c->n_in = count_sets(g, "in"), c->n_out = count_sets(g, "out");
    PEAT_TRY(get_i64(g, "in_buffer", c->in_buf, c->n_in, what));
    PEAT_TRY(get_i64(g, "out_buffer", c->out_buf, c->n_out, what));
    char ds[16];
    for (int k = 0; k < c->n_in; k++) {
        snprintf(ds, sizeof ds, "in%d", k);
        PEAT_TRY(get_tensor(g, name, ds, NULL, &c->in[k], f->path));
    }
    for (int k = 0; k < c->n_out; k++) {
        snprintf(ds, sizeof ds, "out%d", k);
        PEAT_TRY(get_tensor(g, name, ds, NULL, &c->out[k], f->path));
    }
    c->sum = peat_store_calls_sum(c->op, &c->p, c->n_in, (const peat_tensor *const *)c->in);
    return PEAT_OK;
}

static peat_status get_locked(peat_store_calls *f, int64_t idx, peat_store_calls_call *c)
{
    char name[32];
    snprintf(name, sizeof name, "calls/%06lld", (long long)idx);
    hid_t g =
        H5Lexists(f->file, "calls", H5P_DEFAULT) > 0 && H5Lexists(f->file, name, H5P_DEFAULT) > 0
            ? H5Gopen2(f->file, name, H5P_DEFAULT)
            : -1;
    if (g < 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s has no call %lld", f->path, (long long)idx);
    peat_status st = get_call(f, g, name + 6, c);
    H5Gclose(g);
    return st;
}

peat_status peat_store_calls_get(peat_store_calls *f, int64_t idx, peat_store_calls_call *c)
{
    memset(c, 0, sizeof *c);
    peat_status st;
    STORE_GUARDED(st, get_locked(f, idx, c));
    if (st != PEAT_OK) peat_store_calls_call_free(c);
    return st;
}

void peat_store_calls_call_free(peat_store_calls_call *c)
{
    for (int k = 0; k < PEAT_MAX_IO; k++) {
        peat_tensor_free(c->in[k]);
        peat_tensor_free(c->out[k]);
        c->in[k] = c->out[k] = NULL;
    }
}

static peat_status outs_locked(peat_store_calls *f, int64_t idx, int n, peat_tensor *const *out)
{
    char name[32];
    snprintf(name, sizeof name, "calls/%06lld", (long long)idx);
    if (H5Lexists(f->file, "calls", H5P_DEFAULT) <= 0 || H5Lexists(f->file, name, H5P_DEFAULT) <= 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "%s has no outputs for call %lld (a harness writes "
                          "/calls/%06lld for every call of calls.h5)",
                          f->path, (long long)idx, (long long)idx);
    hid_t g = H5Gopen2(f->file, name, H5P_DEFAULT);
    if (g < 0)
        return PEAT_ERROR(PEAT_ERR_FORMAT, "%s: call %lld cannot be read", f->path, (long long)idx);
    char *err = get_str(g, ".", "error");
    peat_status st = PEAT_OK;
    if (err) st = PEAT_ERROR(PEAT_ERR_KERNEL, "the harness reports: %s", err);
    for (int k = 0; k < n && st == PEAT_OK; k++) {
        char ds[16];
        peat_tensor *t = NULL;
        snprintf(ds, sizeof ds, "out%d", k);
        st = get_tensor(g, name + 6, ds, out[k], &t, f->path);
        if (st == PEAT_OK) memcpy(out[k]->data, t->data, peat_tensor_nbytes(t));
        peat_tensor_free(t);
    }
    free(err);
    H5Gclose(g);
    return st;
}

peat_status peat_store_calls_outs_get(peat_store_calls *f, int64_t idx, int n,
                                      peat_tensor *const *out)
{
    peat_status st;
    STORE_GUARDED(st, outs_locked(f, idx, n, out));
    return st;
}
