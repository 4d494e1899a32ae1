/* engine/ref/ref_forward.c: the reference forward pass (model.h's op
 * sequence, one layer after another over a chunk of T tokens). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref/ref-impl.h"
#include "model/moe_route.h"

static size_t kv_off(const tm_ref *r, int l, int g, int p)
{
    return (((size_t)l * r->Hk + g) * r->max_ctx + p) * r->Dh;
}

/* ---- RoPE ---- */

/* cos/sin for position p: cs, sn [half] */
static void rope_table(const tm_rope *rp, const float *inv, int p, float *cs, float *sn)
{
    int half = rp->rot_dim / 2;
    for (int i = 0; i < half; i++) {
        float ang = (float)p * inv[i];
        cs[i] = (float)cos((double)ang) * rp->attn_scaling;
        sn[i] = (float)sin((double)ang) * rp->attn_scaling;
    }
}

/* rotate-half on the first 2*half dims of x */
static void rope_apply(float *x, const float *cs, const float *sn, int half)
{
    for (int i = 0; i < half; i++) {
        float a = x[i], b = x[i + half];
        x[i] = a * cs[i] - b * sn[i];
        x[i + half] = b * cs[i] + a * sn[i];
    }
}

/* ---- attention ---- */

typedef struct att_ctx {
    const tm_ref *r;
    int l, T, pos0;
    const float *qkv;   /* [T][(H+2Hk)*Dh] (q part used) */
    float *out;         /* [T][H*Dh] */
} att_ctx;

static void att_items(void *p, int i0, int i1)
{
    const att_ctx *c = p;
    const tm_ref *r = c->r;
    const tm_layer_desc *ld = &r->layer[c->l];
    const ref_layer *w = &r->w[c->l];
    int Dh = r->Dh, nqkv = (r->H + 2 * r->Hk) * Dh, group = r->H / r->Hk;
    float *s = malloc(((size_t)c->pos0 + c->T) * sizeof(float));
    if (!s) return; /* cannot happen in practice; the output stays zero */
    for (int it = i0; it < i1; it++) {
        int t = it / r->H, h = it % r->H, g = h / group, i = c->pos0 + t;
        const float *q = c->qkv + (size_t)t * nqkv + (size_t)h * Dh;
        int j0 = ld->sliding && i - ld->window + 1 > 0 ? i - ld->window + 1 : 0;
        float mx = w->sinks ? w->sinks[h] : -INFINITY; /* a sink: one more logit in the sum, without a value */
        for (int j = j0; j <= i; j++) {
            const float *k = r->kc + kv_off(r, c->l, g, j);
            double acc = 0;
            for (int d = 0; d < Dh; d++) acc += (double)q[d] * (double)k[d];
            float v = (float)acc * r->attn_scale;
            if (r->attn_softcap != 0) v = (float)tanh((double)(v / r->attn_softcap)) * r->attn_softcap;
            if (r->alibi) v += r->alibi[h] * (float)(j - i); /* ALiBi: a distance bias per head */
            s[j] = v;
            if (v > mx) mx = v;
        }
        double sum = w->sinks ? exp((double)(w->sinks[h] - mx)) : 0;
        for (int j = j0; j <= i; j++) {
            s[j] = (float)exp((double)(s[j] - mx));
            sum += s[j];
        }
        float fsum = (float)sum;
        for (int j = j0; j <= i; j++) s[j] = s[j] / fsum;
        float *o = c->out + (size_t)t * r->H * Dh + (size_t)h * Dh;
        for (int d = 0; d < Dh; d++) {
            double acc = 0;
            for (int j = j0; j <= i; j++) acc += (double)s[j] * (double)r->vc[kv_off(r, c->l, g, j) + d];
            o[d] = (float)acc;
        }
    }
    free(s);
}

/* ---- multi-head latent attention (model.h's mla) ---- */

