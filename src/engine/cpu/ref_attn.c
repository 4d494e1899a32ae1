/* engine/cpu/ref_attn.c: scalar attention references (full score rows,
 * double accumulation) and the argument checks every variant shares.
 *
 * int8 KV (decode only, TM_DT_Q8PC pages): keys and values are s q per row;
 * the query is quantized to int8 per (row, head) too (tm_kattn_quant_q), so
 * a score is scale * s_q * s_k * sum_d q_q[d] q_k[d], an exact integer dot
 * in the vector kernels (VNNI); values stay f32 (s_v q_v). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/kernels-impl.h"

#define ATTN_MAX_DH TM_KATTN_MAX_DH

int tm_kcheck_attn_prefill(const tm_kattn_prefill *a)
{
    if (!a || !a->q || !a->k || !a->v || !a->out) return TM_E_INVALID;
    if (a->T < 1 || a->H < 1 || a->Hk < 1 || a->H % a->Hk || a->Dh < 1 || a->Dh > ATTN_MAX_DH) return TM_E_INVALID;
    if (a->pos0 < 0 || a->window < 0 || !(a->softcap >= 0)) return TM_E_INVALID;
    if (!a->page_table) {
        if (a->kv_stride < a->pos0 + a->T) return TM_E_INVALID;
        return a->kv_dtype == TM_DT_BF16 || a->kv_dtype == TM_DT_F32 ? TM_OK : TM_E_INVALID;
    }
    if (a->kv_dtype != TM_DT_BF16 && a->kv_dtype != TM_DT_F16 && a->kv_dtype != TM_DT_F32) return TM_E_INVALID;
    size_t rows = (size_t)a->page_size * (size_t)a->Dh * (a->kv_dtype == TM_DT_F32 ? 4 : 2);
    if (a->page_size < 1 || a->n_pages < 0 || a->head_bytes < rows || a->page_bytes < (size_t)a->Hk * a->head_bytes)
        return TM_E_INVALID;
    int np = (a->pos0 + a->T + a->page_size - 1) / a->page_size;
    for (int i = 0; i < np; i++)
        if (a->page_table[i] < 0 || (a->n_pages && a->page_table[i] >= a->n_pages)) return TM_E_INVALID;
    return TM_OK;
}

size_t tm_kattn_head_bytes(const tm_kattn_decode *a)
{
    if (a->head_bytes) return a->head_bytes;
    size_t rows = (size_t)a->page_size * (size_t)a->Dh;
    return a->kv_dtype == TM_DT_Q8PC ? 4 * (size_t)a->page_size + rows : 2 * rows;
}

void tm_kattn_quant_q(int8_t *q, float *s, int32_t *qsum, const float *x, int Dh)
{
    float amax = 0.f;
    for (int i = 0; i < Dh; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float inv = amax > 0.f ? 127.f / amax : 0.f;
    int32_t sum = 0;
    for (int i = 0; i < Dh; i++) sum += q[i] = (int8_t)tm_kq8(x[i], inv);
    *s = amax / 127.f;
    *qsum = sum;
}

int tm_kcheck_attn_decode(const tm_kattn_decode *a)
{
    if (!a || !a->q || !a->k_pages || !a->v_pages || !a->out || !a->page_table || !a->ctx_len) return TM_E_INVALID;
    if (a->B < 1 || a->H < 1 || a->Hk < 1 || a->H % a->Hk || a->Dh < 1 || a->Dh > ATTN_MAX_DH) return TM_E_INVALID;
    if (a->page_size < 1 || a->n_pages < 0 || a->window < 0 || !(a->softcap >= 0)) return TM_E_INVALID;
    if (a->kv_dtype != TM_DT_BF16 && a->kv_dtype != TM_DT_F16 && a->kv_dtype != TM_DT_Q8PC) return TM_E_INVALID;
    size_t rows = (size_t)a->page_size * (size_t)a->Dh, need = a->kv_dtype == TM_DT_Q8PC ? 4 * (size_t)a->page_size + rows : 2 * rows;
    if (tm_kattn_head_bytes(a) < need || a->page_bytes < (size_t)a->Hk * tm_kattn_head_bytes(a)) return TM_E_INVALID;
    for (int b = 0; b < a->B; b++) {
        if (a->ctx_len[b] < 1 || !a->page_table[b]) return TM_E_INVALID;
        int np = (a->ctx_len[b] + a->page_size - 1) / a->page_size;
        for (int i = 0; i < np; i++)
            if (a->page_table[b][i] < 0 || (a->n_pages && a->page_table[b][i] >= a->n_pages)) return TM_E_INVALID;
    }
    return TM_OK;
}

static double cap(double s, float softcap)
{
    return softcap > 0 ? softcap * tanh(s / softcap) : s;
}

/* Key (which 0) or value (1) j of a query row, widened to f32: row[Dh]. */
typedef void (*key_fn)(const void *ctx, int j, int which, float *row);

