/* tests/toklog_util.h: a generation's text token by token, and llama.cpp's n_indent rule written out line
 * by line (test_sched's and test_serve_fim's checks of the code-completion limits). */
#ifndef TM_TESTS_TOKLOG_UTIL_H
#define TM_TESTS_TOKLOG_UTIL_H

#include <string.h>
#include <unistd.h>

#include "tandem.h"

/* a run's tokens: ends[i], the text's length once token i's text came (on_logprob counts the tokens,
 * on_text appends); with nap, on_logprob sleeps 2 ms a token (so any check after the first token's
 * text finds more than 1 ms gone) */
typedef struct tok_log {
    char text[4096];
    size_t len, ends[256];
    int n, nap;
} tok_log;

static inline int tl_token(void *ud, const tandem_logprob *lp)
{
    (void)lp;
    tok_log *g = ud;
    if (g->nap) usleep(2000);
    if (g->n < 256) g->ends[g->n] = g->len, g->n++;
    return 0;
}

static inline int tl_text(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)tok;
    tok_log *g = ud;
    if (g->len + len < sizeof g->text) memcpy(g->text + g->len, piece, len), g->len += len, g->text[g->len] = 0;
    if (g->n > 0 && g->n <= 256) g->ends[g->n - 1] = g->len;
    return 0;
}

/* llama.cpp's rule, line by line: the offset of the first character (past its spaces and tabs) of the
 * first line after a newline whose indentation is less than n, or -1 */
static inline long indent_cut(const char *t, size_t len, int n)
{
    for (const char *nl = memchr(t, '\n', len); nl;) {
        size_t p = (size_t)(nl - t) + 1, w = 0;
        while (p + w < len && (t[p + w] == ' ' || t[p + w] == '\t')) w++;
        if (p + w >= len) return -1;
        if ((int)w < n) return (long)(p + w);
        nl = memchr(t + p, '\n', len - p);
    }
    return -1;
}

#endif
