/* test_report_browser.c: report.html of a campaign with findings, opened in headless Chromium:
 * it loads with no console message, the verdict banner, findings and plots are in the rendered
 * DOM, the runtime plots have an iteration axis and a band, and screenshots of a FAIL and a PASS
 * report are kept in the build folder (report-browser/report.png, report-pass.png). Skips (never
 * passes) where Chromium is missing or cannot start: exit 77, which ctest reports as skipped. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARTIFACTS PEAT_TEST_BUILD_DIR "/report-browser"
#define PLUGIN    PEAT_TEST_PLUGIN_DIR "/libplugin_test_gemms.so"

static char tmpdir[256];
static char browser[64];
static char dom[1 << 20], log_buf[1 << 16];

static void slurp(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
}

static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/peat-test-browser-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
    sh("rm -rf '%s'", tmpdir);
}

/* Opens url headless with no network (every host name fails to resolve): the rendered DOM goes
 * to dom, Chromium's log (console messages are its "CONSOLE" lines) to log_buf, and a
 * screenshot to png when given. Returns Chromium's exit status. */
static int chromium(const char *url, const char *png)
{
    char shot[600] = "";
    if (png) snprintf(shot, sizeof shot, "--screenshot=%s --window-size=1000,3200", png);
    /* root needs --no-sandbox; a fresh profile keeps runs independent */
    int rc = sh("cd %s && timeout 120 %s --headless --no-sandbox --disable-gpu --no-first-run "
                "--user-data-dir=%s/profile --host-resolver-rules='MAP * ~NOTFOUND' "
                "--enable-logging=stderr --v=0 %s %s %s >%s/dom 2>%s/log",
                tmpdir, browser, tmpdir, png ? shot : "--dump-dom", url, "", tmpdir, tmpdir);
    char p[300];
    snprintf(p, sizeof p, "%s/dom", tmpdir);
    slurp(p, dom, sizeof dom);
    snprintf(p, sizeof p, "%s/log", tmpdir);
    slurp(p, log_buf, sizeof log_buf);
    return rc;
}

/* Skips the test unless a Chromium binary is installed and renders a trivial page. */
static void need_chromium(void)
{
    const char *names[] = {"chromium", "chromium-browser", "google-chrome"};
    browser[0] = 0;
    for (int i = 0; i < 3 && !browser[0]; i++)
        if (sh("command -v %s >/dev/null 2>&1", names[i]) == 0)
            snprintf(browser, sizeof browser, "%s", names[i]);
    if (!browser[0]) cr_skip_test("no chromium installed (scripts/install-deps.sh installs it)");
    char p[300];
    snprintf(p, sizeof p, "%s/hello.html", tmpdir);
    FILE *f = fopen(p, "w");
    fputs("<!doctype html><title>t</title><p id=\"hello\">hello</p>", f);
    fclose(f);
    char url[320];
    snprintf(url, sizeof url, "file://%s", p);
    if (chromium(url, NULL) != 0 || !strstr(dom, "id=\"hello\""))
        cr_skip_test("chromium cannot start here: %.200s", log_buf);
}

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *c = s; (c = strstr(c, needle)); c += strlen(needle)) n++;
    return n;
}

/* The console lines Chromium logged for the page. */
static int console_lines(void)
{
    return count_of(log_buf, ":CONSOLE");
}

TestSuite(browser, .init = setup, .fini = teardown, .timeout = 600);

Test(browser, console_check_sees_a_script_error)
{
    need_chromium();
    char p[300], url[320];
    snprintf(p, sizeof p, "%s/bad.html", tmpdir);
    FILE *f = fopen(p, "w");
    fputs("<!doctype html><title>t</title><script>undefinedFunction();</script>", f);
    fclose(f);
    snprintf(url, sizeof url, "file://%s", p);
    cr_assert_eq(chromium(url, NULL), 0);
    cr_assert_eq(console_lines(), 1, "a page with a script error must log it:\n%s", log_buf);
    cr_assert(strstr(log_buf, "undefinedFunction"), "%s", log_buf);
}

/* The rendered runtime plots (loss and weight distance): each has tick labels on an iteration
 * axis and a band polygon (the golden band, drawn at least 5 px tall). */
