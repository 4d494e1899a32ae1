/* fuzz/fuzz_grammar.c: GBNF grammars (text/grammar.h) and their matcher on arbitrary bytes.
 * Input: a grammar, a NUL byte, then the text fed to its matcher (no NUL: all grammar, no
 * text). Checked invariants: the parser either compiles or refuses with a message; the matcher
 * never crashes; tm_gmatch_would_take agrees with tm_gmatch_feed byte by byte; a refused byte
 * leaves the matcher as it was (the same byte refused again, accepting unchanged); a matcher
 * rebuilt every few configurations answers as one that keeps its tables. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const uint8_t *text = nul ? nul + 1 : data + size;
    size_t tlen = nul ? size - glen - 1 : 0;
    tm_grammar *g = NULL;
    tm_err err = {0};
    if (tm_grammar_parse(&g, (const char *)data, glen, &err) != TM_OK) {
        if (g || !err.msg[0]) __builtin_trap();
        return 0;
    }
    tm_gmatch *a = NULL, *b = NULL;
    if (tm_gmatch_new(&a, g, &err) != TM_OK || tm_gmatch_new(&b, g, &err) != TM_OK) {
        tm_gmatch_free(a);
        tm_grammar_free(g);
        return 0;
    }
    tm_gmatch_set_limit(b, 2);
    for (size_t i = 0; i < tlen && i < 4096; i++) {
        int w = tm_gmatch_would_take(a, text + i, 1), acc = tm_gmatch_accepting(a);
        int fa = tm_gmatch_feed(a, text + i, 1), fb = tm_gmatch_feed(b, text + i, 1);
        if (fa < 0 || fb < 0) break; /* out of memory or past the tables' hard bound */
        if (w != fa || fa != fb) __builtin_trap();
        if (tm_gmatch_accepting(a) != tm_gmatch_accepting(b)) __builtin_trap();
        if (!fa) {
            if (tm_gmatch_accepting(a) != acc || tm_gmatch_feed(a, text + i, 1) != 0) __builtin_trap();
            break;
        }
    }
    tm_gmatch_free(a);
    tm_gmatch_free(b);
    tm_grammar_free(g);
    return 0;
}
