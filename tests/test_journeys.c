/* test_journeys.c: what a new user sees on the way through README.md: report.html holds the
 * terminal's tables (probes, arithmetic properties, strata, runtime runs), its runtime plots an
 * iteration axis and a visible band; one rms definition; one finding per class; the CLI's
 * labels (diff of different kernels, predict's params, the zoo matrix, help, list, errors,
 * inspect of a directory); the campaign file's names and exact outputs through h5py. */
#include "cli_run.h"
#include "harness/run/calibrate.h"

#include <math.h>

static char html[1 << 20], text[1 << 17];

static void setup(void)
{
    tmpdir_make("journeys");
}

TestSuite(journeys, .init = setup, .fini = tmpdir_remove, .timeout = 600);

/* The text between the first `open` at or after s and the next `close` (NULL if none). */
static const char *section(const char *s, const char *open, const char *close, char *buf, size_t n)
{
    const char *a = strstr(s, open), *b = a ? strstr(a, close) : NULL;
    if (!a || !b) return NULL;
    size_t len = (size_t)(b - a) < n - 1 ? (size_t)(b - a) : n - 1;
    memcpy(buf, a, len);
    buf[len] = 0;
    return buf;
}

/* The cells of the r-th data row (r >= 1; row 0 is the header) of an HTML table, tags removed,
 * joined by '|'; 0 when the table has no such row. */
static int table_row(const char *table, int r, char *buf, size_t n)
{
    const char *p = table;
    for (int i = 0; i <= r; i++) {
        p = strstr(p, "<tr>");
        if (!p) return 0;
        p += 4;
    }
    const char *end = strstr(p, "</tr>");
    size_t k = 0;
    int in_tag = 0, cell = 0;
    for (; p < end && k + 2 < n; p++) {
        if (*p == '<') {
            in_tag = 1;
            if (!strncmp(p, "<td", 3) && cell++) buf[k++] = '|';
        } else if (*p == '>')
            in_tag = 0;
        else if (!in_tag && *p == '&') { /* the entities peat_report_escape writes */
            static const char *const ent[][2] = {
                {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}, {"&quot;", "\""}};
            int e = 0;
            while (e < 4 && strncmp(p, ent[e][0], strlen(ent[e][0]))) e++;
            buf[k++] = e < 4 ? ent[e][1][0] : '&';
            if (e < 4) p += strlen(ent[e][0]) - 1;
        } else if (!in_tag)
            buf[k++] = *p;
    }
    buf[k] = 0;
    return 1;
}

/* Collapses runs of spaces, and trims. */
static void squeeze(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++)
        if (*r != ' ' || (w > s && w[-1] != ' ')) *w++ = *r;
    while (w > s && w[-1] == ' ') w--;
    *w = 0;
}

/* A default run: every probe line and every property line the terminal prints is a row of
 * report.html's probe or property table, with the same finding, verdict and values. */
