/* engine/cpu/attn_amx.c: prefill attention on AMX tiles (bf16), the "amx"
 * variant's attn_prefill. The same flash-style algorithm as attn_vec.inc
 * (online softmax over key blocks, GQA rows sharing a kv head, causal and
 * sliding-window skipping), with the two products on tiles:
 *
 *   S[16 rows][64 keys] = Q[16][Dh] . K[64][Dh]^T   tiles 0-3 (one per 16 keys)
 *   O[16 rows][Dh]      = P[16][64] . V[64][Dh]     tiles 0-3 (16 dims each)
 *   A operands (Q or P, hi and lo) in tiles 4-5, B (K or V) through 6-7
 *
 * A task is (kv head, AQB queries): its rows are the queries x the H/Hk
 * heads of the group, as bf16 Q [R][Dh] (R = rows rounded up to 16, zero
 * rows past the end). Per key block of AKB = 64 keys, K and V are packed
 * once for all the task's rows into the tiles' VNNI layouts:
 *
 *   kp [Dh/32 steps][4 key groups][16 dim pairs][16 keys][2]  (B of Q.K^T)
 *   vp [2 key steps][Dh/16 dim tiles][16 key pairs][16 dims][2]  (B of P.V)
 *
 * Then per 16-row group: S on tiles -> softmax rows in f32 (AVX-512; scale,
 * soft-cap, masks) -> P in bf16 -> O on tiles -> acc = acc corr + O.
 * Numerics: K and V are bf16 in the cache, so exact on tiles; Q and P go in
 * as two bf16 terms each (hi = bf16(x), lo = bf16(x - hi): x to ~2^-16), so
 * each product is two tile ops and the result is f32-close (one bf16
 * rounding of Q and P moved outputs by up to 0.5%); sums in f32. Dh must be a multiple of 32 (at most 256) and the cache bf16;
 * anything else runs the AVX-512 kernel. The tile configuration is the
 * GEMM's (every tile 16 rows x 64 bytes). */
#include <math.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

#include "engine/cpu/vec_exp.inc"

#define AKB 64  /* keys per block: 4 tiles of 16 */
#define AQB 32  /* queries per task */
#define ADH 256 /* largest head dim */

/* per-worker scratch (byte offsets within one worker's slice) */
typedef struct aws {
    uint16_t *q, *ql; /* [R][Dh] bf16: Q = q + ql (hi and lo parts) */
    uint16_t *kp;  /* [Dh * AKB] bf16, VNNI (see above) */
    uint16_t *vp;  /* [AKB * Dh] bf16, VNNI */
    float *s;      /* [16][AKB] scores of one row group */
    uint16_t *p, *pl; /* [16][AKB] bf16 probabilities, hi and lo parts */
    float *o;      /* [16][Dh] P.V of the block */
    float *acc;    /* [R][Dh] */
    float *m, *l, *corr; /* [R], [R], [16] */
} aws;

/* lay the scratch out from base (64-byte aligned pieces); returns its bytes */
static size_t aws_layout(char *base, int R, int Dh, aws *w)
{
    size_t off = 0;
#define TAKE(field, type, n)                                   \
    if (base) w->field = (type *)(base + off);                  \
    off += (((size_t)(n) * sizeof(type)) + 63) & ~(size_t)63;
    TAKE(q, uint16_t, (size_t)R * Dh);
    TAKE(ql, uint16_t, (size_t)R * Dh);
    TAKE(kp, uint16_t, (size_t)Dh * AKB);
    TAKE(vp, uint16_t, (size_t)Dh * AKB);
    TAKE(s, float, 16 * AKB);
    TAKE(p, uint16_t, 16 * AKB);
    TAKE(pl, uint16_t, 16 * AKB);
    TAKE(o, float, (size_t)16 * Dh);
    TAKE(acc, float, (size_t)R * Dh);
    TAKE(m, float, R);
    TAKE(l, float, R);
    TAKE(corr, float, 16);
#undef TAKE
    return off;
}

/* 16 x 16 transpose of 32-bit elements: r[i] holds row i; out row j = column j */
static inline void transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* Pack n keys (n <= AKB; zero past n) of K and V, bf16 rows Dh apart. K: a
 * key's 32 dims of step s are 16 dim pairs (dwords); 16 keys' dwords,
 * transposed, are the 16 rows (dim pairs) x 16 keys of one B tile. V: two
 * keys' rows interleaved by element are one key pair's row of 16 dims. */
