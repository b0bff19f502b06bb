/* cmdline.c: quoting and splitting the recorded command line, and resuming a campaign from it
 * (`peat run --resume DIR` alone continues with the options the campaign was started with). */
#include "harness/cli/cmdline.h"
#include "harness/cli/options.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

peat_status peat_cli_cmdline_join(int argc, char *const *argv, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        int plain = *w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789-_./=:,+@%") == strlen(w);
        if (len + 1 < n && i) buf[len++] = ' ';
        if (len + 1 < n && !plain) buf[len++] = '\'';
        for (const char *c = w; *c && len + 5 < n; c++) {
            if (*c == '\'' && !plain) { /* ' -> '\'' */
                memcpy(buf + len, "'\\''", 4);
                len += 4;
            } else
                buf[len++] = *c;
        }
        if (len + 1 < n && !plain) buf[len++] = '\'';
        buf[len < n ? len : n - 1] = 0;
        if (len + 5 >= n) return PEAT_ERROR(PEAT_ERR_INVAL, "command line longer than %zu", n - 5);
    }
    return PEAT_OK;
}

peat_status peat_cli_cmdline_split(const char *line, char **words, int max, int *n, char *store,
                                   size_t cap)
{
    size_t used = 0;
    *n = 0;
    const char *c = line;
    for (;;) {
        c += strspn(c, " ");
        if (!*c) return PEAT_OK;
        if (*n == max) return PEAT_ERROR(PEAT_ERR_INVAL, "more than %d words in '%s'", max, line);
        words[(*n)++] = store + used;
        for (; *c && *c != ' '; c++) {
            if (*c == '\\' && c[1] == '\'') { /* the '\'' of a quoted quote */
                c++;
            } else if (*c == '\'') {
                const char *end = strchr(c + 1, '\'');
                if (!end) return PEAT_ERROR(PEAT_ERR_FORMAT, "unbalanced quote in '%s'", line);
                if (used + (size_t)(end - c) + 1 >= cap)
                    return PEAT_ERROR(PEAT_ERR_INVAL, "command line too long");
                memcpy(store + used, c + 1, (size_t)(end - c - 1));
                used += (size_t)(end - c - 1);
                c = end;
                continue;
            }
            if (used + 2 >= cap) return PEAT_ERROR(PEAT_ERR_INVAL, "command line too long");
            store[used++] = *c;
        }
        store[used++] = 0;
    }
}

/* Whether a `peat run` option takes no value (the option table says). */
static int is_flag(const char *opt)
{
    const peat_cli_opt *o = peat_cli_find(&peat_cli_run, opt);
    return o && o->kind == PEAT_CLI_FLAG;
}

/* The option name and value of argv[*i] ("--opt V", "--opt=V" or a flag); advances *i. */
static void option_at(int argc, char **argv, int *i, char *name, size_t n, const char **val)
{
    const char *a = argv[*i], *eq = strchr(a, '=');
    *val = NULL;
    if (eq) {
        snprintf(name, n, "%.*s", (int)(eq - a), a);
        *val = eq + 1;
        return;
    }
    snprintf(name, n, "%s", a);
    if (!is_flag(a) && !strncmp(a, "--", 2) && *i + 1 < argc) *val = argv[++*i];
}

/* The value the recorded words give option `name` (its last occurrence); 0 if absent. */
static int recorded_value(int n, char **w, const char *name, const char **val)
{
    int found = 0;
    char nm[64];
    for (int i = 0; i < n; i++) {
        const char *v;
        option_at(n, w, &i, nm, sizeof nm, &v);
        if (!strcmp(nm, name)) found = 1, *val = v;
    }
    return found;
}

static int may_differ(const char *name)
{
    return !strcmp(name, "--quiet") || !strcmp(name, "--json") || !strcmp(name, "--timeout") ||
           !strcmp(name, "--no-isolate") || !strcmp(name, "--hang-policy");
}

