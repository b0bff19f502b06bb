/* commands.h: the `peat` commands, callable in a process that is not the `peat` executable (the
 * PyTorch bridge runs `peat run` inside Python through harness/pyapi). */
#ifndef PEAT_CLI_COMMANDS_H
#define PEAT_CLI_COMMANDS_H

/* Runs the command argv[1] with its arguments, as `peat ARGV[1] ...` does (argv[0] is the
 * program's name): prints what the command prints, returns its exit status (0 pass or warnings
 * only, 1 the kernel fails, 2 usage or input error). MPI, if any, is set up by the caller. */
int peat_cli_dispatch(int argc, char **argv);

#endif
