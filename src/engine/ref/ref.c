/* engine/ref/ref.c: reference engine set-up: weights to f32, KV cache. */
#include <stdlib.h>
#include <string.h>

#include "engine/ref/ref-impl.h"
#include "quant/quant.h"

/* element i of a plain tensor as f32 (memcpy: the data may be unaligned) */
static void plain_to_f32(float *dst, const uint8_t *src, tm_dtype dt, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == TM_DT_F32) {
            memcpy(&dst[i], src + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = dt == TM_DT_BF16 ? tm_bf16_to_f32(h) : tm_f16_to_f32(h);
        }
    }
}

/* rows [row0, row0 + n) of tensor t [N][K] (K = 1 for vectors) as f32 into dst [n][K] */
int tm_ref_rows_f32(const tm_tensor *t, int64_t row0, int64_t n, int64_t N, int64_t K, float *dst, tm_err *err)
{
    if (!t->data) return tm_errf(err, TM_E_INVALID, "reference engine: tensor '%s' is not bound", t->name ? t->name : "?");
    if (t->dtype == TM_DT_F32 || t->dtype == TM_DT_F16 || t->dtype == TM_DT_BF16) {
        plain_to_f32(dst, (const uint8_t *)t->data + (size_t)(row0 * K) * tm_dtype_size(t->dtype), t->dtype,
                     (size_t)(n * K));
    } else if (tm_quant_is_quantized(t->dtype) && tm_quant_check_shape(t->dtype, N, K, err) == TM_OK) {
        for (int64_t r = 0; r < n; r++) tm_quant_dequant_row(t->dtype, t->data, t->scales, K, row0 + r, dst + r * K);
    } else {
        return tm_errf(err, TM_E_UNSUPPORTED, "reference engine: tensor '%s': dtype %s not supported", t->name,
                       tm_dtype_name(t->dtype));
    }
    return TM_OK;
}

/* tensor t, numel N*K (K = 1 for vectors), into a fresh f32 array */
float *tm_ref_to_f32(const tm_tensor *t, int64_t N, int64_t K, tm_err *err)
{
    if (!t->data) {
        tm_errf(err, TM_E_INVALID, "reference engine: tensor '%s' is not bound", t->name ? t->name : "?");
        return NULL;
    }
    float *dst = malloc((size_t)(N * K) * sizeof(float) + 1);
    if (!dst) {
        tm_errf(err, TM_E_NOMEM, "reference engine: out of memory for tensor '%s'", t->name);
        return NULL;
    }
    if (tm_ref_rows_f32(t, 0, N, N, K, dst, err) != TM_OK) {
        free(dst);
        return NULL;
    }
    return dst;
}

/* rows [row0, row0 + N) of dst [.][K] from tensor t [N][K] */
static int fill_rows(float *dst, int64_t row0, const tm_tensor *t, int64_t N, int64_t K, tm_err *err)
{
    float *tmp = tm_ref_to_f32(t, N, K, err);
    if (!tmp) return err->code;
    memcpy(dst + row0 * K, tmp, (size_t)(N * K) * sizeof(float));
    free(tmp);
    return TM_OK;
}

/* a norm weight, made effective (1 + w for Gemma) */
float *tm_ref_norm_w(const tm_tensor *t, int n, int add_one, tm_err *err)
{
    float *w = tm_ref_to_f32(t, n, 1, err);
    if (w && add_one)
        for (int i = 0; i < n; i++) w[i] = 1.0f + w[i];
    return w;
}

static float *opt_vec(const tm_tensor *t, int n, tm_err *err, int *rc)
{
    if (!t->data) return NULL;
    float *v = tm_ref_to_f32(t, n, 1, err);
    if (!v) *rc = err->code;
    return v;
}

/* fused qkv rows grouped by kv head (GPT-NeoX, Falcon's new decoder: tm_qkv_row) reordered in place to
 * the reference's Q rows, K rows, V rows; each row K floats */
static int deinterleave(const tm_model *m, float *w, int64_t K, tm_err *err)
{
    size_t row = (size_t)K * sizeof(float), n = (size_t)(m->H + 2 * m->Hk) * m->Dh;
    float *tmp = malloc(n * row);
    if (!tmp) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
    for (int p = 0, dst = 0; p < 3; p++)
        for (int h = 0; h < (p ? m->Hk : m->H); h++, dst += m->Dh)
            memcpy(tmp + (size_t)dst * K, w + (size_t)tm_qkv_row(m, p, h, 0) * K, (size_t)m->Dh * row);
    memcpy(w, tmp, n * row);
    free(tmp);
    return TM_OK;
}

