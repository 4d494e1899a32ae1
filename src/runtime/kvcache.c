/* runtime/kvcache.c: see kvcache.h for the design block. */
#include "runtime/kvcache.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it with EINVAL */
#endif

struct tm_kv_cache {
    tm_kv_cache_opts o;
    size_t block_bytes;  /* one (page, layer, head): tm_kv_block_bytes */
    size_t layer_bytes;  /* K and V of one (page, layer): 2 * Hk * block_bytes */
    size_t page_bytes;   /* one page, all layers: L * layer_bytes */
    uint8_t *arena;      /* [n_pages][L][2][Hk] blocks (design block in kvcache.h) */
    int32_t *free_list;  /* [n_pages] stack of free page ids */
    int n_free;
    int32_t *ref;        /* [n_pages] page tables holding the page */
    /* published pages (design block): a hash of chains by key, an LRU list of the idle ones */
    uint64_t *key, *parent;   /* [n_pages] */
    int32_t *toks;       /* [n_pages][page_size] the page's tokens */
    uint8_t *published;  /* [n_pages] */
    int32_t *hnext;      /* [n_pages] next page in the key's bucket, -1 */
    int32_t *bucket;     /* [n_buckets] first page, -1 */
    uint32_t n_buckets;  /* a power of two >= n_pages */
    int32_t *prev, *next;/* [n_pages] the idle list, oldest at head */
    int32_t head, tail;
    int n_idle;
    uint64_t epoch;      /* page releases so far (tm_kv_cache_epoch) */
    uint64_t uid;        /* tm_kv_cache_uid */
    uint64_t seq_uids;   /* tm_kv_seq.uid handed out so far (under lock) */
    pthread_mutex_t lock;
    int lock_ok;         /* initialised (tm_kv_cache_free after a failed init) */
};

size_t tm_kv_block_bytes(tm_dtype dt, int page_size, int head_dim)
{
    size_t rows = (size_t)page_size * (size_t)head_dim;
    switch (dt) {
    case TM_DT_F32: return rows * 4;
    case TM_DT_BF16:
    case TM_DT_F16: return rows * 2;
    case TM_DT_Q8PC: return (4 * (size_t)page_size + rows + 63) & ~(size_t)63;
    default: return 0;
    }
}

/* Fault in bytes [off, off + n) of the arena, from off's 4 KB page on (madvise wants it aligned;
 * best effort: EINVAL before Linux 5.14) */
static void populate(const tm_kv_cache *kv, size_t off, size_t n)
{
    size_t a = off & ~(size_t)4095;
    madvise(kv->arena + a, n + (off - a), MADV_POPULATE_WRITE);
}

/* The storage of positions [0, tokens) of the first sequence (design block). Measured on dev
 * (Qwen2.5-0.5B shape, bf16, huge pages): the first 512-token prefill of a session had spent
 * 86-149 ms faulting them in. */
static void prefault(const tm_kv_cache *kv, int tokens)
{
    const tm_kv_cache_opts *o = &kv->o;
    int full = tokens / o->page_size, part = tokens % o->page_size;
    if (full >= o->n_pages) {
        full = o->n_pages;
        part = 0;
    }
    if (full) populate(kv, 0, (size_t)full * kv->page_bytes);
    if (!part) return;
    /* page `full` in part: the head of each (layer, K/V, head) block */
    size_t head = (size_t)((double)part / o->page_size * (double)kv->block_bytes) + 1;
    size_t nblk = (size_t)o->n_layers * 2 * (size_t)o->n_kv_heads;
    for (size_t b = 0; b < nblk; b++) populate(kv, (size_t)full * kv->page_bytes + b * kv->block_bytes, head);
}

