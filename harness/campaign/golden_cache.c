/* golden_cache.c: the golden work of a campaign paid once across runs and suites (golden_cache.h):
 * the key, the entries under $PEAT_CACHE_DIR/golden/, and what the profile and runtime stages
 * take from them and put into them. */
#define _GNU_SOURCE /* dladdr */
#include "harness/campaign/golden_cache.h"
#include "peat/backend.h"

#include "harness/runtime/golden_log.h"
#include "harness/scale/ranks.h"
#include "harness/campaign/stages.h"
#include "core/cache_dir.h"
#include "golden/golden.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int peat_campaign_golden_log_wanted(const peat_campaign_opts *o, const peat_kernel *k)
{
    return !o->no_runtime && !o->capture && !o->finetune_from && peat_backend_on_host(k->backend) &&
           !getenv("PEAT_NO_GOLDEN_LOG");
}

/* What the entries may hold in all before the least recently used go (PEAT_GOLDEN_CACHE_MAX_MB). */
#define CACHE_MAX_MB_DEFAULT 4096
#define SUMMARY_MAGIC        "PEATGCS1"
#define BAND_MAGIC           "PEATGCB1"

/* Why a campaign does not use the cache ("" when it does). */
static const char *off_reason(const peat_campaign *c)
{
    const peat_campaign_opts *o = c->o;
    const char *e = getenv("PEAT_GOLDEN_CACHE");
    if (o->no_golden_cache || (e && (!strcmp(e, "off") || !strcmp(e, "0"))))
        return "turned off (--no-golden-cache or PEAT_GOLDEN_CACHE=off)";
    if (o->resume) return "--resume continues its own file";
    if (o->capture) return "captured calls have no golden training";
    if (o->finetune_from) return "a finetune starts from a checkpoint file";
    if (o->shard || o->merge_shards || peat_scale_ranks_active())
        return "shards and MPI ranks train their own share";
    /* a device's golden is its vendor library, whose sums may change from run to run */
    if (!peat_backend_on_host(c->k->backend)) return "device goldens are not cached";
    return "";
}

/* The executable or library holding the golden kernels, with its size and time: a rebuilt
 * golden kernel is another key even where its name and PEAT's version stay. */
static void build_identity(char *buf, size_t n)
{
    Dl_info di;
    const char *path = "/proc/self/exe";
    /* an object of the golden module (its description's buffer): dladdr names its file */
    if (dladdr(peat_golden_blas_describe(), &di) && di.dli_fname && di.dli_fname[0])
        path = di.dli_fname;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(buf, n, "%s (unreadable)", path);
        return;
    }
    snprintf(buf, n, "%lld bytes, %lld.%09ld", (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
             sb.st_mtim.tv_nsec);
}

/* Everything the profile and the band depend on, as text (the entry keeps it to be compared). */
static void key_text(const peat_campaign *c, char *key, size_t n)
{
    const peat_campaign_opts *o = c->o;
    char build[160];
    build_identity(build, sizeof build);
    const char *blas_env = getenv("PEAT_BLAS");
    size_t len = (size_t)snprintf(
        key, n,
        "peat %s\nbuild %s\nflow %s\nop %s\nseed %llu\niters %lld\nsize %s\nprecision %s\n"
        "loss-scale %g/%d\npolicy %s\nexact %d\ncompress %s\ndevice %s\nblas %s\nPEAT_BLAS %s\n"
        "golden",
        PEAT_VERSION_STRING, build, c->flow, peat_op_name(c->k->op), (unsigned long long)o->seed,
        (long long)c->iters, o->size ? o->size : "tiny", o->precision ? o->precision : "fp32",
        o->loss_scale_init, o->loss_scale_interval, c->policy, o->record_exact,
        o->compress ? o->compress : "default", c->dev.name, c->res->blas,
        blas_env ? blas_env : "-");
    for (int op = 0; op < PEAT_OP_COUNT && len < n; op++) {
        const peat_kernel *g =
            peat_registry_role((peat_op_kind)op, PEAT_ROLE_GOLDEN, PEAT_BACKEND_HOST);
        len += (size_t)snprintf(key + len, n - len, " %s=%s", peat_op_name((peat_op_kind)op),
                                g ? g->name : "-");
    }
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A whole file into p (0 when it cannot be read). */
static int file_read(const char *path, peat_scale_pack *p)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char buf[1 << 16];
    size_t m;
    while ((m = fread(buf, 1, sizeof buf, f)) > 0) peat_scale_pack_put(p, buf, m);
    int ok = !ferror(f) && !p->err;
    fclose(f);
    return ok;
}

