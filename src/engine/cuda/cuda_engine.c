/* engine/cuda/cuda_engine.c: the CUDA engine ("cuda"), both roles. As the prefill engine an NVIDIA
 * GPU's tensor cores fill the KV cache that a CPU decode engine then reads, the "matrix unit prefill +
 * bandwidth unit decode" split with the GPU as the matrix unit (engine.h); as the decode engine the
 * GPU's memory bandwidth generates from a cache that any prefill engine filled.
 *
 * Design block
 * ------------
 * Weights: at bind, every layer is read through the reference engine's loader (engine/ref: one place
 * knows the checkpoints' layouts: fused q|k|v in Q, K, V row order, gate rows then up rows, effective
 * norm weights), whatever the stage's encoding, and uploaded: vectors f32, matrices (cu_mat.h) as bf16
 * [N][K] (any encoding dequantized: the prefill's form) or, when bound for decode and the stage's
 * encoding is int4 / int8 / int6, packed: the package's own bytes, stacked in the same row order
 * (tm_qkv_row for fused q|k|v), which the GEMV reads (cu_gemv.cu), with the bf16 copy kept beside it
 * where both fit (dual: half the free memory or less; a step of more than CU_GEMV_DUAL rows then runs
 * cuBLAS over the copy, since the GEMV reads a weight once per 8 rows). The embedding stays bf16 (a step
 * gathers B rows of it); a separate lm_head goes up by row blocks or packed. Products over bf16 are
 * cuBLAS's (bf16 inputs, f32 accumulation and output, tensor cores): y[T][N] = x[T][K] · W[N][K]ᵀ as
 * the column-major product W(op T) · x; over packed weights the GEMV (a decode step's products and the
 * head at any batch; a prefill chunk up to CU_GEMV_MAX rows), else the weight dequantized to bf16
 * scratch and cuBLAS.
 *
 * One chunk (T rows, n_valid real; model.h's op sequence), all on one stream:
 *   tokens -> x [T][D] f32 (embedding)
 *   per layer: h = norm(x) bf16; qkv = h · wqkvᵀ f32; cu_qkv_post (bias, clamp, q/k norms, RoPE,
 *              k and v into the mirror and the export rows); attention over the mirror -> att bf16;
 *              a = att · woᵀ; x += post(a + bo); h = norm(x or the layer's input); gu = h · wguᵀ;
 *              g = act(gate) ⊙ up bf16; a = g · wdᵀ; x += post(a + bd)
 *   logits: the last real row's final norm, · lm_headᵀ, the logit scalings; copied to the host.
 *   every row's outputs where asked (rows_out): the final norms [n_valid][D], the logits by ROWS_BLK rows.
 *
 * Streams. A call runs on one stream: st0 (the whole device, at the greatest priority where bound urgent:
 * the decode instance beside a prefill instance on the same GPU), or, bound to a part of the device
 * (tm_engine_opts.part), its green context's stream (cu_smset.h) unless the call is alone (lane_pick). Every
 * call ends synchronised, so the next may take the other stream; captured decode steps are kept per stream.
 *
 * KV. The engine keeps a device mirror of one sequence's KV, bf16 [L][Hk][cap][Dh], which its
 * attention reads. The paged cache (runtime/kvcache.h, host memory) stays the truth every engine
 * shares: each layer's new rows leave the GPU as export rows in the cache's dtype (bf16, f16, f32, or
 * int8 with its row scales: the conversion happens on the GPU), are copied to pinned memory
 * (cudaMemcpyAsync) and scattered into the sequence's pages by the host, and then the layer is
 * reported (on_layer), so the bridge's stateless hand-off overlaps later layers as it does on the
 * CPU engines. The host scatters layer l - 1 while the GPU computes layer l (two pinned slots).
 * A chunk whose earlier positions [0, pos0) the mirror does not hold (another sequence ran in
 * between, a reused prefix, pages let go: tm_kv_cache_epoch moved) first uploads them from the
 * pages: each (page, layer) region is one memcpy into pinned memory, then one copy up and a kernel
 * that widens them into the mirror (cu_kv_ingest). The mirror is trusted when: the same cache and
 * sequence, pos0 == where the last chunk ended, the same page ids, no page of the cache let go
 * since (kvcache.h: while the epoch stands, held pages hold what their owner wrote), and the sequence not
 * set back since (tm_kv_seq.rewinds: prompt lookup's rejected drafts, rows the mirror holds that decode
 * steps then write again).
 *
 *
 * Decode: one step runs B sequences' rows through the same layer code over a device copy of the paged
 * cache's arena (cu_step.c has its design block).
 *
 * Mixture-of-experts layers: cu_moe.h (the router in f32, the experts stacked; a decode step's experts found
 * by index on the device, a prefill chunk's sorted by expert on the device and run as tiles on tensor cores).
 *
 * Multi-head latent attention (DeepSeek-V2 / V3 and kin): cu_mla.h (one latent kv head of Dh = rope + kvl; its
 * own projections and, for a prefill chunk, its own attention over the mirror; a decode step's is cu_dec.cu's).
 *
 * Not here (docs/status.md): head dims over 256 (but latent attention's), int8 tensor-core GEMMs for an int8
 * prefill stage (dequantized to bf16). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "engine/cuda/cu_eng.h"
#include "engine/ref/ref-impl.h"

void cu_prof_mark(cu_eng *e, int cat, int end)
{
    cu_prof *p = e->prof;
    if (!p || p->n >= PROF_EV) return;
    if (end) p->cat[p->n / 2] = cat;
    cudaEventRecord(p->ev[p->n++], e->st);
}

/* after the chunk's synchronisation: its events into the totals */
static void prof_chunk(cu_eng *e, int rows)
{
    cu_prof *p = e->prof;
    if (!p) return;
    float ms;
    for (int i = 0; i + 1 < p->n; i += 2)
        if (cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]) == cudaSuccess) p->ms[p->cat[i / 2]] += ms;
    if (cudaEventElapsedTime(&ms, p->t0, p->t1) == cudaSuccess) p->total_ms += ms;
    p->n = 0, p->chunks++, p->rows += rows;
}

static void prof_free(cu_eng *e)
{
    cu_prof *p = e->prof;
    if (!p) return;
    if (p->chunks)
        fprintf(stderr,
                "cuda profile: %ld chunks, %ld rows: GPU %.2f ms: GEMMs %.2f ms (%.1f TFLOP/s), attention %.2f ms, "
                "q/k/v pass %.2f ms, mixture of experts %.2f ms, head %.2f ms, the rest %.2f ms; host waiting on the KV "
                "export %.2f ms\n",
                p->chunks, p->rows, p->total_ms, p->ms[PROF_GEMM],
                p->ms[PROF_GEMM] > 0 ? p->gemm_flop / (p->ms[PROF_GEMM] * 1e-3) / 1e12 : 0, p->ms[PROF_ATTN],
                p->ms[PROF_QKV], p->ms[PROF_MOE], p->ms[PROF_HEAD],
                p->total_ms - p->ms[PROF_GEMM] - p->ms[PROF_ATTN] - p->ms[PROF_QKV] - p->ms[PROF_MOE] - p->ms[PROF_HEAD],
                p->host_wait_s * 1e3);
    if (p->steps)
        fprintf(stderr, "cuda profile: %ld decode steps (%.2f sequences each, %s): GPU %.3f ms a step, the call %.3f ms; "
                "KV pages brought up in %.2f ms in all\n", p->steps, (double)p->step_rows / p->steps,
                e->use_graphs ? "CUDA graphs" : "launched one by one", p->dec_gpu_ms / p->steps,
                p->dec_host_s * 1e3 / p->steps, e->t_upload * 1e3);
    if (p->dsteps)
        fprintf(stderr, "cuda profile: %ld decode steps launched one by one: GEMMs %.3f ms, attention %.3f ms, q/k/v pass "
                "%.3f ms, mixture of experts %.3f ms, head %.3f ms a step\n", p->dsteps, p->dms[PROF_GEMM] / p->dsteps,
                p->dms[PROF_ATTN] / p->dsteps, p->dms[PROF_QKV] / p->dsteps, p->dms[PROF_MOE] / p->dsteps,
                p->dms[PROF_HEAD] / p->dsteps);
    cudaEventDestroy(p->d0);
    cudaEventDestroy(p->d1);
    for (int i = 0; i < PROF_EV; i++) cudaEventDestroy(p->ev[i]);
    cudaEventDestroy(p->t0);
    cudaEventDestroy(p->t1);
    free(p);
    e->prof = NULL;
}

