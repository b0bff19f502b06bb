/* opencl.c: the OpenCL backend (any ICD: PoCL on the CPU in CI, GPU drivers elsewhere): buffers
 * are cl_mem, one in-order profiling queue per device, marker events for timing, programs built
 * once per process; CLBlast's SGEMM is the golden GEMM when the build found it. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "core/backend_impl.h"
#include "core/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PEAT_HAVE_CLBLAST
#include <clblast_c.h>
#endif

/* Every OpenCL call goes through here: the failing statement and its error code are reported. */
#define CL_CHECK(call)                                                                             \
    do {                                                                                           \
        cl_int e_ = (call);                                                                        \
        if (e_ != CL_SUCCESS)                                                                      \
            return peat_error_set(PEAT_ERR_BACKEND, __FILE__, __LINE__, "opencl: %s failed: %d",   \
                                  #call, (int)e_);                                                 \
    } while (0)

enum { MAX_DEVICES = 16, MAX_PROGRAMS = 32, MAX_KERNELS = 64 };

/* OpenCL lets / and sqrt be off by 2.5 and 3 ulp; the goldens must round them correctly, as the
 * CPU goldens and CUDA (by default) do, or their error would not stay within the fp32 bound. */
#define KERNEL_OPTIONS "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt"

/* ---- devices: every device of every platform, in platform order ---- */

static cl_device_id devices[MAX_DEVICES];
static int n_devices = -1;
static pthread_once_t devices_once = PTHREAD_ONCE_INIT;

static void devices_scan(void)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    n_devices = 0;
    if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) return; /* no ICD: no device */
    for (cl_uint p = 0; p < np && p < 8; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, (cl_uint)(MAX_DEVICES - n_devices),
                           devices + n_devices, &nd) == CL_SUCCESS)
            n_devices += (int)nd;
    }
}

static int cl_device_count(void)
{
    pthread_once(&devices_once, devices_scan);
    return n_devices;
}

/* ---- the context of one opened device ---- */

typedef struct {
    char *source, *options;
    cl_program program;
} program_entry;

typedef struct {
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_event t0;
    program_entry programs[MAX_PROGRAMS];
    int n_programs;
    struct {
        const char *name;
        cl_kernel k;
    } kernels[MAX_KERNELS];
    int n_kernels;
} ocl;

static ocl *ctx_of(peat_backend_t b)
{
    return (ocl *)b->context;
}

static const char *cl_name(peat_backend_t b)
{
    return "opencl";
}

static peat_status cl_init(peat_backend_t b)
{
    ocl *c = calloc(1, sizeof *c);
    if (!c) return PEAT_ERROR(PEAT_ERR_NOMEM, "opencl context");
    b->context = c;
    c->dev = devices[b->device];
    cl_int e;
    c->ctx = clCreateContext(NULL, 1, &c->dev, NULL, NULL, &e);
    CL_CHECK(e);
    c->q = clCreateCommandQueue(c->ctx, c->dev, CL_QUEUE_PROFILING_ENABLE, &e);
    CL_CHECK(e);
    return PEAT_OK;
}

static void cl_release(peat_backend_t b)
{
    ocl *c = ctx_of(b);
    if (!c) return;
    for (int i = 0; i < c->n_kernels; i++) clReleaseKernel(c->kernels[i].k);
    for (int i = 0; i < c->n_programs; i++) {
        clReleaseProgram(c->programs[i].program);
        free(c->programs[i].source), free(c->programs[i].options);
    }
    if (c->t0) clReleaseEvent(c->t0);
    if (c->q) clReleaseCommandQueue(c->q);
    if (c->ctx) clReleaseContext(c->ctx);
    free(c);
    b->context = NULL;
}

static peat_status ocl_device_info(peat_backend_t b, peat_device_info *out)
{
    ocl *c = ctx_of(b);
    cl_ulong mem = 0;
    cl_uint cu = 0, mhz = 0;
    /* "opencl: <platform>: <device>" (e.g. Portable Computing Language, PoCL): says which
     * OpenCL implementation ran, not only the device behind it */
    cl_platform_id plat;
    char pname[64] = "", dname[96] = "";
    CL_CHECK(clGetDeviceInfo(c->dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL));
    CL_CHECK(clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL));
    CL_CHECK(clGetDeviceInfo(c->dev, CL_DEVICE_NAME, sizeof dname - 1, dname, NULL));
    /* at most 8 + 40 + 2 + 77 + 1 = 128 bytes: long names are cut, not the string's end */
    snprintf(out->name, sizeof out->name, "opencl: %.40s: %.77s", pname, dname);
    CL_CHECK(clGetDeviceInfo(c->dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL));
    CL_CHECK(clGetDeviceInfo(c->dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
    CL_CHECK(clGetDeviceInfo(c->dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof mhz, &mhz, NULL));
    out->index = b->device;
    out->mem_bytes = (size_t)mem;
    out->compute_units = (int)cu;
    out->clock_mhz = (double)mhz;
    return PEAT_OK;
}

/* ---- buffers (a cl_mem is the "device pointer") ---- */

static peat_status cl_alloc(peat_backend_t b, size_t n, void **out)
{
    ocl *c = ctx_of(b);
    cl_int e;
    size_t sz = n ? n : 4;
    cl_mem m = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE, sz, NULL, &e);
    CL_CHECK(e);
    static const cl_uchar zero = 0;
    e = clEnqueueFillBuffer(c->q, m, &zero, 1, 0, sz, 0, NULL, NULL);
    if (e != CL_SUCCESS) clReleaseMemObject(m);
    CL_CHECK(e);
    *out = m;
    return PEAT_OK;
}

