/* engine/cpu/cpu_bind.c: binding a model to a CPU engine context (cpu-impl.h): each stage's weights packed
 * for the variant's kernels (tm_kweight: tile layout for AMX, the GEMV layouts for int4 / int6 / int8), fused
 * where the forward pass wants them fused (q|k|v, gate|up), the norms and biases as f32, the rope tables, the
 * scratch for CPU_MAX_ROWS rows; the decode GEMV's ISA measured (autotune_gemv); and freeing it all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "core/tunecache.h"
#include "engine/cpu/cpu-impl.h"
#include "quant/quant.h"

/* ---- binding ---------------------------------------------------------------- */

static float *vec_f32(const tm_tensor *t)
{
    if (!t->data) return NULL;
    int64_t n = tm_tensor_numel(t);
    float *v = malloc(sizeof(float) * (size_t)n);
    if (v) tm_quant_dequant_row(t->dtype, t->data, t->scales, n, 0, v);
    return v;
}

/* a norm's weight in f32: Nemotron's LayerNorm1P (a LayerNorm with norm_add_one) kept as 1 + w; an RMSNorm's
 * (1 + w) is the kernels' add_one argument instead */
static float *norm_f32(const tm_model *m, const tm_tensor *t)
{
    float *v = vec_f32(t);
    if (v && m->norm == TM_NORM_LAYER && m->norm_add_one)
        for (int64_t i = 0; i < tm_tensor_numel(t); i++) v[i] += 1.0f;
    return v;
}

static int pack_uses(tm_dtype dt, unsigned roles)
{
    int uses = TM_KPACK_GEMV;
    if ((roles & TM_ROLE_PREFILL) && (dt == TM_DT_BF16 || dt == TM_DT_Q8PC)) uses |= TM_KPACK_GEMM;
    if (roles & TM_ROLE_DECODE) uses |= TM_KPACK_HUGE; /* decode streams these every step */
    return uses;
}

static int pack(tm_kweight **out, const tm_tensor *t, unsigned roles, tm_err *err)
{
    *out = NULL;
    if (!t->data) return TM_OK;
    return tm_kpack_init(out, t, pack_uses(t->dtype, roles), err);
}

/* Matrices that read the same input (q, k, v; gate, up) in one dtype and K
 * are bound as one weight of their rows in turn (*out), so a step runs one
 * matmul on them instead of two or three: one dispatch, one preparation of
 * the input, one wider GEMM or GEMV. That is a copy of their bytes (on huge
 * pages), made only where huge pages are on (tm_khuge_ok), for every binding:
 * a prefill binding keeps it for the one wider GEMM. 1 if done, 0 if they do
 * not qualify. */
static int pack_cat(tm_kweight **out, const tm_tensor *const *t, int n, unsigned roles, const char *what, tm_err *err,
                    int *rc)
{
    *rc = TM_OK;
    if (!tm_khuge_ok()) return 0;
    for (int i = 0; i < n; i++)
        if (!t[i]->data || t[i]->ndim != 2 || t[i]->dtype != t[0]->dtype || t[i]->shape[1] != t[0]->shape[1]) return 0;
    *rc = tm_kpack_concat(out, t, n, pack_uses(t[0]->dtype, roles), what, err);
    return 1;
}

static void print_profile(const cpu_ctx *c)
{
    static const char *kind[2] = {"prefill", "decode"};
    for (int k = 0; k < 2; k++) {
        const double *p = c->prof[k];
        if (!c->prof_calls[k] || p[0] <= 0) continue;
        fprintf(stderr,
                "tandem profile: %s: %ld calls, %.3f s: matmul %.1f%% (%.1f GOP/s), attention %.1f%%, the rest "
                "%.1f%% (norm+prepare %.1f%%, activation+prepare %.1f%%)\n",
                kind[k], c->prof_calls[k], p[0], 100 * p[1] / p[0], p[1] > 0 ? c->prof_ops[k] / p[1] / 1e9 : 0,
                100 * p[2] / p[0], 100 * (p[0] - p[1] - p[2]) / p[0], 100 * p[3] / p[0], 100 * p[4] / p[0]);
        for (int i = 0; i < c->prof_nmm; i++) {
            const struct prof_mm *s = &c->prof_mm[i];
            if (s->kind == k && s->calls > 0 && s->s > 0)
                fprintf(stderr, "tandem profile: %s: matmul %d x %d %s%s, %d rows (%s): %ld calls, %.3f s, %.1f GOP/s\n",
                        kind[k], s->n, s->k, tm_dtype_name(s->dt), s->glu ? " (gate+up)" : "", s->m,
                        s->gemm ? "GEMM" : "GEMV", s->calls, s->s, s->ops / s->s / 1e9);
        }
    }
}