static void prof_init(cu_eng *e)
{
    const char *v = getenv("TANDEM_CUDA_PROFILE");
    if (!v || strcmp(v, "1")) return;
    cu_prof *p = calloc(1, sizeof *p);
    if (!p) return;
    for (int i = 0; i < PROF_EV; i++) cudaEventCreate(&p->ev[i]);
    cudaEventCreate(&p->t0);
    cudaEventCreate(&p->t1);
    cudaEventCreate(&p->d0);
    cudaEventCreate(&p->d1);
    e->prof = p;
}



static int cu_probe(tm_engine_caps *c, tm_err *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1)
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda: no CUDA device (%s)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    memset(c, 0, sizeof *c);
    c->name = "cuda";
    c->device = "cuda:0";
    c->roles = TM_ROLE_PREFILL | TM_ROLE_DECODE;
    /* every encoding: as bf16, or packed for decode (design block) */
    tm_dtype enc[] = {TM_DT_BF16, TM_DT_F16, TM_DT_F32, TM_DT_Q8PC, TM_DT_Q4G64, TM_DT_Q4G32, TM_DT_Q4PC, TM_DT_Q6G64};
    memcpy(c->encodings, enc, sizeof enc);
    c->n_encodings = 8;
    int chunks[] = {64, 128, 256, 512};
    memcpy(c->chunk_sizes, chunks, sizeof chunks);
    c->n_chunks = 4;
    tm_dtype kvd[] = {TM_DT_BF16, TM_DT_F16, TM_DT_Q8PC, TM_DT_F32};
    memcpy(c->kv_dtypes, kvd, sizeof kvd);
    c->n_kv_dtypes = 4;
    c->max_batch = CU_MAX_B;
    const char *am = getenv("TANDEM_CUDA_ARGMAX"); /* =0: no argmax on the GPU (a measurement switch) */
    c->argmax = !(am && !strcmp(am, "0"));
    c->row_logits = c->row_hidden = 1;
    return TM_OK;
}

/* ---- bind: weights up ------------------------------------------------------------------------ */

/* Copies up wait for their stream before the host buffer goes (cu_mat.c says why). */

/* *d = a device copy of the f32 vector h [n] (h NULL: *d = NULL) */
static int up_f32(cu_eng *e, float **d, const float *h, size_t n, tm_err *err) { return cu_up_f32(d, e->st, h, n, err); }

#define STAGE_FLOATS ((size_t)16 << 20) /* 64 MB of f32 per copy up */

/* a [rows][K] tensor (any encoding tm_ref_rows_f32 reads) as bf16 on the device, by row blocks */
static int up_rows(cu_eng *e, uint16_t **d, const tm_tensor *t, int64_t rows, int64_t K, float *tmp, tm_err *err)
{
    cu_mat m;
    cu_part p = {t, 0, rows};
    int rc = cu_mat_up_parts(&m, e->st, &p, 1, K, tmp, STAGE_FLOATS, err);
    *d = m.bf;
    return rc;
}

/* do the layer matrices fit twice, packed and as bf16? Where their bf16 bytes are under half the free
 * device memory (TANDEM_CUDA_BF16_COPY=0 or 1 decides instead) */
static int dual_fits(const tm_model *m)
{
    const char *v = getenv("TANDEM_CUDA_BF16_COPY");
    if (v && (!strcmp(v, "0") || !strcmp(v, "1"))) return v[0] == '1';
    double q = (double)m->H * m->Dh, kv = (double)m->Hk * m->Dh, nr = m->gated ? 2.0 * m->F : m->F;
    double bytes = 2.0 * m->L * ((q + 2 * kv) * m->D + q * m->D + nr * m->D + (double)m->F * m->D);
    size_t free_b = 0, total = 0;
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess && bytes < 0.5 * (double)free_b;
}

/* matrix m of the parts' rows stacked: packed where the engine decodes and their encoding allows
 * (cu_mat.h), else w (the same rows in f32, as the reference's loader put them) as bf16 */
static int up_mat(cu_eng *e, cu_mat *m, const cu_part *p, int np, int64_t K, const float *w, float *tmp, tm_err *err)
{
    int64_t N = 0;
    for (int i = 0; i < np; i++) N += p[i].n;
    int rc = e->packed ? cu_mat_up_packed(m, e->st, p, np, K, err) : 1;
    if (rc == TM_OK && e->dual) rc = cu_mat_add_bf16(m, e->st, w, tmp, STAGE_FLOATS, err);
    /* (not cu_mat_up_stage: the bf16 form from w, which the loader has already read) */
    return rc == 1 ? cu_mat_up_f32(m, e->st, w, (int)N, (int)K, tmp, STAGE_FLOATS, err) : rc;
}

static int up_layer(cu_eng *e, const tm_model *m, int l, float *tmp, tm_err *err)
{
    ref_layer o;
    memset(&o, 0, sizeof o);
    int rc = tm_ref_layer_load(&o, m, l, 0, err); /* a MoE layer's experts: cu_moe_up, expert by expert */
    cu_layer *w = &e->w[l];
    const tm_layer_weights *lw = &m->w[l];
    int64_t D = e->D, q = (int64_t)e->H * e->Dh, kv = (int64_t)e->Hk * e->Dh, F = e->F;
    size_t nr = e->gated ? 2 * (size_t)F : (size_t)F, qn = e->qk_whole || e->qk_heads ? (size_t)q : (size_t)e->Dh;
    size_t kn = e->qk_whole || e->qk_heads ? (size_t)kv : (size_t)e->Dh;
    /* the parts in the reference's row order (ref-impl.h: Q, K, V rows; gate rows, then up rows) */
    int nh = e->H + 2 * e->Hk, nqkv = 3;
    cu_part *qkv = malloc(sizeof *qkv * (size_t)nh);
    if (!qkv) rc = rc ? rc : tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
    else if (m->fused_qkv && m->qkv_interleaved) { /* a part per head, from where tm_qkv_row puts it */
        for (int pt = 0, i = 0; pt < 3; pt++)
            for (int h = 0; h < (pt ? e->Hk : e->H); h++, i++)
                qkv[i] = (cu_part){&lw->wqkv, tm_qkv_row(m, pt, h, 0), e->Dh};
        nqkv = nh;
    } else if (m->fused_qkv) {
        qkv[0] = (cu_part){&lw->wqkv, 0, q + 2 * kv}, nqkv = 1;
    } else {
        qkv[0] = (cu_part){&lw->wq, 0, q}, qkv[1] = (cu_part){&lw->wk, 0, kv}, qkv[2] = (cu_part){&lw->wv, 0, kv};
    }
    cu_part gu[2] = {{&lw->w_gate, 0, F}, {&lw->w_up, 0, F}}, wo = {&lw->wo, 0, D}, wd = {&lw->w_down, 0, D};
    int ngu = e->gated ? 2 : 1;
    if (m->fused_gate_up) gu[0] = (cu_part){&lw->w_gate_up, 0, 2 * F}, ngu = 1;
    else if (!e->gated) gu[0] = gu[1];
    if (rc == TM_OK && m->mla) { /* its projections (cu_mla.h); the o projection reads H v */
        if (!(w->mla = calloc(1, sizeof *w->mla))) rc = tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
        else rc = cu_mla_up(w->mla, e->st, m, l, &o, e->packed, tmp, STAGE_FLOATS, err);
    } else if (rc == TM_OK) {
        rc = up_mat(e, &w->wqkv, qkv, nqkv, D, o.wqkv, tmp, err);
    }
    if (rc == TM_OK) rc = up_mat(e, &w->wo, &wo, 1, m->mla ? (int64_t)e->H * m->v_dim : q, o.wo, tmp, err);
    if (rc == TM_OK && !m->layer[l].moe) rc = up_mat(e, &w->wgu, gu, ngu, D, o.wgu, tmp, err);
    if (rc == TM_OK && !m->layer[l].moe) rc = up_mat(e, &w->wd, &wd, 1, F, o.wd, tmp, err);
    if (rc == TM_OK && m->layer[l].moe) {
        if (!(w->moe = calloc(1, sizeof *w->moe))) rc = tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
        else if ((rc = cu_moe_up(w->moe, e->st, m, l, e->packed, tmp, STAGE_FLOATS, err))) free(w->moe), w->moe = NULL;
    }
    free(qkv);
    struct { float **d; const float *h; size_t n; } v[] = {
        {&w->attn_norm, o.attn_norm, D}, {&w->attn_norm_b, o.attn_norm_b, D}, {&w->ffn_norm, o.ffn_norm, D},
        {&w->ffn_norm_b, o.ffn_norm_b, D}, {&w->attn_out_norm, o.attn_out_norm, D},
        {&w->ffn_out_norm, o.ffn_out_norm, D}, {&w->bqkv, o.bqkv, q + 2 * kv}, {&w->bo, o.bo, D},
        {&w->bgu, o.bgu, nr}, {&w->bd, o.bd, D}, {&w->q_norm, o.q_norm, qn}, {&w->k_norm, o.k_norm, kn},
        {&w->q_norm_b, o.q_norm_b, (size_t)e->Dh}, {&w->k_norm_b, o.k_norm_b, (size_t)e->Dh},
        {&w->sinks, o.sinks, (size_t)e->H},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0] && rc == TM_OK; i++) rc = up_f32(e, v[i].d, v[i].h, v[i].n, err);
    tm_ref_layer_free(&o);
    return rc;
}

