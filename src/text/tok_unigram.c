/* text/tok_unigram.c: the Unigram model (HF `models::unigram`, SentencePiece's
 * unigram language model: T5, XLM-R, mBART, ALBERT style tokenizers).
 *
 * model.vocab is an array of [piece, log probability]; a piece's id is its
 * index. A pre-token is segmented by Viterbi over its characters (HF
 * `Unigram::encode_optimized`):
 *
 *   best[0] = 0; for each character start p, in order:
 *     every piece that prefixes s[p..] (byte trie, shortest first) ends at e:
 *       best[e] = max(best[e], best[p] + score(piece))   (ties: the first found)
 *     if no piece is exactly the character at p: an unk node over it,
 *       scored (the lowest score - 10)
 *   backtrack from n; consecutive unk nodes fuse into one string (HF's
 *   fuse_unk, always on for Unigram).
 *
 * Each resulting string is then looked up as HF's `tokenize` does: a
 * vocabulary piece is its id; a fused unk string (not a piece) is its bytes
 * as "<0xXX>" pieces when byte_fallback is on and all of them exist, else
 * unk_id. Scores are doubles, added in HF's order, so ties resolve the same.
 * The lattice is one node per byte of the pre-token (tok_work.uni). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

#define UNI_UNK_PENALTY 10.0 /* HF K_UNK_PENALTY */

typedef struct tok_uni_node {
    double score; /* best path score ending here */
    int32_t start; /* that path's last piece starts here; -1 = not reached */
    int32_t id;    /* and is this id */
    int32_t next;  /* after the backtrack: where the best path's piece starting here ends */
} tok_uni_node;

static int oom(const tm_tokenizer *t, tm_err *err)
{
    return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
}

int tok_load_unigram(tm_tokenizer *t, const void *model_json, tm_err *err)
{
    const cJSON *m = model_json, *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    tok_model *u = &t->model;
    u->type = TOK_MODEL_UNIGRAM;
    u->unk_id = -1;
    int rc = tok_model_bool(t, m, "byte_fallback", &u->byte_fallback, err);
    if (rc) return rc;
    if (!cJSON_IsArray(vocab)) return tm_errf(err, TM_E_FORMAT, "%s: model.vocab: missing or not an array", t->name);
    size_t nv = (size_t)cJSON_GetArraySize(vocab);
    if (nv == 0) return tm_errf(err, TM_E_FORMAT, "%s: model.vocab: empty (Unigram needs pieces)", t->name);
    if (nv >= TOK_MAX_ID) return tm_errf(err, TM_E_LIMIT, "%s: model.vocab: %zu pieces", t->name, nv);
    u->upiece = calloc(nv, sizeof *u->upiece);
    u->ulen = calloc(nv, sizeof *u->ulen);
    u->score = calloc(nv, sizeof *u->score);
    if (!u->upiece || !u->ulen || !u->score || tok_strmap_init(&u->vocab, nv) != TM_OK) return oom(t, err);
    double lowest = 0;
    size_t i = 0;
    for (const cJSON *e = vocab->child; e; e = e->next, i++) {
        const cJSON *p = cJSON_GetArrayItem(e, 0), *s = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsString(p) || !cJSON_IsNumber(s))
            return tm_errf(err, TM_E_FORMAT, "%s: model.vocab[%zu]: expected [piece, score]", t->name, i);
        size_t len = strlen(p->valuestring);
        if (!tok_utf8_valid(p->valuestring, len, NULL))
            return tm_errf(err, TM_E_FORMAT, "%s: model.vocab[%zu]: the piece is not valid UTF-8", t->name, i);
        if (s->valuedouble != s->valuedouble || s->valuedouble > 1e300 || s->valuedouble < -1e300)
            return tm_errf(err, TM_E_FORMAT, "%s: model.vocab[%zu]: the score is not a finite number", t->name, i);
        char *k = tok_arena_strndup(&t->arena, p->valuestring, len);
        if (!k || tok_strmap_put(&u->vocab, k, len, (int32_t)i) != TM_OK) return oom(t, err);
        u->upiece[i] = k;
        u->ulen[i] = (uint32_t)len;
        u->score[i] = s->valuedouble;
        if (i == 0 || s->valuedouble < lowest) lowest = s->valuedouble;
    }
    u->n_upiece = nv;
    u->vocab_entries = nv; /* HF get_vocab_size: the array's length, duplicates included */
    u->unk_score = lowest - UNI_UNK_PENALTY;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_id");
    if (unk && !cJSON_IsNull(unk)) {
        if (!cJSON_IsNumber(unk) || unk->valuedouble < 0 || unk->valuedouble >= (double)nv ||
            unk->valuedouble != (double)(int32_t)unk->valuedouble)
            return tm_errf(err, TM_E_FORMAT, "%s: model.unk_id: expected an index into model.vocab (0 to %zu)", t->name,
                           nv - 1);
        u->unk_id = (int32_t)unk->valuedouble;
    }
    /* the trie maps every piece to the vocabulary's id for it (the last of duplicates, as HF's token_to_ids) */
    for (i = 0; i < nv; i++)
        if (tok_trie_add(&u->utrie, u->upiece[i], u->ulen[i], tok_strmap_get(&u->vocab, u->upiece[i], u->ulen[i])))
            return oom(t, err);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        u->byte_ids[b] = tok_strmap_get(&u->vocab, s, 6);
    }
    return TM_OK;
}

