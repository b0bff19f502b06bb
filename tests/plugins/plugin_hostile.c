/* plugin_hostile.c: test plugin with GEMMs that attack the runner: exit mid-call, write outside
 * their output (next to it or 1 MiB away), overwrite their inputs (for good, or as scratch they
 * restore), spin forever, or do one of these only after 40 calls (tests/test_robust.c). */
#include "peat/plugin.h"

#include <stdlib.h>
#include <unistd.h>

static void gemm_ref(const peat_args *a)
{
    int tA = (int)a->p.i[0], tB = (int)a->p.i[1];
    int64_t M = a->p.i[2], N = a->p.i[3], K = a->p.i[4], B = a->p.i[5];
    float alpha = (float)a->p.f[0], beta = (float)a->p.f[1];
    for (int64_t b = 0; b < B; b++) {
        const float *A = (const float *)a->in[0]->data + b * M * K;
        const float *Bm = (const float *)a->in[1]->data + b * K * N;
        const float *C = beta != 0.0f ? (const float *)a->in[2]->data + b * M * N : NULL;
        float *D = (float *)a->out[0]->data + b * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    s += (tA ? A[k * M + i] : A[i * K + k]) * (tB ? Bm[j * K + k] : Bm[k * N + j]);
                D[i * N + j] = C ? alpha * s + beta * C[i * N + j] : alpha * s;
            }
    }
}

static int64_t out_numel(const peat_args *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->out[0]->ndim; d++) n *= a->out[0]->shape[d];
    return n;
}

static peat_status gemm_exit0(const peat_args *a, const peat_kernel *self)
{
    exit(0);
}

static peat_status gemm_exit3(const peat_args *a, const peat_kernel *self)
{
    exit(3);
}

/* Correct output, and one float written just before it. */
static peat_status gemm_write_before(const peat_args *a, const peat_kernel *self)
{
    gemm_ref(a);
    ((float *)a->out[0]->data)[-1] = 1.0f;
    return PEAT_OK;
}

/* Correct output, and one float written just past its end. */
static peat_status gemm_write_after(const peat_args *a, const peat_kernel *self)
{
    gemm_ref(a);
    ((float *)a->out[0]->data)[out_numel(a)] = 1.0f;
    return PEAT_OK;
}

/* Correct output, and one float written 1 MiB before it (far past any sentinel). */
static peat_status gemm_write_far_before(const peat_args *a, const peat_kernel *self)
{
    gemm_ref(a);
    ((float *)a->out[0]->data)[-(1 << 18)] = 1.0f;
    return PEAT_OK;
}

/* Correct output, and one float written 1 MiB past its end. */
static peat_status gemm_write_far_after(const peat_args *a, const peat_kernel *self)
{
    gemm_ref(a);
    ((float *)a->out[0]->data)[out_numel(a) + (1 << 18)] = 1.0f;
    return PEAT_OK;
}

/* Uses element 7 of input A as scratch and puts it back: the inputs end as they began, so only
 * a read-only mapping sees the write. */
static peat_status gemm_scratch_input(const peat_args *a, const peat_kernel *self)
{
    float *A = (float *)a->in[0]->data;
    volatile float keep = A[7];
    A[7] = 2.0f * keep;
    A[7] = keep;
    gemm_ref(a);
    return PEAT_OK;
}

/* Correct output, then element 5 of input A overwritten with 1.5e22. */
static peat_status gemm_mutate_input(const peat_args *a, const peat_kernel *self)
{
    gemm_ref(a);
    ((float *)a->in[0]->data)[5] = 1.5e22f;
    return PEAT_OK;
}

/* Spins at 100% CPU (unlike a pause, the kind of hang that an orphan makes costly). */
static peat_status gemm_spin(const peat_args *a, const peat_kernel *self)
{
    volatile unsigned long x = 0;
    for (;;) x++;
    return PEAT_OK;
}

/* Late misbehaviour: right for LATE calls of a process, then the attack. Playback starts every
 * call from the plugin's first state (never late); runtime FI keeps the state through a
 * training run, as a real process would, and reaches it. */