static void runtime_plots_in_dom(const char *what)
{
    const char *rt = strstr(dom, "<h2>Runtime FI");
    cr_assert_not_null(rt, "%s report: no runtime FI section in the rendered page", what);
    int plots = 0;
    for (const char *s = strstr(rt, "<svg "); s; s = strstr(s + 1, "<svg ")) {
        const char *end = strstr(s, "</svg>"), *band = strstr(s, "class=\"band\"");
        if (!end || !band || band > end) break;
        const char *x = strstr(s, "class=\"xlabel\"");
        cr_assert(x && x < end && strstr(x, ">iteration<") < end,
                  "%s report: runtime plot %d has no iteration axis", what, plots + 1);
        const char *tick = strstr(s, "class=\"l\">0</text>");
        cr_assert(tick && tick < end, "%s report: runtime plot %d has no tick labels", what,
                  plots + 1);
        plots++;
    }
    cr_assert_eq(plots, 2, "%s report: loss and weight-distance plots with their bands (%d)", what,
                 plots);
}

/* A screenshot of url into ARTIFACTS/name, checked to be a non-blank PNG. */
static void screenshot(const char *url, const char *name)
{
    char png[400];
    sh("mkdir -p %s", ARTIFACTS);
    snprintf(png, sizeof png, "%s/%s", ARTIFACTS, name);
    remove(png);
    cr_assert_eq(chromium(url, png), 0, "screenshot failed:\n%s", log_buf);
    cr_assert_eq(console_lines(), 0, "%s", log_buf);
    unsigned char sig[8] = {0};
    FILE *f = fopen(png, "rb");
    cr_assert_not_null(f, "no screenshot at %s", png);
    cr_assert_eq(fread(sig, 1, 8, f), 8u);
    fclose(f);
    cr_assert_eq(memcmp(sig, "\x89PNG\r\n\x1a\n", 8), 0, "%s is not a PNG", png);
    struct stat st;
    stat(png, &st);
    cr_assert(st.st_size > 20000, "a %lld-byte screenshot is blank", (long long)st.st_size);
}

/* A PASS report of a default-sized campaign: the runtime plots show the iteration axis and the
 * band; kept as report-browser/report-pass.png beside the FAIL one (report.png). */
Test(browser, pass_report_shows_iteration_axis_and_band)
{
    need_chromium();
    cr_assert_eq(sh("%s run --kernel gemm_new --iters 60 --calls 24 --quiet --out %s/p "
                    ">%s/run.log 2>&1",
                    PEAT_TEST_BIN, tmpdir, tmpdir),
                 0, "gemm_new passes");
    char url[320];
    snprintf(url, sizeof url, "file://%s/p/report.html", tmpdir);
    cr_assert_eq(chromium(url, NULL), 0, "chromium failed on report.html:\n%s", log_buf);
    cr_assert(strstr(dom, "<div id=\"verdict\" class=\"PASS\">"), "no PASS banner");
    runtime_plots_in_dom("PASS");
    cr_assert(strstr(dom, "<table id=\"probes\">") && strstr(dom, "<table id=\"properties\">"),
              "the probe and property tables render");
    screenshot(url, "report-pass.png");
}

