/* engine/cpu/kpack.c: binding weights for the kernels (row sums, GEMM panels,
 * see the layouts in kernels-impl.h), and the scratch buffer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/cpu/kernels-impl.h"
#include "quant/quant.h"

#define KP_MAX_DIM ((int64_t)1 << 31)
#define KP_MAX_NUMEL ((int64_t)1 << 40)

int tm_kbuf_reserve(tm_kbuf *ws, size_t n)
{
    if (ws->cap >= n) return TM_OK;
    size_t cap = tm_kalign64(n + n / 4);
    void *p = tm_khuge_alloc(cap);
    if (!p) return TM_E_NOMEM;
    free(ws->p);
    ws->p = p;
    ws->cap = cap;
    return TM_OK;
}

void tm_kbuf_free(tm_kbuf *ws)
{
    free(ws->p);
    ws->p = NULL;
    ws->cap = 0;
}

static int huge_ok;
static void huge_probe(void)
{
    const char *e = getenv("TANDEM_HUGEPAGES");
    if (e && !strcmp(e, "0")) return;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char buf[128] = "";
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    huge_ok = strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

int tm_khuge_ok(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, huge_probe);
    return huge_ok;
}

/* n bytes: from min up on huge pages (tm_khuge_alloc), below 64-byte aligned */
static void *huge_alloc(size_t n, size_t min)
{
    const size_t H = (size_t)2 << 20;
    if (n < min || !tm_khuge_ok()) return aligned_alloc(64, tm_kalign64(n ? n : 1));
    size_t sz = (n + H - 1) & ~(H - 1);
    void *p = aligned_alloc(H, sz);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, sz, MADV_HUGEPAGE);
#endif
    return p;
}

void *tm_khuge_alloc(size_t n) { return huge_alloc(n, (size_t)2 << 20); }

/* GEMM panels from 512 KB up (TM_KPANEL_HUGE_MIN) on huge pages too. On 4 KB
 * pages Qwen2.5-0.5B's qkv and o panels (1.0 and 0.8 MB) ran a process's
 * first prefill GEMMs at a third of their later rate on dev (session 16);
 * the rounding to 2 MB costs that model ~50 MB of memory. */
static void *panel_alloc(size_t n) { return huge_alloc(n, TM_KPANEL_HUGE_MIN); }

int tm_kweight_n(const tm_kweight *w) { return w->N; }
int tm_kweight_k(const tm_kweight *w) { return w->K; }
tm_dtype tm_kweight_dtype(const tm_kweight *w) { return w->dtype; }
double tm_kweight_ops(const tm_kweight *w, int M) { return 2.0 * M * w->N * w->K * (w->glu ? 2 : 1); }

/* bytes of scales per row: f32 [1] (Q8PC), f16 [K/G] (int4, int6), none (bf16) */
static size_t scale_row_bytes(tm_dtype dt, int K, int G)
{
    return dt == TM_DT_BF16 ? 0 : (size_t)(K / G) * tm_quant_scale_bytes(dt);
}

size_t tm_kweight_gemv_bytes(const tm_kweight *w)
{
    return (size_t)w->N * (w->row_bytes + scale_row_bytes(w->dtype, w->K, w->G));
}

void tm_kpack_free(tm_kweight *w)
{
    if (!w) return;
    free(w->colsum);
    free(w->panel);
    free(w->pscale);
    free(w->copy);
    free(w);
}

static int pack_bf16(tm_kweight *w)
{
    const uint16_t *src = w->data;
    size_t kp2 = (size_t)w->Kp / 2;
    uint16_t *dst = panel_alloc((size_t)w->Np * (size_t)w->Kp * 2);
    if (!dst) return TM_E_NOMEM;
    for (int p = 0; p < w->Np / 32; p++)
        for (size_t r = 0; r < kp2; r++) {
            uint16_t *o = dst + ((size_t)p * kp2 + r) * 64;
            for (int c = 0; c < 32; c++) {
                int n = 32 * p + c;
                for (int j = 0; j < 2; j++) {
                    size_t k = 2 * r + (size_t)j;
                    o[2 * c + j] = (n < w->N && k < (size_t)w->K) ? src[(size_t)n * w->K + k] : 0;
                }
            }
        }
    w->panel = dst;
    return TM_OK;
}

