/* plugin_abi3.c: test plugin built against plugin ABI 3, before PEAT's own fields left the public
 * structs (ABI 4). It reads tensors and the device through ABI 3's layout, declared here as that
 * header had it, so the host's compatibility promise is checked byte for byte: shapes and data
 * where they were, and on OpenCL the program builder in peat_device.cl_program. */
#include "peat/plugin.h"

#include <stddef.h>

typedef struct abi3_tensor {
    peat_dtype dtype;
    int ndim;
    int64_t shape[PEAT_MAX_DIMS];
    void *data;
    int owns_data;
} abi3_tensor;

typedef struct abi3_device {
    const char *backend;
    int index;
    void *queue, *context, *device;
    peat_status (*cl_program)(const struct abi3_device *d, const char *source, const char *options,
                              void **program);
    void *host;
} abi3_device;

/* D = A B (no transposes, beta 0), k summed in order, read through ABI 3's tensor. */
static peat_status abi3_gemm(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const abi3_tensor *A = (const abi3_tensor *)a->in[0], *B = (const abi3_tensor *)a->in[1];
    abi3_tensor *D = (abi3_tensor *)a->out[0];
    const int64_t *p = a->p.i;
    if (p[0] || p[1] || a->p.f[1] != 0.0 || p[5] != 1) return PEAT_ERR_UNSUPPORTED;
    int64_t M = p[2], N = p[3], K = p[4];
    if (A->shape[A->ndim - 1] != K || D->shape[D->ndim - 1] != N) return PEAT_ERR_SHAPE;
    const float *x = A->data, *y = B->data;
    float *d = D->data, alpha = (float)a->p.f[0];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++) s += x[i * K + k] * y[k * N + j];
            d[i * N + j] = alpha * s;
        }
    return PEAT_OK;
}

/* On OpenCL: builds a program through ABI 3's peat_device.cl_program and writes nothing (the
 * outputs stay zero); any failure to find or use the builder is its status. */
static peat_status abi3_cl_build(const peat_args *a, const peat_kernel *self)
{
    (void)self;
    const abi3_device *d = (const abi3_device *)a->dev;
    if (!d || !d->cl_program) return PEAT_ERR_BACKEND;
    void *program = NULL;
    peat_status st = d->cl_program(d, "__kernel void abi3_noop(void) {}\n", "", &program);
    return st != PEAT_OK ? st : program ? PEAT_OK : PEAT_ERR_BACKEND;
}

int peat_plugin_abi_version(void)
{
    return 3;
}

int peat_plugin_register(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        {.name = "test_abi3_gemm",
         .op = PEAT_OP_GEMM,
         .backend = "cpu",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = abi3_gemm,
         .desc = "test: an ABI 3 plugin's GEMM"},
        {.name = "test_abi3_cl_build",
         .op = PEAT_OP_GEMM,
         .backend = "opencl",
         .in_dtype = PEAT_DTYPE_F32,
         .out_dtype = PEAT_DTYPE_F32,
         .acc_dtype = PEAT_DTYPE_F32,
         .fn = abi3_cl_build,
         .desc = "test: an ABI 3 plugin's OpenCL program build"},
    };
    if (host->abi_version != 3) return 1;
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
