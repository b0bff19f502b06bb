/* test_golden_cache.c: the golden cache (harness/campaign/golden_cache.c): a campaign whose profile
 * and band come from an earlier campaign of the same key gives the independent run's tables and
 * verdicts; any change of what the golden work depends on is another key; damaged entries are
 * not used; the cache stays under its size limit. */
#include "cli_run.h"

#include "store/store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static void setup(void)
{
    tmpdir_make("gcache");
}

static void teardown(void)
{
    tmpdir_remove();
}

TestSuite(golden_cache, .init = setup, .fini = teardown, .timeout = 600);

/* `peat run ARGS --out OUT` with the cache in tmpdir/cache (PEAT_GOLDEN_CACHE as given). */
static int run_cached(const char *gc, const char *out, const char *args)
{
    return sh("PEAT_CACHE_DIR=%s/cache PEAT_GOLDEN_CACHE=%s %s run %s --out %s/%s --force", tmpdir,
              gc, PEAT_TEST_BIN, args, tmpdir, out);
}

/* The campaign's terminal table without what names the run or times it (the report's folder,
 * the timings of the verdict line and the progress lines, the profile's progress and the cache's
 * own lines). */
static void table_of(char *dst, size_t n)
{
    size_t len = 0;
    dst[0] = 0;
    for (char *line = strtok(out_buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *cut = strstr(line, "; profile "); /* the verdict line's timings */
        if (cut) *cut = 0;
        if (!strncmp(line, "profile:", 8) || !strncmp(line, "report:", 7) ||
            strstr(line, " done in ") || strstr(line, "golden cache"))
            continue;
        len += (size_t)snprintf(dst + len, n - len, "%s\n", line);
        if (len >= n) break;
    }
}

/* Whether two campaign files hold the same object (h5diff finds no difference). */
static int same_object(const char *a, const char *b, const char *obj)
{
    return sh("h5diff -q %s/%s/campaign.h5 %s/%s/campaign.h5 %s", tmpdir, a, tmpdir, b, obj) == 0;
}

static int entries(void)
{
    char p[400];
    snprintf(p, sizeof p, "%s/cache/golden", tmpdir);
    DIR *d = opendir(p);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += strlen(e->d_name) == 16;
    if (d) closedir(d);
    return n;
}

static char cold[1 << 16]; /* the last cold run's table */

/* One kernel on one flow three ways: stored (cold), from the cache (warm), without the cache. */
static void warm_equals_cold(const char *args)
{
    static char warm[1 << 16], off[1 << 16];
    cr_assert_eq(run_cached("on", "cold", args), 0, "cold run of %s: %s%s", args, out_buf, err_buf);
    cr_assert(strstr(out_buf, "from the golden cache") == NULL, "a cold run took a cache entry");
    table_of(cold, sizeof cold);
    int rc = run_cached("on", "warm", args);
    cr_assert_eq(rc, 0, "warm run of %s: %s%s", args, out_buf, err_buf);
    cr_assert(strstr(out_buf, "profile: from the golden cache"), "the warm run trained: %s",
              out_buf);
    cr_assert(strstr(out_buf, "the band's 2 reruns from the golden cache"),
              "the warm run trained its band: %s", out_buf);
    table_of(warm, sizeof warm);
    cr_assert_eq(run_cached("off", "off", args), 0, "uncached run: %s", err_buf);
    table_of(off, sizeof off);
    cr_assert_str_eq(warm, cold, "warm and cold tables of %s differ:\n%s\n---\n%s", args, warm,
                     cold);
    cr_assert_str_eq(off, cold, "uncached and cached tables of %s differ:\n%s\n---\n%s", args, off,
                     cold);
    const char *objs[] = {"/runtime/curves",
                          "/runtime/weight_distance",
                          "/runtime/verdicts",
                          "/signatures",
                          "/metrics",
                          "/states",
                          "/calls"};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        cr_assert(same_object("cold", "warm", objs[i]), "%s: warm file differs at %s", args,
                  objs[i]);
        cr_assert(same_object("off", "warm", objs[i]), "%s: warm file differs from uncached at %s",
                  args, objs[i]);
    }
}