static void cu_unbind(void *vctx)
{
    cu_eng *e = vctx;
    if (!e) return;
    prof_free(e);
    if (e->w)
        for (int l = 0; l < e->L; l++) {
            cu_layer *w = &e->w[l];
            cu_mat *mats[] = {&w->wqkv, &w->wo, &w->wgu, &w->wd};
            for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) cu_mat_free(mats[i]);
            void *p[] = {w->attn_norm, w->attn_norm_b, w->ffn_norm, w->ffn_norm_b, w->attn_out_norm, w->ffn_out_norm,
                         w->bqkv, w->bo, w->bgu, w->bd, w->q_norm, w->k_norm, w->q_norm_b, w->k_norm_b, w->sinks};
            for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
            if (w->moe) cu_moe_free(w->moe), free(w->moe);
            if (w->mla) cu_mla_free(w->mla), free(w->mla);
        }
    free(e->w);
    cu_moe_ws_free(&e->mws);
    cu_mla_ws_free(&e->lws);
    if (e->lm_head.bf != e->embed) cu_mat_free(&e->lm_head);
    cudaFree(e->mm.dq);
    void *p[] = {e->embed, e->final_norm, e->final_norm_b, e->lm_head_b, e->pos_embed, e->embed_norm, e->embed_norm_b,
                 e->alibi, e->kc, e->vc, e->tok, e->x, e->x0, e->qkv, e->a, e->gu, e->logits, e->h16, e->att16,
                 e->g16, e->exp_dev, e->in_dev, e->attn_part, e->rope[0].inv, e->rope[0].inv_long, e->rope[1].inv,
                 e->rope[1].inv_long};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
    cudaFreeHost(e->exp_host[0]);
    cudaFreeHost(e->exp_host[1]);
    cudaFreeHost(e->in_host);
    cudaFreeHost(e->up_host);
    cudaFreeHost(e->meta_host);
    cudaFreeHost(e->dexp_host);
    cudaFreeHost(e->amax_host);
    cudaFreeHost(e->rows_host);
    cudaFree(e->rows_dev);
    cu_step_graphs_drop(e);
    void *dp[] = {e->arena,    e->meta_dev, e->dexp_dev, e->dlogits, e->dpart,
                  e->dcnt,     e->amax_dev, e->amax_scr, e->amax_cnt, e->rcnt};
    for (size_t i = 0; i < sizeof dp / sizeof dp[0]; i++) cudaFree(dp[i]);
    for (int i = 0; i < CU_DSEQ; i++) free(e->ds[i].pages);
    for (int i = 0; i < 2; i++)
        if (e->ev0[i]) cudaEventDestroy(e->ev0[i]);
    if (e->blas) cublasDestroy(e->blas);
    cudaFree(e->blas_ws);
    if (e->st0) cudaStreamDestroy(e->st0);
    cu_smset_close(&e->part);
    free(e->layer);
    free(e->m_pages);
    free(e);
}

/* The call's stream (cu_smset.h): the engine's part of the device, or the whole device where it has no
 * part or the other engine is idle (alone). The calls before have synchronised, so nothing is in flight. */
static void lane_pick(cu_eng *e, int alone)
{
    int ln = e->part.st && !alone;
    if (ln == e->lane) return;
    e->lane = ln;
    e->st = e->mm.st = ln ? e->part.st : e->st0;
    for (int i = 0; i < 2; i++) e->ev[i] = ln ? e->part.ev[i] : e->ev0[i];
    e->sms = ln ? e->part.sms : e->sms0;
    cublasSetStream(e->blas, e->st);
}

/* what the engine cannot run, named */
static int cu_check_model(const tm_model *m, tm_err *err)
{
    if (!m || !m->bound) return tm_errf(err, TM_E_INVALID, "cuda engine: the model has no weights bound");
    if (m->mla && (m->Dh > CU_MLA_MAX_DH || m->Dh % 8 || m->Hk != 1))
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: %s: latent attention of head_dim %d over %d kv heads (one, "
                       "a multiple of 8, at most %d)", m->arch_name, m->Dh, m->Hk, CU_MLA_MAX_DH);
    for (int l = 0; m->mla && l < m->L; l++)
        if (m->layer[l].sliding || m->attn_softcap != 0.f || m->alibi || m->w[l].sinks.data)
            return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: %s: latent attention with a sliding window, softcap, "
                           "ALiBi or sinks", m->arch_name);
    if (m->n_experts > 0 && (m->top_k < 1 || m->top_k > CU_MOE_MAX_K || m->n_experts > CU_MOE_MAX_E))
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: %s: %d experts a token of %d (at most %d of %d)", m->arch_name,
                       m->top_k, m->n_experts, CU_MOE_MAX_K, CU_MOE_MAX_E);
    if (!m->mla && (m->Dh > CU_MAX_DH || m->Dh < 16 || m->Dh % 16))
        return tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: head_dim %d (a multiple of 16, at most %d: the tensor-core "
                       "attention's tiles)", m->Dh, CU_MAX_DH);
    if (m->Hk < 1 || m->H % m->Hk)
        return tm_errf(err, TM_E_INVALID, "cuda engine: %d heads over %d kv heads", m->H, m->Hk);
    return TM_OK;
}

static int cu_alloc(void **p, size_t bytes, tm_err *err)
{
    CK(cudaMalloc(p, bytes), "cudaMalloc (scratch)");
    return TM_OK;
}

/* bytes of one layer's export region in a decode step of B rows of esz-byte elements: rows [2][Hk][B][Dh],
 * then scales [2][Hk][B] f32 (cu_qkv_post's layout), rounded up to 256 */
size_t cu_eng_dexp_stride(const cu_eng *e, int B, size_t esz)
{
    size_t n = 2 * (size_t)e->Hk * B * ((size_t)e->Dh * esz + sizeof(float));
    return (n + 255) & ~(size_t)255;
}

