/* text/tok_added.c: added tokens (HF `AddedVocabulary`).
 *
 * Loading replays HF's deserialization: every entry of `added_tokens` is
 * added in order with `add_tokens`, which keeps an id the content already has
 * (in the added map or the model vocabulary) and otherwise assigns the next
 * free id; the JSON `id` field is only a cross-check in HF and is ignored here
 * as well. Matching uses a byte trie with leftmost-longest semantics (like
 * the aho-corasick automaton HF builds), one trie for tokens matched in the
 * raw text and one, holding normalized contents, for `normalized` tokens. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

/* ---- trie ---------------------------------------------------------------- */

static int trie_node(tok_trie *tr)
{
    if (tr->n_nodes == tr->cap_nodes) {
        size_t cap = tr->cap_nodes ? tr->cap_nodes * 2 : 64;
        int32_t *v = realloc(tr->node_id, cap * sizeof *v);
        if (!v) return -1;
        tr->node_id = v;
        tr->cap_nodes = cap;
    }
    tr->node_id[tr->n_nodes] = -1;
    return (int)tr->n_nodes++;
}

int tok_trie_add(tok_trie *tr, const char *s, size_t n, int32_t id)
{
    if (n == 0) return TM_OK; /* HF never matches an empty token */
    if (!tr->edges.slots && tok_pairmap_init(&tr->edges, 64) != TM_OK) return TM_E_NOMEM;
    if (tr->n_nodes == 0 && trie_node(tr) < 0) return TM_E_NOMEM;
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const tok_pair_slot *e = tok_pairmap_get(&tr->edges, node, c);
        if (e) {
            node = e->new_id;
            continue;
        }
        int nn = trie_node(tr);
        if (nn < 0 || tok_pairmap_put(&tr->edges, node, c, 0, nn) != TM_OK) return TM_E_NOMEM;
        node = nn;
    }
    if (tr->node_id[node] < 0) tr->node_id[node] = id; /* first pattern wins, as aho-corasick */
    tr->first_byte[(unsigned char)s[0]] = 1;
    tr->n_patterns++;
    return TM_OK;
}

void tok_trie_free(tok_trie *tr)
{
    tok_pairmap_free(&tr->edges);
    free(tr->node_id);
    memset(tr, 0, sizeof *tr);
}

/* longest token starting at s[0..n): its length, *id; 0 if none */
static size_t trie_longest(const tok_trie *tr, const char *s, size_t n, int32_t *id)
{
    int32_t node = 0;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        const tok_pair_slot *e = tok_pairmap_get(&tr->edges, node, (unsigned char)s[i]);
        if (!e) break;
        node = e->new_id;
        if (tr->node_id[node] >= 0) {
            best = i + 1;
            *id = tr->node_id[node];
        }
    }
    return best;
}

/* ---- HF find_matches ----------------------------------------------------- */

static const tok_added *added_of(const tm_tokenizer *t, int32_t id)
{
    if (id < 0 || (size_t)id >= t->n_added_index || t->added_index[id] < 0) return NULL;
    return &t->added[t->added_index[id]];
}

/* last / first code point of s[0..n) (valid UTF-8, n > 0) */
static uint32_t last_cp(const char *s, size_t n)
{
    size_t i = n - 1, adv;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return tok_utf8_dec(s + i, n - i, &adv);
}

int tok_added_split(const tm_tokenizer *t, const tok_trie *tr, const char *s, size_t n, tok_matches *out)
{
    out->n = 0;
    size_t start_offset = 0;
    if (tr->n_patterns) {
        size_t pos = 0;
        while (pos < n) {
            if (!tr->first_byte[(unsigned char)s[pos]]) {
                pos++;
                continue;
            }
            int32_t id = -1;
            size_t ml = trie_longest(tr, s + pos, n - pos, &id);
            if (!ml) {
                pos++;
                continue;
            }
            size_t start = pos, stop = pos + ml;
            pos = stop; /* the automaton resumes after the match, whatever happens next */
            const tok_added *a = added_of(t, id);
            if (!a) continue;
            if (a->single_word) {
                size_t adv;
                int start_space = start == 0 || !tok_is_word(last_cp(s, start));
                int stop_space = stop == n || !tok_is_word(tok_utf8_dec(s + stop, n - stop, &adv));
                if (!start_space || !stop_space) continue;
            }
            if (a->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    size_t k = ns - 1;
                    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
                    size_t adv;
                    if (!tok_is_whitespace(tok_utf8_dec(s + k, ns - k, &adv))) break;
                    ns = k;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) {
                while (stop < n) {
                    size_t adv;
                    if (!tok_is_whitespace(tok_utf8_dec(s + stop, n - stop, &adv))) break;
                    stop += adv;
                }
            }
            if (start_offset < start && tok_matches_push(out, start_offset, start, 0)) return TM_E_NOMEM;
            if (tok_matches_push(out, start, stop, id + 1)) return TM_E_NOMEM;
            start_offset = stop;
        }
    }
    if (start_offset < n && tok_matches_push(out, start_offset, n, 0)) return TM_E_NOMEM;
    return TM_OK;
}

/* ---- loading ------------------------------------------------------------- */

static int added_index_set(tm_tokenizer *t, int32_t id, int32_t idx)
{
    if ((size_t)id >= t->n_added_index) {
        size_t n = t->n_added_index ? t->n_added_index : 64;
        while (n <= (size_t)id) n *= 2;
        int32_t *v = realloc(t->added_index, n * sizeof *v);
        if (!v) return TM_E_NOMEM;
        for (size_t i = t->n_added_index; i < n; i++) v[i] = -1;
        t->added_index = v;
        t->n_added_index = n;
    }
    t->added_index[id] = idx;
    return TM_OK;
}

