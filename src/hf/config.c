/* hf/config.c: config.json → tm_hf_config (typed fields, no defaults). */
#include "hf/config.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

#define CFG_MAX_INT 9007199254740992.0 /* 2^53 */

typedef struct cfg_ctx {
    const char *file;
    const char *pre;   /* "" or "text_config." */
    tm_err *err;
} cfg_ctx;

/* an integer field: number with no fractional part, |v| <= 2^53 */
static int get_int(cfg_ctx *x, const cJSON *o, const char *key, const char *where, tm_cfg_int *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    out->state = TM_CFG_ABSENT;
    if (!j) return TM_OK;
    if (cJSON_IsNull(j)) {
        out->state = TM_CFG_NULL;
        return TM_OK;
    }
    if (!cJSON_IsNumber(j))
        return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be an integer", x->file, where, key);
    double v = j->valuedouble;
    if (!isfinite(v) || v != floor(v) || fabs(v) > CFG_MAX_INT)
        return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be an integer, got %g", x->file, where, key, v);
    out->state = TM_CFG_SET;
    out->v = (int64_t)v;
    return TM_OK;
}

static int get_num(cfg_ctx *x, const cJSON *o, const char *key, const char *where, tm_cfg_num *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    out->state = TM_CFG_ABSENT;
    if (!j) return TM_OK;
    if (cJSON_IsNull(j)) {
        out->state = TM_CFG_NULL;
        return TM_OK;
    }
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be a number", x->file, where, key);
    out->state = TM_CFG_SET;
    out->v = j->valuedouble;
    return TM_OK;
}

static int get_bool(cfg_ctx *x, const cJSON *o, const char *key, const char *where, tm_cfg_bool *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    out->state = TM_CFG_ABSENT;
    if (!j) return TM_OK;
    if (cJSON_IsNull(j)) {
        out->state = TM_CFG_NULL;
        return TM_OK;
    }
    if (!cJSON_IsBool(j)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be true or false", x->file, where, key);
    out->state = TM_CFG_SET;
    out->v = cJSON_IsTrue(j) ? 1 : 0;
    return TM_OK;
}

/* a string field into buf; absent or null leaves "" */
static int get_str(cfg_ctx *x, const cJSON *o, const char *key, const char *where, char *buf, size_t n)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return TM_OK;
    if (!cJSON_IsString(j)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be a string", x->file, where, key);
    if (strlen(j->valuestring) >= n)
        return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' is too long (%zu bytes)", x->file, where, key,
                       strlen(j->valuestring));
    snprintf(buf, n, "%s", j->valuestring);
    return TM_OK;
}

static int get_float_list(cfg_ctx *x, const cJSON *o, const char *key, const char *where, float **out, int *n)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    *n = 0;
    if (!j || cJSON_IsNull(j)) return TM_OK;
    if (!cJSON_IsArray(j)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be a list of numbers", x->file, where, key);
    int m = cJSON_GetArraySize(j);
    if (m > TM_CFG_MAX_LIST) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' has %d entries", x->file, where, key, m);
    *out = malloc(((size_t)m + 1) * sizeof **out);
    if (!*out) return tm_errf(x->err, TM_E_NOMEM, "%s: out of memory", x->file);
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
            return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s'[%d] must be a number", x->file, where, key, i);
        (*out)[i] = (float)e->valuedouble;
    }
    *n = m;
    return TM_OK;
}

