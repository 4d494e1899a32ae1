/* tests/test_kvcache.c: paged KV cache accounting and the KV bridge, for
 * every cache dtype (bf16, f16, f32, int8 with a scale per row). */
#include "harness.h"

#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* as runtime/kvcache.c: Linux 5.14, absent from older headers */
#endif

#include "runtime/bridge.h"
#include "runtime/kvcache.h"

static float val(int l, int kv, int h, int p, int d) { return (float)(l * 1000 + kv * 500 + h * 100 + p) + d * 0.125f; }

static void fill(tm_kv_cache *c, tm_kv_seq *s, int L, int Hk, int Dh, int n)
{
    const tm_kv_cache_opts *o = tm_kv_cache_info(c);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < Hk; h++)
            for (int p = 0; p < n; p++) {
                float *k = (float *)tm_kv_page_k(c, s->pages[p / o->page_size], l, h) + (p % o->page_size) * Dh;
                float *v = (float *)tm_kv_page_v(c, s->pages[p / o->page_size], l, h) + (p % o->page_size) * Dh;
                for (int d = 0; d < Dh; d++) { k[d] = val(l, 0, h, p, d); v[d] = val(l, 1, h, p, d); }
            }
}

static int check(tm_kv_cache *c, tm_kv_seq *s, int L, int Hk, int Dh, int p0, int p1)
{
    int bad = 0;
    for (int l = 0; l < L; l++) {
        tm_kv_view v;
        tm_kv_view_of(c, s, l, &v);
        for (int h = 0; h < Hk; h++)
            for (int p = p0; p < p1; p++)
                for (int d = 0; d < Dh; d++) {
                    float k = tm_bf16_to_f32(((const uint16_t *)tm_kv_view_k(&v, h, p))[d]);
                    float vv = tm_bf16_to_f32(((const uint16_t *)tm_kv_view_v(&v, h, p))[d]);
                    if (k != tm_bf16_to_f32(tm_f32_to_bf16(val(l, 0, h, p, d)))) bad++;
                    if (vv != tm_bf16_to_f32(tm_f32_to_bf16(val(l, 1, h, p, d)))) bad++;
                }
    }
    return bad;
}

/* The int8 quantizer (normative, kvcache.h): scale = max|x| / 127, q =
 * round_half_even(x * 127 / max|x|), so the largest element maps to +-127
 * and every element is within scale / 2 of scale * q. */
static void test_quant_row(void)
{
    int8_t q[64];
    float s, x[64];
    for (int i = 0; i < 64; i++) x[i] = sinf((float)i * 0.7f) * (1 + i % 5);
    x[17] = -9.5f; /* the absmax */
    tm_kv_quant_row(q, &s, x, 64);
    CHECK(s == 9.5f / 127.f);
    CHECK_EQ_INT(q[17], -127);
    int bad = 0;
    for (int i = 0; i < 64; i++) bad += !(fabsf(s * q[i] - x[i]) <= s / 2 * 1.0001f) || q[i] < -127;
    CHECK_EQ_INT(bad, 0);
    /* ties go to even: 127 * (0.5 / 127) = 0.5 -> 0, 1.5 -> 2, -2.5 -> -2 */
    float t[4] = {127.f, 0.5f, 1.5f, -2.5f};
    tm_kv_quant_row(q, &s, t, 4);
    CHECK(s == 1.f && q[0] == 127 && q[1] == 0 && q[2] == 2 && q[3] == -2);
    /* a zero row: scale 0, all 0; NaN elements become 0 */
    float z[3] = {0, -0.f, 0}, nan3[3] = {NAN, 2.f, -1.f};
    tm_kv_quant_row(q, &s, z, 3);
    CHECK(s == 0 && q[0] == 0 && q[1] == 0 && q[2] == 0);
    tm_kv_quant_row(q, &s, nan3, 3);
    CHECK(s == 2.f / 127 && q[0] == 0 && q[1] == 127 && q[2] == -64);
}

/* int8 layout: block sizes, where tm_kv_row_store puts the scale and the row,
 * the view's pointers, the arena's size. */
