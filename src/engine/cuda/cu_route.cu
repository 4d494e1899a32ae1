/* engine/cuda/cu_route.cu: the mixture-of-experts layer's passes on the device (cu_moe.h has the design):
 * the routing of each row (a warp a row: the router's scores, then the pick by moe_route.h's rule), the choices
 * sorted by expert (their slots and the experts' row tiles for cu_moe_mm), the gather of the rows grouped
 * by expert, and the combine of the experts' outputs. */
#include <limits.h>
#include <math.h>

#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_rows.cuh"
#include "engine/cuda/cuda-impl.h"
#include "model/model.h"
#include "model/moe_route.h"

#define TM_HD __device__
#include "model/moe_route.inc"

#define NT 256

/* logit[t][e] = h[t] · router[e] for e < E1, a warp a (t, e), the lanes over D in a fixed order and a fixed tree: a
 * row's logits do not depend on the other rows of the call (cuBLAS's kernel choice does, by T: so a decode step's
 * choices would depend on its batch). A lane asks for its first RU float4s of the router's row (all of it to D =
 * 2,048) before the PDL wait, so they are in flight together and overlap the previous kernel's tail (the loop's
 * loads one after another left the launch bound by the memory's latency); the sums in the same order as the loop's */
#define RW 8  /* warps a block */
#define RU 16 /* float4s a lane loads at once */
__global__ void __launch_bounds__(RW * 32) k_moe_router(float *logit, int ld, const float *h, const float *router, int E1,
                                                         int D)
{
    const int lane = threadIdx.x & 31, e = blockIdx.x * RW + (threadIdx.x >> 5), t = blockIdx.y;
    if (e >= E1) {
        pdl_enter();
        return;
    }
    const float *x = h + (size_t)t * D, *r = router + (size_t)e * D;
    const bool v4 = (D & 3) == 0;
    float4 b[RU];
    if (v4)
#pragma unroll
        for (int u = 0; u < RU; u++)
            if (4 * lane + 128 * u < D) b[u] = __ldg((const float4 *)(r + 4 * lane + 128 * u));
    pdl_enter();
    float acc = 0.f;
    if (v4) {
#pragma unroll
        for (int u = 0; u < RU; u++)
            if (4 * lane + 128 * u < D) {
                const float4 a = *(const float4 *)(x + 4 * lane + 128 * u);
                acc = fmaf(a.x, b[u].x, fmaf(a.y, b[u].y, fmaf(a.z, b[u].z, fmaf(a.w, b[u].w, acc))));
            }
        for (int d = 4 * lane + 128 * RU; d < D; d += 128) {
            const float4 a = *(const float4 *)(x + d), c = __ldg((const float4 *)(r + d));
            acc = fmaf(a.x, c.x, fmaf(a.y, c.y, fmaf(a.z, c.z, fmaf(a.w, c.w, acc))));
        }
    } else {
        for (int d = lane; d < D; d += 32) acc = fmaf(x[d], r[d], acc);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) logit[(size_t)t * ld + e] = acc;
}

extern "C" void cu_moe_router(cu_stream s, float *logit, int ld, const float *h, const float *router, int T, int E1, int D)
{
    cu_go(k_moe_router, dim3((unsigned)((E1 + RW - 1) / RW), (unsigned)T), RW * 32, 0, s, logit, ld, h, router, E1, D);
}

/* Row t's routing, one warp a row (PW rows a block), its scores in shared memory:
 *   p[e] = softmax (or sigmoid) of logit[t][e] + rb[e], c[e] = p[e] + corr[e] (the choice), sg[t] = the shared
 *   expert's gate sigmoid(logit[t][E]) where sg is not NULL;
 *   groups (DeepSeek's n_group / topk_group): lane 0 marks the allowed experts with moe_route.inc's
 *   moe_allowed_groups, the host's own code;
 *   K rounds of a warp argmax over the choices not yet taken (and allowed): the larger, the lower index on a tie,
 *   which is moe_top_next's rule (the host's pick; test_cuda_moe checks the two agree on rows with ties);
 *   w[k] = p[sel[k]] (over their sum, in double, where norm_topk) x scale, as moe_pick. */