Test(golden_cache, warm_run_gives_the_independent_runs_tables_and_files)
{
    warm_equals_cold("--kernel gemm_new --flow mlp");
}

/* A candidate that leaves the band (bf16 products: DEGRADES, a WARN) judged against a cached band,
 * and one inside it on another flow */
Test(golden_cache, a_band_verdict_is_the_same_from_the_cache)
{
    warm_equals_cold("--kernel gemm_bf16 --flow mlp");
    cr_assert(strstr(cold, "DEGRADES"), "bf16 products on mlp no longer DEGRADE: %s", cold);
    warm_equals_cold("--kernel gemm_bf16 --flow cnn");
}

/* Another candidate of the same op on the same flow reuses the entry: the golden work is the op's
 */
Test(golden_cache, another_kernel_of_the_op_reuses_the_entry)
{
    cr_assert_eq(run_cached("on", "a", "--kernel gemm_new --flow mlp"), 0, "%s", err_buf);
    cr_assert_eq(run_cached("on", "b", "--kernel gemm_bf16 --flow mlp"), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "profile: from the golden cache"), "gemm_bf16 trained: %s", out_buf);
    cr_assert_eq(entries(), 1, "%d entries for one flow and op", entries());
}

Test(golden_cache, a_changed_seed_or_golden_kernel_is_another_key)
{
    cr_assert_eq(run_cached("on", "a", "--kernel gemm_new --flow mlp"), 0, "%s", err_buf);
    cr_assert_eq(run_cached("on", "b", "--kernel gemm_new --flow mlp --seed 2"), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "from the golden cache") == NULL, "another seed hit: %s", out_buf);
    /* the plain loop in place of OpenBLAS: another golden GEMM */
    cr_assert_eq(sh("PEAT_BLAS=0 PEAT_GOLDEN_CACHE=on PEAT_CACHE_DIR=%s/cache %s run --kernel "
                    "gemm_new --flow mlp "
                    "--out %s/c",
                    tmpdir, PEAT_TEST_BIN, tmpdir),
                 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "from the golden cache") == NULL, "another golden hit: %s", out_buf);
    cr_assert_eq(run_cached("on", "d", "--kernel gemm_new --flow mlp --calls 12"), 0, "%s",
                 err_buf);
    cr_assert(strstr(out_buf, "from the golden cache") == NULL, "other --calls hit: %s", out_buf);
    cr_assert_eq(entries(), 4, "%d entries for four keys", entries());
    cr_assert_eq(run_cached("on", "e", "--kernel gemm_new --flow mlp --seed 2"), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "profile: from the golden cache"), "the seed-2 entry missed: %s",
              out_buf);
}

Test(golden_cache, turned_off_it_neither_reads_nor_writes)
{
    cr_assert_eq(run_cached("off", "a", "--kernel gemm_new --flow mlp"), 0, "%s", err_buf);
    cr_assert_eq(entries(), 0, "PEAT_GOLDEN_CACHE=off stored an entry");
    cr_assert_eq(run_cached("on", "b", "--kernel gemm_new --flow mlp"), 0, "%s", err_buf);
    cr_assert_eq(run_cached("on", "c", "--kernel gemm_new --flow mlp --no-golden-cache"), 0, "%s",
                 err_buf);
    cr_assert(strstr(out_buf, "from the golden cache") == NULL, "--no-golden-cache hit: %s",
              out_buf);
}

