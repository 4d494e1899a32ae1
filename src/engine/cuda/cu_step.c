/* engine/cuda/cu_step.c: the CUDA engine's decode step (tm_engine_vt.decode; the context and the layer code
 * are cuda_engine.c's, cu_eng.h).
 *
 * Design block "Decode"
 * ---------------------
 * One step runs B sequences' rows through the same layer code (T = B rows, row b at its own
 * position pos[b]). Its KV lives in a device copy of the paged cache's arena, page for page and byte
 * for byte in the cache's dtype (cu_dec.cu), allocated at the first step on a cache (the whole arena,
 * tm_kv_cache_bytes) and dropped when a step comes with another cache (tm_kv_cache_uid). What the
 * copy holds is tracked per sequence (cu_dseq, keyed by tm_kv_seq.uid: a struct reused for a new
 * request is a new sequence): positions [0, n) of these page ids. A step needs [0, pos[b]): what is
 * missing (the prompt a CPU prefill engine wrote, positions another engine appended) comes up as
 * whole pages (staged in pinned memory; a page's bytes are one copy: the host-to-device half of the
 * KV bridge, paid once per prompt). Each layer's new K/V rows (export rows in the cache's dtype, as
 * the prefill makes them) go into the device pages in the attention's launch (cu_dec.cu), and
 * after the step all layers' rows come back with the logits and are scattered into the host pages,
 * which stay the truth every engine shares. The rule the tracking rests on: a position of a held
 * page, once written, is not rewritten by another writer while the sequence lives (sequences only
 * grow; kvcache.h's owner rule), but for the rows past a rewind (tm_kv_seq.rewinds): those a verify
 * chunk wrote for drafts then rejected, which only the host pages and the prefill's mirror held; the
 * device copy holds only positions steps wrote or pages brought up below a step's position, all of them
 * kept tokens'. The products are the GEMV over packed weights (the package's decode
 * encoding: 4.25 bits a weight for int4 g64) or, for a bf16 stage, cuBLAS's; the attention reads the
 * pages directly (cu_dec.cu): a block a query head, or from the span cu_step_mma_span gives a kv head's query
 * heads together on tensor cores. A step's launches are captured as a CUDA graph once per (stream, batch,
 * RoPE frequencies, attention kernel) and replayed after; their inputs (tokens, positions, page tables)
 * are in meta_dev, one buffer whatever the batch, so the captured pointers hold. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "engine/cuda/cu_eng.h"

/* the captured decode steps, all of them (a pointer they hold moved, or the cache's dtype) */
void cu_step_graphs_drop(cu_eng *e)
{
    for (int ln = 0; ln < 2; ln++)
        for (int b = 0; b <= CU_MAX_B; b++)
            for (int f = 0; f < 4; f++) {
                cudaGraphExec_t *g = &e->graph[ln][b][f >> 1][f & 1];
                if (*g) cudaGraphExecDestroy(*g), *g = NULL;
            }
}

/* The span (the step's longest row, in positions) from which the decode attention runs the grouped kernel
 * (k_attn_dec_mma) rather than a block a query head (k_attn_dec). Where a kv head has fewer than 16 query heads
 * (the grouped kernel's tile: dense GQA models) its tile is part empty and it has Hk blocks a segment against the
 * per-head kernel's H, so on short contexts the per-head kernel is the faster; the grouped one gains as the keys
 * grow, sooner the more kv heads there are. Measured on an H100 (session 62, docs/benchmarks.md; TPOT p50, grouped
 * over per-head): Llama-3.2-1B's shape (8 kv heads of 4) 0.98x at 128 positions, 1.02x at 1,000, 1.06x at 2,000;
 * Qwen2.5-0.5B's (2 kv heads of 7) 0.94x at 128, 1.00x at 3,000, 1.04x at 5,000, 1.11x at 8,000. So from
 * DEC_MMA_KV_SPAN / Hk positions: 1,024 and 4,096 there. Full tiles (DeepSeek's latent attention, 16 heads on
 * one latent) from the first position. TANDEM_CUDA_DEC_MMA_FROM=N sets the span (a measurement and test
 * switch). */