Test(journeys, report_html_holds_the_terminal_probe_and_property_tables)
{
    cr_assert_eq(peat("run --kernel gemm_new --out %s/d", tmpdir), 0, "%s", err_buf);
    static char term[1 << 16];
    memcpy(term, out_buf, sizeof term);
    char p[400];
    snprintf(p, sizeof p, "%s/d/report.html", tmpdir);
    slurp(p, html, sizeof html);
    static char probes[1 << 16], props[1 << 14];
    cr_assert_not_null(section(html, "<table id=\"probes\">", "</table>", probes, sizeof probes),
                       "report.html has no probe table");
    cr_assert_not_null(section(html, "<table id=\"properties\">", "</table>", props, sizeof props),
                       "report.html has no property table");
    /* the terminal's probe lines: label (58 columns), finding, verdict */
    const char *t = strstr(term, "\nprobe ");
    cr_assert_not_null(t, "the terminal shows no probe table:\n%s", term);
    t = strchr(t + 1, '\n') + 1;
    int n_probes = 0;
    for (; *t && *t != '\n'; t = strchr(t, '\n') + 1, n_probes++) {
        char label[64], fnd[32], verdict[8], row[512], want[600];
        cr_assert_eq(sscanf(t + 59, "%31s %7s", fnd, verdict), 2);
        snprintf(label, sizeof label, "%.58s", t);
        squeeze(label);
        cr_assert(table_row(probes, n_probes + 1, row, sizeof row), "probe row %d missing (%s)",
                  n_probes + 1, label);
        snprintf(want, sizeof want, "%s|%s", label, fnd);
        cr_assert(!strncmp(row, want, strlen(want)), "probe row %d is '%s', terminal '%s %s'",
                  n_probes + 1, row, want, verdict);
        cr_assert(strstr(row, verdict) != NULL, "probe row '%s' lacks verdict %s", row, verdict);
    }
    cr_assert_geq(n_probes, 20, "a default GEMM run probes 20+ cases (%d)", n_probes);
    cr_assert(!table_row(probes, n_probes + 1, text, sizeof text), "more HTML probe rows");
    /* the property lines: name (58 columns), candidate value (18), golden value */
    t = strstr(term, "\narithmetic property");
    cr_assert_not_null(t, "no property table in the terminal");
    t = strchr(t + 1, '\n') + 1;
    int n_props = 0;
    for (; *t && *t != '\n'; t = strchr(t, '\n') + 1, n_props++) {
        char name[64], vc[24], vg[64], row[512], want[200];
        snprintf(name, sizeof name, "%.58s", t);
        snprintf(vc, sizeof vc, "%.18s", t + 59);
        sscanf(t + 78, "%63[^\n]", vg);
        squeeze(name), squeeze(vc), squeeze(vg);
        cr_assert(table_row(props, n_props + 1, row, sizeof row), "property %s missing", name);
        snprintf(want, sizeof want, "%s|%s|%s", name, vc, vg);
        cr_assert_str_eq(row, want, "property row '%s' differs from the terminal's '%s'", row,
                         want);
    }
    cr_assert_geq(n_props, 5, "the GEMM property table has its rows (%d)", n_props);
    cr_assert(strstr(html, "<table id=\"strata\">") && strstr(html, "8 of 8 strata recorded"),
              "the terminal's coverage line and its strata are in report.html");
    cr_assert(strstr(html, "<table id=\"runtime\">") && strstr(html, "TRAINING_EQUIVALENT"),
              "the runtime FI table is in report.html");
    cr_assert(strstr(html, "id=\"read-note\"") && strstr(html, "near zero"),
              "the how-to-read note explains max ULP and relative error near zero");
}

/* The runtime plots: ticks and an "iteration" label on the x axis, and a band polygon at least
 * 5 px tall at every iteration (honest reorderings make it far thinner in loss units). */
Test(journeys, runtime_plots_have_an_iteration_axis_and_a_visible_band)
{
    cr_assert_eq(peat("run --kernel gemm_new --iters 40 --calls 16 --quiet --out %s/r", tmpdir), 0,
                 "%s", err_buf);
    char p[400];
    snprintf(p, sizeof p, "%s/r/report.html", tmpdir);
    slurp(p, html, sizeof html);
    const char *rt = strstr(html, "<h2>Runtime FI");
    cr_assert_not_null(rt, "no runtime section");
    int plots = 0;
    for (const char *s = strstr(rt, "<svg "); s; s = strstr(s + 1, "<svg ")) {
        const char *end = strstr(s, "</svg>");
        const char *band = strstr(s, "class=\"band\"");
        if (!band || band > end) break;
        plots++;
        const char *x = strstr(s, "class=\"xlabel\"");
        cr_assert(x && x < end && !strncmp(strchr(x, '>') + 1, "iteration<", 10),
                  "runtime plot %d has no iteration axis label", plots);
        const char *tick = strstr(s, "class=\"l\">0</text>");
        cr_assert(tick && tick < end, "runtime plot %d has no tick at iteration 0", plots);
        /* the polygon: n top points left to right, then n bottom points right to left */
        const char *pts = strstr(band, "points=\"") + 8;
        double xy[2 * 2 * 40];
        int n = 0, used;
        while (n < 160 && sscanf(pts, "%lf,%lf %n", &xy[n], &xy[n + 1], &used) == 2)
            n += 2, pts += used;
        cr_assert_eq(n, 160, "the band has a point per iteration top and bottom (%d)", n / 2);
        for (int i = 0; i < 40; i++) {
            double top = xy[2 * i + 1], bottom = xy[2 * (79 - i) + 1];
            cr_assert_geq(bottom - top, 4.99, "band %.2f px tall at iteration %d of plot %d",
                          bottom - top, i, plots);
        }
    }
    cr_assert_eq(plots, 2, "loss and weight-distance plots, each with its band (%d)", plots);
}