enum { LATE = 40 };
static int late_calls;

static peat_status gemm_late_crash(const peat_args *a, const peat_kernel *self)
{
    if (++late_calls > LATE) *(volatile float *)a->out[0]->data = *(volatile float *)NULL;
    gemm_ref(a);
    return PEAT_OK;
}

static peat_status gemm_late_spin(const peat_args *a, const peat_kernel *self)
{
    if (++late_calls > LATE) gemm_spin(a, self);
    gemm_ref(a);
    return PEAT_OK;
}

static peat_status gemm_late_exit0(const peat_args *a, const peat_kernel *self)
{
    if (++late_calls > LATE) exit(0);
    gemm_ref(a);
    return PEAT_OK;
}

/* After LATE calls, one float 64 KiB past the output (in-process: someone else's heap). */
static peat_status gemm_late_heap(const peat_args *a, const peat_kernel *self)
{
    gemm_ref(a);
    if (++late_calls > LATE) ((float *)a->out[0]->data)[out_numel(a) + (1 << 14)] = 1.0f;
    return PEAT_OK;
}

/* After LATE calls, closes stdout and stderr (the process's, whichever process it is). */
static peat_status gemm_late_close(const peat_args *a, const peat_kernel *self)
{
    if (++late_calls == LATE + 1) close(1), close(2);
    gemm_ref(a);
    return PEAT_OK;
}

/* Correct output, after changing the process's working directory. */
static peat_status gemm_chdir(const peat_args *a, const peat_kernel *self)
{
    if (chdir("/") != 0) return PEAT_ERR_KERNEL;
    gemm_ref(a);
    return PEAT_OK;
}

int peat_plugin_abi_version(void)
{
    return PEAT_PLUGIN_ABI_VERSION;
}

#define GEMM(n, f, d)                                                                              \
    {                                                                                              \
        .name = n, .op = PEAT_OP_GEMM, .backend = "cpu", .in_dtype = PEAT_DTYPE_F32,               \
        .out_dtype = PEAT_DTYPE_F32, .acc_dtype = PEAT_DTYPE_F32, .fn = f, .desc = d               \
    }

int peat_plugin_register(const peat_plugin_host *host)
{
    static const peat_kernel ks[] = {
        GEMM("test_gemm_exit0", gemm_exit0, "test: exit(0) mid-call"),
        GEMM("test_gemm_exit3", gemm_exit3, "test: exit(3) mid-call"),
        GEMM("test_gemm_write_before", gemm_write_before, "test: writes one float before out"),
        GEMM("test_gemm_write_after", gemm_write_after, "test: writes one float after out"),
        GEMM("test_gemm_write_far_before", gemm_write_far_before,
             "test: writes one float 1 MiB before out"),
        GEMM("test_gemm_write_far_after", gemm_write_far_after,
             "test: writes one float 1 MiB after out"),
        GEMM("test_gemm_mutate_input", gemm_mutate_input, "test: overwrites input A[5]"),
        GEMM("test_gemm_scratch_input", gemm_scratch_input,
             "test: writes input A[7] and restores it"),
        GEMM("test_gemm_spin", gemm_spin, "test: spins forever"),
        GEMM("test_gemm_chdir", gemm_chdir, "test: changes the working directory"),
        GEMM("test_gemm_late_crash", gemm_late_crash, "test: crashes after 40 calls"),
        GEMM("test_gemm_late_spin", gemm_late_spin, "test: spins after 40 calls"),
        GEMM("test_gemm_late_exit0", gemm_late_exit0, "test: exit(0) after 40 calls"),
        GEMM("test_gemm_late_heap", gemm_late_heap, "test: writes 64 KiB past out after 40 calls"),
        GEMM("test_gemm_late_close", gemm_late_close,
             "test: closes stdout and stderr after 40 calls"),
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (host->register_kernel(&ks[i]) != PEAT_OK) return 1;
    return 0;
}
