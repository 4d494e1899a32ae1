/* fuzz/fuzz_json_schema.c: JSON Schema -> GBNF (text/json_schema.h) on arbitrary bytes.
 * Input: a schema's text. Checked invariants: the converter never crashes (ASan/UBSan), never
 * leaks, and sets its output only when it succeeds; every grammar it returns compiles with
 * tm_grammar_parse (no undefined rule, no left recursion, within the element and repetition
 * bounds), and a matcher starts on it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"
#include "text/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *gbnf = (char *)1;
    tm_err err = {0};
    int rc = tm_json_schema_gbnf((const char *)data, size, &gbnf, &err);
    if (rc != TM_OK) {
        if (gbnf || rc > 0 || strncmp(err.msg, "json schema: ", 13)) __builtin_trap();
        return 0;
    }
    if (!gbnf) __builtin_trap();
    tm_grammar *g = NULL;
    if (tm_grammar_parse(&g, gbnf, strlen(gbnf), &err) != TM_OK) __builtin_trap();
    tm_gmatch *m = NULL;
    if (tm_gmatch_new(&m, g, &err) != TM_OK) __builtin_trap();
    tm_gmatch_free(m);
    tm_grammar_free(g);
    free(gbnf);
    return 0;
}
