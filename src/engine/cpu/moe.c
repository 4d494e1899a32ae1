/* engine/cpu/moe.c: the mixture-of-experts FFN block (see moe.h for the
 * math, the row grouping and why the router stays f32). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/moe.h"
#include "model/moe_route.h"
#include "quant/quant.h"

/* ---- binding ------------------------------------------------------------------ */

void tm_moe_free(tm_moe_experts *x)
{
    if (!x) return;
    for (int e = 0; e < x->E; e++) {
        if (x->gate) tm_kpack_free(x->gate[e]);
        if (x->up) tm_kpack_free(x->up[e]);
        if (x->down) tm_kpack_free(x->down[e]);
    }
    free(x->gate);
    free(x->up);
    free(x->down);
    free(x->router);
    free(x->router_b);
    free(x->router_corr);
    free(x->gate_b);
    free(x->up_b);
    free(x->down_b);
    tm_kpack_free(x->s_gate);
    tm_kpack_free(x->s_up);
    tm_kpack_free(x->s_down);
    free(x->s_router);
    free(x);
}

/* t's n values (a bound vector of n elements) into dst, f32 */
static int bias_into(float *dst, const tm_tensor *t, int64_t n, int layer, tm_err *err)
{
    if (!t->data || tm_tensor_numel(t) != n)
        return tm_errf(err, TM_E_INVALID, "moe layer %d: bias '%s' is not bound as [%lld]", layer,
                       t->name ? t->name : "?", (long long)n);
    tm_quant_dequant_row(t->dtype, t->data, t->scales, n, 0, dst);
    return TM_OK;
}

/* GPT-OSS: the router's bias [E] and every expert's three, as f32 */
static int expert_biases(tm_moe_experts *x, const tm_model *m, int layer, tm_err *err)
{
    const tm_layer_weights *w = &m->w[layer];
    size_t E = (size_t)x->E, Fe = (size_t)x->Fe, D = (size_t)x->D;
    x->router_b = malloc(sizeof(float) * E);
    x->gate_b = malloc(sizeof(float) * E * Fe);
    x->up_b = malloc(sizeof(float) * E * Fe);
    x->down_b = malloc(sizeof(float) * E * D);
    if (!x->router_b || !x->gate_b || !x->up_b || !x->down_b)
        return tm_errf(err, TM_E_NOMEM, "moe layer %d: out of memory for the experts' biases", layer);
    int rc = bias_into(x->router_b, &w->router_b, (int64_t)E, layer, err);
    for (size_t e = 0; e < E && !rc; e++)
        if (!(rc = bias_into(x->gate_b + e * Fe, &w->e_gate_b[e], (int64_t)Fe, layer, err)) &&
            !(rc = bias_into(x->up_b + e * Fe, &w->e_up_b[e], (int64_t)Fe, layer, err)))
            rc = bias_into(x->down_b + e * D, &w->e_down_b[e], (int64_t)D, layer, err);
    return rc;
}