/* qkv[T][(H + 2) Dh] (q' of the H heads, then k', v' of the one latent head; model.h's absorbed mla) from
 * h[T][D]: q = (q_lora ? rmsnorm(h·q_aᵀ + b) : h)·wqᵀ [H][rope + nope], each head [rope | nope];
 * ckv = h·kv_aᵀ + b [kvl + rope], c = rmsnorm(ckv[:kvl]); q'_h = [q_h[:rope] | q_h[rope:]·UK_h];
 * k' = [ckv[kvl:] | c], v' = [c | 0] */
static int mla_qkv(const tm_ref *r, const ref_layer *w, const float *h, int T, float *qkv, tm_err *err)
{
    int D = r->D, H = r->H, Dh = r->Dh, ql = r->q_lora, kvl = r->kv_lora, rope = r->qk_rope, nope = r->qk_nope;
    int kvr = kvl + rope, qd = rope + nope, nq = (H + 2) * Dh;
    float *qa = ql ? malloc(sizeof(float) * (size_t)T * ql) : NULL, *q = malloc(sizeof(float) * (size_t)T * H * qd);
    float *ckv = malloc(sizeof(float) * (size_t)T * kvr), *qn = malloc(sizeof(float) * (size_t)T * nope);
    float *ql8 = malloc(sizeof(float) * (size_t)T * kvl);
    int rc = TM_OK;
    if ((ql && !qa) || !q || !ckv || !qn || !ql8) {
        rc = tm_errf(err, TM_E_NOMEM, "reference forward: out of memory for %d tokens", T);
        goto done;
    }
    if (ql) {
        ref_matmul(r->n_threads, qa, h, w->q_a, w->q_a_b, T, ql, D);
        for (int t = 0; t < T; t++) ref_rmsnorm(qa + (size_t)t * ql, qa + (size_t)t * ql, w->q_a_norm, ql, r->mla_eps);
    }
    ref_matmul(r->n_threads, q, ql ? qa : h, w->wq, NULL, T, H * qd, ql ? ql : D);
    ref_matmul(r->n_threads, ckv, h, w->kv_a, w->kv_a_b, T, kvr, D);
    for (int t = 0; t < T; t++) {
        float *row = qkv + (size_t)t * nq, *k = row + (size_t)H * Dh, *v = k + Dh;
        memcpy(k, ckv + (size_t)t * kvr + kvl, sizeof(float) * (size_t)rope);
        ref_rmsnorm(k + rope, ckv + (size_t)t * kvr, w->kv_a_norm, kvl, r->mla_eps);
        memcpy(v, k + rope, sizeof(float) * (size_t)kvl);
        memset(v + kvl, 0, sizeof(float) * (size_t)rope);
    }
    for (int hh = 0; hh < H; hh++) { /* q'_h = [q_rope | q_nope·UK_h] */
        for (int t = 0; t < T; t++) {
            const float *qh = q + ((size_t)t * H + hh) * qd;
            memcpy(qkv + (size_t)t * nq + (size_t)hh * Dh, qh, sizeof(float) * (size_t)rope);
            memcpy(qn + (size_t)t * nope, qh + rope, sizeof(float) * (size_t)nope);
        }
        ref_matmul(r->n_threads, ql8, qn, w->uk_t + (size_t)hh * kvl * nope, NULL, T, kvl, nope);
        for (int t = 0; t < T; t++)
            memcpy(qkv + (size_t)t * nq + (size_t)hh * Dh + rope, ql8 + (size_t)t * kvl, sizeof(float) * (size_t)kvl);
    }
done:
    free(qa);
    free(q);
    free(ckv);
    free(qn);
    free(ql8);
    return rc;
}

/* a[T][D] = o·woᵀ + bo from att[T][H][Dh] (each head's o'; its first kvl dims the latent's weighted sum):
 * o_h = o'_h[:kvl]·UV_hᵀ [T][H][v] */
