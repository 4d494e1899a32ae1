/* engine/cuda/cu_route.cu: the mixture-of-experts layer's passes on the device (cu_moe.h has the design):
 * the routing of each row (a thread a row: the router's scores, then moe_route.inc's pick, the same source
 * the host runs), the gather of the rows grouped by expert, and the combine of the experts' outputs. */
#include <math.h>

#include "engine/cuda/cu_launch.cuh"
#include "engine/cuda/cu_rows.cuh"
#include "engine/cuda/cuda-impl.h"
#include "model/model.h"
#include "model/moe_route.h"

#define TM_HD __device__
#include "model/moe_route.inc"

#define NT 256

/* row t: p = softmax (or sigmoid) of logit[t][0..E) + rb; sel[t][K], w[t][K] by moe_pick; sg[t] = the shared
 * expert's gate sigmoid(logit[t][E]) where sg is not NULL. prob, choice [T][E] f32, ok [T][E]: scratch */
__global__ void k_moe_pick(const float *logit, int ld, int T, const float *rb, tm_moe_route r, int sigmoid, float *prob,
                           float *choice, unsigned char *ok, int *sel, float *w, float *sg)
{
    pdl_enter();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const int E = r.E;
    const float *l = logit + (size_t)t * ld;
    float *p = prob + (size_t)t * E;
    if (sigmoid) {
        for (int e = 0; e < E; e++) p[e] = 1.f / (1.f + expf(-(l[e] + (rb ? rb[e] : 0.f))));
    } else {
        float mx = -INFINITY, sum = 0.f;
        for (int e = 0; e < E; e++) p[e] = l[e] + (rb ? rb[e] : 0.f), mx = fmaxf(mx, p[e]);
        for (int e = 0; e < E; e++) p[e] = expf(p[e] - mx), sum += p[e];
        for (int e = 0; e < E; e++) p[e] /= sum;
    }
    moe_pick(&r, p, sel + (size_t)t * r.K, w + (size_t)t * r.K, choice + (size_t)t * E, ok + (size_t)t * E);
    if (sg) sg[t] = 1.f / (1.f + expf(-l[E]));
}

extern "C" void cu_moe_pick(cu_stream s, const float *logit, int ld, int T, const float *rb, const tm_moe_route *r,
                            int sigmoid, float *prob, float *choice, unsigned char *ok, int *sel, float *w, float *sg)
{
    cu_go(k_moe_pick, (unsigned)((T + 63) / 64), 64, 0, s, logit, ld, T, rb, *r, sigmoid, prob, choice, ok, sel, w, sg);
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
 * sg[t] or 1): the order the CPU engines and transformers add in. A block a row. */
__global__ void k_moe_combine(float *f, const float *ye, const int *slot, const int *sel, const float *w, int K,
                              const float *db, const float *ys, const float *sg, int D)
{
    pdl_enter();
    __shared__ int ks[CU_MOE_MAX_K];
    const int t = blockIdx.x;
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
    for (int d = threadIdx.x; d < D; d += NT) {
        float acc = 0.f;
        for (int i = 0; i < K; i++) {
            const size_t c = (size_t)t * K + ks[i];
            const int s = slot ? slot[c] : (int)c;
            acc += w[c] * (ye[(size_t)s * D + d] + (db ? db[(size_t)sel[c] * D + d] : 0.f));
        }
        if (ys) acc += g * ys[(size_t)t * D + d];
        f[(size_t)t * D + d] = acc;
    }
}

extern "C" void cu_moe_combine(cu_stream s, float *f, const float *ye, const int *slot, const int *sel, const float *w,
                               int T, int K, const float *db, const float *ys, const float *sg, int D)
{
    cu_go(k_moe_combine, (unsigned)T, NT, 0, s, f, ye, slot, sel, w, K, db, ys, sg, D);
}
