/* engine/cpu/attn_amx.c: prefill attention on AMX tiles (bf16), the "amx"
 * variant's attn_prefill. The same flash-style algorithm as attn_vec.inc
 * (online softmax over key blocks, GQA rows sharing a kv head, causal and
 * sliding-window skipping), with both products on tiles and transposed, so
 * that a vector holds one key's (or one dim's) values for 16 query rows and
 * the softmax needs no horizontal reductions:
 *
 *   S^T[64 keys][16 rows] = K[64][Dh] . Q^T[Dh][16]     C tiles 0-3 (16 keys each)
 *   O^T[Dh][16 rows]      = V^T[Dh][64] . P^T[64][16]   C tiles 0-3 (16 dims each)
 *   A operands (K rows, V^T rows) through tiles 4-5, B (Q^T, P^T) in 6-7
 *
 * A task is (kv head, aqb queries): its rows are the queries x the H/Hk heads
 * of the group (row r: query t0 + r / grp, head hk grp + r % grp), R of them
 * (rounded up to 16; rows past the end are masked out), in groups of 16.
 * Layouts in the per-worker scratch (bf16 pairs are VNNI dwords):
 *
 *   qt [R/16][Dh/32 steps][16 dim pairs][16 rows][2]   Q^T, B of S (hi, lo)
 *   kb [64 keys][Dh]                                   K rows, A of S (as cached)
 *   vt [Dh/16 dim tiles][2 key halves][16 dims][32 keys]  V^T, A of O
 *   st [64 keys][16 rows] f32                          S^T of one row group
 *   pt [2 key halves][16 key pairs][16 rows][2]        P^T, B of O (hi, lo)
 *   ot [Dh][16 rows] f32, acc [R/16][Dh][16 rows] f32  O^T of the block, the sum
 *   m, l [R]                                           running max and sum
 *
 * Per key block (64 keys) of a task: K gathered and V transposed once for
 * all its rows; per row group: S^T on tiles -> the block max per row (64
 * vector max) -> e = 2^(s scale log2(e) - m) (64 vector exp2s, m kept in
 * log2 units), l and P^T -> O^T on tiles -> acc = acc corr + O^T (corr =
 * 2^(m_old - m) per row, one vector).
 * Numerics: K and V are bf16 in the cache, so exact on tiles; Q and P go in
 * as two bf16 terms each (Q: hi = bf16(x), lo = bf16(x - hi); P: hi = x
 * truncated to bf16, split_pair; both x to ~2^-16), so each product is two
 * tile ops; sums in f32. Outputs are within ~4e-6 to 7e-6 (relative to the
 * largest) of the f32 reference on uniform data (3e-6 to 4e-6 until session
 * 34 rounded P's hi to nearest), ~1e-3
 * with outliers of 8 sigma in q and k (a score carries Q's 2^-16 relative
 * error of sum |q k|); one bf16 rounding of Q and P moved them by up to
 * 0.5%, of P alone by ~1.2e-3. Dh must be
 * a multiple of 32 (at most 256) and the cache bf16; anything else runs the
 * AVX-512 kernel. The tile configuration is the GEMM's (every tile 16 rows x
 * 64 bytes). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

#include "engine/cpu/vec_exp.inc"

#define AKB 64  /* keys per block: 4 tiles of 16 */
_Static_assert(TM_KATTN_KEY_BLOCK % AKB == 0, "key blocks start within TM_KATTN_KEY_BLOCK");
#ifndef AQB
#define AQB 32  /* queries per task, or twice that where the tasks stay at least 4 a worker (aqb below) */
#endif
#define ADH 256 /* largest head dim */

/* -DATTN_PROF: TSC cycles per call in packing, S^T, the softmax, O^T and
 * the accumulator update, summed over workers, printed at exit (a
 * measurement build: tools/kbench.c linked with this file built so). */
