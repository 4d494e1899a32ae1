/* cli/cli.h: the `tandem` subcommands. Each cmd_*.c file defines one or more
 * `int cmd_<name>(int argc, char **argv)` (argv[0] is the command name) that
 * returns the process exit status: 0 success, 1 error (one line on stderr
 * naming the file and field), 2 usage error. Only cli/main.c calls exit(). */
#ifndef TM_CLI_H
#define TM_CLI_H

#define TANDEM_VERSION "0.1.0"

typedef struct cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;   /* one line for `tandem --help` */
} cli_command;

/* The command table lives in cli/main.c; add a line there for a new command. */
extern const cli_command cli_commands[];

/* cli_wants_help: true if argv holds -h or --help. */
int cli_wants_help(int argc, char **argv);

/* Command implementations (one line each, in table order). */
int cmd_version(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);   /* and cmd_detokenize: cli/cmd_tokenize.c */
int cmd_detokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);

/* cli_parse_route: "auto", "hybrid", "prefill-only", "decode-only" -> tandem_route; -1 if unknown. */
int cli_parse_route(const char *s, int *route);

#endif
