/* engine/cuda/cu_moe.c: a mixture-of-experts layer on the CUDA engine (cu_moe.h has the design). */
#include "engine/cuda/cu_moe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "engine/ref/ref-impl.h"
#include "model/moe_route.h"

/* ---- weights ----------------------------------------------------------------------------------- */

/* *d = a device copy of h [n] f32 (h NULL: *d = NULL); h is freed either way */
static int up_vec(float **d, cudaStream_t st, float *h, size_t n, tm_err *err)
{
    int rc = cu_up_f32(d, st, h, n, err);
    free(h);
    return rc;
}

/* n vectors t[i] of len values each, stacked [n][stride] at offset off of a fresh host array (*out; NULL: none) */
static int stack_vecs(float **out, const tm_tensor *t, int n, int len, size_t stride, size_t off, tm_err *err)
{
    if (!*out && !(*out = calloc((size_t)n * stride, sizeof(float))))
        return tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
    for (int i = 0; i < n; i++) {
        int rc = tm_ref_rows_f32(&t[i], 0, len, len, 1, *out + (size_t)i * stride + off, err);
        if (rc) return rc;
    }
    return TM_OK;
}

int cu_moe_up(cu_moe *mo, cudaStream_t st, const tm_model *m, int l, int packed, float *tmp, size_t tmp_n, tm_err *err)
{
    memset(mo, 0, sizeof *mo);
    const tm_layer_weights *w = &m->w[l];
    int E = m->n_experts, D = m->D, Fe = m->F_expert, rc = TM_OK; /* top_k, E within the kernels' bounds: cu_check_model */
    mo->D = D, mo->E = E, mo->Fe = Fe, mo->K = m->top_k, mo->Fs = m->F_shared, mo->act = m->act;
    mo->sigmoid = m->router_sigmoid, mo->n_group = m->n_group, mo->topk_group = m->topk_group;
    mo->group_top2 = m->group_top2, mo->norm_topk = m->norm_topk_prob, mo->scale = m->routed_scale;
    mo->s_gate = m->F_shared > 0 && m->shared_gate;
    size_t rrows = (size_t)E + (size_t)mo->s_gate;
    float *r = malloc(rrows * (size_t)D * sizeof(float));
    if (!r) return tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
    rc = tm_ref_rows_f32(&w->router, 0, E, E, D, r, err);
    if (rc == TM_OK && mo->s_gate) rc = tm_ref_rows_f32(&w->s_router, 0, 1, 1, D, r + (size_t)E * D, err);
    if (rc != TM_OK) {
        free(r);
        return rc;
    }
    if ((rc = up_vec(&mo->router, st, r, rrows * (size_t)D, err))) goto fail;
    float *gub = NULL, *db = NULL;
    if (m->expert_bias) {
        float *rb = NULL;
        if ((rc = stack_vecs(&rb, &w->router_b, 1, E, (size_t)E, 0, err)) || (rc = up_vec(&mo->rb, st, rb, (size_t)E, err)))
            goto fail;
        rc = stack_vecs(&gub, w->e_gate_b, E, Fe, 2 * (size_t)Fe, 0, err);
        if (rc == TM_OK) rc = stack_vecs(&gub, w->e_up_b, E, Fe, 2 * (size_t)Fe, (size_t)Fe, err);
        if (rc == TM_OK) rc = stack_vecs(&db, w->e_down_b, E, D, (size_t)D, 0, err);
        if (rc == TM_OK) rc = up_vec(&mo->gub, st, gub, (size_t)E * 2 * Fe, err), gub = NULL;
        if (rc == TM_OK) rc = up_vec(&mo->db, st, db, (size_t)E * D, err), db = NULL;
        free(gub);
        free(db);
        if (rc) goto fail;
    }
    if (m->router_has_corr) {
        float *c = NULL;
        if ((rc = stack_vecs(&c, &w->router_corr, 1, E, (size_t)E, 0, err)) || (rc = up_vec(&mo->corr, st, c, (size_t)E, err)))
            goto fail;
    }
    cu_part *p = malloc(sizeof *p * 2 * (size_t)E);
    if (!p) {
        rc = tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
        goto fail;
    }
    for (int e = 0; e < E; e++) p[2 * e] = (cu_part){&w->e_gate[e], 0, Fe}, p[2 * e + 1] = (cu_part){&w->e_up[e], 0, Fe};
    rc = cu_mat_up_stage(&mo->gu, st, p, 2 * E, D, packed, tmp, tmp_n, err);
    for (int e = 0; e < E; e++) p[e] = (cu_part){&w->e_down[e], 0, D};
    if (rc == TM_OK) rc = cu_mat_up_stage(&mo->dn, st, p, E, Fe, packed, tmp, tmp_n, err);
    free(p);
    if (rc == TM_OK && mo->Fs) {
        cu_part sp[2] = {{&w->s_gate, 0, mo->Fs}, {&w->s_up, 0, mo->Fs}}, sd = {&w->s_down, 0, D};
        rc = cu_mat_up_stage(&mo->sgu, st, sp, 2, D, packed, tmp, tmp_n, err);
        if (rc == TM_OK) rc = cu_mat_up_stage(&mo->sdn, st, &sd, 1, mo->Fs, packed, tmp, tmp_n, err);
    }
    if (rc == TM_OK) {
        cu_stack g = {&mo->gu.q, mo->gu.bf, 2 * Fe, D}, d = {&mo->dn.q, mo->dn.bf, D, Fe};
        mo->mm = cu_moe_mm_ok(&g) && cu_moe_mm_ok(&d);
        return TM_OK;
    }
fail:
    cu_moe_free(mo);
    return rc;
}