int tm_moe_init(tm_moe_experts **out, const tm_model *m, int layer, tm_moe_pack_fn pack, unsigned roles,
                tm_err *err)
{
    *out = NULL;
    const tm_layer_weights *w = &m->w[layer];
    tm_moe_experts *x = calloc(1, sizeof *x);
    if (!x) return tm_errf(err, TM_E_NOMEM, "moe layer %d: out of memory", layer);
    x->D = m->D;
    x->E = m->n_experts;
    x->Fe = m->F_expert;
    x->top_k = m->top_k;
    x->norm_topk = m->norm_topk_prob;
    x->act = m->act;
    int rc = TM_OK;
    size_t E = (size_t)x->E, D = (size_t)x->D;
    x->gate = calloc(E, sizeof *x->gate);
    x->up = calloc(E, sizeof *x->up);
    x->down = calloc(E, sizeof *x->down);
    x->router = malloc(sizeof(float) * E * D);
    if (!x->gate || !x->up || !x->down || !x->router) {
        rc = tm_errf(err, TM_E_NOMEM, "moe layer %d: out of memory for %d experts", layer, x->E);
        goto fail;
    }
    if (!w->router.data || tm_tensor_numel(&w->router) != (int64_t)(E * D)) {
        rc = tm_errf(err, TM_E_INVALID, "moe layer %d: router '%s' is not bound as [%d][%d]", layer,
                     w->router.name ? w->router.name : "?", x->E, x->D);
        goto fail;
    }
    for (size_t e = 0; e < E; e++)
        tm_quant_dequant_row(w->router.dtype, w->router.data, w->router.scales, (int64_t)D, (int64_t)e,
                             x->router + e * D);
    if (m->expert_bias && (rc = expert_biases(x, m, layer, err)) != TM_OK) goto fail;
    x->router_sigmoid = m->router_sigmoid, x->n_group = m->n_group, x->topk_group = m->topk_group;
    x->group_top2 = m->group_top2, x->routed_scale = m->routed_scale;
    if (m->router_has_corr && (!(x->router_corr = malloc(sizeof(float) * E)) ||
                              (rc = bias_into(x->router_corr, &w->router_corr, (int64_t)E, layer, err)) != TM_OK)) {
        if (!rc) rc = tm_errf(err, TM_E_NOMEM, "moe layer %d: out of memory", layer);
        goto fail;
    }
    for (int e = 0; e < x->E; e++) {
        if ((rc = pack(&x->gate[e], &w->e_gate[e], roles, err)) != TM_OK) goto fail;
        if ((rc = pack(&x->up[e], &w->e_up[e], roles, err)) != TM_OK) goto fail;
        if ((rc = pack(&x->down[e], &w->e_down[e], roles, err)) != TM_OK) goto fail;
        if (!x->gate[e] || !x->up[e] || !x->down[e]) {
            rc = tm_errf(err, TM_E_INVALID, "moe layer %d: expert %d's weights are not bound", layer, e);
            goto fail;
        }
    }
    if ((x->Fs = m->F_shared) > 0) {
        if ((rc = pack(&x->s_gate, &w->s_gate, roles, err)) != TM_OK || (rc = pack(&x->s_up, &w->s_up, roles, err)) != TM_OK ||
            (rc = pack(&x->s_down, &w->s_down, roles, err)) != TM_OK)
            goto fail;
        x->s_router = m->shared_gate ? malloc(sizeof(float) * D) : NULL; /* its sigmoid gate (Qwen2-MoE), or none */
        if (!x->s_gate || !x->s_up || !x->s_down ||
            (m->shared_gate && (!x->s_router || !w->s_router.data || tm_tensor_numel(&w->s_router) != (int64_t)D))) {
            rc = tm_errf(err, TM_E_INVALID, "moe layer %d: the shared expert's weights are not bound", layer);
            goto fail;
        }
        if (x->s_router)
            tm_quant_dequant_row(w->s_router.dtype, w->s_router.data, w->s_router.scales, (int64_t)D, 0, x->s_router);
    }
    *out = x;
    return TM_OK;
fail:
    tm_moe_free(x);
    return rc;
}

void tm_moe_scratch_free(tm_moe_scratch *s)
{
    void *ps[] = {s->prob, s->sel, s->wsel, s->start, s->order, s->weight, s->xe, s->ge, s->ue, s->ye, s->choice, s->ok};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    memset(s, 0, sizeof *s);
}

int tm_moe_scratch_init(tm_moe_scratch *s, const tm_model *m, int max_rows, tm_err *err)
{
    memset(s, 0, sizeof *s);
    size_t M = (size_t)max_rows, E = (size_t)m->n_experts, K = (size_t)m->top_k, D = (size_t)m->D;
    size_t Fe = (size_t)(m->F_shared > m->F_expert ? m->F_shared : m->F_expert); /* ge, ue serve both */
    s->max_rows = max_rows;
    s->prob = malloc(sizeof(float) * M * E);
    s->sel = malloc(sizeof(int) * M * K);
    s->wsel = malloc(sizeof(float) * M * K);
    s->start = malloc(sizeof(int) * (E + 1));
    s->order = malloc(sizeof(int) * M * K);
    s->weight = malloc(sizeof(float) * M * K);
    s->xe = malloc(sizeof(float) * M * D);
    s->ge = malloc(sizeof(float) * M * Fe);
    s->ue = malloc(sizeof(float) * M * Fe);
    s->ye = malloc(sizeof(float) * M * D);
    s->choice = malloc(sizeof(float) * E);
    s->ok = malloc(E);
    if (!s->prob || !s->sel || !s->wsel || !s->start || !s->order || !s->weight || !s->xe || !s->ge || !s->ue ||
        !s->ye || !s->choice || !s->ok) {
        tm_moe_scratch_free(s);
        return tm_errf(err, TM_E_NOMEM, "moe: out of memory for scratch (%d rows, %d experts)", max_rows,
                       m->n_experts);
    }
    return TM_OK;
}

/* ---- routing ------------------------------------------------------------------ */

#define ROUTER_ROWS 8 /* rows per pool task */

typedef struct router_job {
    const tm_moe_experts *x;
    const float *h;   /* [M][D] */
    float *logit;     /* [M][E] */
    int M;
} router_job;