/* p into path, through a temporary name (readers never see half a file). */
static int file_write(const char *path, const void *b, size_t n)
{
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(b, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) unlink(tmp);
    return ok;
}

static int file_copy(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = in >= 0 ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
    char *buf = out >= 0 ? malloc((size_t)4 << 20) : NULL;
    int ok = buf != NULL;
    ssize_t r;
    while (ok && (r = read(in, buf, (size_t)4 << 20)) != 0) {
        if (r < 0 && errno == EINTR) continue;
        ok = r > 0 && write(out, buf, (size_t)r) == r;
    }
    free(buf);
    if (out >= 0 && close(out) != 0) ok = 0;
    if (in >= 0) close(in);
    return ok;
}

static int summary_valid(const char *dir);

void peat_campaign_golden_cache_find(peat_campaign *c)
{
    peat_campaign_golden_cache *gc = &c->gcache;
    memset(gc, 0, sizeof *gc);
    snprintf(gc->why, sizeof gc->why, "%s", off_reason(c));
    if (gc->why[0]) return;
    char root[400], kept[sizeof gc->key];
    if (peat_cache_dir(c->o->cache_dir, "golden cache", 40, root, sizeof root) != PEAT_OK) {
        snprintf(gc->why, sizeof gc->why, "the cache directory's path is too long");
        return;
    }
    key_text(c, gc->key, sizeof gc->key);
    gc->hash = fnv1a(gc->key);
    snprintf(gc->dir, sizeof gc->dir, "%s/golden/%016llx", root, (unsigned long long)gc->hash);
    gc->on = 1;
    char path[700];
    snprintf(path, sizeof path, "%s/key.txt", gc->dir);
    FILE *f = fopen(path, "r");
    size_t m = f ? fread(kept, 1, sizeof kept - 1, f) : 0;
    if (f) fclose(f);
    kept[m] = 0;
    /* the whole key compared, not its hash: two keys of one hash never share an entry */
    gc->hit = m > 0 && strcmp(kept, gc->key) == 0 && summary_valid(gc->dir);
    if (gc->hit) utimensat(AT_FDCWD, gc->dir, NULL, 0); /* recently used */
}

const char *peat_campaign_golden_cache_seed(peat_campaign *c, char *buf, size_t n)
{
    if (!c->gcache.hit) return NULL;
    snprintf(buf, n, "%s/profile.h5", c->gcache.dir);
    return buf;
}

/* ---- the profile ---- */

/* The profile's results (what the report shows of it), in the order profile_put writes them. */
static void summary_io(peat_campaign_result *r, peat_scale_pack *p, int put)
{
    struct {
        void *v;
        size_t n;
    } f[] = {
        {&r->loss_first, sizeof r->loss_first},
        {&r->loss_last, sizeof r->loss_last},
        {&r->eval_loss, sizeof r->eval_loss},
        {&r->eval_accuracy, sizeof r->eval_accuracy},
        {&r->skipped_steps, sizeof r->skipped_steps},
        {r->precision, sizeof r->precision},
        {&r->n_checkpoints, sizeof r->n_checkpoints},
        {&r->n_activation_records, sizeof r->n_activation_records},
        {&r->n_stored_records, sizeof r->n_stored_records},
        {&r->coverage, sizeof r->coverage},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        uint64_t size = f[i].n;
        if (put) {
            peat_scale_pack_put(p, &size, sizeof size);
            peat_scale_pack_put(p, f[i].v, f[i].n);
            continue;
        }
        uint64_t got = 0;
        peat_scale_pack_get(p, &got, sizeof got);
        if (got != size) p->err = 1; /* another build's layout */
        if (!p->err) peat_scale_pack_get(p, f[i].v, f[i].n);
    }
}

/* An entry's profile results into r (0 when they cannot be read whole: another build's, or
 * damaged). */
static int summary_read(const char *dir, peat_campaign_result *r)
{
    char path[700];
    snprintf(path, sizeof path, "%s/profile.bin", dir);
    peat_scale_pack p = {0};
    char magic[sizeof SUMMARY_MAGIC] = "";
    int ok = file_read(path, &p);
    peat_scale_pack_get(&p, magic, sizeof magic);
    if (ok && !p.err && !memcmp(magic, SUMMARY_MAGIC, sizeof magic)) summary_io(r, &p, 0);
    ok = ok && !p.err && p.at == p.n;
    peat_scale_pack_free(&p);
    return ok;
}

