/* fuzz/fuzz_stop.c: the stop-string matcher (text/stop.c) on arbitrary stop
 * strings, text and piece boundaries. Input: byte 0 = number of stop strings
 * (1..4); bytes 1..2 = a bit mask of piece boundaries (position i % 16);
 * then the stop strings, each ended by '\n' (empty ones skipped), then the
 * text.
 * Checked invariants: everything emitted is a prefix of the text; with no
 * match, emitted + flushed == text and the text holds no stop string; with a
 * match, the text continues with the matched stop string right after the
 * emitted prefix. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/sampler.h"

#define MAXS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    int ns = data[0] % MAXS + 1;
    unsigned mask = (unsigned)data[1] | (unsigned)data[2] << 8;
    const uint8_t *p = data + 3, *end = data + size;
    char *stops[MAXS] = {0};
    int n = 0;
    for (int i = 0; i < ns && p < end; i++) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (l > 0 && l <= 16 && !memchr(p, 0, l)) {
            stops[n] = malloc(l + 1);
            memcpy(stops[n], p, l);
            stops[n][l] = 0;
            n++;
        }
        p += l + (nl ? 1 : 0);
    }
    const char *text = (const char *)p;
    size_t tlen = (size_t)(end - p);
    tm_stop *st = tm_stop_new(NULL, 0, (const char *const *)stops, n, NULL);
    if (!st) abort();
    char *out = malloc(tlen + 1);
    size_t on = 0, start = 0;
    int stopped = 0;
    for (size_t i = 1; i <= tlen && !stopped; i++) {
        if (i < tlen && !(mask & (1u << (i % 16)))) continue;
        const char *e;
        size_t en;
        int rc = tm_stop_feed(st, text + start, i - start, &e, &en);
        if (rc < 0) abort();
        if (on + en > tlen || memcmp(text + on, e, en) != 0) abort();
        memcpy(out + on, e, en);
        on += en;
        start = i;
        stopped = rc == 1;
    }
    const char *e;
    size_t en;
    tm_stop_flush(st, &e, &en);
    if (on + en > tlen || memcmp(text + on, e, en) != 0) abort();
    on += en;
    int m = tm_stop_matched(st);
    if (stopped) {
        if (m < 0 || m >= n) abort();
        size_t ml = strlen(stops[m]);
        if (on + ml > tlen || memcmp(text + on, stops[m], ml) != 0) abort();
    } else {
        if (m != -1 || on != tlen) abort();
        for (int i = 0; i < n; i++)
            if (tlen && memmem(text, tlen, stops[i], strlen(stops[i]))) abort();
    }
    tm_stop_free(st);
    for (int i = 0; i < n; i++) free(stops[i]);
    free(out);
    return 0;
}
