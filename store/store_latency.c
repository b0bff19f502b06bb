/* store_latency.c: the predictor's calibration cache file (public HDF5 API only): a compound
 * dataset "rows" and string/double attributes on the root. */
#include "store/store_latency.h"
#include "store/store_impl.h"
#include "core/io_cause.h"

#include <errno.h>
#include <hdf5.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The row's compound type (native layout; HDF5 converts on other machines). */
static hid_t row_type(void)
{
    hsize_t np = PEAT_STORE_LATENCY_POINTS;
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(peat_store_latency_row));
    hid_t s = H5Tcopy(H5T_C_S1), arr = H5Tarray_create2(H5T_NATIVE_DOUBLE, 1, &np);
    if (t < 0 || s < 0 || arr < 0 || H5Tset_size(s, 64) < 0) {
        H5Tclose(t), H5Tclose(s), H5Tclose(arr);
        return -1;
    }
    typedef peat_store_latency_row R;
    herr_t e = H5Tinsert(t, "kernel", offsetof(R, kernel), s);
    e |= H5Tinsert(t, "desc_hash", offsetof(R, desc_hash), H5T_NATIVE_UINT64);
    e |= H5Tinsert(t, "class", offsetof(R, cls), H5T_NATIVE_INT32);
    e |= H5Tinsert(t, "n", offsetof(R, n), H5T_NATIVE_INT32);
    e |= H5Tinsert(t, "power_tail", offsetof(R, power_tail), H5T_NATIVE_INT32);
    e |= H5Tinsert(t, "overhead_s", offsetof(R, overhead_s), H5T_NATIVE_DOUBLE);
    e |= H5Tinsert(t, "clock_mhz", offsetof(R, clock_mhz), H5T_NATIVE_DOUBLE);
    e |= H5Tinsert(t, "x", offsetof(R, x), arr);
    e |= H5Tinsert(t, "t", offsetof(R, t), arr);
    H5Tclose(s), H5Tclose(arr);
    if (e < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static herr_t attr_write(hid_t loc, const char *name, hid_t type, const void *v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, type, v);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    return e;
}

static herr_t attr_str(hid_t loc, const char *name, const char *v, size_t cap, int write)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, cap) < 0) return -1;
    herr_t e;
    if (write) {
        /* all cap bytes go to the file: the tail past the string zeroed, not stack garbage */
        char buf[256] = {0};
        if (cap > sizeof buf) return H5Tclose(t), -1;
        snprintf(buf, sizeof buf, "%s", v);
        e = attr_write(loc, name, t, buf);
    } else {
        hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
        e = a < 0 ? -1 : H5Aread(a, t, (void *)v);
        if (a >= 0) H5Aclose(a);
        ((char *)v)[cap - 1] = 0;
    }
    H5Tclose(t);
    return e;
}

static herr_t write_file(hid_t f, const peat_store_latency_meta *m,
                         const peat_store_latency_row *rows, int n)
{
    herr_t e = attr_str(f, "peat_format", PEAT_STORE_LATENCY_FORMAT, 32, 1);
    e |= attr_str(f, "key", m->key, sizeof m->key, 1);
    e |= attr_str(f, "device", m->device, sizeof m->device, 1);
    e |= attr_str(f, "peat_version", m->peat_version, sizeof m->peat_version, 1);
    e |= attr_write(f, "cost_s", H5T_NATIVE_DOUBLE, &m->cost_s);
    hsize_t dims = (hsize_t)n;
    hid_t t = row_type(), sp = H5Screate_simple(1, &dims, NULL);
    hid_t d =
        t < 0 || sp < 0 ? -1 : H5Dcreate2(f, "rows", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    e |= d < 0 ? -1 : (n > 0 ? H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) : 0);
    if (d >= 0) H5Dclose(d);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return e;
}

