/* fuzz/fuzz_kernels.c: the CPU kernels on arbitrary shapes and bytes.
 * Input: byte 0 picks the op (GEMV int4/int8/bf16, GEMM bf16/int8, prefill
 * or decode attention), the next bytes the shape, the rest fills weights,
 * scales, activations and page tables (zero past the input). Every buffer is
 * allocated at its exact size, so a kernel reading past a row or a tail
 * shows up under ASan. Checked: binding and ops either succeed or fail with
 * TM_E_INVALID/UNSUPPORTED (never crash); the best variant (or, with byte
 * 0's top bit and no AMX here, amx-emu) and the scalar reference agree on
 * success (same status), and both give finite output when every input is
 * finite and small. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/kernels.h"
#include "quant/quant.h"

typedef struct src {
    const uint8_t *p;
    size_t n, at;
} src;

static uint8_t take(src *s)
{
    return s->at < s->n ? s->p[s->at++] : 0;
}

static void fill(src *s, void *dst, size_t n)
{
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = take(s);
}

/* floats from bytes, tamed so products stay finite: value in [-4, 4] */
static void fill_f32(src *s, float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) f[i] = ((int)take(s) - 128) / 32.0f;
}

static int all_finite(const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(y[i])) return 0;
    return 1;
}

static void fuzz_matmul(src *s, int op, const tm_kernels *best, const tm_kernels *ref)
{
    static const tm_dtype q4[] = {TM_DT_Q4G32, TM_DT_Q4G64, TM_DT_Q4PC, TM_DT_Q6G64};
    tm_dtype dt = op == 0 ? q4[take(s) % 4] : (op == 1 || op == 4) ? TM_DT_Q8PC : TM_DT_BF16;
    int gemm = op >= 3;
    int N = 1 + take(s) % 70, K = 1 + take(s) % 300, M = 1 + take(s) % (gemm ? 40 : 8);
    if (dt != TM_DT_BF16 && dt != TM_DT_Q8PC && take(s) % 4) K = 32 * (1 + K % 9); /* mostly valid Q4 shapes */
    size_t nb = tm_quant_data_bytes(dt, N, K);
    size_t ns = dt == TM_DT_BF16 ? 0 : (size_t)N * (K / 32 + 1);
    uint8_t *data = malloc(nb + 1);
    void *sc = malloc(sizeof(float) * (ns + 1));
    float *x = malloc(sizeof(float) * M * K);
    float *y = malloc(sizeof(float) * M * N), *yr = malloc(sizeof(float) * M * N);
    fill(s, data, nb);
    if (dt == TM_DT_BF16)
        for (size_t i = 1; i < nb; i += 2) data[i] = (uint8_t)((data[i] & 0x80) | 0x3c); /* finite, small */
    for (size_t i = 0; i < ns; i++) tm_quant_scale_set(dt, sc, i, (take(s) - 128) / 1024.0f); /* f32 or f16 */
    fill_f32(s, x, (size_t)M * K);
    tm_tensor t = {.name = "fuzz", .dtype = dt, .ndim = 2, .shape = {N, K}, .data = data, .nbytes = nb, .scales = sc};
    tm_kweight *w;
    tm_err err = {0};
    int rc = tm_kpack_init(&w, &t, TM_KPACK_GEMV | (gemm ? TM_KPACK_GEMM : 0), &err);
    if (rc == TM_OK) {
        tm_kbuf ws = {0};
        tm_kact a = {.M = M, .K = K, .f32 = x};
        typedef int (*fn)(const tm_kweight *, const tm_kact *, float *, tm_kbuf *, struct tm_pool *);
        fn fb = op == 0 ? best->gemv_q4 : op == 1 ? best->gemv_q8 : op == 2 ? best->gemv_bf16
              : op == 3 ? best->gemm_bf16 : best->gemm_q8;
        fn fr = op == 0 ? ref->gemv_q4 : op == 1 ? ref->gemv_q8 : op == 2 ? ref->gemv_bf16
              : op == 3 ? ref->gemm_bf16 : ref->gemm_q8;
        int r1 = fb(w, &a, y, &ws, NULL), r2 = fr(w, &a, yr, &ws, NULL);
        if (r1 != r2) abort();
        if (r1 == TM_OK && (!all_finite(y, (size_t)M * N) || !all_finite(yr, (size_t)M * N))) abort();
        if (tm_kmatmul(best, w, &a, y, &ws, NULL, &err) == TM_OK && !all_finite(y, (size_t)M * N)) abort();
        tm_kbuf_free(&ws);
        tm_kpack_free(w);
    } else if (rc != TM_E_INVALID && rc != TM_E_UNSUPPORTED) {
        abort();
    }
    free(data); free(sc); free(x); free(y); free(yr);
}

