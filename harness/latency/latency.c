/* latency.c: device description and warm-up per backend, and the calibration table of every
 * registered kernel and of the harness's own work, kept in an HDF5 cache per device. */
#include "harness/latency/latency.h"
#include "core/clock.h"

#include "core/cache_dir.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "harness/isolate/isolate.h"
#include "harness/runtime/runtime.h"
#include "peat/backend.h"
#include "store/store_latency.h"

/* The work the warm-up repeats: one mid-sized golden GEMM on the backend's device. */
/* The warm-up's GEMM is one of the calibration family's sizes (n = 56): the table is exact there,
 * so measured / predicted is the machine's speed now against calibration and nothing else. At an
 * off-grid size it also measures the interpolation's error: n = 48, which packs into whole
 * 16-wide panels, ran 2x faster than the line through n = 40 and 56 (partial edge panels) and
 * so halved every table prediction. */
#define REF_SIZE 56

typedef struct warm_work {
    const peat_kernel *k;
    peat_pred_call c;
    int64_t calls;
} warm_work;

static void warm_call(void *user)
{
    warm_work *w = user;
    peat_kernel_run(w->k, &w->c.a);
    w->calls++;
}

double peat_latency_thread_cpu_s(void)
{
    return peat_clock_thread_cpu();
}

double peat_latency_process_cpu_s(void)
{
    return peat_clock_process_cpu();
}

/* Cores the process gets with every CPU busy: the warm-up work on one thread a CPU for ~0.1 s,
 * their CPU seconds over the wall seconds (a shared machine gives fewer than it has). */
typedef struct par_work {
    warm_work w;
    double until, cpu;
} par_work;

static void *par_run(void *arg)
{
    par_work *p = arg;
    double c0 = peat_latency_thread_cpu_s();
    while (peat_predictor_now() < p->until) warm_call(&p->w);
    p->cpu = peat_latency_thread_cpu_s() - c0;
    return NULL;
}

static double parallel_cores(const peat_kernel *k, double share)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpus > 1 ? (int)(cpus < 8 ? cpus : 8) : 1;
    if (n == 1) return share;
    par_work pw[8];
    pthread_t th[8];
    peat_op_params p;
    peat_predictor_shape(PEAT_OP_GEMM, REF_SIZE, 0, &p);
    int made = 0, started = 0;
    for (; made < n; made++) {
        memset(&pw[made], 0, sizeof pw[made]);
        pw[made].w.k = k;
        if (peat_predictor_call_alloc(k, &p, (uint64_t)made + 1, &pw[made].w.c) != PEAT_OK) break;
    }
    double t0 = peat_predictor_now();
    for (int i = 0; i < made; i++) pw[i].until = t0 + 0.1;
    for (started = 1; started < made; started++)
        if (pthread_create(&th[started], NULL, par_run, &pw[started]) != 0) break;
    par_run(&pw[0]);
    double cpu = pw[0].cpu;
    for (int i = 1; i < started; i++) pthread_join(th[i], NULL), cpu += pw[i].cpu;
    double wall = peat_predictor_now() - t0;
    for (int i = 0; i < made; i++) peat_predictor_call_free(&pw[i].w.c);
    double cores = wall > 0 ? cpu / wall : share;
    return cores > share ? cores : share;
}