#ifdef ATTN_PROF
#include <stdio.h>
#include <x86intrin.h>
static _Atomic unsigned long long prof_c[6], prof_calls;
static void __attribute__((destructor)) prof_print(void)
{
    if (prof_calls)
        fprintf(stderr, "attn_prof: %llu calls, Mcycles/call: pack %.3f S %.3f softmax %.3f O %.3f acc %.3f task %.3f\n",
                prof_calls, prof_c[0] / 1e6 / prof_calls, prof_c[1] / 1e6 / prof_calls, prof_c[2] / 1e6 / prof_calls,
                prof_c[3] / 1e6 / prof_calls, prof_c[4] / 1e6 / prof_calls, prof_c[5] / 1e6 / prof_calls);
}
#define PROF_T(v) unsigned long long v = __rdtsc()
#define PROF_ADD(i, t0) (prof_c[i] += __rdtsc() - (t0))
#define PROF_CALL() (prof_calls++)
#else
#define PROF_T(v) (void)0
#define PROF_ADD(i, t0) (void)0
#define PROF_CALL() (void)0
#endif

/* per-worker scratch (byte offsets within one worker's slice) */
typedef struct aws {
    uint16_t *qt, *qtl; /* [R/16][Dh/32][512] Q^T hi and lo */
    uint16_t *kb;       /* [AKB][Dh] */
    uint16_t *vt;       /* [Dh/16][2][16][32] */
    float *st;          /* [AKB][16] */
    uint16_t *pt, *ptl; /* [2][512] P^T hi and lo */
    float *ot;          /* [Dh][16] */
    float *acc;         /* [R/16][Dh][16] */
    float *m, *l;       /* [R] running max (log2 units: of s scale log2 e) and sum */
    int32_t *rp;        /* [R] each row's query position (very negative past the end) */
} aws;

/* lay the scratch out from base (64-byte aligned pieces); returns its bytes */
static size_t aws_layout(char *base, int R, int Dh, aws *w)
{
    size_t off = 0;
#define TAKE(field, type, n)                                   \
    if (base) w->field = (type *)(base + off);                  \
    off += (((size_t)(n) * sizeof(type)) + 63) & ~(size_t)63;
    TAKE(qt, uint16_t, (size_t)R * Dh);
    TAKE(qtl, uint16_t, (size_t)R * Dh);
    TAKE(kb, uint16_t, (size_t)AKB * Dh);
    TAKE(vt, uint16_t, (size_t)AKB * Dh);
    TAKE(st, float, AKB * 16);
    TAKE(pt, uint16_t, AKB * 16);
    TAKE(ptl, uint16_t, AKB * 16);
    TAKE(ot, float, (size_t)Dh * 16);
    TAKE(acc, float, (size_t)R * Dh);
    TAKE(m, float, R);
    TAKE(l, float, R);
    TAKE(rp, int32_t, R);
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

/* 32 bf16 with a's 16 and b's 16 interleaved by element (a0 b0 a1 b1 ...):
 * one VNNI dword per index, pairing two rows (keys, or dims) */
static inline __m512i interleave_halves(__m512i ab) /* ab: a's 16 words, then b's */
{
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, ab);
}

static inline __m512i interleave16(__m256i a, __m256i b)
{
    return interleave_halves(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
}

/* x as bf16 hi + lo: hi = bf16(x), lo = bf16(x - hi); hi + lo = x to ~2^-16 */
static inline void split_bf16(__m512 x, __m256i *hi, __m256i *lo)
{
    *hi = (__m256i)_mm512_cvtneps_pbh(x);
    __m512 h = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(*hi), 16));
    *lo = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(x, h));
}

/* Two keys' 16 values (a, b) as P^T's VNNI pairs, hi and lo: dword i holds a's element i in its
 * low word and b's in its high word. hi is each value truncated to bf16 (its high 16 bits: one word
 * permute for both keys), lo = bf16(x - hi), so hi + lo = x to ~2^-16 (x - hi < 2^-7 x is exact in
 * f32, and its rounding loses 2^-9 of it): 7 instructions a pair where split_bf16 twice and two
 * interleave16 took 14 (session 34: attention 1.14x at 512 queries over 4096 keys). For x >= 0 (P). */
