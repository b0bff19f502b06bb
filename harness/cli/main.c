/* main.c: the `peat` executable: the streams and limits checked before anything runs, MPI set up
 * under mpirun, then the command (harness/cli/commands.c). Exit 0 pass, 1 fail, 2 usage/input. */
#include "harness/cli/commands.h"
#include "harness/cli/limits.h"
#include "harness/cli/options.h"
#include "harness/scale/scale.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { EXIT_USAGE = 2 };

/* An exit with no verdict is never 0: a closed stdout or stderr is refused before anything runs
 * (a file opened later would take its descriptor and receive the report), and a failure to
 * write either (a full disk, /dev/full) ends in one line and exit 2. */
static int streams_closed(void)
{
    int err_ok = fcntl(2, F_GETFD) != -1, out_ok = fcntl(1, F_GETFD) != -1;
    if (out_ok && err_ok) return 0;
    int null = open("/dev/null", O_RDWR); /* keeps 1 and 2 from being taken by a file */
    if (null >= 0 && !out_ok) dup2(null, 1);
    if (null >= 0 && !err_ok) dup2(null, 2);
    if (err_ok)
        fprintf(stderr, "peat: error: stdout is closed: the verdict could not be written\n");
    return 1;
}

static int streams_flushed(int rc)
{
    errno = 0;
    int out_bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (out_bad && !e) {
        /* an earlier write failed (its buffer is gone, and errno with it): one more byte finds
         * the cause again (the stream is broken either way) */
        clearerr(stdout);
        errno = 0;
        if (fputc('\n', stdout) == EOF || fflush(stdout) != 0) e = errno;
    }
    if (!out_bad && fflush(stderr) == 0 && !ferror(stderr)) return rc;
    if (out_bad)
        fprintf(stderr, "peat: error: writing stdout failed: %s (exit %d withheld)\n",
                e ? strerror(e) : "write error", rc);
    return EXIT_USAGE;
}

/* Before any library's constructor (OpenBLAS's starts its threads there): ld.so runs the
 * executable's preinit array first (harness/cli/limits.c). */
static void preinit(int argc, char **argv, char **envp)
{
    peat_cli_limits_preinit(argc, argv, envp);
}
typedef void (*preinit_fn)(int, char **, char **);
__attribute__((section(".preinit_array"), used)) static const preinit_fn preinit_entry = preinit;

int main(int argc, char **argv)
{
    /* a file size limit (ulimit -f) is then a write error (EFBIG) that is reported, not a
     * signal that ends peat without a word */
    signal(SIGXFSZ, SIG_IGN);
    if (streams_closed()) return EXIT_USAGE;
    /* under ulimit -v, before OpenBLAS maps its buffer or a worker its guard regions: a limit
     * refused then would be a hang (OpenBLAS retries) or an error half-way through the run */
    if (argc > 1 && peat_cli_limits_check(argv[1])) return EXIT_USAGE;
    /* under mpirun (PEAT_MPI builds): every rank runs the command on its share of the items */
    if (peat_scale_mpi_init(&argc, &argv) != PEAT_OK) return peat_cli_die("%s", peat_error_last());
    int rc = streams_flushed(peat_cli_dispatch(argc, argv));
    peat_scale_mpi_finalize();
    return rc;
}
