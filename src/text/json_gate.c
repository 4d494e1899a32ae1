/* text/json_gate.c: JSON mode's automaton and vocabulary trie (design block
 * in json_gate.h). */
#include "text/json_gate.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

/* ---- the automaton ---- */

enum {
    J_START,      /* before the top-level object: whitespace or '{' */
    J_VALUE,      /* a value (after ':', or ',' in an array) */
    J_ARR_FIRST,  /* after '[': a value or ']' */
    J_OBJ_FIRST,  /* after '{': a key or '}' */
    J_KEY,        /* after ',' in an object: a key */
    J_COLON,      /* after a key */
    J_AFTER,      /* after a value inside a container: ',' or its closing bracket */
    J_DONE,       /* the top-level object is closed */
    J_STR,        /* in a string (key: m->key) */
    J_STR_ESC,    /* after a backslash */
    J_STR_U,      /* in a \u escape: sub of its 4 hex digits to come; u8_lo the first digit, u8_hi 1 where it must be a
                     low surrogate (DC00-DFFF) after a high one */
    J_STR_LOW,    /* after a high surrogate's \uD800-DBFF: sub 0 wants '\\', 1 wants 'u' */
    J_NUM_MINUS,  /* '-': a digit must come */
    J_NUM_ZERO,   /* a leading 0: '.', 'e' or the end */
    J_NUM_INT,    /* integer digits */
    J_NUM_DOT,    /* '.': a digit must come */
    J_NUM_FRAC,   /* fraction digits */
    J_NUM_E,      /* 'e': a sign or a digit */
    J_NUM_ESIGN,  /* the exponent's sign: a digit */
    J_NUM_EXP,    /* exponent digits */
    J_LIT,        /* true / false / null: letter sub of literal u8_hi */
};

static const char *const lits[3] = {"true", "false", "null"};

enum { JSM_KEY = 1, JSM_LF = 2, JSM_CR = 4 };

void tm_jsm_init(tm_jsm *m)
{
    memset(m, 0, sizeof *m);
    m->mode = J_START;
}

int tm_jsm_done(const tm_jsm *m) { return m->mode == J_DONE; }