static int cu_bind(void **out, const tm_model *m, const tm_engine_opts *opts, tm_err *err)
{
    *out = NULL;
    int rc = cu_check_model(m, err);
    if (rc) return rc;
    if (opts->max_ctx < 1) return tm_errf(err, TM_E_INVALID, "cuda engine: max_ctx %d", opts->max_ctx);
    cu_eng *e = calloc(1, sizeof *e);
    if (!e) return tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
    e->V = m->V, e->D = m->D, e->L = m->L, e->H = m->H, e->Hk = m->Hk, e->Dh = m->Dh, e->F = m->F;
    const char *pk = getenv("TANDEM_CUDA_PACKED");
    e->packed = (!opts->roles || (opts->roles & TM_ROLE_DECODE)) && !(pk && !strcmp(pk, "0"));
    e->dual = e->packed && dual_fits(m);
    e->gated = m->gated, e->parallel = m->parallel, e->qk_whole = m->qk_norm == 2, e->qk_heads = m->qk_norm_heads;
    e->norm_kind = m->norm == TM_NORM_LAYER, e->act = m->act, e->cap = opts->max_ctx;
    e->eps = m->eps, e->embed_scale = m->embed_scale, e->attn_scale = m->attn_scale, e->attn_softcap = m->attn_softcap;
    e->final_softcap = m->final_softcap, e->residual_scale = m->residual_scale, e->logits_div = m->logits_div;
    e->logits_mul = m->logits_mul, e->clip = m->clip_qkv, e->pos_off = m->pos_offset, e->max_pos = m->max_pos;
    float *tmp = NULL;
    if (!(e->layer = malloc(sizeof *e->layer * (size_t)m->L)) || !(e->w = calloc((size_t)m->L, sizeof *e->w))) {
        rc = tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
        goto fail;
    }
    memcpy(e->layer, m->layer, sizeof *e->layer * (size_t)m->L);
    cudaError_t ce;
    /* urgent (engine.h): the device's greatest stream priority; TANDEM_CUDA_PRIORITY=0: none (a measurement switch) */
    const char *pe = getenv("TANDEM_CUDA_PRIORITY");
    int urgent = opts->urgent && !(pe && !strcmp(pe, "0")), prio_lo = 0, prio_hi = 0;
    e->prio = urgent && cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi) == cudaSuccess ? prio_hi : 0;
    if ((ce = cudaStreamCreateWithPriority(&e->st0, cudaStreamNonBlocking, e->prio)) != cudaSuccess ||
        (ce = cudaEventCreateWithFlags(&e->ev0[0], cudaEventDisableTiming)) != cudaSuccess ||
        (ce = cudaEventCreateWithFlags(&e->ev0[1], cudaEventDisableTiming)) != cudaSuccess ||
        (ce = cudaMalloc((void **)&tmp, STAGE_FLOATS * sizeof(float))) != cudaSuccess) {
        rc = cu_err(err, ce, "setting up the device");
        goto fail;
    }
    e->st = e->st0, e->ev[0] = e->ev0[0], e->ev[1] = e->ev0[1];
    /* cuBLAS's workspace is ours, so that a captured decode step allocates nothing */
    if ((ce = cudaMalloc(&e->blas_ws, BLAS_WS)) != cudaSuccess) {
        rc = cu_err(err, ce, "cudaMalloc (cuBLAS workspace)");
        goto fail;
    }
    if (cublasCreate(&e->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(e->blas, e->st) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(e->blas, e->blas_ws, BLAS_WS) != CUBLAS_STATUS_SUCCESS) {
        rc = tm_errf(err, TM_E_IO, "cuda engine: cuBLAS could not start");
        goto fail;
    }
    size_t D = (size_t)m->D;
    if ((rc = up_rows(e, &e->embed, &m->embed, m->V, m->D, tmp, err))) goto fail;
    e->lm_head = (cu_mat){.N = m->V, .K = m->D, .bf = e->embed};
    if (!m->tied || m->lm_head.data != m->embed.data) {
        cu_part hp = {&m->lm_head, 0, m->V};
        rc = e->packed ? cu_mat_up_packed(&e->lm_head, e->st, &hp, 1, m->D, err) : 1;
        if (rc == 1) {
            e->lm_head = (cu_mat){.N = m->V, .K = m->D};
            rc = up_rows(e, &e->lm_head.bf, &m->lm_head, m->V, m->D, tmp, err);
        }
        if (rc) goto fail;
    }
    float *fn = tm_ref_norm_w(&m->final_norm, m->D, m->norm_add_one, err);
    if (!fn) { rc = err->code ? err->code : TM_E_INVALID; goto fail; }
    rc = up_f32(e, &e->final_norm, fn, D, err);
    free(fn);
    if (rc) goto fail;
    struct { float **d; const tm_tensor *t; int64_t n; } vec[] = {
        {&e->final_norm_b, &m->final_norm_b, m->D}, {&e->lm_head_b, &m->lm_head_b, m->V},
        {&e->embed_norm, &m->embed_norm, m->D}, {&e->embed_norm_b, &m->embed_norm_b, m->D},
        {&e->pos_embed, &m->pos_embed, (int64_t)(m->max_pos + m->pos_offset) * m->D},
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        if (!vec[i].t->data) continue;
        float *h = tm_ref_to_f32(vec[i].t, vec[i].n, 1, err);
        if (!h) { rc = err->code ? err->code : TM_E_INVALID; goto fail; }
        rc = up_f32(e, vec[i].d, h, (size_t)vec[i].n, err);
        free(h);
        if (rc) goto fail;
    }
    if ((rc = up_f32(e, &e->alibi, m->alibi, (size_t)m->H, err))) goto fail;
    for (int i = 0; i < m->n_rope && i < 2; i++) {
        const tm_rope *r = &m->rope[i];
        cu_rope *c = &e->rope[i];
        c->rot_dim = r->rot_dim, c->scale = r->attn_scaling;
        c->long_from = r->inv_freq_long ? r->original_max_pos : INT64_MAX;
        if ((rc = up_f32(e, &c->inv, r->inv_freq, (size_t)r->rot_dim / 2, err)) ||
            (rc = up_f32(e, &c->inv_long, r->inv_freq_long, (size_t)r->rot_dim / 2, err)))
            goto fail;
    }
    for (int l = 0; l < m->L; l++)
        if ((rc = up_layer(e, m, l, tmp, err))) goto fail;
    /* the products: a packed matrix over more rows than the GEMV takes is dequantized into mm.dq (not the
       head: its rows are a step's, at most CU_MAX_B, and it always runs the GEMV, so that no scratch of
       V x D bf16 is needed) */
    size_t dq = 0;
    const char *mix = getenv("TANDEM_CUDA_MOE_IX"), *mmm = getenv("TANDEM_CUDA_MOE_MM");
    e->moe_paths = (mix && !strcmp(mix, "0") ? 0 : CU_MOE_PATH_IX) | (mmm && !strcmp(mmm, "0") ? 0 : CU_MOE_PATH_MM);
    e->moe_capture_rows = INT32_MAX;
    for (int l = 0; l < m->L; l++) {
        const cu_mat *mats[] = {&e->w[l].wqkv, &e->w[l].wo, &e->w[l].wgu, &e->w[l].wd};
        for (int i = 0; i < 4; i++) dq = cu_mat_dq_bytes(mats[i]) > dq ? cu_mat_dq_bytes(mats[i]) : dq;
        if (e->w[l].mla) dq = cu_mla_dq_bytes(e->w[l].mla) > dq ? cu_mla_dq_bytes(e->w[l].mla) : dq;
        const cu_moe *mo = e->w[l].moe;
        if (!mo) continue;
        dq = cu_moe_dq_bytes(mo) > dq ? cu_moe_dq_bytes(mo) : dq;
        int cr = cu_moe_capture_rows(mo, e->moe_paths);
        e->moe_capture_rows = cr < e->moe_capture_rows ? cr : e->moe_capture_rows;
    }
    if (m->n_experts > 0 && (rc = cu_moe_ws_init(&e->mws, m, CU_MAX_T, err))) goto fail;
    if (m->mla && (rc = cu_mla_ws_init(&e->lws, m, CU_MAX_T, e->cap, err))) goto fail;
    const char *gm = getenv("TANDEM_CUDA_GEMV_MAX");
    e->mm = (cu_mm){.blas = e->blas, .st = e->st, .gemv_max = gm && atoi(gm) >= 0 ? atoi(gm) : CU_GEMV_MAX};
    if (dq && (rc = cu_alloc((void **)&e->mm.dq, dq, err))) goto fail;
    size_t T = CU_MAX_T, nq = (size_t)(m->H + 2 * m->Hk) * m->Dh, F = (size_t)m->F;
    size_t mir = (size_t)m->L * m->Hk * (size_t)e->cap * m->Dh * sizeof(uint16_t);
    e->exp_bytes = 2 * (size_t)m->Hk * T * m->Dh * 4 + 2 * (size_t)m->Hk * T * sizeof(float);
    if ((rc = cu_alloc((void **)&e->kc, mir, err)) || (rc = cu_alloc((void **)&e->vc, mir, err)) ||
        (rc = cu_alloc((void **)&e->tok, T * sizeof(int32_t), err)) ||
        (rc = cu_alloc((void **)&e->x, T * D * sizeof(float), err)) ||
        (m->parallel && (rc = cu_alloc((void **)&e->x0, T * D * sizeof(float), err))) ||
        (rc = cu_alloc((void **)&e->qkv, T * nq * sizeof(float), err)) ||
        (rc = cu_alloc((void **)&e->a, T * D * sizeof(float), err)) ||
        (rc = cu_alloc((void **)&e->gu, T * 2 * F * sizeof(float), err)) ||
        (rc = cu_alloc((void **)&e->logits, (size_t)m->V * sizeof(float), err)) ||
        (rc = cu_alloc((void **)&e->h16, T * D * sizeof(uint16_t), err)) ||
        (rc = cu_alloc((void **)&e->att16, T * (size_t)m->H * m->Dh * sizeof(uint16_t), err)) ||
        (rc = cu_alloc((void **)&e->g16, T * F * sizeof(uint16_t), err)) ||
        (rc = cu_alloc(&e->exp_dev, e->exp_bytes, err)))
        goto fail;
    /* up to 16 key segments, within 256 MB of scratch */
    e->attn_smax = m->mla ? 1 : 16; /* (latent attention: cu_mla_attention's scratch instead) */
    while (e->attn_smax > 1 && cu_attention_scratch(CU_MAX_T, m->H, m->Dh, e->attn_smax) > ((size_t)256 << 20))
        e->attn_smax--;
    if (e->attn_smax > 1 &&
        (rc = cu_alloc((void **)&e->attn_part, cu_attention_scratch(CU_MAX_T, m->H, m->Dh, e->attn_smax), err)))
        goto fail;
    for (int i = 0; i < 2; i++)
        if ((ce = cudaMallocHost((void **)&e->exp_host[i], e->exp_bytes)) != cudaSuccess) {
            rc = cu_err(err, ce, "cudaMallocHost");
            goto fail;
        }
    cudaFree(tmp);
    prof_init(e);
    if (!m->mla && !cu_attention_setup(m->Dh)) {
        rc = tm_errf(err, TM_E_UNSUPPORTED, "cuda engine: the attention's shared memory for head_dim %d", m->Dh);
        goto fail;
    }
    e->attn_split = getenv("TANDEM_CUDA_SPLIT") ? atoi(getenv("TANDEM_CUDA_SPLIT")) : 0;
    const char *ds = getenv("TANDEM_CUDA_DEC_SEGS");
    e->dseg_force = ds ? (atoi(ds) < 1 ? 1 : atoi(ds) > 256 ? 256 : atoi(ds)) : -1;
    const char *dm = getenv("TANDEM_CUDA_DEC_MMA");
    e->dec_mma_from = dm && !strcmp(dm, "0") ? INT_MAX : cu_step_mma_span(e->H, e->Hk);
    e->g_dt = -1;
    e->use_graphs = !getenv("TANDEM_CUDA_GRAPHS") || strcmp(getenv("TANDEM_CUDA_GRAPHS"), "0");
    const char *fr = getenv("TANDEM_CUDA_FUSE_RES"); /* res_step */
    e->fuse_res = !fr ? 2 : !strcmp(fr, "0") ? 0 : 1;
    /* programmatic dependent launch (cu_launch.cuh) on sm_90 and later; TANDEM_CUDA_PDL=0: none (a
       measurement switch) */
    int dev = 0, major = 0;
    const char *pdl = getenv("TANDEM_CUDA_PDL");
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess)
        e->pdl = major >= 9 && !(pdl && !strcmp(pdl, "0"));
    if (cudaDeviceGetAttribute(&e->sms0, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) e->sms0 = 1 << 30;
    e->sms = e->sms0;
    /* a share of the device (cu_smset.h); where the driver cannot split it, the whole device. Not with the
       profile, whose events are the primary context's */
    if (opts->part && !e->prof) {
        tm_err e2 = {0};
        if (cu_smset_open(&e->part, dev, opts->part, opts->part_share, e->prio, &e2) == TM_OK) e->lane = -1, lane_pick(e, 0);
    }
    *out = e;
    return TM_OK;
fail:
    cudaFree(tmp);
    cu_unbind(e);
    return rc;
}

