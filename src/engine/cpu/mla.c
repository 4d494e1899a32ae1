/* engine/cpu/mla.c: multi-head latent attention, absorbed (see mla.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/mla.h"
#include "quant/quant.h"

void tm_mla_free(tm_mla *x)
{
    if (!x) return;
    tm_kpack_free(x->q_a);
    tm_kpack_free(x->q);
    tm_kpack_free(x->kv_a);
    for (int h = 0; h < x->H; h++) {
        if (x->uk) tm_kpack_free(x->uk[h]);
        if (x->uv) tm_kpack_free(x->uv[h]);
    }
    free(x->uk);
    free(x->uv);
    free(x->ukv);
    float *fs[] = {x->ukv_sc, x->q_a_b, x->kv_a_b, x->q_a_norm, x->kv_a_norm, x->qa, x->qf, x->ckv, x->xin, x->yout, x->o};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) free(fs[i]);
    free(x);
}

/* a bound vector of n values as f32 (NULL if t is not bound; *bad set if it is bound wrongly or memory runs out) */
static float *vec(const tm_tensor *t, int64_t n, int *bad)
{
    if (!t->data) return NULL;
    float *v = tm_tensor_numel(t) == n ? malloc(sizeof(float) * (size_t)n) : NULL;
    if (v) tm_quant_dequant_row(t->dtype, t->data, t->scales, n, 0, v);
    else *bad = 1;
    return v;
}

/* UK_hᵀ [kvl][nope] and UV_h [v][kvl] of every head from kv_b, encoded (bf16, or int8 where kv_b is
 * quantized) into x->ukv and packed; their order there: uk[0], uv[0], uk[1], ... */
static int absorb_weights(tm_mla *x, const tm_tensor *kv_b, tm_moe_pack_fn pack, unsigned roles, int layer,
                          tm_err *err)
{
    int H = x->H, kvl = x->kvl, nope = x->nope, v = x->v, nv = nope + v;
    if (!kv_b->data || kv_b->ndim != 2 || kv_b->shape[0] != (int64_t)H * nv || kv_b->shape[1] != kvl)
        return tm_errf(err, TM_E_INVALID, "mla layer %d: kv_b_proj is not bound as [%d][%d]", layer, H * nv, kvl);
    tm_dtype enc = tm_quant_is_quantized(kv_b->dtype) ? TM_DT_Q8PC : TM_DT_BF16;
    size_t per_head = tm_quant_data_bytes(enc, kvl, nope) + tm_quant_data_bytes(enc, v, kvl);
    size_t sc_head = enc == TM_DT_Q8PC ? (size_t)(kvl + v) : 0;
    x->uk = calloc((size_t)H, sizeof *x->uk);
    x->uv = calloc((size_t)H, sizeof *x->uv);
    x->ukv = malloc(per_head * (size_t)H);
    x->ukv_sc = sc_head ? malloc(sizeof(float) * sc_head * (size_t)H) : NULL;
    float *rows = malloc(sizeof(float) * (size_t)nv * kvl), *t = malloc(sizeof(float) * (size_t)kvl * nope);
    int rc = TM_OK;
    if (!x->uk || !x->uv || !x->ukv || (sc_head && !x->ukv_sc) || !rows || !t) {
        rc = tm_errf(err, TM_E_NOMEM, "mla layer %d: out of memory for the absorbed weights", layer);
        goto done;
    }
    for (int h = 0; h < H && rc == TM_OK; h++) {
        for (int i = 0; i < nv; i++) /* head h's rows of kv_b, f32 [nope + v][kvl] */
            tm_quant_dequant_row(kv_b->dtype, kv_b->data, kv_b->scales, kvl, (int64_t)h * nv + i, rows + (size_t)i * kvl);
        for (int i = 0; i < nope; i++)
            for (int j = 0; j < kvl; j++) t[(size_t)j * nope + i] = rows[(size_t)i * kvl + j];
        uint8_t *d = (uint8_t *)x->ukv + per_head * (size_t)h;
        float *sc = sc_head ? x->ukv_sc + sc_head * (size_t)h : NULL;
        size_t ukb = tm_quant_data_bytes(enc, kvl, nope);
        tm_tensor uk = {kv_b->name, enc, 2, {kvl, nope}, d, ukb, sc};
        tm_tensor uv = {kv_b->name, enc, 2, {v, kvl}, d + ukb, tm_quant_data_bytes(enc, v, kvl), sc ? sc + kvl : NULL};
        if ((rc = tm_quant_quantize(enc, t, kvl, nope, d, sc, NULL, err)) ||
            (rc = tm_quant_quantize(enc, rows + (size_t)nope * kvl, v, kvl, d + ukb, sc ? sc + kvl : NULL, NULL, err)) ||
            (rc = pack(&x->uk[h], &uk, roles, err)) || (rc = pack(&x->uv[h], &uv, roles, err)))
            tm_err_prefix(err, "mla layer %d, head %d", layer, h);
    }
done:
    free(rows);
    free(t);
    return rc;
}