static int pack_q8(tm_kweight *w)
{
    const int8_t *src = w->data;
    size_t kp4 = (size_t)w->Kp / 4;
    int8_t *dst = panel_alloc((size_t)w->Np * (size_t)w->Kp);
    w->pscale = calloc((size_t)w->Np, sizeof(float));
    if (!dst || !w->pscale) { free(dst); return TM_E_NOMEM; }
    for (int p = 0; p < w->Np / 32; p++)
        for (size_t r = 0; r < kp4; r++) {
            int8_t *o = dst + ((size_t)p * kp4 + r) * 128;
            for (int c = 0; c < 32; c++) {
                int n = 32 * p + c;
                for (int j = 0; j < 4; j++) {
                    size_t k = 4 * r + (size_t)j;
                    o[4 * c + j] = (n < w->N && k < (size_t)w->K) ? src[(size_t)n * w->K + k] : 0;
                }
            }
        }
    memcpy(w->pscale, w->scales, sizeof(float) * (size_t)w->N);
    w->panel = dst;
    return TM_OK;
}

/* a CPU weight's row in dtype: bytes of data and elements per scale (G: K
 * for per-channel); TM_E_UNSUPPORTED for a dtype with no kernel,
 * TM_E_INVALID for a K the int4 / int6 layouts cannot hold */
static int row_layout(tm_dtype dt, int K, int *G, size_t *row_bytes)
{
    *G = K;
    switch (dt) {
    case TM_DT_BF16: *row_bytes = (size_t)K * 2; return TM_OK;
    case TM_DT_Q8PC: *row_bytes = (size_t)K; return TM_OK;
    case TM_DT_Q4G32: *G = 32; break;
    case TM_DT_Q4G64: *G = 64; break;
    case TM_DT_Q4PC: break;
    case TM_DT_Q6G64: *G = 64; break;
    default: return TM_E_UNSUPPORTED;
    }
    *row_bytes = tm_quant_row_bytes(dt, K);
    return K % 32 || K % *G ? TM_E_INVALID : TM_OK;
}

/* The rows of parts[0..n) in turn (of type dt, K wide: rb bytes of data
 * and srb bytes of scales each) copied into one allocation (on huge pages
 * from 2 MB up if huge, tm_khuge_alloc): data [N][drb], then (64-byte
 * aligned) the scales [N][srb bytes], *scales (NULL if srb is 0). With
 * repack (the block-32 family), rows are laid out for the GEMV as they are
 * copied (drb = tm_kq4_row_bytes), else drb = rb. NULL if out of memory;
 * free() releases it. */
static char *copy_rows(const tm_tensor *const *parts, int n, tm_dtype dt, int K, size_t rb, size_t srb, int huge,
                       int repack, const void **scales)
{
    size_t N = 0, drb = repack ? tm_kq4_row_bytes(dt, K) : rb;
    for (int i = 0; i < n; i++) N += (size_t)parts[i]->shape[0];
    size_t db = N * drb, nb = tm_kalign64(db) + N * srb;
    char *buf = huge ? tm_khuge_alloc(nb) : aligned_alloc(64, tm_kalign64(nb ? nb : 1));
    if (!buf) return NULL;
    char *sc = srb ? buf + tm_kalign64(db) : NULL;
    for (int i = 0, r = 0; i < n; r += (int)parts[i]->shape[0], i++) {
        size_t pn = (size_t)parts[i]->shape[0];
        if (repack)
            for (size_t k = 0; k < pn; k++)
                tm_kq4_repack_row(dt, (uint8_t *)buf + (r + k) * drb, (const uint8_t *)parts[i]->data + k * rb, K);
        else
            memcpy(buf + (size_t)r * rb, parts[i]->data, pn * rb);
        if (srb) memcpy(sc + (size_t)r * srb, parts[i]->scales, pn * srb);
    }
    *scales = sc;
    return buf;
}

/* tm_kpack_init, where laid_out says an int4 / int6 tensor's rows are in the
 * GEMV layout already (tm_kpack_concat's copy) */
