/* text/tok_encode.c: tm_tok_encode, the post-processor, and tm_tok_bench.
 *
 * HF `TokenizerImpl::encode_single_sequence` + `post_process`:
 *   1. split the raw text on non-normalized added tokens;
 *   2. each remaining gap: normalize, then split on normalized added tokens;
 *   3. each remaining piece: pre-tokenize, then BPE every pre-token;
 *   4. if add_special, apply the post-processor template (e.g. BOS + ids).
 * Empty pieces are dropped at every step, as `PreTokenizedString::split` does. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/tok_impl.h"

static int oom(const tm_tokenizer *t, tm_err *err)
{
    return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
}

/* pre-tokenize one piece and run the model on every pre-token */
static int encode_piece(const tm_tokenizer *t, tok_work *w, tok_piece p, tm_err *err)
{
    w->pa.n = 0;
    if (tok_pieces_push(&w->pa, p)) return oom(t, err);
    tok_pieces *list = &w->pa;
    int rc;
    if (t->pretok) {
        if ((rc = tok_pretokenize(t, t->pretok, w, &w->pa, &w->pb, err))) return rc;
        list = &w->pb;
    }
    for (size_t i = 0; i < list->n; i++) {
        const tok_piece *q = &list->v[i];
        if ((rc = tok_model_encode(&t->model, w, w->text.p + q->off, q->len, err))) return rc;
    }
    return TM_OK;
}

/* one gap between raw added tokens: normalize, split on normalized added tokens, encode */
static int encode_gap(const tm_tokenizer *t, tok_work *w, const char *s, size_t n, int at_start, tok_matches *subs,
                      tm_err *err)
{
    tok_piece p;
    w->text.len = 0;
    int rc = tok_work_add_text(w, s, n, &p, err);
    if (rc) return rc;
    p.ins = 0;
    p.at_start = at_start;
    if (t->normalizer && (rc = tok_normalize(t, t->normalizer, w, &p, err))) return rc;
    if (p.len == 0) return TM_OK;
    if (!t->trie_norm.n_patterns) return encode_piece(t, w, p, err);
    if (tok_added_split(t, &t->trie_norm, w->text.p + p.off, p.len, subs)) return oom(t, err);
    for (size_t i = 0; i < subs->n; i++) {
        const tok_match *m = &subs->v[i];
        if (m->is_match) {
            if (tok_work_push_id(w, m->is_match - 1)) return oom(t, err);
            continue;
        }
        if (m->end <= m->start) continue;
        tok_piece q = {p.off + m->start, m->end - m->start, 0, p.at_start && m->start <= p.ins};
        q.ins = p.ins > m->start ? p.ins - m->start : 0;
        if (q.ins > q.len) q.ins = q.len;
        if ((rc = encode_piece(t, w, q, err))) return rc;
    }
    return TM_OK;
}

/* apply a post-processor to w->ids[from..] */
static int post_process(const tm_tokenizer *t, const tok_post *pp, tok_work *w, tm_err *err)
{
    if (pp->type == TOK_POST_SEQUENCE) {
        for (size_t i = 0; i < pp->n_items; i++) {
            int rc = post_process(t, &pp->items[i], w, err);
            if (rc) return rc;
        }
        return TM_OK;
    }
    if (pp->type != TOK_POST_TEMPLATE) return TM_OK;
    size_t n = w->n_ids, extra = 0;
    for (size_t i = 0; i < pp->n_tmpl; i++) extra += pp->tmpl[i] < 0 ? n : 1;
    int32_t *v = malloc((extra + 1) * sizeof *v);
    if (!v) return oom(t, err);
    size_t k = 0;
    for (size_t i = 0; i < pp->n_tmpl; i++) {
        if (pp->tmpl[i] >= 0) v[k++] = pp->tmpl[i];
        else {
            if (n) memcpy(v + k, w->ids, n * sizeof *v);
            k += n;
        }
    }
    free(w->ids);
    w->ids = v;
    w->n_ids = k;
    w->cap_ids = extra + 1;
    return TM_OK;
}

int tm_tok_encode(const tm_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n_ids,
                  tm_err *err)
{
    *ids = NULL;
    *n_ids = 0;
    size_t bad;
    if (!text && len) return tm_errf(err, TM_E_INVALID, "%s: encode: NULL text", t->name);
    if (!tok_utf8_valid(text, len, &bad))
        return tm_errf(err, TM_E_INVALID, "%s: encode: input text is not valid UTF-8 (byte %zu)", t->name, bad);
    tok_work w;
    int rc = tok_work_init(&w, len, t->name, err);
    if (rc) return rc;
    tok_matches segs = {0}, subs = {0};
    if (tok_added_split(t, &t->trie_raw, text ? text : "", len, &segs)) rc = oom(t, err);
    for (size_t i = 0; i < segs.n && !rc; i++) {
        const tok_match *m = &segs.v[i];
        if (m->is_match) {
            if (tok_work_push_id(&w, m->is_match - 1)) rc = oom(t, err);
        } else if (m->end > m->start) {
            rc = encode_gap(t, &w, text + m->start, m->end - m->start, m->start == 0, &subs, err);
        }
    }
    if (!rc && add_special && t->post) rc = post_process(t, t->post, &w, err);
    free(segs.v);
    free(subs.v);
    if (!rc) {
        *ids = w.ids;
        *n_ids = w.n_ids;
        w.ids = NULL;
    }
    tok_work_free(&w);
    return rc;
}

double tm_tok_bench(const tm_tokenizer *t, const char *text, size_t len, int reps, tm_err *err)
{
    struct timespec a, b;
    if (reps < 1) reps = 1;
    /* CPU time of this thread: "MB/s on one core", whatever else the machine runs */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int r = 0; r < reps; r++) {
        int32_t *ids;
        size_t n;
        if (tm_tok_encode(t, text, len, 0, &ids, &n, err) != TM_OK) return -1.0;
        free(ids);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    return s > 0 ? (double)len * reps / s / 1e6 : 0.0;
}
