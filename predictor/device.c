/* device.c: the device description the model divides work over: CPU cores, SIMD width and caches
 * from the OS, one-unit peak FLOP/s and memory bandwidth measured; GPU fields from the backend. */
#include "predictor/predictor.h"
#include "peat/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void cpu_name(char *name, size_t n)
{
    snprintf(name, n, "%s", PEAT_BACKEND_HOST);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            colon += colon[1] == ' ' ? 2 : 1;
            colon[strcspn(colon, "\n")] = 0;
            snprintf(name, n, "cpu: %s", colon);
            break;
        }
    }
    fclose(f);
}

static int simd_lanes(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx")) return 8;
    return 4;
#else
    return 4; /* NEON and most other 128-bit units */
#endif
}

/* L1d, L2, L3 sizes of cpu0 from sysfs (0 where absent). */
static void caches(int64_t out[3])
{
    out[0] = out[1] = out[2] = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], type[32] = "", size[32] = "";
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%31s", type) != 1) type[0] = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%31s", size) != 1) size[0] = 0;
            fclose(f);
        }
        if (level < 1 || level > 3 || strcmp(type, "Instruction") == 0) continue;
        char *end;
        double v = strtod(size, &end);
        v *= *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : 1.0;
        out[level - 1] = (int64_t)v;
    }
}

/* One core's fp32 throughput on independent multiply-adds over 8 x 16 lanes (what the compiler
 * makes of plain C at -O2, as the built-in kernels are): best of 3 runs of ~3 ms. */
static double measure_peak(void)
{
    enum { L = 128, REPS = 4000 };
    float acc[L], m[L];
    for (int i = 0; i < L; i++) acc[i] = 0.0f, m[i] = 1.0f + 1e-7f * (float)i;
    double best = 0;
    for (int run = 0; run < 3; run++) {
        double t0 = peat_predictor_now();
        for (int r = 0; r < REPS; r++)
            for (int i = 0; i < L; i++) acc[i] = acc[i] * m[i] + 1e-3f;
        double dt = peat_predictor_now() - t0;
        double f = 2.0 * L * REPS / dt;
        if (f > best) best = f;
    }
    volatile float sink = acc[0] + acc[L - 1];
    (void)sink;
    return best;
}

/* Read bandwidth from memory: sums of a buffer twice the last cache, best of 3 passes. */
static double measure_bandwidth(int64_t llc)
{
    size_t n = (size_t)(llc > 0 ? 2 * llc : 64 << 20) / sizeof(float);
    if (n < ((size_t)16 << 20)) n = (size_t)16 << 20;
    float *buf = malloc(n * sizeof *buf);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
    double best = 0;
    float s[8] = {0};
    for (int run = 0; run < 3; run++) {
        double t0 = peat_predictor_now();
        for (size_t i = 0; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) s[l] += buf[i + l];
        double bw = (double)(n * sizeof *buf) / (peat_predictor_now() - t0);
        if (bw > best) best = bw;
    }
    volatile float sink = s[0];
    (void)sink;
    free(buf);
    return best;
}

static double nominal_mhz(void)
{
    peat_pred_clock c;
    if (peat_predictor_clock_cpufreq(NULL, 0, &c) == PEAT_OK) return c.mhz;
    FILE *f = fopen("/proc/cpuinfo", "r");
    double mhz = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "cpu MHz", 7) == 0 && sscanf(strchr(line, ':') + 1, "%lf", &mhz) == 1)
            break;
    if (f) fclose(f);
    return mhz;
}

peat_status peat_predictor_device_cpu(peat_pred_device *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "%s", PEAT_BACKEND_HOST);
    cpu_name(d->name, sizeof d->name);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    d->units = n > 0 ? (int)n : 1;
    d->simd_width = simd_lanes();
    caches(d->cache_bytes);
    d->edge_tiles_padded = 0;
    d->peak_flops = measure_peak();
    d->bandwidth = measure_bandwidth(d->cache_bytes[2]);
    d->clock_mhz = nominal_mhz();
    if (!(d->peak_flops > 0) || !(d->bandwidth > 0))
        return PEAT_ERROR(PEAT_ERR_BACKEND, "cpu: peak or bandwidth could not be measured");
    return PEAT_OK;
}

void peat_predictor_device_gpu(peat_pred_device *d, const char *backend, const char *name,
                               int units, double clock_mhz, double bandwidth, int warp,
                               int fp32_lanes)
{
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "%s", backend);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->units = units > 0 ? units : 1;
    d->simd_width = warp > 0 ? warp : 32;
    d->edge_tiles_padded = 1;
    d->clock_mhz = clock_mhz;
    /* one SM/CU: an FMA (2 flops) per FP32 lane per clock; 64 lanes where the backend does not
     * say (the common figure of NVIDIA's and AMD's data-centre parts before Ampere's GA10x) */
    d->peak_flops =
        clock_mhz > 0 ? 2.0 * (fp32_lanes > 0 ? fp32_lanes : 64) * clock_mhz * 1e6 : 0.0;
    d->bandwidth = bandwidth;
}