void tok_unigram_free(tok_model *m)
{
    free(m->upiece);
    free(m->ulen);
    free(m->score);
    tok_trie_free(&m->utrie);
}

/* one segmented string s[0..n) (not a piece, or a fused unk run) as HF's tokenize: its id, its bytes'
   <0xXX> ids (byte_fallback), or unk_id */
static int emit_unknown(const tok_model *u, tok_work *w, const char *s, size_t n, tm_err *err)
{
    int32_t id = tok_strmap_get(&u->vocab, s, n);
    if (id >= 0) return tok_work_push_id(w, id) ? tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name) : TM_OK;
    size_t k = 0;
    if (u->byte_fallback)
        while (k < n && u->byte_ids[(unsigned char)s[k]] >= 0) k++;
    if (u->byte_fallback && k == n) {
        for (k = 0; k < n; k++)
            if (tok_work_push_id(w, u->byte_ids[(unsigned char)s[k]])) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
        return TM_OK;
    }
    if (u->unk_id < 0)
        return tm_errf(err, TM_E_FORMAT, "%s: model.unk_id: the text has characters no piece covers, and the model has no "
                       "unk_id", w->name);
    return tok_work_push_id(w, u->unk_id) ? tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name) : TM_OK;
}

int tok_unigram_encode(const tok_model *u, tok_work *w, const char *s, size_t n, tm_err *err)
{
    if (n == 0) return TM_OK;
    if (n > (size_t)INT32_MAX - 1) return tm_errf(err, TM_E_LIMIT, "%s: a pre-token of %zu bytes", w->name, n);
    if (w->cap_uni < n + 1) {
        tok_uni_node *v = realloc(w->uni, (n + 1) * sizeof *v);
        if (!v) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
        w->uni = v;
        w->cap_uni = n + 1;
    }
    tok_uni_node *best = w->uni;
    for (size_t i = 0; i <= n; i++) best[i] = (tok_uni_node){0, -1, -1, -1};
    best[0].start = 0;
    const tok_trie *tr = &u->utrie;
    for (size_t p = 0; p < n;) {
        size_t mblen = tok_utf8_len((unsigned char)s[p]);
        if (mblen > n - p) mblen = n - p;
        double base = best[p].score;
        int single = 0;
        int32_t node = 0;
        for (size_t k = p; k < n && tr->n_nodes; k++) { /* every piece that prefixes s[p..], shortest first */
            const tok_pair_slot *e = tok_pairmap_get(&tr->edges, node, (unsigned char)s[k]);
            if (!e) break;
            node = e->new_id;
            int32_t id = tr->node_id[node];
            if (id < 0) continue;
            double cand = base + u->score[id];
            tok_uni_node *t = &best[k + 1];
            if (t->start < 0 || cand > t->score) *t = (tok_uni_node){cand, (int32_t)p, id, -1};
            if (k + 1 - p == mblen) single = 1;
        }
        if (!single) { /* the character as unk (id -2 where the model has no unk_id: an error if it is kept) */
            double cand = base + u->unk_score;
            tok_uni_node *t = &best[p + mblen];
            if (t->start < 0 || cand > t->score) *t = (tok_uni_node){cand, (int32_t)p, u->unk_id >= 0 ? u->unk_id : -2, -1};
        }
        p += mblen;
    }
    /* backtrack, linking each piece's start to its end, then walk the path in text order */
    for (size_t e = n; e > 0; e = (size_t)best[e].start) best[best[e].start].next = (int32_t)e;
    int rc = TM_OK;
    for (size_t st = 0; st < n && !rc;) {
        size_t e = (size_t)best[st].next;
        int32_t id = best[e].id;
        if (id != u->unk_id && id != -2) { /* a piece */
            rc = tok_work_push_id(w, id) ? tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name) : TM_OK;
            st = e;
            continue;
        }
        while (e < n && (best[best[e].next].id == u->unk_id || best[best[e].next].id == -2)) e = (size_t)best[e].next;
        rc = emit_unknown(u, w, s + st, e - st, err); /* the run of unk nodes, fused */
        st = e;
    }
    return rc;
}
