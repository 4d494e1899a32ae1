/* text/tok_util.c: buffers, an arena, hash maps, UTF-8 and the Unicode
 * predicates the pipeline needs, with Rust `char` semantics. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/tok_impl.h"

/* ---- tok_buf ------------------------------------------------------------- */

int tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return TM_OK;
    size_t need = b->len + extra + 1;
    if (need < b->len) return TM_E_NOMEM; /* overflow */
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap * 2 > cap ? cap * 2 : need;
    char *p = realloc(b->p, cap);
    if (!p) return TM_E_NOMEM;
    b->p = p;
    b->cap = cap;
    return TM_OK;
}

int tok_buf_append(tok_buf *b, const void *s, size_t n)
{
    if (tok_buf_reserve(b, n) != TM_OK) return TM_E_NOMEM;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return TM_OK;
}

int tok_buf_put_cp(tok_buf *b, uint32_t cp)
{
    char u[4];
    return tok_buf_append(b, u, tok_utf8_enc(cp, u));
}

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- arena --------------------------------------------------------------- */

struct tok_arena_chunk {
    tok_arena_chunk *next;
    size_t used, cap;
    char data[];
};

char *tok_arena_strndup(tok_arena *a, const char *s, size_t n)
{
    tok_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n + 1) {
        if (a->next < 4096) a->next = 4096;
        size_t cap = n + 1 > a->next ? n + 1 : a->next;
        if (a->next < (1u << 20)) a->next *= 2;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    char *p = c->data + c->used;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    c->used += n + 1;
    return p;
}

void tok_arena_free(tok_arena *a)
{
    while (a->head) {
        tok_arena_chunk *n = a->head->next;
        free(a->head);
        a->head = n;
    }
}

/* ---- hashing ------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

uint64_t tok_hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0x100000001b3ULL);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ mix64(v)) * 0x9e3779b97f4a7c15ULL;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)(unsigned char)s[i] << (8 * i);
    return mix64(h ^ v);
}

static size_t table_size(size_t expected)
{
    size_t sz = 16;
    while (sz < expected * 2 + 2) sz <<= 1;
    return sz;
}

/* ---- string map ---------------------------------------------------------- */

int tok_strmap_init(tok_strmap *m, size_t expected)
{
    size_t sz = table_size(expected);
    m->slots = calloc(sz, sizeof *m->slots);
    if (!m->slots) return TM_E_NOMEM;
    m->mask = sz - 1;
    m->n = 0;
    return TM_OK;
}

static int strmap_grow(tok_strmap *m)
{
    tok_strmap bigger;
    if (tok_strmap_init(&bigger, (m->mask + 1)) != TM_OK) return TM_E_NOMEM;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key) tok_strmap_put(&bigger, m->slots[i].key, m->slots[i].len, m->slots[i].val);
    free(m->slots);
    *m = bigger;
    return TM_OK;
}

int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val)
{
    if ((m->n + 1) * 2 > m->mask + 1 && strmap_grow(m) != TM_OK) return TM_E_NOMEM;
    size_t i = (size_t)tok_hash(key, len) & m->mask;
    for (;;) {
        tok_strmap_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->len = (uint32_t)len;
            s->val = val;
            m->n++;
            return TM_OK;
        }
        if (s->len == len && memcmp(s->key, key, len) == 0) {
            s->val = val;
            return TM_OK;
        }
        i = (i + 1) & m->mask;
    }
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len)
{
    if (!m->slots) return -1;
    size_t i = (size_t)tok_hash(key, len) & m->mask;
    for (;;) {
        const tok_strmap_slot *s = &m->slots[i];
        if (!s->key) return -1;
        if (s->len == len && memcmp(s->key, key, len) == 0) return s->val;
        i = (i + 1) & m->mask;
    }
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* ---- pair map ------------------------------------------------------------ */

int tok_pairmap_init(tok_pairmap *m, size_t expected)
{
    size_t sz = table_size(expected);
    m->slots = malloc(sz * sizeof *m->slots);
    if (!m->slots) return TM_E_NOMEM;
    for (size_t i = 0; i < sz; i++) m->slots[i].key = UINT64_MAX;
    m->mask = sz - 1;
    m->n = 0;
    return TM_OK;
}

static int pairmap_grow(tok_pairmap *m)
{
    tok_pairmap bigger;
    if (tok_pairmap_init(&bigger, m->mask + 1) != TM_OK) return TM_E_NOMEM;
    for (size_t i = 0; i <= m->mask; i++) {
        tok_pair_slot *s = &m->slots[i];
        if (s->key != UINT64_MAX)
            tok_pairmap_put(&bigger, (int32_t)(s->key >> 32), (int32_t)(uint32_t)s->key, s->rank, s->new_id);
    }
    free(m->slots);
    *m = bigger;
    return TM_OK;
}

int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id)
{
    if ((m->n + 1) * 2 > m->mask + 1 && pairmap_grow(m) != TM_OK) return TM_E_NOMEM;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)mix64(key) & m->mask;
    for (;;) {
        tok_pair_slot *s = &m->slots[i];
        if (s->key == UINT64_MAX || s->key == key) {
            if (s->key == UINT64_MAX) m->n++;
            s->key = key;
            s->rank = rank;
            s->new_id = new_id;
            return TM_OK;
        }
        i = (i + 1) & m->mask;
    }
}

