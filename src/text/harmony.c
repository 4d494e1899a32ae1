/* text/harmony.c: harmony replies read into reasoning, answer and calls (text/harmony.h has the
 * format and the design block). */
#include "text/harmony.h"

#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

const char *const TM_HARMONY_MARKERS[] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
                                          "<|end|>",   "<|call|>",    "<|return|>",  NULL};

/* what ends a body: its end markers (the first N_ENDS), or the next message's header without one */
static const char *const BODY_END[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>", NULL};
#define N_ENDS 3

#define MSG "<|message|>"

int tm_harmony_detect(const char *template_src)
{
    return template_src && strstr(template_src, "<|channel|>commentary") && strstr(template_src, MSG);
}

void tm_harmony_init(tm_harmony *h, int analysis_reasons)
{
    memset(h, 0, sizeof *h);
    h->analysis_reasons = analysis_reasons;
}

void tm_harmony_free(tm_harmony *h)
{
    for (int i = 0; i < h->n_calls; i++) {
        free(h->calls[i].to);
        free(h->calls[i].body);
    }
    free(h->calls);
    free(h->reasoning);
    free(h->content);
    memset(h, 0, sizeof *h);
}

static int append(char **p, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (tm_grow((void **)p, cap, *len + n + 1, 1)) return -1;
    memcpy(*p + *len, s, n);
    *len += n;
    (*p)[*len] = '\0';
    return 0;
}

/* text [n] into the current body's buffer (a blank line first where it joins an earlier message) */
static int body_add(tm_harmony *h, const char *s, size_t n)
{
    if (!n) return 0;
    if (h->kind == 2) {
        tm_harmony_call *c = &h->calls[h->n_calls - 1];
        return append(&c->body, &c->blen, &c->bcap, s, n);
    }
    char **p = h->kind ? &h->content : &h->reasoning;
    size_t *len = h->kind ? &h->clen : &h->rlen, *cap = h->kind ? &h->ccap : &h->rcap;
    if (h->sep && append(p, len, cap, "\n\n", 2)) return -1;
    h->sep = 0;
    return append(p, len, cap, s, n);
}

static const char *find(const char *s, size_t n, const char *m)
{
    return memmem(s, n, m, strlen(m));
}

/* the word after marker m in header [n] (to whitespace, '<' or the end), or NULL */
static const char *word_after(const char *hd, size_t n, const char *m, size_t *wlen)
{
    const char *at = find(hd, n, m);
    if (!at) return NULL;
    const char *w = at + strlen(m), *end = hd + n, *e = w;
    while (e < end && *e != ' ' && *e != '\t' && *e != '\n' && *e != '<') e++;
    *wlen = (size_t)(e - w);
    return w;
}

/* a header [n] read: the body that follows goes to reasoning, content or a new call */
static int header(tm_harmony *h, const char *hd, size_t n)
{
    size_t tl = 0, cl = 0;
    const char *to = word_after(hd, n, "to=", &tl), *ch = word_after(hd, n, "<|channel|>", &cl);
    if (to && tl) {
        if (tl > 10 && !memcmp(to, "functions.", 10)) to += 10, tl -= 10;
        if (tm_grow((void **)&h->calls, &h->calls_cap, (size_t)h->n_calls + 1, sizeof *h->calls)) return -1;
        tm_harmony_call *c = &h->calls[h->n_calls];
        memset(c, 0, sizeof *c);
        if (!(c->to = strndup(to, tl))) return -1;
        h->n_calls++;
        h->kind = 2;
        h->sep = 0;
        return 0;
    }
    h->kind = ch && cl == 8 && !memcmp(ch, "analysis", 8) && h->analysis_reasons ? 0 : 1;
    h->sep = (h->kind ? h->clen : h->rlen) > 0;
    return 0;
}

/* how many of text [n]'s last bytes may begin a marker that ends a body */
static size_t held_tail(const char *s, size_t n)
{
    for (size_t k = n < 12 ? n : 12; k > 0; k--) {
        if (s[n - k] != '<') continue;
        for (int i = 0; BODY_END[i]; i++)
            if (strlen(BODY_END[i]) > k && !memcmp(BODY_END[i], s + n - k, k)) return k;
    }
    return 0;
}

/* the message the text's end leaves open is over: a call closed by its end marker */
static void close_body(tm_harmony *h, int marker)
{
    if (h->kind == 2 && marker) h->calls[h->n_calls - 1].closed = 1;
    h->in_body = 0;
}

int tm_harmony_feed(tm_harmony *h, const char *text, size_t len, int final)
{
    if (h->oom) return -1;
    while (h->pos < len) {
        const char *s = text + h->pos;
        size_t n = len - h->pos;
        if (!h->in_body) {
            /* over: no <|message|> can start within the limit (one there would be whole by now) */
            const char *m = find(s, n, MSG);
            int over = m ? (size_t)(m - s) > TM_HARMONY_MAX_HEADER : n >= TM_HARMONY_MAX_HEADER + strlen(MSG);
            if (!m && !over && !final) break;
            if (m && !over) {
                if (header(h, s, (size_t)(m - s))) goto oom;
                h->pos += (size_t)(m - s) + strlen(MSG);
                h->in_body = 1;
                continue;
            }
            /* no header: a text over the limit, or the end of a reply that did not write one */
            int marked = 0;
            for (int i = 0; TM_HARMONY_MARKERS[i] && !marked; i++) marked = find(s, n, TM_HARMONY_MARKERS[i]) != NULL;
            if (marked && !over) {
                h->pos = len; /* cut short inside a header */
                break;
            }
            h->kind = 1; /* answer text as written (no blank line put before it), its first byte taken now: a
                            marker there no longer ends it */
            h->sep = 0;
            h->in_body = 1;
            if (body_add(h, s, 1)) goto oom;
            h->pos++;
            continue;
        }
        const char *e = NULL;
        int which = 0;
        for (int i = 0; BODY_END[i]; i++) {
            const char *at = find(s, n, BODY_END[i]);
            if (at && (!e || at < e)) e = at, which = i;
        }
        if (e) {
            if (body_add(h, s, (size_t)(e - s))) goto oom;
            int ends = which < N_ENDS; /* an end marker, taken; else the next header, left to it */
            h->pos += (size_t)(e - s) + (ends ? strlen(BODY_END[which]) : 0);
            close_body(h, ends);
            continue;
        }
        size_t take = final ? n : n - held_tail(s, n);
        if (body_add(h, s, take)) goto oom;
        h->pos += take;
        break;
    }
    if (final && h->in_body) close_body(h, 0);
    return 0;
oom:
    h->oom = 1;
    return -1;
}
