/* store_types.c: HDF5 compound types of the index-table rows and the pools' element types. */
#include "store/store_impl.h"

#include <stddef.h>
#include <string.h>

/* Rows must have no padding: the checksum covers every byte but the last field. */
_Static_assert(offsetof(store_tensor_row, check) == sizeof(store_tensor_row) - 8,
               "tensor row padding");
_Static_assert(offsetof(store_call_row, check) == sizeof(store_call_row) - 8, "call row padding");
_Static_assert(offsetof(store_state_row, check) == sizeof(store_state_row) - 8,
               "state row padding");
_Static_assert(offsetof(store_metric_row, check) == sizeof(store_metric_row) - 8,
               "metric row padding");
_Static_assert(offsetof(store_sig_row, check) == sizeof(store_sig_row) - 8, "sig row padding");

static const char *const table_paths[STORE_T_COUNT] = {
    [STORE_T_TENSOR] = "/tensors/index", [STORE_T_CALL] = "/calls/index",
    [STORE_T_STATE] = "/states/index",   [STORE_T_METRIC] = "/metrics/index",
    [STORE_T_SIG] = "/signatures/index",
};

static const char *const pool_paths[PEAT_DTYPE_COUNT] = {
    [PEAT_DTYPE_F64] = "/tensors/f64",   [PEAT_DTYPE_F32] = "/tensors/f32",
    [PEAT_DTYPE_BF16] = "/tensors/bf16", [PEAT_DTYPE_F16] = "/tensors/f16",
    [PEAT_DTYPE_I32] = "/tensors/i32",
};

static const char *const raw_paths[PEAT_DTYPE_COUNT] = {
    [PEAT_DTYPE_F64] = "/tensors/f64_raw",   [PEAT_DTYPE_F32] = "/tensors/f32_raw",
    [PEAT_DTYPE_BF16] = "/tensors/bf16_raw", [PEAT_DTYPE_F16] = "/tensors/f16_raw",
    [PEAT_DTYPE_I32] = "/tensors/i32_raw",
};

const char *peat_store_raw_path(peat_dtype t)
{
    return raw_paths[t];
}

const char *peat_store_table_path(int table)
{
    return table_paths[table];
}
const char *peat_store_pool_path(peat_dtype t)
{
    return pool_paths[t];
}

size_t peat_store_row_size(int table)
{
    static const size_t sizes[STORE_T_COUNT] = {
        sizeof(store_tensor_row), sizeof(store_call_row), sizeof(store_state_row),
        sizeof(store_metric_row), sizeof(store_sig_row),
    };
    return sizes[table];
}

int64_t peat_store_table_chunk_rows(int table)
{
    int64_t n = STORE_TABLE_CHUNK_BYTES / (int64_t)peat_store_row_size(table);
    return n < 16 ? 16 : n;
}

int64_t peat_store_raw_chunk_elems(peat_dtype t)
{
    return STORE_RAW_CHUNK_BYTES / (int64_t)peat_dtype_size(t);
}

/* Member builders: the file layout uses explicit little-endian types so files are portable;
 * the memory layout uses native types (identical on the little-endian hosts PEAT runs on). */
typedef struct {
    hid_t t;
    int file;
    int bad;
    int plain; /* coded columns as plain integers (memory layout of a schema-3 file) */
} builder;

static void add(builder *b, const char *name, size_t off, hid_t native, hid_t le)
{
    if (H5Tinsert(b->t, name, off, b->file ? le : native) < 0) b->bad = 1;
}
static void add_i64(builder *b, const char *n, size_t off)
{
    add(b, n, off, H5T_NATIVE_INT64, H5T_STD_I64LE);
}
static void add_u64(builder *b, const char *n, size_t off)
{
    add(b, n, off, H5T_NATIVE_UINT64, H5T_STD_U64LE);
}
static void add_i32(builder *b, const char *n, size_t off)
{
    add(b, n, off, H5T_NATIVE_INT32, H5T_STD_I32LE);
}
static void add_i16(builder *b, const char *n, size_t off)
{
    add(b, n, off, H5T_NATIVE_INT16, H5T_STD_I16LE);
}
/* The coded columns (op, phase, dtype, pool) as HDF5 enumerations, so that h5dump and h5py
 * show their names; the values are the C enums' (docs/hdf5-schema.md lists them). */