static void test_int8_layout(void)
{
    tm_err err = {0};
    /* block = round64(4 ps + ps Dh): 16 x 64 -> 1088, 16 x 128 -> 2112, 4 x 20 -> 128, 1 x 1 -> 64 */
    CHECK_EQ_INT(tm_kv_block_bytes(TM_DT_Q8PC, 16, 64), 1088);
    CHECK_EQ_INT(tm_kv_block_bytes(TM_DT_Q8PC, 16, 128), 2112);
    CHECK_EQ_INT(tm_kv_block_bytes(TM_DT_Q8PC, 4, 20), 128);
    CHECK_EQ_INT(tm_kv_block_bytes(TM_DT_Q8PC, 1, 1), 64);
    CHECK_EQ_INT(tm_kv_block_bytes(TM_DT_BF16, 16, 64), 2048);
    CHECK_EQ_INT(tm_kv_block_bytes(TM_DT_F32, 16, 64), 4096);
    CHECK_EQ_INT(tm_kv_block_bytes(TM_DT_Q4G64, 16, 64), 0);
    const int L = 3, Hk = 2, Dh = 40, ps = 8, np = 5;
    tm_kv_cache *kv;
    CHECK_EQ_INT(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){L, Hk, Dh, ps, np, TM_DT_Q8PC, 0}, &err), TM_OK);
    size_t blk = tm_kv_block_bytes(TM_DT_Q8PC, ps, Dh); /* 4*8 + 8*40 = 352 -> 384 */
    CHECK_EQ_INT(blk, 384);
    CHECK_EQ_INT(tm_kv_cache_bytes(kv), (size_t)np * L * 2 * Hk * blk);
    /* blocks: K heads then V heads per (page, layer); pages L * 2 Hk blocks apart */
    uint8_t *k00 = tm_kv_page_k(kv, 0, 0, 0);
    CHECK((uint8_t *)tm_kv_page_k(kv, 0, 0, 1) - k00 == (ptrdiff_t)blk);
    CHECK((uint8_t *)tm_kv_page_v(kv, 0, 0, 0) - k00 == (ptrdiff_t)(Hk * blk));
    CHECK((uint8_t *)tm_kv_page_k(kv, 0, 1, 0) - k00 == (ptrdiff_t)(2 * Hk * blk));
    CHECK((uint8_t *)tm_kv_page_k(kv, 2, 1, 1) - k00 == (ptrdiff_t)((2 * L + 1) * 2 * Hk * blk + blk));
    CHECK(((uintptr_t)k00 & 63) == 0);
    /* a row lands at scale[slot] (f32, block start) and q[slot][.] (after ps scales) */
    tm_kv_seq seq = {0};
    CHECK_EQ_INT(tm_kv_seq_reserve(kv, &seq, 20, &err), TM_OK);
    seq.n_tokens = 20;
    float x[40], y[40];
    for (int d = 0; d < Dh; d++) x[d] = (float)(d - 13) * 0.25f;
    int pos = 11, slot = pos % ps; /* page 1, slot 3 */
    uint8_t *vb = tm_kv_page_v(kv, seq.pages[pos / ps], 2, 1);
    tm_kv_row_store(kv, vb, slot, x);
    float sc;
    memcpy(&sc, vb + 4 * slot, 4);
    CHECK(sc == 6.5f / 127.f); /* max |x| = 26 * 0.25 */
    const int8_t *qr = (const int8_t *)(vb + 4 * ps + slot * Dh);
    CHECK_EQ_INT(qr[39], 127);
    CHECK_EQ_INT(qr[13], 0);
    tm_kv_row_load(kv, vb, slot, y);
    int bad = 0;
    for (int d = 0; d < Dh; d++) bad += y[d] != sc * qr[d] || fabsf(y[d] - x[d]) > sc / 2 * 1.0001f;
    CHECK_EQ_INT(bad, 0);
    tm_kv_view v;
    tm_kv_view_of(kv, &seq, 2, &v);
    CHECK(v.dtype == TM_DT_Q8PC && v.head_stride == blk);
    CHECK((const int8_t *)tm_kv_view_v(&v, 1, pos) == qr);
    CHECK(tm_kv_view_v_scale(&v, 1, pos) == sc);
    tm_kv_seq_release(kv, &seq);
    tm_kv_cache_free(kv);
    /* the cache refuses a dtype it does not store, and head dims past TM_KV_MAX_DH */
    CHECK_EQ_INT(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){L, Hk, Dh, ps, np, TM_DT_Q4G64, 0}, &err), TM_E_UNSUPPORTED);
    CHECK_EQ_INT(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){L, Hk, TM_KV_MAX_DH + 1, ps, np, TM_DT_Q8PC, 0}, &err),
                 TM_E_INVALID);
}