void cu_moe_free(cu_moe *mo)
{
    void *p[] = {mo->router, mo->rb, mo->corr, mo->gub, mo->db};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
    cu_mat *ms[] = {&mo->gu, &mo->dn, &mo->sgu, &mo->sdn};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) cu_mat_free(ms[i]);
    memset(mo, 0, sizeof *mo);
}

size_t cu_moe_dq_bytes(const cu_moe *mo)
{
    cu_mat g = cu_mat_view(&mo->gu, 0, 2 * mo->Fe), d = cu_mat_view(&mo->dn, 0, mo->D);
    size_t b[] = {cu_mat_dq_bytes(&g), cu_mat_dq_bytes(&d), cu_mat_dq_bytes(&mo->sgu), cu_mat_dq_bytes(&mo->sdn)}, mx = 0;
    for (size_t i = 0; i < 4; i++) mx = b[i] > mx ? b[i] : mx;
    return mx;
}

/* the indexed path's rows: packed experts only */
static int ix_rows(const cu_moe *mo) { return mo->gu.q.q && mo->dn.q.q ? CU_MOE_IX_ROWS : 0; }

int cu_moe_capture_rows(const cu_moe *mo, int paths)
{
    int ix = paths & CU_MOE_PATH_IX ? ix_rows(mo) : 0, mm = (paths & CU_MOE_PATH_MM) && mo->mm;
    if (ix_rows(mo) && !ix) return 0; /* a decode step's few rows over packed experts grouped on the host */
    return mm ? INT32_MAX : ix;
}

/* ---- working memory ---------------------------------------------------------------------------- */

void cu_moe_ws_free(cu_moe_ws *ws)
{
    if (ws->times && ws->calls)
        fprintf(stderr, "cuda moe times: %ld calls, %ld rows: route %.2f ms, group %.2f ms, experts %.2f ms, shared "
                "expert %.2f ms, combine %.2f ms\n", ws->calls, ws->rows_seen, ws->t[0] * 1e3, ws->t[1] * 1e3,
                ws->t[2] * 1e3, ws->t[3] * 1e3, ws->t[4] * 1e3);
    void *d[] = {ws->h32, ws->logit, ws->sel, ws->w, ws->sg, ws->ord, ws->tiles, ws->xe, ws->ge, ws->gu, ws->ye, ws->ys};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) cudaFree(d[i]);
    cudaFreeHost(ws->h_sel);
    cudaFreeHost(ws->h_ord);
    free(ws->h_start);
    memset(ws, 0, sizeof *ws);
}

int cu_moe_ws_init(cu_moe_ws *ws, const tm_model *m, int rows, tm_err *err)
{
    memset(ws, 0, sizeof *ws);
    size_t R = (size_t)rows, P = R * (size_t)m->top_k, E = (size_t)m->n_experts, D = (size_t)m->D;
    size_t F = (size_t)(m->F_shared > m->F_expert ? m->F_shared : m->F_expert);
    ws->rows = rows, ws->pairs = (int)P, ws->E1 = (int)E + (m->F_shared > 0 && m->shared_gate);
    ws->max_tiles = cu_moe_max_tiles((int)P, (int)E);
    struct { void **p; size_t bytes; } a[] = {
        {(void **)&ws->h32, R * D * 4}, {(void **)&ws->logit, R * (size_t)ws->E1 * 4}, {(void **)&ws->sel, P * 4},
        {(void **)&ws->w, P * 4},       {(void **)&ws->sg, R * 4},       {(void **)&ws->ord, 2 * P * 4},
        {(void **)&ws->tiles, (1 + 3 * (size_t)ws->max_tiles) * 4},
        {(void **)&ws->xe, P * D * 2},  {(void **)&ws->ge, P * F * 2},   {(void **)&ws->gu, P * 2 * F * 4},
        {(void **)&ws->ye, P * D * 4},  {(void **)&ws->ys, R * D * 4},
    };
    cudaError_t ce = cudaSuccess;
    for (size_t i = 0; i < sizeof a / sizeof a[0] && ce == cudaSuccess; i++) ce = cudaMalloc(a[i].p, a[i].bytes);
    if (ce == cudaSuccess) ce = cudaMallocHost((void **)&ws->h_sel, P * 4);
    if (ce == cudaSuccess) ce = cudaMallocHost((void **)&ws->h_ord, 2 * P * 4);
    if (ce == cudaSuccess && !(ws->h_start = malloc((E + 1) * sizeof(int)))) ce = cudaErrorMemoryAllocation;
    const char *tv = getenv("TANDEM_CUDA_MOE_TIMES");
    ws->times = tv && !strcmp(tv, "1");
    if (ce == cudaSuccess) return TM_OK;
    cu_moe_ws_free(ws);
    return cu_err(err, ce, "the mixture-of-experts scratch");
}