/* A damaged entry is not used (the run trains its golden work and passes as without it). */
Test(golden_cache, a_damaged_entry_is_not_used)
{
    cr_assert_eq(run_cached("on", "a", "--kernel gemm_new --flow mlp"), 0, "%s", err_buf);
    cr_assert_eq(sh("for f in %s/cache/golden/*/profile.h5; do head -c 4096 $f > $f.cut && "
                    "mv $f.cut $f; done",
                    tmpdir),
                 0, "cutting the entry's file");
    cr_assert_eq(run_cached("on", "b", "--kernel gemm_new --flow mlp"), 0, "%s%s", out_buf,
                 err_buf);
    cr_assert(strstr(out_buf, "verdict: PASS"), "%s", out_buf);
    cr_assert(strstr(err_buf, "golden cache") && strstr(err_buf, "not used"),
              "the damaged entry was not named: %s", err_buf);
    cr_assert_eq(sh("for f in %s/cache/golden/*/profile.bin; do echo junk > $f; done", tmpdir), 0,
                 "damaging the summary");
    cr_assert_eq(run_cached("on", "c", "--kernel gemm_new --flow mlp"), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "from the golden cache") == NULL, "a damaged summary was used: %s",
              out_buf);
}

/* Past PEAT_GOLDEN_CACHE_MAX_MB the least recently used entries go, never the one just made. */
Test(golden_cache, the_cache_stays_under_its_limit)
{
    for (int seed = 1; seed <= 3; seed++) {
        char args[128], out[16];
        snprintf(args, sizeof args, "--kernel gemm_new --flow mlp --seed %d", seed);
        snprintf(out, sizeof out, "s%d", seed);
        cr_assert_eq(sh("PEAT_GOLDEN_CACHE_MAX_MB=1 PEAT_GOLDEN_CACHE=on PEAT_CACHE_DIR=%s/cache "
                        "%s run %s --out %s/%s",
                        tmpdir, PEAT_TEST_BIN, args, tmpdir, out),
                     0, "%s", err_buf);
        cr_assert_eq(entries(), 1, "%d entries under a 1 MB limit (each is larger)", entries());
    }
    cr_assert_eq(run_cached("on", "again", "--kernel gemm_new --flow mlp --seed 3"), 0, "%s",
                 err_buf);
    cr_assert(strstr(out_buf, "profile: from the golden cache"), "the newest entry was evicted");
}

/* The store's copy: a new campaign file with its own metadata and the seed file's records. */
Test(golden_cache, a_campaign_file_created_from_another_holds_its_records)
{
    cr_assert_eq(run_cached("off", "a", "--kernel gemm_new --flow mlp --no-runtime"), 0, "%s",
                 err_buf);
    char seed[400], path[400];
    snprintf(seed, sizeof seed, "%s/a/campaign.h5", tmpdir);
    snprintf(path, sizeof path, "%s/copy.h5", tmpdir);
    peat_store_t *s = NULL;
    cr_assert_eq(peat_store_open(seed, 0, &s), PEAT_OK, "%s", peat_error_last());
    peat_store_meta m;
    cr_assert_eq(peat_store_meta_get(s, &m), PEAT_OK);
    int64_t calls = peat_store_call_count(s), states = peat_store_state_count(s),
            metrics = peat_store_metrics_count(s);
    peat_store_close(s);
    snprintf(m.kernel, sizeof m.kernel, "another_kernel");
    cr_assert_eq(peat_store_create_from(path, &m, seed, &s), PEAT_OK, "%s", peat_error_last());
    cr_assert_eq(peat_store_call_count(s), calls, "records: %lld of %lld",
                 (long long)peat_store_call_count(s), (long long)calls);
    cr_assert_eq(peat_store_state_count(s), states);
    cr_assert_eq(peat_store_metrics_count(s), metrics);
    peat_record *r = NULL;
    cr_assert_eq(peat_store_call_read(s, calls - 1, &r), PEAT_OK, "%s", peat_error_last());
    peat_record_free(r);
    peat_store_meta got;
    cr_assert_eq(peat_store_meta_get(s, &got), PEAT_OK);
    cr_assert_str_eq(got.kernel, "another_kernel");
    cr_assert_eq(peat_store_close(s), PEAT_OK, "%s", peat_error_last());
    cr_assert_neq(peat_store_create_from(path, &m, seed, &s), PEAT_OK,
                  "an existing file was overwritten");
}