/* The bridge into an int8 decode cache (stateless hand-off): every row of
 * every layer equals the quantizer applied to the staging row, wherever the
 * pages lie; int8 -> int8 copies bytes; int8 -> f32 dequantizes. */
static void test_bridge_int8(tm_dtype stage_dt)
{
    tm_err err = {0};
    const int L = 2, Hk = 3, Dh = 24, N = 90;
    tm_kv_cache *stage, *dec, *dec2, *back;
    CHECK_EQ_INT(tm_kv_cache_init(&stage, &(tm_kv_cache_opts){L, Hk, Dh, 128, 1, stage_dt, 0}, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_cache_init(&dec, &(tm_kv_cache_opts){L, Hk, Dh, 16, 12, TM_DT_Q8PC, 0}, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_cache_init(&dec2, &(tm_kv_cache_opts){L, Hk, Dh, 4, 30, TM_DT_Q8PC, 0}, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_cache_init(&back, &(tm_kv_cache_opts){L, Hk, Dh, 32, 4, TM_DT_F32, 0}, &err), TM_OK);
    tm_kv_seq ss = {0}, ds = {0}, ds2 = {0}, bs = {0}, hole = {0};
    CHECK_EQ_INT(tm_kv_seq_reserve(dec, &hole, 20, &err), TM_OK); /* so the sequence's pages are not 0, 1, 2 ... */
    CHECK_EQ_INT(tm_kv_seq_reserve(stage, &ss, N, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_seq_reserve(dec, &ds, N, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_seq_reserve(dec2, &ds2, N, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_seq_reserve(back, &bs, N, &err), TM_OK);
    float x[24], y[24], z[24];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < Hk; h++)
            for (int p = 0; p < N; p++)
                for (int w = 0; w < 2; w++) {
                    for (int d = 0; d < Dh; d++) x[d] = sinf((float)(l * 7 + h * 3 + p + w * 100) * 0.31f + d) * (1 + p % 7);
                    tm_kv_row_store(stage, w ? tm_kv_page_v(stage, ss.pages[0], l, h) : tm_kv_page_k(stage, ss.pages[0], l, h), p, x);
                }
    tm_bridge *b;
    CHECK_EQ_INT(tm_bridge_init(&b, -1, &err), TM_OK);
    ds.owner = TM_KV_OWNER_PREFILL;
    tm_bridge_begin(b, stage, &ss, dec, &ds, 0, N);
    for (int l = L - 1; l >= 0; l--) tm_bridge_layer_done(b, l);
    tm_bridge_finish(b);
    CHECK_EQ_INT(ds.owner, TM_KV_OWNER_DECODE);
    tm_bridge_free(b);
    for (int l = 0; l < L; l++) {
        tm_kv_copy_layer(dec, &ds, dec2, &ds2, l, 0, N);  /* int8 -> int8: the same bytes */
        tm_kv_copy_layer(dec2, &ds2, back, &bs, l, 0, N); /* int8 -> f32: scale * q */
    }
    int bad = 0, bad2 = 0, bad3 = 0;
    for (int l = 0; l < L; l++) {
        tm_kv_view v, v2, vb;
        tm_kv_view_of(dec, &ds, l, &v);
        tm_kv_view_of(dec2, &ds2, l, &v2);
        tm_kv_view_of(back, &bs, l, &vb);
        for (int h = 0; h < Hk; h++)
            for (int p = 0; p < N; p++)
                for (int w = 0; w < 2; w++) {
                    tm_kv_row_load(stage, w ? tm_kv_page_v(stage, ss.pages[0], l, h) : tm_kv_page_k(stage, ss.pages[0], l, h), p, x);
                    int8_t q[24];
                    float s;
                    tm_kv_quant_row(q, &s, x, Dh);
                    const int8_t *got = w ? tm_kv_view_v(&v, h, p) : tm_kv_view_k(&v, h, p);
                    float gs = w ? tm_kv_view_v_scale(&v, h, p) : tm_kv_view_k_scale(&v, h, p);
                    bad += gs != s || memcmp(got, q, (size_t)Dh) != 0;
                    const int8_t *got2 = w ? tm_kv_view_v(&v2, h, p) : tm_kv_view_k(&v2, h, p);
                    float gs2 = w ? tm_kv_view_v_scale(&v2, h, p) : tm_kv_view_k_scale(&v2, h, p);
                    bad2 += gs2 != s || memcmp(got2, q, (size_t)Dh) != 0;
                    memcpy(y, w ? tm_kv_view_v(&vb, h, p) : tm_kv_view_k(&vb, h, p), sizeof y);
                    for (int d = 0; d < Dh; d++) z[d] = s * (float)q[d];
                    bad3 += memcmp(y, z, sizeof y) != 0;
                }
    }
    CHECKF(bad == 0, "%s -> int8 bridge: %d rows differ from the quantizer", tm_dtype_name(stage_dt), bad);
    CHECKF(bad2 == 0, "int8 -> int8 copy: %d rows differ", bad2);
    CHECKF(bad3 == 0, "int8 -> f32 copy: %d rows differ", bad3);
    tm_kv_seq_release(stage, &ss);
    tm_kv_seq_release(dec, &ds);
    tm_kv_seq_release(dec, &hole);
    tm_kv_seq_release(dec2, &ds2);
    tm_kv_seq_release(back, &bs);
    CHECK_EQ_INT(tm_kv_cache_free_pages(dec), 12);
    tm_kv_cache_free(stage);
    tm_kv_cache_free(dec);
    tm_kv_cache_free(dec2);
    tm_kv_cache_free(back);
}

/* fraction of [p, p + n) resident (mincore; p rounded down to its 4 KB page) */
static double resident(const void *p, size_t n)
{
    static unsigned char vec[4096];
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
    size_t np = (n + ((uintptr_t)p - a) + (size_t)pg - 1) / (size_t)pg;
    if (np > sizeof vec) np = sizeof vec;
    if (mincore((void *)a, np * (size_t)pg, vec) != 0) return -1;
    int r = 0;
    for (size_t i = 0; i < np; i++) r += vec[i] & 1;
    return (double)r / (double)np;
}

/* prefault_tokens: the first sequence's first positions are resident after
 * init, whole pages from page 0 and the heads of a partly filled page's
 * blocks; the rest of the arena is not (mincore); the cache works as any */
static void test_prefault(void)
{
    tm_err err = {0};
    /* whether this kernel has MADV_POPULATE_WRITE (5.14+): without it the prefault is a no-op */
    long pg = sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int can = probe != MAP_FAILED && madvise(probe, (size_t)pg, MADV_POPULATE_WRITE) == 0;
    if (probe != MAP_FAILED) munmap(probe, (size_t)pg);
    if (!can) fprintf(stderr, "note: no MADV_POPULATE_WRITE on this kernel: prefault residency not checked\n");

    /* paged: 16 KB pages, a 64 MB arena, 1024 positions = pages 0-63 (1 MB) */
    const int L = 2, Hk = 2, Dh = 64, np = 4096;
    tm_kv_cache *kv;
    CHECK_EQ_INT(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){L, Hk, Dh, 16, np, TM_DT_BF16, 1024}, &err), TM_OK);
    uint8_t *first = tm_kv_page_k(kv, 0, 0, 0), *end = tm_kv_page_k(kv, 64, 0, 0);
    CHECK_EQ_INT((int)((end - first) / 1024), 1024);
    if (can) {
        CHECK(resident(first, (size_t)(end - first)) == 1.0);
        CHECK(resident(tm_kv_page_k(kv, np - 64, 0, 0), (size_t)(end - first)) == 0.0);
    }
    tm_kv_seq s = {0};
    CHECK_EQ_INT(tm_kv_seq_reserve(kv, &s, 100, &err), TM_OK);
    CHECK_EQ_INT(s.pages[0], 0); /* the prefaulted pages go out first */
    tm_kv_seq_release(kv, &s);
    tm_kv_cache_free(kv);

    /* one page of 65536 positions (the staging cache's shape): K and V blocks of 8 MB; 4096
       positions fault in the head of each block (1/16: 512 KB), not its end */
    CHECK_EQ_INT(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){1, 1, Dh, 65536, 1, TM_DT_BF16, 4096}, &err), TM_OK);
    uint8_t *k = tm_kv_page_k(kv, 0, 0, 0), *v = tm_kv_page_v(kv, 0, 0, 0);
    CHECK_EQ_INT((int)((v - k) >> 20), 8);
    if (can) {
        CHECK(resident(k, 512 << 10) == 1.0);
        CHECK(resident(v, 512 << 10) == 1.0);
        CHECK(resident(k + (6 << 20), 2 << 20) == 0.0);
        CHECK(resident(v + (6 << 20), 2 << 20) == 0.0);
    }
    tm_kv_cache_free(kv);
    /* more positions than the arena holds: clamped */
    CHECK_EQ_INT(tm_kv_cache_init(&kv, &(tm_kv_cache_opts){L, Hk, Dh, 16, 8, TM_DT_BF16, 1000}, &err), TM_OK);
    tm_kv_cache_free(kv);
}


/* Shared pages (kvcache.h design block): publish, take, the reference counts, idle pages kept
 * and then given up oldest first, lookups checked against the parent key and the tokens. */
static void test_shared_pages(void)
{
    tm_err err = {0};
    tm_kv_cache *c = NULL;
    enum { PS = 4, NP = 6 };
    CHECK_EQ_INT(tm_kv_cache_init(&c, &(tm_kv_cache_opts){1, 1, 8, PS, NP, TM_DT_BF16, 0}, &err), TM_OK);
    if (!c) return;
    int32_t ids[12] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    uint64_t k0 = tm_kv_page_key(0, ids, PS), k1 = tm_kv_page_key(k0, ids + PS, PS);
    CHECK(k0 != k1 && k0 != tm_kv_page_key(1, ids, PS));
    int32_t other[PS] = {5, 6, 7, 9};
    CHECK(tm_kv_page_key(0, other, PS) != k0);

    tm_kv_seq a = {0}, b = {0}, d = {0};
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 10, &err), TM_OK); /* 3 pages */
    int32_t a0 = a.pages[0], a1 = a.pages[1];
    CHECK_EQ_INT(tm_kv_publish(c, a0, 0, k0, ids), 1);
    CHECK_EQ_INT(tm_kv_publish(c, a0, 0, k0, ids), 0);          /* the page is published */
    CHECK_EQ_INT(tm_kv_publish(c, a.pages[2], 0, k0, ids), 0);  /* so is the key */
    CHECK_EQ_INT(tm_kv_publish(c, a1, k0, k1, ids + PS), 1);
    CHECK_EQ_INT(tm_kv_publish(c, 5, 0, 77, ids), 0);           /* a page nobody holds */
    CHECK_EQ_INT(tm_kv_cache_free_pages(c), NP - 3);

    /* b takes both while a holds them: shared, no page used */
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &b, 0, k0, ids, &err), 1);
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &b, k0, k1, ids + PS, &err), 1);
    CHECK(b.n_pages == 2 && b.pages[0] == a0 && b.pages[1] == a1);
    CHECK_EQ_INT(tm_kv_cache_free_pages(c), NP - 3);
    /* a lookup checks the tokens and the parent, not only the key */
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &d, 0, k0, other, &err), 0);
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &d, 1, k0, ids, &err), 0);
    CHECK_EQ_INT(d.n_pages, 0);

    /* a goes: its unpublished page is free, the shared ones stay with b */
    tm_kv_seq_release(c, &a);
    CHECK_EQ_INT(tm_kv_cache_free_pages(c), NP - 2);
    CHECK_EQ_INT(tm_kv_cache_idle_pages(c), 0);
    /* b goes: both idle, still found, and counted as available */
    tm_kv_seq_release(c, &b);
    CHECK_EQ_INT(tm_kv_cache_idle_pages(c), 2);
    CHECK_EQ_INT(tm_kv_cache_free_pages(c), NP);
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &d, 0, k0, ids, &err), 1);
    CHECK_EQ_INT(tm_kv_cache_idle_pages(c), 1);
    tm_kv_seq_release(c, &d); /* k0 idle again, now the newer of the two */

    /* a reserve of every page takes the free ones first, then the idle ones oldest first (k1's
     * page, then k0's), unpublishing them */
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 4 * PS, &err), TM_OK); /* the 4 free pages */
    CHECK_EQ_INT(tm_kv_cache_idle_pages(c), 2);
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 5 * PS, &err), TM_OK);
    CHECK(a.pages[4] == a1 && tm_kv_cache_idle_pages(c) == 1);
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &d, k0, k1, ids + PS, &err), 0);
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &d, 0, k0, ids, &err), 1);
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 6 * PS, &err), TM_E_LIMIT); /* d holds the last one */
    tm_kv_seq_release(c, &d);
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 6 * PS, &err), TM_OK);
    CHECK(a.pages[5] == a0 && tm_kv_cache_idle_pages(c) == 0 && tm_kv_cache_free_pages(c) == 0);
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &d, 0, k0, ids, &err), 0);
    CHECK_EQ_INT(d.n_pages, 0);
    tm_kv_seq_release(c, &d); /* its table's memory */
    tm_kv_seq_release(c, &a);
    CHECK_EQ_INT(tm_kv_cache_free_pages(c), NP);
    CHECK_EQ_INT(tm_kv_cache_idle_pages(c), 0);
    tm_kv_cache_free(c);
}

