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
 *     page p, layer l:  K blocks [Hk]  then  V blocks [Hk]
 * and one (page, layer, head) block, K or V, is contiguous: the unit an
 * attention kernel streams. Its layout by dtype (ps = page_size):
 *     bf16, f16, f32:   x[ps][Dh]                        ps * Dh * esz bytes
 *     int8 (Q8PC):      scale[ps] f32, then q[ps][Dh] int8, padded to a
 *                       multiple of 64 bytes: round64(4 ps + ps Dh)
 *                       (ps 16, Dh 64: 1088 bytes, 0.53x bf16's 2048)
 *   int8 rows are symmetric, one f32 scale per (token, kv head), K and V
 *   separately: scale = max|x| / 127, q = round_half_even(x * 127 / max|x|)
 *   (a zero row: scale 0, q 0), x = scale * q (tm_kv_quant_row). The scales
 *   lead the block so they stay 4-byte aligned for any Dh, and with ps 16
 *   the rows start on a cache line. Byte offsets:
 *     block(p, l, K, h) = p * page_bytes + l * layer_bytes + h * block_bytes
 *     block(p, l, V, h) = block(p, l, K, h) + Hk * block_bytes
 *     layer_bytes = 2 Hk block_bytes,  page_bytes = L layer_bytes,
 *     tm_kv_cache_bytes = n_pages page_bytes.
 * f32 serves staging and tests only: the decode attention kernel reads
 * bf16, f16 and int8 pages (engine caps kv_dtypes). Writers convert through
 * tm_kv_row_store (or the same rounding, vectorized); readers widen int8 as
 * scale * q. An arena of 2 MB or more asks for transparent huge pages.
 * prefault_tokens > 0 faults in, at init, what the first that many
 * positions of the first sequence will occupy (MADV_POPULATE_WRITE, Linux
 * 5.14+; elsewhere nothing happens): whole pages from page 0 (the free list
 * hands out page 0 first), and of a page they fill in part the head of each
 * block in proportion. So a session's first request does not pay the
 * arena's first touch (with huge pages the kernel zeroes, and may compact
 * for, 2 MB at a time), and a large context does not make it resident.
 *
 * A sequence owns a page table: pages[i] holds positions
 * [i*page_size, (i+1)*page_size). n_tokens positions are valid. Its owner may set n_tokens back below
 * rows it has written (prompt lookup's rejected drafts, runtime/lookup.h), counting it in rewinds: those
 * rows are written again before anything reads them, and an engine keeping a copy of the sequence's
 * rows elsewhere trusts it only while rewinds stands.
 *
 * Shared pages (the prefix cache, runtime/sched.c). A page a sequence has
 * filled (page_size positions, never written again) may be published under a
 * key: a 64-bit hash of every token id at positions [0, the page's end),
 * chained page by page (tm_kv_page_key), with the page's own tokens and its
 * parent's key kept to check a lookup against. A later sequence whose tokens
 * start the same takes the page into its table read-only
 * (tm_kv_seq_take_published). A published page that no sequence holds is
 * idle: it keeps its KV for a later lookup, on a least-recently-used list,
 * until a reserve needs the room.
 *
 * Invariants
 *  1. A page is free, or held by one or more sequences' page tables (its
 *     reference count), or idle (published, held by none).
 *  2. A sequence's pages are owned by exactly one side at a time
 *     (seq->owner: TM_KV_OWNER_PREFILL while prefill writes them,
 *     TM_KV_OWNER_DECODE after the hand-off); only the owner writes, and
 *     never a page it shares: a shared page is full and lies wholly before
 *     the first position its sequences write (the scheduler takes whole
 *     pages of the prompt, never the page of its last token).
 *  3. tm_kv_seq_release drops the sequence's hold on every page, whatever
 *     its state, so a cancelled request never leaks pages: at no holder a
 *     published page goes idle, any other page free. tm_kv_seq_reserve takes
 *     free pages first, then idle ones, oldest first (unpublishing them): idle
 *     pages never cost capacity (tm_kv_cache_free_pages counts them).
 *  4. Allocation, release, publishing and taking are the only operations that
 *     take the cache lock; reading and writing page contents is lock-free
 *     (ownership makes it exclusive, shared pages are only read).
 */
#ifndef TM_RUNTIME_KVCACHE_H
#define TM_RUNTIME_KVCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"

typedef struct tm_kv_cache tm_kv_cache;

#define TM_KV_MAX_DH 1024  /* largest head_dim a cache takes */

typedef struct tm_kv_cache_opts {
    int n_layers;    /* L */
    int n_kv_heads;  /* Hk */
    int head_dim;    /* Dh (1..TM_KV_MAX_DH) */
    int page_size;   /* tokens per page (power of two, 1..65536) */
    int n_pages;     /* pages in the pool */
    tm_dtype dtype;  /* TM_DT_BF16, TM_DT_F16, TM_DT_F32, or TM_DT_Q8PC: int8 rows + f32 row scales */
    int prefault_tokens; /* positions of the first sequence to fault in at init (0: none; see the design block) */
} tm_kv_cache_opts;

enum { TM_KV_OWNER_NONE = 0, TM_KV_OWNER_PREFILL = 1, TM_KV_OWNER_DECODE = 2 };

typedef struct tm_kv_seq {
    int32_t *pages;  /* [cap] page ids */
    int n_pages;     /* pages held */
    int cap;         /* capacity of pages[] */
    int n_tokens;    /* valid positions [0, n_tokens) */
    int owner;       /* TM_KV_OWNER_* */
    uint64_t uid;    /* its identity in its cache: set when it first takes a page (never 0 then, never
                        reused by that cache), 0 again after tm_kv_seq_release. An engine that keeps a
                        copy of a sequence's KV elsewhere (the CUDA engine's device pages) keys it by
                        (tm_kv_cache_uid, uid): a struct reused for a new request is a new sequence */
    uint32_t rewinds;/* times its valid length was set back below positions already written (prompt
                        lookup's rejected drafts, whose rows are written again later): a copy of the
                        sequence's rows kept elsewhere is trusted only while this stands */
} tm_kv_seq;

int tm_kv_cache_init(tm_kv_cache **out, const tm_kv_cache_opts *o, tm_err *err);
void tm_kv_cache_free(tm_kv_cache *kv);
const tm_kv_cache_opts *tm_kv_cache_info(const tm_kv_cache *kv);
int tm_kv_cache_free_pages(tm_kv_cache *kv);   /* pages a reserve can take now: free and idle */
int tm_kv_cache_idle_pages(tm_kv_cache *kv);   /* of those, published pages no sequence holds */
size_t tm_kv_cache_bytes(const tm_kv_cache *kv);   /* the arena: n_pages * page_bytes */
/* bytes of one (page, layer, head) block of K (or V), for a cache's dtype
 * and geometry (see the design block); 0 for a dtype the cache refuses */
size_t tm_kv_block_bytes(tm_dtype dt, int page_size, int head_dim);

/* tm_kv_seq_reserve: grow seq's page table to cover n_tokens positions
 * (free pages, then idle ones). TM_E_LIMIT (naming the counts) if the pool
 * is exhausted; seq unchanged. */
int tm_kv_seq_reserve(tm_kv_cache *kv, tm_kv_seq *seq, int n_tokens, tm_err *err);
void tm_kv_seq_release(tm_kv_cache *kv, tm_kv_seq *seq);

/* tm_kv_cache_epoch: how many times a page has been let go by its last holder (freed, or gone idle)
 * in this cache's life. While it stays the same, every page a sequence holds still holds what was
 * written into it under the owner rule (invariant 2), so an engine that keeps a copy of a sequence's
 * KV elsewhere (the CUDA engine's device mirror) may trust the copy across calls. */
uint64_t tm_kv_cache_epoch(const tm_kv_cache *kv);
/* tm_kv_cache_uid: this cache's identity, unique in the process (a cache freed and another made at the
 * same address differ) */
uint64_t tm_kv_cache_uid(const tm_kv_cache *kv);

/* Shared pages (design block). tm_kv_page_key: the key of a page whose
 * tokens [page_size] follow the page keyed parent (0 for a sequence's first
 * page). tm_kv_publish: publish page (held by the caller's sequence, full)
 * under key; 1 if published, 0 if the page or the key already is.
 * tm_kv_seq_take_published: append the page published under key (its parent
 * key and tokens checked) to seq's table, held; 1 if taken, 0 if there is
 * none, TM_E_NOMEM. The caller sets seq->n_tokens. */
uint64_t tm_kv_page_key(uint64_t parent, const int32_t *tokens, int page_size);
int tm_kv_publish(tm_kv_cache *kv, int32_t page, uint64_t parent, uint64_t key, const int32_t *tokens);
int tm_kv_seq_take_published(tm_kv_cache *kv, tm_kv_seq *seq, uint64_t parent, uint64_t key, const int32_t *tokens,
                             tm_err *err);

/* Block of one (page, layer, head): [page_size][Dh] elements of dtype
 * (int8: the scales, then the rows; see the design block). */
void *tm_kv_page_k(const tm_kv_cache *kv, int32_t page, int layer, int head);
void *tm_kv_page_v(const tm_kv_cache *kv, int32_t page, int layer, int head);

/* tm_kv_row_store: row `slot` of a block (from tm_kv_page_k/v) := x[Dh],
 * converted to the cache dtype (bf16/f16: round to nearest even; int8:
 * tm_kv_quant_row). tm_kv_row_load: the row back as f32 (int8: scale * q). */
void tm_kv_row_store(const tm_kv_cache *kv, void *block, int slot, const float *x);
void tm_kv_row_load(const tm_kv_cache *kv, const void *block, int slot, float *x);

/* tm_kv_quant_row: the int8 KV quantization of x[n] (normative, see the
 * design block): q[n] and *scale. NaN elements become 0. */
void tm_kv_quant_row(int8_t *q, float *scale, const float *x, int n);

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
    size_t head_stride;    /* bytes from head h to h+1 within a page block (block_bytes) */
    size_t v_offset;       /* bytes from a K block to its V block */
    int head_dim;
} tm_kv_view;