static inline void split_pair(__m512 a, __m512 b, __m512i *hi, __m512i *lo)
{
    const __m512i hiw = _mm512_set_epi16(63, 31, 61, 29, 59, 27, 57, 25, 55, 23, 53, 21, 51, 19, 49, 17, 47, 15, 45,
                                         13, 43, 11, 41, 9, 39, 7, 37, 5, 35, 3, 33, 1);
    const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
    __m512i ai = _mm512_castps_si512(a), bi = _mm512_castps_si512(b);
    *hi = _mm512_permutex2var_epi16(ai, hiw, bi);
    __m512 ra = _mm512_sub_ps(a, _mm512_castsi512_ps(_mm512_and_si512(ai, top)));
    __m512 rb = _mm512_sub_ps(b, _mm512_castsi512_ps(_mm512_and_si512(bi, top)));
    *lo = interleave_halves((__m512i)_mm512_cvtne2ps_pbh(rb, ra));
}

/* Q^T of the task's rows as B tiles, hi and lo: for group g and step s, row
 * p (dim pair 32 s + 2p, +1) holds the pair of each of the 16 rows: the 16 x
 * 16 dword transpose of the rows' 32 dims. */
static void pack_q(const aws *w, const tm_kattn_prefill *a, int hk, int t0, int rows, int R)
{
    int grp = a->H / a->Hk, Dh = a->Dh;
    for (int g = 0; g < R / 16; g++)
        for (int s = 0; s < Dh / 32; s++) {
            __m512i hi[16], lo[16];
            for (int i = 0; i < 16; i++) {
                int r = 16 * g + i;
                if (r >= rows) {
                    hi[i] = lo[i] = _mm512_setzero_si512();
                    continue;
                }
                const float *src = a->q + ((size_t)(t0 + r / grp) * a->H + (size_t)hk * grp + r % grp) * Dh + 32 * s;
                __m256i h0, l0, h1, l1;
                split_bf16(_mm512_loadu_ps(src), &h0, &l0);
                split_bf16(_mm512_loadu_ps(src + 16), &h1, &l1);
                hi[i] = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
                lo[i] = _mm512_inserti64x4(_mm512_castsi256_si512(l0), l1, 1);
            }
            transpose16(hi);
            transpose16(lo);
            size_t o = ((size_t)g * (Dh / 32) + s) * 512;
            for (int p = 0; p < 16; p++) {
                _mm512_store_si512(w->qt + o + 32 * p, hi[p]);
                _mm512_store_si512(w->qtl + o + 32 * p, lo[p]);
            }
        }
}

/* The block's n keys (n <= AKB; zero rows up to the next 32): K rows copied
 * as they are (A of S^T), V transposed (A of O^T): key pairs' rows
 * interleaved by element are 16 dwords (one per dim), and the 16 x 16
 * transpose of 16 key pairs gives 16 dims' rows of 32 keys. */
static void pack_kv(const aws *w, const tm_kattn_prefill *a, int hk, int j0, int n)
{
    int Dh = a->Dh, n32 = (n + 31) / 32 * 32;
    for (int j = 0; j < n;) {
        int run = tm_kattn_pf_run(a, j0 + j, n - j);
        memcpy(w->kb + (size_t)j * Dh, tm_kattn_pf_row(a, 0, hk, j0 + j), (size_t)run * Dh * 2);
        j += run;
    }
    memset(w->kb + (size_t)n * Dh, 0, (size_t)(n32 - n) * Dh * 2);
    int ndt = Dh / 16;
    for (int h = 0; h < n32 / 32; h++)
        for (int dt = 0; dt < ndt; dt++) {
            __m512i r[16];
            for (int p = 0; p < 16; p++) {
                int k0 = 32 * h + 2 * p;
                const uint16_t *v0 = k0 < n ? tm_kattn_pf_row(a, 1, hk, j0 + k0) : NULL;
                const uint16_t *v1 = k0 + 1 < n ? tm_kattn_pf_row(a, 1, hk, j0 + k0 + 1) : NULL;
                __m256i x0 = v0 ? _mm256_loadu_si256((const __m256i *)(v0 + 16 * dt)) : _mm256_setzero_si256();
                __m256i x1 = v1 ? _mm256_loadu_si256((const __m256i *)(v1 + 16 * dt)) : _mm256_setzero_si256();
                r[p] = interleave16(x0, x1);
            }
            transpose16(r);
            uint16_t *o = w->vt + (size_t)(dt * 2 + h) * 512;
            for (int d = 0; d < 16; d++) _mm512_store_si512(o + 32 * d, r[d]);
        }
}

