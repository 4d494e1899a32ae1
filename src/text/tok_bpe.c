/* text/tok_bpe.c: the BPE model (HF `models::bpe`): vocabulary and merges
 * from tokenizer.json, and the word -> ids algorithm.
 *
 * A word starts as one symbol per character (looked up in the vocabulary,
 * else byte fallback `<0xXX>`, else the unk token, fused if fuse_unk). Then,
 * as HF `Word::merge_all`, a min-heap ordered by (merge rank, position)
 * repeatedly merges the best adjacent pair over a doubly linked list of
 * symbols; stale heap entries are detected by re-checking the pair. Each
 * merge is O(log n), so a word of n symbols costs O(n log n). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

/* ---- loading ------------------------------------------------------------- */

int tok_load_bpe(tm_tokenizer *t, const void *model_json, tm_err *err)
{
    const cJSON *m = model_json;
    tok_model *b = &t->model;
    int rc;
    b->type = TOK_MODEL_BPE;
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!cJSON_IsArray(merges)) return tm_errf(err, TM_E_FORMAT, "%s: model.merges: missing or not an array", t->name);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (dropout && !cJSON_IsNull(dropout)) {
        if (!cJSON_IsNumber(dropout)) return tm_errf(err, TM_E_FORMAT, "%s: model.dropout: expected a number or null", t->name);
        if (dropout->valuedouble != 0.0)
            return tm_errf(err, TM_E_UNSUPPORTED, "%s: model.dropout: BPE dropout %g is not supported (encoding would be random)",
                           t->name, dropout->valuedouble);
    }
    if ((rc = tok_model_bool(t, m, "fuse_unk", &b->fuse_unk, err)) ||
        (rc = tok_model_bool(t, m, "byte_fallback", &b->byte_fallback, err)) ||
        (rc = tok_model_bool(t, m, "ignore_merges", &b->ignore_merges, err)) ||
        (rc = tok_model_str(t, m, "unk_token", &b->unk, NULL, err)) ||
        (rc = tok_model_str(t, m, "continuing_subword_prefix", &b->prefix, &b->prefix_len, err)) ||
        (rc = tok_model_str(t, m, "end_of_word_suffix", &b->suffix, &b->suffix_len, err)) ||
        (rc = tok_model_vocab(t, cJSON_GetObjectItemCaseSensitive(m, "vocab"), err)))
        return rc;
    for (int i = 0; i < 256; i++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", i);
        b->byte_ids[i] = tok_strmap_get(&b->vocab, s, 6);
    }
    return tok_bpe_build_merges(t, merges, err);
}

/* resolve one legacy "a b" merge line; multi-space lines are disambiguated
 * against the vocabulary like tokenizers >= 0.22 (exactly one cut must give a,
 * b and a+b in the vocabulary). Returns the cut offset or an error. */
static int legacy_cut(const tm_tokenizer *t, const char *s, size_t n, size_t idx, size_t *cut, tm_err *err)
{
    size_t spaces = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ' && spaces++ == 0) first = i;
    if (spaces == 0)
        return tm_errf(err, TM_E_FORMAT, "%s: model.merges[%zu]: '%.64s' is not two tokens separated by a space", t->name,
                       idx, s);
    if (spaces == 1) {
        *cut = first;
        return TM_OK;
    }
    int found = 0;
    tok_buf tmp = {0};
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ') continue;
        if (tok_strmap_get(&t->model.vocab, s, i) < 0 || tok_strmap_get(&t->model.vocab, s + i + 1, n - i - 1) < 0) continue;
        tmp.len = 0;
        if (tok_buf_append(&tmp, s, i) || tok_buf_append(&tmp, s + i + 1, n - i - 1)) {
            tok_buf_free(&tmp);
            return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        }
        if (tok_strmap_get(&t->model.vocab, tmp.p, tmp.len) < 0) continue;
        if (found++) break;
        *cut = i;
    }
    tok_buf_free(&tmp);
    if (found == 1) return TM_OK;
    return tm_errf(err, TM_E_FORMAT, "%s: model.merges[%zu]: '%.64s' %s", t->name, idx, s,
                   found ? "is ambiguous (several splits are in the vocabulary)"
                         : "cannot be split into two vocabulary tokens");
}