/* Reads the recorded command line of the unfinished campaign in dir. */
static peat_status recorded_line(const char *dir, char *line, size_t n)
{
    char partial[600], done[600];
    snprintf(partial, sizeof partial, "%s/campaign.h5.partial", dir);
    snprintf(done, sizeof done, "%s/campaign.h5", dir);
    if (access(partial, F_OK) != 0)
        return access(done, F_OK) == 0
                   ? PEAT_ERROR(PEAT_ERR_INVAL, "--resume: %s is finished: nothing to continue",
                                done)
                   : PEAT_ERROR(PEAT_ERR_NOTFOUND, "--resume: no unfinished campaign in %s", dir);
    peat_store_t *s = NULL;
    peat_store_meta m;
    PEAT_TRY(peat_store_open(partial, 0, &s));
    peat_status st = peat_store_meta_get(s, &m);
    peat_store_close(s);
    PEAT_TRY(st);
    if (strncmp(m.argv, "peat", 4) && !strstr(m.argv, " run "))
        return PEAT_ERROR(PEAT_ERR_FORMAT, "--resume: %s records no command line to continue from",
                          partial);
    snprintf(line, n, "%s", m.argv);
    return PEAT_OK;
}

/* Appends the recorded options (after the program and `run`), less those naming where and how
 * the run starts (--out, --force, --resume). */
static int keep_recorded(int nw, char **w, char **out, int max)
{
    int k = 0;
    for (int i = 2; i < nw && k + 1 < max; i++) {
        char nm[64];
        const char *v;
        int at = i;
        option_at(nw, w, &i, nm, sizeof nm, &v);
        if (!strcmp(nm, "--out") || !strcmp(nm, "--force") || !strcmp(nm, "--resume")) continue;
        for (int j = at; j <= i && k < max; j++) out[k++] = w[j];
    }
    return k;
}

peat_status peat_cli_cmdline_resume(const char *dir, int argc, char **argv, int *out_argc,
                                    char **out_argv, int max, char *store, size_t cap,
                                    char *recorded, size_t recorded_n)
{
    char *w[PEAT_CMDLINE_MAX_ARGS];
    int nw;
    PEAT_TRY(recorded_line(dir, recorded, recorded_n));
    PEAT_TRY(peat_cli_cmdline_split(recorded, w, PEAT_CMDLINE_MAX_ARGS, &nw, store, cap));
    for (int i = 0; i < argc; i++) {
        char nm[64];
        const char *v, *rv = NULL;
        option_at(argc, argv, &i, nm, sizeof nm, &v);
        if (may_differ(nm)) continue;
        int had = recorded_value(nw, w, nm, &rv);
        if (!had || (v && (!rv || strcmp(v, rv))))
            return PEAT_ERROR(
                PEAT_ERR_INVAL,
                "%s%s%s contradicts the interrupted campaign in %s (started %s%s%s%s); "
                "`peat run --resume %s` alone continues it",
                nm, v ? " " : "", v ? v : "", dir, had ? "with " : "without ", nm, rv ? " " : "",
                rv ? rv : "", dir);
    }
    int k = keep_recorded(nw, w, out_argv, max - argc - 3);
    out_argv[k++] = "--resume";
    out_argv[k++] = "--out";
    out_argv[k++] = (char *)dir;
    for (int i = 0; i < argc && k < max; i++) out_argv[k++] = argv[i];
    *out_argc = k;
    return PEAT_OK;
}

peat_status peat_cli_cmdline_run_opts(const char *line, struct peat_campaign_opts *o, char *store,
                                      size_t cap)
{
    char *words[PEAT_CMDLINE_MAX_ARGS];
    int n = 0;
    peat_campaign_opts_default(o);
    PEAT_TRY(peat_cli_cmdline_split(line, words, PEAT_CMDLINE_MAX_ARGS, &n, store, cap));
    return peat_cli_parse(&peat_cli_run, n, words, o);
}