/* S^T[nkt*16 keys][16 rows] of row group g into w->st: per step, Q^T hi and
 * lo stay in tiles 6, 7 while the key tiles' K rows pass through 4 / 5, two
 * key tiles at a time so that no tile op waits on the one before it (a C
 * tile's hi and lo products are not issued back to back) */
static void scores(const aws *w, int g, int Dh, int nkt)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    int ldk = Dh * 2;
    for (int s = 0; s < Dh / 32; s++) {
        size_t o = ((size_t)g * (Dh / 32) + s) * 512;
        const uint16_t *k = w->kb + 32 * s;
        _tile_loadd(6, w->qt + o, 64);
        _tile_loadd(7, w->qtl + o, 64);
        _tile_loadd(4, k, ldk);
        if (nkt > 1) _tile_loadd(5, k + 16 * Dh, ldk);
        _tile_dpbf16ps(0, 4, 6);
        if (nkt > 1) _tile_dpbf16ps(1, 5, 6);
        _tile_dpbf16ps(0, 4, 7);
        if (nkt > 1) _tile_dpbf16ps(1, 5, 7);
        if (nkt > 2) {
            _tile_loadd(4, k + 32 * Dh, ldk);
            if (nkt > 3) _tile_loadd(5, k + 48 * Dh, ldk);
            _tile_dpbf16ps(2, 4, 6);
            if (nkt > 3) _tile_dpbf16ps(3, 5, 6);
            _tile_dpbf16ps(2, 4, 7);
            if (nkt > 3) _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, w->st, 64);
    if (nkt > 1) _tile_stored(1, w->st + 256, 64);
    if (nkt > 2) _tile_stored(2, w->st + 512, 64);
    if (nkt > 3) _tile_stored(3, w->st + 768, 64);
}

/* O^T[Dh][16 rows] = V^T . P^T over nh key halves, 4 dim tiles at a time, into w->ot */
static void pv(const aws *w, int Dh, int nh)
{
    int ndt = Dh / 16;
    for (int d0 = 0; d0 < ndt; d0 += 4) {
        int nt = ndt - d0 < 4 ? ndt - d0 : 4; /* Dh % 32 == 0: 2 or 4 */
        _tile_zero(0);
        _tile_zero(1);
        if (nt == 4) {
            _tile_zero(2);
            _tile_zero(3);
        }
        for (int h = 0; h < nh; h++) { /* as in scores: no C tile's two products back to back */
            const uint16_t *v = w->vt + (size_t)(d0 * 2 + h) * 512; /* dim tile d0 + i at + i * 1024 */
            _tile_loadd(6, w->pt + 512 * h, 64);
            _tile_loadd(7, w->ptl + 512 * h, 64);
            for (int half = 0; half < nt / 2; half++) {
                _tile_loadd(4, v + 2048 * half, 64);
                _tile_loadd(5, v + 2048 * half + 1024, 64);
                if (half == 0) {
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 5, 6);
                    _tile_dpbf16ps(0, 4, 7);
                    _tile_dpbf16ps(1, 5, 7);
                } else {
                    _tile_dpbf16ps(2, 4, 6);
                    _tile_dpbf16ps(3, 5, 6);
                    _tile_dpbf16ps(2, 4, 7);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
        }
        float *o = w->ot + (size_t)d0 * 256;
        _tile_stored(0, o, 64);
        _tile_stored(1, o + 256, 64);
        if (nt == 4) {
            _tile_stored(2, o + 512, 64);
            _tile_stored(3, o + 768, 64);
        }
    }
}

/* 2^x: f = x - round(x) (vreduceps), 2^f by a degree-5 polynomial fitted on
 * [-1/2, 1/2] for relative error (1.5e-7 with its f32 coefficients; until
 * session 34 the degree-6 Taylor polynomial, 1.2e-7, after a vrndscaleps and
 * a subtraction), scaled by 2^(x - f) (vscalefps: no clamping needed, results
 * below 2^-149 are 0). x = -inf or +inf gives NaN: callers mask those lanes. */
static inline __m512 vexp2(__m512 x)
{
    __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); /* x - round(x), one instruction */
    __m512 n = _mm512_sub_ps(x, f);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.0013276472454890609f), f, _mm512_set1_ps(0.009675540961325169f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.05550713092088699f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24022120237350464f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931469440460205f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0000001192092896f));
    return _mm512_scalef_ps(p, n);
}