#ifndef DEC_MMA_KV_SPAN
#define DEC_MMA_KV_SPAN 8192
#endif
int cu_step_mma_span(int H, int Hk)
{
    const char *f = getenv("TANDEM_CUDA_DEC_MMA_FROM");
    if (f) return atoi(f) < 0 ? 0 : atoi(f);
    return H / Hk >= 16 ? 0 : DEC_MMA_KV_SPAN / Hk;
}

/* decode attention scratch for S key segments of B rows */
static int dpart_need(cu_eng *e, int B, int S, tm_err *err)
{
    size_t need = cu_attention_scratch(B, e->H, e->Dh, S);
    if (!e->dcnt) { /* the merge's counts (cu_dec_attn_args.cnt), for any batch */
        CK(cudaMalloc((void **)&e->dcnt, sizeof(unsigned) * CU_MAX_B * e->H), "cudaMalloc (decode attention)");
        CK(cudaMemset(e->dcnt, 0, sizeof(unsigned) * CU_MAX_B * e->H), "cudaMemset (decode attention)");
    }
    if (need <= e->dpart_cap) return TM_OK;
    cu_step_graphs_drop(e); /* they hold the old pointer */
    cudaFree(e->dpart); /* waits for the kernels that used it */
    e->dpart = NULL, e->dpart_cap = 0;
    CK(cudaMalloc((void **)&e->dpart, need), "cudaMalloc (decode attention)");
    e->dpart_cap = need;
    return TM_OK;
}

/* the decode attention's key segments a (sequence, head tile) in a step of B rows on pages of dtype code dt
 * (cu_dec.cu): enough blocks for two waves of the call's multiprocessors, at most one a 64 keys of the context (each
 * row splits its own keys; a short context leaves the later segments empty). A function of B, dt and the stream's
 * part only, so a captured step keeps its launches whatever the positions. */
static int dec_segs(const cu_eng *e, int B, int dt, int mma)
{
    int cap_s, bh = B * cu_attn_decode_blocks(e->H, e->Hk, e->Dh, dt, mma, &cap_s);
    if (e->dseg_force > 0) return e->dseg_force < cap_s ? e->dseg_force : cap_s;
    int S = (2 * e->sms + bh - 1) / bh, most = (e->cap + 63) / 64;
    S = S > most ? most : S;
    S = S > cap_s ? cap_s : S;
    return S < 1 ? 1 : S;
}

/* the decode attention of layer l's step (which also puts the export rows exp into the pages) */
void cu_step_attention(cu_eng *e, const cu_call *c, int l, int window, const float *sinks, uint8_t *exp, size_t rb)
{
    cu_dec_attn_args da = c->da;
    da.layer_off = (size_t)l * c->layer_bytes;
    da.qkv = e->qkv, da.nqkv = (e->H + 2 * e->Hk) * e->Dh, da.window = window, da.scale = e->attn_scale;
    da.softcap = e->attn_softcap, da.alibi = e->alibi, da.sinks = sinks, da.out = e->att16;
    da.rows = exp, da.rscales = (const float *)(exp + 2 * (size_t)e->Hk * c->T * rb), da.cnt = e->dcnt;
    cu_prof_mark(e, PROF_ATTN, 0);
    cu_attn_decode(e->st, &da, dec_segs(e, c->T, da.dt, da.mma), CU_SEG, e->dpart);
    cu_prof_mark(e, PROF_ATTN, 1);
}

/* ---- decode (design block "Decode") ------------------------------------------------------------ */

/* one step's launches (c: its shape): tokens, layers, logits into dlogits. marks: the profile's events
 * around the launches (not while a graph is captured; cu_decode sums them) */
static int dec_forward(cu_eng *e, const cu_call *c, int marks, tm_err *err)
{
    cu_prof *prof = e->prof;
    if (!marks) e->prof = NULL;
    else if (prof) prof->n = 0, prof->decoding = 1; /* a failed step may have left events */
    int B = c->T, rc = TM_OK;
    cudaError_t ce = cudaMemcpyAsync(e->tok, e->meta_dev, sizeof(int32_t) * (size_t)B, cudaMemcpyDeviceToDevice, e->st);
    if (ce != cudaSuccess) rc = cu_err(err, ce, "tokens");
    if (rc == TM_OK) cu_eng_embed(e, B, 0, c->dpos);
    for (int l = 0; l < e->L && rc == TM_OK; l++) rc = cu_eng_layer(e, c, l, err);
    if (rc == TM_OK) rc = cu_eng_logits(e, e->dlogits, 0, B, err);
    if (prof) prof->decoding = 0;
    e->prof = prof;
    return rc;
}