static int mla_out(const tm_ref *r, const ref_layer *w, const float *att, int T, float *a, tm_err *err)
{
    int H = r->H, Dh = r->Dh, kvl = r->kv_lora, v = r->v_dim, nv = r->qk_nope + v;
    float *x = malloc(sizeof(float) * (size_t)T * kvl), *y = malloc(sizeof(float) * (size_t)T * v);
    float *out = malloc(sizeof(float) * (size_t)T * H * v);
    if (!x || !y || !out) {
        free(x);
        free(y);
        free(out);
        return tm_errf(err, TM_E_NOMEM, "reference forward: out of memory for %d tokens", T);
    }
    for (int hh = 0; hh < H; hh++) {
        for (int t = 0; t < T; t++) memcpy(x + (size_t)t * kvl, att + ((size_t)t * H + hh) * Dh, sizeof(float) * (size_t)kvl);
        ref_matmul(r->n_threads, y, x, w->kv_b + ((size_t)hh * nv + r->qk_nope) * kvl, NULL, T, v, kvl);
        for (int t = 0; t < T; t++) memcpy(out + ((size_t)t * H + hh) * v, y + (size_t)t * v, sizeof(float) * (size_t)v);
    }
    ref_matmul(r->n_threads, a, out, w->wo, w->bo, T, r->D, H * v);
    free(x);
    free(y);
    free(out);
    return TM_OK;
}

/* ---- mixture of experts ---- */

typedef struct moe_ctx {
    const tm_ref *r;
    const ref_layer *w;
    const float *h;     /* [T][D] */
    float *out;         /* [T][D] */
} moe_ctx;

static void route_row(const tm_ref *r, const ref_layer *w, float *prob, int *sel, float *wsel, float *choice,
                      unsigned char *ok)
{
    int E = r->E;
    if (r->router_sigmoid) {
        for (int e = 0; e < E; e++) prob[e] = (float)(1.0 / (1.0 + exp(-(double)prob[e])));
    } else {
        float mx = -INFINITY;
        for (int e = 0; e < E; e++) mx = prob[e] > mx ? prob[e] : mx;
        double sum = 0;
        for (int e = 0; e < E; e++) sum += (prob[e] = (float)exp((double)(prob[e] - mx)));
        for (int e = 0; e < E; e++) prob[e] = (float)(prob[e] / sum);
    }
    tm_moe_route rt = {E, r->top_k, r->n_group, r->topk_group, r->group_top2, r->norm_topk, r->routed_scale, w->router_corr};
    tm_moe_pick(&rt, prob, sel, wsel, choice, ok);
}