#define LOG2E 1.44269504088896341f

/* A score in log2 units: s scale log2 e, through the soft-cap if any (on s
 * scale); monotonic, so it commutes with max. Without a cap the softmax
 * fuses it (fmsub). */
static inline __m512 score2(__m512 s, float scale, float softcap)
{
    if (softcap <= 0) return _mm512_mul_ps(s, _mm512_set1_ps(scale * LOG2E));
    return _mm512_mul_ps(vsoftcap_avx512(_mm512_mul_ps(s, _mm512_set1_ps(scale)), softcap), _mm512_set1_ps(LOG2E));
}

/* lanes that see block key jj: lo <= jj <= hi */
static inline __mmask16 visible(__m512i lo, __m512i hi, int jj)
{
    __m512i j = _mm512_set1_epi32(jj);
    return _mm512_cmp_epi32_mask(lo, j, _MM_CMPINT_LE) & _mm512_cmp_epi32_mask(j, hi, _MM_CMPINT_LE);
}

/* The online softmax of row group g over one block's n keys (S^T in w->st):
 * key jj is visible from lane i iff lo[i] <= jj <= hi[i] (block-relative;
 * hi < 0 for rows past the end). Updates m, l; writes P^T (zero past n, to
 * the 32-key half) and returns corr = e^{m_old - m_new} per row (0 for a row
 * that had seen nothing). masked = 0: every row sees all n keys. */
static __m512 softmax_group(const aws *w, float *mg, float *lg, __m512i lo, __m512i hi, int masked, int n,
                            float scale, float softcap)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY), c2 = _mm512_set1_ps(scale * LOG2E);
    __m512 mx = ninf;
    for (int jj = 0; jj < n; jj++) {
        __m512 s = _mm512_load_ps(w->st + 16 * jj);
        mx = masked ? _mm512_mask_max_ps(mx, visible(lo, hi, jj), mx, s) : _mm512_max_ps(mx, s);
    }
    __mmask16 seen = _mm512_cmp_ps_mask(mx, ninf, _CMP_NEQ_OQ); /* rows with a visible key here */
    __m512 mold = _mm512_loadu_ps(mg);
    __m512 mnew = _mm512_mask_max_ps(mold, seen, mold, score2(mx, scale, softcap));
    __mmask16 had = _mm512_cmp_ps_mask(mold, ninf, _CMP_NEQ_OQ);
    __m512 corr = _mm512_maskz_mov_ps(had, vexp2(_mm512_sub_ps(mold, mnew)));
    __m512 sum = _mm512_setzero_ps();
    int npair = (n + 31) / 32 * 16;
    for (int p = 0; p < npair; p++) {
        __m512 e[2];
        for (int b = 0; b < 2; b++) {
            int jj = 2 * p + b;
            if (jj >= n) {
                e[b] = _mm512_setzero_ps();
                continue;
            }
            __m512 s = _mm512_load_ps(w->st + 16 * jj);
            __m512 x = softcap > 0 ? _mm512_sub_ps(score2(s, scale, softcap), mnew) : _mm512_fmsub_ps(s, c2, mnew);
            __mmask16 vis = masked ? seen & visible(lo, hi, jj) : seen;
            e[b] = _mm512_maskz_mov_ps(vis, vexp2(x));
            sum = _mm512_add_ps(sum, e[b]);
        }
        __m512i hi2, lo2;
        split_pair(e[0], e[1], &hi2, &lo2);
        _mm512_store_si512(w->pt + 32 * p, hi2);
        _mm512_store_si512(w->ptl + 32 * p, lo2);
    }
    _mm512_storeu_ps(lg, _mm512_fmadd_ps(_mm512_loadu_ps(lg), corr, sum));
    _mm512_storeu_ps(mg, mnew);
    return corr;
}