/* The terminal's "rms vs gold" is the ratio the evidence quotes; a property finding and a
 * recorded-call finding of one class are one finding; different kernels are labelled in diff. */
Test(journeys, one_rms_one_finding_per_class_and_labelled_diffs)
{
    cr_assert_eq(
        peat("run --kernel gemm_new --iters 40 --calls 16 --no-runtime --out %s/a", tmpdir), 0,
        "%s", err_buf);
    double col = NAN, ev = NAN;
    const char *row = strstr(out_buf, "\ngemm_new ");
    cr_assert_not_null(row);
    char x[16];
    cr_assert_eq(sscanf(row, " gemm_new %*d %*d %*g %lf%15s", &col, x), 2, "%s", row);
    const char *e = strstr(out_buf, "rms error ");
    cr_assert(e && sscanf(e, "rms error %lfx golden's", &ev) == 1, "%s", out_buf);
    cr_assert(fabs(col - ev) <= 0.006 * fmax(1, col), "table rms %.3g vs evidence rms %.3g", col,
              ev);

    cr_assert_eq(
        peat("run --kernel gemm_bf16 --iters 40 --calls 16 --no-runtime --out %s/b", tmpdir), 0,
        "%s", err_buf);
    char p[400];
    snprintf(p, sizeof p, "%s/b/signature.json", tmpdir);
    slurp(p, text, sizeof text);
    char *end = strstr(text, "\"candidate\":");
    cr_assert_not_null(end);
    *end = 0;
    int n = 0;
    for (const char *s = text; (s = strstr(s, "\"REDUCED_PRECISION\"")); s++) n++;
    cr_assert_eq(n, 1, "gemm_bf16 has one REDUCED_PRECISION finding, not %d", n);

    cr_assert_eq(peat("diff %s/a %s/b", tmpdir, tmpdir), 1, "PASS -> WARN is a regression: %s",
                 out_buf);
    cr_assert(strstr(out_buf, "gemm_new/mlp/cpu -> gemm_bf16/mlp/cpu:"), "%s", out_buf);
    cr_assert(strstr(out_buf, "different kernels compared (gemm_new, gemm_bf16)"), "%s", out_buf);
}

/* Runs started in the same second without --out get folders of their own (the second run once
 * found the first's finished campaign and refused): three at once, all exit 0, three folders. */
Test(journeys, default_folders_of_one_second_are_distinct)
{
    cr_assert_eq(sh("cd %s && mkdir same && cd same && r='%s run --kernel gemm_new --iters 4 "
                    "--calls 4 --no-runtime --no-probes --quiet'; $r & a=$!; $r & b=$!; $r & c=$!; "
                    "wait $a && wait $b && wait $c",
                    tmpdir, PEAT_TEST_BIN),
                 0, "a run failed: %s", err_buf);
    cr_assert_eq(sh("test $(ls -d %s/same/peat-out/gemm_new-mlp-cpu-* | wc -l) = 3", tmpdir), 0,
                 "three runs, three folders");
}

/* summary.md counts calls as the terminal does (attention has two outputs per call), and the
 * default output folder names the backend. */