static int json_flag(const cJSON *o, const char *key, int dflt, uint8_t *out, const char *name, size_t i, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = (uint8_t)dflt;
        return TM_OK;
    }
    if (!cJSON_IsBool(v)) return tm_errf(err, TM_E_FORMAT, "%s: added_tokens[%zu].%s: expected true or false", name, i, key);
    *out = (uint8_t)cJSON_IsTrue(v);
    return TM_OK;
}

static int add_pattern(tm_tokenizer *t, const tok_added *tok, tm_err *err)
{
    int32_t id = tok_strmap_get(&t->added_map, tok->content, tok->len);
    if (!tok->normalized || !t->normalizer)
        return tok_trie_add(tok->normalized ? &t->trie_norm : &t->trie_raw, tok->content, tok->len, id)
                   ? tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name)
                   : TM_OK;
    /* normalized tokens match their normalized content */
    tok_work w;
    int rc = tok_work_init(&w, tok->len, t->name, err);
    if (rc) return rc;
    tok_piece p;
    if (!(rc = tok_work_add_text(&w, tok->content, tok->len, &p, err))) {
        p.ins = 0;
        p.at_start = 1;
        rc = tok_normalize(t, t->normalizer, &w, &p, err);
    }
    if (!rc && tok_trie_add(&t->trie_norm, w.text.p + p.off, p.len, id))
        rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    tok_work_free(&w);
    return rc;
}

int tok_load_added(tm_tokenizer *t, const void *added_json, tm_err *err)
{
    const cJSON *arr = added_json;
    if (!arr || cJSON_IsNull(arr)) return TM_OK;
    if (!cJSON_IsArray(arr)) return tm_errf(err, TM_E_FORMAT, "%s: added_tokens: expected an array", t->name);
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    /* the trie lists of HF: special tokens, then non-special ones, in order */
    tok_added *specials = calloc(n + 1, sizeof *specials), *plain = calloc(n + 1, sizeof *plain);
    size_t n_spec = 0, n_plain = 0;
    int rc = TM_OK;
    if (!specials || !plain || tok_strmap_init(&t->added_map, n) || tok_strmap_init(&t->special_set, n)) {
        rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        goto out;
    }
    t->added = calloc(n + 1, sizeof *t->added);
    if (!t->added) {
        rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
        goto out;
    }
    t->cap_added = n + 1;
    int32_t max_added = -1;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        tok_added tok = {0};
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsObject(e) || !cJSON_IsString(c)) {
            rc = tm_errf(err, TM_E_FORMAT, "%s: added_tokens[%zu].content: missing or not a string", t->name, i);
            goto out;
        }
        tok.len = strlen(c->valuestring);
        if (!tok_utf8_valid(c->valuestring, tok.len, NULL)) {
            rc = tm_errf(err, TM_E_FORMAT, "%s: added_tokens[%zu].content: not valid UTF-8", t->name, i);
            goto out;
        }
        if ((rc = json_flag(e, "special", 0, &tok.special, t->name, i, err)) ||
            (rc = json_flag(e, "single_word", 0, &tok.single_word, t->name, i, err)) ||
            (rc = json_flag(e, "lstrip", 0, &tok.lstrip, t->name, i, err)) ||
            (rc = json_flag(e, "rstrip", 0, &tok.rstrip, t->name, i, err)) ||
            (rc = json_flag(e, "normalized", !tok.special, &tok.normalized, t->name, i, err)))
            goto out;
        if (tok.len == 0) continue;
        tok.content = tok_arena_strndup(&t->arena, c->valuestring, tok.len);
        if (!tok.content) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
            goto out;
        }
        if (tok.special && tok_strmap_get(&t->special_set, tok.content, tok.len) < 0) {
            if (tok_strmap_put(&t->special_set, tok.content, tok.len, 1)) goto oom;
            specials[n_spec++] = tok;
        }
        /* skip an identical token already present */
        int32_t id = tok_strmap_get(&t->added_map, tok.content, tok.len);
        if (id >= 0) {
            const tok_added *old = added_of(t, id);
            if (old && old->single_word == tok.single_word && old->lstrip == tok.lstrip && old->rstrip == tok.rstrip &&
                old->normalized == tok.normalized && old->special == tok.special)
                continue;
        }
        if (id < 0) id = tok_strmap_get(&t->model.vocab, tok.content, tok.len);
        if (id < 0) {
            int32_t vs = (int32_t)t->model.vocab_entries;
            if (max_added < 0) id = vs;
            else id = (max_added >= vs || vs == 0) ? max_added + 1 : vs;
        }
        if (id >= TOK_MAX_ID) {
            rc = tm_errf(err, TM_E_LIMIT, "%s: added_tokens[%zu]: id %d is too large", t->name, i, (int)id);
            goto out;
        }
        if (id > max_added) max_added = id;
        tok.id = id;
        if (tok_strmap_put(&t->added_map, tok.content, tok.len, id)) goto oom;
        int32_t idx = id < (int32_t)t->n_added_index ? t->added_index[id] : -1;
        if (idx < 0) {
            idx = (int32_t)t->n_added++;
            if (added_index_set(t, id, idx)) goto oom;
        }
        t->added[idx] = tok;
        if (tok_strmap_get(&t->special_set, tok.content, tok.len) < 0) plain[n_plain++] = tok;
    }
    for (size_t k = 0; k < n_spec && !rc; k++) rc = add_pattern(t, &specials[k], err);
    for (size_t k = 0; k < n_plain && !rc; k++) rc = add_pattern(t, &plain[k], err);
out:
    free(specials);
    free(plain);
    return rc;
oom:
    rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    goto out;
}
