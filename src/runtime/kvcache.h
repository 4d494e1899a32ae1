/* runtime/kvcache.h: the paged KV cache shared by the engines.
 *
 *   tm_kv_cache *kv;
 *   tm_kv_cache_init(&kv, &(tm_kv_cache_opts){.n_layers = L, .n_kv_heads = Hk,
 *                     .head_dim = Dh, .page_size = 16, .n_pages = 4096,
 *                     .dtype = TM_DT_BF16}, &err);
 *   tm_kv_seq seq = {0};
 *   tm_kv_seq_reserve(kv, &seq, n_tokens, &err);     // pages for n_tokens
 *   ... engines read/write through tm_kv_page_k / tm_kv_page_v ...
 *   tm_kv_seq_release(kv, &seq);                     // pages back to the pool
 *
 * Design block
 * ------------
 * Storage: one arena of n_pages pages. A page holds page_size consecutive
 * token positions of one sequence, for every layer, K and V:
 *     page p, layer l:  K [Hk][page_size][Dh]  then  V [Hk][page_size][Dh]
 * (dtype bf16, f16 or f32), so one (page, layer, head) is a contiguous block
 * of page_size rows of Dh: the unit an attention kernel streams.
 *
 * A sequence owns a page table: pages[i] holds positions
 * [i*page_size, (i+1)*page_size). n_tokens positions are valid.
 *
 * Invariants
 *  1. A page is in the free list or in exactly one sequence's page table.
 *  2. A sequence's pages are owned by exactly one side at a time
 *     (seq->owner: TM_KV_OWNER_PREFILL while prefill writes them,
 *     TM_KV_OWNER_DECODE after the hand-off); only the owner writes.
 *  3. tm_kv_seq_release returns every page of the sequence, whatever its
 *     state, so a cancelled request never leaks pages.
 *  4. Page allocation and release are the only operations that take the
 *     cache lock; reading and writing page contents is lock-free (ownership
 *     makes it exclusive).
 */
#ifndef TM_RUNTIME_KVCACHE_H
#define TM_RUNTIME_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

typedef struct tm_kv_cache tm_kv_cache;

typedef struct tm_kv_cache_opts {
    int n_layers;    /* L */
    int n_kv_heads;  /* Hk */
    int head_dim;    /* Dh */
    int page_size;   /* tokens per page (power of two, 1..65536) */
    int n_pages;     /* pages in the pool */
    tm_dtype dtype;  /* TM_DT_BF16, TM_DT_F16 or TM_DT_F32 */
} tm_kv_cache_opts;

enum { TM_KV_OWNER_NONE = 0, TM_KV_OWNER_PREFILL = 1, TM_KV_OWNER_DECODE = 2 };

typedef struct tm_kv_seq {
    int32_t *pages;  /* [cap] page ids */
    int n_pages;     /* pages held */
    int cap;         /* capacity of pages[] */
    int n_tokens;    /* valid positions [0, n_tokens) */
    int owner;       /* TM_KV_OWNER_* */
} tm_kv_seq;

int tm_kv_cache_init(tm_kv_cache **out, const tm_kv_cache_opts *o, tm_err *err);
void tm_kv_cache_free(tm_kv_cache *kv);
const tm_kv_cache_opts *tm_kv_cache_info(const tm_kv_cache *kv);
int tm_kv_cache_free_pages(tm_kv_cache *kv);   /* pages currently free */
size_t tm_kv_cache_bytes(const tm_kv_cache *kv);

/* tm_kv_seq_reserve: grow seq's page table to cover n_tokens positions.
 * TM_E_LIMIT (naming the counts) if the pool is exhausted; seq unchanged. */
int tm_kv_seq_reserve(tm_kv_cache *kv, tm_kv_seq *seq, int n_tokens, tm_err *err);
void tm_kv_seq_release(tm_kv_cache *kv, tm_kv_seq *seq);

/* Block of one (page, layer, head): [page_size][Dh] elements of dtype. */
void *tm_kv_page_k(const tm_kv_cache *kv, int32_t page, int layer, int head);
void *tm_kv_page_v(const tm_kv_cache *kv, int32_t page, int layer, int head);

/* A read-only view of one sequence's KV for one layer, the form attention
 * kernels take. Also describes a contiguous buffer (one "page" of
 * page_size = capacity), so one kernel serves paged and contiguous KV. */
typedef struct tm_kv_view {
    const int32_t *pages;  /* [ceil(n_tokens / page_size)] */
    int page_size;
    int n_tokens;          /* keys 0 .. n_tokens-1 */
    tm_dtype dtype;
    const uint8_t *base;   /* arena base */
    size_t page_stride;    /* bytes from page p to p+1 (same layer) */
    size_t head_stride;    /* bytes from head h to h+1 within a page block */
    size_t v_offset;       /* bytes from a K block to its V block */
    int head_dim;
} tm_kv_view;

void tm_kv_view_of(const tm_kv_cache *kv, const tm_kv_seq *seq, int layer, tm_kv_view *v);

/* Row pointers for (head, pos) in a view. */
static inline const void *tm_kv_view_k(const tm_kv_view *v, int head, int pos)
{
    int p = v->pages[pos / v->page_size], r = pos % v->page_size;
    size_t esz = v->dtype == TM_DT_F32 ? 4 : 2;
    return v->base + (size_t)p * v->page_stride + (size_t)head * v->head_stride +
           (size_t)r * (size_t)v->head_dim * esz;
}
static inline const void *tm_kv_view_v(const tm_kv_view *v, int head, int pos)
{
    return (const uint8_t *)tm_kv_view_k(v, head, pos) + v->v_offset;
}

#endif