static peat_status warm_up(const char *backend, peat_latency_env *env)
{
    warm_work w;
    memset(&w, 0, sizeof w);
    w.k = peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, backend);
    if (!w.k) w.k = peat_registry_role(PEAT_OP_GEMM, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
    if (!w.k) return PEAT_ERROR(PEAT_ERR_NOTFOUND, "no golden GEMM to warm up with");
    peat_op_params p;
    peat_predictor_shape(PEAT_OP_GEMM, REF_SIZE, 0, &p);
    PEAT_TRY(peat_predictor_call_alloc(w.k, &p, 1, &w.c));
    double wall = peat_predictor_now(), cpu = peat_latency_thread_cpu_s();
    peat_status st = peat_predictor_warmup(backend, warm_call, &w, 0.3, &env->steady, &env->clock);
    wall = peat_predictor_now() - wall, cpu = peat_latency_thread_cpu_s() - cpu;
    /* kernels are timed on the CPU clock; on a shared machine this process gets only part of a
     * core, which turns CPU seconds into more wall seconds */
    env->core_share = peat_backend_on_host(backend) && wall > 0 ? cpu / wall : 1.0;
    if (env->core_share > 1.0) env->core_share = 1.0;
    if (env->core_share < 0.05) env->core_share = 0.05;
    env->cores = peat_backend_on_host(backend) ? parallel_cores(w.k, env->core_share) : 1.0;
    /* the warm-up call's mean CPU seconds over the whole warm-up (hundreds of calls: a burst of
     * other load moves it less than a few calls): set against the calibration table's
     * prediction of the same call, it says how much slower or faster this machine runs than
     * when it was calibrated (another clock, or a shared core's caches and sibling thread under
     * other jobs) */
    env->ref_call_s = peat_backend_on_host(backend) && w.calls > 0 ? cpu / (double)w.calls : 0.0;
    env->slowdown = 1.0; /* until set against a table (peat_latency_env_speed) */

    env->ref_kernel = w.k;
    env->ref_params = p;
    peat_predictor_call_free(&w.c);
    return st;
}

void peat_latency_env_speed(peat_latency_env *env, const peat_pred_table *t)
{
    double pred = 0;
    env->slowdown = 1.0;
    if (env->ref_call_s > 0 && env->ref_kernel &&
        peat_predictor_call(t, env->ref_kernel, &env->ref_params, 0, &pred) == PEAT_OK && pred > 0)
        env->slowdown = env->ref_call_s / pred;
    /* beyond these it is no longer the same machine: recalibrate rather than scale */
    if (env->slowdown < 0.5) env->slowdown = 0.5;
    if (env->slowdown > 3.0) env->slowdown = 3.0;
}

double peat_latency_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f) return 0;
    int ok = fscanf(f, "%ld %ld", &size, &resident) == 2;
    fclose(f);
    return ok ? (double)resident * (double)sysconf(_SC_PAGESIZE) : 0;
}

peat_status peat_latency_env_init(const char *backend, peat_latency_env *env)
{
    memset(env, 0, sizeof *env);
    if (!backend || strcmp(backend, "auto") == 0) backend = PEAT_BACKEND_HOST;
    if (peat_backend_on_host(backend)) {
        PEAT_TRY(peat_predictor_device_cpu(&env->dev));
    } else {
        peat_backend_t b = NULL;
        PEAT_TRY(peat_backend_create(backend, 0, &b));
        peat_device_info info;
        peat_status st = peat_backend_device_info(b, &info);
        peat_backend_close(b);
        PEAT_TRY(st);
        /* bandwidth from the runtime (0 where it does not say: OpenCL; the roofline baseline
         * then classes every tiled op compute, the table's own class is from its points) */
        peat_predictor_device_gpu(
            &env->dev, backend, info.name, info.compute_units, info.clock_mhz, info.mem_bandwidth,
            peat_backend_caps(backend) & PEAT_BACKEND_CAP_WAVE64 ? 64 : 32, info.fp32_lanes);
    }
    return warm_up(backend, env);
}

peat_status peat_latency_device(const char *backend, peat_pred_device *d, peat_pred_clock *clk)
{
    peat_latency_env env;
    PEAT_TRY(peat_latency_env_init(backend, &env));
    *d = env.dev;
    *clk = env.clock;
    return PEAT_OK;
}

/* ---- cache ---- */

static peat_status mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int bad = mkdir(path, 0755) != 0 && errno != EEXIST;
        *p = '/';
        if (bad) return PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return PEAT_ERROR(PEAT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    return PEAT_OK;
}

