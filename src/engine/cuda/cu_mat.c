/* engine/cuda/cu_mat.c: the CUDA engine's weight matrices (cu_mat.h has the design). */
#include "engine/cuda/cu_mat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref/ref-impl.h"
#include "quant/quant.h"

int cu_err(tm_err *err, cudaError_t e, const char *what)
{
    return tm_errf(err, e == cudaErrorMemoryAllocation ? TM_E_NOMEM : TM_E_IO, "cuda engine: %s: %s", what,
                   cudaGetErrorString(e));
}

/* Every copy up goes on the engine's stream and is waited for before its host buffer is reused or
 * freed: a plain cudaMemcpy from pageable memory may return before its DMA lands, and the stream is
 * non-blocking, so a kernel on it could read the destination first (a bind that raced so gave wrong
 * weights now and then, session 42). */
int cu_up_bf16_into(cudaStream_t st, uint16_t *dst, const float *h, size_t n, float *tmp, size_t tmp_n, tm_err *err)
{
    for (size_t i = 0; i < n; i += tmp_n) {
        size_t k = n - i < tmp_n ? n - i : tmp_n;
        CK(cudaMemcpyAsync(tmp, h + i, k * sizeof(float), cudaMemcpyHostToDevice, st), "cudaMemcpyAsync");
        cu_to_bf16(st, dst + i, tmp, k);
        CK(cudaStreamSynchronize(st), "converting weights to bf16");
    }
    return TM_OK;
}

int cu_up_f32(float **d, cudaStream_t st, const float *h, size_t n, tm_err *err)
{
    *d = NULL;
    if (!h) return TM_OK;
    CK(cudaMalloc((void **)d, n * sizeof(float)), "cudaMalloc");
    CK(cudaMemcpyAsync(*d, h, n * sizeof(float), cudaMemcpyHostToDevice, st), "cudaMemcpyAsync");
    CK(cudaStreamSynchronize(st), "copying weights up");
    return TM_OK;
}

int cu_mat_up_stage(cu_mat *m, cudaStream_t st, const cu_part *p, int n_parts, int64_t K, int packed, float *tmp,
                    size_t tmp_n, tm_err *err)
{
    int rc = packed ? cu_mat_up_packed(m, st, p, n_parts, K, err) : 1;
    return rc == 1 ? cu_mat_up_parts(m, st, p, n_parts, K, tmp, tmp_n, err) : rc;
}

int cu_mat_up_f32(cu_mat *m, cudaStream_t st, const float *w, int N, int K, float *tmp, size_t tmp_n, tm_err *err)
{
    memset(m, 0, sizeof *m);
    if (!w) return TM_OK;
    m->N = N, m->K = K;
    CK(cudaMalloc((void **)&m->bf, (size_t)N * K * sizeof(uint16_t)), "cudaMalloc (weights)");
    return cu_up_bf16_into(st, m->bf, w, (size_t)N * K, tmp, tmp_n, err);
}

#define PARTS_ROWS_MAX ((int64_t)1 << 16)

int cu_mat_up_parts(cu_mat *m, cudaStream_t st, const cu_part *p, int n_parts, int64_t K, float *tmp, size_t tmp_n,
                    tm_err *err)
{
    memset(m, 0, sizeof *m);
    int64_t N = 0;
    for (int i = 0; i < n_parts; i++) N += p[i].n;
    if (N < 1 || N > INT32_MAX || K < 1 || K > INT32_MAX)
        return tm_errf(err, TM_E_INVALID, "cuda engine: a weight of %lld x %lld", (long long)N, (long long)K);
    int64_t blk = (int64_t)(tmp_n / (size_t)K);
    blk = blk < 1 ? 1 : blk > PARTS_ROWS_MAX ? PARTS_ROWS_MAX : blk;
    float *h = malloc((size_t)(blk * K) * sizeof(float));
    if (!h) return tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
    m->N = (int)N, m->K = (int)K;
    cudaError_t ce = cudaMalloc((void **)&m->bf, (size_t)(N * K) * sizeof(uint16_t));
    int rc = ce == cudaSuccess ? TM_OK : cu_err(err, ce, "cudaMalloc (weights)");
    int64_t at = 0;
    for (int i = 0; i < n_parts && rc == TM_OK; at += p[i].n, i++)
        for (int64_t r = 0; r < p[i].n && rc == TM_OK; r += blk) {
            int64_t n = p[i].n - r < blk ? p[i].n - r : blk;
            rc = tm_ref_rows_f32(p[i].t, p[i].row + r, n, p[i].t->ndim ? p[i].t->shape[0] : 1, K, h, err);
            if (rc == TM_OK) rc = cu_up_bf16_into(st, m->bf + (at + r) * K, h, (size_t)(n * K), tmp, tmp_n, err);
        }
    free(h);
    if (rc != TM_OK) cu_mat_free(m);
    return rc;
}

