/* engine/cuda/cu_mla.c: multi-head latent attention on the CUDA engine (cu_mla.h has the design). */
#include "engine/cuda/cu_mla.h"

#include <stdlib.h>
#include <string.h>

#define MLA_S_BYTES ((size_t)256 << 20) /* the prefill attention's scores and weights, at most (6 bytes a score) */

static int blas_failed(tm_err *err, const char *what, cublasStatus_t s)
{
    return tm_errf(err, TM_E_IO, "cuda engine: latent attention: %s failed (cuBLAS status %d)", what, (int)s);
}

/* ---- weights ----------------------------------------------------------------------------------- */

/* dst (device, bf16 [n]) from h [n] f32, allocated */
static int up_bf16(uint16_t **dst, cudaStream_t st, const float *h, size_t n, float *tmp, size_t tmp_n, tm_err *err)
{
    CK(cudaMalloc((void **)dst, n * sizeof(uint16_t)), "cudaMalloc (weights)");
    return cu_up_bf16_into(st, *dst, h, n, tmp, tmp_n, err);
}

int cu_mla_up(cu_mla *x, cudaStream_t st, const tm_model *m, int l, const ref_layer *o, int packed, float *tmp,
              size_t tmp_n, tm_err *err)
{
    memset(x, 0, sizeof *x);
    const tm_layer_weights *w = &m->w[l];
    int H = m->H, kvl = m->kv_lora, nope = m->qk_nope, v = m->v_dim, nv = nope + v;
    x->D = m->D, x->H = H, x->Dh = m->Dh, x->ql = m->q_lora, x->kvl = kvl, x->nope = nope, x->rope = m->qk_rope;
    x->v = v, x->eps = m->mla_eps;
    int64_t qd = (int64_t)x->rope + nope, kvr = (int64_t)kvl + x->rope;
    cu_part qa = {&w->q_a, 0, x->ql}, q = {&w->wq, 0, H * qd}, kva = {&w->kv_a, 0, kvr};
    int rc = TM_OK;
    if (x->ql) rc = cu_mat_up_stage(&x->q_a, st, &qa, 1, m->D, packed, tmp, tmp_n, err);
    if (rc == TM_OK) rc = cu_mat_up_stage(&x->q, st, &q, 1, x->ql ? x->ql : m->D, packed, tmp, tmp_n, err);
    if (rc == TM_OK) rc = cu_mat_up_stage(&x->kv_a, st, &kva, 1, m->D, packed, tmp, tmp_n, err);
    if (rc == TM_OK) rc = up_bf16(&x->uk, st, o->uk_t, (size_t)H * kvl * nope, tmp, tmp_n, err);
    if (rc == TM_OK) { /* UV_h: head h's last v rows of kv_b [H][nope + v][kvl] */
        float *uv = malloc(sizeof(float) * (size_t)H * v * kvl);
        if (!uv) return tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
        for (int h = 0; h < H; h++)
            memcpy(uv + (size_t)h * v * kvl, o->kv_b + ((size_t)h * nv + nope) * kvl, sizeof(float) * (size_t)v * kvl);
        rc = up_bf16(&x->uv, st, uv, (size_t)H * v * kvl, tmp, tmp_n, err);
        free(uv);
    }
    if (rc == TM_OK) rc = cu_up_f32(&x->q_a_b, st, o->q_a_b, (size_t)x->ql, err);
    if (rc == TM_OK) rc = cu_up_f32(&x->q_a_norm, st, o->q_a_norm, (size_t)x->ql, err);
    if (rc == TM_OK) rc = cu_up_f32(&x->kv_a_b, st, o->kv_a_b, (size_t)kvr, err);
    if (rc == TM_OK) rc = cu_up_f32(&x->kv_a_norm, st, o->kv_a_norm, (size_t)kvl, err);
    if (rc == TM_OK && (!x->kv_a_norm || (x->ql && !x->q_a_norm)))
        rc = tm_errf(err, TM_E_INVALID, "cuda engine: layer %d: a latent attention norm is not bound", l);
    return rc;
}

