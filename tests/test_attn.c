/* tests/test_attn.c: the attention kernels of every ISA variant this CPU
 * runs (prefill and decode, bf16 / f16 / f32 / int8 KV, paged and not,
 * GQA, windows, soft-capping) against the scalar references
 * (engine/cpu/ref_attn.c), which are checked against double-precision
 * formulas written here. The AMX variant runs where the CPU has it, and
 * over emulated tiles (amx-emu) wherever AVX-512 runs. */
#include "harness.h"

#include <stdint.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "runtime/kvcache.h"

#include "kernels_util.h"

/* ---- attention ------------------------------------------------------------------------ */

/* Attention outputs are convex combinations of V rows, computed from f32
 * scores (the reference: double). A score error e moves weights by ~e
 * relatively, so |out - ref| <= ~(e + 1e-6) max|v|; with |q.k| scale up to
 * ~10 and f32 dots over Dh terms, 2e-5 max|v| covers it with margin, while a
 * wrong mask, position or head moves outputs by O(max|v|). */
static float *attn_kv(tm_dtype dt, size_t n, void **raw)
{
    float *f = rand_vec(n, 1.f);
    if (dt == TM_DT_F32) {
        *raw = f;
        return f;
    }
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        h[i] = dt == TM_DT_BF16 ? tm_f32_to_bf16(f[i]) : tm_f32_to_f16(f[i]);
        f[i] = dt == TM_DT_BF16 ? tm_bf16_to_f32(h[i]) : tm_f16_to_f32(h[i]);
    }
    *raw = h;
    return f;
}

/* tol: f32 kernels 1.6e-4 + 1e-5 |r|; the AMX kernel feeds Q and P to the
 * tiles as bf16 hi + lo pairs (each to ~2^-16), so 1e-3 (1 + |r|) (one plain
 * bf16 rounding of Q and P moved outputs by up to 0.5% of |r|) */
static int attn_close(const float *y, const float *r, size_t n, double tol, const char *what);

/* k's attn_decode on a (a->out NaN-filled first), on one thread and on the
 * pool, against ref [B][H][Dh] */
static void check_decode(const tm_kernels *k, const tm_kattn_decode *a, const float *ref, tm_kbuf *ws, tm_pool *pool,
                         const char *what)
{
    size_t n = (size_t)a->B * a->H * a->Dh;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) a->out[i] = NAN;
        CHECK_EQ_INT(k->attn_decode(a, ws, pass ? pool : NULL), TM_OK);
        char w[192];
        snprintf(w, sizeof w, "%s%s", what, pass ? " (pool)" : "");
        /* with ALiBi the weights are near one-hot (biases of tens), so the bf16 hi + lo scores of the AVX-512
           bf16 path (~2^-16 relative each) reach the output undamped: up to 3e-4 of |r| ~ 9 measured */
        CHECK_EQ_INT(attn_close(a->out, ref, n, a->alibi ? 1e-3 : 2e-5 * 8.0, w), 0);
    }
}

static int attn_close(const float *y, const float *r, size_t n, double tol, const char *what)
{
    int bad = 0;
    double rel = tol > 1e-3 ? tol : 1e-5;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(y[i] - r[i]) <= tol + rel * fabs(r[i])) && bad++ == 0)
            fprintf(stderr, "%s: out[%zu] = %.8g, reference %.8g\n", what, i, y[i], r[i]);
    return bad;
}

/* ALiBi slopes for H heads as BLOOM makes them (2^(-8 (h + 1) / H) for a power of two), or NULL:
 * distance biases of up to tens over the tests' contexts, so that a wrong distance shows */
static float *alibi_slopes(int H, int on)
{
    static float s[64];
    if (!on) return NULL;
    for (int h = 0; h < H && h < 64; h++) s[h] = powf(2.f, -8.f * (float)(h + 1) / (float)H);
    return s;
}

/* attention sinks for H heads (GPT-OSS), or NULL: logits spread over [-1, 2], the scores' own range here, so
 * that the sink takes a share of every row that shows */
static float *sink_logits(int H, int on)
{
    static float s[64];
    if (!on) return NULL;
    for (int h = 0; h < H && h < 64; h++) s[h] = 1.5f * sinf(1.3f * (float)h + 0.4f) + 0.5f;
    return s;
}

