/* text/reasoning.c: thinking apart from the answer (text/reasoning.h has the rules). */
#include "text/reasoning.h"

#include <string.h>

static const char *const THINK_KEEP[] = {"<think>", "</think>", NULL};
static const char *const SEED_KEEP[] = {"<seed:think>", "</seed:think>", NULL};
static const char *const COMMAND_KEEP[] = {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>",
                                           "<|END_RESPONSE|>", NULL};
static const char *const COMMAND4_KEEP[] = {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_TEXT|>", "<|END_TEXT|>",
                                            NULL};
static const char *const MISTRAL_KEEP[] = {"[THINK]", "[/THINK]", NULL};

const tm_think_markers tm_think_tags = {"think", NULL, "<think>", "</think>", NULL, NULL, THINK_KEEP};

/* the families detection tries, in order (<think> last): each found by its detect text in the template */
static const tm_think_markers families[] = {
    {"seed", NULL, "<seed:think>", "</seed:think>", NULL, NULL, SEED_KEEP},
    {"command4", "<|START_TEXT|>", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_TEXT|>", "<|END_TEXT|>",
     COMMAND4_KEEP},
    {"command", NULL, "<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>", COMMAND_KEEP},
    {"mistral", NULL, "[THINK]", "[/THINK]", NULL, NULL, MISTRAL_KEEP},
};

const tm_think_markers *tm_think_detect(const char *template_src)
{
    if (!template_src) return NULL;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strstr(template_src, families[i].detect ? families[i].detect : families[i].close)) return &families[i];
    return strstr(template_src, tm_think_tags.close) ? &tm_think_tags : NULL;
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

int tm_think_opened(const tm_think_markers *m, const char *prompt, size_t len)
{
    if (!m) return 0;
    const size_t ol = strlen(m->open), cl = strlen(m->close);
    const char *o = last_of(prompt, len, m->open, ol), *c = last_of(prompt, len, m->close, cl);
    if (!o || (c && c > o)) return 0;
    for (const char *p = o + ol; p < prompt + len; p++)
        if (!is_ws(*p)) return 0;
    return 1;
}

/* the length of the longest proper prefix of mk that text [len] ends with */
static size_t partial_end(const char *text, size_t len, const char *mk)
{
    size_t ml = strlen(mk);
    for (size_t k = ml - 1 < len ? ml - 1 : len; k > 0; k--)
        if (!memcmp(text + len - k, mk, k)) return k;
    return 0;
}

/* is text[p..len) blank, or mk or a piece of it (*whole: all of mk is there)? */
static int opens_with(const char *text, size_t len, size_t p, const char *mk, int *whole)
{
    size_t k = strlen(mk);
    *whole = len - p >= k;
    return !memcmp(text + p, mk, *whole ? k : len - p);
}

/* the answer that starts at text[a], to the reply's end len: [*c0, *c1), its wrapper dropped */
static void answer(const tm_think_markers *m, const char *text, size_t len, size_t a, int final, size_t *c0, size_t *c1)
{
    *c0 = a, *c1 = len;
    if (!m->ans_open) return;
    size_t q = a, ol = strlen(m->ans_open);
    while (q < len && is_ws(text[q])) q++;
    int whole;
    if (!opens_with(text, len, q, m->ans_open, &whole)) return; /* not wrapped: as it is */
    if (!whole) { /* blank so far, or a piece of the wrapper: undecided (a cut reply keeps its text) */
        if (!final) *c1 = a;
        return;
    }
    size_t b = q + ol;
    const char *close = memmem(text + b, len - b, m->ans_close, strlen(m->ans_close));
    *c0 = b;
    *c1 = close ? (size_t)(close - text) : len - (final ? 0 : partial_end(text + b, len - b, m->ans_close));
}

void tm_think_split(const tm_think_markers *m, const char *text, size_t len, int opened, int final, tm_think_span *s)
{
    const size_t ol = strlen(m->open), cl = strlen(m->close);
    size_t p = 0;
    while (p < len && is_ws(text[p])) p++;
    int whole, piece = opens_with(text, len, p, m->open, &whole), starts = piece && whole;
    if (!final && !starts && piece) {
        *s = (tm_think_span){0, 0, 0, 0}; /* blank so far, or a piece of the opening marker: undecided */
        return;
    }
    if (!opened && !starts) {
        *s = (tm_think_span){0, 0, 0, len};
        answer(m, text, len, 0, final, &s->c0, &s->c1);
        return;
    }
    size_t r0 = starts ? p + ol : 0;
    while (r0 < len && text[r0] == '\n') r0++;
    const char *close = memmem(text + r0, len - r0, m->close, cl);
    size_t r1 = close ? (size_t)(close - text) : len - (final ? 0 : partial_end(text + r0, len - r0, m->close));
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
    if (s->c1 > c0) answer(m, text, len, c0, final, &s->c0, &s->c1);
}