void cpu_unbind(void *vctx)
{
    cpu_ctx *c = vctx;
    if (!c) return;
    if (c->profile) print_profile(c);
    if (c->layer) {
        for (int l = 0; l < c->m->L; l++) {
            cpu_layer *y = &c->layer[l];
            tm_kweight *ws[] = {y->wq, y->wk, y->wv, y->wqkv, y->wo, y->w_gate, y->w_up, y->w_gate_up, y->w_down, y->w_glu};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) tm_kpack_free(ws[i]);
            float *vs[] = {y->attn_norm, y->ffn_norm, y->attn_norm_b, y->ffn_norm_b, y->attn_out_norm, y->ffn_out_norm, y->q_norm, y->k_norm,
                           y->q_norm_b, y->k_norm_b, y->bq, y->bk, y->bv, y->bo, y->b_gate, y->b_up, y->b_down, y->sinks};
            for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) free(vs[i]);
            tm_moe_free(y->moe);
            tm_mla_free(y->mla);
        }
        free(c->layer);
    }
    tm_kpack_free(c->lm_head);
    free(c->amax_logits);
    free(c->final_norm);
    free(c->final_norm_b);
    free(c->embed_norm);
    free(c->embed_norm_b);
    free(c->lm_head_b);
    for (int i = 0; i < 2; i++) {
        free(c->rope_cos[i]);
        free(c->rope_sin[i]);
    }
    float *bufs[] = {c->x, c->x0, c->h, c->q, c->kk, c->vv, c->qkv, c->g, c->u, c->f, c->cs, c->sn};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c->ptab);
    free(c->ctxlen);
    free(c->xb);
    free(c->xq);
    free(c->xs);
    tm_moe_scratch_free(&c->moe);
    tm_kbuf_free(&c->ws);
    tm_kbuf_free(&c->kv16);
    free(c);
}

/* cos/sin tables [max_ctx][rot/2], angle = f32(pos * inv_freq) as transformers. */
static int rope_tables(cpu_ctx *c, tm_err *err)
{
    const tm_model *m = c->m;
    for (int r = 0; r < m->n_rope; r++) {
        const tm_rope *rp = &m->rope[r];
        int half = rp->rot_dim / 2;
        const float *inv = tm_rope_inv_freq_at(rp, c->max_ctx);
        c->rope_cos[r] = malloc(sizeof(float) * (size_t)c->max_ctx * (size_t)half);
        c->rope_sin[r] = malloc(sizeof(float) * (size_t)c->max_ctx * (size_t)half);
        if (!c->rope_cos[r] || !c->rope_sin[r]) return tm_errf(err, TM_E_NOMEM, "cpu engine: rope tables");
        for (int p = 0; p < c->max_ctx; p++)
            for (int i = 0; i < half; i++) {
                float a = (float)p * inv[i];
                c->rope_cos[r][(size_t)p * half + i] = cosf(a) * rp->attn_scaling;
                c->rope_sin[r][(size_t)p * half + i] = sinf(a) * rp->attn_scaling;
            }
    }
    return TM_OK;
}

/* ---- GEMV autotune ------------------------------------------------------------- */

typedef int (*gemv_fn)(const tm_kweight *, const tm_kact *, float *, tm_kbuf *, struct tm_pool *);

/* the best of 7 calls of each of f[0] and f[1], taken in turn (a
 * disturbance of the machine falls on both alike): t[0], t[1] in seconds,
 * 1e30 where a call failed */
static void time_gemvs(gemv_fn f[2], const tm_kweight *w, const float *x, float *y, tm_kbuf *ws, struct tm_pool *pool,
                       double t[2])
{
    tm_kact a = {.M = 1, .K = tm_kweight_k(w), .f32 = x};
    t[0] = t[1] = 1e30;
    for (int i = 0; i < 2; i++) f[i](w, &a, y, ws, pool); /* warm */
    for (int r = 0; r < 7; r++)
        for (int i = 0; i < 2; i++) {
            double t0 = tm_now_s();
            if (f[i](w, &a, y, ws, pool) != TM_OK) return;
            double dt = tm_now_s() - t0;
            if (dt < t[i]) t[i] = dt;
        }
}

