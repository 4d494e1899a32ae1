/* cli/cli.h: the `tandem` subcommands. Each cmd_*.c file defines one or more
 * `int cmd_<name>(int argc, char **argv)` (argv[0] is the command name) that
 * returns the process exit status: 0 success, 1 error (one line on stderr
 * naming the file and field), 2 usage error. Only cli/main.c calls exit(). */
#ifndef TM_CLI_H
#define TM_CLI_H

#include "tandem.h"

#define TANDEM_VERSION TANDEM_VERSION_STRING

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
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);   /* and cmd_detokenize: cli/cmd_tokenize.c */
int cmd_detokenize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv); /* and cmd_kld: cli/cmd_quality.c */
int cmd_kld(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_grammar(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_embed(int argc, char **argv);

/* cli_parse_route: "auto", "hybrid", "prefill-only", "decode-only" -> tandem_route; -1 if unknown. */
int cli_parse_route(const char *s, int *route);
/* cli_parse_kv_dtype: "bf16", "f16", "int8" -> tandem_kv_dtype; -1 if unknown. */
int cli_parse_kv_dtype(const char *s, int *kv);

/* Generation and engine options shared by run, chat and bench (cli_opts.c). */
typedef struct cli_gen {
    tandem_request req;
    tandem_session_opts so;
    const char *stops[17];
    int n_stops;
    int temp_set, top_p_set, top_k_set;
} cli_gen;
extern const char cli_gen_usage[];
void cli_gen_init(cli_gen *g);
/* cli_gen_parse: if argv[*i] is a generation option, consume it (and its
 * value, advancing *i) and return 1; 0 if it is not one; -2 on a usage error
 * (message printed). */
int cli_gen_parse(cli_gen *g, const char *cmd, int argc, char **argv, int *i);
/* cli_can_generate: 1 if the model has an output head; else 0, with a one-line error from cmd naming
 * path (a base model's checkpoint, as an embedding model's: `tandem embed` takes it). */
int cli_can_generate(const char *cmd, const tandem_model *m, const char *path);
/* Sampling defaults from the model's generation_config, where not given. */
void cli_gen_model_defaults(cli_gen *g, const tandem_model *m);

#endif