void cu_mla_free(cu_mla *x)
{
    if (!x) return;
    cu_mat_free(&x->q_a);
    cu_mat_free(&x->q);
    cu_mat_free(&x->kv_a);
    void *p[] = {x->uk, x->uv, x->q_a_b, x->kv_a_b, x->q_a_norm, x->kv_a_norm};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
    memset(x, 0, sizeof *x);
}

size_t cu_mla_dq_bytes(const cu_mla *x)
{
    size_t a = cu_mat_dq_bytes(&x->q_a), b = cu_mat_dq_bytes(&x->q), c = cu_mat_dq_bytes(&x->kv_a);
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

/* ---- working memory ---------------------------------------------------------------------------- */

void cu_mla_ws_free(cu_mla_ws *ws)
{
    void *p[] = {ws->qa, ws->qf, ws->ckv, ws->qa16, ws->qn16, ws->o16, ws->q16, ws->s, ws->p};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
    memset(ws, 0, sizeof *ws);
}

int cu_mla_ws_init(cu_mla_ws *ws, const tm_model *m, int rows, int cap, tm_err *err)
{
    memset(ws, 0, sizeof *ws);
    size_t R = (size_t)rows, H = (size_t)m->H, ql = (size_t)m->q_lora, qd = (size_t)m->qk_rope + m->qk_nope;
    /* the scores of every row of a chunk over the whole context, or MLA_S_BYTES' worth (6 bytes a score) */
    size_t all = R * H * (size_t)cap;
    ws->s_cap = all < MLA_S_BYTES / 6 ? all : MLA_S_BYTES / 6;
    ws->rows = rows;
    struct { void **p; size_t bytes; } a[] = {
        {(void **)&ws->qa, R * (ql ? ql : 1) * 4}, {(void **)&ws->qa16, R * (ql ? ql : 1) * 2},
        {(void **)&ws->qf, R * H * qd * 4}, {(void **)&ws->ckv, R * ((size_t)m->kv_lora + m->qk_rope) * 4},
        {(void **)&ws->qn16, R * H * (size_t)m->qk_nope * 2}, {(void **)&ws->o16, R * H * (size_t)m->v_dim * 2},
        {(void **)&ws->q16, R * H * (size_t)m->Dh * 2}, {(void **)&ws->s, ws->s_cap * 4}, {(void **)&ws->p, ws->s_cap * 2},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        cudaError_t ce = cudaMalloc(a[i].p, a[i].bytes);
        if (ce != cudaSuccess) {
            cu_mla_ws_free(ws);
            return cu_err(err, ce, "cudaMalloc (latent attention scratch)");
        }
    }
    return TM_OK;
}

/* ---- one call ------------------------------------------------------------------------------------ */

int cu_mla_qkv(const cu_mla *x, cu_mla_ws *ws, cu_mla_mul mul, void *eng, cublasHandle_t blas, cudaStream_t st,
               const uint16_t *h16, int T, float *qkv, tm_err *err)
{
    int H = x->H, Dh = x->Dh, rc;
    const uint16_t *qin = h16;
    if (x->ql) { /* qa16 = bf16(rmsnorm(h · q_aᵀ + b)) [T][ql] */
        if ((rc = mul(eng, ws->qa, h16, &x->q_a, T, err))) return rc;
        cu_mla_norm(st, T, x->ql, ws->qa, x->q_a_b, x->q_a_norm, x->eps, ws->qa16);
        qin = ws->qa16;
    }
    if ((rc = mul(eng, ws->qf, qin, &x->q, T, err)) || (rc = mul(eng, ws->ckv, h16, &x->kv_a, T, err))) return rc;
    cu_mla_split_args sa = {.qf = ws->qf, .ckv = ws->ckv, .b = x->kv_a_b, .w = x->kv_a_norm, .eps = x->eps, .H = H,
                            .rope = x->rope, .nope = x->nope, .kvl = x->kvl, .qkv = qkv, .qn16 = ws->qn16};
    cu_mla_split(st, T, &sa);
    /* q'_h[rope:] = q_nope_h · UK_h: column-major C (kvl x T, ld (H + 2) Dh, head h at h Dh) = UK_hᵀ (A [nope][kvl]
       stored, transposed) · q_nope_hᵀ (B [nope][T], ld H nope, head h at h nope) */
    const float one = 1.f, zero = 0.f;
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        blas, CUBLAS_OP_T, CUBLAS_OP_N, x->kvl, T, x->nope, &one, x->uk, CUDA_R_16BF, x->nope, (long long)x->kvl * x->nope,
        ws->qn16, CUDA_R_16BF, H * x->nope, x->nope, &zero, qkv + x->rope, CUDA_R_32F, (H + 2) * Dh, Dh, H,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? TM_OK : blas_failed(err, "the queries' absorption (q_nope · UK)", s);
}

int cu_mla_attention(const cu_mla *x, cu_mla_ws *ws, cublasHandle_t blas, cudaStream_t st, const float *qkv, int T,
                     int n_valid, int pos0, const uint16_t *kc, const uint16_t *vc, float scale, uint16_t *out,
                     tm_err *err)
{
    int H = x->H, Dh = x->Dh;
    if (n_valid < T) CK(cudaMemsetAsync(out + (size_t)n_valid * H * Dh, 0, sizeof(uint16_t) * (size_t)(T - n_valid) * H * Dh, st),
                        "cudaMemsetAsync");
    if (n_valid < 1) return TM_OK;
    cu_mla_q16(st, qkv, (H + 2) * Dh, n_valid, H, Dh, ws->q16);
    /* query rows a block: their scores over the chunk's last key fit the scratch */
    size_t nk_max = (size_t)pos0 + n_valid, per = (size_t)H * nk_max;
    int tb = (int)(ws->s_cap / per);
    if (tb < 1) return tm_errf(err, TM_E_LIMIT, "cuda engine: latent attention: %zu keys past its scratch", nk_max);
    const float one = 1.f, zero = 0.f;
    for (int t0 = 0; t0 < n_valid; t0 += tb) {
        int t1 = t0 + tb < n_valid ? t0 + tb : n_valid, R = (t1 - t0) * H, nk = pos0 + t1;
        const uint16_t *q = ws->q16 + (size_t)t0 * H * Dh;
        /* S [R][nk] row-major = column-major C (nk x R, ld nk) = Kᵀ (kc [nk][Dh] stored, transposed) · Q (Dh x R) */
        cublasStatus_t s = cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, nk, R, Dh, &one, kc, CUDA_R_16BF, Dh, q, CUDA_R_16BF,
                                        Dh, &zero, ws->s, CUDA_R_32F, nk, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) return blas_failed(err, "the scores' product", s);
        cu_mla_softmax(st, ws->s, nk, R, H, pos0 + t0, nk, scale, ws->p);
        /* o'[R][:kvl] (row stride Dh) = column-major C (kvl x R, ld Dh) = V (vc's first kvl of each row, ld Dh) · P
           (nk x R, ld nk) */
        s = cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, x->kvl, R, nk, &one, vc, CUDA_R_16BF, Dh, ws->p, CUDA_R_16BF, nk,
                         &zero, out + (size_t)t0 * H * Dh, CUDA_R_16BF, Dh, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) return blas_failed(err, "the values' product", s);
    }
    return TM_OK;
}

int cu_mla_out(const cu_mla *x, cu_mla_ws *ws, cublasHandle_t blas, const uint16_t *att16, int T, tm_err *err)
{
    /* o_h = o'_h[:kvl] · UV_hᵀ: column-major C (v x T, ld H v, head h at h v) = UV_h (A [kvl][v] stored, transposed)
       · o'_hᵀ (B [kvl][T], ld H Dh, head h at h Dh) */
    const float one = 1.f, zero = 0.f;
    int H = x->H;
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        blas, CUBLAS_OP_T, CUBLAS_OP_N, x->v, T, x->kvl, &one, x->uv, CUDA_R_16BF, x->kvl, (long long)x->v * x->kvl, att16,
        CUDA_R_16BF, H * x->Dh, x->Dh, &zero, ws->o16, CUDA_R_16BF, H * x->v, x->v, H, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? TM_OK : blas_failed(err, "the heads' output (o' · UV)", s);
}