/* Decode GEMVs are memory-bound, and which instruction set streams memory
 * best is a property of the core, not of its feature flags (on cores that
 * run 512-bit vectors as two 256-bit halves the AVX2 kernels read faster).
 * So the decode engine times both on this model's own weights at bind and
 * keeps the faster per op. Costs a few milliseconds. The two sum in other
 * orders, and where they run close the timing can go either way: the first
 * session's choice is kept per machine (core/tunecache.h) and every later one
 * takes it, so sessions compute the same bits (seeded runs repeat). */
static void autotune_gemv(cpu_ctx *c, struct tm_pool *pool)
{
    tm_kernels alt;
    if (strcmp(c->k.name, "avx512") != 0 || tm_kernels_select("avx2", &alt, NULL) != TM_OK) return;
    /* TANDEM_GEMV=avx512|avx2 pins the choice (reproducible runs, tests); unset or "auto": measure */
    const char *pin = getenv("TANDEM_GEMV");
    if (pin && strcmp(pin, "avx2") == 0) {
        c->k.gemv_q4 = alt.gemv_q4;
        c->k.gemv_q8 = alt.gemv_q8;
        c->k.gemv_bf16 = alt.gemv_bf16;
    }
    if (pin && strcmp(pin, "auto") != 0) return;
    const tm_moe_experts *moe = c->layer[0].moe;
    const tm_kweight *cand[] = {c->layer[0].w_up, c->layer[0].w_gate_up, c->layer[0].w_down,
                                moe ? moe->up[0] : NULL, moe ? moe->down[0] : NULL, c->lm_head};
    gemv_fn *mine[3] = {&c->k.gemv_q4, &c->k.gemv_q8, &c->k.gemv_bf16};
    gemv_fn other[3] = {alt.gemv_q4, alt.gemv_q8, alt.gemv_bf16};
    for (int op = 0; op < 3; op++) {
        const tm_kweight *w = NULL;
        for (size_t i = 0; i < sizeof cand / sizeof cand[0] && !w; i++) {
            if (!cand[i]) continue;
            tm_dtype d = tm_kweight_dtype(cand[i]);
            int kind = d == TM_DT_Q8PC ? 1 : d == TM_DT_BF16 ? 2 : tm_kdt_block32(d) ? 0 : -1;
            if (kind == op) w = cand[i];
        }
        if (!w) continue;
        int K = tm_kweight_k(w), N = tm_kweight_n(w);
        char key[96], got[16];
        snprintf(key, sizeof key, "gemv %s %d %d", tm_dtype_name(tm_kweight_dtype(w)), N, K);
        if (!(pin && !strcmp(pin, "auto")) && tm_tune_get(key, got, sizeof got)) {
            if (!strcmp(got, "avx2")) *mine[op] = other[op];
            continue;
        }
        float *x = malloc(sizeof(float) * (size_t)K), *y = malloc(sizeof(float) * (size_t)N);
        if (x && y) {
            for (int k = 0; k < K; k++) x[k] = (float)((k * 37) % 19) / 19.0f - 0.5f;
            gemv_fn f[2] = {*mine[op], other[op]};
            double t[2];
            time_gemvs(f, w, x, y, &c->ws, pool, t);
            int alt_wins = t[1] < 0.95 * t[0];
            if (alt_wins) *mine[op] = other[op];
            tm_tune_put(key, alt_wins ? "avx2" : "avx512");
        }
        free(x);
        free(y);
    }
}

/* A prefill engine whose kernels have gemm_glu (the AMX ones) runs the
 * FFN's gate and up projections as one GEMM whose epilogue applies the
 * activation: it writes act(gate) * up [M][F] instead of gate and up
 * [M][2F], and the separate activation pass goes. gate and up keep their
 * GEMV layouts (decode, and prefill chunks of up to TM_KGEMV_MAX_B rows) and
 * lose their panels. Not for biased gate/up (the epilogue adds no bias).
 * TANDEM_GLU=0 turns it off (a measurement switch). On since session 31: on
 * the dev machine (Sapphire Rapids class, 2 threads, pp512, 4 interleaved
 * rounds) 1.03x on the Qwen-0.5B shape and 1.07x on Llama-1B, ahead in every
 * round (docs/benchmarks.md "Session 31"); the h200-host Xeons of sessions 7,
 * 10 and 22 had measured it at 0.90-1.00x. */