/* the device arena for cache kv: made at its first step; another cache's step drops it, and with it
 * what the engine tracked */
static int arena_for(cu_eng *e, const tm_kv_cache *kv, tm_err *err)
{
    uint64_t uid = tm_kv_cache_uid(kv);
    if (e->arena && e->a_uid == uid) return TM_OK;
    cu_step_graphs_drop(e);
    cudaFree(e->arena);
    cudaFree(e->meta_dev);
    cudaFreeHost(e->meta_host);
    e->arena = NULL, e->a_uid = 0, e->meta_dev = NULL, e->meta_host = NULL;
    for (int i = 0; i < CU_DSEQ; i++) e->ds[i].uid = 0, e->ds[i].used = 0;
    size_t bytes = tm_kv_cache_bytes(kv);
    cudaError_t ce = cudaMalloc((void **)&e->arena, bytes);
    if (ce != cudaSuccess)
        return tm_errf(err, ce == cudaErrorMemoryAllocation ? TM_E_NOMEM : TM_E_IO,
                       "cuda decode: a device copy of the %zu MB KV cache: %s", bytes >> 20, cudaGetErrorString(ce));
    /* tokens [B], positions [B], page tables [B][ptw] of the context's pages: one buffer whatever the batch,
       so a captured step's pointers hold */
    int ps = tm_kv_cache_info(kv)->page_size;
    e->ptw = (e->cap + ps - 1) / ps;
    size_t n = (size_t)CU_MAX_B * (2 + (size_t)e->ptw) * sizeof(int32_t);
    CK(cudaMalloc((void **)&e->meta_dev, n), "cudaMalloc (decode)");
    CK(cudaMallocHost((void **)&e->meta_host, n), "cudaMallocHost (decode)");
    e->a_uid = uid;
    return TM_OK;
}

/* the tracking slot of sequence uid (a new one: the least recently used slot, emptied); NULL for uid 0 */
static cu_dseq *dseq_slot(cu_eng *e, uint64_t uid)
{
    if (!uid) return NULL;
    cu_dseq *lru = &e->ds[0];
    for (int i = 0; i < CU_DSEQ; i++) {
        if (e->ds[i].uid == uid) return &e->ds[i];
        if (e->ds[i].used < lru->used) lru = &e->ds[i];
    }
    lru->uid = uid, lru->n = 0, lru->np = 0;
    return lru;
}

/* the staged pages [n] (ids) up into the arena, and the staging free again */
static int up_flush(cu_eng *e, const int32_t *ids, int n, size_t pb, tm_err *err)
{
    for (int i = 0; i < n; i++)
        CK(cudaMemcpyAsync(e->arena + (size_t)ids[i] * pb, e->up_host + (size_t)i * pb, pb, cudaMemcpyHostToDevice,
                           e->st), "KV page upload");
    CK(cudaStreamSynchronize(e->st), "KV page upload");
    return TM_OK;
}

#define UP_STAGE ((size_t)64 << 20) /* bytes of pinned staging, or one page if larger */