/* a·b in f32 with 8 partial sums (vectorisable without reassociation flags) */
static float dot_f32(const float *a, const float *b, int n)
{
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void router_rows(void *p, int task, int worker)
{
    (void)worker;
    const router_job *j = p;
    const tm_moe_experts *x = j->x;
    int r1 = (task + 1) * ROUTER_ROWS < j->M ? (task + 1) * ROUTER_ROWS : j->M;
    for (int r = task * ROUTER_ROWS; r < r1; r++)
        for (int e = 0; e < x->E; e++)
            j->logit[(size_t)r * x->E + e] = dot_f32(j->h + (size_t)r * x->D, x->router + (size_t)e * x->D, x->D) +
                                             (x->router_b ? x->router_b[e] : 0.f);
}

/* Route every row: s->sel, s->wsel [M][K]; then group: s->start, s->order, s->weight. */
static int route(const tm_moe_experts *x, const tm_kernels *k, const float *h, int M, tm_moe_scratch *s,
                 struct tm_pool *pool, tm_err *err)
{
    int E = x->E, K = x->top_k;
    router_job j = {x, h, s->prob, M};
    int rc = tm_pool_run(pool, (M + ROUTER_ROWS - 1) / ROUTER_ROWS, router_rows, &j);
    if (rc != TM_OK) return tm_errf(err, rc, "moe: the thread pool is busy (nested call)");
    if (x->router_sigmoid)
        for (size_t i = 0; i < (size_t)M * E; i++) s->prob[i] = 1.f / (1.f + expf(-s->prob[i]));
    else
        k->softmax(s->prob, M, E);
    tm_moe_route rt = {E, K, x->n_group, x->topk_group, x->group_top2, x->norm_topk, x->routed_scale, x->router_corr};
    for (int r = 0; r < M; r++)
        tm_moe_pick(&rt, s->prob + (size_t)r * E, s->sel + (size_t)r * K, s->wsel + (size_t)r * K, s->choice, s->ok);
    tm_moe_group(s->sel, s->wsel, M, K, E, s->start, s->order, s->weight, NULL);
    return TM_OK;
}

/* ---- the block ---------------------------------------------------------------- */

int tm_moe_forward(const tm_moe_experts *x, const tm_kernels *k, const float *h, int M, float *f,
                   tm_moe_scratch *s, tm_kbuf *ws, struct tm_pool *pool, tm_err *err)
{
    if (M < 1 || M > s->max_rows) return tm_errf(err, TM_E_INVALID, "moe: %d rows (1..%d)", M, s->max_rows);
    int D = x->D, Fe = x->Fe, rc;
    if ((rc = route(x, k, h, M, s, pool, err))) return rc;
    memset(f, 0, sizeof(float) * (size_t)M * D);
    for (int e = 0; e < x->E; e++) {
        int j0 = s->start[e], n = s->start[e + 1] - j0;
        if (n == 0) continue;
        for (int j = 0; j < n; j++) /* xe[n][D] = h[order[j0 + j]] */
            memcpy(s->xe + (size_t)j * D, h + (size_t)s->order[j0 + j] * D, sizeof(float) * D);
        const float *gb = x->gate_b ? x->gate_b + (size_t)e * Fe : NULL, *ub = x->up_b ? x->up_b + (size_t)e * Fe : NULL;
        const float *db = x->down_b ? x->down_b + (size_t)e * D : NULL;
        if ((rc = tm_kmatmul_f32(k, x->gate[e], gb, s->xe, n, s->ge, ws, pool, err))) return rc; /* [n][Fe] */
        if ((rc = tm_kmatmul_f32(k, x->up[e], ub, s->xe, n, s->ue, ws, pool, err))) return rc;   /* [n][Fe] */
        tm_kglu_fn(k, tm_kglu_of(x->act))(s->ge, s->ge, s->ue, (size_t)n * Fe);
        if ((rc = tm_kmatmul_f32(k, x->down[e], db, s->ge, n, s->ye, ws, pool, err))) return rc; /* [n][D] */
        for (int j = 0; j < n; j++) {
            float *fr = f + (size_t)s->order[j0 + j] * D, wj = s->weight[j0 + j];
            const float *yr = s->ye + (size_t)j * D;
            for (int d = 0; d < D; d++) fr[d] += wj * yr[d];
        }
    }
    if (!x->Fs) return TM_OK;
    /* the shared expert on every row, scaled by its sigmoid gate if it has one */
    if ((rc = tm_kmatmul_f32(k, x->s_gate, NULL, h, M, s->ge, ws, pool, err))) return rc; /* [M][Fs] */
    if ((rc = tm_kmatmul_f32(k, x->s_up, NULL, h, M, s->ue, ws, pool, err))) return rc;   /* [M][Fs] */
    tm_kglu_fn(k, tm_kglu_of(x->act))(s->ge, s->ge, s->ue, (size_t)M * x->Fs);
    if ((rc = tm_kmatmul_f32(k, x->s_down, NULL, s->ge, M, s->ye, ws, pool, err))) return rc; /* [M][D] */
    for (int i = 0; i < M; i++) {
        const float *hr = h + (size_t)i * D, *yr = s->ye + (size_t)i * D;
        float sg = 1.f, *fr = f + (size_t)i * D;
        if (x->s_router) {
            float g = 0;
            for (int d = 0; d < D; d++) g += hr[d] * x->s_router[d];
            sg = 1.f / (1.f + expf(-g));
        }
        for (int d = 0; d < D; d++) fr[d] += sg * yr[d];
    }
    return TM_OK;
}
