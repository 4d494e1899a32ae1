/* cli/cmd_grammar.c: `tandem grammar`, the constrained-output front end on its own, for writing
 * and debugging grammars and schemas (as llama.cpp's json_schema_to_grammar.py and its grammar
 * checks).
 *
 *   tandem grammar --json-schema '{"type": "integer", "minimum": 1}'   -> the GBNF, on stdout
 *   tandem grammar --file g.gbnf                                        -> "ok: N rules"
 *   tandem grammar --file g.gbnf --text 'yes'                           -> whole match: exit 0, else 1
 *
 * Exit status: 0 (compiled; the text, if given, a whole match), 1 (it does not compile, or the
 * text is refused or only a prefix: the message says which byte), 2 (usage). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/fileio.h"
#include "text/grammar.h"
#include "text/json_schema.h"

static const char usage_text[] =
    "usage: tandem grammar (--json-schema SCHEMA | --json-schema-file F | --file F.gbnf) [--text T]\n"
    "  --json-schema S       print the GBNF grammar of a JSON Schema (text/json_schema.h)\n"
    "  --json-schema-file F  the same, the schema read from F\n"
    "  --file F.gbnf         compile a GBNF grammar (llama.cpp's dialect, root rule 'root')\n"
    "  --text T              check T against the grammar: exit 0 if it is a whole match, 1 if a\n"
    "                        byte is refused or T is only a prefix of one\n";

/* check: text against grammar g; 0 whole match, 1 not (message printed) */
static int check(const tm_grammar *g, const char *text)
{
    tm_err err = {0};
    tm_gmatch *m = NULL;
    if (tm_gmatch_new(&m, g, &err) != TM_OK) {
        fprintf(stderr, "tandem grammar: %s\n", err.msg);
        return 1;
    }
    size_t n = strlen(text), i = 0;
    int r = 1;
    for (; i < n && (r = tm_gmatch_feed(m, text + i, 1)) == 1; i++) {}
    int rc = 0;
    if (r < 0) fprintf(stderr, "tandem grammar: --text: the matcher failed at byte %zu (%s)\n", i, tm_status_str(r)), rc = 1;
    else if (i < n) fprintf(stderr, "tandem grammar: --text: byte %zu (0x%02x) is refused\n", i, (unsigned char)text[i]), rc = 1;
    else if (!tm_gmatch_accepting(m)) fprintf(stderr, "tandem grammar: --text: a prefix of a match, not a whole one\n"), rc = 1;
    else printf("match\n");
    tm_gmatch_free(m);
    return rc;
}

int cmd_grammar(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    const char *schema = NULL, *schema_file = NULL, *file = NULL, *text = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **dst = !strcmp(a, "--json-schema") ? &schema : !strcmp(a, "--json-schema-file") ? &schema_file
                         : !strcmp(a, "--file") ? &file : !strcmp(a, "--text") ? &text : NULL;
        if (!dst) {
            fprintf(stderr, "tandem grammar: unknown option '%s'\n%s", a, usage_text);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "tandem grammar: %s needs a value\n", a);
            return 2;
        }
        *dst = v;
        i++;
    }
    if (!!schema + !!schema_file + !!file != 1) {
        fprintf(stderr, "tandem grammar: give one of --json-schema, --json-schema-file, --file\n%s", usage_text);
        return 2;
    }
    tm_err err = {0};
    char *src = NULL, *gbnf = NULL;
    const char *path = schema_file ? schema_file : file;
    if (path && tm_read_file(path, &src, NULL, (size_t)16 << 20, &err) != TM_OK) {
        fprintf(stderr, "tandem grammar: %s\n", err.msg);
        return 1;
    }
    int rc = TM_OK;
    const char *schema_text = schema ? schema : schema_file ? src : NULL;
    if (schema_text) rc = tm_json_schema_gbnf(schema_text, strlen(schema_text), &gbnf, &err);
    const char *g_src = schema_text ? gbnf : src;
    tm_grammar *g = NULL;
    if (rc == TM_OK) rc = tm_grammar_parse(&g, g_src, strlen(g_src), &err);
    if (rc != TM_OK) fprintf(stderr, "tandem grammar: %s%s%s\n", file ? file : "", file ? ": " : "", err.msg);
    else if (text) rc = check(g, text);
    else if (schema_text) fputs(gbnf, stdout);
    else printf("ok\n");
    tm_grammar_free(g);
    free(gbnf);
    free(src);
    return rc ? 1 : 0;
}