/* ---- one call ---------------------------------------------------------------------------------- */

/* TANDEM_CUDA_MOE_TIMES: the time since the last mark into phase i (the stream drained first) */
static void phase(cu_moe_ws *ws, cudaStream_t st, int i)
{
    if (!ws->times) return;
    cudaStreamSynchronize(st);
    double now = tm_now_s();
    if (i >= 0) ws->t[i] += now - ws->t_last;
    ws->t_last = now;
}

/* the experts' products, pair by pair on the device (design block: indexed) */
static void experts_indexed(const cu_moe *mo, cu_moe_ws *ws, cudaStream_t st, const uint16_t *h16, int T)
{
    int Fe = mo->Fe, D = mo->D, P = T * mo->K;
    cu_mat g0 = cu_mat_view(&mo->gu, 0, 2 * Fe), d0 = cu_mat_view(&mo->dn, 0, D), g1 = cu_mat_view(&mo->gu, 1, 2 * Fe),
           d1 = cu_mat_view(&mo->dn, 1, D);
    cu_gemv_ix gi = {.sel = ws->sel, .xdiv = mo->K, .qstride = (size_t)(g1.q.q - g0.q.q),
                     .sstride = (size_t)((const uint8_t *)g1.q.s - (const uint8_t *)g0.q.s), .bstride = 2 * (size_t)Fe};
    cu_gemv_epi ep = {.gated = 1, .act = mo->act, .F = Fe, .ldg = Fe, .b = mo->gub, .g = ws->ge};
    cu_gemv_ix_act(st, &g0.q, &gi, h16, D, P, &ep);
    cu_gemv_ix di = {.sel = ws->sel, .xdiv = 1, .qstride = (size_t)(d1.q.q - d0.q.q),
                     .sstride = (size_t)((const uint8_t *)d1.q.s - (const uint8_t *)d0.q.s)};
    cu_gemv_ix_q(st, &d0.q, &di, ws->ge, Fe, P, ws->ye, D);
}

/* the experts' products over their rows grouped on the device (design block: tiled); *slot := each choice's slot */
static void experts_tiled(const cu_moe *mo, cu_moe_ws *ws, cudaStream_t st, const uint16_t *h16, int T, const int **slot)
{
    int Fe = mo->Fe, D = mo->D, P = T * mo->K;
    cu_moe_sort(st, ws->sel, P, mo->K, mo->E, ws->ord, ws->ord + P, ws->tiles);
    cu_moe_gather(st, ws->xe, h16, ws->ord, P, D);
    *slot = ws->ord + P;
    phase(ws, st, 1);
    int mt = cu_moe_max_tiles(P, mo->E);
    cu_stack g = {&mo->gu.q, mo->gu.bf, 2 * Fe, D}, d = {&mo->dn.q, mo->dn.bf, D, Fe};
    cu_gemv_epi ep = {.gated = 1, .act = mo->act, .F = Fe, .ldg = Fe, .b = mo->gub, .g = ws->ge};
    cu_moe_mm(st, &g, ws->tiles, mt, ws->xe, NULL, 0, &ep);
    cu_moe_mm(st, &d, ws->tiles, mt, ws->ge, ws->ye, D, NULL);
}

/* the experts' products over their rows grouped on the host (design block: grouped); *slot := each choice's
 * slot (device) */
