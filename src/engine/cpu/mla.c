/* engine/cpu/mla.c: multi-head latent attention's projections (see mla.h). */
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
    tm_kpack_free(x->kv_b);
    float *fs[] = {x->q_a_b, x->kv_a_b, x->q_a_norm, x->kv_a_norm, x->qa, x->ckv, x->c, x->kvb};
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

int tm_mla_init(tm_mla **out, const tm_model *m, int layer, tm_moe_pack_fn pack, unsigned roles, int max_rows,
                tm_err *err)
{
    *out = NULL;
    const tm_layer_weights *w = &m->w[layer];
    tm_mla *x = calloc(1, sizeof *x);
    if (!x) return tm_errf(err, TM_E_NOMEM, "mla layer %d: out of memory", layer);
    x->D = m->D, x->H = m->H, x->Dh = m->Dh, x->ql = m->q_lora, x->kvl = m->kv_lora, x->nope = m->qk_nope;
    x->rope = m->qk_rope, x->v = m->v_dim, x->max_rows = max_rows, x->eps = m->eps;
    int rc = TM_OK, bad = 0;
    if ((x->ql && (rc = pack(&x->q_a, &w->q_a, roles, err))) || (rc = pack(&x->q, &w->wq, roles, err)) ||
        (rc = pack(&x->kv_a, &w->kv_a, roles, err)) || (rc = pack(&x->kv_b, &w->kv_b, roles, err)))
        goto fail;
    x->q_a_b = vec(&w->q_a_b, x->ql, &bad);
    x->kv_a_b = vec(&w->kv_a_b, (int64_t)x->kvl + x->rope, &bad);
    x->q_a_norm = vec(&w->q_a_norm, x->ql, &bad);
    x->kv_a_norm = vec(&w->kv_a_norm, x->kvl, &bad);
    size_t M = (size_t)max_rows;
    x->qa = x->ql ? malloc(sizeof(float) * M * (size_t)x->ql) : NULL;
    x->ckv = malloc(sizeof(float) * M * (size_t)(x->kvl + x->rope));
    x->c = malloc(sizeof(float) * M * (size_t)x->kvl);
    x->kvb = malloc(sizeof(float) * M * (size_t)x->H * (size_t)(x->nope + x->v));
    if (bad || !x->q || !x->kv_a || !x->kv_b || !x->kv_a_norm || (x->ql && (!x->q_a || !x->q_a_norm || !x->qa)) ||
        !x->ckv || !x->c || !x->kvb) {
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

int tm_mla_forward(tm_mla *x, const tm_kernels *k, const float *h, int M, float *q, float *kk, float *vv, tm_kbuf *ws,
                   struct tm_pool *pool, tm_err *err)
{
    if (M < 1 || M > x->max_rows) return tm_errf(err, TM_E_INVALID, "mla: %d rows (1..%d)", M, x->max_rows);
    int H = x->H, Dh = x->Dh, kvr = x->kvl + x->rope, nv = x->nope + x->v, rc;
    const float *qin = h;
    if (x->ql) { /* qa = rmsnorm(h · q_aᵀ + b) [M][ql] */
        if ((rc = tm_kmatmul_f32(k, x->q_a, x->q_a_b, h, M, x->qa, ws, pool, err))) return rc;
        k->rmsnorm(x->qa, x->qa, x->q_a_norm, M, x->ql, x->eps, 0);
        qin = x->qa;
    }
    if ((rc = tm_kmatmul_f32(k, x->q, NULL, qin, M, q, ws, pool, err)) ||          /* [M][H*Dh] */
        (rc = tm_kmatmul_f32(k, x->kv_a, x->kv_a_b, h, M, x->ckv, ws, pool, err))) /* [M][kvl + rope] */
        return rc;
    for (int i = 0; i < M; i++) /* c = rmsnorm(ckv[:kvl]) [M][kvl] */
        k->rmsnorm(x->c + (size_t)i * x->kvl, x->ckv + (size_t)i * kvr, x->kv_a_norm, 1, x->kvl, x->eps, 0);
    if ((rc = tm_kmatmul_f32(k, x->kv_b, NULL, x->c, M, x->kvb, ws, pool, err))) return rc; /* [M][H][nope + v] */
    for (int i = 0; i < M; i++)
        for (int hh = 0; hh < H; hh++) {
            const float *kb = x->kvb + ((size_t)i * H + hh) * nv;
            float *kr = kk + ((size_t)i * H + hh) * Dh, *vr = vv + ((size_t)i * H + hh) * Dh;
            memcpy(kr, x->ckv + (size_t)i * kvr + x->kvl, sizeof(float) * (size_t)x->rope);
            memcpy(kr + x->rope, kb, sizeof(float) * (size_t)x->nope);
            memcpy(vr, kb + x->nope, sizeof(float) * (size_t)x->v);
            memset(vr + x->v, 0, sizeof(float) * (size_t)(Dh - x->v));
        }
    return TM_OK;
}