int tm_kv_cache_init(tm_kv_cache **out, const tm_kv_cache_opts *o, tm_err *err)
{
    *out = NULL;
    if (o->n_layers <= 0 || o->n_kv_heads <= 0 || o->head_dim <= 0 || o->head_dim > TM_KV_MAX_DH || o->n_pages <= 0 ||
        o->page_size <= 0 || o->page_size > 65536 || (o->page_size & (o->page_size - 1)))
        return tm_errf(err, TM_E_INVALID, "kv cache: invalid geometry (L %d, Hk %d, Dh %d, page %d, pages %d)",
                       o->n_layers, o->n_kv_heads, o->head_dim, o->page_size, o->n_pages);
    if (!tm_kv_block_bytes(o->dtype, 1, 1))
        return tm_errf(err, TM_E_UNSUPPORTED, "kv cache: dtype %s not supported (bf16, f16, f32, int8)",
                       tm_dtype_name(o->dtype));
    tm_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return tm_errf(err, TM_E_NOMEM, "kv cache: out of memory");
    kv->o = *o;
    static uint64_t uids;
    kv->uid = __atomic_add_fetch(&uids, 1, __ATOMIC_RELAXED);
    kv->block_bytes = tm_kv_block_bytes(o->dtype, o->page_size, o->head_dim);
    kv->layer_bytes = 2 * (size_t)o->n_kv_heads * kv->block_bytes;
    kv->page_bytes = (size_t)o->n_layers * kv->layer_bytes;
    size_t total = kv->page_bytes * (size_t)o->n_pages;
    if (total / (size_t)o->n_pages != kv->page_bytes) {
        free(kv);
        return tm_errf(err, TM_E_INVALID, "kv cache: size overflows");
    }
    /* page-aligned so every block starts on a cache line (block_bytes is
     * a multiple of 64: always for int8, and for the others whenever
     * page_size * Dh * esz is, i.e. for Dh >= 32 with 16-token pages). */
    /* A big arena asks for transparent huge pages (best effort): decode
     * attention touches one block per page per (layer, head), each in a
     * different 4 KB page, so with 4 KB pages every block is a TLB miss. */
    size_t align = total >= ((size_t)2 << 20) ? (size_t)2 << 20 : 4096;
    if (posix_memalign((void **)&kv->arena, align, total ? total : 64) != 0) kv->arena = NULL;
#ifdef MADV_HUGEPAGE
    if (kv->arena && align > 4096) madvise(kv->arena, total, MADV_HUGEPAGE);
#endif
    size_t np = (size_t)o->n_pages;
    kv->n_buckets = 1;
    while (kv->n_buckets < np) kv->n_buckets *= 2;
    kv->free_list = malloc(sizeof(int32_t) * np);
    kv->ref = calloc(np, sizeof(int32_t));
    kv->key = malloc(sizeof(uint64_t) * np);
    kv->parent = malloc(sizeof(uint64_t) * np);
    kv->toks = malloc(sizeof(int32_t) * np * (size_t)o->page_size);
    kv->published = calloc(np, 1);
    kv->hnext = malloc(sizeof(int32_t) * np);
    kv->bucket = malloc(sizeof(int32_t) * kv->n_buckets);
    kv->prev = malloc(sizeof(int32_t) * np);
    kv->next = malloc(sizeof(int32_t) * np);
    if (!kv->arena || !kv->free_list || !kv->ref || !kv->key || !kv->parent || !kv->toks || !kv->published ||
        !kv->hnext || !kv->bucket || !kv->prev || !kv->next) {
        tm_kv_cache_free(kv);
        return tm_errf(err, TM_E_NOMEM, "kv cache: cannot allocate %zu bytes", total);
    }
    for (uint32_t b = 0; b < kv->n_buckets; b++) kv->bucket[b] = -1;
    kv->head = kv->tail = -1;
    for (int i = 0; i < o->n_pages; i++) kv->free_list[i] = o->n_pages - 1 - i; /* page 0 out first */
    if (o->prefault_tokens > 0) prefault(kv, o->prefault_tokens);
    kv->n_free = o->n_pages;
    pthread_mutex_init(&kv->lock, NULL);
    kv->lock_ok = 1;
    *out = kv;
    return TM_OK;
}

void tm_kv_cache_free(tm_kv_cache *kv)
{
    if (!kv) return;
    if (kv->lock_ok) pthread_mutex_destroy(&kv->lock);
    free(kv->arena);
    free(kv->free_list);
    free(kv->ref);
    free(kv->key);
    free(kv->parent);
    free(kv->toks);
    free(kv->published);
    free(kv->hnext);
    free(kv->bucket);
    free(kv->prev);
    free(kv->next);
    free(kv);
}

const tm_kv_cache_opts *tm_kv_cache_info(const tm_kv_cache *kv) { return &kv->o; }
size_t tm_kv_cache_bytes(const tm_kv_cache *kv) { return kv->page_bytes * (size_t)kv->o.n_pages; }

int tm_kv_cache_free_pages(tm_kv_cache *kv)
{
    pthread_mutex_lock(&kv->lock);
    int n = kv->n_free + kv->n_idle;
    pthread_mutex_unlock(&kv->lock);
    return n;
}

int tm_kv_cache_idle_pages(tm_kv_cache *kv)
{
    pthread_mutex_lock(&kv->lock);
    int n = kv->n_idle;
    pthread_mutex_unlock(&kv->lock);
    return n;
}

/* ---- the idle list and the key index (under kv->lock) ---- */

static void idle_unlink(tm_kv_cache *kv, int32_t p)
{
    if (kv->prev[p] >= 0) kv->next[kv->prev[p]] = kv->next[p];
    else kv->head = kv->next[p];
    if (kv->next[p] >= 0) kv->prev[kv->next[p]] = kv->prev[p];
    else kv->tail = kv->prev[p];
    kv->n_idle--;
}