peat_status peat_latency_cache_path(const char *cache_dir, const peat_pred_device *d, char *buf,
                                    size_t n)
{
    char dir[400];
    /* the path is built in a fixed buffer: a longer one is refused, never cut */
    PEAT_TRY(peat_cache_dir(cache_dir, "latency cache", 40, dir, sizeof dir));
    PEAT_TRY(mkdirs(dir));
    struct stat sb; /* mkdir says EEXIST for a file of that name too */
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return PEAT_ERROR(PEAT_ERR_IO, "cannot use %s as the latency cache directory: %s", dir,
                          strerror(ENOTDIR));
    snprintf(buf, n, "%s/latency-%s-%016llx.h5", dir, d->backend,
             (unsigned long long)peat_predictor_device_hash(d));
    return PEAT_OK;
}

peat_status peat_latency_cache_save(const char *path, const peat_pred_table *t)
{
    peat_store_latency_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.key, sizeof m.key, "%016llx",
             (unsigned long long)peat_predictor_device_hash(&t->dev));
    snprintf(m.device, sizeof m.device, "%s (%d units, SIMD %d)", t->dev.name, t->dev.units,
             t->dev.simd_width);
    snprintf(m.peat_version, sizeof m.peat_version, "%s", PEAT_LATENCY_TABLE_VERSION);
    m.cost_s = t->cost_s;
    peat_store_latency_row *rows = calloc((size_t)t->n + 1, sizeof *rows);
    if (!rows) return PEAT_ERROR(PEAT_ERR_NOMEM, "latency cache rows");
    for (int i = 0; i < t->n; i++) {
        peat_pred_row r;
        peat_predictor_row_from(&t->k[i], &r);
        /* the two row structs have the same fields: copied by name, not by layout */
        memcpy(rows[i].kernel, r.kernel, sizeof rows[i].kernel);
        rows[i].desc_hash = r.desc_hash, rows[i].cls = r.cls, rows[i].n = r.n;
        rows[i].power_tail = r.power_tail;
        rows[i].overhead_s = r.overhead_s, rows[i].clock_mhz = r.clock_mhz;
        for (int j = 0; j < PEAT_PRED_MAX_POINTS; j++) rows[i].x[j] = r.x[j], rows[i].t[j] = r.t[j];
    }
    peat_status st = peat_store_latency_write(path, &m, rows, t->n);
    free(rows);
    return st;
}

peat_status peat_latency_cache_load(const char *path, const peat_pred_device *d, peat_pred_table *t)
{
    peat_store_latency_meta m;
    peat_store_latency_row *rows = NULL;
    int n = 0;
    PEAT_TRY(peat_store_latency_read(path, &m, &rows, &n));
    char key[32];
    snprintf(key, sizeof key, "%016llx", (unsigned long long)peat_predictor_device_hash(d));
    peat_status st = PEAT_OK;
    if (strcmp(m.key, key) != 0 || strcmp(m.peat_version, PEAT_LATENCY_TABLE_VERSION) != 0)
        st = PEAT_ERROR(PEAT_ERR_NOTFOUND,
                        "%s holds another device, PEAT version or calibration method", path);
    for (int i = 0; st == PEAT_OK && i < n; i++) {
        peat_pred_row r;
        memset(&r, 0, sizeof r);
        memcpy(r.kernel, rows[i].kernel, sizeof r.kernel);
        r.kernel[sizeof r.kernel - 1] = 0;
        r.desc_hash = rows[i].desc_hash, r.cls = rows[i].cls, r.n = rows[i].n;
        r.power_tail = rows[i].power_tail;
        r.overhead_s = rows[i].overhead_s, r.clock_mhz = rows[i].clock_mhz;
        for (int j = 0; j < PEAT_PRED_MAX_POINTS; j++) r.x[j] = rows[i].x[j], r.t[j] = rows[i].t[j];
        peat_pred_ktable kt;
        st = peat_predictor_row_to(&r, &kt);
        if (st == PEAT_OK) st = peat_predictor_table_add(t, &kt);
    }
    if (st == PEAT_OK) t->cost_s = m.cost_s;
    free(rows);
    return st;
}