/* the AMX kernels, on tiles or emulated: their attention splits Q and P into
 * two bf16 terms, so its bound is looser (attn_amx.c) */
static int is_amx(const tm_kernels *k) { return strncmp(k->name, "amx", 3) == 0; }

static void test_attn_prefill(const tm_kernels *k, tm_pool *pool)
{
    /* ext: 1 ALiBi slopes, 2 attention sinks, 3 both */
    static const struct { int T, H, Hk, Dh, pos0, dt, window; float softcap; int ext; } cs[] = {
        {1, 1, 1, 8, 0, TM_DT_F32, 0, 0, 0},      {5, 4, 2, 16, 0, TM_DT_BF16, 0, 0, 0},
        {17, 8, 2, 64, 40, TM_DT_BF16, 0, 0, 0},  {33, 4, 4, 128, 100, TM_DT_F32, 50, 0, 0},
        {20, 6, 2, 40, 70, TM_DT_BF16, 0, 30, 0}, {70, 2, 1, 32, 0, TM_DT_BF16, 16, 0, 0},
        {3, 2, 1, 20, 130, TM_DT_F32, 0, 0, 0},
        /* shapes the AMX kernel takes (bf16, Dh % 32 == 0): several key blocks and
         * row groups, soft-capping, Dh 96 (a 4 + 2 tile split) and 256, a window */
        {130, 8, 2, 64, 200, TM_DT_BF16, 0, 0, 0}, {40, 4, 1, 64, 10, TM_DT_BF16, 0, 30, 0},
        {24, 4, 2, 96, 5, TM_DT_BF16, 0, 0, 0},    {9, 2, 1, 256, 3, TM_DT_BF16, 8, 0, 0},
        {100, 4, 2, 64, 60, TM_DT_BF16, 70, 0, 0},
        /* at least as many earlier keys as queries and 4 tasks a worker of 2 AQB queries: attn_amx.c's
           larger query blocks (one with a window) */
        {260, 8, 2, 64, 300, TM_DT_BF16, 0, 0, 0}, {200, 8, 4, 64, 250, TM_DT_BF16, 96, 0, 0},
        /* ALiBi: H not a power of two, with a window, with a soft-cap, on and off the tiles' shapes */
        {37, 6, 6, 64, 20, TM_DT_BF16, 0, 0, 1}, {45, 4, 2, 32, 90, TM_DT_F32, 0, 0, 1},
        {70, 8, 2, 64, 130, TM_DT_BF16, 24, 0, 1}, {20, 3, 1, 40, 5, TM_DT_BF16, 0, 30, 1},
        {150, 4, 4, 96, 0, TM_DT_BF16, 0, 0, 1},
        /* sinks: on and off the tiles' shapes, a window (sliding layers have them too), a soft-cap, with ALiBi */
        {1, 4, 2, 64, 0, TM_DT_BF16, 0, 0, 2},     {130, 8, 2, 64, 200, TM_DT_BF16, 0, 0, 2},
        {45, 4, 2, 32, 90, TM_DT_F32, 16, 0, 2},   {70, 8, 4, 64, 30, TM_DT_BF16, 24, 0, 2},
        {20, 6, 2, 40, 70, TM_DT_BF16, 0, 30, 2},  {37, 6, 6, 64, 20, TM_DT_BF16, 0, 0, 3},
        /* DeepSeek's absorbed latent head: 16 query heads on one kv head of 576 */
        {24, 16, 1, 576, 40, TM_DT_BF16, 0, 0, 0},
    };
    tm_kbuf ws = {0};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int T = cs[c].T, H = cs[c].H, Hk = cs[c].Hk, Dh = cs[c].Dh, P = cs[c].pos0, stride = P + T + 3;
        tm_dtype dt = (tm_dtype)cs[c].dt;
        float *q = rand_vec((size_t)T * H * Dh, 1.f);
        void *kr, *vr;
        float *kf = attn_kv(dt, (size_t)Hk * stride * Dh, &kr), *vf = attn_kv(dt, (size_t)Hk * stride * Dh, &vr);
        float *out = malloc(sizeof(float) * T * H * Dh), *ref = malloc(sizeof(float) * T * H * Dh);
        tm_kattn_prefill a = {T, H, Hk, Dh, P, q, kr, vr, dt, stride, ref, 1.f / sqrtf((float)Dh),
                              cs[c].softcap, cs[c].window, alibi_slopes(H, cs[c].ext & 1), .page_table = NULL,
                              .sinks = sink_logits(H, cs[c].ext & 2)};
        CHECK_EQ_INT(tm_kref_attn_prefill(&a, NULL, NULL), TM_OK);
        a.out = out;
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < T * H * Dh; i++) out[i] = NAN;
            CHECK_EQ_INT(k->attn_prefill(&a, &ws, pass ? pool : NULL), TM_OK);
            char what[128];
            snprintf(what, sizeof what, "%s attn_prefill case %zu%s", k->name, c, pass ? " (pool)" : "");
            double tol = is_amx(k) && dt == TM_DT_BF16 && Dh % 32 == 0 ? 1e-3 : 2e-5 * 8.0;
            CHECK_EQ_INT(attn_close(out, ref, (size_t)T * H * Dh, tol, what), 0);
        }
        /* the same keys in decode pages (page size 16 or 7, ids in reverse, padded head
         * blocks and pages), and in f16 pages for the bf16 cases: the same outputs */
        for (int f16 = 0; f16 <= (dt == TM_DT_BF16); f16++) {
            tm_dtype pdt = f16 ? TM_DT_F16 : dt;
            int ps = c % 2 ? 16 : 7, np = (P + T + ps - 1) / ps;
            size_t es = pdt == TM_DT_F32 ? 4 : 2, hb = (size_t)ps * Dh * es + 64, pb = Hk * hb + 128;
            uint8_t *kp = calloc((size_t)(np + 2) * pb, 1), *vp = calloc((size_t)(np + 2) * pb, 1);
            int32_t *pt = malloc(sizeof(int32_t) * (size_t)np);
            for (int i = 0; i < np; i++) pt[i] = np + 1 - i;
            for (int h = 0; h < Hk; h++)
                for (int j = 0; j < P + T; j++)
                    for (int d = 0; d < Dh; d++) {
                        size_t src = ((size_t)h * stride + j) * Dh + d;
                        size_t dst = (size_t)pt[j / ps] * pb + (size_t)h * hb + ((size_t)(j % ps) * Dh + d) * es;
                        if (pdt == TM_DT_F32) {
                            memcpy(kp + dst, kf + src, 4);
                            memcpy(vp + dst, vf + src, 4);
                        } else if (pdt == TM_DT_BF16) {
                            memcpy(kp + dst, (uint16_t *)kr + src, 2);
                            memcpy(vp + dst, (uint16_t *)vr + src, 2);
                        } else { /* bf16 values are exact in f16 only near 1: compare with the f16 reference below */
                            uint16_t hk16 = tm_f32_to_f16(kf[src]), hv16 = tm_f32_to_f16(vf[src]);
                            memcpy(kp + dst, &hk16, 2);
                            memcpy(vp + dst, &hv16, 2);
                        }
                    }
            tm_kattn_prefill pa = a;
            pa.k = kp;
            pa.v = vp;
            pa.kv_dtype = pdt;
            pa.kv_stride = 0;
            pa.page_table = pt;
            pa.page_size = ps;
            pa.n_pages = np + 2;
            pa.page_bytes = pb;
            pa.head_bytes = hb;
            float *pref = malloc(sizeof(float) * T * H * Dh);
            pa.out = pref;
            CHECK_EQ_INT(tm_kref_attn_prefill(&pa, NULL, NULL), TM_OK);
            if (!f16) CHECK_EQ_INT(attn_close(pref, ref, (size_t)T * H * Dh, 1e-6, "paged reference"), 0);
            pa.out = out;
            for (int pass = 0; pass < 2; pass++) {
                for (int i = 0; i < T * H * Dh; i++) out[i] = NAN;
                CHECK_EQ_INT(k->attn_prefill(&pa, &ws, pass ? pool : NULL), TM_OK);
                char what[128];
                snprintf(what, sizeof what, "%s attn_prefill paged %s case %zu%s", k->name, tm_dtype_name(pdt), c,
                         pass ? " (pool)" : "");
                double ptol = is_amx(k) && pdt == TM_DT_BF16 && Dh % 32 == 0 ? 1e-3 : 2e-5 * 8.0;
                CHECK_EQ_INT(attn_close(out, pref, (size_t)T * H * Dh, ptol, what), 0);
            }
            pt[np - 1] = np + 2; /* a page id past n_pages */
            CHECK_EQ_INT(k->attn_prefill(&pa, &ws, NULL), TM_E_INVALID);
            free(kp); free(vp); free(pt); free(pref);
        }
        /* the first query of a sequence sees only itself: out = v[0] of its kv head (with a sink,
         * sigmoid(s - sink) v[0], checked by the window 1 case below); with window 1 every query sees only itself */
        if (P == 0 && !a.sinks) {
            int bad = 0;
            for (int h = 0; h < H; h++)
                for (int d = 0; d < Dh; d++) bad += fabsf(ref[(size_t)h * Dh + d] - vf[(size_t)(h / (H / Hk)) * stride * Dh + d]) > 1e-6f;
            CHECK_EQ_INT(bad, 0);
        }
        a.window = 1;
        a.out = ref;
        tm_kref_attn_prefill(&a, NULL, NULL);
        a.out = out;
        k->attn_prefill(&a, &ws, pool);
        int bad = 0;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                /* a sink leaves the key e^s / (e^s + e^sink) = sigmoid(s - sink) of the weight */
                size_t kv = (size_t)(h / (H / Hk)) * stride + P + t;
                double sc = 0, wk = 1;
                for (int d = 0; d < Dh; d++) sc += (double)q[((size_t)t * H + h) * Dh + d] * kf[kv * Dh + d];
                sc *= a.scale;
                if (a.softcap > 0) sc = a.softcap * tanh(sc / a.softcap);
                if (a.sinks) wk = 1.0 / (1.0 + exp((double)a.sinks[h] - sc));
                for (int d = 0; d < Dh; d++) {
                    float want = (float)(wk * vf[kv * Dh + d]);
                    size_t o = ((size_t)t * H + h) * Dh + d;
                    bad += fabsf(ref[o] - want) > 1e-5f || fabsf(out[o] - want) > (is_amx(k) ? 2e-3f : 2e-5f);
                }
            }
        CHECKF(bad == 0, "%s attn_prefill window=1 case %zu: %d bad", k->name, c, bad);
        if (dt != TM_DT_F32) { free(kr); free(vr); }
        free(q); free(kf); free(vf); free(out); free(ref);
    }
    tm_kattn_prefill bad = {4, 3, 2, 8, 0, (float[96]){0}, (float[64]){0}, (float[64]){0}, TM_DT_F32, 4, (float[96]){0}, 1, 0, 0, .page_table = NULL};
    CHECK_EQ_INT(k->attn_prefill(&bad, &ws, NULL), TM_E_INVALID); /* H % Hk != 0 */
    bad.H = 4;
    bad.kv_stride = 3; /* shorter than pos0 + T */
    CHECK_EQ_INT(k->attn_prefill(&bad, &ws, NULL), TM_E_INVALID);
    tm_kbuf_free(&ws);
}