static int parse_rope(cfg_ctx *x, const cJSON *d, const char *where, tm_hf_rope_params *r)
{
    int rc;
    memset(r, 0, sizeof *r);
    if (!d || cJSON_IsNull(d)) return TM_OK;
    if (!cJSON_IsObject(d)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be an object", x->file, x->pre, where);
    r->present = 1;
    char w[96];
    snprintf(w, sizeof w, "%s%s.", x->pre, where);
    if ((rc = get_str(x, d, "type", w, r->rope_type, sizeof r->rope_type))) return rc;
    if ((rc = get_str(x, d, "rope_type", w, r->rope_type, sizeof r->rope_type))) return rc;
    struct { const char *k; tm_cfg_num *p; } nums[] = {
        {"rope_theta", &r->rope_theta},       {"factor", &r->factor},
        {"low_freq_factor", &r->low_freq_factor}, {"high_freq_factor", &r->high_freq_factor},
        {"beta_fast", &r->beta_fast},         {"beta_slow", &r->beta_slow},
        {"mscale", &r->mscale},               {"mscale_all_dim", &r->mscale_all_dim},
        {"attention_factor", &r->attention_factor},
        {"partial_rotary_factor", &r->partial_rotary_factor},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if ((rc = get_num(x, d, nums[i].k, w, nums[i].p))) return rc;
    if ((rc = get_int(x, d, "original_max_position_embeddings", w, &r->original_max_position_embeddings))) return rc;
    if ((rc = get_bool(x, d, "truncate", w, &r->truncate))) return rc;
    if ((rc = get_float_list(x, d, "short_factor", w, &r->short_factor, &r->n_short))) return rc;
    if ((rc = get_float_list(x, d, "long_factor", w, &r->long_factor, &r->n_long))) return rc;
    return TM_OK;
}

static void free_rope(tm_hf_rope_params *r)
{
    free(r->short_factor);
    free(r->long_factor);
    r->short_factor = r->long_factor = NULL;
}

void tm_hf_config_free(tm_hf_config *c)
{
    if (!c) return;
    free_rope(&c->rope_scaling);
    free_rope(&c->rope_parameters);
    free_rope(&c->rope_full);
    free_rope(&c->rope_sliding);
    free(c->layer_sliding);
    free(c->mlp_sparse);
    c->mlp_sparse = NULL;
    free(c->mlp_only_layers);
    free(c->no_rope_layers);
    c->layer_sliding = NULL;
    free(c->neo_local);
    c->neo_local = NULL;
    c->mlp_only_layers = NULL;
    c->no_rope_layers = NULL;
}

/* a list of per-layer kinds, key: each yes (flag 1) or no (0), into *flags [*n] (absent or null: *n 0) */
static int parse_kind_list(cfg_ctx *x, const cJSON *o, const char *key, const char *yes, const char *no,
                           uint8_t **flags, int *n)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return TM_OK;
    if (!cJSON_IsArray(j)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be a list", x->file, x->pre, key);
    int len = cJSON_GetArraySize(j);
    if (len > TM_CFG_MAX_LIST) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' has %d entries", x->file, x->pre, key, len);
    if (!(*flags = calloc((size_t)len + 1, 1))) return tm_errf(x->err, TM_E_NOMEM, "%s: out of memory", x->file);
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        if (!cJSON_IsString(e))
            return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s'[%d] must be a string", x->file, x->pre, key, i);
        if (strcmp(e->valuestring, yes) == 0) (*flags)[i] = 1;
        else if (strcmp(e->valuestring, no) != 0)
            return tm_errf(x->err, TM_E_UNSUPPORTED, "%s: '%s%s'[%d] = '%.40s' is not supported (%s, %s are)", x->file,
                           x->pre, key, i, e->valuestring, no, yes);
    }
    *n = len;
    return TM_OK;
}

/* GPT-Neo's layer kinds: attention_layers (["global", "local", ...]) or else attention_types
 * ([[["global", "local"], repeats], ...], expanded as GPTNeoConfig does) into neo_local (1 = "local") */
static int neo_kind(cfg_ctx *x, const cJSON *e, const char *key, int i, uint8_t *out)
{
    if (!cJSON_IsString(e)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s'[%d] must be a string", x->file, x->pre, key, i);
    if (strcmp(e->valuestring, "local") && strcmp(e->valuestring, "global"))
        return tm_errf(x->err, TM_E_UNSUPPORTED, "%s: '%s%s'[%d] = '%.40s' is not supported (global, local are)",
                       x->file, x->pre, key, i, e->valuestring);
    *out = strcmp(e->valuestring, "local") == 0;
    return TM_OK;
}

static int parse_neo_layers(cfg_ctx *x, const cJSON *o, tm_hf_config *c)
{
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(o, "attention_layers");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "attention_types");
    const char *key = cJSON_IsArray(al) ? "attention_layers" : "attention_types";
    const cJSON *j = cJSON_IsArray(al) ? al : at;
    if (!j || cJSON_IsNull(j)) return TM_OK;
    if (!cJSON_IsArray(j)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' must be a list", x->file, x->pre, key);
    int64_t n = 0; /* layers, counted first */
    for (const cJSON *e = j->child; e; e = e->next) {
        const cJSON *kinds = cJSON_GetArrayItem(e, 0), *rep = cJSON_GetArrayItem(e, 1);
        if (j == al) n++;
        else if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsArray(kinds) || !cJSON_IsNumber(rep) ||
                 rep->valuedouble != floor(rep->valuedouble) || rep->valuedouble < 0 || rep->valuedouble > TM_CFG_MAX_LIST)
            return tm_errf(x->err, TM_E_INVALID, "%s: '%sattention_types' must be a list of [[kinds...], repeats]",
                           x->file, x->pre);
        else n += (int64_t)cJSON_GetArraySize(kinds) * (int64_t)rep->valuedouble;
        if (n > TM_CFG_MAX_LIST) return tm_errf(x->err, TM_E_INVALID, "%s: '%s%s' gives over %d layers", x->file, x->pre, key, TM_CFG_MAX_LIST);
    }
    c->neo_local = calloc((size_t)n + 1, 1);
    if (!c->neo_local) return tm_errf(x->err, TM_E_NOMEM, "%s: out of memory", x->file);
    int i = 0, rc;
    for (const cJSON *e = j->child; e; e = e->next) {
        if (j == al) {
            if ((rc = neo_kind(x, e, key, i, &c->neo_local[i]))) return rc;
            i++;
            continue;
        }
        const cJSON *kinds = cJSON_GetArrayItem(e, 0);
        for (int r = 0; r < (int)cJSON_GetArrayItem(e, 1)->valuedouble; r++)
            for (const cJSON *k = kinds->child; k; k = k->next, i++)
                if ((rc = neo_kind(x, k, key, i, &c->neo_local[i]))) return rc;
    }
    c->n_neo_local = (int)n;
    return TM_OK;
}

static int parse_int_list(cfg_ctx *x, const cJSON *o, const char *key, int **out, int *n)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return TM_OK;
    if (!cJSON_IsArray(j)) return tm_errf(x->err, TM_E_INVALID, "%s: '%s' must be a list of integers", x->file, key);
    int m = cJSON_GetArraySize(j);
    if (m > TM_CFG_MAX_LIST) return tm_errf(x->err, TM_E_INVALID, "%s: '%s' has %d entries", x->file, key, m);
    *out = calloc((size_t)m + 1, sizeof **out);
    if (!*out) return tm_errf(x->err, TM_E_NOMEM, "%s: out of memory", x->file);
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : NAN;
        if (!(v == floor(v)) || fabs(v) > 1e9)
            return tm_errf(x->err, TM_E_INVALID, "%s: '%s'[%d] must be an integer", x->file, key, i);
        (*out)[i] = (int)v;
    }
    *n = m;
    return TM_OK;
}