static void cl_free_buf(peat_backend_t b, void *p)
{
    if (p) clReleaseMemObject((cl_mem)p);
}

static peat_status cl_h2d(peat_backend_t b, void *dst, const void *src, size_t n)
{
    if (n)
        CL_CHECK(
            clEnqueueWriteBuffer(ctx_of(b)->q, (cl_mem)dst, CL_TRUE, 0, n, src, 0, NULL, NULL));
    return PEAT_OK;
}

static peat_status cl_d2h(peat_backend_t b, void *dst, const void *src, size_t n)
{
    if (n)
        CL_CHECK(clEnqueueReadBuffer(ctx_of(b)->q, (cl_mem)src, CL_TRUE, 0, n, dst, 0, NULL, NULL));
    return PEAT_OK;
}

static peat_status cl_sync(peat_backend_t b)
{
    CL_CHECK(clFinish(ctx_of(b)->q));
    return PEAT_OK;
}

static double cl_timer(peat_backend_t b)
{
    (void)clFinish(ctx_of(b)->q);
    return peat_clock_now();
}

/* ---- timing: a marker before and after the kernel's work, read from the profiling queue ---- */

static peat_status cl_time_begin(peat_backend_t b)
{
    ocl *c = ctx_of(b);
    if (c->t0) clReleaseEvent(c->t0), c->t0 = NULL;
    CL_CHECK(clEnqueueMarkerWithWaitList(c->q, 0, NULL, &c->t0));
    return PEAT_OK;
}

static peat_status cl_time_end(peat_backend_t b, double *seconds)
{
    ocl *c = ctx_of(b);
    cl_event t1;
    cl_ulong s = 0, e = 0;
    CL_CHECK(clEnqueueMarkerWithWaitList(c->q, 0, NULL, &t1));
    cl_int st = clWaitForEvents(1, &t1);
    if (st == CL_SUCCESS)
        st = clGetEventProfilingInfo(c->t0, CL_PROFILING_COMMAND_END, sizeof s, &s, NULL);
    if (st == CL_SUCCESS)
        st = clGetEventProfilingInfo(t1, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL);
    clReleaseEvent(t1);
    CL_CHECK(st);
    *seconds = e > s ? 1e-9 * (double)(e - s) : 0.0;
    return PEAT_OK;
}

/* ---- programs and kernels ---- */

static peat_status build_failed(ocl *c, cl_program p, cl_int e)
{
    char log[2048] = "";
    clGetProgramBuildInfo(p, c->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    clReleaseProgram(p);
    return PEAT_ERROR(PEAT_ERR_BACKEND, "opencl: program build failed (%d): %.1500s", (int)e, log);
}

/* The program of (source, options) for this device, built on first use. */
static peat_status program_get(ocl *c, const char *source, const char *options, cl_program *out)
{
    const char *opts = options ? options : "";
    for (int i = 0; i < c->n_programs; i++)
        if (strcmp(c->programs[i].source, source) == 0 && strcmp(c->programs[i].options, opts) == 0)
            return *out = c->programs[i].program, PEAT_OK;
    if (c->n_programs == MAX_PROGRAMS)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "opencl: more than %d programs", MAX_PROGRAMS);
    cl_int e;
    cl_program p = clCreateProgramWithSource(c->ctx, 1, &source, NULL, &e);
    CL_CHECK(e);
    e = clBuildProgram(p, 1, &c->dev, opts, NULL, NULL);
    if (e != CL_SUCCESS) return build_failed(c, p, e);
    program_entry *pe = &c->programs[c->n_programs];
    pe->source = strdup(source), pe->options = strdup(opts);
    if (!pe->source || !pe->options) {
        free(pe->source), free(pe->options), clReleaseProgram(p);
        return PEAT_ERROR(PEAT_ERR_NOMEM, "opencl program cache");
    }
    pe->program = p;
    c->n_programs++;
    *out = p;
    return PEAT_OK;
}

static peat_status cl_program_build(peat_backend_t b, const char *source, const char *options,
                                    void **program)
{
    cl_program p;
    PEAT_TRY(program_get(ctx_of(b), source, options, &p));
    *program = p;
    return PEAT_OK;
}

