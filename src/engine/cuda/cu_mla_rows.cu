/* engine/cuda/cu_mla_rows.cu: multi-head latent attention's row passes (cu_mla.h has the design): the latent
 * query's norm, the split of the q and kv_a products into the engine's q|k|v rows, the prefill
 * attention's queries in bf16 and its softmax over a block of score rows. A block of CU_ROW_NT
 * threads a row (cu_rows.cuh's reductions). */
#include <cuda_bf16.h>
#include <math.h>

#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_rows.cuh"
#include "engine/cuda/cuda-impl.h"

/* row r of x [R][n] += b (NULL: none), then y16[r] = bf16(rmsnorm(x[r]) by w) */
__global__ void k_mla_norm(int n, float *x, const float *b, const float *w, float eps, uint16_t *y16)
{
    pdl_enter();
    float *xr = x + (size_t)blockIdx.x * n;
    if (b) {
        for (int i = threadIdx.x; i < n; i += CU_ROW_NT) xr[i] += b[i];
        __syncthreads();
    }
    row_norm(0, n, xr, w, NULL, eps, NULL, y16 + (size_t)blockIdx.x * n);
}

extern "C" void cu_mla_norm(cu_stream s, int R, int n, float *x, const float *b, const float *w, float eps, uint16_t *y16)
{
    cu_go(k_mla_norm, (unsigned)R, CU_ROW_NT, 0, s, n, x, b, w, eps, y16);
}

/* row t = blockIdx.x: block y 0 the latent, ckv[t] += b; c = rmsnorm(ckv[t][:kvl]) by w; k' = [ckv[t][kvl:] | c],
 * v' = [c | 0]; blocks y >= 1 the queries, QCHUNK elements of qf[t] each: q'_h[:rope] = qf[t][h][:rope],
 * qn16[t][h] = bf16(qf[t][h][rope:]) (a decode step's one row over several blocks: the latency is the rows') */
#define QCHUNK (4 * CU_ROW_NT)
__global__ void k_mla_split(cu_mla_split_args a)
{
    pdl_enter();
    const int t = blockIdx.x, Dh = a.rope + a.kvl, qd = a.rope + a.nope, kvr = a.kvl + a.rope;
    float *row = a.qkv + (size_t)t * (a.H + 2) * Dh, *k = row + (size_t)a.H * Dh, *v = k + Dh;
    if (blockIdx.y > 0) {
        const float *qf = a.qf + (size_t)t * a.H * qd;
        const int i0 = (blockIdx.y - 1) * QCHUNK, i1 = min(i0 + QCHUNK, a.H * qd);
        for (int i = i0 + threadIdx.x; i < i1; i += CU_ROW_NT) {
            const int h = i / qd, d = i % qd;
            if (d < a.rope) row[(size_t)h * Dh + d] = qf[i];
            else a.qn16[((size_t)t * a.H + h) * a.nope + d - a.rope] = cu_tobf(qf[i]);
        }
        return;
    }
    float *ck = a.ckv + (size_t)t * kvr;
    if (a.b) {
        for (int i = threadIdx.x; i < kvr; i += CU_ROW_NT) ck[i] += a.b[i];
        __syncthreads();
    }
    for (int i = threadIdx.x; i < a.rope; i += CU_ROW_NT) k[i] = ck[a.kvl + i], v[a.kvl + i] = 0.f;
    row_norm(0, a.kvl, ck, a.w, NULL, a.eps, k + a.rope, NULL);
    __syncthreads();
    for (int i = threadIdx.x; i < a.kvl; i += CU_ROW_NT) v[i] = k[a.rope + i];
}

extern "C" void cu_mla_split(cu_stream s, int T, const cu_mla_split_args *a)
{
    const int nq = (a->H * (a->rope + a->nope) + QCHUNK - 1) / QCHUNK;
    cu_go(k_mla_split, dim3((unsigned)T, (unsigned)(1 + nq)), CU_ROW_NT, 0, s, *a);
}

/* q16[t][h][d] = bf16(qkv[t][h Dh + d]) for t < T, the H query heads (qkv rows of nqkv) */
__global__ void k_mla_q16(const float *qkv, int nqkv, int HD, uint16_t *q16)
{
    pdl_enter();
    const float *r = qkv + (size_t)blockIdx.x * nqkv;
    uint16_t *o = q16 + (size_t)blockIdx.x * HD;
    for (int i = threadIdx.x; i < HD; i += CU_ROW_NT) o[i] = cu_tobf(r[i]);
}

extern "C" void cu_mla_q16(cu_stream s, const float *qkv, int nqkv, int T, int H, int Dh, uint16_t *q16)
{
    cu_go(k_mla_q16, (unsigned)T, CU_ROW_NT, 0, s, qkv, nqkv, H * Dh, q16);
}

/* Score row r (query position pos0 + t0 + r / H) of S [R][ld] f32: its keys j <= the position (and j < nk),
 * p_j = exp(scale s_j - max) / sum, into P [R][ld] bf16, zero past the position */
__global__ void k_mla_softmax(const float *S, int ld, int H, int qpos0, int nk, float scale, uint16_t *P)
{
    pdl_enter();
    const int r = blockIdx.x, i = qpos0 + r / H, n = i + 1 < nk ? i + 1 : nk;
    const float *s = S + (size_t)r * ld;
    uint16_t *p = P + (size_t)r * ld;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += CU_ROW_NT) m = fmaxf(m, s[j] * scale);
    __shared__ float part[CU_ROW_NT / 32];
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    m = part[0];
    for (int w = 1; w < CU_ROW_NT / 32; w++) m = fmaxf(m, part[w]);
    float l = 0.f;
    for (int j = threadIdx.x; j < n; j += CU_ROW_NT) l += expf(s[j] * scale - m);
    l = block_sum(l);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (int j = threadIdx.x; j < nk; j += CU_ROW_NT) p[j] = cu_tobf(j < n ? expf(s[j] * scale - m) * inv : 0.f);
}

extern "C" void cu_mla_softmax(cu_stream s, const float *S, int ld, int R, int H, int qpos0, int nk, float scale, uint16_t *P)
{
    cu_go(k_mla_softmax, (unsigned)R, CU_ROW_NT, 0, s, S, ld, H, qpos0, nk, scale, P);
}