int tm_ref_layer_load(ref_layer *o, const tm_model *m, int l, int experts, tm_err *err)
{
    const tm_layer_weights *w = &m->w[l];
    int64_t D = m->D, q = (int64_t)m->H * m->Dh, kv = (int64_t)m->Hk * m->Dh;
    int rc = 0, irc = 0;
    if (m->pre_norms && !(o->attn_norm = tm_ref_norm_w(&w->attn_norm, m->D, m->norm_add_one, err))) return err->code;
    if (m->pre_norms && !(o->ffn_norm = tm_ref_norm_w(&w->ffn_norm, m->D, m->norm_add_one, err))) return err->code;
    o->attn_norm_b = opt_vec(&w->attn_norm_b, m->D, err, &irc);
    if (!irc) o->ffn_norm_b = opt_vec(&w->ffn_norm_b, m->D, err, &irc);
    if (irc) return irc;
    if (m->post_attn_norm && !(o->attn_out_norm = tm_ref_norm_w(&w->attn_out_norm, m->D, m->norm_add_one, err))) return err->code;
    if (m->post_ffn_norm && !(o->ffn_out_norm = tm_ref_norm_w(&w->ffn_out_norm, m->D, m->norm_add_one, err))) return err->code;
    if (m->qk_norm) {
        /* over the whole projection (OLMo 2), or per head with one weight row, or with a row per head */
        int whole = m->qk_norm == 2 || m->qk_norm_heads;
        if (!(o->q_norm = tm_ref_norm_w(&w->q_norm, whole ? (int)q : m->Dh, m->norm_add_one, err))) return err->code;
        if (!(o->k_norm = tm_ref_norm_w(&w->k_norm, whole ? (int)kv : m->Dh, m->norm_add_one, err))) return err->code;
        o->q_norm_b = opt_vec(&w->q_norm_b, m->Dh, err, &irc);
        if (!irc) o->k_norm_b = opt_vec(&w->k_norm_b, m->Dh, err, &irc);
        if (irc) return irc;
    }
    if (m->mla) { /* q_a, q_b (or q_proj), kv_a, kv_b: ref_forward's mla_qkv */
        int64_t ql = m->q_lora, kvr = (int64_t)m->kv_lora + m->qk_rope;
        if ((ql && (!(o->q_a = tm_ref_to_f32(&w->q_a, ql, D, err)) || !(o->q_a_norm = tm_ref_norm_w(&w->q_a_norm, (int)ql, 0, err)))) ||
            !(o->wq = tm_ref_to_f32(&w->wq, (int64_t)m->H * (m->qk_nope + m->qk_rope), ql ? ql : D, err)) ||
            !(o->kv_a = tm_ref_to_f32(&w->kv_a, kvr, D, err)) ||
            !(o->kv_a_norm = tm_ref_norm_w(&w->kv_a_norm, m->kv_lora, 0, err)) ||
            !(o->kv_b = tm_ref_to_f32(&w->kv_b, (int64_t)m->H * (m->qk_nope + m->v_dim), m->kv_lora, err)))
            return err->code;
        int64_t H = m->H, nope = m->qk_nope, kvl = m->kv_lora, nv = nope + m->v_dim;
        if (!(o->uk_t = malloc(sizeof(float) * (size_t)(H * kvl * nope))))
            return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < nope; i++)
                for (int64_t j = 0; j < kvl; j++) o->uk_t[(h * kvl + j) * nope + i] = o->kv_b[(h * nv + i) * kvl + j];
        o->q_a_b = opt_vec(&w->q_a_b, (int)ql, err, &irc);
        if (!irc) o->kv_a_b = opt_vec(&w->kv_a_b, (int)kvr, err, &irc);
        if (irc) return irc;
    } else if (!(o->wqkv = malloc((size_t)((q + 2 * kv) * D) * sizeof(float)))) {
        return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
    } else if (m->fused_qkv) {
        rc = fill_rows(o->wqkv, 0, &w->wqkv, q + 2 * kv, D, err);
        if (!rc && m->qkv_interleaved) rc = deinterleave(m, o->wqkv, D, err);
    } else {
        rc = fill_rows(o->wqkv, 0, &w->wq, q, D, err);
        if (!rc) rc = fill_rows(o->wqkv, q, &w->wk, kv, D, err);
        if (!rc) rc = fill_rows(o->wqkv, q + kv, &w->wv, kv, D, err);
    }
    if (rc) return rc;
    if (m->qkv_bias && m->fused_qkv) { /* GPT-NeoX, Falcon, GPT-2: one bias, in the weight's row order */
        if (!(o->bqkv = tm_ref_to_f32(&w->bqkv, q + 2 * kv, 1, err))) return err->code;
        if (m->qkv_interleaved && (rc = deinterleave(m, o->bqkv, 1, err))) return rc;
    } else if (m->qkv_bias && !m->mla) {
        o->bqkv = malloc((size_t)(q + 2 * kv) * sizeof(float));
        if (!o->bqkv) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
        rc = fill_rows(o->bqkv, 0, &w->bq, q, 1, err);
        if (!rc) rc = fill_rows(o->bqkv, q, &w->bk, kv, 1, err);
        if (!rc) rc = fill_rows(o->bqkv, q + kv, &w->bv, kv, 1, err);
        if (rc) return rc;
    }
    if (!(o->wo = tm_ref_to_f32(&w->wo, D, m->mla ? (int64_t)m->H * m->v_dim : q, err))) return err->code;
    o->bo = opt_vec(&w->bo, m->D, err, &irc);
    if (!irc) o->sinks = opt_vec(&w->sinks, m->H, err, &irc);
    if (irc) return irc;
    if (!m->layer[l].moe) {
        int64_t F = m->F, g = m->gated ? F : 0; /* not gated: up rows alone */
        o->wgu = malloc((size_t)((g + F) * D) * sizeof(float));
        if (!o->wgu) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
        if (m->fused_gate_up) {
            rc = fill_rows(o->wgu, 0, &w->w_gate_up, 2 * F, D, err);
        } else {
            if (g) rc = fill_rows(o->wgu, 0, &w->w_gate, F, D, err);
            if (!rc) rc = fill_rows(o->wgu, g, &w->w_up, F, D, err);
        }
        if (rc) return rc;
        if (m->mlp_bias) {
            o->bgu = malloc((size_t)(g + F) * sizeof(float));
            if (!o->bgu) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
            if (g) rc = fill_rows(o->bgu, 0, &w->b_gate, F, 1, err);
            if (!rc) rc = fill_rows(o->bgu, g, &w->b_up, F, 1, err);
            if (rc) return rc;
        }
        if (!(o->wd = tm_ref_to_f32(&w->w_down, D, F, err))) return err->code;
        o->bd = opt_vec(&w->b_down, m->D, err, &irc);
        return irc;
    }
    if (!experts) return TM_OK;
    int64_t E = m->n_experts, Fe = m->F_expert;
    if (!(o->router = tm_ref_to_f32(&w->router, E, D, err))) return err->code;
    if (m->router_has_corr && !(o->router_corr = tm_ref_to_f32(&w->router_corr, E, 1, err))) return err->code;
    o->e_gu = malloc((size_t)(E * 2 * Fe * D) * sizeof(float));
    o->e_d = malloc((size_t)(E * D * Fe) * sizeof(float));
    if (!o->e_gu || !o->e_d) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
    if (m->expert_bias) {
        if (!(o->router_b = tm_ref_to_f32(&w->router_b, E, 1, err))) return err->code;
        o->e_gub = malloc((size_t)(E * 2 * Fe) * sizeof(float));
        o->e_db = malloc((size_t)(E * D) * sizeof(float));
        if (!o->e_gub || !o->e_db) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
    }
    for (int64_t e = 0; e < E; e++) {
        float *gu = o->e_gu + e * 2 * Fe * D;
        if ((rc = fill_rows(gu, 0, &w->e_gate[e], Fe, D, err))) return rc;
        if ((rc = fill_rows(gu, Fe, &w->e_up[e], Fe, D, err))) return rc;
        if ((rc = fill_rows(o->e_d + e * D * Fe, 0, &w->e_down[e], D, Fe, err))) return rc;
        if (m->expert_bias && ((rc = fill_rows(o->e_gub + e * 2 * Fe, 0, &w->e_gate_b[e], Fe, 1, err)) ||
                               (rc = fill_rows(o->e_gub + e * 2 * Fe, Fe, &w->e_up_b[e], Fe, 1, err)) ||
                               (rc = fill_rows(o->e_db + e * D, 0, &w->e_down_b[e], D, 1, err))))
            return rc;
    }
    if (!m->F_shared) return TM_OK;
    int64_t Fs = m->F_shared;
    o->s_gu = malloc((size_t)(2 * Fs * D) * sizeof(float));
    if (!o->s_gu) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
    if ((rc = fill_rows(o->s_gu, 0, &w->s_gate, Fs, D, err)) || (rc = fill_rows(o->s_gu, Fs, &w->s_up, Fs, D, err)))
        return rc;
    if (!(o->s_d = tm_ref_to_f32(&w->s_down, D, Fs, err)) || (m->shared_gate && !(o->s_router = tm_ref_to_f32(&w->s_router, 1, D, err))))
        return err->code;
    return TM_OK;
}