/* ALiBi: the block's scores S^T (w->st, lanes = rows r0 .. r0 + 15 at positions w->rp) made final in
 * place, scale and soft-cap applied and slope * (j0 + jj - rp) added, so that softmax_group then runs
 * with scale 1 and no cap */
static void alibi_scores(const aws *w, const tm_kattn_prefill *a, int hk, int r0, int j0, int n)
{
    int grp = a->H / a->Hk;
    float sl[16];
    for (int i = 0; i < 16; i++) sl[i] = a->alibi[hk * grp + (r0 + i) % grp];
    __m512 vs = _mm512_loadu_ps(sl), sc = _mm512_set1_ps(a->scale);
    __m512 d = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_set1_epi32(j0), _mm512_loadu_si512(w->rp + r0)));
    for (int jj = 0; jj < n; jj++) {
        __m512 s = _mm512_mul_ps(_mm512_load_ps(w->st + 16 * jj), sc);
        if (a->softcap > 0) s = vsoftcap_avx512(s, a->softcap);
        _mm512_store_ps(w->st + 16 * jj, _mm512_fmadd_ps(_mm512_add_ps(d, _mm512_set1_ps((float)jj)), vs, s));
    }
}

typedef struct amx_job {
    const tm_kattn_prefill *a;
    char *ws;
    size_t per;
    int nqb, aqb; /* query blocks per kv head, of aqb queries */
} amx_job;

static void task(void *ctx, int t, int worker)
{
    const amx_job *jb = ctx;
    const tm_kattn_prefill *a = jb->a;
    int hk = t / jb->nqb, qb = t % jb->nqb, grp = a->H / a->Hk, Dh = a->Dh;
    int t0 = qb * jb->aqb, t1 = t0 + jb->aqb < a->T ? t0 + jb->aqb : a->T, rows = (t1 - t0) * grp;
    int R = (rows + 15) / 16 * 16;
    aws w;
    aws_layout(jb->ws + jb->per * (size_t)worker, R, Dh, &w);
    PROF_T(tt);
    PROF_T(tq);
    pack_q(&w, a, hk, t0, rows, R);
    PROF_ADD(0, tq);
    memset(w.acc, 0, sizeof(float) * (size_t)R * Dh);
    for (int r = 0; r < R; r++) {
        w.m[r] = -INFINITY;
        w.l[r] = 0.f;
        w.rp[r] = r < rows ? a->pos0 + t0 + r / grp : INT32_MIN / 2;
    }
    int ilo = a->pos0 + t0, ihi = a->pos0 + t1 - 1; /* query positions */
    int jstart = a->window > 0 && ilo - a->window + 1 > 0 ? ilo - a->window + 1 : 0;
    tm_kamx_config();
    for (int j0 = jstart / AKB * AKB; j0 <= ihi; j0 += AKB) {
        int n = ihi + 1 - j0 < AKB ? ihi + 1 - j0 : AKB;
        PROF_T(tk);
        pack_kv(&w, a, hk, j0, n);
        PROF_ADD(0, tk);
        for (int g = 0; g < R / 16; g++) {
            int r0 = 16 * g, r1 = r0 + 16 < rows ? r0 + 16 : rows;
            int pfirst = w.rp[r0], plast = w.rp[r1 - 1];
            if (j0 > plast) continue;                                         /* all keys in the future */
            if (a->window > 0 && j0 + n - 1 <= pfirst - a->window) continue; /* all out of the window */
            /* each lane's visible keys [lo, hi], block-relative */
            __m512i rel = _mm512_sub_epi32(_mm512_loadu_si512(w.rp + r0), _mm512_set1_epi32(j0));
            __m512i hi = _mm512_min_epi32(rel, _mm512_set1_epi32(n - 1)), lo = _mm512_setzero_si512();
            if (a->window > 0) lo = _mm512_max_epi32(_mm512_add_epi32(rel, _mm512_set1_epi32(1 - a->window)), lo);
            int masked = pfirst - j0 < n - 1 || r1 - r0 < 16 || (a->window > 0 && plast - a->window + 1 - j0 > 0);
            int nkt = (n + 15) / 16;
            PROF_T(t1);
            scores(&w, g, Dh, nkt);
            PROF_ADD(1, t1);
            PROF_T(t2);
            float *mg = w.m + r0, *lg = w.l + r0;
            float scale = a->scale, cap = a->softcap;
            if (a->alibi) {
                alibi_scores(&w, a, hk, r0, j0, n);
                scale = 1.f, cap = 0.f;
            }
            __m512 corr = softmax_group(&w, mg, lg, lo, hi, masked, n, scale, cap);
            PROF_ADD(2, t2);
            PROF_T(t3);
            pv(&w, Dh, (n + 31) / 32);
            PROF_ADD(3, t3);
            PROF_T(t4);
            float *acc = w.acc + (size_t)g * Dh * 16;
            for (int d = 0; d < Dh; d++)
                _mm512_store_ps(acc + 16 * d,
                                _mm512_fmadd_ps(_mm512_load_ps(acc + 16 * d), corr, _mm512_load_ps(w.ot + 16 * d)));
            PROF_ADD(4, t4);
        }
    }
    _tile_release();
    if (a->sinks) /* each row's sum takes e^(sink - m) (m kept in log2 units, see softmax_group) */
        for (int r = 0; r < rows; r++)
            if (w.m[r] > -INFINITY) w.l[r] += exp2f(a->sinks[hk * grp + r % grp] * LOG2E - w.m[r]);
    /* out = acc^T / l, 16 dims x 16 rows transposed at a time */
    for (int g = 0; g < R / 16; g++) {
        __m512 inv = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(_mm512_loadu_ps(w.l + 16 * g), _mm512_setzero_ps(), _CMP_GT_OQ),
                                         _mm512_set1_ps(1.f), _mm512_loadu_ps(w.l + 16 * g));
        const float *acc = w.acc + (size_t)g * Dh * 16;
        for (int d0 = 0; d0 < Dh; d0 += 16) {
            __m512i x[16];
            for (int d = 0; d < 16; d++)
                x[d] = _mm512_castps_si512(_mm512_mul_ps(_mm512_load_ps(acc + 16 * (d0 + d)), inv));
            transpose16(x);
            for (int i = 0; i < 16 && 16 * g + i < rows; i++) {
                int r = 16 * g + i;
                float *out = a->out + ((size_t)(t0 + r / grp) * a->H + (size_t)hk * grp + r % grp) * Dh;
                _mm512_storeu_si512(out + d0, x[i]);
            }
        }
    }
    PROF_ADD(5, tt);
}

