/* tests/test_kvcache.c: paged KV cache accounting and the KV bridge. */
#include "harness.h"

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

int main(void)
{
    tm_err err = {0};
    const int L = 3, Hk = 2, Dh = 32, N = 200;
    tm_kv_cache *stage, *dec;
    CHECK_EQ_INT(tm_kv_cache_init(&stage, &(tm_kv_cache_opts){L, Hk, Dh, 64, 8, TM_DT_F32}, &err), TM_OK);
    CHECK_EQ_INT(tm_kv_cache_init(&dec, &(tm_kv_cache_opts){L, Hk, Dh, 16, 20, TM_DT_BF16}, &err), TM_OK);
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
    CHECK_EQ_INT(tm_kv_cache_init(&bad, &(tm_kv_cache_opts){L, Hk, Dh, 12, 8, TM_DT_F32}, &err), TM_E_INVALID);
    tm_kv_cache_free(stage);
    tm_kv_cache_free(dec);
    return th_done("test_kvcache");
}
