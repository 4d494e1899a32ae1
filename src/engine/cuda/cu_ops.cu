/* engine/cuda/cu_ops.cu: the CUDA engine's row-wise passes (embedding, norms, residual adds, the gated
 * activation, the logits' last steps and their greedy argmax). One block of 256 threads per row where a
 * row needs a reduction (cu_rows.cuh). Formulas: model.h's op sequence. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits.h>
#include <math.h>

#include "engine/cuda/cu_act.cuh"
#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_rows.cuh"
#include "engine/cuda/cuda-impl.h"

#define NT CU_ROW_NT

int cu_pdl; /* cu_launch.cuh */

extern "C" void cu_set_pdl(int on) { cu_pdl = on != 0; }

static __device__ __forceinline__ float bf(uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }

__global__ void k_embed(float *x, const uint16_t *embed, const int32_t *tok, int D, float scale, const float *pe,
                        int pos0, const int *pos, int off)
{
    pdl_enter();
    int t = blockIdx.x;
    const uint16_t *e = embed + (size_t)tok[t] * D;
    const float *p = pe ? pe + (size_t)((pos ? pos[t] : pos0 + t) + off) * D : NULL;
    for (int d = threadIdx.x; d < D; d += NT) x[(size_t)t * D + d] = bf(e[d]) * scale + (p ? p[d] : 0.f);
}

extern "C" void cu_embed(cu_stream s, float *x, const uint16_t *embed, const int32_t *tok, int T, int D, float scale,
                         const float *pos_embed, int pos0, const int *pos, int pos_off)
{
    cu_go(k_embed, T, NT, 0, s, x, embed, tok, D, scale, pos_embed, pos0, pos, pos_off);
}

__global__ void k_norm(int kind, int n, const float *x, int ldx, const float *w, const float *b, float eps, float *y32,
                       uint16_t *y16, int ldy)
{
    pdl_enter();
    size_t r = blockIdx.x;
    row_norm(kind, n, x + r * ldx, w, b, eps, y32 ? y32 + r * ldy : NULL, y16 ? y16 + r * ldy : NULL);
}

extern "C" void cu_norm(cu_stream s, int kind, int R, int n, const float *x, int ldx, const float *w, const float *b,
                        float eps, float *y32, uint16_t *y16, int ldy)
{
    cu_go(k_norm, R, NT, 0, s, kind, n, x, ldx, w, b, eps, y32, y16, ldy);
}

__global__ void k_to_bf16(uint16_t *y, const float *x, size_t n)
{
    pdl_enter();
    for (size_t i = blockIdx.x * (size_t)NT + threadIdx.x; i < n; i += (size_t)gridDim.x * NT) y[i] = cu_tobf(x[i]);
}

extern "C" void cu_to_bf16(cu_stream s, uint16_t *y16, const float *x, size_t n)
{
    size_t blocks = (n + NT - 1) / NT;
    cu_go(k_to_bf16, blocks < 4096 ? (unsigned)blocks : 4096u, NT, 0, s, y16, x, n);
}

__global__ void k_residual(float *x, const float *a, const float *bias, const float *pw, float eps, float scale, int D,
                           int nkind, const float *nw, const float *nb, uint16_t *y16, float *y32)
{
    pdl_enter();
    float *xr = x + (size_t)blockIdx.x * D;
    const float *ar = a + (size_t)blockIdx.x * D;
    float r = 1.f;
    if (pw) {
        float ss = 0;
        for (int i = threadIdx.x; i < D; i += NT) {
            float v = ar[i] + (bias ? bias[i] : 0.f);
            ss += v * v;
        }
        r = (float)(1.0 / sqrt((double)(block_sum(ss) / D + eps)));
    }
    for (int i = threadIdx.x; i < D; i += NT) {
        float v = ar[i] + (bias ? bias[i] : 0.f);
        if (pw) v = (v * r) * pw[i];
        xr[i] = __fmaf_rn(v, scale, xr[i]); /* as cu_gemv.cu's residual epilogue */
    }
    if (nw) /* each thread reads back its own */
        row_norm(nkind, D, xr, nw, nb, eps, y32 ? y32 + (size_t)blockIdx.x * D : NULL, y16 + (size_t)blockIdx.x * D);
}

extern "C" void cu_residual(cu_stream s, float *x, const float *a, const float *bias, const float *post_w, float eps,
                            float scale, int T, int D, int nkind, const float *nw, const float *nb, uint16_t *y16,
                            float *y32)
{
    cu_go(k_residual, T, NT, 0, s, x, a, bias, post_w, eps, scale, D, nkind, nw, nb, y16, y32);
}

/* the activations in float math on doubles, as the reference: the pass is memory-bound (T F elements
 * read twice, written once), so the H200's double rate costs nothing that shows */
__global__ void k_glu(uint16_t *g, const float *gu, const float *b, int F, int gated, int act)
{
    pdl_enter();
    int t = blockIdx.y, nr = gated ? 2 * F : F;
    const float *row = gu + (size_t)t * nr;
    for (int f = blockIdx.x * NT + threadIdx.x; f < F; f += gridDim.x * NT) {
        float v;
        if (gated) v = glu_f(act, row[f] + (b ? b[f] : 0.f), row[F + f] + (b ? b[F + f] : 0.f));
        else v = act_f(act, row[f] + (b ? b[f] : 0.f));
        g[(size_t)t * F + f] = cu_tobf(v);
    }
}