/* identities: a cache's uid is unique in the process (one freed and another made, likely at the same
 * address, differ); a sequence's uid is set by its first page (reserved or taken), distinct from its
 * cache's other sequences', kept while it grows, 0 after release, and new when the struct is reused */
static void test_uids(void)
{
    tm_err err = {0};
    tm_kv_cache *c = NULL, *c2 = NULL;
    tm_kv_cache_opts o = {1, 1, 8, 4, 8, TM_DT_BF16, 0};
    CHECK_EQ_INT(tm_kv_cache_init(&c, &o, &err), TM_OK);
    if (!c) return;
    uint64_t cu = tm_kv_cache_uid(c);
    CHECK(cu != 0);
    tm_kv_seq a = {0}, b = {0}, d = {0};
    CHECK(a.uid == 0);
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 4, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &b, 4, &err), TM_OK);
    uint64_t ua = a.uid;
    CHECK(ua != 0 && b.uid != 0 && ua != b.uid);
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 12, &err), TM_OK); /* grows: the same sequence */
    CHECK(a.uid == ua);
    int32_t ids[4] = {1, 2, 3, 4};
    uint64_t k = tm_kv_page_key(0, ids, 4);
    CHECK_EQ_INT(tm_kv_publish(c, a.pages[0], 0, k, ids), 1);
    CHECK_EQ_INT(tm_kv_seq_take_published(c, &d, 0, k, ids, &err), 1); /* a first page taken */
    CHECK(d.uid != 0 && d.uid != ua && d.uid != b.uid);
    tm_kv_seq_release(c, &a);
    CHECK(a.uid == 0);
    CHECK_EQ_INT(tm_kv_seq_reserve(c, &a, 4, &err), TM_OK); /* the struct reused: a new sequence */
    CHECK(a.uid != 0 && a.uid != ua && a.uid != b.uid && a.uid != d.uid);
    tm_kv_seq_release(c, &a);
    tm_kv_seq_release(c, &b);
    tm_kv_seq_release(c, &d);
    tm_kv_cache_free(c);
    CHECK_EQ_INT(tm_kv_cache_init(&c2, &o, &err), TM_OK);
    CHECK(c2 && tm_kv_cache_uid(c2) != 0 && tm_kv_cache_uid(c2) != cu);
    tm_kv_cache_free(c2);
}