int tok_bpe_build_merges(tm_tokenizer *t, const void *merges_json, tm_err *err)
{
    const cJSON *merges = merges_json;
    tok_model *b = &t->model;
    if (tok_pairmap_init(&b->merges, (size_t)cJSON_GetArraySize(merges)) != TM_OK)
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    tok_buf joined = {0};
    size_t idx = 0;
    int rc = TM_OK;
    for (const cJSON *e = merges->child; e; e = e->next, idx++) {
        const char *a, *bb;
        size_t al, bl;
        if (cJSON_IsString(e)) {
            size_t n = strlen(e->valuestring), cut = 0;
            if ((rc = legacy_cut(t, e->valuestring, n, idx, &cut, err))) break;
            a = e->valuestring;
            al = cut;
            bb = e->valuestring + cut + 1;
            bl = n - cut - 1;
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) {
            a = e->child->valuestring;
            al = strlen(a);
            bb = e->child->next->valuestring;
            bl = strlen(bb);
        } else {
            rc = tm_errf(err, TM_E_FORMAT, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", t->name, idx);
            break;
        }
        int32_t ia = tok_strmap_get(&b->vocab, a, al), ib = tok_strmap_get(&b->vocab, bb, bl);
        if (ia < 0 || ib < 0) {
            rc = tm_errf(err, TM_E_FORMAT, "%s: model.merges[%zu]: token '%.*s' is not in model.vocab", t->name, idx,
                         (int)(ia < 0 ? (al > 64 ? 64 : al) : (bl > 64 ? 64 : bl)), ia < 0 ? a : bb);
            break;
        }
        if (bl < b->prefix_len || (b->prefix_len && bl > b->prefix_len && (bb[b->prefix_len] & 0xC0) == 0x80)) {
            rc = tm_errf(err, TM_E_FORMAT, "%s: model.merges[%zu]: token '%.64s' is shorter than continuing_subword_prefix",
                         t->name, idx, bb);
            break;
        }
        joined.len = 0;
        if (tok_buf_append(&joined, a, al) || tok_buf_append(&joined, bb + b->prefix_len, bl - b->prefix_len)) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
            break;
        }
        int32_t inew = tok_strmap_get(&b->vocab, joined.p, joined.len);
        if (inew < 0) {
            rc = tm_errf(err, TM_E_FORMAT, "%s: model.merges[%zu]: merged token '%.64s' is not in model.vocab", t->name, idx,
                         joined.p);
            break;
        }
        if (tok_pairmap_put(&b->merges, ia, ib, (uint32_t)idx, inew) != TM_OK) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
            break;
        }
    }
    tok_buf_free(&joined);
    return rc;
}

/* ---- encoding ------------------------------------------------------------ */

static int sym_push(tok_work *w, int32_t id, uint32_t len)
{
    if (w->n_syms == w->cap_syms) {
        size_t cap = w->cap_syms ? w->cap_syms * 2 : 64;
        tok_sym *v = realloc(w->syms, cap * sizeof *v);
        if (!v) return TM_E_NOMEM;
        w->syms = v;
        w->cap_syms = cap;
    }
    int32_t i = (int32_t)w->n_syms++;
    w->syms[i] = (tok_sym){id, i - 1, -1, len};
    if (i > 0) w->syms[i - 1].next = i;
    return TM_OK;
}

