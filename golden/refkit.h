/* refkit.h: private helpers shared by the exact and golden kernel files of golden/ (not public). */
#ifndef PEAT_GOLDEN_REFKIT_H
#define PEAT_GOLDEN_REFKIT_H

#include "peat/peat.h"
#include "peat/backend.h"

#include <stdlib.h>

/* Checks the dtypes a reference kernel can serve: golden kernels read F32 and write F32; exact
 * kernels read F32 or F64 (so finite-difference tests can perturb inputs in double) and write F64.
 * peat_op_check lets F64 stand in for F32, so this is the kernel's own refusal. I32 inputs pass. */
static inline peat_status peat_golden_io_check(const peat_args *a, const peat_kernel *self)
{
    int exact = self->role == PEAT_ROLE_EXACT;
    for (int k = 0; k < a->n_in; k++) {
        peat_dtype t = a->in[k]->dtype;
        if (t == PEAT_DTYPE_I32 || t == PEAT_DTYPE_F32 || (exact && t == PEAT_DTYPE_F64)) continue;
        return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "%s: input %d has dtype %s", self->name, k,
                          peat_dtype_name(t));
    }
    for (int k = 0; k < a->n_out; k++)
        if (!a->out[k] || a->out[k]->dtype != self->out_dtype)
            return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "%s: output %d must be %s", self->name, k,
                              peat_dtype_name(self->out_dtype));
    return PEAT_OK;
}

/* Copy of float input t as doubles (F32 or F64 storage); the caller frees it. Exact kernels read
 * through this so one code path serves both storage types. */
static inline peat_status peat_golden_load(const peat_tensor *t, double **out)
{
    int64_t n = peat_tensor_numel(t);
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d) return PEAT_ERROR(PEAT_ERR_NOMEM, "exact kernel: %lld doubles", (long long)n);
    if (t->dtype == PEAT_DTYPE_F64)
        for (int64_t i = 0; i < n; i++) d[i] = ((const double *)t->data)[i];
    else
        for (int64_t i = 0; i < n; i++) d[i] = (double)((const float *)t->data)[i];
    *out = d;
    return PEAT_OK;
}

/* Loads inputs 0..n-1 whose indices are listed in idx (skipping I32 ones is the caller's job);
 * on failure frees what it loaded. */
static inline peat_status peat_golden_load_n(const peat_args *a, int n, const int *idx,
                                             double **bufs)
{
    for (int k = 0; k < n; k++) bufs[k] = NULL;
    for (int k = 0; k < n; k++) {
        peat_status s = peat_golden_load(a->in[idx[k]], &bufs[k]);
        if (s != PEAT_OK) {
            for (int j = 0; j < k; j++) free(bufs[j]);
            return s;
        }
    }
    return PEAT_OK;
}

static inline void peat_golden_free_n(int n, double **bufs)
{
    for (int k = 0; k < n; k++) free(bufs[k]);
}

/* Registers a table of kernel descriptors. */
static inline peat_status peat_golden_add_all(const peat_kernel *ks, int n)
{
    for (int k = 0; k < n; k++) {
        peat_kernel c = ks[k];
        c.flags |= PEAT_KERNEL_REENTRANT; /* exact and golden kernels keep no state */
        PEAT_TRY(peat_registry_add(&c));
    }
    return PEAT_OK;
}

/* The declared config of every golden and exact kernel (the predictor reads it): one thread,
 * scalar loops, no tiling (a partial row costs what its elements cost). */
#define PEAT_GOLDEN_CFG                                                                            \
    {                                                                                              \
        .threads = 1, .vec_width = 1                                                               \
    }

/* Descriptor builders: exact (F64 accumulation and outputs) and golden (F32). */
#define PEAT_GOLDEN_EXACT(nm, opk, f, d)                                                           \
    {                                                                                              \
        .name = (nm), .op = (opk), .role = PEAT_ROLE_EXACT, .backend = PEAT_BACKEND_HOST,          \
        .in_dtype = PEAT_DTYPE_F32, .out_dtype = PEAT_DTYPE_F64, .acc_dtype = PEAT_DTYPE_F64,      \
        .cfg = PEAT_GOLDEN_CFG, .fn = (f), .desc = (d)                                             \
    }
#define PEAT_GOLDEN_GOLDEN(nm, opk, f, d)                                                          \
    {                                                                                              \
        .name = (nm), .op = (opk), .role = PEAT_ROLE_GOLDEN, .backend = PEAT_BACKEND_HOST,         \
        .in_dtype = PEAT_DTYPE_F32, .out_dtype = PEAT_DTYPE_F32, .acc_dtype = PEAT_DTYPE_F32,      \
        .cfg = PEAT_GOLDEN_CFG, .fn = (f), .desc = (d)                                             \
    }

#endif