static int parse_eos(cfg_ctx *x, const cJSON *o, tm_hf_config *c)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "eos_token_id");
    if (!j || cJSON_IsNull(j)) return TM_OK;
    const cJSON *one = j;
    if (cJSON_IsArray(j)) {
        if (cJSON_GetArraySize(j) > TM_CFG_MAX_EOS)
            return tm_errf(x->err, TM_E_INVALID, "%s: 'eos_token_id' lists more than %d ids", x->file, TM_CFG_MAX_EOS);
        one = j->child;
    }
    for (; one; one = cJSON_IsArray(j) ? one->next : NULL) {
        double v = cJSON_IsNumber(one) ? one->valuedouble : NAN;
        if (!(v == floor(v)) || v < 0 || v > 2e9)
            return tm_errf(x->err, TM_E_INVALID, "%s: 'eos_token_id' must be a token id or a list of them", x->file);
        c->eos_ids[c->n_eos++] = (int)v;
    }
    return TM_OK;
}

static int parse_obj(cfg_ctx *x, const cJSON *o, tm_hf_config *c)
{
    int rc;
    struct { const char *k; tm_cfg_int *p; } ints[] = {
        {"vocab_size", &c->vocab_size},
        {"hidden_size", &c->hidden_size},
        {"intermediate_size", &c->intermediate_size},
        {"num_hidden_layers", &c->num_hidden_layers},
        {"num_attention_heads", &c->num_attention_heads},
        {"num_key_value_heads", &c->num_key_value_heads},
        {"head_dim", &c->head_dim},
        {"max_position_embeddings", &c->max_position_embeddings},
        {"original_max_position_embeddings", &c->original_max_position_embeddings},
        {"sliding_window", &c->sliding_window},
        {"max_window_layers", &c->max_window_layers},
        {"num_experts", &c->num_experts},
        {"num_local_experts", &c->num_local_experts},
        {"num_experts_per_tok", &c->num_experts_per_tok},
        {"moe_intermediate_size", &c->moe_intermediate_size},
        {"decoder_sparse_step", &c->decoder_sparse_step},
        {"bos_token_id", &c->bos_token_id},
        {"no_rope_layer_interval", &c->no_rope_layer_interval},
        {"shared_expert_intermediate_size", &c->shared_expert_intermediate_size},
        {"n_embd", &c->n_embd},
        {"n_layer", &c->n_layer},
        {"n_head", &c->n_head},
        {"n_inner", &c->n_inner},
        {"n_positions", &c->n_positions},
        {"rotary_dim", &c->rotary_dim},
        {"ffn_dim", &c->ffn_dim},
        {"word_embed_proj_dim", &c->word_embed_proj_dim},
        {"num_kv_heads", &c->num_kv_heads},
        {"num_ln_in_parallel_attn", &c->num_ln_in_parallel_attn},
        {"ffn_hidden_size", &c->ffn_hidden_size},
        {"n_embed", &c->n_embed},
        {"d_model", &c->d_model},
        {"n_heads", &c->n_heads},
        {"n_layers", &c->n_layers},
        {"expansion_ratio", &c->expansion_ratio},
        {"max_seq_len", &c->max_seq_len},
        {"num_layers", &c->num_layers},
        {"num_heads", &c->num_heads},
        {"window_size", &c->window_size},
        {"shared_intermediate_size", &c->shared_intermediate_size},
        {"q_lora_rank", &c->q_lora_rank},
        {"kv_lora_rank", &c->kv_lora_rank},
        {"qk_nope_head_dim", &c->qk_nope_head_dim},
        {"qk_rope_head_dim", &c->qk_rope_head_dim},
        {"v_head_dim", &c->v_head_dim},
        {"n_routed_experts", &c->n_routed_experts},
        {"moe_num_experts", &c->moe_num_experts},
        {"moe_k", &c->moe_k},
        {"moe_num_shared_experts", &c->moe_num_shared_experts},
        {"moe_layer_start_index", &c->moe_layer_start_index},
        {"moe_layer_end_index", &c->moe_layer_end_index},
        {"moe_layer_interval", &c->moe_layer_interval},
        {"n_shared_experts", &c->n_shared_experts},
        {"first_k_dense_replace", &c->first_k_dense_replace},
        {"n_group", &c->n_group},
        {"topk_group", &c->topk_group},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = get_int(x, o, ints[i].k, x->pre, ints[i].p))) return rc;
    struct { const char *k; tm_cfg_num *p; } nums[] = {
        {"rms_norm_eps", &c->rms_norm_eps},
        {"rope_theta", &c->rope_theta},
        {"rope_local_base_freq", &c->rope_local_base_freq},
        {"partial_rotary_factor", &c->partial_rotary_factor},
        {"query_pre_attn_scalar", &c->query_pre_attn_scalar},
        {"attn_logit_softcapping", &c->attn_logit_softcapping},
        {"final_logit_softcapping", &c->final_logit_softcapping},
        {"embedding_multiplier", &c->embedding_multiplier},
        {"logits_scaling", &c->logits_scaling},
        {"residual_multiplier", &c->residual_multiplier},
        {"attention_multiplier", &c->attention_multiplier},
        {"layer_norm_eps", &c->layer_norm_eps},
        {"norm_epsilon", &c->norm_epsilon},
        {"norm_eps", &c->norm_eps},
        {"rotary_pct", &c->rotary_pct},
        {"rotary_emb_base", &c->rotary_emb_base},
        {"layer_norm_epsilon", &c->layer_norm_epsilon},
        {"logit_scale", &c->logit_scale},
        {"clip_qkv", &c->clip_qkv},
        {"routed_scaling_factor", &c->routed_scaling_factor},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if ((rc = get_num(x, o, nums[i].k, x->pre, nums[i].p))) return rc;
    struct { const char *k; tm_cfg_bool *p; } bools[] = {
        {"tie_word_embeddings", &c->tie_word_embeddings},
        {"attention_bias", &c->attention_bias},
        {"mlp_bias", &c->mlp_bias},
        {"use_sliding_window", &c->use_sliding_window},
        {"norm_topk_prob", &c->norm_topk_prob},
        {"qkv_bias", &c->qkv_bias},
        {"use_bias", &c->use_bias},
        {"use_qkv_bias", &c->use_qkv_bias},
        {"use_parallel_residual", &c->use_parallel_residual},
        {"qk_layernorm", &c->qk_layernorm},
        {"scale_attn_weights", &c->scale_attn_weights},
        {"scale_attn_by_inverse_layer_idx", &c->scale_attn_by_inverse_layer_idx},
        {"use_qk_norm", &c->use_qk_norm},
        {"attention_out_bias", &c->attention_out_bias},
        {"do_layer_norm_before", &c->do_layer_norm_before},
        {"enable_bias", &c->enable_bias},
        {"_remove_final_layer_norm", &c->remove_final_layer_norm},
        {"layer_norm_elementwise_affine", &c->layer_norm_elementwise_affine},
        {"multi_query", &c->multi_query},
        {"parallel_attn", &c->parallel_attn},
        {"new_decoder_architecture", &c->new_decoder_architecture},
        {"bias", &c->bias},
        {"alibi", &c->alibi},
        {"apply_residual_connection_post_layernorm", &c->apply_residual_connection_post_layernorm},
        {"no_bias", &c->no_bias},
        {"rope_interleave", &c->rope_interleave},
    };
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        if ((rc = get_bool(x, o, bools[i].k, x->pre, bools[i].p))) return rc;
    const cJSON *ac = cJSON_GetObjectItemCaseSensitive(o, "attn_config"); /* MPT */
    if (ac && !cJSON_IsNull(ac)) {
        if (!cJSON_IsObject(ac)) return tm_errf(x->err, TM_E_INVALID, "%s: '%sattn_config' must be an object", x->file, x->pre);
        if ((rc = get_bool(x, ac, "qk_ln", "attn_config.", &c->attn_config.qk_ln)) ||
            (rc = get_num(x, ac, "clip_qkv", "attn_config.", &c->attn_config.clip_qkv)) ||
            (rc = get_num(x, ac, "softmax_scale", "attn_config.", &c->attn_config.softmax_scale)))
            return rc;
    }
    /* sliding_window_pattern: an integer (Gemma 3, EXAONE 4), or EXAONE 4's "LLLG" string */
    const cJSON *swp = cJSON_GetObjectItemCaseSensitive(o, "sliding_window_pattern");
    if (cJSON_IsString(swp)) {
        size_t n = strlen(swp->valuestring);
        if (n == 0 || n >= sizeof c->sw_pattern_str || strspn(swp->valuestring, "LG") != n)
            return tm_errf(x->err, TM_E_INVALID, "%s: '%ssliding_window_pattern' must be an integer or a string of L and G",
                           x->file, x->pre);
        memcpy(c->sw_pattern_str, swp->valuestring, n + 1);
    } else if ((rc = get_int(x, o, "sliding_window_pattern", x->pre, &c->sliding_window_pattern))) {
        return rc;
    }
    if ((rc = get_str(x, o, "model_type", x->pre, c->model_type, sizeof c->model_type))) return rc;
    if ((rc = get_str(x, o, "hidden_act", x->pre, c->hidden_act, sizeof c->hidden_act))) return rc;
    if ((rc = get_str(x, o, "hidden_activation", x->pre, c->hidden_activation, sizeof c->hidden_activation))) return rc;
    if ((rc = get_str(x, o, "activation_function", x->pre, c->activation_function, sizeof c->activation_function)))
        return rc;
    if ((rc = get_str(x, o, "activation", x->pre, c->activation, sizeof c->activation))) return rc;
    if ((rc = get_str(x, o, "topk_method", x->pre, c->topk_method, sizeof c->topk_method))) return rc;
    if ((rc = get_str(x, o, "scoring_func", x->pre, c->scoring_func, sizeof c->scoring_func))) return rc;
    if ((rc = get_str(x, o, "torch_dtype", x->pre, c->dtype, sizeof c->dtype))) return rc;
    if ((rc = get_str(x, o, "dtype", x->pre, c->dtype, sizeof c->dtype))) return rc;
    if ((rc = parse_rope(x, cJSON_GetObjectItemCaseSensitive(o, "rope_scaling"), "rope_scaling", &c->rope_scaling)))
        return rc;
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
    const cJSON *sliding = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
    if (cJSON_IsObject(rp) && (full || sliding)) {
        c->rope_nested = 1;
        for (const cJSON *k = rp->child; k; k = k->next)
            if (strcmp(k->string, "full_attention") && strcmp(k->string, "sliding_attention"))
                return tm_errf(x->err, TM_E_UNSUPPORTED, "%s: '%srope_parameters.%.40s': unsupported layer type "
                               "(full_attention, sliding_attention are)", x->file, x->pre, k->string);
        if ((rc = parse_rope(x, full, "rope_parameters.full_attention", &c->rope_full))) return rc;
        if ((rc = parse_rope(x, sliding, "rope_parameters.sliding_attention", &c->rope_sliding))) return rc;
    } else if ((rc = parse_rope(x, rp, "rope_parameters", &c->rope_parameters))) {
        return rc;
    }
    if ((rc = parse_kind_list(x, o, "layer_types", "sliding_attention", "full_attention", &c->layer_sliding,
                              &c->n_layer_types)) ||
        (rc = parse_kind_list(x, o, "mlp_layer_types", "sparse", "dense", &c->mlp_sparse, &c->n_mlp_layer_types)))
        return rc;
    if ((rc = parse_neo_layers(x, o, c))) return rc;
    if ((rc = parse_int_list(x, o, "mlp_only_layers", &c->mlp_only_layers, &c->n_mlp_only))) return rc;
    if ((rc = parse_int_list(x, o, "no_rope_layers", &c->no_rope_layers, &c->n_no_rope))) return rc;
    if ((rc = parse_eos(x, o, c))) return rc;
    return TM_OK;
}