Test(journeys, summary_calls_and_default_folder)
{
    cr_assert_eq(sh("cd %s && %s run --kernel attention_flash --flow gpt --iters 4 --calls 8 "
                    "--no-runtime --no-probes",
                    tmpdir, PEAT_TEST_BIN),
                 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "\nattention_flash         8 "), "8 calls in the terminal:\n%s",
              out_buf);
    cr_assert_eq(sh("ls -d %s/peat-out/attention_flash-gpt-cpu-*", tmpdir), 0,
                 "the default folder is <kernel>-<flow>-<backend>-<time>: %s", err_buf);
    char p[600];
    snprintf(p, sizeof p, "%.*s/summary.md", (int)strcspn(out_buf, "\n"), out_buf);
    slurp(p, text, sizeof text);
    cr_assert(strstr(text, "| calls / elements | 8 / "), "summary.md counts 8 calls:\n%.400s",
              text);
    snprintf(p, sizeof p, "%.*s/signature.json", (int)strcspn(out_buf, "\n"), out_buf);
    slurp(p, text, sizeof text);
    cr_assert(strstr(text, "\"device\": \"cpu"), "signature.json names the device");
}

/* The CLI's labels: help's command column, list's columns on every backend, the unknown-kernel
 * error with backends, predict's params header, inspect of a directory. */
Test(journeys, cli_labels)
{
    cr_assert_eq(peat("help"), 0);
    cr_assert(strstr(out_buf, "  calibrate-latency   time every kernel"), "%s", out_buf);
    cr_assert_eq(peat("list"), 0);
    long in_col = -1;
    for (const char *l = out_buf; (l = strstr(l, "\n    ")); l++) {
        const char *in = strstr(l, " in f");
        const char *nl = strchr(l + 1, '\n');
        if (!in || (nl && in > nl)) continue;
        if (in_col < 0) in_col = in - l;
        cr_assert_eq(in - l, in_col, "list's dtype column moves: %.90s", l + 1);
    }
    cr_assert_eq(peat("run --kernel no_such_kernel"), 2);
    cr_assert(strstr(err_buf, "gemm_new (cpu"), "candidates listed with backends: %s", err_buf);
    cr_assert_eq(peat("predict --kernel gemm_new --flow mlp"), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "phase transA,transB,M,N,K,batch"), "%s", out_buf);
    cr_assert_eq(peat("run --kernel gemm_new --iters 4 --calls 2 --no-runtime --no-probes --quiet "
                      "--out %s/i",
                      tmpdir),
                 0, "%s", err_buf);
    cr_assert_eq(peat("inspect %s/i", tmpdir), 0, "a campaign directory: %s", err_buf);
    cr_assert(strstr(out_buf, "accuracy not measured per iteration"), "%s", out_buf);
    cr_assert(!strstr(out_buf, "nan"), "inspect prints no nan:\n%s", out_buf);
    cr_assert_eq(peat("inspect %s", tmpdir), 2);
    cr_assert(strstr(err_buf, "holds no campaign"), "%s", err_buf);
}

/* The zoo matrix's column heads are distinct, and its legend spells each out. */
Test(journeys, zoo_matrix_heads_are_distinct)
{
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    peat_run_calibrate_zoo_print(f, NULL, 0);
    rewind(f);
    size_t k = fread(text, 1, sizeof text - 1, f);
    text[k] = 0;
    fclose(f);
    char *head = strstr(text, "\n                  ");
    cr_assert_not_null(head, "%s", text);
    char heads[PEAT_FIND_COUNT + 1][8];
    int n = 0, used;
    for (const char *s = head; n <= PEAT_FIND_COUNT && sscanf(s, "%7s%n", heads[n], &used) == 1 &&
                               strcmp(heads[n], "columns:") != 0;
         s += used)
        n++;
    cr_assert_geq(n, PEAT_FIND_COUNT, "a head per class (%d)", n);
    for (int i = 0; i < PEAT_FIND_COUNT; i++)
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(heads[i], heads[j], "columns %d and %d are both %s", j, i, heads[i]);
    cr_assert(strstr(text, "OOB = OUT_OF_BOUND") && strstr(text, "OOBW = OUT_OF_BOUNDS_WRITE"),
              "%s", text);
}