#define PW 4                        /* rows (warps) a block */
__global__ void __launch_bounds__(PW * 32) k_moe_pick(const float *logit, int ld, int T, const float *rb, tm_moe_route r,
                                                       int sigmoid, int *sel, float *w, float *sg)
{
    pdl_enter();
    __shared__ float sp[PW][CU_MOE_MAX_E], sc[PW][CU_MOE_MAX_E];
    __shared__ unsigned char ok[PW][CU_MOE_MAX_E];
    __shared__ double sum[PW];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, t = blockIdx.x * PW + wp, E = r.E;
    if (t >= T) return; /* a whole warp: no block-wide barrier below */
    const float *l = logit + (size_t)t * ld;
    float *p = sp[wp], *c = sc[wp];
    float mx = -INFINITY, tot = 0.f;
    for (int e = lane; e < E; e += 32) {
        p[e] = l[e] + (rb ? rb[e] : 0.f);
        mx = fmaxf(mx, p[e]);
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    for (int e = lane; e < E; e += 32) {
        p[e] = sigmoid ? 1.f / (1.f + expf(-p[e])) : expf(p[e] - mx);
        tot += p[e];
    }
    for (int o = 16; o > 0; o >>= 1) tot += __shfl_xor_sync(0xffffffffu, tot, o);
    for (int e = lane; e < E; e += 32) {
        if (!sigmoid) p[e] /= tot;
        c[e] = p[e] + (r.corr ? r.corr[e] : 0.f);
        ok[wp][e] = 1;
    }
    __syncwarp();
    const int grouped = r.n_group > 1 && r.topk_group < r.n_group;
    if (grouped && lane == 0) moe_allowed_groups(&r, c, ok[wp]);
    if (lane == 0) sum[wp] = 0;
    __syncwarp();
    for (int k = 0; k < r.K; k++) {
        float bv = -INFINITY;
        int bi = INT_MAX;
        for (int e = lane; e < E; e += 32) /* this lane's best: ascending e, so the lower index wins a tie */
            if (ok[wp][e] && (bi == INT_MAX || c[e] > bv)) bv = c[e], bi = e;
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi != INT_MAX && (bi == INT_MAX || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
        }
        if (lane == 0) {
            sel[(size_t)t * r.K + k] = bi;
            ok[wp][bi] = 0; /* taken */
            sum[wp] += p[bi];
        }
        __syncwarp();
    }
    if (lane < r.K) {
        const int e = sel[(size_t)t * r.K + lane];
        w[(size_t)t * r.K + lane] = (r.norm_topk ? (float)(p[e] / sum[wp]) : p[e]) * r.scale;
    }
    if (sg && lane == 0) sg[t] = 1.f / (1.f + expf(-l[E]));
}

extern "C" void cu_moe_pick(cu_stream s, const float *logit, int ld, int T, const float *rb, const tm_moe_route *r,
                            int sigmoid, int *sel, float *w, float *sg)
{
    cu_go(k_moe_pick, (unsigned)((T + PW - 1) / PW), PW * 32, 0, s, logit, ld, T, rb, *r, sigmoid, sel, w, sg);
}

/* The choices sorted by expert on the device (cu_moe_sort), one block of SORT_NT threads:
 *   cnt[e]                  the pairs that chose e (shared-memory atomics: a count does not depend on their order);
 *   base[e], tb[e]          exclusive sums of cnt and of its row tiles (ceil(cnt / tm)), by warp 0: each lane a
 *                           run of E / 32 experts, then a warp scan of the runs' totals;
 *   tiles                   each expert's row tiles, a thread an expert;
 *   slot[p], order[j]       warp 0 walks the pairs in order, 32 at a time: the lanes that chose the same expert
 *                           (__match_any_sync) take consecutive slots from base[e] by their lane order, so an
 *                           expert's pairs keep the pairs' order (tm_moe_group's, the host's counting sort). */
#define SORT_NT 1024
__global__ void __launch_bounds__(SORT_NT) k_moe_sort(const int *sel, int P, int K, int E, int tm, int *order, int *slot,
                                                       int *tiles)
{
    pdl_enter();
    __shared__ int cnt[CU_MOE_MAX_E], base[CU_MOE_MAX_E], tb[CU_MOE_MAX_E];
    const int tid = threadIdx.x, lane = tid & 31;
    for (int e = tid; e < E; e += SORT_NT) cnt[e] = 0;
    __syncthreads();
    for (int p = tid; p < P; p += SORT_NT) atomicAdd(&cnt[sel[p]], 1);
    __syncthreads();
    if (tid < 32) {
        const int per = (E + 31) / 32, lo = lane * per < E ? lane * per : E, hi = lo + per < E ? lo + per : E;
        int s = 0, st = 0;
        for (int e = lo; e < hi; e++) s += cnt[e], st += (cnt[e] + tm - 1) / tm;
        int is = s, ist = st; /* inclusive scans over the lanes */
        for (int o = 1; o < 32; o <<= 1) {
            const int a = __shfl_up_sync(0xffffffffu, is, o), b = __shfl_up_sync(0xffffffffu, ist, o);
            if (lane >= o) is += a, ist += b;
        }
        int b0 = is - s, t0 = ist - st;
        for (int e = lo; e < hi; e++) base[e] = b0, tb[e] = t0, b0 += cnt[e], t0 += (cnt[e] + tm - 1) / tm;
        if (lane == 31) tiles[0] = ist;
    }
    __syncthreads();
    for (int e = tid; e < E; e += SORT_NT)
        for (int i = 0; i * tm < cnt[e]; i++) {
            int *t = tiles + 1 + 3 * (tb[e] + i);
            t[0] = e, t[1] = base[e] + i * tm, t[2] = cnt[e] - i * tm < tm ? cnt[e] - i * tm : tm;
        }
    __syncthreads(); /* the tiles have read base; warp 0 now moves it */
    if (tid >= 32) return;
    for (int p0 = 0; p0 < P; p0 += 32) {
        const int p = p0 + lane, e = p < P ? sel[p] : -1;
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        const int lead = __ffs(peers) - 1, rank = __popc(peers & ((1u << lane) - 1));
        int b = lane == lead && e >= 0 ? base[e] : 0;
        b = __shfl_sync(0xffffffffu, b, lead);
        if (e >= 0) {
            slot[p] = b + rank, order[b + rank] = p / K;
            if (lane == lead) base[e] = b + __popc(peers);
        }
        __syncwarp();
    }
}

extern "C" void cu_moe_sort(cu_stream s, const int *sel, int P, int K, int E, int *order, int *slot, int *tiles)
{
    cu_go(k_moe_sort, 1u, SORT_NT, 0, s, sel, P, K, E, (int)CU_MOE_TM, order, slot, tiles);
}

/* xe[j][D] = h[order[j]][D] (bf16), a block a row */
__global__ void k_moe_gather(uint16_t *xe, const uint16_t *h, const int *order, int D)
{
    pdl_enter();
    const int j = blockIdx.x;
    const uint16_t *src = h + (size_t)order[j] * D;
    for (int d = threadIdx.x; d < D; d += NT) xe[(size_t)j * D + d] = src[d];
}

extern "C" void cu_moe_gather(cu_stream s, uint16_t *xe, const uint16_t *h, const int *order, int n, int D)
{
    if (n > 0) cu_go(k_moe_gather, (unsigned)n, NT, 0, s, xe, h, order, D);
}

/* f[t][d] = Σ over row t's K choices in expert order of w · (ye[slot] + db[expert]) (+ g · ys[t][d], g =
 * sg[t] or 1): the order the CPU engines and transformers add in. A block a row (grid y) and NT of its
 * columns (grid x): a decode step's few rows would otherwise leave all but a few SMs idle. (Session 57 also
 * measured this launch adding into the residual stream and running the next norm in each row's last block,
 * the residual pass's launch gone: tg128 0.99x on the H100 with the indexed GEMV's new shape, 1.03x with its
 * old one, within the noise; not kept.) */
__global__ void k_moe_combine(float *f, const float *ye, const int *slot, const int *sel, const float *w, int K,
                              const float *db, const float *ys, const float *sg, int D)
{
    pdl_enter();
    __shared__ int ks[CU_MOE_MAX_K];
    const int t = blockIdx.y;
    if (threadIdx.x == 0) { /* row t's choices by expert index (K is small) */
        for (int k = 0; k < K; k++) ks[k] = k;
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && sel[(size_t)t * K + ks[j]] < sel[(size_t)t * K + ks[j - 1]]; j--) {
                int x = ks[j];
                ks[j] = ks[j - 1], ks[j - 1] = x;
            }
    }
    __syncthreads();
    const float g = ys && sg ? sg[t] : 1.f;
    const int d = blockIdx.x * NT + threadIdx.x;
    if (d >= D) return;
    float acc = 0.f;
    for (int i = 0; i < K; i++) {
        const size_t c = (size_t)t * K + ks[i];
        const int s = slot ? slot[c] : (int)c;
        acc += w[c] * (ye[(size_t)s * D + d] + (db ? db[(size_t)sel[c] * D + d] : 0.f));
    }
    if (ys) acc += g * ys[(size_t)t * D + d];
    f[(size_t)t * D + d] = acc;
}

extern "C" void cu_moe_combine(cu_stream s, float *f, const float *ye, const int *slot, const int *sel, const float *w,
                               int T, int K, const float *db, const float *ys, const float *sg, int D)
{
    cu_go(k_moe_combine, dim3((unsigned)((D + NT - 1) / NT), (unsigned)T), NT, 0, s, f, ye, slot, sel, w, K, db, ys, sg, D);
}