cu_mat cu_mat_view(const cu_mat *m, int i, int n)
{
    cu_mat v = {.N = n, .K = m->K};
    if (m->bf) v.bf = m->bf + (size_t)i * n * m->K;
    if (m->q.q) {
        size_t rb = (size_t)m->K * m->q.enc / 8, sb = (size_t)(m->K / m->q.G) * (m->q.enc == 4 ? 2 : 4);
        v.q = m->q;
        v.q.N = n;
        v.q.q = m->q.q + (size_t)i * n * rb;
        v.q.s = (const uint8_t *)m->q.s + (size_t)i * n * sb;
    }
    return v;
}

int cu_mat_add_bf16(cu_mat *m, cudaStream_t st, const float *w, float *tmp, size_t tmp_n, tm_err *err)
{
    CK(cudaMalloc((void **)&m->bf, (size_t)m->N * m->K * sizeof(uint16_t)), "cudaMalloc (weights' bf16 copy)");
    return cu_up_bf16_into(st, m->bf, w, (size_t)m->N * m->K, tmp, tmp_n, err);
}

/* the packed form of encoding dt over rows of K: enc 4 or 8 and group G; 0 if none */
static int packed_form(tm_dtype dt, int64_t K, int *G)
{
    switch (dt) {
    case TM_DT_Q4G64: *G = 64; return 4;
    case TM_DT_Q4G32: *G = 32; return 4;
    case TM_DT_Q4PC: *G = (int)K; return 4;
    case TM_DT_Q8PC: *G = (int)K; return K % 16 ? 0 : 8;
    case TM_DT_Q6G64: *G = 64; return 8;
    default: return 0;
    }
}

/* rows of part p into the host images: data (row bytes rb each) and f32 / f16 scales (gpr a row) */
static int pack_part(const cu_part *p, int64_t K, int G, uint8_t *data, void *scales, tm_err *err)
{
    const tm_tensor *t = p->t;
    int64_t Nt = t->shape[0], gpr = K / G;
    size_t rb = t->dtype == TM_DT_Q8PC || t->dtype == TM_DT_Q6G64 ? (size_t)K : (size_t)K / 2;
    if (t->dtype == TM_DT_Q6G64) { /* widened: q = w / d exactly (w = d q, d an f16 value, q in [-32, 31]) */
        float *row = malloc((size_t)K * sizeof(float));
        if (!row) return tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
        const uint16_t *s16 = t->scales;
        float *s32 = scales;
        int rc = TM_OK;
        for (int64_t r = 0; r < p->n && rc == TM_OK; r++) {
            rc = tm_ref_rows_f32(t, p->row + r, 1, Nt, K, row, err);
            for (int64_t g = 0; g < gpr && rc == TM_OK; g++) {
                float d = tm_f16_to_f32(s16[(p->row + r) * gpr + g]);
                s32[r * gpr + g] = d;
                for (int64_t k = g * G; k < (g + 1) * G; k++)
                    data[r * K + k] = (uint8_t)(int8_t)(d != 0.f ? rintf(row[k] / d) : 0.f);
            }
        }
        free(row);
        return rc;
    }
    memcpy(data, (const uint8_t *)t->data + (size_t)p->row * rb, (size_t)p->n * rb);
    size_t sb = t->dtype == TM_DT_Q8PC ? 4 : 2;
    memcpy(scales, (const uint8_t *)t->scales + (size_t)(p->row * gpr) * sb, (size_t)(p->n * gpr) * sb);
    return TM_OK;
}