void tm_kv_view_of(const tm_kv_cache *kv, const tm_kv_seq *seq, int layer, tm_kv_view *v);

/* Row pointers for (head, pos) in a view: Dh elements of the view's dtype
 * (int8: the q row; its scale is tm_kv_view_k_scale / _v_scale). */
static inline const uint8_t *tm_kv_view_block(const tm_kv_view *v, int head, int pos)
{
    return v->base + (size_t)v->pages[pos / v->page_size] * v->page_stride + (size_t)head * v->head_stride;
}
static inline const void *tm_kv_view_k(const tm_kv_view *v, int head, int pos)
{
    int r = pos % v->page_size;
    if (v->dtype == TM_DT_Q8PC)
        return tm_kv_view_block(v, head, pos) + 4 * (size_t)v->page_size + (size_t)r * (size_t)v->head_dim;
    size_t esz = v->dtype == TM_DT_F32 ? 4 : 2;
    return tm_kv_view_block(v, head, pos) + (size_t)r * (size_t)v->head_dim * esz;
}
static inline const void *tm_kv_view_v(const tm_kv_view *v, int head, int pos)
{
    return (const uint8_t *)tm_kv_view_k(v, head, pos) + v->v_offset;
}
static inline float tm_kv_view_k_scale(const tm_kv_view *v, int head, int pos)
{
    float s;
    memcpy(&s, tm_kv_view_block(v, head, pos) + 4 * (size_t)(pos % v->page_size), 4);
    return s;
}
static inline float tm_kv_view_v_scale(const tm_kv_view *v, int head, int pos)
{
    float s;
    memcpy(&s, tm_kv_view_block(v, head, pos) + v->v_offset + 4 * (size_t)(pos % v->page_size), 4);
    return s;
}

#endif