int tm_mla_init(tm_mla **out, const tm_model *m, int layer, tm_moe_pack_fn pack, unsigned roles, int max_rows,
                tm_err *err)
{
    *out = NULL;
    const tm_layer_weights *w = &m->w[layer];
    tm_mla *x = calloc(1, sizeof *x);
    if (!x) return tm_errf(err, TM_E_NOMEM, "mla layer %d: out of memory", layer);
    x->D = m->D, x->H = m->H, x->Dh = m->Dh, x->ql = m->q_lora, x->kvl = m->kv_lora, x->nope = m->qk_nope;
    x->rope = m->qk_rope, x->v = m->v_dim, x->max_rows = max_rows, x->eps = m->mla_eps;
    int rc = TM_OK, bad = 0;
    if ((x->ql && (rc = pack(&x->q_a, &w->q_a, roles, err))) || (rc = pack(&x->q, &w->wq, roles, err)) ||
        (rc = pack(&x->kv_a, &w->kv_a, roles, err)) || (rc = absorb_weights(x, &w->kv_b, pack, roles, layer, err)))
        goto fail;
    x->q_a_b = vec(&w->q_a_b, x->ql, &bad);
    x->kv_a_b = vec(&w->kv_a_b, (int64_t)x->kvl + x->rope, &bad);
    x->q_a_norm = vec(&w->q_a_norm, x->ql, &bad);
    x->kv_a_norm = vec(&w->kv_a_norm, x->kvl, &bad);
    size_t M = (size_t)max_rows, wx = (size_t)(x->nope > x->kvl ? x->nope : x->kvl);
    size_t wy = (size_t)(x->kvl > x->v ? x->kvl : x->v);
    x->qa = x->ql ? malloc(sizeof(float) * M * (size_t)x->ql) : NULL;
    x->qf = malloc(sizeof(float) * M * (size_t)x->H * (size_t)(x->rope + x->nope));
    x->ckv = malloc(sizeof(float) * M * (size_t)(x->kvl + x->rope));
    x->xin = malloc(sizeof(float) * M * wx);
    x->yout = malloc(sizeof(float) * M * wy);
    x->o = malloc(sizeof(float) * M * (size_t)x->H * (size_t)x->v);
    if (bad || !x->q || !x->kv_a || !x->kv_a_norm || (x->ql && (!x->q_a || !x->q_a_norm || !x->qa)) || !x->qf ||
        !x->ckv || !x->xin || !x->yout || !x->o) {
        rc = tm_errf(err, bad ? TM_E_INVALID : TM_E_NOMEM, "mla layer %d: %s", layer,
                     bad ? "a norm or bias is not bound to its size" : "out of memory or a weight not bound");
        goto fail;
    }
    *out = x;
    return TM_OK;
fail:
    tm_mla_free(x);
    return rc;
}

