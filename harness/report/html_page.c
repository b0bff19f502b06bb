/* html_page.c: the one HTML page writer of PEAT's reports (report.html of `peat run`, the suite
 * page of `peat ci`, fi-report.html of `peat inject`): the head with the one stylesheet, the body
 * tagged with its page ("run", "suite", "fi") for the few rules one page alone needs, the end. */
#include "harness/report/report.h"

/* Every page's rules; the body's class scopes those that differ (table alignment, widths, the
 * plots' labels). */
static const char stylesheet[] =
    "body{font:14px sans-serif;margin:2em auto;color:#222}body.run{max-width:900px}"
    "body.suite{max-width:1100px}body.fi{max-width:960px}"
    "#verdict{padding:10px 16px;border-radius:6px;color:#fff;font-size:20px}"
    ".v{padding:1px 6px;border-radius:3px;color:#fff}.PASS{background:#2a7}"
    ".WARN{background:#d90}.FAIL,.ERROR{background:#c33}.SKIP{background:#888}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}"
    ".run td,.run th,.fi td,.fi th{text-align:right}"
    ".run td:first-child,.fi td:first-child{text-align:left}"
    ".fi table{margin:1em 0;font-size:12px}.fi td,.fi th{padding:2px 6px}"
    ".fi th{cursor:pointer;background:#f3f3f3}caption{text-align:left;font-size:12px}"
    "code{font-size:12px}.t{font-weight:bold;font-size:13px}"
    ".l{font-size:10px;text-anchor:middle}.fi .l{font-size:11px;text-anchor:start}"
    ".y{font-size:10px}.ax{stroke:#888}.fi .ax{stroke:#444}"
    ".s0{fill:#36c}.s1{fill:#bbb}.k0{fill:#36c;font-size:11px}.k1{fill:#888;font-size:11px}"
    ".c{fill:none;stroke:#36c;stroke-width:1.5}li{margin:2px 0}.note{background:#fff8e0;"
    "padding:6px 10px;border-left:4px solid #d90}.plot{display:block;margin:12px 0}"
    "pre{background:#f4f4f4;padding:8px;white-space:pre-wrap}";

void peat_report_html_begin(FILE *f, const char *page, const char *title, const char *name)
{
    fputs("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>", f);
    peat_report_escape(f, title);
    if (name) peat_report_escape(f, name);
    fprintf(f, "</title><style>%s</style></head><body class=\"%s\">\n", stylesheet, page);
}

void peat_report_html_end(FILE *f)
{
    fputs("</body></html>\n", f);
}
