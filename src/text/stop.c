/* text/stop.c: stop conditions: a set of EOS ids and stop strings that may
 * span token boundaries, and the indentation limit (see text/sampler.h for the contracts).
 *
 * State: buf [len] holds the text not yet emitted, which after each feed is
 * at most the longest proper prefix of a stop string (< TM_STOP_MAX_LEN
 * bytes). A feed appends the piece, looks for the earliest complete stop
 * string in buf, and otherwise emits all but the longest suffix of buf that
 * is a prefix of some stop string. Text before the held suffix can never be
 * part of a match: a match starting there would have to be a complete stop
 * string found now, or else that position would be the start of a longer
 * held suffix. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* memmem */
#endif
#include "text/sampler.h"

#include <stdlib.h>
#include <string.h>

struct tm_stop {
    int32_t *eos;       /* [n_eos] */
    int n_eos;
    char **str;         /* [n_str] NUL-terminated */
    size_t *slen;       /* [n_str] */
    int n_str;
    size_t max_len;     /* longest stop string */
    char *buf;          /* [cap] pending text */
    size_t len, cap;
    size_t emitted;     /* bytes at the front of buf returned by the last call */
    int matched;        /* index of the matched stop string, -1 */
};

tm_stop *tm_stop_new(const int32_t *eos, int n_eos, const char *const *stops, int n_stops, tm_err *err)
{
    if (n_eos < 0 || n_eos > TM_STOP_MAX_EOS || (n_eos > 0 && !eos)) {
        tm_errf(err, TM_E_INVALID, "stop: %d EOS ids is out of range [0, %d]", n_eos, TM_STOP_MAX_EOS);
        return NULL;
    }
    if (n_stops < 0 || n_stops > TM_STOP_MAX_STRINGS || (n_stops > 0 && !stops)) {
        tm_errf(err, TM_E_INVALID, "stop: %d stop strings is out of range [0, %d]", n_stops, TM_STOP_MAX_STRINGS);
        return NULL;
    }
    for (int i = 0; i < n_eos; i++)
        if (eos[i] < 0) {
            tm_errf(err, TM_E_INVALID, "stop: eos[%d] = %d is negative", i, (int)eos[i]);
            return NULL;
        }
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0]) {
            tm_errf(err, TM_E_INVALID, "stop[%d]: empty string", i);
            return NULL;
        }
        size_t l = strnlen(stops[i], TM_STOP_MAX_LEN + 1);
        if (l > TM_STOP_MAX_LEN) {
            tm_errf(err, TM_E_INVALID, "stop[%d]: longer than %d bytes", i, TM_STOP_MAX_LEN);
            return NULL;
        }
    }
    tm_stop *st = calloc(1, sizeof *st);
    if (!st) goto nomem;
    st->matched = -1;
    if (n_eos > 0) {
        if (!(st->eos = malloc((size_t)n_eos * sizeof *st->eos))) goto nomem;
        memcpy(st->eos, eos, (size_t)n_eos * sizeof *st->eos);
    }
    st->n_eos = n_eos;
    if (n_stops > 0) {
        st->str = calloc((size_t)n_stops, sizeof *st->str);
        st->slen = calloc((size_t)n_stops, sizeof *st->slen);
        if (!st->str || !st->slen) goto nomem;
    }
    for (int i = 0; i < n_stops; i++) {
        st->slen[i] = strlen(stops[i]);
        if (!(st->str[i] = malloc(st->slen[i] + 1))) goto nomem;
        st->n_str = i + 1;
        memcpy(st->str[i], stops[i], st->slen[i] + 1);
        if (st->slen[i] > st->max_len) st->max_len = st->slen[i];
    }
    return st;
nomem:
    tm_stop_free(st);
    tm_errf(err, TM_E_NOMEM, "stop: out of memory");
    return NULL;
}

void tm_stop_free(tm_stop *st)
{
    if (!st) return;
    for (int i = 0; i < st->n_str; i++) free(st->str[i]);
    free(st->str);
    free(st->slen);
    free(st->eos);
    free(st->buf);
    free(st);
}

void tm_stop_reset(tm_stop *st)
{
    st->len = st->emitted = 0;
    st->matched = -1;
}

int tm_stop_is_eos(const tm_stop *st, int32_t id)
{
    for (int i = 0; i < st->n_eos; i++)
        if (st->eos[i] == id) return 1;
    return 0;
}

int tm_stop_matched(const tm_stop *st)
{
    return st->matched;
}

/* drop what the previous call emitted */
static void consume(tm_stop *st)
{
    if (st->emitted == 0) return;
    memmove(st->buf, st->buf + st->emitted, st->len - st->emitted);
    st->len -= st->emitted;
    st->emitted = 0;
}

/* length of the longest suffix of buf that is a proper prefix of a stop string */
static size_t held_suffix(const tm_stop *st)
{
    size_t lmax = st->max_len - 1 < st->len ? st->max_len - 1 : st->len;
    for (size_t L = lmax; L > 0; L--) {
        const char *suf = st->buf + st->len - L;
        for (int i = 0; i < st->n_str; i++)
            if (st->slen[i] > L && memcmp(st->str[i], suf, L) == 0) return L;
    }
    return 0;
}

int tm_stop_feed(tm_stop *st, const char *piece, size_t len, const char **emit, size_t *emit_len)
{
    consume(st);
    *emit = "";
    *emit_len = 0;
    if (st->matched >= 0) return 1;
    if (st->n_str == 0) {   /* nothing to hold back: pass the piece through */
        *emit = len ? piece : "";
        *emit_len = len;
        return 0;
    }
    if (len > st->cap - st->len) {
        size_t ncap = st->len + len;
        if (ncap < 2 * st->cap) ncap = 2 * st->cap;
        if (ncap < 64) ncap = 64;
        char *nb = realloc(st->buf, ncap);
        if (!nb) return TM_E_NOMEM;
        st->buf = nb;
        st->cap = ncap;
    }
    if (len) memcpy(st->buf + st->len, piece, len);
    st->len += len;
    if (st->len == 0) return 0;
    *emit = st->buf;

    /* the earliest complete stop string (the first listed on a tie) */
    size_t best = st->len;
    for (int i = 0; i < st->n_str; i++) {
        const char *m = memmem(st->buf, st->len, st->str[i], st->slen[i]);
        if (m && (size_t)(m - st->buf) < best) {
            best = (size_t)(m - st->buf);
            st->matched = i;
        }
    }
    if (st->matched >= 0) {
        *emit_len = best;
        st->emitted = st->len;   /* the stop string and the rest are dropped */
        return 1;
    }
    st->emitted = st->len - held_suffix(st);
    *emit_len = st->emitted;
    return 0;
}

void tm_stop_flush(tm_stop *st, const char **emit, size_t *emit_len)
{
    consume(st);
    *emit = st->buf ? st->buf : "";
    *emit_len = st->matched >= 0 ? 0 : st->len;
    st->emitted = st->len;
}

void tm_indent_init(tm_indent *in, int n_indent)
{
    memset(in, 0, sizeof *in);
    in->n_indent = n_indent;
}

size_t tm_indent_scan(tm_indent *in, const char *text, size_t len)
{
    if (in->cut) return 0;
    if (in->n_indent <= 0) return len;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (!in->judging) {
            if (c == '\n') in->judging = 1, in->width = 0;
        } else if (c == ' ' || c == '\t') {
            if (++in->width >= in->n_indent) in->judging = 0; /* indented enough: the line passes */
        } else { /* the line's first other character, and its indentation short */
            in->cut = 1;
            return i;
        }
    }
    return len;
}