static void pack_kv(const aws *w, const tm_kattn_prefill *a, int hk, int j0, int n, int Dh)
{
    const __m512i zero = _mm512_setzero_si512();
    for (int s = 0; s < Dh / 32; s++)
        for (int kg = 0; kg < AKB / 16; kg++) {
            __m512i r[16];
            for (int j = 0; j < 16; j++) {
                int key = 16 * kg + j;
                const uint16_t *k = key < n ? tm_kattn_pf_row(a, 0, hk, j0 + key) : NULL;
                r[j] = k ? _mm512_loadu_si512(k + 32 * s) : zero;
            }
            transpose16(r);
            uint16_t *o = w->kp + (size_t)(s * (AKB / 16) + kg) * 512;
            for (int p = 0; p < 16; p++) _mm512_store_si512(o + 32 * p, r[p]);
        }
    int ndt = Dh / 16;
    for (int ks = 0; ks < AKB / 32; ks++)
        for (int p = 0; p < 16; p++) {
            int k0 = 32 * ks + 2 * p;
            const uint16_t *v0 = k0 < n ? tm_kattn_pf_row(a, 1, hk, j0 + k0) : NULL;
            const uint16_t *v1 = k0 + 1 < n ? tm_kattn_pf_row(a, 1, hk, j0 + k0 + 1) : NULL;
            for (int dt = 0; dt < ndt; dt++) {
                __m256i x0 = v0 ? _mm256_loadu_si256((const __m256i *)(v0 + 16 * dt)) : _mm256_setzero_si256();
                __m256i x1 = v1 ? _mm256_loadu_si256((const __m256i *)(v1 + 16 * dt)) : _mm256_setzero_si256();
                /* elements d = 0..15 of x0 and x1 interleaved: x0[0] x1[0] x0[1] x1[1] ... */
                __m512i ab = _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
                const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                     23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
                _mm512_store_si512(w->vp + ((size_t)(ks * ndt + dt) * 16 + p) * 32, _mm512_permutexvar_epi16(idx, ab));
            }
        }
}

/* The split-precision tile step both products share: C tiles 0..nt-1 (nt 2
 * or 4, 16 x 16 f32 each) += (A hi + A lo) . B_j, with A's 16 rows x 32 bf16
 * as hi and lo (tiles 4, 5; rows a_stride bytes apart) and B_j the j-th
 * 16-column tile, 512 bf16 apart in b (through tiles 6 and 7). */
static inline void split_step(const uint16_t *a_hi, const uint16_t *a_lo, int a_stride, const uint16_t *b, int nt)
{
    _tile_loadd(4, a_hi, a_stride);
    _tile_loadd(5, a_lo, a_stride);
    _tile_loadd(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(0, 5, 6);
    _tile_loadd(7, b + 512, 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(1, 5, 7);
    if (nt == 4) {
        _tile_loadd(6, b + 1024, 64);
        _tile_dpbf16ps(2, 4, 6);
        _tile_dpbf16ps(2, 5, 6);
        _tile_loadd(7, b + 1536, 64);
        _tile_dpbf16ps(3, 4, 7);
        _tile_dpbf16ps(3, 5, 7);
    }
}

/* C tiles 0..nt-1 zeroed, and stored side by side: tile j at dst + 16 j
 * (rows stride bytes apart) */
static inline void tiles_zero(int nt)
{
    _tile_zero(0);
    _tile_zero(1);
    if (nt == 4) {
        _tile_zero(2);
        _tile_zero(3);
    }
}

static inline void tiles_store(float *dst, int stride, int nt)
{
    _tile_stored(0, dst, stride);
    _tile_stored(1, dst + 16, stride);
    if (nt == 4) {
        _tile_stored(2, dst + 32, stride);
        _tile_stored(3, dst + 48, stride);
    }
}

/* S = Q[rows g*16 ..][Dh] . K^T for the 4 key groups, into w->s [16][AKB] */
static void scores(const aws *w, int g, int Dh)
{
    tiles_zero(4);
    const uint16_t *q = w->q + (size_t)g * 16 * Dh, *ql = w->ql + (size_t)g * 16 * Dh;
    for (int s = 0; s < Dh / 32; s++)
        split_step(q + 32 * s, ql + 32 * s, Dh * 2, w->kp + (size_t)s * 4 * 512, 4);
    tiles_store(w->s, AKB * 4, 4);
}

/* O[16][Dh] = P[16][AKB] . V, 4 dim tiles at a time, into w->o */
static void pv(const aws *w, int Dh)
{
    int ndt = Dh / 16;
    for (int d0 = 0; d0 < ndt; d0 += 4) {
        int nt = ndt - d0 < 4 ? ndt - d0 : 4; /* Dh % 32 == 0: 2 or 4 */
        tiles_zero(nt);
        for (int ks = 0; ks < AKB / 32; ks++)
            split_step(w->p + 32 * ks, w->pl + 32 * ks, AKB * 2, w->vp + (size_t)(ks * ndt + d0) * 512, nt);
        tiles_store(w->o + 16 * d0, Dh * 4, nt);
    }
}

/* x as bf16 hi + lo: hi = bf16(x), lo = bf16(x - hi); hi + lo = x to ~2^-16 */
static inline void split_bf16(__m512 x, __m256i *hi, __m256i *lo)
{
    *hi = (__m256i)_mm512_cvtneps_pbh(x);
    __m512 h = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(*hi), 16));
    *lo = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(x, h));
}