/* ---- calibration ---- */

/* Every kernel's calibration: 3 passes of >= 0.5 ms a size (the whole CPU table in a few
 * seconds). */
static peat_status calibrate_kernel(const peat_kernel *k, const peat_pred_device *d,
                                    peat_pred_ktable *kt)
{
    return peat_predictor_calibrate_kernel(k, d, 0.0005, 3, kt);
}

/* A candidate is code under test: on the CPU it is timed in a forked child
 * (harness/isolate/isolate.c), so that one that crashes, ends its process or spins costs its own
 * row, not the calibration (in-process, a kernel that called exit() ended `peat run --budget`
 * silently). */
typedef struct cal_job {
    const peat_kernel *k;
    peat_pred_device dev;
    peat_pred_ktable kt; /* the child's result */
    long timings, quiet; /* what its quiet gate saw */
    double best;
} cal_job;

static peat_status cal_job_run(void *arg)
{
    cal_job *j = arg;
    long t0, q0;
    peat_predictor_gate_stats(&t0, &q0);
    PEAT_TRY(calibrate_kernel(j->k, &j->dev, &j->kt));
    peat_predictor_gate_stats(&j->timings, &j->quiet);
    j->timings -= t0, j->quiet -= q0;
    j->best = peat_predictor_probe_best();
    return PEAT_OK;
}

/* Longest a candidate's calibration may take (a normal one takes well under a second). */
#define CAL_TIMEOUT_S 10.0

static peat_status calibrate_candidate(const peat_kernel *k, const peat_latency_env *env,
                                       peat_pred_ktable *kt)
{
    cal_job *j = peat_isolate_shared(sizeof *j);
    if (!j) return PEAT_ERROR(PEAT_ERR_NOMEM, "calibration job");
    j->k = k, j->dev = env->dev;
    char why[256];
    peat_status st = peat_isolate_work(k->name, cal_job_run, j, CAL_TIMEOUT_S, why, sizeof why);
    if (st == PEAT_OK) {
        *kt = j->kt;
        peat_predictor_gate_merge(j->timings, j->quiet, j->best);
    } else if (st == PEAT_ERR_KERNEL)
        st = PEAT_ERROR(PEAT_ERR_KERNEL, "%s", why);
    peat_isolate_shared_free(j, sizeof *j);
    return st;
}

/* The cached row of k when its descriptor is unchanged, else a fresh measurement. */
static peat_status kernel_row(const peat_pred_table *cached, const peat_kernel *k, int force,
                              const peat_latency_env *env, int w, peat_pred_ktable *kt,
                              int *measured)
{
    const peat_pred_ktable *c = force ? NULL : peat_predictor_table_find(cached, k);
    *measured = !c;
    if (c) {
        *kt = *c;
        return PEAT_OK;
    }
    if (w >= 0) return peat_latency_work_calibrate((peat_latency_work)w, kt);
    if (k->role == PEAT_ROLE_CANDIDATE && peat_backend_on_host(k->backend))
        return calibrate_candidate(k, env, kt);
    return calibrate_kernel(k, &env->dev, kt);
}