int main(void)
{
    test_uids();
    test_prefault();
    test_shared_pages();
    test_quant_row();
    test_int8_layout();
    test_bridge_int8(TM_DT_BF16);
    test_bridge_int8(TM_DT_F32);
    tm_err err = {0};
    const int L = 3, Hk = 2, Dh = 32, N = 200;
    tm_kv_cache *stage, *dec;
    CHECK_EQ_INT(tm_kv_cache_init(&stage, &(tm_kv_cache_opts){L, Hk, Dh, 64, 8, TM_DT_F32, 0}, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_cache_init(&dec, &(tm_kv_cache_opts){L, Hk, Dh, 16, 20, TM_DT_BF16, 0}, &err), TM_OK);
    tm_kv_seq ss = {0}, ds = {0};
    CHECK_EQ_INT(tm_kv_seq_reserve(stage, &ss, N, &err), TM_OK);
    CHECK_EQ_INT(ss.n_pages, 4);
    CHECK_EQ_INT(tm_kv_cache_free_pages(stage), 4);
    CHECK_EQ_INT(tm_kv_seq_reserve(dec, &ds, N, &err), TM_OK);
    CHECK_EQ_INT(ds.n_pages, 13);
    ss.n_tokens = ds.n_tokens = N;
    fill(stage, &ss, L, Hk, Dh, N);

    /* synchronous copy of a sub-range crossing page boundaries of both sides */
    for (int l = 0; l < L; l++) tm_kv_copy_layer(stage, &ss, dec, &ds, l, 5, 77);
    CHECK_EQ_INT(check(dec, &ds, L, Hk, Dh, 5, 77), 0);

    /* the bridge thread: layers queued out of order, then finish flips the owner */
    tm_bridge *b;
    CHECK_EQ_INT(tm_bridge_init(&b, -1, &err), TM_OK);
    ds.owner = TM_KV_OWNER_PREFILL;
    tm_bridge_begin(b, stage, &ss, dec, &ds, 0, N);
    tm_bridge_layer_done(b, 2);
    tm_bridge_layer_done(b, 0);
    tm_bridge_layer_done(b, 1);
    tm_bridge_finish(b);
    CHECK_EQ_INT(ds.owner, TM_KV_OWNER_DECODE);
    CHECK_EQ_INT(check(dec, &ds, L, Hk, Dh, 0, N), 0);
    tm_bridge_free(b);

    /* exhaustion is an error that leaves the sequence unchanged */
    tm_kv_seq big = {0};
    CHECK_EQ_INT(tm_kv_seq_reserve(dec, &big, 16 * 8, &err), TM_E_LIMIT);
    CHECK(strstr(err.msg, "kv cache full") != NULL);
    CHECK_EQ_INT(big.n_pages, 0);
    /* release returns every page (a cancelled request leaks nothing) */
    tm_kv_seq_release(dec, &ds);
    tm_kv_seq_release(stage, &ss);
    tm_kv_seq_release(dec, &big);
    CHECK_EQ_INT(tm_kv_cache_free_pages(dec), 20);
    CHECK_EQ_INT(tm_kv_cache_free_pages(stage), 8);
    /* bad geometry */
    tm_kv_cache *bad;
    CHECK_EQ_INT(tm_kv_cache_init(&bad, &(tm_kv_cache_opts){L, Hk, Dh, 12, 8, TM_DT_F32, 0}, &err), TM_E_INVALID);
    tm_kv_cache_free(stage);
    tm_kv_cache_free(dec);
    return th_done("test_kvcache");
}