/* Online softmax of one row's block scores s[AKB] (keys at positions jpos0 +
 * j, visible: [jlo, jhi)) into bf16 p[AKB]; updates m, l; returns the factor
 * for the row's accumulator. A row that sees nothing here keeps its state. */
static float softmax_row(float *s, uint16_t *p, uint16_t *pl, int jlo, int jhi, float scale, float softcap, float *m,
                         float *l)
{
    if (jhi <= jlo) {
        memset(p, 0, AKB * 2);
        memset(pl, 0, AKB * 2);
        return 1.f;
    }
    __m512 x[AKB / 16];
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < AKB / 16; c++) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + 16 * c), _mm512_set1_ps(scale));
        if (softcap > 0) { /* c tanh(x / c) = c (1 - 2 / (e^{2x/c} + 1)) */
            __m512 e = vexp_avx512(_mm512_mul_ps(v, _mm512_set1_ps(2.f / softcap)));
            v = _mm512_mul_ps(_mm512_set1_ps(softcap),
                              _mm512_sub_ps(_mm512_set1_ps(1.f), _mm512_div_ps(_mm512_set1_ps(2.f),
                                                                                _mm512_add_ps(e, _mm512_set1_ps(1.f)))));
        }
        int lo = jlo - 16 * c, hi = jhi - 16 * c;
        lo = lo < 0 ? 0 : lo > 16 ? 16 : lo;
        hi = hi < 0 ? 0 : hi > 16 ? 16 : hi;
        __mmask16 vis = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        x[c] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), vis, v);
        vmax = _mm512_max_ps(vmax, x[c]);
    }
    float bm = _mm512_reduce_max_ps(vmax), mnew = bm > *m ? bm : *m;
    float corr = *m == -INFINITY ? 0.f : expf(*m - mnew);
    __m512 vsum = _mm512_setzero_ps(), vm = _mm512_set1_ps(mnew);
    for (int c = 0; c < AKB / 16; c++) {
        /* exp(-inf) = 0: vexp clamps its input, so mask the invisible keys */
        __mmask16 vis = _mm512_cmp_ps_mask(x[c], _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        __m512 e = _mm512_maskz_mov_ps(vis, vexp_avx512(_mm512_sub_ps(x[c], vm)));
        __m256i hi, lo;
        split_bf16(e, &hi, &lo);
        _mm256_storeu_si256((__m256i *)(p + 16 * c), hi);
        _mm256_storeu_si256((__m256i *)(pl + 16 * c), lo);
        vsum = _mm512_add_ps(vsum, e);
    }
    *l = *l * corr + _mm512_reduce_add_ps(vsum);
    *m = mnew;
    return corr;
}

typedef struct amx_job {
    const tm_kattn_prefill *a;
    char *ws;
    size_t per;
    int nqb;
} amx_job;

