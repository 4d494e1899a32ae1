/* cli/main.c: `tandem COMMAND ...` dispatch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const cli_command cli_commands[] = {
    /* name        function      summary */
    {"run", cmd_run, "generate text from a prompt (hybrid prefill/decode by default)"},
    {"chat", cmd_chat, "interactive multi-turn chat (the model's chat template, or --template)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (completions, chat, streaming)"},
    {"bench", cmd_bench, "measure speed (JSON, markdown, SVG), side by side with llama.cpp"},
    {"convert", cmd_convert, "convert a Hugging Face model directory into a package (.tdm)"},
    {"inspect", cmd_inspect, "describe a package (.tdm); --verify checks every checksum"},
    {"embed", cmd_embed, "embeddings of texts (the pooled final hidden states), as /v1/embeddings answers"},
    {"logits", cmd_logits, "reference float32 logits of token ids (for testing engines)"},
    {"synth", cmd_synth, "write a synthetic HF model with a real architecture's shapes"},
    {"tokenize", cmd_tokenize, "text -> token ids (JSON array) with a model's tokenizer.json"},
    {"detokenize", cmd_detokenize, "token ids -> text with a model's tokenizer.json"},
    {"template", cmd_template, "render a chat template for messages (as apply_chat_template)"},
    {"grammar", cmd_grammar, "a JSON Schema's GBNF grammar; compile a grammar, check a text against it"},
    {"calibrate", cmd_calibrate, "measure every route here and cache the router's cost model"},
    {"devices", cmd_devices, "CPU features, kernel variants per op, measured GEMV/GEMM peaks"},
    {"perplexity", cmd_perplexity, "perplexity, KL and top-1 vs fp32 per (prefill, decode) encoding pair"},
    {"kld", cmd_kld, "KL divergence and top-1 agreement vs fp32 per encoding pair (--all: the table)"},
    {"version", cmd_version, "print the version"},
    {NULL, NULL, NULL},
};

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
    return 0;
}

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tandem %s\n", TANDEM_VERSION);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "tandem %s: hybrid prefill/decode LLM inference\n\n"
               "usage: tandem COMMAND [options]   (tandem COMMAND --help for details)\n\n"
               "commands:\n", TANDEM_VERSION);
    for (const cli_command *c = cli_commands; c->name; c++)
        fprintf(f, "  %-12s %s\n", c->name, c->summary);
    fprintf(f, "\nMODEL is a package file (.tdm) or a Hugging Face model directory.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) return cmd_version(argc - 1, argv + 1);
    for (const cli_command *c = cli_commands; c->name; c++)
        if (strcmp(c->name, argv[1]) == 0) exit(c->fn(argc - 1, argv + 1));
    fprintf(stderr, "tandem: unknown command '%s' (see tandem --help)\n", argv[1]);
    return 2;
}