static hid_t coded_type(const char *col, hid_t base)
{
    static const char *const phases[] = {"fwd", "bwd", "opt"};
    static const char *const pools[] = {"deflate", "raw"};
    hid_t t = H5Tenum_create(base);
    int bad = t < 0, n = !strcmp(col, "op")      ? PEAT_OP_COUNT
                         : !strcmp(col, "dtype") ? PEAT_DTYPE_COUNT
                                                 : 2 + !strcmp(col, "phase");
    for (int v = 0; !bad && v < n; v++) {
        const char *name = !strcmp(col, "op")      ? peat_op_name((peat_op_kind)v)
                           : !strcmp(col, "dtype") ? peat_dtype_name((peat_dtype)v)
                           : !strcmp(col, "phase") ? phases[v]
                                                   : pools[v];
        /* the value in the base type's own byte order and size */
        int32_t v32 = v;
        int16_t v16 = (int16_t)v;
        hid_t native = H5Tget_size(base) == 2 ? H5T_NATIVE_INT16 : H5T_NATIVE_INT32;
        unsigned char val[8];
        memcpy(val, H5Tget_size(base) == 2 ? (void *)&v16 : (void *)&v32, H5Tget_size(base));
        bad = H5Tconvert(native, base, 1, val, NULL, H5P_DEFAULT) < 0 ||
              H5Tenum_insert(t, name, val) < 0;
    }
    if (bad && t >= 0) H5Tclose(t);
    return bad ? -1 : t;
}

/* A coded column: an enumeration in files and in memory (HDF5 converts enumerations by name
 * only); plain integers in memory for files of schema version 3, which stored integers. */
static void add_coded(builder *b, const char *n, size_t off, int bits)
{
    hid_t native = bits == 16 ? H5T_NATIVE_INT16 : H5T_NATIVE_INT32;
    hid_t le = bits == 16 ? H5T_STD_I16LE : H5T_STD_I32LE;
    if (b->plain) {
        add(b, n, off, native, le);
        return;
    }
    hid_t e = coded_type(n, b->file ? le : native);
    if (e < 0 || H5Tinsert(b->t, n, off, e) < 0) b->bad = 1;
    if (e >= 0) H5Tclose(e);
}

static void add_f64(builder *b, const char *n, size_t off)
{
    add(b, n, off, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE);
}

static void add_arr(builder *b, const char *name, size_t off, hid_t native, hid_t le, hsize_t n)
{
    hid_t a = H5Tarray_create2(b->file ? le : native, 1, &n);
    if (a < 0) {
        b->bad = 1;
        return;
    }
    if (H5Tinsert(b->t, name, off, a) < 0) b->bad = 1;
    H5Tclose(a);
}

static void add_str(builder *b, const char *name, size_t off, size_t n)
{
    hid_t s = H5Tcopy(H5T_C_S1);
    if (s < 0 || H5Tset_size(s, n) < 0 || H5Tset_strpad(s, H5T_STR_NULLTERM) < 0 ||
        H5Tinsert(b->t, name, off, s) < 0)
        b->bad = 1;
    if (s >= 0) H5Tclose(s);
}

#define OFF(type, f) offsetof(type, f)

