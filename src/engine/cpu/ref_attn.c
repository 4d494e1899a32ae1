/* engine/cpu/ref_attn.c: scalar attention references (full score rows,
 * double accumulation) and the argument checks every variant shares. */
#include <math.h>
#include <stdlib.h>

#include "engine/cpu/kernels-impl.h"

#define ATTN_MAX_DH 512

int tm_kcheck_attn_prefill(const tm_kattn_prefill *a)
{
    if (!a || !a->q || !a->k || !a->v || !a->out) return TM_E_INVALID;
    if (a->T < 1 || a->H < 1 || a->Hk < 1 || a->H % a->Hk || a->Dh < 1 || a->Dh > ATTN_MAX_DH) return TM_E_INVALID;
    if (a->pos0 < 0 || a->kv_stride < a->pos0 + a->T || a->window < 0 || !(a->softcap >= 0)) return TM_E_INVALID;
    if (a->kv_dtype != TM_DT_BF16 && a->kv_dtype != TM_DT_F32) return TM_E_INVALID;
    return TM_OK;
}

int tm_kcheck_attn_decode(const tm_kattn_decode *a)
{
    if (!a || !a->q || !a->k_pages || !a->v_pages || !a->out || !a->page_table || !a->ctx_len) return TM_E_INVALID;
    if (a->B < 1 || a->H < 1 || a->Hk < 1 || a->H % a->Hk || a->Dh < 1 || a->Dh > ATTN_MAX_DH) return TM_E_INVALID;
    if (a->page_size < 1 || a->n_pages < 0 || a->window < 0 || !(a->softcap >= 0)) return TM_E_INVALID;
    if (a->kv_dtype != TM_DT_BF16 && a->kv_dtype != TM_DT_F16) return TM_E_INVALID;
    if (a->page_bytes < (size_t)a->Hk * a->page_size * a->Dh * 2) return TM_E_INVALID;
    for (int b = 0; b < a->B; b++) {
        if (a->ctx_len[b] < 1 || !a->page_table[b]) return TM_E_INVALID;
        int np = (a->ctx_len[b] + a->page_size - 1) / a->page_size;
        for (int i = 0; i < np; i++)
            if (a->page_table[b][i] < 0 || (a->n_pages && a->page_table[b][i] >= a->n_pages)) return TM_E_INVALID;
    }
    return TM_OK;
}

static float kv_at(const void *base, tm_dtype dt, size_t i)
{
    switch (dt) {
    case TM_DT_F32: return ((const float *)base)[i];
    case TM_DT_BF16: return tm_bf16_to_f32(((const uint16_t *)base)[i]);
    default: return tm_f16_to_f32(((const uint16_t *)base)[i]);
    }
}

static double cap(double s, float softcap)
{
    return softcap > 0 ? softcap * tanh(s / softcap) : s;
}

/* One query row against n keys given by an index function. */
typedef const void *(*key_fn)(const void *ctx, int j, int which /* 0 k, 1 v */, size_t *elem_off);

static void attend(float *out, const float *q, int Dh, int j0, int j1, float scale, float softcap,
                   const void *ctx, key_fn kf, tm_dtype dt)
{
    int n = j1 - j0;
    double *s = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    double mx = -INFINITY, sum = 0, acc[ATTN_MAX_DH] = {0};
    if (!s) return; /* reference only: tests allocate little */
    for (int j = j0; j < j1; j++) {
        size_t off;
        const void *kb = kf(ctx, j, 0, &off);
        double d = 0;
        for (int i = 0; i < Dh; i++) d += (double)q[i] * kv_at(kb, dt, off + (size_t)i);
        s[j - j0] = cap(d * scale, softcap);
        if (s[j - j0] > mx) mx = s[j - j0];
    }
    for (int j = j0; j < j1; j++) {
        double p = exp(s[j - j0] - mx);
        sum += p;
        size_t off;
        const void *vb = kf(ctx, j, 1, &off);
        for (int i = 0; i < Dh; i++) acc[i] += p * kv_at(vb, dt, off + (size_t)i);
    }
    for (int i = 0; i < Dh; i++) out[i] = n > 0 ? (float)(acc[i] / sum) : 0.f;
    free(s);
}

typedef struct { const tm_kattn_prefill *a; int kvh; } pf_ctx;

static const void *pf_key(const void *c, int j, int which, size_t *off)
{
    const pf_ctx *p = c;
    *off = ((size_t)p->kvh * p->a->kv_stride + (size_t)j) * p->a->Dh;
    return which ? p->a->v : p->a->k;
}

int tm_kref_attn_prefill(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool)
{
    (void)ws; (void)pool;
    if (tm_kcheck_attn_prefill(a)) return TM_E_INVALID;
    int grp = a->H / a->Hk;
    for (int t = 0; t < a->T; t++)
        for (int h = 0; h < a->H; h++) {
            int i = a->pos0 + t;
            int j0 = a->window > 0 && i - a->window + 1 > 0 ? i - a->window + 1 : 0;
            pf_ctx c = {a, h / grp};
            size_t o = ((size_t)t * a->H + h) * a->Dh;
            attend(a->out + o, a->q + o, a->Dh, j0, i + 1, a->scale, a->softcap, &c, pf_key, a->kv_dtype);
        }
    return TM_OK;
}

typedef struct { const tm_kattn_decode *a; int b, kvh; } dc_ctx;

static const void *dc_key(const void *c, int j, int which, size_t *off)
{
    const dc_ctx *d = c;
    const tm_kattn_decode *a = d->a;
    int page = a->page_table[d->b][j / a->page_size], slot = j % a->page_size;
    const char *base = (const char *)(which ? a->v_pages : a->k_pages) + (size_t)page * a->page_bytes;
    *off = ((size_t)d->kvh * a->page_size + (size_t)slot) * a->Dh;
    return base;
}

int tm_kref_attn_decode(const tm_kattn_decode *a, tm_kbuf *ws, struct tm_pool *pool)
{
    (void)ws; (void)pool;
    if (tm_kcheck_attn_decode(a)) return TM_E_INVALID;
    int grp = a->H / a->Hk;
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++) {
            int i = a->ctx_len[b] - 1;
            int j0 = a->window > 0 && i - a->window + 1 > 0 ? i - a->window + 1 : 0;
            dc_ctx c = {a, b, h / grp};
            size_t o = ((size_t)b * a->H + h) * a->Dh;
            attend(a->out + o, a->q + o, a->Dh, j0, i + 1, a->scale, a->softcap, &c, dc_key, a->kv_dtype);
        }
    return TM_OK;
}