static void idle_push(tm_kv_cache *kv, int32_t p)
{
    kv->prev[p] = kv->tail;
    kv->next[p] = -1;
    if (kv->tail >= 0) kv->next[kv->tail] = p;
    else kv->head = p;
    kv->tail = p;
    kv->n_idle++;
}

static uint32_t bucket_of(const tm_kv_cache *kv, uint64_t key) { return (uint32_t)(key ^ (key >> 32)) & (kv->n_buckets - 1); }

static void unpublish(tm_kv_cache *kv, int32_t p)
{
    for (int32_t *at = &kv->bucket[bucket_of(kv, kv->key[p])]; *at >= 0; at = &kv->hnext[*at])
        if (*at == p) {
            *at = kv->hnext[p];
            break;
        }
    kv->published[p] = 0;
}

static int32_t find(const tm_kv_cache *kv, uint64_t parent, uint64_t key, const int32_t *tokens)
{
    size_t ps = (size_t)kv->o.page_size;
    for (int32_t p = kv->bucket[bucket_of(kv, key)]; p >= 0; p = kv->hnext[p])
        if (kv->key[p] == key && kv->parent[p] == parent && !memcmp(kv->toks + (size_t)p * ps, tokens, ps * sizeof(int32_t)))
            return p;
    return -1;
}

static int grow_table(tm_kv_seq *seq, int need, tm_err *err)
{
    if (need <= seq->cap) return TM_OK;
    int cap = seq->cap ? seq->cap : 8;
    while (cap < need) cap *= 2;
    int32_t *p = realloc(seq->pages, sizeof(int32_t) * (size_t)cap);
    if (!p) return tm_errf(err, TM_E_NOMEM, "kv cache: out of memory for a page table");
    seq->pages = p;
    seq->cap = cap;
    return TM_OK;
}

int tm_kv_seq_reserve(tm_kv_cache *kv, tm_kv_seq *seq, int n_tokens, tm_err *err)
{
    int ps = kv->o.page_size;
    int need = (n_tokens + ps - 1) / ps;
    if (need <= seq->n_pages) return TM_OK;
    int rc = grow_table(seq, need, err);
    if (rc) return rc;
    pthread_mutex_lock(&kv->lock);
    int more = need - seq->n_pages;
    if (more > kv->n_free + kv->n_idle) {
        int nf = kv->n_free + kv->n_idle;
        pthread_mutex_unlock(&kv->lock);
        return tm_errf(err, TM_E_LIMIT, "kv cache full: %d tokens need %d more pages, %d free of %d",
                       n_tokens, more, nf, kv->o.n_pages);
    }
    for (int i = 0; i < more; i++) {
        int32_t p;
        if (kv->n_free) {
            p = kv->free_list[--kv->n_free];
        } else { /* the least recently used idle page gives up its KV */
            p = kv->head;
            idle_unlink(kv, p);
            unpublish(kv, p);
        }
        kv->ref[p] = 1;
        seq->pages[seq->n_pages++] = p;
    }
    if (!seq->uid) seq->uid = ++kv->seq_uids;
    pthread_mutex_unlock(&kv->lock);
    return TM_OK;
}

uint64_t tm_kv_cache_epoch(const tm_kv_cache *kv) { return __atomic_load_n(&kv->epoch, __ATOMIC_RELAXED); }
uint64_t tm_kv_cache_uid(const tm_kv_cache *kv) { return kv->uid; }

void tm_kv_seq_release(tm_kv_cache *kv, tm_kv_seq *seq)
{
    if (seq->n_pages) {
        pthread_mutex_lock(&kv->lock);
        for (int i = 0; i < seq->n_pages; i++) {
            int32_t p = seq->pages[i];
            if (--kv->ref[p] > 0) continue;
            __atomic_add_fetch(&kv->epoch, 1, __ATOMIC_RELAXED);
            if (kv->published[p]) idle_push(kv, p);
            else kv->free_list[kv->n_free++] = p;
        }
        pthread_mutex_unlock(&kv->lock);
    }
    free(seq->pages);
    memset(seq, 0, sizeof *seq);
}

/* FNV-style over the ids, then a 64-bit finaliser (splitmix64's): a key depends on every token
 * from position 0 through its parent */
uint64_t tm_kv_page_key(uint64_t parent, const int32_t *tokens, int page_size)
{
    uint64_t h = parent ^ 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < page_size; i++) h = (h ^ (uint32_t)tokens[i]) * 0x100000001B3ull;
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

