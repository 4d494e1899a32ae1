/* text/reasoning.c: thinking apart from the answer (text/reasoning.h has the rules). */
#include "text/reasoning.h"

#include <string.h>

int tm_think_detect(const char *template_src)
{
    return template_src && strstr(template_src, TM_THINK_CLOSE) != NULL;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* the last occurrence of m [mlen] in s [len], or NULL */
static const char *last_of(const char *s, size_t len, const char *m, size_t mlen)
{
    for (size_t i = len >= mlen ? len - mlen + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, m, mlen)) return s + i;
    return NULL;
}

int tm_think_opened(const char *prompt, size_t len)
{
    const size_t ol = strlen(TM_THINK_OPEN), cl = strlen(TM_THINK_CLOSE);
    const char *o = last_of(prompt, len, TM_THINK_OPEN, ol), *c = last_of(prompt, len, TM_THINK_CLOSE, cl);
    if (!o || (c && c > o)) return 0;
    for (const char *p = o + ol; p < prompt + len; p++)
        if (!is_ws(*p)) return 0;
    return 1;
}

/* the length of the longest proper prefix of m that text [len] ends with */
static size_t partial_end(const char *text, size_t len, const char *m)
{
    size_t ml = strlen(m);
    for (size_t k = ml - 1 < len ? ml - 1 : len; k > 0; k--)
        if (!memcmp(text + len - k, m, k)) return k;
    return 0;
}

void tm_think_split(const char *text, size_t len, int opened, int final, tm_think_span *s)
{
    const size_t ol = strlen(TM_THINK_OPEN), cl = strlen(TM_THINK_CLOSE);
    size_t p = 0;
    while (p < len && is_ws(text[p])) p++;
    int starts = len - p >= ol && !memcmp(text + p, TM_THINK_OPEN, ol);
    if (!final && !starts && (p == len || !memcmp(text + p, TM_THINK_OPEN, len - p < ol ? len - p : ol))) {
        *s = (tm_think_span){0, 0, 0, 0}; /* blank so far, or a piece of "<think>": undecided */
        return;
    }
    if (!opened && !starts) {
        *s = (tm_think_span){0, 0, 0, len};
        return;
    }
    size_t r0 = starts ? p + ol : 0;
    while (r0 < len && text[r0] == '\n') r0++;
    const char *close = memmem(text + r0, len - r0, TM_THINK_CLOSE, strlen(TM_THINK_CLOSE));
    size_t r1 = close ? (size_t)(close - text) : len - (final ? 0 : partial_end(text + r0, len - r0, TM_THINK_CLOSE));
    size_t r1_trim = r1;
    while (r1_trim > r0 && text[r1_trim - 1] == '\n') r1_trim--;
    if (!close) { /* still thinking (or cut short, when final) */
        *s = (tm_think_span){r0, r1_trim, len, len};
        return;
    }
    size_t c0 = r1 + cl;
    while (c0 < len && is_ws(text[c0])) c0++;
    /* leading whitespace of the answer is held until the answer starts (or the reply ends) */
    *s = (tm_think_span){r0, r1_trim, c0, c0 == len && !final ? c0 : len};
}