const tok_pair_slot *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b)
{
    if (!m->slots) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)mix64(key) & m->mask;
    for (;;) {
        const tok_pair_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & m->mask;
    }
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* ---- pieces / matches ---------------------------------------------------- */

int tok_pieces_push(tok_pieces *p, tok_piece x)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        tok_piece *v = realloc(p->v, cap * sizeof *v);
        if (!v) return TM_E_NOMEM;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = x;
    return TM_OK;
}

int tok_matches_push(tok_matches *m, size_t s, size_t e, int is_match)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        tok_match *v = realloc(m->v, cap * sizeof *v);
        if (!v) return TM_E_NOMEM;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = (tok_match){s, e, is_match};
    return TM_OK;
}

/* ---- UTF-8 --------------------------------------------------------------- */

size_t tok_utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

uint32_t tok_utf8_dec(const char *s, size_t n, size_t *adv)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t l = tok_utf8_len(u[0]);
    if (l > n) l = n; /* defensive; callers pass valid UTF-8 */
    uint32_t cp;
    switch (l) {
    case 1: cp = u[0]; break;
    case 2: cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); break;
    case 3: cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F); break;
    default:
        cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
             ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    }
    *adv = l;
    return cp;
}

size_t tok_utf8_enc(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* length of the valid UTF-8 sequence at s[0..n), or 0 with *sub = the length
 * of its maximal valid prefix (>= 1 byte consumed as one error). */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *sub)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *sub = 1;
        return 0;
    }
    size_t i = 1;
    for (; i < need; i++) {
        if (i >= n) break;
        unsigned char b = s[i];
        unsigned char l2 = i == 1 ? lo : 0x80, h2 = i == 1 ? hi : 0xBF;
        if (b < l2 || b > h2) break;
    }
    if (i == need) return need;
    *sub = i;
    return 0;
}

int tok_utf8_valid(const char *s, size_t n, size_t *bad)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t sub, l = utf8_seq(u + i, n - i, &sub);
        if (!l) {
            if (bad) *bad = i;
            return 0;
        }
        i += l;
    }
    return 1;
}

int tok_utf8_lossy(tok_buf *out, const unsigned char *s, size_t n)
{
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    size_t i = 0, run = 0;
    while (i < n) {
        size_t sub, l = s[i] < 0x80 ? 1 : utf8_seq(s + i, n - i, &sub);
        if (l) {
            i += l;
            continue;
        }
        if (tok_buf_append(out, s + run, i - run) != TM_OK || tok_buf_append(out, fffd, 3) != TM_OK)
            return TM_E_NOMEM;
        i += sub;
        run = i;
    }
    return tok_buf_append(out, s + run, n - run);
}

/* ---- Unicode predicates -------------------------------------------------- */

int tok_is_whitespace(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

int tok_is_numeric(uint32_t c)
{
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_propval_t cat = utf8proc_category((utf8proc_int32_t)c);
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

int tok_is_word(uint32_t c)
{
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D) return 1;           /* Join_Control */
    if (c >= 0x24B6 && c <= 0x24E9) return 1;           /* circled letters: Other_Alphabetic */
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

int tok_is_punct(uint32_t c)
{
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return 1;
    default:
        return 0;
    }
}

/* ---- string lists (decoders) ---------------------------------------------- */

int tok_strs_push(tok_strs *s, const char *p, size_t n)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        size_t *o = realloc(s->off, cap * sizeof *o);
        if (!o) return TM_E_NOMEM;
        s->off = o;
        size_t *l = realloc(s->len, cap * sizeof *l);
        if (!l) return TM_E_NOMEM;
        s->len = l;
        s->cap = cap;
    }
    s->off[s->n] = s->buf.len;
    s->len[s->n] = n;
    if (tok_buf_append(&s->buf, p, n) != TM_OK) return TM_E_NOMEM;
    s->n++;
    return TM_OK;
}

void tok_strs_free(tok_strs *s)
{
    tok_buf_free(&s->buf);
    free(s->off);
    free(s->len);
    memset(s, 0, sizeof *s);
}