hid_t peat_store_row_type(int table, int file_layout)
{
    builder b = {H5Tcreate(H5T_COMPOUND, peat_store_row_size(table)),
                 file_layout == STORE_LAYOUT_FILE, 0, file_layout == STORE_LAYOUT_PLAIN};
    if (b.t < 0) return -1;
    switch (table) {
    case STORE_T_TENSOR:
        add_i64(&b, "offset", OFF(store_tensor_row, offset));
        add_i64(&b, "numel", OFF(store_tensor_row, numel));
        add_arr(&b, "shape", OFF(store_tensor_row, shape), H5T_NATIVE_INT64, H5T_STD_I64LE,
                PEAT_MAX_DIMS);
        add_u64(&b, "hash", OFF(store_tensor_row, hash));
        add_coded(&b, "dtype", OFF(store_tensor_row, dtype), 32);
        add_i16(&b, "ndim", OFF(store_tensor_row, ndim));
        add_coded(&b, "pool", OFF(store_tensor_row, pool), 16);
        add_u64(&b, "check", OFF(store_tensor_row, check));
        break;
    case STORE_T_CALL:
        add_u64(&b, "id", OFF(store_call_row, id));
        add_u64(&b, "seed", OFF(store_call_row, seed));
        add_i64(&b, "seq", OFF(store_call_row, seq));
        add_i64(&b, "t_first", OFF(store_call_row, t_first));
        add_i64(&b, "iter", OFF(store_call_row, iter));
        add_i64(&b, "call_index", OFF(store_call_row, call_index));
        add_i64(&b, "op_call_index", OFF(store_call_row, op_call_index));
        add_arr(&b, "param_i", OFF(store_call_row, pi), H5T_NATIVE_INT64, H5T_STD_I64LE,
                PEAT_PARAM_I);
        add_arr(&b, "param_f", OFF(store_call_row, pf), H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE,
                PEAT_PARAM_F);
        add_arr(&b, "in", OFF(store_call_row, t_in), H5T_NATIVE_INT64, H5T_STD_I64LE, PEAT_MAX_IO);
        add_arr(&b, "golden", OFF(store_call_row, t_golden), H5T_NATIVE_INT64, H5T_STD_I64LE,
                PEAT_MAX_IO);
        add_arr(&b, "exact", OFF(store_call_row, t_exact), H5T_NATIVE_INT64, H5T_STD_I64LE,
                PEAT_MAX_IO);
        add_coded(&b, "op", OFF(store_call_row, op), 32);
        add_coded(&b, "phase", OFF(store_call_row, phase), 32);
        add_i32(&b, "n_in", OFF(store_call_row, n_in));
        add_i32(&b, "n_out", OFF(store_call_row, n_out));
        add_str(&b, "flow", OFF(store_call_row, flow), 32);
        add_str(&b, "layer", OFF(store_call_row, layer), 64);
        add_str(&b, "golden_kernel", OFF(store_call_row, golden_kernel), 64);
        add_str(&b, "exact_kernel", OFF(store_call_row, exact_kernel), 64);
        add_u64(&b, "check", OFF(store_call_row, check));
        break;
    case STORE_T_STATE:
        add_i64(&b, "seq", OFF(store_state_row, seq));
        add_i64(&b, "t_first", OFF(store_state_row, t_first));
        add_i64(&b, "iter", OFF(store_state_row, iter));
        add_i64(&b, "tensor", OFF(store_state_row, tensor));
        add_i32(&b, "index", OFF(store_state_row, index));
        add_i32(&b, "count", OFF(store_state_row, count));
        add_str(&b, "tag", OFF(store_state_row, tag), 32);
        add_str(&b, "name", OFF(store_state_row, name), 64);
        add_u64(&b, "check", OFF(store_state_row, check));
        break;
    case STORE_T_METRIC:
        add_i64(&b, "seq", OFF(store_metric_row, seq));
        add_i64(&b, "iter", OFF(store_metric_row, iter));
        add_f64(&b, "loss", OFF(store_metric_row, loss));
        add_f64(&b, "accuracy", OFF(store_metric_row, accuracy));
        add_u64(&b, "check", OFF(store_metric_row, check));
        break;
    case STORE_T_SIG:
        add_i64(&b, "seq", OFF(store_sig_row, seq));
        add_i64(&b, "text_offset", OFF(store_sig_row, text_offset));
        add_i64(&b, "text_len", OFF(store_sig_row, text_len));
        add_u64(&b, "text_hash", OFF(store_sig_row, text_hash));
        add_str(&b, "kernel", OFF(store_sig_row, kernel), 64);
        add_u64(&b, "check", OFF(store_sig_row, check));
        break;
    default:
        b.bad = 1;
    }
    if (b.bad) {
        H5Tclose(b.t);
        return -1;
    }
    return b.t;
}

hid_t peat_store_pool_type(peat_dtype t, int file_layout)
{
    /* bf16 and f16 are kept as their 16-bit patterns (uint16): bit-exact, and every HDF5 tool
     * reads them; the dtype attribute of the pool says how to view them */
    switch (t) {
    case PEAT_DTYPE_F64:
        return file_layout ? H5T_IEEE_F64LE : H5T_NATIVE_DOUBLE;
    case PEAT_DTYPE_F32:
        return file_layout ? H5T_IEEE_F32LE : H5T_NATIVE_FLOAT;
    case PEAT_DTYPE_BF16:
    case PEAT_DTYPE_F16:
        return file_layout ? H5T_STD_U16LE : H5T_NATIVE_UINT16;
    case PEAT_DTYPE_I32:
        return file_layout ? H5T_STD_I32LE : H5T_NATIVE_INT32;
    default:
        return -1;
    }
}