/* what the device lacks of each sequence's [0, pos[b]) comes up as whole pages; st[b] its slot */
static int dec_sync(cu_eng *e, const tm_decode_args *a, size_t pb, cu_dseq **st, tm_err *err)
{
    int ps = tm_kv_cache_info(a->kv)->page_size, from[CU_MAX_B], total = 0;
    for (int b = 0; b < a->B; b++) {
        const tm_kv_seq *q = a->seqs[b];
        int need = a->pos[b], have = 0;
        if ((st[b] = dseq_slot(e, q->uid))) {
            st[b]->used = e->clock;
            have = st[b]->n < need ? st[b]->n : need;
            int np = (have + ps - 1) / ps;
            if (np > st[b]->np || memcmp(st[b]->pages, q->pages, sizeof(int32_t) * (size_t)np)) have = 0;
        }
        from[b] = have / ps;
        total += need > 0 ? (need - 1) / ps + 1 - from[b] : 0;
    }
    if (total == 0) return TM_OK; /* the usual step */
    const double t0 = tm_now_s();
    size_t want = (size_t)total * pb < UP_STAGE ? (size_t)total * pb : UP_STAGE;
    if (want < pb) want = pb;
    if (e->up_cap < want) {
        cudaFreeHost(e->up_host);
        e->up_host = NULL, e->up_cap = 0;
        CK(cudaMallocHost((void **)&e->up_host, want), "cudaMallocHost (KV page upload)");
        e->up_cap = want;
    }
    int cap = (int)(e->up_cap / pb), n = 0, rc = TM_OK;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids) return tm_errf(err, TM_E_NOMEM, "cuda decode: out of memory");
    for (int b = 0; b < a->B && rc == TM_OK; b++)
        for (int i = from[b]; a->pos[b] > 0 && i <= (a->pos[b] - 1) / ps && rc == TM_OK; i++) {
            ids[n] = a->seqs[b]->pages[i];
            memcpy(e->up_host + (size_t)n * pb, tm_kv_page_k(a->kv, ids[n], 0, 0), pb);
            if (++n == cap) rc = up_flush(e, ids, n, pb, err), n = 0;
        }
    if (rc == TM_OK && n) rc = up_flush(e, ids, n, pb, err);
    free(ids);
    e->t_upload += tm_now_s() - t0;
    return rc;
}

/* tokens [B], positions [B] and the page tables [B][ptw] up (meta_dev) */
static int dec_meta(cu_eng *e, const tm_decode_args *a, tm_err *err)
{
    int B = a->B, ptw = e->ptw;
    size_t n = (size_t)B * (2 + (size_t)ptw);
    int32_t *m = e->meta_host;
    for (int b = 0; b < B; b++) {
        m[b] = a->tokens[b], m[B + b] = a->pos[b];
        int32_t *pt = m + 2 * B + (size_t)b * ptw;
        int have = a->seqs[b]->n_pages < ptw ? a->seqs[b]->n_pages : ptw;
        memcpy(pt, a->seqs[b]->pages, sizeof(int32_t) * (size_t)have);
        for (int i = have; i < ptw; i++) pt[i] = 0; /* past this sequence's keys: never read */
    }
    CK(cudaMemcpyAsync(e->meta_dev, m, n * sizeof(int32_t), cudaMemcpyHostToDevice, e->st), "decode upload");
    return TM_OK;
}