static void moe_tokens(void *p, int t0, int t1)
{
    const moe_ctx *c = p;
    const tm_ref *r = c->r;
    int D = r->D, E = r->E, Fe = r->Fe, K = r->top_k, Fg = Fe > r->Fs ? Fe : r->Fs;
    float *prob = malloc((size_t)E * sizeof(float));
    float *gu = malloc((size_t)2 * Fg * sizeof(float));
    float *y = malloc((size_t)D * sizeof(float));
    int *sel = malloc((size_t)K * sizeof(int));
    float *wsel = malloc((size_t)K * sizeof(float)), *choice = malloc((size_t)E * sizeof(float));
    unsigned char *ok = malloc((size_t)E);
    if (!prob || !gu || !y || !sel || !wsel || !choice || !ok) goto done;
    for (int t = t0; t < t1; t++) {
        const float *h = c->h + (size_t)t * D;
        float *out = c->out + (size_t)t * D;
        ref_matmul(1, prob, h, c->w->router, c->w->router_b, 1, E, D);
        route_row(r, c->w, prob, sel, wsel, choice, ok);
        /* experts in index order, as transformers accumulates them */
        memset(out, 0, (size_t)D * sizeof(float));
        for (int e = 0; e < E; e++) {
            int k = -1;
            for (int k2 = 0; k2 < K; k2++)
                if (sel[k2] == e) k = k2;
            if (k < 0) continue;
            const float *gub = c->w->e_gub ? c->w->e_gub + (size_t)e * 2 * Fe : NULL;
            const float *db = c->w->e_db ? c->w->e_db + (size_t)e * D : NULL;
            ref_matmul(1, gu, h, c->w->e_gu + (size_t)e * 2 * Fe * D, gub, 1, 2 * Fe, D);
            for (int f = 0; f < Fe; f++) gu[f] = ref_glu(r->act, gu[f], gu[Fe + f]);
            ref_matmul(1, y, gu, c->w->e_d + (size_t)e * D * Fe, db, 1, D, Fe);
            for (int d = 0; d < D; d++) out[d] += y[d] * wsel[k];
        }
        if (c->w->s_gu) { /* Qwen2-MoE: + sigmoid(h·s_router) * shared expert(h), after the routed ones
                             (GraniteMoE: without the gate) */
            int Fs = r->Fs;
            float g = 0, sg = 1;
            if (c->w->s_router) {
                ref_matmul(1, &g, h, c->w->s_router, NULL, 1, 1, D);
                sg = (float)(1.0 / (1.0 + exp(-(double)g)));
            }
            ref_matmul(1, gu, h, c->w->s_gu, NULL, 1, 2 * Fs, D);
            for (int f = 0; f < Fs; f++) gu[f] = ref_glu(r->act, gu[f], gu[Fs + f]);
            ref_matmul(1, y, gu, c->w->s_d, NULL, 1, D, Fs);
            for (int d = 0; d < D; d++) out[d] += sg * y[d];
        }
    }
done:
    free(prob);
    free(gu);
    free(y);
    free(sel);
    free(wsel);
    free(choice);
    free(ok);
}

/* ---- the forward pass ---- */

