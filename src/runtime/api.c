/* runtime/api.c: the public API of include/tandem.h over the runtime. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/status.h"
#include "engine/ref/ref.h"
#include "model/model.h"
#include "quant/quant.h"
#include "runtime/bridge.h"
#include "runtime/kvcache.h"
#include "runtime/rt_model.h"
#include "runtime/session-impl.h"
#include "runtime/session.h"
#include "tandem.h"
#include "text/jinja.h"
#include "text/tokenizer.h"

_Static_assert((int)TANDEM_E_LIMIT == (int)TM_E_LIMIT && (int)TANDEM_E_TEMPLATE == (int)TM_E_TEMPLATE &&
                   (int)TANDEM_E_CHECKSUM == (int)TM_E_CHECKSUM,
               "public status codes must equal core/status.h");

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

/* bytes a GEMV streams for a 2-d weight: its data and, if quantized, its scales as stored */
static size_t stored_bytes(const tm_tensor *t)
{
    size_t sc = t->ndim == 2 ? tm_quant_scale_count(t->dtype, t->shape[0], t->shape[1]) : 0;
    return t->nbytes + sc * tm_quant_scale_bytes(t->dtype);
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
    double bytes = 0, ops = 0;
    for (int i = 0; i < d->n_spec; i++)
        if (d->spec[i].slot && strncmp(d->spec[i].name, "model.layers.", 13) == 0) {
            const tm_tensor *t = d->spec[i].slot;
            int64_t k = 1;
            for (int j = 0; j < d->spec[i].ndim; j++) k *= d->spec[i].shape[j];
            n += k;
            /* an expert's matrices are read by top_k of n_experts tokens' worth */
            double share = d->n_experts > 0 && strstr(d->spec[i].name, ".experts.")
                               ? (double)d->top_k / d->n_experts : 1.0;
            bytes += share * (double)stored_bytes(t);
            if (t->ndim == 2) ops += share * 2.0 * (double)k;
        }
    info->n_params = n;
    info->decode_bytes_per_token = (int64_t)(bytes + (double)stored_bytes(&d->lm_head) + d->final_norm.nbytes);
    info->prefill_ops_per_token = ops;
    info->pooling = m->rm->pooling;
    info->embed_normalize = m->rm->embed_normalize;
    info->headless = m->rm->prefill->headless || d->headless;
    info->embed_unsupported = m->rm->embed_unsupported[0] ? m->rm->embed_unsupported : NULL;
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

int tandem_token_bytes(const tandem_model *m, int32_t id, char **bytes, size_t *len, tandem_status *st)
{
    tm_err e = {0};
    if (tm_tok_token_bytes(m->rm->tok, id, bytes, len, &e) != TM_OK) return fail(st, &e);
    return ok(st);
}

int tandem_chat_render(const tandem_model *m, const char *template_src, const char *messages_json,
                       int add_generation_prompt, const char *kwargs_json, char **text, tandem_status *st)
{
    tm_err e = {0};
    *text = NULL;
    const char *tpl = template_src ? template_src : m->rm->chat_template;
    if (!tpl)
        return fail(st, &(tm_err){TM_E_NOTFOUND, "the model has no chat template (give one with --template FILE)"});
    cJSON *msgs = cJSON_Parse(messages_json);
    cJSON *kw = kwargs_json ? cJSON_Parse(kwargs_json) : NULL;
    int rc;
    if (!msgs || !cJSON_IsArray(msgs)) rc = tm_errf(&e, TM_E_FORMAT, "messages: not a JSON array");
    else if (kwargs_json && (!kw || !cJSON_IsObject(kw))) rc = tm_errf(&e, TM_E_FORMAT, "kwargs: not a JSON object");
    else rc = tm_chat_render(tpl, msgs, add_generation_prompt, kw, m->rm->bos_token, m->rm->eos_token, NULL, text, &e);
    cJSON_Delete(msgs);
    cJSON_Delete(kw);
    return rc == TM_OK ? ok(st) : fail(st, &e);
}

const char *tandem_model_chat_template(const tandem_model *m)
{
    return m->rm->chat_template;
}

const char *tandem_model_tool_template(const tandem_model *m)
{
    return m->rm->tool_template;
}

void tandem_session_opts_default(tandem_session_opts *o)
{
    memset(o, 0, sizeof *o);
    o->route = TANDEM_ROUTE_AUTO;
    o->stateless = 1;
}

float tandem_stall_bound(const tandem_session_opts *o)
{
    return o->max_stall > 0 ? o->max_stall : o->max_stall < 0 ? 0.0f : 0.25f;
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

int tandem_session_ctx(const tandem_session *s) { return s->s->max_ctx; }

int tandem_session_lending(const tandem_session *s)
{
    return (s->s->o.no_lend ? 0 : TANDEM_LEND_PREFILL) | (s->s->dec_borrows ? TANDEM_LEND_DECODE : 0);
}

void tandem_request_default(tandem_request *r)
{
    memset(r, 0, sizeof *r);
    r->max_tokens = 128;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->repetition_penalty = 1.0f;
    r->logprobs = -1;
    r->prompt_logprobs = -1;
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

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int tandem_handoff_cost(const tandem_model *m, int n_ctx, int reps, double *copy_s, double *exposed_s,
                        tandem_status *st)
{
    tm_err e = {0};
    const tm_model *d = m->rm->decode;
    if (n_ctx < 1 || reps < 1 || reps > 64) return fail(st, &(tm_err){TM_E_INVALID, "handoff: bad n_ctx or reps"});
    int ps = 1;
    while (ps < n_ctx) ps <<= 1;
    tm_kv_cache *stage = NULL, *dec = NULL;
    tm_kv_seq ss = {0}, ds = {0};
    int rc = tm_kv_cache_init(&stage, &(tm_kv_cache_opts){d->L, d->Hk, d->Dh, ps, 1, TM_DT_BF16, 0}, &e);
    if (rc == TM_OK) rc = tm_kv_cache_init(&dec, &(tm_kv_cache_opts){d->L, d->Hk, d->Dh, 16, (n_ctx + 15) / 16, TM_DT_BF16, 0}, &e);
    if (rc == TM_OK) rc = tm_kv_seq_reserve(stage, &ss, n_ctx, &e);
    if (rc == TM_OK) rc = tm_kv_seq_reserve(dec, &ds, n_ctx, &e);
    double t[64], tl[64];
    for (int r = 0; rc == TM_OK && r < reps; r++) {
        /* touch the staging pages as prefill would have written them */
        for (int l = 0; l < d->L; l++)
            for (int h = 0; h < d->Hk; h++) {
                memset(tm_kv_page_k(stage, ss.pages[0], l, h), r + 1, (size_t)n_ctx * d->Dh * 2);
                memset(tm_kv_page_v(stage, ss.pages[0], l, h), r + 1, (size_t)n_ctx * d->Dh * 2);
            }
        double t0 = tm_now_s(), tlast = 0;
        for (int l = 0; l < d->L; l++) {
            double a = tm_now_s();
            tm_kv_copy_layer(stage, &ss, dec, &ds, l, 0, n_ctx);
            tlast = tm_now_s() - a;
        }
        t[r] = tm_now_s() - t0;
        tl[r] = tlast;
    }
    if (rc == TM_OK) {
        qsort(t, (size_t)reps, sizeof(double), cmp_dbl);
        qsort(tl, (size_t)reps, sizeof(double), cmp_dbl);
        *copy_s = t[reps / 2];
        *exposed_s = tl[reps / 2];
    }
    if (stage) tm_kv_seq_release(stage, &ss);
    if (dec) tm_kv_seq_release(dec, &ds);
    tm_kv_cache_free(stage);
    tm_kv_cache_free(dec);
    return rc == TM_OK ? ok(st) : fail(st, &e);
}

int tandem_logits(const tandem_model *m, const int32_t *ids, size_t n, float *out, tandem_status *st)
{
    tm_err e = {0};
    const tm_model *mm = m->rm->prefill; /* the fp32 reference over the prefill stage's weights (as `tandem logits`) */
    if (!ids || !out || n < 1 || n > (size_t)INT32_MAX) return fail(st, &(tm_err){TM_E_INVALID, "logits: no tokens"});
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= mm->V) {
            tm_errf(&e, TM_E_INVALID, "logits: token id %d out of range (vocabulary %d)", ids[i], mm->V);
            return fail(st, &e);
        }
    tm_ref *r = NULL;
    int rc = tm_ref_init(&r, mm, (int)n, 1, &e);
    if (rc == TM_OK) rc = tm_ref_forward(r, ids, (int)n, 0, out, 1, &e);
    tm_ref_free(r);
    return rc == TM_OK ? ok(st) : fail(st, &e);
}
