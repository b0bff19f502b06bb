/* tensor.c: host tensors (row-major, contiguous) with checked allocation. */
#include "core/check.h"
#include "peat/peat.h"

#include <stdlib.h>
#include <string.h>

#define PEAT_TENSOR_MAX_ELEMS (1LL << 34)

static peat_status shape_numel(peat_dtype t, int ndim, const int64_t *shape, int64_t *n)
{
    if ((unsigned)t >= PEAT_DTYPE_COUNT) return PEAT_ERROR(PEAT_ERR_INVAL, "bad dtype %d", (int)t);
    if (ndim < 1 || ndim > PEAT_MAX_DIMS)
        return PEAT_ERROR(PEAT_ERR_SHAPE, "tensor rank %d outside 1..%d", ndim, PEAT_MAX_DIMS);
    int64_t e = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0 || shape[d] > PEAT_TENSOR_MAX_ELEMS ||
            e > PEAT_TENSOR_MAX_ELEMS / shape[d])
            return PEAT_ERROR(PEAT_ERR_SHAPE, "absurd tensor shape (dim %d = %lld)", d,
                              (long long)shape[d]);
        e *= shape[d];
    }
    *n = e;
    return PEAT_OK;
}

/* A tensor of this file: the public header, then whether peat_tensor_free frees its data (a
 * field of peat_tensor itself before plugin ABI 4, at the same offset). */
typedef struct tensor_box {
    peat_tensor t;
    int owns_data;
} tensor_box;

static peat_status make(peat_dtype t, int ndim, const int64_t *shape, void *data, peat_tensor **out)
{
    int64_t n = 0;
    *out = NULL;
    PEAT_TRY(shape_numel(t, ndim, shape, &n));
    tensor_box *box = calloc(1, sizeof *box);
    if (!box) return PEAT_ERROR(PEAT_ERR_NOMEM, "tensor header");
    peat_tensor *x = &box->t;
    x->dtype = t;
    x->ndim = ndim;
    for (int d = 0; d < ndim; d++) x->shape[d] = shape[d];
    if (data) {
        x->data = data;
    } else {
        x->data = calloc((size_t)n, peat_dtype_size(t));
        if (!x->data) {
            free(box);
            return PEAT_ERROR(PEAT_ERR_NOMEM, "tensor of %lld elements", (long long)n);
        }
        box->owns_data = 1;
    }
    *out = x;
    return PEAT_OK;
}

peat_status peat_tensor_alloc(peat_dtype t, int ndim, const int64_t *shape, peat_tensor **out)
{
    return make(t, ndim, shape, NULL, out);
}

peat_status peat_tensor_wrap(peat_dtype t, int ndim, const int64_t *shape, void *data,
                             peat_tensor **out)
{
    if (!data) return PEAT_ERROR(PEAT_ERR_INVAL, "wrap of NULL data");
    return make(t, ndim, shape, data, out);
}

peat_status peat_tensor_alloc1(peat_dtype t, int64_t n0, peat_tensor **out)
{
    int64_t s[1] = {n0};
    return make(t, 1, s, NULL, out);
}
peat_status peat_tensor_alloc2(peat_dtype t, int64_t n0, int64_t n1, peat_tensor **out)
{
    int64_t s[2] = {n0, n1};
    return make(t, 2, s, NULL, out);
}
peat_status peat_tensor_alloc3(peat_dtype t, int64_t n0, int64_t n1, int64_t n2, peat_tensor **out)
{
    int64_t s[3] = {n0, n1, n2};
    return make(t, 3, s, NULL, out);
}
peat_status peat_tensor_alloc4(peat_dtype t, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                               peat_tensor **out)
{
    int64_t s[4] = {n0, n1, n2, n3};
    return make(t, 4, s, NULL, out);
}

peat_status peat_tensor_clone(const peat_tensor *src, peat_tensor **out)
{
    PEAT_TRY(make(src->dtype, src->ndim, src->shape, NULL, out));
    memcpy((*out)->data, src->data, peat_tensor_nbytes(src));
    return PEAT_OK;
}

void peat_tensor_free(peat_tensor *t)
{
    if (!t) return;
    tensor_box *box = (tensor_box *)t; /* every tensor to free was made by make() */
    if (box->owns_data) free(t->data);
    free(box);
}

int64_t peat_tensor_numel(const peat_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

size_t peat_tensor_nbytes(const peat_tensor *t)
{
    return (size_t)peat_tensor_numel(t) * peat_dtype_size(t->dtype);
}

double peat_tensor_get(const peat_tensor *t, int64_t i)
{
    PEAT_ASSERT(i >= 0 && i < peat_tensor_numel(t), "element %lld of a tensor of %lld",
                (long long)i, (long long)peat_tensor_numel(t));
    switch (t->dtype) {
    case PEAT_DTYPE_F64:
        return ((const double *)t->data)[i];
    case PEAT_DTYPE_F32:
        return ((const float *)t->data)[i];
    case PEAT_DTYPE_BF16:
        return peat_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case PEAT_DTYPE_F16:
        return peat_f16_to_f32(((const uint16_t *)t->data)[i]);
    case PEAT_DTYPE_I32:
        return ((const int32_t *)t->data)[i];
    default:
        return 0.0;
    }
}

void peat_tensor_set(peat_tensor *t, int64_t i, double v)
{
    PEAT_ASSERT(i >= 0 && i < peat_tensor_numel(t), "element %lld of a tensor of %lld",
                (long long)i, (long long)peat_tensor_numel(t));
    switch (t->dtype) {
    case PEAT_DTYPE_F64:
        ((double *)t->data)[i] = v;
        break;
    case PEAT_DTYPE_F32:
        ((float *)t->data)[i] = (float)v;
        break;
    case PEAT_DTYPE_BF16:
        ((uint16_t *)t->data)[i] = peat_f32_to_bf16((float)v);
        break;
    case PEAT_DTYPE_F16:
        ((uint16_t *)t->data)[i] = peat_f32_to_f16((float)v);
        break;
    case PEAT_DTYPE_I32:
        ((int32_t *)t->data)[i] = (int32_t)v;
        break;
    default:
        break;
    }
}