peat_status peat_latency_calibrate(const peat_latency_env *env, const char *cache_dir, int force,
                                   const peat_kernel *only, peat_pred_table *t,
                                   peat_latency_calib *out, FILE *log)
{
    memset(out, 0, sizeof *out);
    memset(t, 0, sizeof *t);
    t->dev = env->dev;
    snprintf(t->version, sizeof t->version, "%s", PEAT_LATENCY_TABLE_VERSION);
    PEAT_TRY(
        peat_latency_cache_path(cache_dir, &env->dev, out->cache_path, sizeof out->cache_path));
    peat_pred_table cached;
    memset(&cached, 0, sizeof cached);
    cached.dev = env->dev;
    peat_status st = peat_latency_cache_load(out->cache_path, &env->dev, &cached);
    if (st != PEAT_OK && st != PEAT_ERR_NOTFOUND && log)
        fprintf(log, "latency cache: %s; calibrating afresh\n", peat_error_last());
    double t0 = peat_predictor_now();
    st = PEAT_OK;
    int total = peat_registry_count() + PEAT_WORK_COUNT;
    for (int i = 0; st == PEAT_OK && i < total; i++) {
        int w = i - peat_registry_count();
        const peat_kernel *k =
            w < 0 ? peat_registry_at(i) : peat_latency_work_kernel((peat_latency_work)w);
        if (w < 0 && strcmp(k->backend, env->dev.backend) != 0) continue;
        peat_pred_ktable kt;
        int measured = 0;
        if (w < 0 && only && k != only && k->role == PEAT_ROLE_CANDIDATE) {
            const peat_pred_ktable *c = force ? NULL : peat_predictor_table_find(&cached, k);
            if (c) st = peat_predictor_table_add(t, c), out->n_reused++;
            continue;
        }
        st = kernel_row(&cached, k, force, env, w, &kt, &measured);
        if (st == PEAT_ERR_KERNEL) {
            /* a candidate that cannot be timed: predictions use its op's golden kernel */
            if (log)
                fprintf(log,
                        "latency calibration: %s; left out (predictions cost it as its "
                        "op's golden kernel)\n",
                        peat_error_last());
            out->n_failed++;
            st = PEAT_OK;
            continue;
        }
        if (st == PEAT_OK) st = peat_predictor_table_add(t, &kt);
        out->n_calibrated += measured;
        out->n_reused += !measured;
    }
    /* band reruns are calibrated when a prediction needs them (peat_latency_calibrate_band):
     * unchanged ones are kept */
    for (int op = 0; st == PEAT_OK && !force && op < PEAT_OP_COUNT; op++)
        for (int r = 1; st == PEAT_OK && r < PEAT_RUNTIME_MAX_BAND; r++) {
            const peat_kernel *b = peat_latency_band_kernel((peat_op_kind)op, r);
            const peat_pred_ktable *c = b ? peat_predictor_table_find(&cached, b) : NULL;
            if (c) st = peat_predictor_table_add(t, c);
        }
    out->cost_s = out->n_calibrated ? peat_predictor_now() - t0 : 0.0;
    t->cost_s = out->n_calibrated ? out->cost_s : cached.cost_s;
    peat_predictor_table_free(&cached);
    if (st == PEAT_OK && out->n_calibrated) st = peat_latency_cache_save(out->cache_path, t);
    if (st != PEAT_OK) peat_predictor_table_free(t);
    return st;
}

peat_status peat_latency_calibrate_band(const peat_latency_env *env, peat_op_kind op, int runs,
                                        peat_pred_table *t, peat_latency_calib *calib)
{
    double t0 = peat_predictor_now();
    int measured = 0;
    for (int r = 1; r < runs && r < PEAT_RUNTIME_MAX_BAND; r++) {
        const peat_kernel *b = peat_latency_band_kernel(op, r);
        if (!b || peat_predictor_table_find(t, b)) continue;
        peat_pred_ktable kt;
        PEAT_TRY(calibrate_kernel(b, &env->dev, &kt));
        PEAT_TRY(peat_predictor_table_add(t, &kt));
        measured++;
    }
    if (!measured) return PEAT_OK;
    calib->n_calibrated += measured;
    calib->cost_s += peat_predictor_now() - t0;
    return peat_latency_cache_save(calib->cache_path, t);
}