static int kpack_init(tm_kweight **out, const tm_tensor *t, int uses, int laid_out, tm_err *err)
{
    *out = NULL;
    const char *name = t->name ? t->name : "(unnamed)";
    if (t->ndim != 2)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': kernels take 2-d weights [N][K], ndim is %d", name, t->ndim);
    int64_t N = t->shape[0], K = t->shape[1];
    if (N < 1 || K < 1 || N >= KP_MAX_DIM || K >= KP_MAX_DIM || N * K > KP_MAX_NUMEL)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': shape [%lld][%lld] out of range", name, (long long)N, (long long)K);
    int G;
    size_t row_bytes;
    int rl = row_layout(t->dtype, (int)K, &G, &row_bytes);
    if (rl == TM_OK && laid_out) row_bytes = tm_kq4_row_bytes(t->dtype, (int)K);
    if (rl == TM_E_UNSUPPORTED)
        return tm_errf(err, rl, "tensor '%s': dtype %s has no CPU kernel (bf16, int8, int4*)", name,
                       tm_dtype_name(t->dtype));
    if (rl)
        return tm_errf(err, rl, "tensor '%s': %s needs K %% %d == 0, K is %lld", name, tm_dtype_name(t->dtype),
                       G > 32 && G != K ? G : 32, (long long)K);
    if ((uses & TM_KPACK_GEMM) && t->dtype != TM_DT_BF16 && t->dtype != TM_DT_Q8PC)
        return tm_errf(err, TM_E_UNSUPPORTED, "tensor '%s': GEMM panels exist for bf16 and int8, not %s", name,
                       tm_dtype_name(t->dtype));
    if ((uses & TM_KPACK_GEMM) && t->dtype == TM_DT_Q8PC && K > 65536)
        return tm_errf(err, TM_E_UNSUPPORTED, "tensor '%s': int8 GEMM keeps exact int32 sums up to K = 65536, K is %lld",
                       name, (long long)K);
    if (!t->data || t->nbytes < (size_t)N * row_bytes)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': data holds %zu bytes, [%lld][%lld] %s needs %zu", name,
                       t->data ? t->nbytes : 0, (long long)N, (long long)K, tm_dtype_name(t->dtype),
                       (size_t)N * row_bytes);
    if (t->dtype != TM_DT_BF16 && !t->scales)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': %s weight without scales", name, tm_dtype_name(t->dtype));

    tm_kweight *w = calloc(1, sizeof *w);
    if (!w) return tm_errf(err, TM_E_NOMEM, "tensor '%s': out of memory", name);
    w->dtype = t->dtype;
    w->N = (int)N;
    w->K = (int)K;
    w->G = G;
    w->data = t->data;
    w->scales = t->scales;
    w->row_bytes = row_bytes;
    w->Np = (int)((N + 31) & ~31);
    w->Kp = (int)(t->dtype == TM_DT_Q8PC ? (K + 63) & ~63 : (K + 31) & ~31);
    int rc = TM_OK;
    if (t->dtype == TM_DT_Q8PC) {
        w->colsum = calloc((size_t)w->Np, sizeof(int32_t));
        if (!w->colsum) rc = TM_E_NOMEM;
        const int8_t *q = t->data;
        for (int64_t n = 0; n < N && rc == TM_OK; n++) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++) s += q[n * K + k];
            w->colsum[n] = s;
        }
    }
    if (rc == TM_OK && (uses & TM_KPACK_GEMM)) rc = t->dtype == TM_DT_BF16 ? pack_bf16(w) : pack_q8(w);
    size_t db = (size_t)N * row_bytes;
    int huge = (uses & TM_KPACK_HUGE) && (uses & TM_KPACK_GEMV) && db >= ((size_t)2 << 20) && tm_khuge_ok();
    int repack = tm_kdt_block32(t->dtype) && !laid_out;
    if (rc == TM_OK && (huge || repack)) { /* int4, int6: always a copy, in the GEMV layout */
        const void *sc;
        w->copy = copy_rows(&t, 1, t->dtype, (int)K, row_bytes, scale_row_bytes(t->dtype, (int)K, G), huge, repack, &sc);
        w->row_bytes = repack ? tm_kq4_row_bytes(t->dtype, (int)K) : row_bytes;
        if (!w->copy) {
            rc = TM_E_NOMEM;
        } else {
            w->data = w->copy;
            w->scales = sc;
        }
    }
    if (rc != TM_OK) {
        tm_kpack_free(w);
        return tm_errf(err, rc, "tensor '%s': out of memory packing [%lld][%lld]", name, (long long)N, (long long)K);
    }
    *out = w;
    return TM_OK;
}

int tm_kpack_init(tm_kweight **out, const tm_tensor *t, int uses, tm_err *err)
{
    return kpack_init(out, t, uses, 0, err);
}

int tm_kpack_concat(tm_kweight **out, const tm_tensor *const *parts, int n, int uses, const char *name, tm_err *err)
{
    *out = NULL;
    int64_t N = 0, K = n > 0 && parts[0]->ndim == 2 ? parts[0]->shape[1] : 0;
    tm_dtype dt = n > 0 ? parts[0]->dtype : TM_DT_F32;
    int G;
    size_t rb;
    if (K < 1 || K >= KP_MAX_DIM || row_layout(dt, (int)K, &G, &rb) != TM_OK)
        return tm_errf(err, TM_E_INVALID, "kpack concat '%s': no CPU layout for the parts", name);
    for (int i = 0; i < n; i++) {
        const tm_tensor *t = parts[i];
        if (t->ndim != 2 || t->dtype != dt || t->shape[1] != K || t->shape[0] < 1 || !t->data ||
            t->nbytes < (size_t)t->shape[0] * rb || (dt != TM_DT_BF16 && !t->scales))
            return tm_errf(err, TM_E_INVALID, "kpack concat '%s': part %d is not a [N][%lld] %s weight", name, i,
                           (long long)K, tm_dtype_name(dt));
        N += t->shape[0];
    }
    if (N >= KP_MAX_DIM) return tm_errf(err, TM_E_INVALID, "kpack concat '%s': %lld rows", name, (long long)N);
    const void *sc;
    char *buf = copy_rows(parts, n, dt, (int)K, rb, scale_row_bytes(dt, (int)K, G), 1, tm_kdt_block32(dt), &sc);
    if (!buf) return tm_errf(err, TM_E_NOMEM, "kpack concat '%s': out of memory", name);
    size_t drb = tm_kdt_block32(dt) ? tm_kq4_row_bytes(dt, (int)K) : rb;
    tm_tensor t = {.name = name, .dtype = dt, .ndim = 2, .shape = {N, K}, .data = buf, .nbytes = (size_t)N * drb,
                   .scales = sc};
    int rc = kpack_init(out, &t, uses & ~TM_KPACK_HUGE, tm_kdt_block32(dt), err); /* buf: the copy, on huge pages, laid out */
    if (rc != TM_OK) {
        free(buf);
        return rc;
    }
    (*out)->copy = buf;
    return TM_OK;
}

