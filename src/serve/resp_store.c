/* serve/resp_store.c: the Responses API's stored responses (serve-impl.h: tm_resp_store).
 *
 * Design block
 * ------------
 * A response asked to be stored ("store": true, OpenAI's default) is kept as two texts: the
 * conversation it ends, as chat messages (its input's, the instructions left out, then the answer
 * as an assistant message), which a later request's previous_response_id continues; and the response
 * object itself, which GET /v1/responses/{id} returns. Both live in memory only: a server restart
 * forgets them, as vLLM's store does.
 *
 * Bounds: at most max_items entries and max_bytes of text; a new entry evicts the least recently
 * used ones (a get or a put counts as a use) until it fits; an entry larger than max_bytes alone is
 * not kept. Lookups scan the table (max_items is small: 1024 by default; a scan is microseconds
 * beside a generation). One mutex: every call may come from any connection's thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve-impl.h"

typedef struct entry {
    char id[TM_RESP_ID_MAX];
    char *conv, *resp;   /* malloc'd; NULL: the slot is free */
    size_t bytes;
    uint64_t used;       /* the store's clock at the last get or put */
} entry;

struct tm_resp_store {
    pthread_mutex_t mu;
    entry *e;            /* [cap] */
    size_t cap, max_bytes, bytes;
    uint64_t clock;
};

int tm_resp_store_new(tm_resp_store **out, size_t max_items, size_t max_bytes)
{
    *out = NULL;
    tm_resp_store *s = calloc(1, sizeof *s);
    if (!s || !(s->e = calloc(max_items ? max_items : 1, sizeof *s->e))) {
        free(s);
        return -1;
    }
    s->cap = max_items ? max_items : 1, s->max_bytes = max_bytes;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return 0;
}

static void drop(tm_resp_store *s, entry *x)
{
    s->bytes -= x->bytes;
    free(x->conv);
    free(x->resp);
    memset(x, 0, sizeof *x);
}

void tm_resp_store_free(tm_resp_store *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->cap; i++) drop(s, &s->e[i]);
    pthread_mutex_destroy(&s->mu);
    free(s->e);
    free(s);
}

/* the entry of id, or NULL (under the lock) */
static entry *find(tm_resp_store *s, const char *id)
{
    for (size_t i = 0; i < s->cap; i++)
        if (s->e[i].conv && !strcmp(s->e[i].id, id)) return &s->e[i];
    return NULL;
}

int tm_resp_store_put(tm_resp_store *s, const char *id, char *conv, char *resp)
{
    size_t bytes = strlen(conv) + strlen(resp);
    if (strlen(id) >= TM_RESP_ID_MAX || bytes > s->max_bytes) {
        free(conv);
        free(resp);
        return -1;
    }
    pthread_mutex_lock(&s->mu);
    entry *x = find(s, id);
    if (x) drop(s, x);
    for (;;) { /* a free slot once the bytes fit, evicting the least recently used */
        entry *free_slot = NULL, *oldest = NULL;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->e[i].conv) free_slot = free_slot ? free_slot : &s->e[i];
            else if (!oldest || s->e[i].used < oldest->used) oldest = &s->e[i];
        }
        if (free_slot && s->bytes + bytes <= s->max_bytes) {
            x = free_slot;
            break;
        }
        if (!oldest) { /* cannot be: with nothing stored, a free slot and the bytes fit */
            pthread_mutex_unlock(&s->mu);
            free(conv);
            free(resp);
            return -1;
        }
        drop(s, oldest); /* the table is full or over its bytes */
    }
    snprintf(x->id, sizeof x->id, "%s", id);
    x->conv = conv, x->resp = resp, x->bytes = bytes, x->used = ++s->clock;
    s->bytes += bytes;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int tm_resp_store_get(tm_resp_store *s, const char *id, char **conv, char **resp)
{
    if (conv) *conv = NULL;
    if (resp) *resp = NULL;
    pthread_mutex_lock(&s->mu);
    entry *x = find(s, id);
    int rc = x ? 0 : -1;
    if (x) {
        x->used = ++s->clock;
        if ((conv && !(*conv = strdup(x->conv))) || (resp && !(*resp = strdup(x->resp)))) rc = -2;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == -2) {
        if (conv) free(*conv), *conv = NULL;
        if (resp) free(*resp), *resp = NULL;
    }
    return rc;
}

int tm_resp_store_del(tm_resp_store *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    entry *x = find(s, id);
    if (x) drop(s, x);
    pthread_mutex_unlock(&s->mu);
    return x ? 0 : -1;
}