static void fuzz_prefill(src *s, const tm_kernels *best)
{
    int Hk = 1 + take(s) % 3, grp = 1 + take(s) % 3, H = Hk * grp, Dh = 1 + take(s) % 70, T = 1 + take(s) % 20;
    int P = take(s) % 90, stride = P + T + take(s) % 3;
    tm_dtype dt = take(s) & 1 ? TM_DT_BF16 : TM_DT_F32;
    size_t es = dt == TM_DT_F32 ? 4 : 2, nkv = (size_t)Hk * stride * Dh;
    float *q = malloc(sizeof(float) * T * H * Dh), *out = malloc(sizeof(float) * T * H * Dh);
    void *k = malloc(nkv * es), *v = malloc(nkv * es);
    fill_f32(s, q, (size_t)T * H * Dh);
    if (dt == TM_DT_F32) {
        fill_f32(s, k, nkv);
        fill_f32(s, v, nkv);
    } else {
        for (size_t i = 0; i < nkv; i++) ((uint16_t *)k)[i] = (uint16_t)(0x3c00 | take(s));
        for (size_t i = 0; i < nkv; i++) ((uint16_t *)v)[i] = (uint16_t)(0x3c00 | take(s));
    }
    int window = take(s) % 4 ? 0 : take(s) % 40;
    float softcap = take(s) % 4 ? 0.f : 1.f + take(s) % 50;
    tm_kattn_prefill a = {.T = T, .H = H, .Hk = Hk, .Dh = Dh, .pos0 = P, .q = q, .k = k, .v = v, .kv_dtype = dt,
                          .kv_stride = stride, .out = out, .scale = 0.125f, .softcap = softcap, .window = window};
    tm_kbuf ws = {0};
    int rc = best->attn_prefill(&a, &ws, NULL);
    if (rc == TM_OK && !all_finite(out, (size_t)T * H * Dh)) abort();
    tm_kbuf_free(&ws);
    free(q); free(out); free(k); free(v);
}

static void fuzz_decode(src *s, const tm_kernels *best)
{
    int B = 1 + take(s) % 3, Hk = 1 + take(s) % 2, grp = 1 + take(s) % 3, H = Hk * grp, Dh = 1 + take(s) % 40;
    int ps = 1 + take(s) % 20, npages = 1 + take(s) % 12, pick = take(s) % 3;
    tm_dtype dt = pick == 0 ? TM_DT_BF16 : pick == 1 ? TM_DT_F16 : TM_DT_Q8PC;
    /* int8 blocks: scale[ps] f32 then q[ps][Dh], tightly packed (head_bytes 0) */
    size_t head = dt == TM_DT_Q8PC ? 4 * (size_t)ps + (size_t)ps * Dh : (size_t)ps * Dh * 2;
    size_t page_bytes = (size_t)Hk * head;
    uint8_t *kp = malloc(npages * page_bytes), *vp = malloc(npages * page_bytes);
    for (size_t i = 0; i < npages * page_bytes; i++) kp[i] = take(s), vp[i] = take(s);
    for (int p = 0; p < npages * Hk; p++)
        for (int r = 0; r < ps; r++) {
            uint8_t *blk[2] = {kp + (size_t)p * head, vp + (size_t)p * head};
            for (int w = 0; w < 2; w++) {
                if (dt == TM_DT_Q8PC) { /* finite scales; the int8 rows stay arbitrary bytes */
                    float sc = (float)(take(s) % 64) / 256.f;
                    memcpy(blk[w] + 4 * (size_t)r, &sc, 4);
                } else { /* sane exponents */
                    for (int d = 0; d < Dh; d++) {
                        uint16_t x = (uint16_t)(0x3000 | take(s));
                        memcpy(blk[w] + 2 * ((size_t)r * Dh + d), &x, 2);
                    }
                }
            }
        }
    float *q = malloc(sizeof(float) * B * H * Dh), *out = malloc(sizeof(float) * B * H * Dh);
    fill_f32(s, q, (size_t)B * H * Dh);
    int ctx[3];
    int32_t *tab[3];
    for (int b = 0; b < B; b++) {
        ctx[b] = 1 + take(s) % (ps * 4);
        int np = (ctx[b] + ps - 1) / ps;
        tab[b] = malloc(sizeof(int32_t) * np);
        for (int i = 0; i < np; i++) tab[b][i] = (int32_t)(take(s) % (npages + 1)); /* sometimes out of range */
    }
    const int32_t *const tabs[3] = {tab[0], B > 1 ? tab[1] : NULL, B > 2 ? tab[2] : NULL};
    float cap = take(s) % 3 ? 0.f : 30.f;
    int win = take(s) % 3 ? 0 : 1 + take(s) % 30;
    tm_kattn_decode a = {.B = B, .H = H, .Hk = Hk, .Dh = Dh, .q = q, .k_pages = kp, .v_pages = vp,
                         .page_bytes = page_bytes, .page_size = ps, .kv_dtype = dt, .n_pages = npages,
                         .page_table = tabs, .ctx_len = ctx, .out = out, .scale = 0.2f, .softcap = cap,
                         .window = win};
    tm_kbuf ws = {0};
    int rc = best->attn_decode(&a, &ws, NULL);
    if (rc == TM_OK && !all_finite(out, (size_t)B * H * Dh)) abort();
    tm_kbuf_free(&ws);
    for (int b = 0; b < B; b++) free(tab[b]);
    free(kp); free(vp); free(q); free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tm_kernels best, ref, emu;
    static int init, have_emu;
    if (!init) {
        tm_kernels_best(&best);
        tm_kernels_select("scalar", &ref, NULL);
        have_emu = strcmp(best.name, "amx") != 0 && tm_kernels_select("amx-emu", &emu, NULL) == 0;
        init = 1;
    }
    src s = {data, size, 0};
    uint8_t b0 = take(&s);
    int op = b0 % 7;
    /* byte 0's top bit: the AMX kernels over emulated tiles where the CPU has no AMX */
    const tm_kernels *k = (b0 & 0x80) && have_emu ? &emu : &best;
    if (op < 5) fuzz_matmul(&s, op, k, &ref);
    else if (op == 5) fuzz_prefill(&s, k);
    else fuzz_decode(&s, k);
    return 0;
}
