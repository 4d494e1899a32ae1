/* text/tok_wordlevel.c: the WordLevel model (HF `models::wordlevel`): each
 * pre-token is one vocabulary entry, or the unk token ("<unk>" where
 * model.unk_token is absent); an unk token missing from the vocabulary is an
 * error once a pre-token needs it (HF Error::MissingUnkToken). */
#include <cjson/cJSON.h>
#include <string.h>

#include "text/tok_impl.h"

int tok_load_wordlevel(tm_tokenizer *t, const void *model_json, tm_err *err)
{
    const cJSON *m = model_json;
    tok_model *wl = &t->model;
    wl->type = TOK_MODEL_WORDLEVEL;
    int rc = tok_model_str(t, m, "unk_token", &wl->unk, NULL, err);
    if (rc) return rc;
    if (!wl->unk && !(wl->unk = tok_arena_strndup(&t->arena, "<unk>", 5)))
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", t->name);
    return tok_model_vocab(t, cJSON_GetObjectItemCaseSensitive(m, "vocab"), err);
}

int tok_wordlevel_encode(const tok_model *wl, tok_work *w, const char *s, size_t n, tm_err *err)
{
    int32_t id = tok_strmap_get(&wl->vocab, s, n);
    if (id < 0 && (id = tok_strmap_get(&wl->vocab, wl->unk, strlen(wl->unk))) < 0)
        return tm_errf(err, TM_E_FORMAT, "%s: model.unk_token: '%.64s' is not in model.vocab", w->name, wl->unk);
    return tok_work_push_id(w, id) ? tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name) : TM_OK;
}