Test(browser, report_html_renders_with_verdict_and_plots)
{
    need_chromium();
    cr_assert_eq(sh("%s run --plugin " PLUGIN " --kernel test_gemm_corrupt --iters 8 --calls 8 "
                    "--quiet --out %s/c >%s/run.log 2>&1",
                    PEAT_TEST_BIN, tmpdir, tmpdir),
                 1, "a corrupting kernel fails");
    char html[300], url[320];
    snprintf(html, sizeof html, "%s/c/report.html", tmpdir);
    snprintf(url, sizeof url, "file://%s", html);
    static char src[1 << 20];
    slurp(html, src, sizeof src);
    cr_assert_eq(count_of(src, "src="), 0, "self-contained: no external resources");
    cr_assert_eq(count_of(src, "<script"), 0, "no script");

    cr_assert_eq(chromium(url, NULL), 0, "chromium failed on report.html:\n%s", log_buf);
    cr_assert_eq(console_lines(), 0, "report.html logged to the console:\n%s", log_buf);
    cr_assert(strstr(dom, "<div id=\"verdict\" class=\"FAIL\">"), "no verdict banner in the DOM");
    cr_assert(strstr(dom, "<b>FAIL</b>"));
    cr_assert(strstr(dom, "<h2 class=\"finding\">STRUCTURAL"), "the finding is missing");
    cr_assert(strstr(dom, "stay at the same output positions"), "its evidence is missing");
    cr_assert(strstr(dom, "<b>decided by:</b> permutation"), "its deciding experiment is missing");
    cr_assert(strstr(dom, "<table id=\"diagnosis\">"), "the diagnosis table is missing");
    static const char *const plots[] = {"plot-err",  "plot-ulp",    "plot-bits",
                                        "plot-heat", "plot-region", "plot-loss"};
    for (int i = 0; i < 6; i++) {
        char id[64];
        snprintf(id, sizeof id, "<svg id=\"%s\" class=\"plot\"", plots[i]);
        const char *at = strstr(dom, id);
        cr_assert_not_null(at, "plot %s missing from the rendered page", plots[i]);
        const char *end = strstr(at, "</svg>");
        cr_assert_not_null(end);
        int marks = 0;
        const char *shapes[] = {"<rect", "<path", "<polyline"};
        for (int k = 0; k < 3; k++) {
            const char *m = strstr(at, shapes[k]);
            marks += m && m < end;
        }
        cr_assert(marks > 0, "plot %s has nothing drawn", plots[i]);
    }
    cr_assert(strstr(dom, "<pre id=\"command\">peat run --plugin"), "the reproducing command");
    cr_assert(strstr(dom, "<table id=\"coverage\">") && strstr(dom, "<td>fc1</td><td>fwd</td>"),
              "the coverage table");

    runtime_plots_in_dom("FAIL");
    screenshot(url, "report.png");
    sh("cp %s %s/report.html", html, ARTIFACTS);
}

/* fi-report.html: a campaign, an FI series in both views: real tables that sort on a click,
 * outcome bars and per-bit curves, no console message. */
Test(browser, fi_report_html_renders_with_tables_and_plots)
{
    need_chromium();
    cr_assert_eq(sh("%s run --kernel gemm_new --iters 8 --calls 8 --no-runtime --no-probes "
                    "--quiet --out %s/f >%s/run.log 2>&1",
                    PEAT_TEST_BIN, tmpdir, tmpdir),
                 0, "the campaign passes");
    cr_assert_eq(sh("%s inject --campaign %s/f --model 'bitflip(bit=-1)' --trials 64 --threads 1 "
                    "--layer fc1 --quiet >%s/fi.log 2>&1",
                    PEAT_TEST_BIN, tmpdir, tmpdir),
                 0, "peat inject runs");
    char html[300], url[320];
    snprintf(html, sizeof html, "%s/f/fi-report.html", tmpdir);
    snprintf(url, sizeof url, "file://%s", html);
    static char src[1 << 21];
    slurp(html, src, sizeof src);
    cr_assert_eq(count_of(src, "src="), 0, "self-contained: no external resources");
    cr_assert_eq(count_of(src, "<pre"), 0, "tables, not a text dump");
    cr_assert_eq(chromium(url, NULL), 0, "chromium failed on fi-report.html:\n%s", log_buf);
    cr_assert_eq(console_lines(), 0, "fi-report.html logged to the console:\n%s", log_buf);
    cr_assert(strstr(dom, "<table class=\"sortable\">"), "no sortable table in the DOM");
    cr_assert(strstr(dom, "<td>kernel</td><td>gemm_new</td>"), "the kernel is named");
    cr_assert(strstr(dom, "--layer 'fc1'"), "the command reproducing the series");
    cr_assert(strstr(dom, "propagated view") && strstr(dom, "local view"), "both views");
    cr_assert(count_of(dom, "rates per bit</title>") >= 2, "per-bit curves of both views");
    cr_assert(strstr(dom, "outcomes, both views"), "outcome bars");
}

/* ctest shows a skipped test as skipped only from its exit status (SKIP_RETURN_CODE 77 in
 * CMakeLists.txt); Criterion itself exits 0 when tests skip. */
static size_t n_skipped;

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    n_skipped = stats->tests_skipped;
}

int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int rc = 0;
    if (criterion_handle_args(argc, argv, true)) rc = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return rc == 0 && n_skipped > 0 ? 77 : rc;
}