int tm_hf_config_parse(tm_hf_config *c, const char *text, size_t len, const char *name, tm_err *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    cfg_ctx x = {c->name, "", err};
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) return tm_errf(err, TM_E_FORMAT, "%s: not valid JSON", c->name);
    int rc = TM_OK;
    if (!cJSON_IsObject(root)) {
        rc = tm_errf(err, TM_E_FORMAT, "%s: not a JSON object", c->name);
        goto done;
    }
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (cJSON_IsArray(arch) && cJSON_IsString(arch->child)) {
        snprintf(c->architecture, sizeof c->architecture, "%s", arch->child->valuestring);
    } else if (arch && !cJSON_IsNull(arch)) {
        rc = tm_errf(err, TM_E_INVALID, "%s: 'architectures' must be a list of strings", c->name);
        goto done;
    }
    const cJSON *body = root;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (cJSON_IsObject(tc)) {
        body = tc;
        c->text_config = 1;
        x.pre = "text_config.";
    }
    rc = parse_obj(&x, body, c);
    if (rc == TM_OK && body != root && !c->dtype[0])
        rc = get_str(&x, root, "torch_dtype", "", c->dtype, sizeof c->dtype);
    if (rc == TM_OK && body != root && !c->dtype[0])
        rc = get_str(&x, root, "dtype", "", c->dtype, sizeof c->dtype);
done:
    cJSON_Delete(root);
    if (rc) tm_hf_config_free(c);
    return rc;
}

int tm_hf_config_load(tm_hf_config *c, const char *path, tm_err *err)
{
    memset(c, 0, sizeof *c);
    char *text = NULL;
    size_t len = 0;
    int rc = tm_read_file(path, &text, &len, (size_t)16 << 20, err);
    if (rc) return rc;
    const char *base = strrchr(path, '/');
    rc = tm_hf_config_parse(c, text, len, base ? base + 1 : path, err);
    free(text);
    return rc;
}