/* ---- one forward call: a prefill chunk or a decode step ---------------------------------------- */


/* y[T][N] = x[T][K] · wᵀ (cu_mat.h picks cuBLAS or the GEMV; gemv 1: the GEMV whatever T if packed only, up
 * to CU_GEMV_DUAL rows where w keeps its bf16 copy: a
 * decode step's products and the head, whose rows are at most CU_MAX_B; the GEMV in groups of 8 reads a
 * packed weight ceil(B / 8) times, the later ones mostly from L2, against 4.5 bytes a weight for the
 * dequantized copy and cuBLAS, which a prefill chunk of more than CU_GEMV_MAX rows takes). ep: the FFN's
 * first product's activation after it into ep->g (cu_mat_mul_act), or where ep->x is set the residual add
 * and the next norm (cu_mat_mul_res: res_step); y is then the f32 scratch of their unfused forms */
static int gemm(cu_eng *e, float *y, const uint16_t *x, const cu_mat *w, int T, int gemv, const cu_gemv_epi *ep,
                tm_err *err)
{
    int cat = e->prof ? e->prof->gemm_cat : PROF_GEMM;
    if (e->prof && !e->prof->decoding && cat == PROF_GEMM) e->prof->gemm_flop += 2.0 * T * w->N * w->K;
    cu_prof_mark(e, cat, 0);
    cu_mm mm = e->mm;
    if (gemv) mm.gemv_max = w->bf ? CU_GEMV_DUAL : CU_MAX_B;
    int rc = ep && ep->x ? cu_mat_mul_res(&mm, ep, x, w, T, y, err)
             : ep        ? cu_mat_mul_act(&mm, ep, x, w, T, y, err)
                         : cu_mat_mul(&mm, y, x, w, T, err);
    cu_prof_mark(e, cat, 1);
    return rc;
}

/* x += (in · wᵀ + bias) * residual_scale, post-normed by post_w (NULL: none), then, where nw is not NULL,
 * h16 = the next norm of x by nw, nb: the product then cu_residual, or, in a decode step without a
 * post-norm, one launch (the GEMV's residual epilogue, cu_gemv_res; bit-identical). By default only where
 * the GEMV's launch has a block for every SM at least and splits each row set's K over at most 2 warps
 * (fuse_here). On an H100 (docs/benchmarks.md "Session 52") the fused form ran tg128 1.03-1.07x on the
 * Llama-1B shape (o and down: 256 blocks, 2 warps a row set) and 0.96-0.98x on Qwen-0.5B's down (224 blocks,
 * 4 warps; its o has 56), with x read right after the PDL wait (session 52) as without: the rule is that
 * measured split of two shapes, its cause not established. TANDEM_CUDA_FUSE_RES=1: wherever it can, 0: never */
static int fuse_here(const cu_eng *e, const cu_qmat *q)
{
    int ks, blocks = cu_gemv_blocks(q, &ks);
    return e->fuse_res == 1 || (e->fuse_res == 2 && blocks >= e->sms && ks <= 2);
}

static int res_step(cu_eng *e, const uint16_t *in, const cu_mat *w, int T, int decode, const float *bias,
                    const float *post_w, const float *nw, const float *nb, float *h32, tm_err *err)
{
    if (decode && !post_w && w->q.q && fuse_here(e, &w->q)) {
        cu_gemv_epi ep = {.b = bias, .x = e->x, .scale = e->residual_scale, .eps = e->eps, .nkind = e->norm_kind,
                          .nw = nw, .nb = nb, .h16 = e->h16, .h32 = h32, .cnt = e->rcnt};
        return gemm(e, e->a, in, w, T, 1, &ep, err);
    }
    int rc = gemm(e, e->a, in, w, T, decode, NULL, err);
    if (rc == TM_OK)
        cu_residual(e->st, e->x, e->a, bias, post_w, e->eps, e->residual_scale, T, e->D, e->norm_kind, nw, nb, e->h16,
                    h32);
    return rc;
}

/* the cache geometry and dtype a call may use */
int cu_eng_check_cache(const cu_eng *e, const tm_kv_cache_opts *o, const char *who, tm_err *err)
{
    if (o->n_layers != e->L || o->n_kv_heads != e->Hk || o->head_dim != e->Dh)
        return tm_errf(err, TM_E_INVALID, "%s: the KV cache is %d layers x %d heads x %d, the model %d x %d x %d", who,
                       o->n_layers, o->n_kv_heads, o->head_dim, e->L, e->Hk, e->Dh);
    if (o->dtype != TM_DT_BF16 && o->dtype != TM_DT_F16 && o->dtype != TM_DT_F32 && o->dtype != TM_DT_Q8PC)
        return tm_errf(err, TM_E_UNSUPPORTED, "%s: KV cache dtype %s", who, tm_dtype_name(o->dtype));
    return TM_OK;
}