static int glu_wanted(const cpu_ctx *c, unsigned roles)
{
    const char *env = getenv("TANDEM_GLU");
    return !(env && strcmp(env, "0") == 0) && (roles & TM_ROLE_PREFILL) && c->k.gemm_glu;
}

static int fuse_glu(cpu_ctx *c, cpu_layer *y, unsigned roles, tm_err *err)
{
    if (!glu_wanted(c, roles) || !y->w_gate || !y->w_up || y->b_gate || y->b_up) return TM_OK;
    int act = tm_kglu_of(c->m->act);
    tm_err e = {0};
    int rc = tm_kpack_glu(&y->w_glu, y->w_gate, y->w_up, act, &e);
    if (rc == TM_E_INVALID) return TM_OK; /* no panels (an int4 prefill stage) or unlike shapes */
    if (rc != TM_OK) return tm_errf(err, rc, "%s", e.msg);
    tm_kpack_drop_panels(y->w_gate);
    tm_kpack_drop_panels(y->w_up);
    return TM_OK;
}

/* The projections whose int8 GEMM stores its result in bf16 besides gate|up
 * (see bf16y_ok): TANDEM_Y_BF16 = "0" (none), "1" (all three) or a comma
 * list of qkv, o, down (cpu-impl.h's Y16_*); unset or empty: all three. -1 for anything else. */

static int y16_parse(const char *v, unsigned *mask)
{
    static const char *names[] = {"qkv", "o", "down"};
    *mask = !v || !*v || !strcmp(v, "1") ? Y16_ALL : 0;
    if (!v || !*v || !strcmp(v, "0") || !strcmp(v, "1")) return 0;
    for (const char *p = v;; p++) {
        size_t n = strcspn(p, ",");
        int i = 0;
        while (i < 3 && !(n == strlen(names[i]) && !strncmp(p, names[i], n))) i++;
        if (i == 3) return -1;
        *mask |= 1u << i;
        p += n;
        if (!*p) return 0;
    }
}

/* A fused q|k|v bias [(H+2Hk)*Dh] (GPT-NeoX, Falcon, GPT-2) as y's bq, bk, bv, read in the
 * weight's row order (tm_qkv_row: Q, K, V, or grouped by kv head). */
static int split_bias(cpu_layer *y, const tm_tensor *t, const tm_model *m, const char *engine, tm_err *err)
{
    int H = m->H, Hk = m->Hk, Dh = m->Dh;
    float *b = vec_f32(t);
    y->bq = malloc(sizeof(float) * (size_t)H * Dh);
    y->bk = malloc(sizeof(float) * (size_t)Hk * Dh);
    y->bv = malloc(sizeof(float) * (size_t)Hk * Dh);
    if (!b || !y->bq || !y->bk || !y->bv) {
        free(b);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", engine);
    }
    float *dst[3] = {y->bq, y->bk, y->bv};
    for (int j = 0; j < 3; j++)
        for (int h = 0; h < (j ? Hk : H); h++) memcpy(dst[j] + (size_t)h * Dh, b + tm_qkv_row(m, j, h, 0), sizeof(float) * Dh);
    free(b);
    return TM_OK;
}