/* Whether an entry's profile results read back (into a scratch result). */
static int summary_valid(const char *dir)
{
    peat_campaign_result *r = calloc(1, sizeof *r);
    int ok = r && summary_read(dir, r);
    free(r);
    return ok;
}

/* The records of the candidate's op, in the order the profile recorded them. */
static peat_status records_take(peat_campaign *c)
{
    int64_t n = peat_store_call_count(c->store);
    for (int64_t i = 0; i < n; i++) {
        peat_record h;
        memset(&h, 0, sizeof h);
        PEAT_TRY(peat_store_call_header(c->store, i, &h));
        if (h.op != c->k->op) continue;
        peat_record *r = NULL;
        PEAT_TRY(peat_store_call_read(c->store, i, &r));
        PEAT_TRY(peat_record_list_sink(&c->recs, r));
    }
    return PEAT_OK;
}

/* The entry's golden log with a flow of the campaign's config beside it (NULL in c->golden
 * when there is none or it does not fit: the runtime stage then trains its golden run). */
static void log_take(peat_campaign *c)
{
    char path[700];
    snprintf(path, sizeof path, "%s/golden.log", c->gcache.dir);
    if (!peat_campaign_golden_log_wanted(c->o, c->k) || access(path, R_OK) != 0) return;
    peat_flow_config cfg = peat_campaign_flow_config(c->o);
    peat_exec_t *ex = NULL;
    peat_flow_t *f = NULL;
    peat_status st = peat_exec_alloc(c->flow, c->o->seed, &ex);
    if (st == PEAT_OK) st = peat_exec_set_backend(ex, c->k->backend);
    if (st == PEAT_OK) st = peat_models_flow_alloc(c->flow, &cfg, ex, &f);
    if (st == PEAT_OK) st = peat_runtime_golden_log_restore(path, f, ex, &c->golden);
    if (st != PEAT_OK) {
        peat_models_flow_free(f);
        peat_exec_free(ex);
        c->golden = NULL;
    }
}

peat_status peat_campaign_golden_cache_profile_take(peat_campaign *c)
{
    if (!summary_read(c->gcache.dir, c->res))
        return PEAT_ERROR(PEAT_ERR_FORMAT,
                          "golden cache entry %s is damaged (profile.bin): remove it, or run with "
                          "PEAT_GOLDEN_CACHE=off",
                          c->gcache.dir);
    PEAT_TRY(records_take(c));
    log_take(c);
    return PEAT_OK;
}

/* A folder of the cache and the files in it. */
/* fn on the path of every file of dir (entries starting with '.' left out). */
static void dir_each(const char *dir, void (*fn)(const char *path, void *user), void *user)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.') fn(p, user);
    }
    if (d) closedir(d);
}

static void file_remove(const char *path, void *user)
{
    (void)user;
    unlink(path);
}

static void dir_remove(const char *dir)
{
    dir_each(dir, file_remove, NULL);
    rmdir(dir);
}

/* Entries past the size limit removed, least recently used first (never `keep`). */
static void evict(const char *golden_dir, const char *keep);

void peat_campaign_golden_cache_profile_put(peat_campaign *c)
{
    peat_campaign_golden_cache *gc = &c->gcache;
    char tmp[700], path[760];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", gc->dir, (long)getpid());
    char parent[620];
    snprintf(parent, sizeof parent, "%s", gc->dir);
    *strrchr(parent, '/') = 0;
    int ok = peat_campaign_mkdir_p(parent) == PEAT_OK && mkdir(tmp, 0755) == 0;
    snprintf(path, sizeof path, "%s/profile.h5", tmp);
    ok = ok && file_copy(c->partial, path);
    peat_scale_pack p = {0};
    peat_scale_pack_put(&p, SUMMARY_MAGIC, sizeof SUMMARY_MAGIC);
    summary_io(c->res, &p, 1);
    snprintf(path, sizeof path, "%s/profile.bin", tmp);
    ok = ok && !p.err && file_write(path, p.b, p.n);
    peat_scale_pack_free(&p);
    if (ok && peat_runtime_golden_log_iters(c->golden) > 0) {
        snprintf(path, sizeof path, "%s/golden.log", tmp);
        ok = peat_runtime_golden_log_save(c->golden, path) == PEAT_OK;
    }
    /* the key the entry's folder is named by, as found at open */
    snprintf(path, sizeof path, "%s/key.txt", tmp);
    ok = ok && file_write(path, gc->key, strlen(gc->key));
    /* another run that stored the same entry first keeps it: ours goes */
    if (!ok || rename(tmp, gc->dir) != 0) {
        if (!ok)
            fprintf(stderr, "peat: golden cache: cannot store this profile in %s (%s)\n", gc->dir,
                    strerror(errno));
        dir_remove(tmp);
        return;
    }
    evict(parent, gc->dir);
}