/* layer l's mixture-of-experts FFN (cu_moe.h) of its input fin [T][D]: the norm in f32 (the router's input) and
 * bf16 (the experts'), unless the attention's residual pass wrote both (normed: the cu_eng_layer's ff), the block's
 * output into a, then the residual add with the next layer's norm fused */
static int moe_ffn(cu_eng *e, const cu_call *c, int l, const float *fin, int normed, tm_err *err)
{
    const cu_layer *w = &e->w[l];
    int T = c->T, D = e->D;
    float *h32 = e->mws.h32;
    if (!normed && w->ffn_norm) {
        cu_norm(e->st, e->norm_kind, T, D, fin, D, w->ffn_norm, w->ffn_norm_b, e->eps, h32, e->h16, D);
    } else if (!normed) {
        CK(cudaMemcpyAsync(h32, fin, sizeof(float) * (size_t)T * D, cudaMemcpyDeviceToDevice, e->st), "copy");
        cu_to_bf16(e->st, e->h16, h32, (size_t)T * D);
    }
    cu_mm mm = e->mm;
    if (c->decode) mm.gemv_max = CU_MAX_B; /* as gemm() for a decode step's products over packed weights */
    cu_prof_mark(e, PROF_MOE, 0);
    int rc = cu_moe_forward(w->moe, &e->mws, &mm, e->h16, h32, T, e->moe_paths, e->a, err);
    cu_prof_mark(e, PROF_MOE, 1);
    if (rc) return rc;
    const cu_layer *nx = l + 1 < e->L ? &e->w[l + 1] : NULL;
    e->h_fused = nx && nx->attn_norm;
    cu_residual(e->st, e->x, e->a, NULL, w->ffn_out_norm, e->eps, e->residual_scale, T, D, e->norm_kind,
                e->h_fused ? nx->attn_norm : NULL, e->h_fused ? nx->attn_norm_b : NULL, e->h16, NULL);
    CK(cudaGetLastError(), "a kernel launch");
    return TM_OK;
}

/* the latent attention's products (cu_mla.h's mul): gemm() with the call's rule for packed weights */
typedef struct mla_call {
    cu_eng *e;
    int decode;
} mla_call;
static int mla_mul(void *ctx, float *y, const uint16_t *x, const cu_mat *w, int T, tm_err *err)
{
    const mla_call *mc = ctx;
    return gemm(mc->e, y, x, w, T, mc->decode, NULL, err);
}

int cu_eng_layer(cu_eng *e, const cu_call *c, int l, tm_err *err)
{
    const cu_layer *w = &e->w[l];
    const tm_layer_desc *ld = &e->layer[l];
    int D = e->D, Dh = e->Dh, H = e->H, Hk = e->Hk, nq = (H + 2 * Hk) * Dh, F = e->F, T = c->T, rc;
    size_t lay = (size_t)l * Hk * e->cap * Dh;
    if (!e->h_fused) { /* else the last layer's residual pass left norm(x) in h16 */
        if (w->attn_norm) cu_norm(e->st, e->norm_kind, T, D, e->x, D, w->attn_norm, w->attn_norm_b, e->eps, NULL, e->h16, D);
        else cu_to_bf16(e->st, e->h16, e->x, (size_t)T * D);
    }
    if (e->parallel) CK(cudaMemcpyAsync(e->x0, e->x, sizeof(float) * (size_t)T * D, cudaMemcpyDeviceToDevice, e->st), "copy");
    mla_call mc = {e, c->decode};
    if ((rc = w->mla ? cu_mla_qkv(w->mla, &e->lws, mla_mul, &mc, e->blas, e->st, e->h16, T, e->qkv, err)
                     : gemm(e, e->qkv, e->h16, &w->wqkv, T, c->decode, NULL, err)))
        return rc;
    size_t rb = (size_t)Dh * kv_esz(c->kv_dt);
    uint8_t *exp = c->decode ? e->dexp_dev + (size_t)l * c->dstride : (uint8_t *)e->exp_dev;
    cu_qkv_args q = {.qkv = e->qkv, .T = T, .n_valid = c->n_valid, .pos0 = c->pos0, .pos = c->dpos, .H = H, .Hk = Hk,
                     .Dh = Dh, .bias = w->bqkv, .clip = e->clip, .qn = w->q_norm, .kn = w->k_norm, .qnb = w->q_norm_b,
                     .knb = w->k_norm_b, .per_head = e->qk_heads, .norm_kind = e->norm_kind, .eps = e->eps,
                     .kc = c->decode ? NULL : e->kc + lay, .vc = c->decode ? NULL : e->vc + lay, .cap = e->cap,
                     .exp_rows = exp, .exp_scale = (float *)(exp + 2 * (size_t)Hk * T * rb),
                     .exp_dtype = kv_code(c->kv_dt)};
    if (ld->rope >= 0) {
        const cu_rope *r = &e->rope[ld->rope];
        q.inv = c->span > r->long_from ? r->inv_long : r->inv;
        q.rot_dim = r->rot_dim, q.rope_scale = r->scale;
    }
    if (e->qk_whole) { /* OLMo 2: bias and clamp, one norm over all of q and all of k, then the rest */
        cu_qkv_args p = q;
        p.qn = p.kn = NULL, p.inv = NULL, p.kc = p.vc = NULL, p.exp_rows = NULL;
        p.Hk = 0, p.H = H + 2 * Hk; /* every head a "query": bias and clamp in place, nothing else */
        cu_qkv_post(e->st, &p);
        cu_norm(e->st, e->norm_kind, T, H * Dh, e->qkv, nq, w->q_norm, NULL, e->eps, e->qkv, NULL, nq);
        cu_norm(e->st, e->norm_kind, T, Hk * Dh, e->qkv + (size_t)H * Dh, nq, w->k_norm, NULL, e->eps,
                e->qkv + (size_t)H * Dh, NULL, nq);
        q.bias = NULL, q.clip = 0, q.qn = q.kn = NULL;
    }
    cu_prof_mark(e, PROF_QKV, 0);
    cu_qkv_post(e->st, &q);
    cu_prof_mark(e, PROF_QKV, 1);
    int window = ld->sliding ? ld->window : 0;
    if (c->decode) {
        cu_step_attention(e, c, l, window, w->sinks, exp, rb);
    } else {
        /* the rows leave for the pages while the attention and the FFN run */
        CK(cudaMemcpyAsync(e->exp_host[l & 1], e->exp_dev, 2 * (size_t)Hk * T * (rb + sizeof(float)),
                           cudaMemcpyDeviceToHost, e->st), "KV export");
        CK(cudaEventRecord(e->ev[l & 1], e->st), "cudaEventRecord");
        cu_attn_args at = {.qkv = e->qkv, .nqkv = nq, .T = T, .n_valid = c->n_valid, .pos0 = c->pos0, .H = H,
                           .Hk = Hk, .Dh = Dh, .kc = e->kc + lay, .vc = e->vc + lay, .cap = e->cap, .window = window,
                           .scale = e->attn_scale, .softcap = e->attn_softcap, .alibi = e->alibi, .sinks = w->sinks,
                           .out = e->att16};
        cu_prof_mark(e, PROF_ATTN, 0);
        /* keys in segments of ~1024 per block (cu_attn.cu): enough blocks for the GPU at long contexts */
        int S = e->attn_split > 0 ? e->attn_split : (c->pos0 + T) / 1024;
        S = S < 1 ? 1 : S > e->attn_smax ? e->attn_smax : S;
        if (w->mla) rc = cu_mla_attention(w->mla, &e->lws, e->blas, e->st, e->qkv, T, c->n_valid, c->pos0, at.kc, at.vc,
                                          e->attn_scale, e->att16, err);
        else cu_attention(e->st, &at, e->attn_part, S);
        cu_prof_mark(e, PROF_ATTN, 1);
        if (rc) return rc;
    }
    const uint16_t *att = e->att16; /* the o projection's input: latent attention's heads taken out of the latent */
    if (w->mla && (rc = cu_mla_out(w->mla, &e->lws, e->blas, e->att16, T, err))) return rc;
    if (w->mla) att = e->lws.o16;
    /* the FFN's norm fused into the residual pass (a mixture of experts' in f32 too: the router's input) */
    int ff = !e->parallel && w->ffn_norm;
    if ((rc = res_step(e, att, &w->wo, T, c->decode, w->bo, w->attn_out_norm, ff ? w->ffn_norm : NULL,
                       w->ffn_norm_b, ff && w->moe ? e->mws.h32 : NULL, err)))
        return rc;
    const float *fin = e->parallel ? e->x0 : e->x;
    if (w->moe) return moe_ffn(e, c, l, fin, ff, err);
    if (!ff && w->ffn_norm) cu_norm(e->st, e->norm_kind, T, D, fin, D, w->ffn_norm, w->ffn_norm_b, e->eps, NULL, e->h16, D);
    else if (!ff) cu_to_bf16(e->st, e->h16, fin, (size_t)T * D);
    /* g = act(gate) ⊙ up (or act(up)), fused into the GEMV over packed weights */
    cu_gemv_epi ep = {.gated = e->gated, .act = e->act, .F = F, .ldg = F, .b = w->bgu, .g = e->g16};
    if ((rc = gemm(e, e->gu, e->h16, &w->wgu, T, c->decode, &ep, err))) return rc;
    const cu_layer *nx = l + 1 < e->L ? &e->w[l + 1] : NULL; /* and the next layer's attention norm */
    e->h_fused = nx && nx->attn_norm;
    if ((rc = res_step(e, e->g16, &w->wd, T, c->decode, w->bd, w->ffn_out_norm, e->h_fused ? nx->attn_norm : NULL,
                       e->h_fused ? nx->attn_norm_b : NULL, NULL, err)))
        return rc;
    CK(cudaGetLastError(), "a kernel launch");
    return TM_OK;
}