static void task(void *ctx, int t, int worker)
{
    const amx_job *jb = ctx;
    const tm_kattn_prefill *a = jb->a;
    int hk = t / jb->nqb, qb = t % jb->nqb, grp = a->H / a->Hk, Dh = a->Dh;
    int t0 = qb * AQB, t1 = t0 + AQB < a->T ? t0 + AQB : a->T, rows = (t1 - t0) * grp;
    int R = (rows + 15) / 16 * 16;
    aws w;
    aws_layout(jb->ws + jb->per * (size_t)worker, R, Dh, &w);
    /* Q rows in bf16: row r = (t - t0) grp + g, head hk grp + g; zero rows past the end */
    for (int r = 0; r < R; r++) {
        uint16_t *qr = w.q + (size_t)r * Dh, *qlr = w.ql + (size_t)r * Dh;
        if (r >= rows) {
            memset(qr, 0, (size_t)Dh * 2);
            memset(qlr, 0, (size_t)Dh * 2);
            continue;
        }
        const float *src = a->q + ((size_t)(t0 + r / grp) * a->H + (size_t)hk * grp + r % grp) * Dh;
        for (int d = 0; d < Dh; d += 16) {
            __m256i hi, lo;
            split_bf16(_mm512_loadu_ps(src + d), &hi, &lo);
            _mm256_storeu_si256((__m256i *)(qr + d), hi);
            _mm256_storeu_si256((__m256i *)(qlr + d), lo);
        }
    }
    memset(w.acc, 0, sizeof(float) * (size_t)R * Dh);
    for (int r = 0; r < R; r++) {
        w.m[r] = -INFINITY;
        w.l[r] = 0.f;
    }
    int ilo = a->pos0 + t0, ihi = a->pos0 + t1 - 1; /* query positions */
    int jstart = a->window > 0 && ilo - a->window + 1 > 0 ? ilo - a->window + 1 : 0;
    tm_kamx_config();
    for (int j0 = jstart / AKB * AKB; j0 <= ihi; j0 += AKB) {
        int n = ihi + 1 - j0 < AKB ? ihi + 1 - j0 : AKB;
        pack_kv(&w, a, hk, j0, n, Dh);
        for (int g = 0; g < R / 16; g++) {
            int r0 = 16 * g, r1 = r0 + 16 < rows ? r0 + 16 : rows;
            int pfirst = a->pos0 + t0 + r0 / grp, plast = a->pos0 + t0 + (r1 - 1) / grp;
            if (j0 > plast) continue;                                         /* all keys in the future */
            if (a->window > 0 && j0 + n - 1 <= pfirst - a->window) continue; /* all out of the window */
            scores(&w, g, Dh);
            for (int i = 0; i < 16; i++) {
                int r = r0 + i;
                if (r >= rows) {
                    memset(w.p + i * AKB, 0, AKB * 2);
                    memset(w.pl + i * AKB, 0, AKB * 2);
                    w.corr[i] = 1.f;
                    continue;
                }
                int ipos = a->pos0 + t0 + r / grp;
                int jhi = ipos - j0 + 1 < n ? ipos - j0 + 1 : n;
                int jlo = a->window > 0 && ipos - a->window + 1 - j0 > 0 ? ipos - a->window + 1 - j0 : 0;
                w.corr[i] = softmax_row(w.s + i * AKB, w.p + i * AKB, w.pl + i * AKB, jlo, jhi, a->scale, a->softcap,
                                        &w.m[r], &w.l[r]);
            }
            pv(&w, Dh);
            for (int i = 0; i < 16 && r0 + i < rows; i++) {
                float *acc = w.acc + (size_t)(r0 + i) * Dh;
                const float *o = w.o + (size_t)i * Dh;
                __m512 c = _mm512_set1_ps(w.corr[i]);
                for (int d = 0; d < Dh; d += 16)
                    _mm512_storeu_ps(acc + d, _mm512_fmadd_ps(_mm512_loadu_ps(acc + d), c, _mm512_loadu_ps(o + d)));
            }
        }
    }
    _tile_release();
    for (int r = 0; r < rows; r++) {
        float *out = a->out + ((size_t)(t0 + r / grp) * a->H + (size_t)hk * grp + r % grp) * Dh;
        const float *acc = w.acc + (size_t)r * Dh;
        float inv = w.l[r] > 0 ? 1.f / w.l[r] : 0.f;
        for (int d = 0; d < Dh; d += 16) _mm512_storeu_ps(out + d, _mm512_mul_ps(_mm512_loadu_ps(acc + d), _mm512_set1_ps(inv)));
    }
}

static int attn_prefill_amx(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_attn_prefill(a)) return TM_E_INVALID;
    if (a->kv_dtype != TM_DT_BF16 || a->Dh % 32 || a->Dh > ADH) return tm_kattn_prefill_avx512(a, ws, pool);
    int nw = tm_pool_size(pool), grp = a->H / a->Hk;
    int R = (AQB * grp + 15) / 16 * 16;
    aws unused;
    size_t per = aws_layout(NULL, R, a->Dh, &unused);
    if (tm_kbuf_reserve(ws, per * (size_t)nw + 64)) return TM_E_NOMEM;
    char *base = (char *)(((uintptr_t)ws->p + 63) & ~(uintptr_t)63);
    amx_job jb = {a, base, per, (a->T + AQB - 1) / AQB};
    tm_pool_run(pool, a->Hk * jb.nqb, task, &jb);
    return TM_OK;
}

void tm_kattn_fill_amx(tm_kernels *k)
{
#ifndef TM_NO_AMX_ATTN
    k->attn_prefill = attn_prefill_amx;
#else
    (void)k;
#endif
}