void tm_ref_layer_free(ref_layer *o)
{
    float *ps[] = {o->attn_norm, o->attn_norm_b, o->ffn_norm_b, o->wqkv, o->bqkv, o->q_norm, o->k_norm, o->q_norm_b,
                   o->k_norm_b, o->wo, o->bo, o->attn_out_norm,
                   o->ffn_norm, o->ffn_out_norm, o->wgu, o->bgu, o->wd, o->bd, o->router, o->e_gu, o->e_d,
                   o->s_gu, o->s_d, o->s_router, o->sinks, o->router_b, o->e_gub, o->e_db, o->q_a, o->q_a_b,
                   o->q_a_norm, o->wq, o->kv_a, o->kv_a_b, o->kv_a_norm, o->kv_b, o->uk_t, o->router_corr};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    memset(o, 0, sizeof *o);
}

void tm_ref_free(tm_ref *r)
{
    if (!r) return;
    if (r->w)
        for (int l = 0; l < r->L; l++) tm_ref_layer_free(&r->w[l]);
    free(r->w);
    if (r->lm_head != r->embed) free(r->lm_head);
    free(r->embed);
    free(r->embed_norm);
    free(r->embed_norm_b);
    free(r->alibi);
    free(r->pos_embed);
    free(r->final_norm);
    free(r->final_norm_b);
    free(r->lm_head_b);
    for (int i = 0; i < 2; i++) tm_rope_free(&r->rope[i]);
    free(r->layer);
    free(r->kc);
    free(r->vc);
    free(r);
}