/* the embedding of the call's T tokens (already up in e->tok) into x */
void cu_eng_embed(cu_eng *e, int T, int pos0, const int *dpos)
{
    e->h_fused = 0;
    cu_embed(e->st, e->x, e->embed, e->tok, T, e->D, e->embed_scale, e->pos_embed, pos0, dpos, e->pos_off);
    if (e->embed_norm)
        cu_norm(e->st, e->norm_kind, T, e->D, e->x, e->D, e->embed_norm, e->embed_norm_b, e->eps, e->x, NULL, e->D);
}

/* logits [R][V] into dev of the rows x + rows[r] * D (consecutive from row0 when R rows follow) */
int cu_eng_logits(cu_eng *e, float *dev, int row0, int R, tm_err *err)
{
    cu_norm(e->st, e->norm_kind, R, e->D, e->x + (size_t)row0 * e->D, e->D, e->final_norm, e->final_norm_b, e->eps, NULL,
            e->h16, e->D);
    if (e->prof) e->prof->gemm_cat = PROF_HEAD;
    int rc = gemm(e, dev, e->h16, &e->lm_head, R, 1, NULL, err);
    if (e->prof) e->prof->gemm_cat = PROF_GEMM;
    if (rc) return rc;
    cu_logits_finish(e->st, dev, e->lm_head_b, R, e->V, e->logits_div, e->logits_mul, e->final_softcap);
    return TM_OK;
}

/* Export rows of layer l (layout [2][Hk][T] rows of the cache's dtype, then their scales) into the host
 * pages: row t < n at position pos ? pos[t] : pos0 + t of sequence seqs ? seqs[t] : seq */
void cu_eng_scatter(const cu_eng *e, tm_kv_cache *kv, int l, const uint8_t *rows, int T, int n, int pos0,
                    const int *pos, const tm_kv_seq *seq, tm_kv_seq *const *seqs)
{
    const tm_kv_cache_opts *o = tm_kv_cache_info(kv);
    int Dh = e->Dh, ps = o->page_size, q8 = o->dtype == TM_DT_Q8PC;
    size_t rb = (size_t)Dh * kv_esz(o->dtype);
    const float *scales = (const float *)(rows + 2 * (size_t)e->Hk * T * rb);
    for (int kvi = 0; kvi < 2; kvi++)
        for (int g = 0; g < e->Hk; g++)
            for (int t = 0; t < n; t++) {
                int p = pos ? pos[t] : pos0 + t, slot = p % ps;
                int32_t pg = (seqs ? seqs[t] : seq)->pages[p / ps];
                uint8_t *b = kvi ? tm_kv_page_v(kv, pg, l, g) : tm_kv_page_k(kv, pg, l, g);
                size_t r = ((size_t)kvi * e->Hk + g) * T + t;
                if (q8) {
                    memcpy(b + 4 * (size_t)slot, &scales[r], 4);
                    memcpy(b + 4 * (size_t)ps + (size_t)slot * Dh, rows + r * rb, rb);
                } else {
                    memcpy(b + (size_t)slot * rb, rows + r * rb, rb);
                }
            }
}

/* ---- prefill ----------------------------------------------------------------------------------- */

/* does the mirror hold positions [0, pos0) of a->seq? (design block) */
/* Every valid row's final hidden state, then its logits (tm_prefill_args.on_row_hidden, on_row_logits; caps
 * row_hidden, row_logits): the final norm of rows [n_valid] into f32 scratch, copied down at once; the
 * logits in blocks of ROWS_BLK rows through the head (rows_dev [ROWS_BLK][V]), each block copied down and
 * handed over row by row on this thread while the next is not yet launched (the callbacks may take long) */
#define ROWS_BLK 16
static int rows_out(cu_eng *e, const tm_prefill_args *a, tm_err *err)
{
    int n = a->n_valid, D = e->D, V = e->V;
    size_t hb = sizeof(float) * (size_t)n * D, lb = sizeof(float) * (size_t)ROWS_BLK * V, need = hb > lb ? hb : lb;
    if (need > e->rows_cap) {
        cudaFreeHost(e->rows_host);
        e->rows_host = NULL, e->rows_cap = 0;
        CK(cudaMallocHost((void **)&e->rows_host, need), "cudaMallocHost (every row's output)");
        e->rows_cap = need;
    }
    if (a->on_row_hidden) {
        cu_norm(e->st, e->norm_kind, n, D, e->x, D, e->final_norm, e->final_norm_b, e->eps, e->a, NULL, D);
        CK(cudaMemcpyAsync(e->rows_host, e->a, hb, cudaMemcpyDeviceToHost, e->st), "hidden rows");
        CK(cudaStreamSynchronize(e->st), "hidden rows");
        for (int t = 0; t < n; t++) a->on_row_hidden(a->row_ud, t, e->rows_host + (size_t)t * D);
    }
    if (!a->on_row_logits) return TM_OK;
    if (!e->rows_dev) CK(cudaMalloc((void **)&e->rows_dev, lb), "cudaMalloc (every row's logits)");
    for (int r0 = 0; r0 < n; r0 += ROWS_BLK) {
        int R = n - r0 < ROWS_BLK ? n - r0 : ROWS_BLK, rc = cu_eng_logits(e, e->rows_dev, r0, R, err);
        if (rc) return rc;
        CK(cudaMemcpyAsync(e->rows_host, e->rows_dev, sizeof(float) * (size_t)R * V, cudaMemcpyDeviceToHost, e->st),
           "row logits");
        CK(cudaStreamSynchronize(e->st), "row logits");
        for (int t = 0; t < R; t++) a->on_row_logits(a->row_ud, r0 + t, e->rows_host + (size_t)t * V);
    }
    return TM_OK;
}

static int mirror_valid(const cu_eng *e, const tm_prefill_args *a)
{
    if (a->pos0 == 0) return 1;
    int ps = tm_kv_cache_info(a->kv)->page_size, np = (a->pos0 + ps - 1) / ps;
    return e->m_kv == a->kv && e->m_kuid == tm_kv_cache_uid(a->kv) && e->m_seq == a->seq && e->m_suid == a->seq->uid &&
           e->m_n == a->pos0 && e->m_epoch == tm_kv_cache_epoch(a->kv) && e->m_rewinds == a->seq->rewinds &&
           e->m_np >= np &&
           memcmp(e->m_pages, a->seq->pages, sizeof(int32_t) * (size_t)np) == 0;
}