/* --record-ops all keeps --calls for the kernel's op; --record-exact stores exact outputs that
 * h5py reads by name; /fi and /runtime describe themselves. */
Test(journeys, record_options_and_h5py)
{
    cr_assert_eq(peat("run --kernel gemm_new --iters 20 --calls 8 --record-ops all --no-runtime "
                      "--no-probes --out %s/all",
                      tmpdir),
                 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "\ngemm_new                8 "), "8 gemm calls replayed:\n%s",
              out_buf);
    if (system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0)
        cr_skip_test("h5py is not installed");
    cr_assert_eq(peat("run --kernel gemm_new --iters 20 --calls 8 --record-exact --no-probes "
                      "--out %s/x",
                      tmpdir),
                 0, "%s", err_buf);
    cr_assert_eq(peat("inject --campaign %s/x --model 'bitflip(bit=-1)' --trials 20", tmpdir), 0,
                 "%s", err_buf);
    char script[1400];
    snprintf(script, sizeof script,
             "import h5py\n"
             "f = h5py.File('%s/x/campaign.h5', 'r')\n"
             "C, T = f['/calls/index'], f['/tensors/index']\n"
             "ops = {v: k for k, v in h5py.check_enum_dtype(C.dtype['op']).items()}\n"
             "dts = {v: k for k, v in h5py.check_enum_dtype(T.dtype['dtype']).items()}\n"
             "c = C[0]\n"
             "e, g = T[c['exact'][0]], T[c['golden'][0]]\n"
             "print(ops[c['op']], dts[e['dtype']], dts[g['dtype']], e['numel'] == g['numel'])\n"
             "d = lambda g: str(f[g].attrs['description'])\n"
             "print('fi' if 'playback' in d('/fi') else 'no fi')\n"
             "print('runtime' if 'runtime' in d('/runtime') else 'no rt')\n",
             tmpdir);
    char sp[400];
    snprintf(sp, sizeof sp, "%s/h.py", tmpdir);
    FILE *f = fopen(sp, "w");
    cr_assert_not_null(f);
    fputs(script, f);
    fclose(f);
    cr_assert_eq(sh("/usr/bin/python3 %s", sp), 0, "%s", err_buf);
    cr_assert(strstr(out_buf, "gemm f64 f32 True\n"),
              "h5py names the op and dtypes and finds the stored exact output: %s", out_buf);
    cr_assert(strstr(out_buf, "fi\nruntime\n"), "/fi and /runtime describe themselves: %s",
              out_buf);
}

/* docs/hdf5-schema.md's op-code table is the enumeration the store writes. */
Test(journeys, hdf5_schema_doc_lists_every_op_code)
{
    slurp(PEAT_TEST_SOURCE_DIR "/docs/hdf5-schema.md", text, sizeof text);
    const char *t = strstr(text, "| code | op | code | op |");
    cr_assert_not_null(t, "docs/hdf5-schema.md has no op-code table");
    int seen[PEAT_OP_COUNT] = {0}, n = 0;
    for (const char *l = strchr(t, '\n') + 1; *l == '|'; l = strchr(l, '\n') + 1) {
        const char *c = l;
        int code, used;
        char name[40];
        while (sscanf(c, "| %d | `%39[^`]` %n", &code, name, &used) == 2) {
            cr_assert(code >= 0 && code < PEAT_OP_COUNT, "op code %d out of range", code);
            cr_assert_str_eq(name, peat_op_name((peat_op_kind)code), "op code %d is %s, not %s",
                             code, peat_op_name((peat_op_kind)code), name);
            n += !seen[code]++;
            c += used;
        }
    }
    cr_assert_eq(n, PEAT_OP_COUNT, "the table lists %d of %d op codes", n, PEAT_OP_COUNT);
}
