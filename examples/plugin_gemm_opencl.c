/* plugin_gemm_opencl.c: an example OpenCL device plugin: a GEMM in 8x8 local-memory tiles, given
 * device buffers (cl_mem) and the queue by PEAT. Built with -DPEAT_EXAMPLE_PLANT_EDGE_BUG=1 it
 * leaves the partial tiles at the bottom and right edges unwritten (the classic unhandled edge
 * tile), which PEAT must FAIL.
 * Build: cc -shared -fPIC -I include examples/plugin_gemm_opencl.c -lOpenCL -o libmine_cl.so
 * Use:   peat run --plugin ./libmine_cl.so --kernel example_gemm_cl --backend opencl */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "peat/plugin.h"

#include <stddef.h>

/* The kernel: one work-item per output element of one batch entry (batch in dimension 2). */
static const char source[] =
    "#define T 8\n"
    "__kernel void ex_gemm(long tA, long tB, long M, long N, long K, float alpha, float beta,\n"
    "                      int has_c, __global const float *A, __global const float *B,\n"
    "                      __global const float *C, __global float *D)\n"
    "{\n"
    "    __local float as[T][T + 1], bs[T][T + 1];\n"
    "    long tx = get_local_id(0), ty = get_local_id(1), b = get_global_id(2);\n"
    "    long j = get_group_id(0) * T + tx, i = get_group_id(1) * T + ty;\n"
    "#ifdef EDGE_BUG\n"
    "    /* planted: a tile that sticks out of the matrix is skipped altogether */\n"
    "    if ((get_group_id(0) + 1) * T > N || (get_group_id(1) + 1) * T > M) return;\n"
    "#endif\n"
    "    A += b * M * K, B += b * K * N;\n"
    "    float acc = 0.0f;\n"
    "    for (long k0 = 0; k0 < K; k0 += T) {\n"
    "        long ka = k0 + tx, kb = k0 + ty;\n"
    "        as[ty][tx] = (i < M && ka < K) ? (tA ? A[ka * M + i] : A[i * K + ka]) : 0.0f;\n"
    "        bs[ty][tx] = (kb < K && j < N) ? (tB ? B[j * K + kb] : B[kb * N + j]) : 0.0f;\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (int k = 0; k < T; k++) acc += as[ty][k] * bs[k][tx];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    long o = b * M * N + i * N + j;\n"
    "    if (i < M && j < N) D[o] = has_c ? alpha * acc + beta * C[o] : alpha * acc;\n"
    "}\n";

#ifdef PEAT_EXAMPLE_PLANT_EDGE_BUG
#define NAME    "example_gemm_cl_edgebug"
#define OPTIONS "-DEDGE_BUG=1"
#else
#define NAME    "example_gemm_cl"
#define OPTIONS ""
#endif

static const peat_plugin_host *host;

#define FAIL(what, e)                                                                              \
    host->error(PEAT_ERR_BACKEND, __FILE__, __LINE__, NAME ": %s failed: %d", what, (int)(e))

static peat_status gemm_cl(const peat_args *a, const peat_kernel *self)
{
    const peat_device *d = a->dev;
    void *program;
    /* PEAT builds the program once per process and hands back the cached one afterwards */
    peat_status st = host->cl_program(d, source, OPTIONS, &program);
    if (st != PEAT_OK) return st;
    cl_int e;
    cl_kernel k = clCreateKernel((cl_program)program, "ex_gemm", &e);
    if (e != CL_SUCCESS) return FAIL("clCreateKernel", e);
    const int64_t *p = a->p.i;
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    cl_int has_c = a->p.f[1] != 0.0;
    /* tensor data are cl_mem handles; C is only passed when beta != 0 */
    cl_mem A = a->in[0]->data, B = a->in[1]->data, D = a->out[0]->data;
    cl_mem C = has_c ? a->in[2]->data : D;
    const void *vals[] = {&p[0], &p[1], &p[2], &p[3], &p[4], &alpha, &beta, &has_c, &A, &B, &C, &D};
    const size_t sizes[] = {8, 8, 8, 8, 8, 4, 4, 4, sizeof A, sizeof B, sizeof C, sizeof D};
    for (cl_uint i = 0; e == CL_SUCCESS && i < 12; i++) e = clSetKernelArg(k, i, sizes[i], vals[i]);
    size_t local[3] = {8, 8, 1};
    size_t global[3] = {((size_t)p[3] + 7) / 8 * 8, ((size_t)p[2] + 7) / 8 * 8, (size_t)p[5]};
    if (e == CL_SUCCESS)
        e = clEnqueueNDRangeKernel((cl_command_queue)d->queue, k, 3, NULL, global, local, 0, NULL,
                                   NULL);
    clReleaseKernel(k); /* the queue keeps it alive until it has run */
    return e == CL_SUCCESS ? PEAT_OK : FAIL("launch", e);
}

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

int peat_plugin_register(const peat_plugin_host *h)
{
    host = h;
    static const peat_kernel k = {.name = NAME,
                                  .op = PEAT_OP_GEMM,
                                  .role = PEAT_ROLE_CANDIDATE,
                                  .backend = "opencl",
                                  .in_dtype = PEAT_DTYPE_F32,
                                  .out_dtype = PEAT_DTYPE_F32,
                                  .acc_dtype = PEAT_DTYPE_F32,
                                  .cfg = {.tile_m = 8, .tile_n = 8, .tile_k = 8, .threads = 64},
                                  .fn = gemm_cl,
                                  .desc = "example OpenCL plugin: fp32 GEMM in 8x8 local tiles"};
    return h->register_kernel(&k) == PEAT_OK ? 0 : 1;
}
