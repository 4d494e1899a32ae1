/* text/vocab_trie.c: the vocabulary trie and the masks walked over it (design
 * block in vocab_trie.h). */
#include "text/vocab_trie.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

typedef struct vnode {
    int32_t first_child, next;  /* -1: none */
    int32_t tok_lo, tok_hi;     /* ids ending here: sorted[tok_lo .. tok_hi) */
    uint8_t byte;
} vnode;

typedef struct vcache {
    uint64_t tag;
    uint8_t state[TM_VOCAB_MAX_STATE];
    size_t state_size;
    uint64_t used;              /* the cache's clock when last used; 0: empty */
    uint8_t *ok;                /* [V] */
} vcache;

struct tm_vocab_trie {
    int32_t V;
    vnode *node;                /* [n_nodes], node 0 the root */
    int32_t n_nodes;
    int32_t *sorted;            /* ids in the trie, by their bytes */
    uint8_t *blob;              /* every id's bytes */
    uint32_t *off, *len;        /* [V] id's bytes: blob[off .. off + len); len 0: not in the trie */
    pthread_mutex_t mu;         /* the mask cache */
    uint64_t clock;
    vcache cache[TM_VOCAB_CACHE];
};

static const tm_vocab_trie *sort_t; /* qsort has no context argument: set under sort_mu */
static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;