extern "C" void cu_glu(cu_stream s, uint16_t *g, const float *gu, const float *b, int T, int F, int gated, int act)
{
    int bx = (F + NT - 1) / NT;
    dim3 grid(bx < 64 ? bx : 64, T);
    cu_go(k_glu, grid, NT, 0, s, g, gu, b, F, gated, act);
}

__global__ void k_logits(float *l, const float *b, size_t n, int V, float div, float mul, float cap)
{
    pdl_enter();
    for (size_t v = (size_t)blockIdx.x * NT + threadIdx.x; v < n; v += (size_t)gridDim.x * NT) {
        float x = l[v] + (b ? b[v % V] : 0.f);
        if (div != 1.f) x /= div;
        if (mul != 1.f) x *= mul;
        if (cap != 0.f) x = (float)tanh((double)(x / cap)) * cap;
        l[v] = x;
    }
}

extern "C" void cu_logits_finish(cu_stream s, float *logits, const float *b, int R, int V, float div, float mul, float cap)
{
    if (!b && div == 1.f && mul == 1.f && cap == 0.f) return; /* nothing to do (most models): no launch */
    size_t n = (size_t)R * V, bx = (n + NT - 1) / NT;
    cu_go(k_logits, bx < 1024 ? (unsigned)bx : 1024u, NT, 0, s, logits, b, n, V, div, mul, cap);
}

/* ---- the greedy argmax (tm_argmax_f32's pick: the lowest index of the largest logit, NaN never, -1
 * where none is above -inf) ---- */

/* (v, i) for the pair that wins: the larger value, the lower index on a tie; "none" is (-inf, INT_MAX),
 * and no logit enters unless it is above -inf, so none never wins */
static __device__ __forceinline__ void amax_take(float &v, int &i, float v2, int i2)
{
    if (v2 > v || (v2 == v && i2 < i)) v = v2, i = i2;
}

/* the block's best pair; thread 0 gets it */
static __device__ void amax_block(float &v, int &i)
{
    __shared__ float sv[NT / 32];
    __shared__ int si[NT / 32];
    for (int o = 16; o > 0; o >>= 1) amax_take(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    if ((threadIdx.x & 31) == 0) sv[threadIdx.x >> 5] = v, si[threadIdx.x >> 5] = i;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < NT / 32; w++) amax_take(v, i, sv[w], si[w]);
}

/* grid (S, B): block (s, b) takes row b's segment s of per logits [V] to a pair in part; the row's last
 * block to finish (cnt[b], reset by it) takes the S pairs to out[b] */
__global__ void k_argmax(const float *l, int V, int per, float *pv, int *pi, unsigned *cnt, int32_t *out)
{
    pdl_enter();
    __shared__ int last;
    int b = blockIdx.y, S = gridDim.x, i0 = blockIdx.x * per, i1 = min(V, i0 + per);
    const float *row = l + (size_t)b * V;
    float v = -INFINITY;
    int i = INT_MAX;
    for (int k = i0 + threadIdx.x; k < i1; k += NT) { /* ascending in each thread: the strict > keeps the lowest */
        float x = row[k];
        if (x > v) v = x, i = k;
    }
    amax_block(v, i);
    if (threadIdx.x == 0) {
        pv[b * S + blockIdx.x] = v, pi[b * S + blockIdx.x] = i;
        __threadfence();
        last = atomicAdd(&cnt[b], 1u) == (unsigned)S - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    v = -INFINITY, i = INT_MAX;
    for (int k = threadIdx.x; k < S; k += NT) amax_take(v, i, __ldcg(&pv[b * S + k]), __ldcg(&pi[b * S + k]));
    amax_block(v, i);
    if (threadIdx.x == 0) out[b] = i == INT_MAX ? -1 : i, cnt[b] = 0;
}

extern "C" size_t cu_argmax_scratch(int B) { return (size_t)B * CU_ARGMAX_SEG * (sizeof(float) + sizeof(int)); }

extern "C" void cu_argmax(cu_stream s, const float *logits, int B, int V, void *scratch, unsigned *cnt, int32_t *out)
{
    int S = (V + 4095) / 4096;
    S = S > CU_ARGMAX_SEG ? CU_ARGMAX_SEG : S;
    int per = (V + S - 1) / S;
    float *pv = (float *)scratch;
    int *pi = (int *)(pv + (size_t)B * CU_ARGMAX_SEG);
    cu_go(k_argmax, dim3(S, B), NT, 0, s, logits, V, per, pv, pi, cnt, out);
}

/* each block: its multiprocessor's id, after a short spin so that the blocks spread over the SMs they may use */
__global__ void k_sm_ids(int *ids, long long spin)
{
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    if (threadIdx.x == 0) ids[blockIdx.x] = (int)smid;
}

extern "C" void cu_sm_ids(cu_stream s, int *ids, int n) { k_sm_ids<<<n, 32, 0, s>>>(ids, 200000); }