int tm_kv_publish(tm_kv_cache *kv, int32_t page, uint64_t parent, uint64_t key, const int32_t *tokens)
{
    size_t ps = (size_t)kv->o.page_size;
    pthread_mutex_lock(&kv->lock);
    int ok = page >= 0 && page < kv->o.n_pages && kv->ref[page] > 0 && !kv->published[page] &&
             find(kv, parent, key, tokens) < 0;
    if (ok) {
        kv->published[page] = 1;
        kv->key[page] = key;
        kv->parent[page] = parent;
        memcpy(kv->toks + (size_t)page * ps, tokens, ps * sizeof(int32_t));
        uint32_t b = bucket_of(kv, key);
        kv->hnext[page] = kv->bucket[b];
        kv->bucket[b] = page;
    }
    pthread_mutex_unlock(&kv->lock);
    return ok;
}

int tm_kv_seq_take_published(tm_kv_cache *kv, tm_kv_seq *seq, uint64_t parent, uint64_t key, const int32_t *tokens,
                             tm_err *err)
{
    int rc = grow_table(seq, seq->n_pages + 1, err);
    if (rc) return rc;
    pthread_mutex_lock(&kv->lock);
    int32_t p = find(kv, parent, key, tokens);
    if (p >= 0) {
        if (kv->ref[p]++ == 0) idle_unlink(kv, p);
        seq->pages[seq->n_pages++] = p;
        if (!seq->uid) seq->uid = ++kv->seq_uids;
    }
    pthread_mutex_unlock(&kv->lock);
    return p >= 0;
}

void *tm_kv_page_k(const tm_kv_cache *kv, int32_t page, int layer, int head)
{
    return kv->arena + (size_t)page * kv->page_bytes + (size_t)layer * kv->layer_bytes +
           (size_t)head * kv->block_bytes;
}

void *tm_kv_page_v(const tm_kv_cache *kv, int32_t page, int layer, int head)
{
    return (uint8_t *)tm_kv_page_k(kv, page, layer, head) + (size_t)kv->o.n_kv_heads * kv->block_bytes;
}

void tm_kv_view_of(const tm_kv_cache *kv, const tm_kv_seq *seq, int layer, tm_kv_view *v)
{
    v->pages = seq->pages;
    v->page_size = kv->o.page_size;
    v->n_tokens = seq->n_tokens;
    v->dtype = kv->o.dtype;
    v->base = kv->arena + (size_t)layer * kv->layer_bytes;
    v->page_stride = kv->page_bytes;
    v->head_stride = kv->block_bytes;
    v->v_offset = (size_t)kv->o.n_kv_heads * kv->block_bytes;
    v->head_dim = kv->o.head_dim;
}

void tm_kv_quant_row(int8_t *q, float *scale, const float *x, int n)
{
    float amax = 0.f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a; /* NaN compares false: ignored */
    }
    float inv = amax > 0.f ? 127.f / amax : 0.f;
    for (int i = 0; i < n; i++) {
        /* clamped, NaN -> 0, round half to even: adding and taking away
         * 1.5 * 2^23 is exact RNE for |p| < 2^22 (no libm call) */
        float p = x[i] * inv;
        q[i] = (int8_t)(!(p == p) ? 0 : p >= 127.f ? 127 : p <= -127.f ? -127 : (int)((p + 12582912.f) - 12582912.f));
    }
    *scale = amax / 127.f;
}

void tm_kv_row_store(const tm_kv_cache *kv, void *block, int slot, const float *x)
{
    int Dh = kv->o.head_dim;
    uint8_t *b = block;
    switch (kv->o.dtype) {
    case TM_DT_F32: memcpy(b + (size_t)slot * Dh * 4, x, (size_t)Dh * 4); break;
    case TM_DT_BF16:
        for (int i = 0; i < Dh; i++) ((uint16_t *)b)[(size_t)slot * Dh + i] = tm_f32_to_bf16(x[i]);
        break;
    case TM_DT_F16:
        for (int i = 0; i < Dh; i++) ((uint16_t *)b)[(size_t)slot * Dh + i] = tm_f32_to_f16(x[i]);
        break;
    default: { /* Q8PC */
        float s;
        tm_kv_quant_row((int8_t *)(b + 4 * (size_t)kv->o.page_size + (size_t)slot * Dh), &s, x, Dh);
        memcpy(b + 4 * (size_t)slot, &s, 4);
    }
    }
}

void tm_kv_row_load(const tm_kv_cache *kv, const void *block, int slot, float *x)
{
    int Dh = kv->o.head_dim;
    const uint8_t *b = block;
    if (kv->o.dtype != TM_DT_Q8PC) {
        size_t esz = kv->o.dtype == TM_DT_F32 ? 4 : 2;
        tm_to_f32(x, b + (size_t)slot * Dh * esz, kv->o.dtype, (size_t)Dh);
        return;
    }
    float s;
    memcpy(&s, b + 4 * (size_t)slot, 4);
    const int8_t *q = (const int8_t *)(b + 4 * (size_t)kv->o.page_size + (size_t)slot * Dh);
    for (int i = 0; i < Dh; i++) x[i] = s * (float)q[i];
}