/* the mirror's [0, pos0) from the pages (design block) */
static int ingest(cu_eng *e, const tm_prefill_args *a, tm_err *err)
{
    const tm_kv_cache_opts *o = tm_kv_cache_info(a->kv);
    int ps = o->page_size, np = (a->pos0 + ps - 1) / ps;
    size_t blk = tm_kv_block_bytes(o->dtype, ps, o->head_dim), region = 2 * (size_t)e->Hk * blk;
    size_t need = (size_t)e->L * np * region;
    if (need > e->in_cap) {
        cudaFreeHost(e->in_host);
        cudaFree(e->in_dev);
        e->in_host = NULL, e->in_dev = NULL, e->in_cap = 0;
        CK(cudaMallocHost((void **)&e->in_host, need), "cudaMallocHost (KV upload)");
        CK(cudaMalloc((void **)&e->in_dev, need), "cudaMalloc (KV upload)");
        e->in_cap = need;
    }
    for (int l = 0; l < e->L; l++)
        for (int i = 0; i < np; i++) /* a page's layer region: K blocks [Hk], then V blocks [Hk] */
            memcpy(e->in_host + ((size_t)l * np + i) * region, tm_kv_page_k(a->kv, a->seq->pages[i], l, 0), region);
    CK(cudaMemcpyAsync(e->in_dev, e->in_host, need, cudaMemcpyHostToDevice, e->st), "KV upload");
    cu_kv_ingest(e->st, e->kc, e->vc, e->in_dev, blk, e->L, np, ps, e->Hk, e->Dh, e->cap, a->pos0, kv_code(o->dtype));
    return TM_OK;
}

/* wait for a layer's export copy (slot = its parity) */
static int export_wait(cu_eng *e, int slot, tm_err *err)
{
    double t0 = e->prof ? tm_now_s() : 0;
    CK(cudaEventSynchronize(e->ev[slot]), "KV export");
    if (e->prof) e->prof->host_wait_s += tm_now_s() - t0;
    return TM_OK;
}

static int prefill_call(cu_eng *e, const tm_prefill_args *a, tm_err *err)
{
    int T = a->T, rc;
    if (T < 1 || T > CU_MAX_T || a->n_valid < 1 || a->n_valid > T || a->pos0 < 0)
        return tm_errf(err, TM_E_INVALID, "cuda prefill: chunk %d with %d valid tokens at %d", T, a->n_valid, a->pos0);
    if ((int64_t)a->pos0 + T > e->cap)
        return tm_errf(err, TM_E_LIMIT, "cuda prefill: positions up to %lld exceed the engine's context %d",
                       (long long)a->pos0 + T, e->cap);
    if (e->pos_embed && (int64_t)a->pos0 + T > e->max_pos)
        return tm_errf(err, TM_E_LIMIT, "cuda prefill: positions up to %lld exceed the model's %d learned positions",
                       (long long)a->pos0 + T, e->max_pos);
    const tm_kv_cache_opts *o = tm_kv_cache_info(a->kv);
    if ((rc = cu_eng_check_cache(e, o, "cuda prefill", err))) return rc;
    if (a->seq->n_pages * o->page_size < a->pos0 + a->n_valid)
        return tm_errf(err, TM_E_INVALID, "cuda prefill: KV pages cover %d positions, the chunk needs %d",
                       a->seq->n_pages * o->page_size, a->pos0 + a->n_valid);
    for (int t = 0; t < T; t++)
        if (a->tokens[t] < 0 || a->tokens[t] >= e->V)
            return tm_errf(err, TM_E_INVALID, "cuda prefill: token %d at index %d is outside the vocabulary [0, %d)",
                           (int)a->tokens[t], t, e->V);
    if (!mirror_valid(e, a) && (rc = ingest(e, a, err))) return rc;
    e->m_kv = NULL; /* until this chunk is done */
    if (e->prof) cudaEventRecord(e->prof->t0, e->st);
    CK(cudaMemcpyAsync(e->tok, a->tokens, sizeof(int32_t) * (size_t)T, cudaMemcpyHostToDevice, e->st), "token upload");
    cu_eng_embed(e, T, a->pos0, NULL);
    cu_call c = {.T = T, .n_valid = a->n_valid, .pos0 = a->pos0, .span = (int64_t)a->pos0 + T, .kv_dt = o->dtype};
    for (int l = 0; l < e->L; l++) {
        if ((rc = cu_eng_layer(e, &c, l, err))) break;
        if (l > 0) { /* layer l - 1's rows are up: into the pages while the GPU runs layer l */
            if ((rc = export_wait(e, (l - 1) & 1, err))) break;
            cu_eng_scatter(e, a->kv, l - 1, e->exp_host[(l - 1) & 1], T, a->n_valid, a->pos0, NULL, a->seq, NULL);
            if (a->on_layer) a->on_layer(a->ud, l - 1);
        }
    }
    if (rc) {
        cudaStreamSynchronize(e->st);
        return rc;
    }
    if ((rc = export_wait(e, (e->L - 1) & 1, err))) return rc;
    cu_eng_scatter(e, a->kv, e->L - 1, e->exp_host[(e->L - 1) & 1], T, a->n_valid, a->pos0, NULL, a->seq, NULL);
    if (a->on_layer) a->on_layer(a->ud, e->L - 1);
    if ((a->on_row_hidden || a->on_row_logits) && (rc = rows_out(e, a, err))) return rc;
    if (a->logits) {
        if ((rc = cu_eng_logits(e, e->logits, a->n_valid - 1, 1, err))) return rc;
        CK(cudaMemcpyAsync(a->logits, e->logits, sizeof(float) * (size_t)e->V, cudaMemcpyDeviceToHost, e->st), "logits");
    }
    if (e->prof) cudaEventRecord(e->prof->t1, e->st);
    CK(cudaStreamSynchronize(e->st), "prefill");
    prof_chunk(e, T);
    /* the mirror now holds [0, pos0 + n_valid) of this sequence */
    int ps = o->page_size, np = (a->pos0 + a->n_valid + ps - 1) / ps;
    if (np > e->m_pcap) {
        int32_t *p = realloc(e->m_pages, sizeof(int32_t) * (size_t)np);
        if (!p) return tm_errf(err, TM_E_NOMEM, "cuda engine: out of memory");
        e->m_pages = p, e->m_pcap = np;
    }
    memcpy(e->m_pages, a->seq->pages, sizeof(int32_t) * (size_t)np);
    e->m_np = np, e->m_kv = a->kv, e->m_seq = a->seq, e->m_n = a->pos0 + a->n_valid;
    e->m_kuid = tm_kv_cache_uid(a->kv), e->m_suid = a->seq->uid;
    e->m_epoch = tm_kv_cache_epoch(a->kv);
    e->m_rewinds = a->seq->rewinds;
    if (a->seq->n_tokens < a->pos0 + a->n_valid) a->seq->n_tokens = a->pos0 + a->n_valid;
    return TM_OK;
}


/* The runtime's logits buffers page-locked (cudaMallocHost): a step's logits, 0.5-0.6 MB a row at a
 * 128K-152K vocabulary, then come down by DMA at the bus's rate instead of through the driver's staging
 * copy of pageable memory. Plain malloc where that fails or TANDEM_CUDA_PINNED=0 (a measurement switch);
 * cu_host_free tells the two apart by asking the driver. */
static void *cu_host_alloc(size_t bytes)
{
    const char *v = getenv("TANDEM_CUDA_PINNED");
    void *p = NULL;
    if (!(v && !strcmp(v, "0")) && cudaMallocHost(&p, bytes) == cudaSuccess) return p;
    cudaGetLastError();
    return malloc(bytes);
}

static void cu_host_free(void *p)
{
    unsigned int flags;
    if (!p) return;
    if (cudaHostGetFlags(&flags, p) == cudaSuccess) cudaFreeHost(p);
    else cudaGetLastError(), free(p);
}

/* a call: on the engine's part of the device with its context current, or on the whole device (lane_pick) */
static int cu_prefill(void *vctx, const tm_prefill_args *a, tm_err *err)
{
    cu_eng *e = vctx;
    cu_set_pdl(e->pdl);
    lane_pick(e, a->alone);
    int in = e->lane && cu_smset_enter(&e->part), rc = prefill_call(e, a, err);
    if (in) cu_smset_leave(&e->part);
    return rc;
}

static int cu_decode(void *vctx, const tm_decode_args *a, tm_err *err)
{
    cu_eng *e = vctx;
    cu_set_pdl(e->pdl);
    lane_pick(e, a->alone);
    int in = e->lane && cu_smset_enter(&e->part), rc = cu_step_decode(e, a, err);
    if (in) cu_smset_leave(&e->part);
    return rc;
}

const tm_engine_vt tm_engine_cuda = {
    .version = TM_ENGINE_VERSION,
    .name = "cuda",
    .probe = cu_probe,
    .bind = cu_bind,
    .prefill = cu_prefill,
    .decode = cu_decode,
    .unbind = cu_unbind,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
};