static inline int heap_less(const tok_heap_ent *a, const tok_heap_ent *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(tok_work *w, tok_heap_ent e)
{
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        tok_heap_ent *v = realloc(w->heap, cap * sizeof *v);
        if (!v) return TM_E_NOMEM;
        w->heap = v;
        w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = e;
    return TM_OK;
}

static tok_heap_ent heap_pop(tok_work *w)
{
    tok_heap_ent top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!heap_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static int merge_all(const tok_model *b, tok_work *w)
{
    w->n_heap = 0;
    for (size_t i = 0; i + 1 < w->n_syms; i++) {
        const tok_pair_slot *m = tok_pairmap_get(&b->merges, w->syms[i].id, w->syms[i + 1].id);
        if (m && heap_push(w, (tok_heap_ent){m->rank, (uint32_t)i, m->new_id})) return TM_E_NOMEM;
    }
    tok_sym *s = w->syms;
    while (w->n_heap) {
        tok_heap_ent top = heap_pop(w);
        s = w->syms;
        tok_sym *cur = &s[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        int32_t next_pos = cur->next;
        tok_sym right = s[next_pos];
        const tok_pair_slot *m = tok_pairmap_get(&b->merges, cur->id, right.id);
        if (!m || m->new_id != top.new_id) continue; /* stale entry */
        cur->id = top.new_id;
        cur->len += right.len;
        cur->next = right.next;
        s[next_pos].len = 0;
        if (right.next >= 0) s[right.next].prev = (int32_t)top.pos;
        if (cur->prev >= 0) {
            const tok_pair_slot *pm = tok_pairmap_get(&b->merges, s[cur->prev].id, cur->id);
            if (pm && heap_push(w, (tok_heap_ent){pm->rank, (uint32_t)cur->prev, pm->new_id})) return TM_E_NOMEM;
        }
        s = w->syms;
        cur = &s[top.pos];
        if (cur->next >= 0) {
            const tok_pair_slot *nm = tok_pairmap_get(&b->merges, cur->id, s[cur->next].id);
            if (nm && heap_push(w, (tok_heap_ent){nm->rank, top.pos, nm->new_id})) return TM_E_NOMEM;
        }
    }
    return TM_OK;
}

/* remember the ids w->ids[from..] produced for word s[0..n) */
static int cache_put(tok_work *w, const char *s, size_t n, size_t from)
{
    tok_cache *c = &w->cache;
    size_t k = w->n_ids - from;
    if (c->n_ent >= TOK_CACHE_MAX_ENTRIES) return TM_OK;
    if (!c->map.slots && tok_strmap_init(&c->map, 1024)) return TM_E_NOMEM;
    if (c->n_ent == c->cap_ent) {
        size_t cap = c->cap_ent ? c->cap_ent * 2 : 1024;
        uint32_t *o = realloc(c->ent_off, cap * sizeof *o);
        if (!o) return TM_E_NOMEM;
        c->ent_off = o;
        uint32_t *l = realloc(c->ent_len, cap * sizeof *l);
        if (!l) return TM_E_NOMEM;
        c->ent_len = l;
        c->cap_ent = cap;
    }
    if (c->n_ids + k > c->cap_ids) {
        size_t cap = c->cap_ids ? c->cap_ids * 2 : 4096;
        while (cap < c->n_ids + k) cap *= 2;
        int32_t *v = realloc(c->ids, cap * sizeof *v);
        if (!v) return TM_E_NOMEM;
        c->ids = v;
        c->cap_ids = cap;
    }
    char *key = tok_arena_strndup(&c->keys, s, n);
    if (!key || tok_strmap_put(&c->map, key, n, (int32_t)c->n_ent)) return TM_E_NOMEM;
    if (k) memcpy(c->ids + c->n_ids, w->ids + from, k * sizeof *c->ids);
    c->ent_off[c->n_ent] = (uint32_t)c->n_ids;
    c->ent_len[c->n_ent] = (uint32_t)k;
    c->n_ids += k;
    c->n_ent++;
    return TM_OK;
}

static int bpe_word(const tok_model *b, tok_work *w, const char *s, size_t n, tm_err *err);

int tok_bpe_encode(const tok_model *b, tok_work *w, const char *s, size_t n, tm_err *err)
{
    if (n == 0) return TM_OK;
    if (b->ignore_merges) {
        int32_t id = tok_strmap_get(&b->vocab, s, n);
        if (id >= 0) return tok_work_push_id(w, id) ? tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name) : TM_OK;
    }
    if (n > TOK_CACHE_MAX_WORD) return bpe_word(b, w, s, n, err);
    tok_cache *c = &w->cache;
    int32_t e = c->map.slots ? tok_strmap_get(&c->map, s, n) : -1;
    if (e >= 0) {
        for (uint32_t i = 0; i < c->ent_len[e]; i++)
            if (tok_work_push_id(w, c->ids[c->ent_off[e] + i])) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
        return TM_OK;
    }
    size_t from = w->n_ids;
    int rc = bpe_word(b, w, s, n, err);
    if (!rc && cache_put(w, s, n, from)) rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
    return rc;
}

/* one word, no cache */
static int bpe_word(const tok_model *b, tok_work *w, const char *s, size_t n, tm_err *err)
{
    w->n_syms = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    int have_unk = 0;
    char small[64];
    tok_buf big = {0};
    int rc = TM_OK;
    for (size_t i = 0; i < n;) {
        size_t cl = tok_utf8_len((unsigned char)s[i]);
        if (cl > n - i) cl = n - i;
        const char *key = s + i;
        size_t kl = cl;
        int first = i == 0, last = i + cl == n;
        if ((b->prefix && !first) || (b->suffix && last)) {
            size_t need = cl + (b->prefix && !first ? b->prefix_len : 0) + (b->suffix && last ? b->suffix_len : 0);
            char *dst = small;
            if (need > sizeof small) {
                big.len = 0;
                if (tok_buf_reserve(&big, need)) goto oom;
                dst = big.p;
            }
            size_t o = 0;
            if (b->prefix && !first) memcpy(dst, b->prefix, b->prefix_len), o += b->prefix_len;
            memcpy(dst + o, s + i, cl), o += cl;
            if (b->suffix && last) memcpy(dst + o, b->suffix, b->suffix_len), o += b->suffix_len;
            key = dst;
            kl = o;
        }
        int32_t id = tok_strmap_get(&b->vocab, key, kl);
        if (id >= 0) {
            if (have_unk) {
                if (sym_push(w, unk_id, unk_len)) goto oom;
                have_unk = 0;
            }
            if (sym_push(w, id, (uint32_t)cl)) goto oom;
        } else {
            int done = 0;
            if (b->byte_fallback) {
                size_t k = 0;
                while (k < kl && b->byte_ids[(unsigned char)key[k]] >= 0) k++;
                if (k == kl) {
                    for (k = 0; k < kl; k++)
                        if (sym_push(w, b->byte_ids[(unsigned char)key[k]], 1)) goto oom;
                    done = 1;
                }
            }
            if (!done && b->unk) {
                int32_t uid = tok_strmap_get(&b->vocab, b->unk, strlen(b->unk));
                if (uid < 0) {
                    rc = tm_errf(err, TM_E_FORMAT, "%s: model.unk_token: '%.64s' is not in model.vocab", w->name, b->unk);
                    goto out;
                }
                if (have_unk && b->fuse_unk) {
                    unk_len += (uint32_t)cl;
                } else {
                    if (have_unk && sym_push(w, unk_id, unk_len)) goto oom;
                    unk_id = uid;
                    unk_len = (uint32_t)cl;
                    have_unk = 1;
                }
            }
            /* no vocabulary entry, no fallback, no unk: the character is dropped (as HF) */
        }
        i += cl;
    }
    if (have_unk && sym_push(w, unk_id, unk_len)) goto oom;
    if (merge_all(b, w)) goto oom;
    for (size_t i = 0; i < w->n_syms; i++)
        if (w->syms[i].len && tok_work_push_id(w, w->syms[i].id)) goto oom;
out:
    tok_buf_free(&big);
    return rc;
oom:
    tok_buf_free(&big);
    return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
}
