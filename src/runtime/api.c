/* runtime/api.c: the public API of include/tandem.h over the runtime. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "model/model.h"
#include "runtime/rt_model.h"
#include "runtime/session.h"
#include "tandem.h"
#include "text/tokenizer.h"

struct tandem_model {
    tm_rt_model *rm;
};

struct tandem_session {
    tm_session *s;
};

static int fail(tandem_status *st, const tm_err *e)
{
    if (st) {
        st->code = e->code;
        memcpy(st->msg, e->msg, sizeof st->msg);
    }
    return e->code;
}

static int ok(tandem_status *st)
{
    if (st) {
        st->code = 0;
        st->msg[0] = '\0';
    }
    return 0;
}

int tandem_model_open(tandem_model **out, const char *path, tandem_status *st)
{
    tm_err e = {0};
    *out = NULL;
    tandem_model *m = calloc(1, sizeof *m);
    if (!m) return fail(st, &(tm_err){TM_E_NOMEM, "out of memory"});
    if (tm_rt_model_open(&m->rm, path, &e) != TM_OK) {
        free(m);
        return fail(st, &e);
    }
    *out = m;
    return ok(st);
}

void tandem_model_free(tandem_model *m)
{
    if (!m) return;
    tm_rt_model_free(m->rm);
    free(m);
}

void tandem_model_get_info(const tandem_model *m, tandem_model_info *info)
{
    const tm_model *d = m->rm->decode;
    memset(info, 0, sizeof *info);
    info->architecture = d->arch_name;
    info->vocab = d->V;
    info->hidden = d->D;
    info->layers = d->L;
    info->heads = d->H;
    info->kv_heads = d->Hk;
    info->head_dim = d->Dh;
    info->ffn = d->F;
    info->max_ctx = d->max_pos;
    int64_t n = tm_tensor_numel(&d->embed) + d->D;
    if (!d->tied) n += tm_tensor_numel(&d->lm_head);
    for (int i = 0; i < d->n_spec; i++)
        if (d->spec[i].slot && strncmp(d->spec[i].name, "model.layers.", 13) == 0) {
            int64_t k = 1;
            for (int j = 0; j < d->spec[i].ndim; j++) k *= d->spec[i].shape[j];
            n += k;
        }
    info->n_params = n;
    info->prefill_encoding = tm_dtype_name(m->rm->prefill_enc);
    info->decode_encoding = tm_dtype_name(m->rm->decode_enc);
    info->is_package = m->rm->pkg != NULL;
    info->temperature = m->rm->has_sampling_defaults ? m->rm->temperature : -1.0f;
    info->top_p = m->rm->has_sampling_defaults ? m->rm->top_p : 0.0f;
    info->top_k = m->rm->has_sampling_defaults ? m->rm->top_k : 0;
}

int tandem_tokenize(const tandem_model *m, const char *text, size_t len, int add_special, int32_t **ids,
                    size_t *n_ids, tandem_status *st)
{
    tm_err e = {0};
    if (tm_tok_encode(m->rm->tok, text, len, add_special, ids, n_ids, &e) != TM_OK) return fail(st, &e);
    return ok(st);
}

int tandem_detokenize(const tandem_model *m, const int32_t *ids, size_t n, int skip_special, char **text,
                      tandem_status *st)
{
    tm_err e = {0};
    size_t len;
    if (tm_tok_decode(m->rm->tok, ids, n, skip_special, text, &len, &e) != TM_OK) return fail(st, &e);
    return ok(st);
}

void tandem_session_opts_default(tandem_session_opts *o)
{
    memset(o, 0, sizeof *o);
    o->route = TANDEM_ROUTE_AUTO;
    o->stateless = 1;
}

int tandem_session_new(tandem_session **out, tandem_model *m, const tandem_session_opts *o, tandem_status *st)
{
    tm_err e = {0};
    *out = NULL;
    tandem_session *s = calloc(1, sizeof *s);
    if (!s) return fail(st, &(tm_err){TM_E_NOMEM, "out of memory"});
    if (tm_session_new(&s->s, m->rm, o, &e) != TM_OK) {
        free(s);
        return fail(st, &e);
    }
    *out = s;
    return ok(st);
}

void tandem_session_free(tandem_session *s)
{
    if (!s) return;
    tm_session_free(s->s);
    free(s);
}

void tandem_request_default(tandem_request *r)
{
    memset(r, 0, sizeof *r);
    r->max_tokens = 128;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->repetition_penalty = 1.0f;
}

int tandem_generate(tandem_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud,
                    tandem_stats *stats, tandem_status *st)
{
    tm_err e = {0};
    tandem_stats tmp;
    if (tm_session_generate(s->s, r, on_text, ud, stats ? stats : &tmp, &e) != TM_OK) return fail(st, &e);
    return ok(st);
}

int tandem_submit(tandem_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud, tandem_handle **h,
                  tandem_status *st)
{
    tm_err e = {0};
    tm_req *q;
    if (tm_session_submit(s->s, r, on_text, ud, &q, &e) != TM_OK) return fail(st, &e);
    *h = (tandem_handle *)q;
    return ok(st);
}

void tandem_cancel(tandem_handle *h) { tm_req_cancel((tm_req *)h); }

int tandem_wait(tandem_handle *h, tandem_stats *stats, tandem_status *st)
{
    tm_err e = {0};
    tandem_stats tmp;
    if (tm_req_wait((tm_req *)h, stats ? stats : &tmp, &e) != TM_OK) return fail(st, &e);
    return ok(st);
}