static peat_status latency_write(const char *path, const peat_store_latency_meta *m,
                                 const peat_store_latency_row *rows, int n)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    errno = 0;
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot create latency cache %s: %s", tmp,
                          errno ? peat_io_cause(errno) : "HDF5 refused it");
    herr_t e = write_file(f, m, rows, n);
    int err = errno;
    if (H5Fclose(f) < 0 || e < 0) {
        if (!err) err = errno;
        remove(tmp);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot write latency cache %s: %s", tmp,
                          err ? peat_io_cause(err) : "HDF5 write failed");
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return PEAT_ERROR(PEAT_ERR_IO, "cannot rename %s to %s", tmp, path);
    }
    return PEAT_OK;
}

/* As every entry point of the store (STORE_GUARDED): HDF5's printing is off only for the call
 * (H5E_BEGIN_TRY saves the handler and restores it), so errors reach the user as one line and a
 * host program's own handler (h5py's, next to the Python bridge) is left as it was; and HDF5 is
 * told not to shut down at exit, where a file a failed write left open (a full disk) would have
 * it print "infinite loop closing library". */
peat_status peat_store_latency_write(const char *path, const peat_store_latency_meta *m,
                                     const peat_store_latency_row *rows, int n)
{
    peat_status st = PEAT_OK;
    STORE_GUARDED(st, latency_write(path, m, rows, n));
    return st;
}

static peat_status read_rows(hid_t f, const char *path, peat_store_latency_row **rows, int *n)
{
    hid_t d = H5Dopen2(f, "rows", H5P_DEFAULT);
    hid_t sp = d < 0 ? -1 : H5Dget_space(d);
    hssize_t count = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    hid_t t = row_type();
    peat_status st = PEAT_OK;
    if (count < 0 || count > 100000 || t < 0)
        st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: no readable rows", path);
    *rows = st == PEAT_OK ? calloc((size_t)count + 1, sizeof **rows) : NULL;
    if (st == PEAT_OK && !*rows) st = PEAT_ERROR(PEAT_ERR_NOMEM, "latency cache rows");
    if (st == PEAT_OK && count > 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, *rows) < 0)
        st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s: rows unreadable", path);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    if (st != PEAT_OK) {
        free(*rows);
        *rows = NULL;
        return st;
    }
    *n = (int)count;
    return PEAT_OK;
}

static peat_status latency_read(const char *path, peat_store_latency_meta *m,
                                peat_store_latency_row **rows, int *n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not an HDF5 file", path);
    char format[32] = "";
    memset(m, 0, sizeof *m);
    herr_t e = attr_str(f, "peat_format", format, sizeof format, 0);
    e |= attr_str(f, "key", m->key, sizeof m->key, 0);
    e |= attr_str(f, "device", m->device, sizeof m->device, 0);
    e |= attr_str(f, "peat_version", m->peat_version, sizeof m->peat_version, 0);
    hid_t a = H5Aopen(f, "cost_s", H5P_DEFAULT);
    e |= a < 0 ? -1 : H5Aread(a, H5T_NATIVE_DOUBLE, &m->cost_s);
    if (a >= 0) H5Aclose(a);
    peat_status st = PEAT_OK;
    if (e < 0 || strcmp(format, PEAT_STORE_LATENCY_FORMAT) != 0)
        st = PEAT_ERROR(PEAT_ERR_FORMAT, "%s is not a PEAT latency cache", path);
    if (st == PEAT_OK) st = read_rows(f, path, rows, n);
    H5Fclose(f);
    return st;
}

peat_status peat_store_latency_read(const char *path, peat_store_latency_meta *m,
                                    peat_store_latency_row **rows, int *n)
{
    *rows = NULL;
    *n = 0;
    FILE *probe = fopen(path, "rb");
    if (!probe) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no latency cache at %s", path);
    fclose(probe);
    peat_status st = PEAT_OK;
    STORE_GUARDED(st, latency_read(path, m, rows, n)); /* as peat_store_latency_write */
    return st;
}