static peat_status cl_device_fill(peat_backend_t b, peat_device *d)
{
    ocl *c = ctx_of(b);
    d->backend = "opencl";
    d->index = b->device;
    d->queue = c->q, d->context = c->ctx, d->device = c->dev;
    return PEAT_OK;
}

/* PEAT's kernel `name` from core/device/kernels.cl (kernel objects cached: one per name). */
static peat_status kernel_get(ocl *c, const char *name, cl_kernel *out)
{
    for (int i = 0; i < c->n_kernels; i++)
        if (strcmp(c->kernels[i].name, name) == 0) return *out = c->kernels[i].k, PEAT_OK;
    if (c->n_kernels == MAX_KERNELS)
        return PEAT_ERROR(PEAT_ERR_NOMEM, "opencl: more than %d kernels", MAX_KERNELS);
    cl_program p;
    PEAT_TRY(program_get(c, peat_device_kernels_source, KERNEL_OPTIONS, &p));
    cl_int e;
    cl_kernel k = clCreateKernel(p, name, &e);
    if (e != CL_SUCCESS)
        return PEAT_ERROR(PEAT_ERR_BACKEND, "opencl: no kernel '%s' in kernels.cl (%d)", name, e);
    c->kernels[c->n_kernels].name = name, c->kernels[c->n_kernels].k = k;
    c->n_kernels++;
    *out = k;
    return PEAT_OK;
}

static peat_status cl_launch(peat_backend_t b, const peat_launch *l)
{
    ocl *c = ctx_of(b);
    cl_kernel k = NULL;
    PEAT_TRY(kernel_get(c, l->kernel, &k));
    for (int i = 0; i < l->nargs; i++)
        if (clSetKernelArg(k, (cl_uint)i, l->args[i].size, l->args[i].value) != CL_SUCCESS)
            return PEAT_ERROR(PEAT_ERR_BACKEND, "opencl: %s: argument %d rejected", l->kernel, i);
    size_t global[3];
    for (int d = 0; d < l->dims; d++)
        global[d] = (l->global[d] + l->local[d] - 1) / l->local[d] * l->local[d];
    cl_int e =
        clEnqueueNDRangeKernel(c->q, k, (cl_uint)l->dims, NULL, global, l->local, 0, NULL, NULL);
    if (e != CL_SUCCESS)
        return PEAT_ERROR(PEAT_ERR_BACKEND, "opencl: launch of %s failed: %d", l->kernel, e);
    return PEAT_OK;
}

/* ---- CLBlast SGEMM (row-major, strided batch; D preset to C when beta != 0) ---- */

#ifdef PEAT_HAVE_CLBLAST
static peat_status cl_gemm(peat_backend_t b, const peat_args *a)
{
    ocl *c = ctx_of(b);
    const int64_t *i = a->p.i;
    size_t M = (size_t)i[2], N = (size_t)i[3], K = (size_t)i[4], Bn = (size_t)i[5];
    cl_mem A = (cl_mem)a->in[0]->data, B = (cl_mem)a->in[1]->data, D = (cl_mem)a->out[0]->data;
    if (a->p.f[1] != 0.0)
        CL_CHECK(clEnqueueCopyBuffer(c->q, (cl_mem)a->in[2]->data, D, 0, 0,
                                     peat_tensor_nbytes(a->out[0]), 0, NULL, NULL));
    CLBlastStatusCode s = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, i[0] ? CLBlastTransposeYes : CLBlastTransposeNo,
        i[1] ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, (float)a->p.f[0], A, 0,
        i[0] ? M : K, M * K, B, 0, i[1] ? K : N, K * N, (float)a->p.f[1], D, 0, N, M * N, Bn, &c->q,
        NULL);
    if (s != CLBlastSuccess)
        return PEAT_ERROR(PEAT_ERR_BACKEND, "CLBlastSgemmStridedBatched failed: %d", (int)s);
    return PEAT_OK;
}
#endif

static const struct peat_backend_iface opencl_iface = {
    .get_name = cl_name,
    .init = cl_init,
    .device_count = cl_device_count,
    .device_info = ocl_device_info,
    .buffer_alloc = cl_alloc,
    .buffer_free = cl_free_buf,
    .copy_h2d = cl_h2d,
    .copy_d2h = cl_d2h,
    .synchronize = cl_sync,
    .timer_now = cl_timer,
    .free = cl_release,
    .device_fill = cl_device_fill,
    .program_build = cl_program_build,
    .time_begin = cl_time_begin,
    .time_end = cl_time_end,
    .launch = cl_launch,
#ifdef PEAT_HAVE_CLBLAST
    .gemm = cl_gemm,
    .blas_name = "CLBlast fp32 SGEMM (strided batched)",
#endif
    .caps = 0, /* device buffers, a runtime that does not survive fork; no vendor clock */
};

/* Registers the backend and PEAT's device kernels for it (no OpenCL call is made here). */
peat_status peat_opencl_register(void)
{
    PEAT_TRY(peat_backend_register("opencl", &opencl_iface));
    return peat_device_ops_register("opencl", &opencl_iface);
}