int tm_kpack_glu(tm_kweight **out, const tm_kweight *gate, const tm_kweight *up, int act, tm_err *err)
{
    *out = NULL;
    if (!gate || !up || !gate->panel || !up->panel || gate->glu || up->glu || gate->dtype != up->dtype ||
        gate->N != up->N || gate->K != up->K || (act != TM_KGLU_SILU && act != TM_KGLU_GELU_TANH && act != TM_KGLU_GELU))
        return tm_errf(err, TM_E_INVALID, "kpack glu: gate and up must be GEMM weights of one dtype and shape");
    int q8 = gate->dtype == TM_DT_Q8PC, np = gate->Np / 32;
    size_t pb = (size_t)gate->Kp * 32 * (q8 ? 1 : 2); /* one panel's bytes */
    tm_kweight *w = calloc(1, sizeof *w);
    if (!w) return tm_errf(err, TM_E_NOMEM, "kpack glu: out of memory");
    *w = (tm_kweight){.dtype = gate->dtype, .N = gate->N, .K = gate->K, .G = gate->G, .Kp = gate->Kp,
                      .Np = gate->Np, .glu = act};
    char *pan = panel_alloc(2 * (size_t)np * pb);
    w->panel = pan;
    if (q8) {
        w->colsum = malloc(sizeof(int32_t) * 2 * (size_t)gate->Np);
        w->pscale = malloc(sizeof(float) * 2 * (size_t)gate->Np);
    }
    if (!pan || (q8 && (!w->colsum || !w->pscale))) {
        tm_kpack_free(w);
        return tm_errf(err, TM_E_NOMEM, "kpack glu: out of memory for [%d][%d] x 2", gate->N, gate->K);
    }
    for (int p = 0; p < np; p++) {
        const tm_kweight *src[2] = {gate, up};
        for (int h = 0; h < 2; h++) {
            memcpy(pan + (2 * (size_t)p + h) * pb, (const char *)src[h]->panel + (size_t)p * pb, pb);
            if (q8) {
                memcpy(w->colsum + (2 * p + h) * 32, src[h]->colsum + 32 * p, sizeof(int32_t) * 32);
                memcpy(w->pscale + (2 * p + h) * 32, src[h]->pscale + 32 * p, sizeof(float) * 32);
            }
        }
    }
    *out = w;
    return TM_OK;
}

void tm_kpack_drop_panels(tm_kweight *w)
{
    if (!w) return;
    free(w->panel);
    free(w->pscale);
    w->panel = NULL;
    w->pscale = NULL;
}

int tm_kpack_unpack(const tm_kweight *w, void *data, float *scales, tm_err *err)
{
    if (!w->panel) return tm_errf(err, TM_E_INVALID, "kpack unpack: weight has no GEMM panels");
    if (w->dtype == TM_DT_BF16) {
        const uint16_t *s = w->panel;
        uint16_t *d = data;
        size_t kp2 = (size_t)w->Kp / 2;
        for (int n = 0; n < w->N; n++)
            for (int k = 0; k < w->K; k++)
                d[(size_t)n * w->K + k] = s[(((size_t)(n / 32) * kp2 + (size_t)k / 2) * 32 + n % 32) * 2 + k % 2];
    } else {
        const int8_t *s = w->panel;
        int8_t *d = data;
        size_t kp4 = (size_t)w->Kp / 4;
        for (int n = 0; n < w->N; n++)
            for (int k = 0; k < w->K; k++)
                d[(size_t)n * w->K + k] = s[(((size_t)(n / 32) * kp4 + (size_t)k / 4) * 32 + n % 32) * 4 + k % 4];
        if (scales) memcpy(scales, w->pscale, sizeof(float) * (size_t)w->N);
    }
    return TM_OK;
}
