/* backend_cpu.c: the CPU backend: host memory is device memory, work is synchronous. */
#include "core/backend_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *cpu_name(peat_backend_t b)
{
    return "cpu";
}
static int cpu_device_count(void)
{
    return 1;
}

/* Model name from /proc/cpuinfo and the current clock of cpu0 from cpufreq, when readable. */
static peat_status cpu_device_info(peat_backend_t b, peat_device_info *out)
{
    snprintf(out->name, sizeof out->name, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c += 2;
                    c[strcspn(c, "\n")] = 0;
                    snprintf(out->name, sizeof out->name, "cpu: %s", c);
                }
                break;
            }
        }
        fclose(f);
    }
    f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "r");
    if (f) {
        long khz = 0;
        if (fscanf(f, "%ld", &khz) == 1) out->clock_mhz = khz / 1000.0;
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    out->mem_bytes = pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : 0;
    out->compute_units = (int)sysconf(_SC_NPROCESSORS_ONLN);
    out->index = b->device;
    return PEAT_OK;
}

static peat_status cpu_alloc(peat_backend_t b, size_t nbytes, void **out)
{
    *out = calloc(1, nbytes ? nbytes : 1);
    return *out ? PEAT_OK : PEAT_ERROR(PEAT_ERR_NOMEM, "cpu buffer of %zu bytes", nbytes);
}
static void cpu_free_buf(peat_backend_t b, void *p)
{
    free(p);
}

const struct peat_backend_iface peat_backend_cpu_iface = {
    .get_name = cpu_name,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .buffer_alloc = cpu_alloc,
    .buffer_free = cpu_free_buf,
    .copy_h2d = NULL, /* host memory: memcpy */
    .copy_d2h = NULL,
    .synchronize = NULL, /* synchronous */
    .timer_now = NULL,   /* CLOCK_MONOTONIC */
    .free = NULL,
    .caps = PEAT_BACKEND_CAP_HOST_MEMORY | PEAT_BACKEND_CAP_FORK,
};