static int experts_grouped(const cu_moe *mo, cu_moe_ws *ws, const cu_mm *mm, const uint16_t *h16, int T,
                           const int **slot, tm_err *err)
{
    int Fe = mo->Fe, D = mo->D, K = mo->K, P = T * K, rc = TM_OK;
    CK(cudaMemcpyAsync(ws->h_sel, ws->sel, sizeof(int) * (size_t)P, cudaMemcpyDeviceToHost, mm->st), "expert choices");
    CK(cudaStreamSynchronize(mm->st), "expert choices");
    int *order = ws->h_ord, *sl = order + P;
    tm_moe_group(ws->h_sel, NULL, T, K, mo->E, ws->h_start, order, NULL, sl);
    CK(cudaMemcpyAsync(ws->ord, order, sizeof(int) * (size_t)P, cudaMemcpyHostToDevice, mm->st), "expert order");
    cu_moe_gather(mm->st, ws->xe, h16, ws->ord, P, D);
    CK(cudaMemcpyAsync(ws->ord + P, sl, sizeof(int) * (size_t)P, cudaMemcpyHostToDevice, mm->st), "expert order");
    *slot = ws->ord + P;
    phase(ws, mm->st, 1);
    for (int e = 0; e < mo->E && rc == TM_OK; e++) { /* one expert at a time, its rows' slots contiguous */
        int j0 = ws->h_start[e], n = ws->h_start[e + 1] - j0;
        if (!n) continue;
        cu_mat g = cu_mat_view(&mo->gu, e, 2 * Fe), d = cu_mat_view(&mo->dn, e, D);
        cu_gemv_epi ep = {.gated = 1, .act = mo->act, .F = Fe, .ldg = Fe, .b = mo->gub ? mo->gub + (size_t)e * 2 * Fe : NULL,
                          .g = ws->ge + (size_t)j0 * Fe};
        rc = cu_mat_mul_act(mm, &ep, ws->xe + (size_t)j0 * D, &g, n, ws->gu, err);
        if (rc == TM_OK) rc = cu_mat_mul(mm, ws->ye + (size_t)j0 * D, ws->ge + (size_t)j0 * Fe, &d, n, err);
    }
    return rc;
}

int cu_moe_forward(const cu_moe *mo, cu_moe_ws *ws, const cu_mm *mm, const uint16_t *h16, const float *h32, int T,
                   int paths, float *f, tm_err *err)
{
    if (T < 1 || T > ws->rows) return tm_errf(err, TM_E_INVALID, "cuda engine: a mixture-of-experts call of %d rows", T);
    phase(ws, mm->st, -1);
    ws->calls++, ws->rows_seen += T;
    int D = mo->D, E1 = mo->E + mo->s_gate, rc = TM_OK;
    const float one = 1.f, zero = 0.f;
    /* logit [T][E1] = h32 · routerᵀ: a decode step's rows by cu_moe_router (each row's sums in one order whatever the
       batch), a prefill chunk's by cuBLAS (column-major as cu_mat_mul's products) */
    if (T <= CU_MOE_ROUTER_ROWS)
        cu_moe_router(mm->st, ws->logit, E1, h32, mo->router, T, E1, D);
    else if (cublasSgemm(mm->blas, CUBLAS_OP_T, CUBLAS_OP_N, E1, T, D, &one, mo->router, D, h32, D, &zero, ws->logit,
                         E1) != CUBLAS_STATUS_SUCCESS)
        return tm_errf(err, TM_E_IO, "cuda engine: the router's product (%d x %d x %d) failed", T, E1, D);
    tm_moe_route r = {mo->E, mo->K, mo->n_group, mo->topk_group, mo->group_top2, mo->norm_topk, mo->scale, mo->corr};
    cu_moe_pick(mm->st, ws->logit, E1, T, mo->rb, &r, mo->sigmoid, ws->sel, ws->w, mo->s_gate ? ws->sg : NULL);
    phase(ws, mm->st, 0);
    const int *slot = NULL;
    /* packed experts over a decode step's few rows: the GEMV, indexed or (the indexed path off) grouped on the host */
    int gemv = T <= ix_rows(mo);
    if (gemv && (paths & CU_MOE_PATH_IX)) experts_indexed(mo, ws, mm->st, h16, T);
    else if (!gemv && (paths & CU_MOE_PATH_MM) && mo->mm) experts_tiled(mo, ws, mm->st, h16, T, &slot);
    else rc = experts_grouped(mo, ws, mm, h16, T, &slot, err);
    phase(ws, mm->st, 2); /* (the tiled and grouped paths mark their grouping as phase 1) */
    if (rc == TM_OK && mo->Fs) { /* the shared expert, every row */
        cu_gemv_epi ep = {.gated = 1, .act = mo->act, .F = mo->Fs, .ldg = mo->Fs, .g = ws->ge};
        rc = cu_mat_mul_act(mm, &ep, h16, &mo->sgu, T, ws->gu, err);
        if (rc == TM_OK) rc = cu_mat_mul(mm, ws->ys, ws->ge, &mo->sdn, T, err);
    }
    if (rc != TM_OK) return rc;
    phase(ws, mm->st, 3);
    cu_moe_combine(mm->st, f, ws->ye, slot, ws->sel, ws->w, T, mo->K, mo->db, mo->Fs ? ws->ys : NULL,
                   mo->s_gate ? ws->sg : NULL, D);
    phase(ws, mm->st, 4);
    return TM_OK;
}