int cu_mat_up_packed(cu_mat *m, cudaStream_t st, const cu_part *p, int n_parts, int64_t K, tm_err *err)
{
    memset(m, 0, sizeof *m);
    int G = 0, enc = n_parts > 0 ? packed_form(p[0].t->dtype, K, &G) : 0;
    int64_t N = 0;
    for (int i = 0; i < n_parts; i++) {
        const tm_tensor *t = p[i].t;
        if (!enc || t->dtype != p[0].t->dtype || t->ndim != 2 || t->shape[1] != K || !t->data || !t->scales) return 1;
        if (p[i].row < 0 || p[i].n < 0 || p[i].row + p[i].n > t->shape[0])
            return tm_errf(err, TM_E_INVALID, "cuda engine: %s: rows %lld..%lld of %lld", t->name ? t->name : "a weight",
                           (long long)p[i].row, (long long)(p[i].row + p[i].n), (long long)t->shape[0]);
        N += p[i].n;
    }
    if (N < 1 || N > INT32_MAX) return 1;
    size_t rb = (size_t)K * enc / 8, gpr = (size_t)(K / G), sb = enc == 4 ? 2 : 4;
    uint8_t *data = malloc((size_t)N * rb);
    uint8_t *scales = malloc((size_t)N * gpr * sb);
    int rc = data && scales ? TM_OK : tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
    int64_t r = 0;
    for (int i = 0; i < n_parts && rc == TM_OK; r += p[i].n, i++)
        rc = pack_part(&p[i], K, G, data + (size_t)r * rb, scales + (size_t)r * gpr * sb, err);
    m->N = (int)N, m->K = (int)K;
    m->q = (cu_qmat){.enc = enc, .N = (int)N, .K = (int)K, .G = G};
    cudaError_t ce = cudaSuccess;
    if (rc == TM_OK) {
        void *dq = NULL, *ds = NULL;
        if ((ce = cudaMalloc(&dq, (size_t)N * rb)) == cudaSuccess && (ce = cudaMalloc(&ds, (size_t)N * gpr * sb)) == cudaSuccess &&
            (ce = cudaMemcpyAsync(dq, data, (size_t)N * rb, cudaMemcpyHostToDevice, st)) == cudaSuccess &&
            (ce = cudaMemcpyAsync(ds, scales, (size_t)N * gpr * sb, cudaMemcpyHostToDevice, st)) == cudaSuccess)
            ce = cudaStreamSynchronize(st);
        m->q.q = dq, m->q.s = ds;
        if (ce != cudaSuccess) rc = cu_err(err, ce, "copying packed weights up");
    }
    free(data);
    free(scales);
    if (rc != TM_OK) cu_mat_free(m);
    return rc;
}

size_t cu_mat_dq_bytes(const cu_mat *m) { return m->bf || !m->q.q ? 0 : (size_t)m->N * m->K * sizeof(uint16_t); }

int cu_mat_mul(const cu_mm *c, float *y, const uint16_t *x, const cu_mat *m, int T, tm_err *err)
{
    if (m->q.q && T <= c->gemv_max) {
        cu_gemv_q(c->st, &m->q, x, m->K, T, y, m->N);
        return TM_OK;
    }
    const uint16_t *w = m->bf;
    if (!w) {
        cu_dequant_q(c->st, &m->q, c->dq);
        w = c->dq;
    }
    const float one = 1.f, zero = 0.f;
    cublasStatus_t s = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m->N, T, m->K, &one, w, CUDA_R_16BF, m->K, x,
                                    CUDA_R_16BF, m->K, &zero, y, CUDA_R_32F, m->N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return tm_errf(err, TM_E_IO, "cuda engine: cublasGemmEx %d x %d x %d failed (status %d)", T, m->N, m->K, (int)s);
    return TM_OK;
}

int cu_mat_mul_act(const cu_mm *c, const cu_gemv_epi *ep, const uint16_t *x, const cu_mat *m, int T, float *gu, tm_err *err)
{
    if (m->N != (ep->gated ? 2 * ep->F : ep->F))
        return tm_errf(err, TM_E_INVALID, "cuda engine: an FFN weight of %d rows for %d units%s", m->N, ep->F,
                       ep->gated ? " (gated)" : "");
    if (m->q.q && T <= c->gemv_max) {
        cu_gemv_act(c->st, &m->q, x, m->K, T, ep);
        return TM_OK;
    }
    int rc = cu_mat_mul(c, gu, x, m, T, err);
    if (rc == TM_OK) cu_glu(c->st, ep->g, gu, ep->b, T, ep->F, ep->gated, ep->act);
    return rc;
}

int cu_mat_mul_res(const cu_mm *c, const cu_gemv_epi *ep, const uint16_t *x, const cu_mat *m, int T, float *a, tm_err *err)
{
    if (m->q.q && T <= c->gemv_max && T <= 8 * CU_RES_GROUPS) {
        cu_gemv_res(c->st, &m->q, x, m->K, T, ep);
        return TM_OK;
    }
    int rc = cu_mat_mul(c, a, x, m, T, err);
    if (rc == TM_OK)
        cu_residual(c->st, ep->x, a, ep->b, NULL, ep->eps, ep->scale, T, m->N, ep->nkind, ep->nw, ep->nb, ep->h16, ep->h32);
    return rc;
}

void cu_mat_free(cu_mat *m)
{
    cudaFree(m->bf);
    cudaFree((void *)m->q.q);
    cudaFree((void *)m->q.s);
    memset(m, 0, sizeof *m);
}