int tm_mla_qkv(tm_mla *x, const tm_kernels *k, const float *h, int M, float *q, float *kk, float *vv, tm_kbuf *ws,
               struct tm_pool *pool, tm_err *err)
{
    if (M < 1 || M > x->max_rows) return tm_errf(err, TM_E_INVALID, "mla: %d rows (1..%d)", M, x->max_rows);
    int H = x->H, Dh = x->Dh, kvl = x->kvl, rope = x->rope, nope = x->nope, kvr = kvl + rope, qd = rope + nope, rc;
    const float *qin = h;
    if (x->ql) { /* qa = rmsnorm(h · q_aᵀ + b) [M][ql] */
        if ((rc = tm_kmatmul_f32(k, x->q_a, x->q_a_b, h, M, x->qa, ws, pool, err))) return rc;
        k->rmsnorm(x->qa, x->qa, x->q_a_norm, M, x->ql, x->eps, 0);
        qin = x->qa;
    }
    if ((rc = tm_kmatmul_f32(k, x->q, NULL, qin, M, x->qf, ws, pool, err)) ||       /* [M][H][rope + nope] */
        (rc = tm_kmatmul_f32(k, x->kv_a, x->kv_a_b, h, M, x->ckv, ws, pool, err))) /* [M][kvl + rope] */
        return rc;
    for (int i = 0; i < M; i++) { /* k' = [rope | c], v' = [c | 0] */
        float *kr = kk + (size_t)i * Dh, *vr = vv + (size_t)i * Dh;
        memcpy(kr, x->ckv + (size_t)i * kvr + kvl, sizeof(float) * (size_t)rope);
        k->rmsnorm(kr + rope, x->ckv + (size_t)i * kvr, x->kv_a_norm, 1, kvl, x->eps, 0);
        memcpy(vr, kr + rope, sizeof(float) * (size_t)kvl);
        memset(vr + kvl, 0, sizeof(float) * (size_t)rope);
    }
    for (int hh = 0; hh < H; hh++) { /* q'_h = [q_rope | q_nope · UK_h] */
        for (int i = 0; i < M; i++) {
            const float *qh = x->qf + ((size_t)i * H + hh) * qd;
            memcpy(q + ((size_t)i * H + hh) * Dh, qh, sizeof(float) * (size_t)rope);
            memcpy(x->xin + (size_t)i * nope, qh + rope, sizeof(float) * (size_t)nope);
        }
        if ((rc = tm_kmatmul_f32(k, x->uk[hh], NULL, x->xin, M, x->yout, ws, pool, err))) return rc; /* [M][kvl] */
        for (int i = 0; i < M; i++)
            memcpy(q + ((size_t)i * H + hh) * Dh + rope, x->yout + (size_t)i * kvl, sizeof(float) * (size_t)kvl);
    }
    return TM_OK;
}

int tm_mla_out(tm_mla *x, const tm_kernels *k, const float *att, int M, tm_kbuf *ws, struct tm_pool *pool,
               tm_err *err)
{
    if (M < 1 || M > x->max_rows) return tm_errf(err, TM_E_INVALID, "mla: %d rows (1..%d)", M, x->max_rows);
    int H = x->H, Dh = x->Dh, kvl = x->kvl, v = x->v, rc;
    for (int hh = 0; hh < H; hh++) { /* o_h = o'_h[:kvl] · UV_hᵀ */
        for (int i = 0; i < M; i++)
            memcpy(x->xin + (size_t)i * kvl, att + ((size_t)i * H + hh) * Dh, sizeof(float) * (size_t)kvl);
        if ((rc = tm_kmatmul_f32(k, x->uv[hh], NULL, x->xin, M, x->yout, ws, pool, err))) return rc; /* [M][v] */
        for (int i = 0; i < M; i++)
            memcpy(x->o + ((size_t)i * H + hh) * v, x->yout + (size_t)i * v, sizeof(float) * (size_t)v);
    }
    return TM_OK;
}