static int by_bytes(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = sort_t->len[x], ly = sort_t->len[y];
    int c = memcmp(sort_t->blob + sort_t->off[x], sort_t->blob + sort_t->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

void tm_vocab_trie_free(tm_vocab_trie *t)
{
    if (!t) return;
    pthread_mutex_destroy(&t->mu);
    free(t->node);
    free(t->sorted);
    free(t->blob);
    free(t->off);
    free(t->len);
    for (int i = 0; i < TM_VOCAB_CACHE; i++) free(t->cache[i].ok);
    free(t);
}

int32_t tm_vocab_trie_V(const tm_vocab_trie *t) { return t->V; }

const uint8_t *tm_vocab_token(const tm_vocab_trie *t, int32_t id, uint32_t *len)
{
    *len = 0;
    if (id < 0 || id >= t->V || !t->len[id]) return NULL;
    *len = t->len[id];
    return t->blob + t->off[id];
}

/* the trie along the sorted list: each token shares the path of its common prefix with the one
 * before and adds the rest as new last children. n ids in sorted, total bytes among them. */
static int build_nodes(tm_vocab_trie *t, int32_t n, size_t total)
{
    t->node = malloc(sizeof(vnode) * (total + 1));
    int32_t *last = malloc(sizeof(int32_t) * (total + 1)); /* a node's last child, while building */
    int32_t path[TM_VOCAB_MAX_TOKEN + 1];
    if (!t->node || !last) {
        free(last);
        return TM_E_NOMEM;
    }
    t->node[0] = (vnode){-1, -1, 0, 0, 0};
    last[0] = -1;
    t->n_nodes = 1;
    path[0] = 0;
    int32_t prev = -1;
    for (int32_t k = 0; k < n; k++) {
        int32_t id = t->sorted[k];
        const uint8_t *s = t->blob + t->off[id];
        uint32_t l = t->len[id], lcp = 0;
        if (prev >= 0) {
            const uint8_t *p = t->blob + t->off[prev];
            uint32_t pl = t->len[prev];
            while (lcp < l && lcp < pl && p[lcp] == s[lcp]) lcp++;
        }
        for (uint32_t d = lcp; d < l; d++) {
            int32_t parent = path[d], c = t->n_nodes++;
            t->node[c] = (vnode){-1, -1, k, k, s[d]};
            last[c] = -1;
            if (last[parent] >= 0) t->node[last[parent]].next = c;
            else t->node[parent].first_child = c;
            last[parent] = c;
            path[d + 1] = c;
        }
        vnode *e = &t->node[path[l]];
        if (e->tok_hi == e->tok_lo) e->tok_lo = k; /* the first id ending at this node */
        e->tok_hi = k + 1;
        prev = id;
    }
    free(last);
    return TM_OK;
}

int tm_vocab_trie_new(tm_vocab_trie **out, const struct tm_tokenizer *tok, int32_t V, tm_err *err)
{
    *out = NULL;
    tm_vocab_trie *t = calloc(1, sizeof *t);
    if (!t) return tm_errf(err, TM_E_NOMEM, "vocabulary trie: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    t->V = V;
    size_t cap = 1 << 20, used = 0;
    t->blob = malloc(cap);
    t->off = calloc((size_t)V, sizeof *t->off);
    t->len = calloc((size_t)V, sizeof *t->len);
    t->sorted = malloc(sizeof(int32_t) * (size_t)V);
    int rc = (!t->blob || !t->off || !t->len || !t->sorted) ? TM_E_NOMEM : TM_OK;
    int32_t n = 0;
    for (int32_t id = 0; id < V && !rc; id++) {
        if (tm_tok_is_special(tok, id)) continue;
        char *b = NULL;
        size_t bl = 0;
        if ((rc = tm_tok_token_bytes(tok, id, &b, &bl, err))) break;
        if (bl > 0 && bl <= TM_VOCAB_MAX_TOKEN) {
            if (used + bl > cap) {
                uint8_t *nb = realloc(t->blob, cap * 2);
                if (!nb) rc = TM_E_NOMEM;
                else t->blob = nb, cap *= 2;
            }
            if (!rc) {
                memcpy(t->blob + used, b, bl);
                t->off[id] = (uint32_t)used;
                t->len[id] = (uint32_t)bl;
                used += bl;
                t->sorted[n++] = id;
            }
        }
        free(b);
    }
    if (!rc) {
        pthread_mutex_lock(&sort_mu);
        sort_t = t;
        qsort(t->sorted, (size_t)n, sizeof(int32_t), by_bytes);
        pthread_mutex_unlock(&sort_mu);
        rc = build_nodes(t, n, used);
    }
    if (rc) {
        tm_vocab_trie_free(t);
        return rc == TM_E_NOMEM ? tm_errf(err, TM_E_NOMEM, "vocabulary trie: out of memory") : rc;
    }
    *out = t;
    return TM_OK;
}

int tm_vocab_allowed(const tm_vocab_trie *t, const void *state, size_t state_size, tm_vocab_step step,
                     void *ctx, uint8_t *ok)
{
    if (state_size > TM_VOCAB_MAX_STATE) return TM_E_INVALID;
    memset(ok, 0, (size_t)t->V);
    struct {
        int32_t child;
        uint8_t st[TM_VOCAB_MAX_STATE];
    } fr[TM_VOCAB_MAX_TOKEN + 1];
    int d = 0;
    fr[0].child = t->node[0].first_child;
    memcpy(fr[0].st, state, state_size);
    for (;;) {
        if (fr[d].child < 0) {
            if (d-- == 0) break;
            continue;
        }
        const vnode *c = &t->node[fr[d].child];
        fr[d].child = c->next;
        uint8_t s[TM_VOCAB_MAX_STATE];
        memcpy(s, fr[d].st, state_size);
        int r = step(ctx, s, c->byte);
        if (r < 0) return r;
        if (!r) continue;
        for (int32_t k = c->tok_lo; k < c->tok_hi; k++) ok[t->sorted[k]] = 1;
        if (c->first_child >= 0) {
            d++;
            fr[d].child = c->first_child;
            memcpy(fr[d].st, s, state_size);
        }
    }
    return TM_OK;
}

int tm_vocab_mask(tm_vocab_trie *t, uint64_t tag, const void *state, size_t state_size, tm_vocab_step step,
                  void *ctx, float *logits)
{
    if (state_size > TM_VOCAB_MAX_STATE) return TM_E_INVALID;
    pthread_mutex_lock(&t->mu);
    vcache *hit = NULL, *lru = &t->cache[0];
    for (int i = 0; i < TM_VOCAB_CACHE && !hit; i++) {
        vcache *e = &t->cache[i];
        if (e->used && e->tag == tag && e->state_size == state_size && !memcmp(e->state, state, state_size)) hit = e;
        else if (e->used < lru->used) lru = e;
    }
    int rc = TM_OK;
    if (!hit) {
        hit = lru;
        hit->used = 0;
        if (!hit->ok && !(hit->ok = malloc((size_t)t->V))) rc = TM_E_NOMEM;
        if (!rc) rc = tm_vocab_allowed(t, state, state_size, step, ctx, hit->ok);
        if (!rc) {
            hit->tag = tag;
            memcpy(hit->state, state, state_size);
            hit->state_size = state_size;
        }
    }
    if (!rc) {
        hit->used = ++t->clock;
        for (int32_t i = 0; i < t->V; i++)
            if (!hit->ok[i]) logits[i] = -INFINITY;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int tm_vocab_take(const tm_vocab_trie *t, void *state, size_t state_size, tm_vocab_step step, void *ctx,
                  int32_t id)
{
    uint32_t len;
    const uint8_t *s = tm_vocab_token(t, id, &len);
    if (!s || state_size > TM_VOCAB_MAX_STATE) return 0;
    uint8_t st[TM_VOCAB_MAX_STATE];
    memcpy(st, state, state_size);
    for (uint32_t i = 0; i < len; i++) {
        int r = step(ctx, st, s[i]);
        if (r <= 0) return r;
    }
    memcpy(state, st, state_size);
    return 1;
}