static void test_attn_decode(const tm_kernels *k, tm_pool *pool)
{
    static const struct { int H, Hk, Dh, ps, dt, window; float softcap; int ext; } cs[] = { /* ext as in prefill */
        {8, 2, 64, 16, TM_DT_BF16, 0, 0, 0}, {4, 4, 40, 5, TM_DT_F16, 0, 0, 0},
        {6, 2, 128, 32, TM_DT_BF16, 20, 0, 0}, {2, 1, 16, 64, TM_DT_F16, 0, 25, 0},
        {4, 1, 32, 100, TM_DT_BF16, 0, 0, 0},
        {6, 3, 64, 16, TM_DT_BF16, 0, 0, 1}, {4, 2, 40, 7, TM_DT_F16, 30, 0, 1}, /* ALiBi */
        {8, 2, 64, 16, TM_DT_BF16, 0, 0, 2}, {4, 2, 40, 7, TM_DT_F16, 30, 0, 2}, /* sinks */
        {6, 3, 64, 16, TM_DT_BF16, 16, 20, 3},
        {16, 1, 576, 16, TM_DT_BF16, 0, 0, 0}, /* DeepSeek's latent head */
    };
    tm_kbuf ws = {0};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int B = 3, H = cs[c].H, Hk = cs[c].Hk, Dh = cs[c].Dh, ps = cs[c].ps;
        int ctx[3] = {1, 37, 150};
        tm_dtype dt = (tm_dtype)cs[c].dt;
        /* contiguous K/V per sequence [Hk][150][Dh], then scattered into shuffled pages */
        int maxp = (150 + ps - 1) / ps, npages = B * maxp + 2;
        size_t page_elems = (size_t)Hk * ps * Dh;
        uint16_t *kp = calloc((size_t)npages * page_elems, 2), *vp = calloc((size_t)npages * page_elems, 2);
        int32_t *tab[3];
        int *perm = malloc(sizeof(int) * npages);
        for (int i = 0; i < npages; i++) perm[i] = i;
        for (int i = npages - 1; i > 0; i--) { int j = (int)(rnd() % (unsigned)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
        void *kraw[3], *vraw[3];
        float *kf[3], *vf[3];
        float *q = rand_vec((size_t)B * H * Dh, 1.f);
        float *out = malloc(sizeof(float) * B * H * Dh), *ref = malloc(sizeof(float) * B * H * Dh);
        for (int b = 0; b < B; b++) {
            tab[b] = malloc(sizeof(int32_t) * maxp);
            kf[b] = attn_kv(dt, (size_t)Hk * 150 * Dh, &kraw[b]);
            vf[b] = attn_kv(dt, (size_t)Hk * 150 * Dh, &vraw[b]);
            for (int p = 0; p < maxp; p++) tab[b][p] = perm[b * maxp + p];
            for (int j = 0; j < ctx[b]; j++)
                for (int h = 0; h < Hk; h++) {
                    size_t dst = (size_t)tab[b][j / ps] * page_elems + ((size_t)h * ps + j % ps) * Dh;
                    memcpy(kp + dst, (uint16_t *)kraw[b] + ((size_t)h * 150 + j) * Dh, (size_t)Dh * 2);
                    memcpy(vp + dst, (uint16_t *)vraw[b] + ((size_t)h * 150 + j) * Dh, (size_t)Dh * 2);
                }
        }
        const int32_t *const tabs[3] = {tab[0], tab[1], tab[2]};
        tm_kattn_decode a = {B, H, Hk, Dh, q, kp, vp, page_elems * 2, ps, dt, npages, tabs, ctx, ref,
                             1.f / sqrtf((float)Dh), cs[c].softcap, cs[c].window, 0, alibi_slopes(H, cs[c].ext & 1),
                             sink_logits(H, cs[c].ext & 2)};
        CHECK_EQ_INT(tm_kref_attn_decode(&a, NULL, NULL), TM_OK);
        a.out = out;
        char what[128];
        snprintf(what, sizeof what, "%s attn_decode case %zu", k->name, c);
        check_decode(k, &a, ref, &ws, pool, what);
        /* the two references agree: decode over pages == prefill's last query
         * over the same keys laid out contiguously (f16 is not a prefill dtype:
         * widen it to f32) */
        for (int b = 0; b < B; b++) {
            float *pf = malloc(sizeof(float) * H * Dh);
            tm_kattn_prefill p = {1, H, Hk, Dh, ctx[b] - 1, q + (size_t)b * H * Dh, kf[b], vf[b], TM_DT_F32, 150, pf,
                                  a.scale, a.softcap, a.window, a.alibi, .page_table = NULL, .sinks = a.sinks};
            CHECK_EQ_INT(tm_kref_attn_prefill(&p, NULL, NULL), TM_OK);
            CHECK_EQ_INT(attn_close(pf, ref + (size_t)b * H * Dh, (size_t)H * Dh, 2e-5 * 8.0, "decode vs prefill reference"), 0);
            free(pf);
        }
        /* a page id outside the pool is refused, not followed */
        tab[1][0] = npages;
        CHECK_EQ_INT(k->attn_decode(&a, &ws, NULL), TM_E_INVALID);
        for (int b = 0; b < B; b++) { free(tab[b]); free(kraw[b]); free(vraw[b]); free(kf[b]); free(vf[b]); }
        free(kp); free(vp); free(perm); free(q); free(out); free(ref);
    }
    tm_kbuf_free(&ws);
}

/* ---- attention over int8 KV pages ------------------------------------------------------ */

/* One random paged int8 KV (runtime/kvcache.h's block layout: scale[ps] f32,
 * then q[ps][Dh] int8, blocks head_bytes apart) for B sequences, written
 * with the cache's own quantizer (tm_kv_quant_row), and each sequence's
 * dequantized K and V laid out contiguously [Hk][cap][Dh] (f32) for the
 * f32 reference. Pages are shuffled; rows have scales spread over 30x. */
typedef struct q8kv {
    int B, Hk, Dh, ps, cap, npages;
    size_t head_bytes, page_bytes;
    uint8_t *k, *v;        /* [npages][page_bytes] */
    int32_t *tab[8];       /* [B][cap / ps] */
    float *kf[8], *vf[8];  /* [B][Hk][cap][Dh] dequantized */
} q8kv;

static void q8kv_make(q8kv *c, int B, int Hk, int Dh, int ps, int cap, int padded)
{
    c->B = B; c->Hk = Hk; c->Dh = Dh; c->ps = ps; c->cap = cap;
    /* padded: the cache's 64-byte blocks; else the tight default (head_bytes 0), where
     * scales may sit at any byte offset */
    c->head_bytes = padded ? tm_kv_block_bytes(TM_DT_Q8PC, ps, Dh) : 4 * (size_t)ps + (size_t)ps * Dh;
    c->page_bytes = (size_t)Hk * c->head_bytes + (padded ? 0 : 3);
    int maxp = (cap + ps - 1) / ps;
    c->npages = B * maxp + 2;
    c->k = calloc((size_t)c->npages, c->page_bytes);
    c->v = calloc((size_t)c->npages, c->page_bytes);
    int *perm = malloc(sizeof(int) * c->npages);
    for (int i = 0; i < c->npages; i++) perm[i] = i;
    for (int i = c->npages - 1; i > 0; i--) { int j = (int)(rnd() % (unsigned)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    float *x = malloc(sizeof(float) * Dh);
    for (int b = 0; b < B; b++) {
        c->tab[b] = malloc(sizeof(int32_t) * maxp);
        for (int p = 0; p < maxp; p++) c->tab[b][p] = perm[b * maxp + p];
        c->kf[b] = malloc(sizeof(float) * (size_t)Hk * cap * Dh);
        c->vf[b] = malloc(sizeof(float) * (size_t)Hk * cap * Dh);
        for (int h = 0; h < Hk; h++)
            for (int j = 0; j < cap; j++)
                for (int w = 0; w < 2; w++) {
                    float mag = 0.1f + 3.f * (float)(rnd() % 1000) / 1000.f;
                    for (int d = 0; d < Dh; d++) x[d] = mag * frand();
                    uint8_t *blk = (w ? c->v : c->k) + (size_t)c->tab[b][j / ps] * c->page_bytes + (size_t)h * c->head_bytes;
                    float sc;
                    int8_t *q = (int8_t *)(blk + 4 * (size_t)ps) + (size_t)(j % ps) * Dh;
                    tm_kv_quant_row(q, &sc, x, Dh);
                    memcpy(blk + 4 * (size_t)(j % ps), &sc, 4);
                    float *f = (w ? c->vf[b] : c->kf[b]) + ((size_t)h * cap + j) * Dh;
                    for (int d = 0; d < Dh; d++) f[d] = sc * (float)q[d];
                }
    }
    free(x);
    free(perm);
}

static void q8kv_free(q8kv *c)
{
    for (int b = 0; b < c->B; b++) { free(c->tab[b]); free(c->kf[b]); free(c->vf[b]); }
    free(c->k); free(c->v);
}

/* rows [n][Dh] of x replaced by their int8 quantization, dequantized (what
 * the int8-KV kernels compute with) */
static void q8_query(float *y, const float *x, int n, int Dh)
{
    int8_t q[1024];
    for (int r = 0; r < n; r++) {
        float s;
        int32_t qs;
        tm_kattn_quant_q(q, &s, &qs, x + (size_t)r * Dh, Dh);
        int32_t sum = 0;
        for (int d = 0; d < Dh; d++) { y[(size_t)r * Dh + d] = s * (float)q[d]; sum += q[d]; }
        CHECK_EQ_INT(sum, qs);
    }
}

/* Decode over int8 pages, random shapes: odd head dims, GQA groups 1..8,
 * page sizes 1..64 (several pages, a partial last page), windows and
 * soft-capping; each variant against the scalar reference, and the int8
 * reference against the f32 one over the dequantized rows. */
static void test_attn_decode_q8(const tm_kernels *k, tm_pool *pool)
{
    static const int dhs[] = {1, 7, 20, 33, 40, 64, 65, 96, 128, 130};
    static const int pss[] = {1, 3, 5, 16, 16, 32, 64};
    static const int grps[] = {1, 2, 3, 4, 7, 8};
    tm_kbuf ws = {0};
    int cases = sanitizer() ? 6 : 24;
    for (int c = 0; c < cases; c++) {
        int B = 1 + (int)(rnd() % 4), Hk = 1 + (int)(rnd() % 3), G = grps[rnd() % 6], H = Hk * G;
        int Dh = dhs[rnd() % 10], ps = pss[rnd() % 7], cap = 1 + (int)(rnd() % 200);
        int window = rnd() % 4 == 0 ? 1 + (int)(rnd() % 40) : 0;
        float softcap = rnd() % 5 == 0 ? 20.f : 0.f;
        float *alibi = alibi_slopes(H, rnd() % 3 == 0), *sinks = sink_logits(H, rnd() % 3 == 0);
        q8kv kv;
        q8kv_make(&kv, B, Hk, Dh, ps, cap, c % 2);
        int ctx[8];
        for (int b = 0; b < B; b++) ctx[b] = b == 0 ? cap : 1 + (int)(rnd() % (unsigned)cap);
        float *q = rand_vec((size_t)B * H * Dh, 2.f);
        float *out = malloc(sizeof(float) * B * H * Dh), *ref = malloc(sizeof(float) * B * H * Dh);
        const int32_t *tabs[8];
        for (int b = 0; b < B; b++) tabs[b] = kv.tab[b];
        tm_kattn_decode a = {B, H, Hk, Dh, q, kv.k, kv.v, kv.page_bytes, ps, TM_DT_Q8PC, kv.npages, tabs, ctx, ref,
                             1.f / sqrtf((float)Dh), softcap, window, c % 2 ? kv.head_bytes : 0, alibi, sinks};
        CHECK_EQ_INT(tm_kref_attn_decode(&a, NULL, NULL), TM_OK);
        char what[160];
        snprintf(what, sizeof what, "%s attn_decode int8 case %d (B %d H %d Hk %d Dh %d page %d ctx %d window %d cap %g)",
                 k->name, c, B, H, Hk, Dh, ps, cap, window, softcap);
        a.out = out;
        check_decode(k, &a, ref, &ws, pool, what);
        /* the int8 reference reads the layout right: the f32 prefill reference over the
         * dequantized rows, with the quantized query, gives the same */
        float *qd = malloc(sizeof(float) * B * H * Dh), *pf = malloc(sizeof(float) * H * Dh);
        q8_query(qd, q, B * H, Dh);
        for (int b = 0; b < B; b++) {
            tm_kattn_prefill p = {1, H, Hk, Dh, ctx[b] - 1, qd + (size_t)b * H * Dh, kv.kf[b], kv.vf[b], TM_DT_F32, cap, pf,
                                  a.scale, softcap, window, alibi, .page_table = NULL, .sinks = sinks};
            CHECK_EQ_INT(tm_kref_attn_prefill(&p, NULL, NULL), TM_OK);
            CHECK_EQ_INT(attn_close(pf, ref + (size_t)b * H * Dh, (size_t)H * Dh, 2e-5 * 8.0, what), 0);
        }
        free(qd); free(pf); free(q); free(out); free(ref);
        q8kv_free(&kv);
    }
    /* refused: a block smaller than its rows and scales; int8 is not a contiguous (prefill) dtype */
    q8kv kv;
    q8kv_make(&kv, 1, 2, 8, 4, 10, 1);
    int ctx1 = 10;
    const int32_t *tab1[1] = {kv.tab[0]};
    float q[16] = {0}, o[16];
    tm_kattn_decode bad = {1, 2, 2, 8, q, kv.k, kv.v, kv.page_bytes, 4, TM_DT_Q8PC, kv.npages, tab1, &ctx1, o, 1, 0, 0,
                           4 * 4 + 4 * 8 - 1, NULL, NULL};
    CHECK_EQ_INT(k->attn_decode(&bad, &ws, NULL), TM_E_INVALID);
    tm_kattn_prefill badp = {1, 2, 2, 8, 0, q, kv.k, kv.v, TM_DT_Q8PC, 4, o, 1, 0, 0, .page_table = NULL};
    CHECK_EQ_INT(k->attn_prefill(&badp, &ws, NULL), TM_E_INVALID);
    q8kv_free(&kv);
    tm_kbuf_free(&ws);
}

/* Prefill of a chunk after the first over int8 pages, as the engines run it
 * (a stateful chunk: attn_decode with one row per query, ctx = pos + 1):
 * T queries at positions P .. P+T-1 against the f32 prefill reference over
 * the dequantized rows (causal, GQA, windows). */
static void test_attn_prefill_q8(const tm_kernels *k, tm_pool *pool)
{
    static const struct { int T, P, H, Hk, Dh, ps, window; float softcap; int ext; } cs[] = { /* ext as in prefill */
        {1, 0, 2, 1, 16, 16, 0, 0, 0},   {17, 40, 8, 2, 64, 16, 0, 0, 0},  {33, 100, 4, 4, 40, 16, 50, 0, 0},
        {20, 70, 6, 2, 33, 5, 0, 30, 0}, {64, 64, 4, 1, 128, 16, 0, 0, 0}, {9, 130, 3, 3, 20, 32, 8, 0, 0},
        {40, 90, 6, 2, 64, 16, 0, 0, 1}, {30, 50, 8, 2, 64, 16, 20, 0, 2},
    };
    tm_kbuf ws = {0};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int T = cs[c].T, P = cs[c].P, H = cs[c].H, Hk = cs[c].Hk, Dh = cs[c].Dh, n = P + T;
        q8kv kv;
        q8kv_make(&kv, 1, Hk, Dh, cs[c].ps, n, 1);
        float *q = rand_vec((size_t)T * H * Dh, 2.f), *qd = malloc(sizeof(float) * T * H * Dh);
        float *out = malloc(sizeof(float) * T * H * Dh), *ref = malloc(sizeof(float) * T * H * Dh);
        q8_query(qd, q, T * H, Dh);
        tm_kattn_prefill p = {T, H, Hk, Dh, P, qd, kv.kf[0], kv.vf[0], TM_DT_F32, n, ref, 1.f / sqrtf((float)Dh),
                              cs[c].softcap, cs[c].window, alibi_slopes(H, cs[c].ext & 1), .page_table = NULL,
                              .sinks = sink_logits(H, cs[c].ext & 2)};
        CHECK_EQ_INT(tm_kref_attn_prefill(&p, NULL, NULL), TM_OK);
        const int32_t **tabs = malloc(sizeof(*tabs) * T);
        int *ctx = malloc(sizeof(int) * T);
        for (int t = 0; t < T; t++) { tabs[t] = kv.tab[0]; ctx[t] = P + t + 1; }
        tm_kattn_decode a = {T, H, Hk, Dh, q, kv.k, kv.v, kv.page_bytes, cs[c].ps, TM_DT_Q8PC, kv.npages, tabs, ctx,
                             out, p.scale, cs[c].softcap, cs[c].window, kv.head_bytes, p.alibi, p.sinks};
        char what[128];
        snprintf(what, sizeof what, "%s int8-KV prefill chunk case %zu", k->name, c);
        check_decode(k, &a, ref, &ws, pool, what);
        free(tabs); free(ctx); free(q); free(qd); free(out); free(ref);
        q8kv_free(&kv);
    }
    tm_kbuf_free(&ws);
}

int main(void)
{
    tm_pool *pool;
    tm_err err = {0};
    CHECK_EQ_INT(tm_pool_init(&pool, NULL, 2, 0, &err), TM_OK);
    for (const char *const *n = tm_kernels_variants();; n++) {
        const char *name = *n ? *n : "amx-emu"; /* the variants, then the AMX kernels over emulated tiles */
        tm_kernels k;
        if (tm_kernels_select(name, &k, &err) != TM_OK) {
            printf("SKIP: %s: %s\n", name, err.msg);
        } else {
            printf("variant %s\n", k.name);
            test_attn_prefill(&k, pool);
            test_attn_decode(&k, pool);
            test_attn_decode_q8(&k, pool);
            test_attn_prefill_q8(&k, pool);
        }
        if (!*n) break;
    }
    tm_pool_free(pool);
    return th_done("test_attn");
}