/* ---- the band ---- */

int peat_campaign_golden_cache_band_get(peat_campaign *c, int R, int64_t iters, int64_t every,
                                        peat_scale_pack *band)
{
    peat_campaign_golden_cache *gc = &c->gcache;
    snprintf(gc->band, sizeof gc->band, "band-R%d-n%lld-e%lld.bin", R, (long long)iters,
             (long long)every);
    if (!gc->hit) return 0;
    char path[760], magic[sizeof BAND_MAGIC] = "";
    snprintf(path, sizeof path, "%s/%s", gc->dir, gc->band);
    peat_scale_pack p = {0};
    if (!file_read(path, &p)) {
        peat_scale_pack_free(&p);
        return 0;
    }
    peat_scale_pack_get(&p, magic, sizeof magic);
    if (p.err || memcmp(magic, BAND_MAGIC, sizeof magic)) {
        peat_scale_pack_free(&p);
        return 0;
    }
    *band = p;
    return c->gcache.band_hit = 1;
}

void peat_campaign_golden_cache_band_put(peat_campaign *c, const peat_scale_pack *band)
{
    if (!c->gcache.band[0]) return; /* no band_get named this lockstep's band */
    char path[760];
    snprintf(path, sizeof path, "%s/%s", c->gcache.dir, c->gcache.band);
    peat_scale_pack p = {0};
    peat_scale_pack_put(&p, BAND_MAGIC, sizeof BAND_MAGIC);
    peat_scale_pack_put(&p, band->b, band->n);
    struct stat sb;
    /* the entry may be gone (evicted by another run): then the band goes with it */
    if (!p.err && stat(c->gcache.dir, &sb) == 0 && !file_write(path, p.b, p.n))
        fprintf(stderr, "peat: golden cache: cannot store the band in %s\n", c->gcache.dir);
    peat_scale_pack_free(&p);
}

/* ---- eviction ---- */

typedef struct {
    char name[32];
    long long bytes;
    long long mtime;
} entry;

static void file_bytes(const char *path, void *user)
{
    struct stat sb;
    if (stat(path, &sb) == 0) *(long long *)user += (long long)sb.st_size;
}

static long long dir_bytes(const char *dir)
{
    long long sum = 0;
    dir_each(dir, file_bytes, &sum);
    return sum;
}

static int by_age(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

static void evict(const char *golden_dir, const char *keep)
{
    const char *env = getenv("PEAT_GOLDEN_CACHE_MAX_MB");
    long long max = (env && atoll(env) > 0 ? atoll(env) : CACHE_MAX_MB_DEFAULT) << 20;
    entry *es = NULL;
    int n = 0, cap = 0;
    long long total = 0;
    DIR *d = opendir(golden_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[1100];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", golden_dir, e->d_name);
        if (strlen(e->d_name) != 16 || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (n == cap) {
            entry *ne = realloc(es, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *es);
            if (!ne) break;
            es = ne;
        }
        snprintf(es[n].name, sizeof es[n].name, "%.31s", e->d_name); /* 16 characters */
        es[n].bytes = dir_bytes(p);
        es[n].mtime = (long long)sb.st_mtim.tv_sec;
        total += es[n++].bytes;
    }
    if (d) closedir(d);
    qsort(es, (size_t)n, sizeof *es, by_age);
    const char *mine = strrchr(keep, '/') + 1;
    for (int i = 0; i < n && total > max; i++) {
        if (!strcmp(es[i].name, mine)) continue;
        char p[1100];
        snprintf(p, sizeof p, "%s/%s", golden_dir, es[i].name);
        dir_remove(p);
        total -= es[i].bytes;
    }
    free(es);
}
