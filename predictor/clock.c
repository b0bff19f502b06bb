/* clock.c: clock readers (cpufreq sysfs; NVML and ROCm SMI loaded with dlopen, so no vendor
 * library is linked) and the warm-up that waits for steady clocks before timing. */
#include "predictor/predictor.h"
#include "peat/backend.h"
#include "core/clock.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

double peat_predictor_now(void)
{
    return peat_clock_now();
}

static peat_status unknown(peat_pred_clock *c)
{
    c->mhz = 0;
    snprintf(c->source, sizeof c->source, "unknown");
    return PEAT_ERR_UNSUPPORTED; /* not an error worth a message: the caller says "unknown" */
}

static peat_status known(peat_pred_clock *c, double mhz, const char *source)
{
    if (!(mhz > 0) || !isfinite(mhz)) return unknown(c);
    c->mhz = mhz;
    snprintf(c->source, sizeof c->source, "%s", source);
    return PEAT_OK;
}

peat_status peat_predictor_clock_cpufreq(const char *dir, int cpu, peat_pred_clock *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cpu%d/cpufreq/scaling_cur_freq",
             dir ? dir : "/sys/devices/system/cpu", cpu);
    FILE *f = fopen(path, "r");
    if (!f) return unknown(c);
    double khz = 0;
    int ok = fscanf(f, "%lf", &khz) == 1;
    fclose(f);
    return ok ? known(c, khz / 1000.0, "cpufreq") : unknown(c);
}

/* NVML's documented C API (nvml.h): handles are opaque pointers, NVML_CLOCK_SM = 1. */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_clock_fn)(void *, int, unsigned int *);

peat_status peat_predictor_clock_nvml(const char *libname, int device, peat_pred_clock *c)
{
    void *lib = dlopen(libname ? libname : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return unknown(c);
    nvml_init_fn init;
    nvml_handle_fn handle;
    nvml_clock_fn clock;
    /* POSIX's way to take a function from dlsym under -Wpedantic (as core/plugin.c does) */
    *(void **)&init = dlsym(lib, "nvmlInit_v2");
    *(void **)&handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&clock = dlsym(lib, "nvmlDeviceGetClockInfo");
    void *dev = NULL;
    unsigned int mhz = 0;
    int ok = init && handle && clock && init() == 0 && handle((unsigned)device, &dev) == 0 &&
             clock(dev, 1, &mhz) == 0;
    dlclose(lib); /* NVML stays initialised for the process: init is reference-counted there */
    return ok ? known(c, mhz, "nvml") : unknown(c);
}

/* ROCm SMI (rocm_smi.h): rsmi_frequencies_t is {[bool has_deep_sleep,] uint32 num_supported,
 * uint32 current, uint64 frequency[32] (Hz)}; the bool appeared in ROCm 6, so both layouts are
 * tried and the one whose numbers are consistent is taken. RSMI_CLK_TYPE_SYS = 0. */
typedef int (*rsmi_init_fn)(uint64_t);
typedef int (*rsmi_freq_fn)(uint32_t, int, void *);

static double rsmi_current_hz(const unsigned char *buf, size_t off)
{
    uint32_t num, cur;
    memcpy(&num, buf + off, 4);
    memcpy(&cur, buf + off + 4, 4);
    if (num == 0 || num > 32 || cur >= num) return 0;
    size_t farr = (off + 8 + 7) / 8 * 8;
    uint64_t hz;
    memcpy(&hz, buf + farr + 8 * cur, 8);
    return hz > 1e7 && hz < 1e10 ? (double)hz : 0;
}

peat_status peat_predictor_clock_rocm(const char *libname, int device, peat_pred_clock *c)
{
    void *lib = dlopen(libname ? libname : "librocm_smi64.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return unknown(c);
    rsmi_init_fn init;
    rsmi_freq_fn freq;
    *(void **)&init = dlsym(lib, "rsmi_init");
    *(void **)&freq = dlsym(lib, "rsmi_dev_gpu_clk_freq_get");
    unsigned char buf[512];
    memset(buf, 0, sizeof buf);
    double hz = 0;
    if (init && freq && init(0) == 0 && freq((uint32_t)device, 0, buf) == 0) {
        hz = rsmi_current_hz(buf, 4); /* ROCm 6: bool, padding, then the counts */
        if (hz == 0) hz = rsmi_current_hz(buf, 0);
    }
    dlclose(lib);
    return hz > 0 ? known(c, hz / 1e6, "rocm-smi") : unknown(c);
}

peat_status peat_predictor_clock_read(const char *backend, int device, peat_pred_clock *c)
{
    unsigned caps = peat_backend_caps(backend);
    if (caps & PEAT_BACKEND_CAP_CLOCK_NVML) return peat_predictor_clock_nvml(NULL, device, c);
    if (caps & PEAT_BACKEND_CAP_CLOCK_ROCM_SMI) return peat_predictor_clock_rocm(NULL, device, c);
    return peat_predictor_clock_cpufreq(NULL, 0, c);
}

/* One window of >= 20 ms of fn: mean call time, clock sampled at its end. */
static void window(const char *backend, peat_pred_work_fn fn, void *user, double *call_s,
                   peat_pred_clock *clk)
{
    double t0 = peat_predictor_now(), t = t0;
    int n = 0;
    while (t - t0 < 0.02) {
        fn(user);
        n++;
        t = peat_predictor_now();
    }
    *call_s = (t - t0) / n;
    peat_predictor_clock_read(backend, 0, clk);
}

peat_status peat_predictor_warmup(const char *backend, peat_pred_work_fn fn, void *user,
                                  double max_s, int *steady, peat_pred_clock *clock)
{
    double start = peat_predictor_now(), prev_s = 0, s = 0;
    peat_pred_clock prev = {0}, cur = {0};
    *steady = 0;
    window(backend, fn, user, &prev_s, &prev);
    while (peat_predictor_now() - start < max_s) {
        window(backend, fn, user, &s, &cur);
        int same = cur.mhz > 0 && prev.mhz > 0 ? fabs(cur.mhz - prev.mhz) <= 0.01 * prev.mhz
                                               : fabs(s - prev_s) <= 0.03 * prev_s;
        prev = cur, prev_s = s;
        if (same) {
            *steady = 1;
            break;
        }
    }
    if (clock) *clock = cur.source[0] ? cur : prev;
    return PEAT_OK;
}