static int is_ws(unsigned c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(unsigned c) { return c >= '0' && c <= '9'; }
static int is_hex(unsigned c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static int top_is_object(const tm_jsm *m) { return (int)((m->stack >> (m->depth - 1)) & 1); }

static void value_end(tm_jsm *m) { m->mode = m->depth ? J_AFTER : J_DONE; }

static int push(tm_jsm *m, int object)
{
    if (m->depth >= TM_JSM_MAX_DEPTH) return 0;
    m->stack = (m->stack & ~(1ull << m->depth)) | ((uint64_t)object << m->depth);
    m->depth++;
    m->mode = object ? J_OBJ_FIRST : J_ARR_FIRST;
    return 1;
}

static int pop(tm_jsm *m, unsigned c)
{
    if (!m->depth || (c == '}') != top_is_object(m)) return 0;
    m->depth--;
    m->stack &= ~(1ull << m->depth);
    value_end(m);
    return 1;
}

/* the first byte of a value */
static int value_start(tm_jsm *m, unsigned c)
{
    switch (c) {
    case '{': return push(m, 1);
    case '[': return push(m, 0);
    case '"': m->mode = J_STR; m->flags &= (uint8_t)~JSM_KEY; return 1;
    case '-': m->mode = J_NUM_MINUS; return 1;
    case '0': m->mode = J_NUM_ZERO; return 1;
    case 't': case 'f': case 'n':
        m->mode = J_LIT;
        m->u8_hi = c == 't' ? 0 : c == 'f' ? 1 : 2;
        m->sub = 1;
        return 1;
    default:
        if (c >= '1' && c <= '9') { m->mode = J_NUM_INT; return 1; }
        return 0;
    }
}

/* a string's byte: UTF-8 checked as RFC 3629 does (no overlong forms, surrogates or > U+10FFFF) */
static int str_byte(tm_jsm *m, unsigned c)
{
    if (m->u8_need) {
        if (c < m->u8_lo || c > m->u8_hi) return 0;
        if (--m->u8_need) m->u8_lo = 0x80, m->u8_hi = 0xBF;
        else m->u8_lo = m->u8_hi = 0; /* a whole character: the state is as before it (the mask cache) */
        return 1;
    }
    if (c == '"') {
        if (m->flags & JSM_KEY) m->mode = J_COLON;
        else value_end(m);
        return 1;
    }
    if (c == '\\') { m->mode = J_STR_ESC; return 1; }
    if (c < 0x20) return 0;
    if (c < 0x80) return 1;
    uint8_t need = 0, lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
    else if (c == 0xED) need = 2, hi = 0x9F;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) need = 3, hi = 0x8F;
    else return 0;
    m->u8_need = need, m->u8_lo = lo, m->u8_hi = hi;
    return 1;
}

static int step(tm_jsm *m, unsigned c);

/* a number may end here: c, if it is not the number's, is the next token's first byte */
static int num_end(tm_jsm *m, unsigned c)
{
    value_end(m);
    return step(m, c);
}

/* between tokens: whitespace c, at most TM_JSM_MAX_WS bytes in a row with one line break ("\n",
 * "\r" or "\r\n") among them */
static int space(tm_jsm *m, unsigned c)
{
    if (m->ws >= TM_JSM_MAX_WS) return 0;
    if (c == '\r') {
        if (m->flags & (JSM_LF | JSM_CR)) return 0;
        m->flags |= JSM_CR;
    } else if (c == '\n') {
        if (m->flags & JSM_LF) return 0;
        m->flags |= JSM_LF | JSM_CR;
    } else if ((m->flags & JSM_CR) && !(m->flags & JSM_LF)) {
        m->flags |= JSM_LF; /* "\r" alone was the break */
    }
    m->ws++;
    return 1;
}

static int step(tm_jsm *m, unsigned c)
{
    switch (m->mode) {
    case J_START: return is_ws(c) ? space(m, c) : c == '{' && push(m, 1);
    case J_VALUE: return is_ws(c) ? space(m, c) : value_start(m, c);
    case J_ARR_FIRST: return is_ws(c) ? space(m, c) : c == ']' ? pop(m, c) : value_start(m, c);
    case J_OBJ_FIRST:
        if (is_ws(c)) return space(m, c);
        if (c == '}') return pop(m, c);
        /* fall through */
    case J_KEY:
        if (is_ws(c)) return space(m, c);
        if (c != '"') return 0;
        m->mode = J_STR;
        m->flags |= JSM_KEY;
        return 1;
    case J_COLON: return is_ws(c) ? space(m, c) : c == ':' ? (m->mode = J_VALUE, 1) : 0;
    case J_AFTER:
        if (is_ws(c)) return space(m, c);
        if (c == ',') {
            m->mode = top_is_object(m) ? J_KEY : J_VALUE;
            return 1;
        }
        return (c == '}' || c == ']') && pop(m, c);
    case J_DONE: return 0;
    case J_STR: return str_byte(m, c);
    case J_STR_ESC:
        if (c == 'u') {
            m->mode = J_STR_U;
            m->sub = 4;
            m->u8_hi = 0;
            return 1;
        }
        if (!strchr("\"\\/bfnrt", (int)c) || !c) return 0;
        m->mode = J_STR;
        return 1;
    case J_STR_LOW: /* a high surrogate must be followed by an escaped low one (as cJSON and Python want) */
        if (c != (m->sub ? 'u' : '\\')) return 0;
        if (m->sub++) {
            m->mode = J_STR_U;
            m->sub = 4;
            m->u8_hi = 1;
        }
        return 1;
    case J_STR_U: {
        if (!is_hex(c)) return 0;
        unsigned v = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        if (m->sub == 4) {
            if (m->u8_hi && v != 0xD) return 0;
            m->u8_lo = (uint8_t)v;
        } else if (m->sub == 3 && m->u8_lo == 0xD) {
            if (m->u8_hi ? v < 0xC : v >= 0xC) return 0; /* not the low surrogate due, or a lone low one */
            m->u8_lo = !m->u8_hi && v >= 8 ? 0xFF : 0;   /* 0xFF: a high surrogate, its low one to come */
        } else if (m->sub == 3) {
            m->u8_lo = 0;
        }
        if (--m->sub == 0) {
            m->mode = m->u8_lo == 0xFF ? J_STR_LOW : J_STR;
            m->u8_lo = m->u8_hi = 0;
        }
        return 1;
    }
    case J_NUM_MINUS:
        if (c == '0') m->mode = J_NUM_ZERO;
        else if (c >= '1' && c <= '9') m->mode = J_NUM_INT;
        else return 0;
        return 1;
    case J_NUM_ZERO:
        if (c == '.') m->mode = J_NUM_DOT;
        else if (c == 'e' || c == 'E') m->mode = J_NUM_E;
        else return num_end(m, c);
        return 1;
    case J_NUM_INT:
        if (is_digit(c)) return 1;
        if (c == '.') m->mode = J_NUM_DOT;
        else if (c == 'e' || c == 'E') m->mode = J_NUM_E;
        else return num_end(m, c);
        return 1;
    case J_NUM_DOT:
        if (!is_digit(c)) return 0;
        m->mode = J_NUM_FRAC;
        return 1;
    case J_NUM_FRAC:
        if (is_digit(c)) return 1;
        if (c == 'e' || c == 'E') {
            m->mode = J_NUM_E;
            return 1;
        }
        return num_end(m, c);
    case J_NUM_E:
        if (c == '+' || c == '-') m->mode = J_NUM_ESIGN;
        else if (is_digit(c)) m->mode = J_NUM_EXP;
        else return 0;
        return 1;
    case J_NUM_ESIGN:
        if (!is_digit(c)) return 0;
        m->mode = J_NUM_EXP;
        return 1;
    case J_NUM_EXP: return is_digit(c) ? 1 : num_end(m, c);
    case J_LIT: {
        const char *w = lits[m->u8_hi];
        if ((unsigned char)w[m->sub] != c) return 0;
        if (!w[++m->sub]) {
            m->u8_hi = 0;
            m->sub = 0;
            value_end(m);
        }
        return 1;
    }
    }
    return 0;
}

int tm_jsm_feed(tm_jsm *m, unsigned char c)
{
    tm_jsm t = *m;
    if (!step(&t, c)) return 0;
    if (!is_ws(c) || t.mode == J_STR) { /* a non-space byte, or a space inside a string: a new run */
        t.ws = 0;
        t.flags &= (uint8_t)~(JSM_LF | JSM_CR);
    }
    *m = t;
    return 1;
}

/* ---- the vocabulary trie ---- */

typedef struct jnode {
    int32_t first_child, next;  /* -1: none */
    int32_t tok_lo, tok_hi;     /* ids ending here: sorted[tok_lo .. tok_hi) */
    uint8_t byte;
} jnode;

struct tm_json_vocab {
    int32_t V;
    jnode *node;                /* [n_nodes], node 0 the root */
    int32_t n_nodes;
    int32_t *sorted;            /* ids in the trie, by their bytes */
    uint8_t *blob;              /* every id's bytes */
    uint32_t *off, *len;        /* [V] id's bytes: blob[off .. off + len); len 0: not in the trie */
    pthread_mutex_t mu;         /* the mask cache */
    int cached;
    tm_jsm cache_state;
    uint8_t *cache_ok;          /* [V] the allowed ids in cache_state */
};

#define JV_MAX_TOKEN 256        /* longer tokens are left out (none in the usual vocabularies) */

static const tm_json_vocab *sort_jv; /* qsort has no context argument: set under sort_mu */
static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;

static int by_bytes(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = sort_jv->len[x], ly = sort_jv->len[y];
    int c = memcmp(sort_jv->blob + sort_jv->off[x], sort_jv->blob + sort_jv->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

void tm_json_vocab_free(tm_json_vocab *jv)
{
    if (!jv) return;
    pthread_mutex_destroy(&jv->mu);
    free(jv->node);
    free(jv->sorted);
    free(jv->blob);
    free(jv->off);
    free(jv->len);
    free(jv->cache_ok);
    free(jv);
}

int tm_json_vocab_new(tm_json_vocab **out, const struct tm_tokenizer *t, int32_t V, tm_err *err)
{
    *out = NULL;
    tm_json_vocab *jv = calloc(1, sizeof *jv);
    if (!jv) return tm_errf(err, TM_E_NOMEM, "JSON mode: out of memory");
    pthread_mutex_init(&jv->mu, NULL);
    jv->V = V;
    size_t cap = 1 << 20, used = 0;
    jv->blob = malloc(cap);
    jv->off = calloc((size_t)V, sizeof *jv->off);
    jv->len = calloc((size_t)V, sizeof *jv->len);
    jv->sorted = malloc(sizeof(int32_t) * (size_t)V);
    jv->cache_ok = malloc((size_t)V);
    int rc = (!jv->blob || !jv->off || !jv->len || !jv->sorted || !jv->cache_ok) ? TM_E_NOMEM : TM_OK;
    int32_t n = 0;
    size_t total = 0;
    for (int32_t id = 0; id < V && !rc; id++) {
        if (tm_tok_is_special(t, id)) continue;
        char *b = NULL;
        size_t bl = 0;
        if ((rc = tm_tok_token_bytes(t, id, &b, &bl, err))) break;
        if (bl > 0 && bl <= JV_MAX_TOKEN) {
            if (used + bl > cap) {
                uint8_t *nb = realloc(jv->blob, cap * 2);
                if (!nb) rc = TM_E_NOMEM;
                else jv->blob = nb, cap *= 2;
            }
            if (!rc) {
                memcpy(jv->blob + used, b, bl);
                jv->off[id] = (uint32_t)used;
                jv->len[id] = (uint32_t)bl;
                used += bl;
                total += bl;
                jv->sorted[n++] = id;
            }
        }
        free(b);
    }
    if (!rc) {
        pthread_mutex_lock(&sort_mu);
        sort_jv = jv;
        qsort(jv->sorted, (size_t)n, sizeof(int32_t), by_bytes);
        pthread_mutex_unlock(&sort_mu);
        /* the trie, built along the sorted list: each token shares the path of its common prefix
         * with the one before and adds the rest as new last children */
        jv->node = malloc(sizeof(jnode) * (total + 1));
        int32_t *last = malloc(sizeof(int32_t) * (total + 1)); /* a node's last child, while building */
        int32_t path[JV_MAX_TOKEN + 1];
        if (!jv->node || !last) rc = TM_E_NOMEM;
        if (!rc) {
            jv->node[0] = (jnode){-1, -1, 0, 0, 0};
            last[0] = -1;
            jv->n_nodes = 1;
            path[0] = 0;
            int32_t prev = -1;
            for (int32_t k = 0; k < n; k++) {
                int32_t id = jv->sorted[k];
                const uint8_t *s = jv->blob + jv->off[id];
                uint32_t l = jv->len[id], lcp = 0;
                if (prev >= 0) {
                    const uint8_t *p = jv->blob + jv->off[prev];
                    uint32_t pl = jv->len[prev];
                    while (lcp < l && lcp < pl && p[lcp] == s[lcp]) lcp++;
                }
                for (uint32_t d = lcp; d < l; d++) {
                    int32_t parent = path[d], c = jv->n_nodes++;
                    jv->node[c] = (jnode){-1, -1, k, k, s[d]};
                    last[c] = -1;
                    if (last[parent] >= 0) jv->node[last[parent]].next = c;
                    else jv->node[parent].first_child = c;
                    last[parent] = c;
                    path[d + 1] = c;
                }
                jnode *e = &jv->node[path[l]];
                if (e->tok_hi == e->tok_lo) e->tok_lo = k; /* the first id ending at this node */
                e->tok_hi = k + 1;
                prev = id;
            }
        }
        free(last);
    }
    if (rc) {
        tm_json_vocab_free(jv);
        return rc == TM_E_NOMEM ? tm_errf(err, TM_E_NOMEM, "JSON mode: out of memory") : rc;
    }
    *out = jv;
    return TM_OK;
}

/* ok [V]: 1 for every id the automaton in state m takes whole (depth first over the trie) */
static void allowed(const tm_json_vocab *jv, const tm_jsm *m, uint8_t *ok)
{
    memset(ok, 0, (size_t)jv->V);
    struct {
        int32_t child;
        tm_jsm st;
    } fr[JV_MAX_TOKEN + 1];
    int d = 0;
    fr[0].child = jv->node[0].first_child;
    fr[0].st = *m;
    for (;;) {
        if (fr[d].child < 0) {
            if (d-- == 0) break;
            continue;
        }
        const jnode *c = &jv->node[fr[d].child];
        fr[d].child = c->next;
        tm_jsm s = fr[d].st;
        if (!tm_jsm_feed(&s, c->byte)) continue;
        for (int32_t k = c->tok_lo; k < c->tok_hi; k++) ok[jv->sorted[k]] = 1;
        if (c->first_child >= 0) {
            d++;
            fr[d].child = c->first_child;
            fr[d].st = s;
        }
    }
}

int tm_json_mask(tm_json_vocab *jv, const tm_jsm *m, float *logits)
{
    pthread_mutex_lock(&jv->mu);
    if (!jv->cached || memcmp(&jv->cache_state, m, sizeof *m) != 0) {
        allowed(jv, m, jv->cache_ok);
        jv->cache_state = *m;
        jv->cached = 1;
    }
    for (int32_t i = 0; i < jv->V; i++)
        if (!jv->cache_ok[i]) logits[i] = -INFINITY;
    pthread_mutex_unlock(&jv->mu);
    return TM_OK;
}

int tm_json_advance(const tm_json_vocab *jv, tm_jsm *m, int32_t id)
{
    if (id < 0 || id >= jv->V || !jv->len[id]) return 0;
    tm_jsm t = *m;
    const uint8_t *s = jv->blob + jv->off[id];
    for (uint32_t i = 0; i < jv->len[id]; i++)
        if (!tm_jsm_feed(&t, s[i])) return 0;
    *m = t;
    return 1;
}