static int attn_prefill_amx(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool)
{
    if (tm_kcheck_attn_prefill(a)) return TM_E_INVALID;
    if (a->kv_dtype != TM_DT_BF16 || a->Dh % 32 || a->Dh > ADH) return tm_kattn_prefill_avx512(a, ws, pool);
    int nw = tm_pool_size(pool), grp = a->H / a->Hk;
    /* each task packs every key block it reads (pack_kv), so larger query blocks pack less often:
       2 AQB queries where the earlier keys are at least as many as the chunk's (so the causal part,
       whose work grows from task to task, is the smaller) and the tasks stay at least 4 a worker.
       Session 34, kbench attnp (2 threads, 512 queries): 14/2 x 64 over 4096 keys 1.04-1.07x,
       32/8 x 64 over 2048 1.07-1.08x; without earlier keys it had run 0.94-0.98x, hence pos0 */
    int aqb = a->pos0 >= a->T && a->Hk * ((a->T + 2 * AQB - 1) / (2 * AQB)) >= 4 * nw ? 2 * AQB : AQB;
    int R = (aqb * grp + 15) / 16 * 16;
    aws unused;
    size_t per = aws_layout(NULL, R, a->Dh, &unused);
    if (tm_kbuf_reserve(ws, per * (size_t)nw + 64)) return TM_E_NOMEM;
    char *base = (char *)(((uintptr_t)ws->p + 63) & ~(uintptr_t)63);
    amx_job jb = {a, base, per, (a->T + aqb - 1) / aqb, aqb};
    PROF_CALL();
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