static int copy_rope(tm_rope *dst, const tm_rope *src, tm_err *err)
{
    *dst = *src;
    dst->inv_freq = dst->inv_freq_long = NULL;
    size_t half = (size_t)src->rot_dim / 2;
    if (!src->inv_freq) return TM_OK;
    dst->inv_freq = malloc(half * sizeof(float));
    if (src->inv_freq_long) dst->inv_freq_long = malloc(half * sizeof(float));
    if (!dst->inv_freq || (src->inv_freq_long && !dst->inv_freq_long))
        return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
    memcpy(dst->inv_freq, src->inv_freq, half * sizeof(float));
    if (src->inv_freq_long) memcpy(dst->inv_freq_long, src->inv_freq_long, half * sizeof(float));
    return TM_OK;
}

int tm_ref_init(tm_ref **out, const tm_model *m, int max_ctx, int n_threads, tm_err *err)
{
    *out = NULL;
    tm_err local;
    if (!err) err = &local;
    if (!m || !m->bound) return tm_errf(err, TM_E_INVALID, "reference engine: the model has no weights bound");
    if (max_ctx < 1 || max_ctx > 16 * 1024 * 1024)
        return tm_errf(err, TM_E_INVALID, "reference engine: max_ctx %d out of range", max_ctx);
    if (n_threads < 1) n_threads = 1;
    tm_ref *r = calloc(1, sizeof *r);
    if (!r) return tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
    r->V = m->V, r->D = m->D, r->L = m->L, r->H = m->H, r->Hk = m->Hk, r->Dh = m->Dh, r->F = m->F;
    r->E = m->n_experts, r->top_k = m->top_k, r->Fe = m->F_expert, r->norm_topk = m->norm_topk_prob;
    r->Fs = m->F_shared;
    r->mla = m->mla, r->q_lora = m->q_lora, r->kv_lora = m->kv_lora, r->qk_nope = m->qk_nope, r->qk_rope = m->qk_rope;
    r->v_dim = m->v_dim;
    r->router_sigmoid = m->router_sigmoid, r->n_group = m->n_group, r->topk_group = m->topk_group;
    r->group_top2 = m->group_top2, r->routed_scale = m->routed_scale;
    r->eps = m->eps, r->mla_eps = m->mla_eps, r->embed_scale = m->embed_scale, r->attn_scale = m->attn_scale;
    r->attn_softcap = m->attn_softcap, r->final_softcap = m->final_softcap, r->act = m->act;
    r->residual_scale = m->residual_scale, r->logits_div = m->logits_div, r->qk_whole = m->qk_norm == 2;
    r->qk_heads = m->qk_norm_heads;
    r->logits_mul = m->logits_mul;
    r->norm = m->norm, r->gated = m->gated, r->parallel = m->parallel, r->clip_qkv = m->clip_qkv;
    r->max_ctx = max_ctx, r->n_threads = n_threads;
    int rc = TM_OK;
    size_t kvn = (size_t)m->L * m->Hk * (size_t)max_ctx * m->Dh;
    r->layer = malloc((size_t)m->L * sizeof *r->layer);
    r->w = calloc((size_t)m->L, sizeof *r->w);
    r->kc = malloc(kvn * sizeof(float));
    r->vc = malloc(kvn * sizeof(float));
    if (!r->layer || !r->w || !r->kc || !r->vc) {
        rc = tm_errf(err, TM_E_NOMEM, "reference engine: out of memory (KV cache of %zu floats)", 2 * kvn);
        goto fail;
    }
    memcpy(r->layer, m->layer, (size_t)m->L * sizeof *r->layer);
    for (int i = 0; i < m->n_rope && rc == TM_OK; i++) rc = copy_rope(&r->rope[i], &m->rope[i], err);
    if (rc) goto fail;
    if (!(r->embed = tm_ref_to_f32(&m->embed, m->V, m->D, err))) goto fail_code;
    r->max_pos = m->max_pos, r->pos_offset = m->pos_offset;
    if (m->pos_embed.data && !(r->pos_embed = tm_ref_to_f32(&m->pos_embed, (int64_t)m->max_pos + m->pos_offset, m->D, err)))
        goto fail_code;
    /* tied: the embedding, unless the binder found a separate copy (a package's
     * decode stage keeps one in its own encoding) */
    if (m->tied && m->lm_head.data == m->embed.data) r->lm_head = r->embed;
    else if (!(r->lm_head = tm_ref_to_f32(&m->lm_head, m->V, m->D, err))) goto fail_code;
    if (!(r->final_norm = tm_ref_norm_w(&m->final_norm, m->D, m->norm_add_one, err))) goto fail_code;
    if (m->embed_norm.data && !(r->embed_norm = tm_ref_norm_w(&m->embed_norm, m->D, 0, err))) goto fail_code;
    if (m->alibi) {
        if (!(r->alibi = malloc(sizeof(float) * (size_t)m->H))) goto fail_nomem;
        memcpy(r->alibi, m->alibi, sizeof(float) * (size_t)m->H);
    }
    r->final_norm_b = opt_vec(&m->final_norm_b, m->D, err, &rc);
    if (!rc) r->embed_norm_b = opt_vec(&m->embed_norm_b, m->D, err, &rc);
    if (!rc) r->lm_head_b = opt_vec(&m->lm_head_b, m->V, err, &rc);
    if (rc) goto fail;
    for (int l = 0; l < m->L; l++)
        if ((rc = tm_ref_layer_load(&r->w[l], m, l, 1, err))) goto fail;
    *out = r;
    return TM_OK;
fail_code:
    rc = err->code != TM_OK ? err->code : TM_E_INVALID;
    goto fail;
fail_nomem:
    rc = tm_errf(err, TM_E_NOMEM, "reference engine: out of memory");
fail:
    tm_ref_free(r);
    return rc;
}

int tm_ref_n_past(const tm_ref *r) { return r->n_past; }
void tm_ref_reset(tm_ref *r) { r->n_past = 0; }
void tm_ref_trace(tm_ref *r, float *residual) { r->trace = residual; }