/* out = softmax_j(cap(scale q.k_j) + slope (j - (j1 - 1))) . v_j over keys [j0, j1) (the query at j1 - 1), the
 * sum with e^sink in it (-INFINITY: none) */
static void attend(float *out, const float *q, int Dh, int j0, int j1, float scale, float softcap, float slope,
                   float sink, const void *ctx, key_fn kf)
{
    int n = j1 - j0;
    double *s = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    double mx = sink, sum = 0, acc[ATTN_MAX_DH] = {0};
    float row[ATTN_MAX_DH];
    if (!s) return; /* reference only: tests allocate little */
    for (int j = j0; j < j1; j++) {
        kf(ctx, j, 0, row);
        double d = 0;
        for (int i = 0; i < Dh; i++) d += (double)q[i] * row[i];
        s[j - j0] = cap(d * scale, softcap) + (double)slope * (j - (j1 - 1));
        if (s[j - j0] > mx) mx = s[j - j0];
    }
    if (sink > -INFINITY) sum = exp(sink - mx);
    for (int j = j0; j < j1; j++) {
        double p = exp(s[j - j0] - mx);
        sum += p;
        kf(ctx, j, 1, row);
        for (int i = 0; i < Dh; i++) acc[i] += p * row[i];
    }
    for (int i = 0; i < Dh; i++) out[i] = n > 0 ? (float)(acc[i] / sum) : 0.f;
    free(s);
}

typedef struct { const tm_kattn_prefill *a; int kvh; } pf_ctx;

static void pf_key(const void *c, int j, int which, float *row)
{
    const pf_ctx *p = c;
    const void *r = tm_kattn_pf_row(p->a, which, p->kvh, j);
    if (p->a->kv_dtype == TM_DT_F32) memcpy(row, r, sizeof(float) * (size_t)p->a->Dh);
    else tm_to_f32(row, r, p->a->kv_dtype, (size_t)p->a->Dh);
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
            attend(a->out + o, a->q + o, a->Dh, j0, i + 1, a->scale, a->softcap, a->alibi ? a->alibi[h] : 0.f,
                   a->sinks ? a->sinks[h] : -INFINITY, &c, pf_key);
        }
    return TM_OK;
}

typedef struct { const tm_kattn_decode *a; int b, kvh; } dc_ctx;

static void dc_key(const void *c, int j, int which, float *row)
{
    const dc_ctx *d = c;
    const tm_kattn_decode *a = d->a;
    int page = a->page_table[d->b][j / a->page_size], slot = j % a->page_size, Dh = a->Dh;
    const uint8_t *blk = (const uint8_t *)(which ? a->v_pages : a->k_pages) + (size_t)page * a->page_bytes +
                         (size_t)d->kvh * tm_kattn_head_bytes(a);
    if (a->kv_dtype == TM_DT_Q8PC) {
        float sc;
        memcpy(&sc, blk + 4 * (size_t)slot, 4);
        const int8_t *q = (const int8_t *)(blk + 4 * (size_t)a->page_size) + (size_t)slot * Dh;
        for (int i = 0; i < Dh; i++) row[i] = sc * (float)q[i];
    } else {
        tm_to_f32(row, (const uint16_t *)blk + (size_t)slot * Dh, a->kv_dtype, (size_t)Dh);
    }
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
            const float *q = a->q + o;
            float qd[ATTN_MAX_DH];
            if (a->kv_dtype == TM_DT_Q8PC) { /* int8 keys meet the int8 query: s_q q_i */
                int8_t qi[ATTN_MAX_DH];
                float sq;
                int32_t qsum;
                tm_kattn_quant_q(qi, &sq, &qsum, q, a->Dh);
                for (int d = 0; d < a->Dh; d++) qd[d] = sq * (float)qi[d];
                q = qd;
            }
            attend(a->out + o, q, a->Dh, j0, i + 1, a->scale, a->softcap, a->alibi ? a->alibi[h] : 0.f,
                   a->sinks ? a->sinks[h] : -INFINITY, &c, dc_key);
        }
    return TM_OK;
}
