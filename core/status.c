/* status.c: the one error path: status names and the thread's last error message; GSL's errors
 * are routed into it. */
#include "core/check.h"
#include "peat/peat.h"

#include <gsl/gsl_errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_msg[512];
static _Thread_local char last_where[160];

static const char *const status_names[PEAT_STATUS_COUNT] = {
    [PEAT_OK] = "ok",
    [PEAT_ERR_INVAL] = "invalid argument",
    [PEAT_ERR_NOMEM] = "out of memory",
    [PEAT_ERR_IO] = "i/o error",
    [PEAT_ERR_FORMAT] = "bad file format",
    [PEAT_ERR_NOTFOUND] = "not found",
    [PEAT_ERR_SHAPE] = "shape mismatch",
    [PEAT_ERR_BACKEND] = "backend error",
    [PEAT_ERR_ABI] = "ABI mismatch",
    [PEAT_ERR_UNSUPPORTED] = "unsupported",
    [PEAT_ERR_NUMERIC] = "non-finite value",
    [PEAT_ERR_KERNEL] = "kernel failure",
    [PEAT_ERR_INTERNAL] = "internal error",
};

const char *peat_status_str(peat_status s)
{
    if ((int)s < 0 || s >= PEAT_STATUS_COUNT) return "unknown status";
    return status_names[s];
}

peat_status peat_error_set(peat_status code, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    const char *base = file ? strrchr(file, '/') : NULL;
    snprintf(last_where, sizeof last_where, "%s:%d", base ? base + 1 : (file ? file : "?"), line);
    return code;
}

const char *peat_error_last(void)
{
    return last_msg;
}
const char *peat_error_where(void)
{
    return last_where;
}
void peat_error_clear(void)
{
    last_msg[0] = 0;
    last_where[0] = 0;
}

/* GSL's default handler aborts the process on any error (a domain error in a special function, a
 * failed allocation): a library must report, not end its caller. This one records the error as
 * the thread's last (the GSL call then returns its error value) and lets the caller decide. */
static void gsl_error_to_peat(const char *reason, const char *file, int line, int gsl_errno)
{
    peat_status code = gsl_errno == GSL_ENOMEM                               ? PEAT_ERR_NOMEM
                       : gsl_errno == GSL_EINVAL || gsl_errno == GSL_EBADLEN ? PEAT_ERR_INVAL
                                                                             : PEAT_ERR_NUMERIC;
    peat_error_set(code, file, line, "GSL: %s (%s)", reason, gsl_strerror(gsl_errno));
}

static pthread_once_t core_once = PTHREAD_ONCE_INIT;

static void core_init_once(void)
{
    gsl_set_error_handler(gsl_error_to_peat);
}

void peat_core_init(void)
{
    pthread_once(&core_once, core_init_once);
}

void peat_assert_fail(const char *cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "peat: assertion failed: %s at %s:%d: ", cond, file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}