int tm_ref_forward(tm_ref *r, const int32_t *tokens, int T, int pos0, float *logits, int all_logits, tm_err *err)
{
    if (T < 1) return tm_errf(err, TM_E_INVALID, "reference forward: T = %d tokens", T);
    if (pos0 < 0 || pos0 > r->n_past)
        return tm_errf(err, TM_E_INVALID, "reference forward: pos0 = %d but the cache holds %d positions", pos0, r->n_past);
    if ((int64_t)pos0 + T > r->max_ctx)
        return tm_errf(err, TM_E_LIMIT, "reference forward: positions up to %lld exceed max_ctx %d",
                       (long long)pos0 + T, r->max_ctx);
    if (r->pos_embed && (int64_t)pos0 + T > r->max_pos)
        return tm_errf(err, TM_E_LIMIT, "reference forward: positions up to %lld exceed the model's %d learned positions",
                       (long long)pos0 + T, r->max_pos);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= r->V)
            return tm_errf(err, TM_E_INVALID, "reference forward: token %d at index %d is outside the vocabulary [0, %d)",
                           (int)tokens[t], t, r->V);
    int D = r->D, Dh = r->Dh, qd = r->H * Dh, kvd = r->Hk * Dh, nqkv = qd + 2 * kvd;
    int Fmax = r->F > r->Fe ? r->F : r->Fe;
    size_t TD = (size_t)T * D;
    float *x = malloc(TD * sizeof(float));
    float *x0 = r->parallel ? malloc(TD * sizeof(float)) : NULL; /* the layer's input, for the FFN */
    float *h = malloc(TD * sizeof(float));
    float *a = malloc(TD * sizeof(float));
    float *qkv = malloc((size_t)T * nqkv * sizeof(float));
    float *att = malloc((size_t)T * qd * sizeof(float));
    float *gu = malloc((size_t)T * 2 * Fmax * sizeof(float));
    float *g = malloc((size_t)T * Fmax * sizeof(float));
    float *cs = malloc((size_t)Dh * sizeof(float));
    float *sn = malloc((size_t)Dh * sizeof(float));
    int rc = TM_OK;
    if (!x || !h || !a || !qkv || !att || !gu || !g || !cs || !sn || (r->parallel && !x0)) {
        rc = tm_errf(err, TM_E_NOMEM, "reference forward: out of memory for %d tokens", T);
        goto done;
    }
    r->n_past = pos0;
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++)
            x[(size_t)t * D + d] = r->embed[(size_t)tokens[t] * D + d] * r->embed_scale +
                                   (r->pos_embed ? r->pos_embed[(size_t)(pos0 + t + r->pos_offset) * D + d] : 0.f);
    if (r->embed_norm) /* BLOOM: a LayerNorm on the embedding */
        for (int t = 0; t < T; t++)
            ref_norm(r->norm, x + (size_t)t * D, x + (size_t)t * D, r->embed_norm, r->embed_norm_b, D, r->eps);
    if (r->trace) memcpy(r->trace, x, TD * sizeof(float));

    for (int l = 0; l < r->L; l++) {
        const ref_layer *w = &r->w[l];
        const tm_layer_desc *ld = &r->layer[l];
        const tm_rope *rp = ld->rope >= 0 ? &r->rope[ld->rope] : NULL; /* NULL: no RoPE (NoPE layer) */
        if (w->attn_norm)
            for (int t = 0; t < T; t++)
                ref_norm(r->norm, h + (size_t)t * D, x + (size_t)t * D, w->attn_norm, w->attn_norm_b, D, r->eps);
        else /* OLMo 2: the attention takes x itself */
            memcpy(h, x, TD * sizeof(float));
        if (x0) memcpy(x0, x, TD * sizeof(float));
        if (r->mla) {
            if ((rc = mla_qkv(r, w, h, T, qkv, err))) goto done;
        } else {
            ref_matmul(r->n_threads, qkv, h, w->wqkv, w->bqkv, T, nqkv, D);
        }
        if (r->clip_qkv > 0) /* OLMo, MPT: q, k, v clamped */
            for (size_t i = 0; i < (size_t)T * nqkv; i++)
                qkv[i] = qkv[i] < -r->clip_qkv ? -r->clip_qkv : qkv[i] > r->clip_qkv ? r->clip_qkv : qkv[i];
        const float *inv = rp ? tm_rope_inv_freq_at(rp, (int64_t)pos0 + T) : NULL;
        int half = rp ? rp->rot_dim / 2 : 0;
        for (int t = 0; t < T; t++) {
            int p = pos0 + t;
            float *q = qkv + (size_t)t * nqkv, *k = q + qd, *v = k + kvd;
            if (rp) rope_table(rp, inv, p, cs, sn);
            if (r->qk_whole) { /* OLMo 2: one norm over all heads, before RoPE */
                ref_norm(r->norm, q, q, w->q_norm, NULL, qd, r->eps);
                ref_norm(r->norm, k, k, w->k_norm, NULL, kvd, r->eps);
            }
            /* per head: the model's norm over Dh (a weight row per head with qk_heads) */
            for (int hh = 0; hh < r->H; hh++) {
                if (w->q_norm && !r->qk_whole)
                    ref_norm(r->norm, q + hh * Dh, q + hh * Dh, w->q_norm + (r->qk_heads ? hh * Dh : 0), w->q_norm_b, Dh,
                             r->eps);
                rope_apply(q + hh * Dh, cs, sn, half);
            }
            for (int gg = 0; gg < r->Hk; gg++) {
                if (w->k_norm && !r->qk_whole)
                    ref_norm(r->norm, k + gg * Dh, k + gg * Dh, w->k_norm + (r->qk_heads ? gg * Dh : 0), w->k_norm_b, Dh,
                             r->eps);
                rope_apply(k + gg * Dh, cs, sn, half);
                memcpy(r->kc + kv_off(r, l, gg, p), k + gg * Dh, (size_t)Dh * sizeof(float));
                memcpy(r->vc + kv_off(r, l, gg, p), v + gg * Dh, (size_t)Dh * sizeof(float));
            }
        }
        att_ctx ac = {r, l, T, pos0, qkv, att};
        ref_parallel(r->n_threads, T * r->H, (double)T * r->H * (pos0 + T) * Dh, att_items, &ac);
        if (r->mla) {
            if ((rc = mla_out(r, w, att, T, a, err))) goto done;
        } else {
            ref_matmul(r->n_threads, a, att, w->wo, w->bo, T, D, qd);
        }
        for (int t = 0; t < T; t++) {
            float *at = a + (size_t)t * D, *xt = x + (size_t)t * D;
            if (w->attn_out_norm) ref_rmsnorm(at, at, w->attn_out_norm, D, r->eps);
            for (int d = 0; d < D; d++) xt[d] = xt[d] + at[d] * r->residual_scale;
            const float *fin = x0 ? x0 + (size_t)t * D : xt; /* parallel: the FFN reads the layer's input */
            if (w->ffn_norm) ref_norm(r->norm, h + (size_t)t * D, fin, w->ffn_norm, w->ffn_norm_b, D, r->eps);
            else memcpy(h + (size_t)t * D, fin, (size_t)D * sizeof(float));
        }
        if (ld->moe) {
            moe_ctx mc = {r, w, h, a};
            ref_parallel(r->n_threads, T, (double)T * r->top_k * 3 * r->Fe * D, moe_tokens, &mc);
        } else {
            int F = r->F, nr = r->gated ? 2 * F : F; /* gate rows then up rows, or up rows alone */
            ref_matmul(r->n_threads, gu, h, w->wgu, w->bgu, T, nr, D);
            for (int t = 0; t < T; t++)
                for (int f = 0; f < F; f++) {
                    const float *row = gu + (size_t)t * nr;
                    g[(size_t)t * F + f] = r->gated ? ref_glu(r->act, row[f], row[F + f]) : ref_act(r->act, row[f]);
                }
            ref_matmul(r->n_threads, a, g, w->wd, w->bd, T, D, F);
        }
        for (int t = 0; t < T; t++) {
            float *at = a + (size_t)t * D, *xt = x + (size_t)t * D;
            if (w->ffn_out_norm) ref_rmsnorm(at, at, w->ffn_out_norm, D, r->eps);
            for (int d = 0; d < D; d++) xt[d] = xt[d] + at[d] * r->residual_scale;
        }
        if (r->trace) memcpy(r->trace + (size_t)(l + 1) * TD, x, TD * sizeof(float));
    }
    r->n_past = pos0 + T;

    int t0 = (all_logits || r->trace) ? 0 : T - 1;
    for (int t = t0; t < T; t++)
        ref_norm(r->norm, h + (size_t)t * D, x + (size_t)t * D, r->final_norm, r->final_norm_b, D, r->eps);
    if (r->trace) memcpy(r->trace + (size_t)(r->L + 1) * TD, h, TD * sizeof(float));
    if (logits) {
        int lt0 = all_logits ? 0 : T - 1, n = T - lt0;
        ref_matmul(r->n_threads, logits, h + (size_t)lt0 * D, r->lm_head, r->lm_head_b, n, r->V, D);
        if (r->logits_div != 1.0f)
            for (size_t i = 0; i < (size_t)n * r->V; i++) logits[i] /= r->logits_div;
        if (r->logits_mul != 1.0f)
            for (size_t i = 0; i < (size_t)n * r->V; i++) logits[i] *= r->logits_mul;
        if (r->final_softcap != 0)
            for (size_t i = 0; i < (size_t)n * r->V; i++)
                logits[i] = (float)tanh((double)(logits[i] / r->final_softcap)) * r->final_softcap;
    }
done:
    free(x);
    free(x0);
    free(h);
    free(a);
    free(qkv);
    free(att);
    free(gu);
    free(g);
    free(cs);
    free(sn);
    return rc;
}