int cpu_bind(void **out, const tm_model *m, const tm_engine_opts *o, const cpu_variant *var,
                       tm_err *err)
{
    *out = NULL;
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", var->engine);
    c->m = m;
    c->pool = o->pool;
    c->max_ctx = o->max_ctx > 0 ? o->max_ctx : 4096;
    /* the roles this binding serves: what bind prepares (engine.h); prefill or decode calls work either way */
    unsigned roles = o->roles ? o->roles : var->roles;
    int rc = tm_kernels_select(var->kernels, &c->k, err);
    if (rc != TM_OK) goto fail;
    if (m->Dh > TM_KATTN_MAX_DH) {
        rc = tm_errf(err, TM_E_UNSUPPORTED, "%s: heads of %d dims are wider than the attention kernels take (%d)",
                     var->engine, m->Dh, TM_KATTN_MAX_DH);
        goto fail;
    }
    c->layer = calloc((size_t)m->L, sizeof *c->layer);
    if (!c->layer) { rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", var->engine); goto fail; }
    for (int l = 0; l < m->L; l++) {
        const tm_layer_weights *w = &m->w[l];
        cpu_layer *y = &c->layer[l];
        const tm_tensor *mats[] = {&w->wq, &w->wk, &w->wv, &w->wqkv, &w->wo, &w->w_gate, &w->w_up, &w->w_gate_up, &w->w_down};
        tm_kweight **dst[] = {&y->wq, &y->wk, &y->wv, &y->wqkv, &y->wo, &y->w_gate, &y->w_up, &y->w_gate_up, &y->w_down};
        int skip[9] = {0};
        const tm_tensor *qkv[] = {&w->wq, &w->wk, &w->wv}, *gu[] = {&w->w_gate, &w->w_up};
        if (m->mla || (!w->wqkv.data && pack_cat(&y->wqkv, qkv, 3, roles, "q|k|v", err, &rc))) /* (MLA: mla.c's) */
            skip[0] = skip[1] = skip[2] = skip[3] = 1; /* wq, wk, wv, and the absent wqkv tensor */
        if (rc == TM_OK && !w->w_gate_up.data && !glu_wanted(c, roles) &&
            pack_cat(&y->w_gate_up, gu, 2, roles, "gate|up", err, &rc))
            skip[5] = skip[6] = skip[7] = 1;
        if (rc != TM_OK) goto fail;
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (!skip[i] && (rc = pack(dst[i], mats[i], roles, err)) != TM_OK) goto fail;
        y->attn_norm = norm_f32(m, &w->attn_norm);
        y->ffn_norm = norm_f32(m, &w->ffn_norm);
        y->attn_out_norm = norm_f32(m, &w->attn_out_norm);
        y->ffn_out_norm = norm_f32(m, &w->ffn_out_norm);
        y->q_norm = norm_f32(m, &w->q_norm);
        y->k_norm = norm_f32(m, &w->k_norm);
        y->q_norm_b = vec_f32(&w->q_norm_b);
        y->k_norm_b = vec_f32(&w->k_norm_b);
        y->attn_norm_b = vec_f32(&w->attn_norm_b);
        y->ffn_norm_b = vec_f32(&w->ffn_norm_b);
        y->bq = vec_f32(&w->bq);
        y->bk = vec_f32(&w->bk);
        y->bv = vec_f32(&w->bv);
        if (w->bqkv.data && (rc = split_bias(y, &w->bqkv, m, var->engine, err)) != TM_OK) goto fail;
        y->bo = vec_f32(&w->bo);
        y->b_gate = vec_f32(&w->b_gate);
        y->b_up = vec_f32(&w->b_up);
        y->b_down = vec_f32(&w->b_down);
        y->sinks = vec_f32(&w->sinks);
        if ((rc = fuse_glu(c, y, roles, err)) != TM_OK) goto fail;
        if (m->layer[l].moe && (rc = tm_moe_init(&y->moe, m, l, pack, roles, err)) != TM_OK) goto fail;
        if (m->mla && (rc = tm_mla_init(&y->mla, m, l, pack, roles, CPU_MAX_ROWS, err)) != TM_OK) goto fail;
    }
    /* the head: GEMV rows (no panels: at most TM_KGEMV_MAX_B rows of logits at a time), on huge pages
       for every binding: a prefill binding reads it once per prompt, but from the package's 4 KB pages
       that one GEMV took Qwen2.5-0.5B's pp512 from 832 to 815 t/s on dev (session 11) */
    if ((rc = pack(&c->lm_head, &m->lm_head, TM_ROLE_DECODE, err)) != TM_OK) goto fail;
    if (var->roles & TM_ROLE_DECODE) autotune_gemv(c, o->pool); /* the prefill-only route decodes here too */
    c->final_norm = norm_f32(m, &m->final_norm);
    c->final_norm_b = vec_f32(&m->final_norm_b);
    c->embed_norm = norm_f32(m, &m->embed_norm);
    c->embed_norm_b = vec_f32(&m->embed_norm_b);
    c->lm_head_b = vec_f32(&m->lm_head_b);
    const char *prof = getenv("TANDEM_PROFILE");
    c->profile = !prof || !*prof || !strcmp(prof, "0") ? 0 : !strcmp(prof, "warm") ? 2 : 1;
    const char *fb = getenv("TANDEM_FFN_BF16");
    c->ffn_bf16 = !(fb && !strcmp(fb, "0"));
    const char *q8r = getenv("TANDEM_Q8_ROWS");
    c->q8_chunk = !(q8r && strcmp(q8r, "0"));
    const char *yb = getenv("TANDEM_Y_BF16");
    if (y16_parse(yb, &c->y_bf16)) {
        rc = tm_errf(err, TM_E_INVALID, "TANDEM_Y_BF16=\"%s\": not 0, 1 or a comma list of qkv, o, down", yb);
        goto fail;
    }
    if ((rc = rope_tables(c, err)) != TM_OK) goto fail;

    size_t M = CPU_MAX_ROWS, D = (size_t)m->D, HD = (size_t)m->H * m->Dh, KD = (size_t)m->Hk * m->Dh;
    size_t F = (size_t)m->F, half = (size_t)m->Dh / 2;
    size_t hw = D > HD ? D : HD;
    int dense = 0; /* any dense FFN layer (an MoE model may have none) */
    for (int l = 0; l < m->L; l++) dense |= !m->layer[l].moe;
    /* the row buffers a 512-row chunk streams through (up to tens of MB) on
     * huge pages where the kernel gives them on request (tm_khuge_alloc) */
    c->x = tm_khuge_alloc(sizeof(float) * M * D);
    c->x0 = m->parallel ? tm_khuge_alloc(sizeof(float) * M * D) : NULL;
    c->h = tm_khuge_alloc(sizeof(float) * M * hw);
    c->q = tm_khuge_alloc(sizeof(float) * M * HD);
    c->kk = tm_khuge_alloc(sizeof(float) * M * KD);
    c->vv = tm_khuge_alloc(sizeof(float) * M * KD);
    int any_qkv = 0;
    for (int l = 0; l < m->L; l++) any_qkv |= c->layer[l].wqkv != NULL;
    c->qkv = any_qkv ? tm_khuge_alloc(sizeof(float) * M * (HD + 2 * KD)) : NULL;
    c->g = dense ? tm_khuge_alloc(sizeof(float) * M * 2 * F) : NULL;
    c->u = dense ? tm_khuge_alloc(sizeof(float) * M * F) : NULL;
    c->f = tm_khuge_alloc(sizeof(float) * M * D);
    c->cs = malloc(sizeof(float) * M * half);
    c->sn = malloc(sizeof(float) * M * half);
    size_t kmax = F > hw ? F : hw, ld = (size_t)tm_kact_ld((int)kmax);
    c->xb = tm_khuge_alloc(sizeof(uint16_t) * M * ld);
    c->xq = tm_khuge_alloc(M * ld);
    c->xs = malloc(sizeof(float) * M);
    c->ptab = malloc(sizeof(*c->ptab) * M);
    c->ctxlen = malloc(sizeof(int) * M);
    if (m->n_experts > 0 && (rc = tm_moe_scratch_init(&c->moe, m, CPU_MAX_ROWS, err)) != TM_OK) goto fail;
    if (!c->x || (m->parallel && !c->x0) || !c->h || !c->q || !c->kk || !c->vv || (any_qkv && !c->qkv) || (dense && (!c->g || !c->u)) ||
        !c->f || !c->cs || !c->sn || !c->ptab || !c->ctxlen || !c->xb || !c->xq || !c->xs) {
        rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory for scratch", var->engine);
        goto fail;
    }
    for (int l = 0; l < m->L; l++)
        if ((m->pre_norms && (!c->layer[l].attn_norm || !c->layer[l].ffn_norm)) ||
            (m->norm_bias && (!c->layer[l].attn_norm_b || !c->layer[l].ffn_norm_b))) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", var->engine);
            goto fail;
        }
    if (!c->final_norm || (m->norm_bias && !c->final_norm_b) || (m->lm_head_bias && !c->lm_head_b) ||
        (m->embed_norm.data && (!c->embed_norm || !c->embed_norm_b))) {
        rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", var->engine);
        goto fail;
    }
    *out = c;
    return TM_OK;
fail:
    cpu_unbind(c);
    return rc;
}