int cu_step_decode(cu_eng *e, const tm_decode_args *a, tm_err *err)
{
    int B = a->B, rc;
    const double t_in = tm_now_s();
    if (B < 1 || B > CU_MAX_B) return tm_errf(err, TM_E_INVALID, "cuda decode: batch %d (1..%d)", B, CU_MAX_B);
    /* the first step (whatever roles bind was told): export rows of every layer, logits */
    size_t xcap = (size_t)e->L * cu_eng_dexp_stride(e, CU_MAX_B, 4);
    if (!e->dexp_dev) CK(cudaMalloc((void **)&e->dexp_dev, xcap), "cudaMalloc (decode)");
    if (!e->dlogits) CK(cudaMalloc((void **)&e->dlogits, (size_t)CU_MAX_B * e->V * sizeof(float)), "cudaMalloc (decode)");
    if (!e->dexp_host) CK(cudaMallocHost((void **)&e->dexp_host, xcap), "cudaMallocHost (decode)");
    if (!e->rcnt) {
        CK(cudaMalloc((void **)&e->rcnt, sizeof(unsigned) * CU_RES_GROUPS), "cudaMalloc (decode)");
        CK(cudaMemset(e->rcnt, 0, sizeof(unsigned) * CU_RES_GROUPS), "cudaMemset (decode)");
    }
    if (!a->logits && !a->argmax) return tm_errf(err, TM_E_INVALID, "cuda decode: neither logits nor argmax to fill");
    if (a->argmax && !e->amax_host) {
        CK(cudaMalloc((void **)&e->amax_dev, sizeof(int32_t) * CU_MAX_B), "cudaMalloc (decode)");
        CK(cudaMalloc(&e->amax_scr, cu_argmax_scratch(CU_MAX_B)), "cudaMalloc (decode)");
        CK(cudaMalloc((void **)&e->amax_cnt, sizeof(unsigned) * CU_MAX_B), "cudaMalloc (decode)");
        CK(cudaMemset(e->amax_cnt, 0, sizeof(unsigned) * CU_MAX_B), "cudaMemset (decode)");
        CK(cudaMallocHost((void **)&e->amax_host, sizeof(int32_t) * CU_MAX_B), "cudaMallocHost (decode)");
    }
    const tm_kv_cache_opts *o = tm_kv_cache_info(a->kv);
    if ((rc = cu_eng_check_cache(e, o, "cuda decode", err))) return rc;
    int ps = o->page_size, span = 0;
    for (int b = 0; b < B; b++) {
        int p = a->pos[b];
        if (a->tokens[b] < 0 || a->tokens[b] >= e->V)
            return tm_errf(err, TM_E_INVALID, "cuda decode: token %d of sequence %d is outside the vocabulary [0, %d)",
                           (int)a->tokens[b], b, e->V);
        if (p < 0 || p >= e->cap)
            return tm_errf(err, p < 0 ? TM_E_INVALID : TM_E_LIMIT, "cuda decode: position %d of sequence %d (the "
                           "engine's context is %d)", p, b, e->cap);
        if (e->pos_embed && p >= e->max_pos)
            return tm_errf(err, TM_E_LIMIT, "cuda decode: position %d exceeds the model's %d learned positions", p,
                           e->max_pos);
        if (a->seqs[b]->n_pages * ps < p + 1)
            return tm_errf(err, TM_E_INVALID, "cuda decode: KV pages of sequence %d cover %d positions, the step needs %d",
                           b, a->seqs[b]->n_pages * ps, p + 1);
        span = p + 1 > span ? p + 1 : span;
    }
    size_t blk = tm_kv_block_bytes(o->dtype, ps, o->head_dim), lb = 2 * (size_t)e->Hk * blk, pb = (size_t)e->L * lb;
    if ((rc = arena_for(e, a->kv, err))) return rc;
    e->clock++;
    cu_dseq *st[CU_MAX_B];
    if ((rc = dec_sync(e, a, pb, st, err)) || (rc = dec_meta(e, a, err))) return rc;
    const int mma = span >= e->dec_mma_from;
    const int ds = dec_segs(e, B, kv_code(o->dtype), mma);
    if (ds > 1 && (rc = dpart_need(e, B, ds, err))) return rc;
    const int *dpos = e->meta_dev + B;
    cu_call c = {.T = B, .n_valid = B, .span = span, .kv_dt = o->dtype, .decode = 1, .dpos = dpos, .layer_bytes = lb,
                 .dstride = cu_eng_dexp_stride(e, B, kv_esz(o->dtype))};
    c.da = (cu_dec_attn_args){.B = B, .H = e->H, .Hk = e->Hk, .Dh = e->Dh, .arena = e->arena, .page_bytes = pb,
                              .blk_bytes = blk, .ps = ps, .dt = kv_code(o->dtype), .pt = e->meta_dev + 2 * B,
                              .ptw = e->ptw, .pos = dpos, .mma = mma};
    /* the step's launches: captured once per (batch, RoPE frequencies, attention kernel) and replayed after (its inputs
       are in meta_dev); TANDEM_CUDA_GRAPHS=0 or a capture that fails: launched one by one */
    int lf = 0;
    for (int i = 0; i < 2; i++) lf |= e->rope[i].inv && span > e->rope[i].long_from;
    if (e->g_dt != kv_code(o->dtype)) cu_step_graphs_drop(e), e->g_dt = kv_code(o->dtype);
    /* (a step of more rows than the MoE layers run without a synchronisation is launched one by one) */
    cudaGraphExec_t *gx = e->use_graphs && B <= e->moe_capture_rows ? &e->graph[e->lane][B][lf][mma] : NULL;
    if (e->prof) cudaEventRecord(e->prof->d0, e->st);
    if (gx && *gx) {
        CK(cudaGraphLaunch(*gx, e->st), "cudaGraphLaunch");
    } else {
        cudaGraph_t g = NULL;
        if (gx && cudaStreamBeginCapture(e->st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) gx = NULL;
        rc = dec_forward(e, &c, !gx, err);
        if (gx) {
            cudaError_t ce = cudaStreamEndCapture(e->st, &g);
            if (rc == TM_OK && ce == cudaSuccess && cudaGraphInstantiate(gx, g, 0) == cudaSuccess) {
                ce = cudaGraphLaunch(*gx, e->st);
            } else { /* not capturable here: one by one from now on (an error of the step's own shows again) */
                *gx = NULL, e->use_graphs = 0;
                cudaGetLastError();
                rc = dec_forward(e, &c, 0, err);
                ce = cudaSuccess;
            }
            if (g) cudaGraphDestroy(g);
            if (rc == TM_OK && ce != cudaSuccess) rc = cu_err(err, ce, "cudaGraphLaunch");
        }
    }
    if (rc) {
        cudaStreamSynchronize(e->st);
        if (e->prof) e->prof->n = 0;
        return rc;
    }
    e->dec_kernel_steps[mma]++;
    if (e->prof) cudaEventRecord(e->prof->d1, e->st);
    if (a->argmax) { /* after the graph: launched plainly (PDL's attribute is for a kernel after a kernel) */
        cu_set_pdl(0);
        cu_argmax(e->st, e->dlogits, B, e->V, e->amax_scr, e->amax_cnt, e->amax_dev);
        CK(cudaGetLastError(), "argmax");
        CK(cudaMemcpyAsync(e->amax_host, e->amax_dev, sizeof(int32_t) * (size_t)B, cudaMemcpyDeviceToHost, e->st),
           "argmax");
    }
    if (a->logits)
        CK(cudaMemcpyAsync(a->logits, e->dlogits, sizeof(float) * (size_t)B * e->V, cudaMemcpyDeviceToHost, e->st),
           "logits");
    CK(cudaMemcpyAsync(e->dexp_host, e->dexp_dev, (size_t)e->L * c.dstride, cudaMemcpyDeviceToHost, e->st), "KV export");
    CK(cudaStreamSynchronize(e->st), "decode");
    if (a->argmax) memcpy(a->argmax, e->amax_host, sizeof(int32_t) * (size_t)B);
    /* the host pages get the step's rows; the device now holds [0, pos[b] + 1) of each sequence */
    for (int l = 0; l < e->L; l++)
        cu_eng_scatter(e, a->kv, l, e->dexp_host + (size_t)l * c.dstride, B, B, 0, a->pos, NULL, a->seqs);
    for (int b = 0; b < B; b++) {
        tm_kv_seq *q = a->seqs[b];
        if (q->n_tokens < a->pos[b] + 1) q->n_tokens = a->pos[b] + 1;
        cu_dseq *d = st[b];
        if (!d) continue;
        int np = a->pos[b] / ps + 1;
        if (np > d->pcap) {
            int32_t *p = realloc(d->pages, sizeof(int32_t) * (size_t)np);
            if (!p) { d->uid = 0; continue; } /* untracked: its next step brings it all up again */
            d->pages = p, d->pcap = np;
        }
        memcpy(d->pages, q->pages, sizeof(int32_t) * (size_t)np);
        d->np = np, d->n = a->pos[b] + 1;
    }
    if (e->prof) {
        float ms;
        const double t1 = tm_now_s();
        if (cudaEventElapsedTime(&ms, e->prof->d0, e->prof->d1) == cudaSuccess) e->prof->dec_gpu_ms += ms;
        cu_prof *p = e->prof;
        if (p->n) { /* launched one by one, with the events (dec_forward) */
            for (int i = 0; i + 1 < p->n; i += 2)
                if (cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]) == cudaSuccess) p->dms[p->cat[i / 2]] += ms;
            p->n = 0, p->dsteps++;
        }
        e->prof->dec_host_s += t1 - t_in;
        e->prof->steps++, e->prof->step_rows += B;
    }
    return TM_OK;
}
