/* pkg/pkg_read.c: open, validate and query a package (see pkg.h, pkg_format.h).
 *
 * Validation order: header (size, magic, version, byte order, hash, file
 * size, alignment, index location), index (hash, counts, exact size), names,
 * tensor and document records (encoding sizes, alignment, ranges), overlaps,
 * duplicate (name, stage) pairs, metadata JSON and the functions table. Every
 * check runs before anything is allocated in proportion to a count the file
 * claims, and the counts are bounded by the (already checked) index size. */
#include "pkg/pkg-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/fileio.h"
#include "pkg/checksum.h"
#include "quant/quant.h"

typedef struct pkg_doc {
    const char *name;
    const char *text;    /* [size] bytes + a 0 byte, in the mapping */
    uint64_t size;
} pkg_doc;

typedef struct stage_ctx {
    const tm_pkg *p;
    unsigned stage;      /* TM_PKG_PREFILL or TM_PKG_DECODE */
} stage_ctx;

struct tm_pkg {
    const uint8_t *base;         /* [size] the whole file */
    uint64_t size;
    tm_map map;                  /* owned mapping; size 0 when opened from memory */
    char label[512];             /* the path, for messages */
    tm_pkg_header h;
    uint32_t n_tensors;
    tm_pkg_entry *tensors;       /* [n_tensors] in file order */
    uint32_t *by_name;           /* [n_tensors] indices into tensors, sorted by name then stages */
    uint32_t n_docs;
    pkg_doc *docs;               /* [n_docs] */
    const char *meta_text;       /* the metadata JSON, NUL-terminated, in the mapping */
    cJSON *meta;                 /* parsed; the functions' strings point into it */
    int n_functions;
    tm_pkg_function *functions;  /* [n_functions] */
    stage_ctx stages[2];         /* [0] prefill, [1] decode */
};

typedef struct region {
    uint64_t start, end;         /* [start, end) in the file */
    const char *kind;            /* "tensor" or "document" */
    const char *name;
} region;

static int fmt_err(const tm_pkg *p, tm_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fmt_err(const tm_pkg *p, tm_err *err, int code, const char *fmt, ...)
{
    char msg[TM_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tm_errf(err, code, "%s: %s", p->label, msg);
}

/* a name in the string pool (section 4.2) */
static const char *pool_name(const char *pool, uint64_t pool_size, uint32_t off, uint32_t len)
{
    if (len < 1 || len > TM_PKG_MAX_NAME || off >= pool_size || len >= pool_size - off) return NULL;
    const char *s = pool + off;
    if (s[len] != '\0' || memchr(s, 0, len)) return NULL;
    return s;
}

static int check_header(tm_pkg *p, tm_err *err)
{
    const uint8_t *b = p->base;
    if (p->size < TM_PKG_HEADER_SIZE)
        return fmt_err(p, err, TM_E_FORMAT, "truncated: %llu bytes, a package header needs %u",
                       (unsigned long long)p->size, TM_PKG_HEADER_SIZE);
    if (memcmp(b, TM_PKG_MAGIC, 4) != 0) {
        const char *what = memcmp(b, "GGUF", 4) == 0 ? " (it is a GGUF file)" : "";
        return fmt_err(p, err, TM_E_FORMAT, "bad magic: not a tandem package%s", what);
    }
    tm_pkg_header *h = &p->h;
    tm_pkg_header_get(b, h);
    if (h->version != TM_PKG_VERSION)
        return fmt_err(p, err, TM_E_UNSUPPORTED, "header.version: format version %u, this build reads version %u (%s)",
                       h->version, TM_PKG_VERSION,
                       h->version < TM_PKG_VERSION ? "re-convert the model" : "written by a newer tandem");
    if (h->byte_order == 0x04030201u)
        return fmt_err(p, err, TM_E_UNSUPPORTED, "header.byte_order: written big-endian, not supported");
    if (h->byte_order != TM_PKG_BYTE_ORDER)
        return fmt_err(p, err, TM_E_FORMAT, "header.byte_order: 0x%08x is not the marker 0x%08x", h->byte_order,
                       TM_PKG_BYTE_ORDER);
    if (tm_xxh64(b, 56, 0) != h->header_hash)
        return fmt_err(p, err, TM_E_CHECKSUM, "header checksum mismatch: the header is corrupt");
    if (h->file_size != p->size)
        return fmt_err(p, err, TM_E_FORMAT, "%s: the file is %llu bytes, the header says %llu",
                       p->size < h->file_size ? "truncated" : "trailing bytes", (unsigned long long)p->size,
                       (unsigned long long)h->file_size);
    uint32_t a = h->alignment;
    if (a < TM_PKG_MIN_ALIGNMENT || a > TM_PKG_MAX_ALIGNMENT || (a & (a - 1)))
        return fmt_err(p, err, TM_E_FORMAT, "header.alignment: %u is not a power of two in [%u, %u]", a,
                       TM_PKG_MIN_ALIGNMENT, TM_PKG_MAX_ALIGNMENT);
    if (h->flags != 0)
        return fmt_err(p, err, TM_E_UNSUPPORTED, "header.flags: unknown flags 0x%llx", (unsigned long long)h->flags);
    if (h->index_offset < a || h->index_offset % a != 0 || h->index_offset > p->size ||
        h->index_size != p->size - h->index_offset || h->index_size < TM_PKG_INDEX_HEADER_SIZE + 1)
        return fmt_err(p, err, TM_E_FORMAT,
                       "header.index_offset/index_size: [%llu, +%llu) is not an aligned range ending the file",
                       (unsigned long long)h->index_offset, (unsigned long long)h->index_size);
    if (tm_xxh64(b + h->index_offset, (size_t)h->index_size, 0) != h->index_hash)
        return fmt_err(p, err, TM_E_CHECKSUM, "index checksum mismatch: the tensor table or metadata is corrupt");
    return TM_OK;
}

/* a data region [off, off + n) must be aligned and lie in [alignment, index_offset) */
static int range_ok(const tm_pkg *p, uint64_t off, uint64_t n, uint64_t align)
{
    return off >= p->h.alignment && off % align == 0 && off <= p->h.index_offset && n <= p->h.index_offset - off;
}

static int load_tensor(tm_pkg *p, const uint8_t *rec, const char *pool, uint64_t pool_size, uint32_t i,
                       region *reg, tm_err *err)
{
    tm_pkg_tensor_rec r;
    tm_pkg_tensor_rec_get(rec, &r);
    const char *name = pool_name(pool, pool_size, r.name_off, r.name_len);
    if (!name)
        return fmt_err(p, err, TM_E_FORMAT, "tensor #%u: name (offset %u, length %u) is not a valid pool string", i,
                       r.name_off, r.name_len);
    uint64_t data_bytes, scale_count;
    const char *why = NULL;
    if (tm_pkg_encoding_sizes(r.dtype, r.ndim, r.shape, &data_bytes, &scale_count, &why) != 0)
        return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': dtype %u, ndim %u: %s", name, r.dtype, r.ndim, why);
    for (uint32_t d = r.ndim; d < TM_MAX_DIMS; d++)
        if (r.shape[d] != 0) return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': shape[%u] beyond ndim is not 0", name, d);
    if (r.stages == 0 || (r.stages & ~TM_PKG_STAGE_BITS) || r.flags != 0)
        return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': stages 0x%x / flags 0x%x invalid", name, r.stages, r.flags);
    const char *dt = tm_dtype_name((tm_dtype)r.dtype);
    if (r.data_size != data_bytes)
        return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': data_size %llu, but a %s tensor of this shape has %llu",
                       name, (unsigned long long)r.data_size, dt, (unsigned long long)data_bytes);
    if (!range_ok(p, r.data_offset, r.data_size, p->h.alignment))
        return fmt_err(p, err, TM_E_FORMAT,
                       "tensor '%s': data [%llu, +%llu) is unaligned or outside the data area [%u, %llu)", name,
                       (unsigned long long)r.data_offset, (unsigned long long)r.data_size, p->h.alignment,
                       (unsigned long long)p->h.index_offset);
    uint64_t end = r.data_offset + r.data_size;
    if (scale_count == 0 && (r.scales_offset || r.scales_size))
        return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': a %s tensor has no scales", name, dt);
    if (scale_count) {
        const uint64_t sbytes = scale_count * tm_quant_scale_bytes((tm_dtype)r.dtype);
        if (r.scales_size != sbytes || r.scales_offset != tm_pkg_scales_offset(r.data_offset, r.data_size))
            return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': scales [%llu, +%llu) should be [%llu, +%llu)", name,
                           (unsigned long long)r.scales_offset, (unsigned long long)r.scales_size,
                           (unsigned long long)tm_pkg_scales_offset(r.data_offset, r.data_size),
                           (unsigned long long)sbytes);
        if (!range_ok(p, r.scales_offset, r.scales_size, TM_PKG_SCALES_ALIGN))
            return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': scales [%llu, +%llu) run past the data area", name,
                           (unsigned long long)r.scales_offset, (unsigned long long)r.scales_size);
        end = r.scales_offset + r.scales_size;
    }
    tm_pkg_entry *e = &p->tensors[i];
    e->t.name = name;
    e->t.dtype = (tm_dtype)r.dtype;
    e->t.ndim = (int)r.ndim;
    for (uint32_t d = 0; d < r.ndim; d++) e->t.shape[d] = (int64_t)r.shape[d];
    e->t.data = p->base + r.data_offset;
    e->t.nbytes = (size_t)r.data_size;
    e->t.scales = scale_count ? (const void *)(p->base + r.scales_offset) : NULL;
    e->scales_bytes = (size_t)r.scales_size;
    e->stages = r.stages;
    e->offset = r.data_offset;
    e->hash = r.hash;
    *reg = (region){r.data_offset, end, "tensor", name};
    return TM_OK;
}

static int load_doc(tm_pkg *p, const uint8_t *rec, const char *pool, uint64_t pool_size, uint32_t i, region *reg,
                    tm_err *err)
{
    tm_pkg_doc_rec r;
    tm_pkg_doc_rec_get(rec, &r);
    const char *name = pool_name(pool, pool_size, r.name_off, r.name_len);
    if (!name)
        return fmt_err(p, err, TM_E_FORMAT, "document #%u: name (offset %u, length %u) is not a valid pool string", i,
                       r.name_off, r.name_len);
    if (r.size >= UINT64_MAX || !range_ok(p, r.offset, r.size + 1, p->h.alignment))
        return fmt_err(p, err, TM_E_FORMAT, "document '%s': [%llu, +%llu) is unaligned or outside the data area",
                       name, (unsigned long long)r.offset, (unsigned long long)r.size);
    const char *text = (const char *)p->base + r.offset;
    if (text[r.size] != '\0')
        return fmt_err(p, err, TM_E_FORMAT, "document '%s': not followed by a 0 byte", name);
    if (tm_xxh64(text, (size_t)r.size, 0) != r.hash)
        return fmt_err(p, err, TM_E_CHECKSUM, "document '%s': checksum mismatch", name);
    for (uint32_t k = 0; k < i; k++)
        if (strcmp(p->docs[k].name, name) == 0)
            return fmt_err(p, err, TM_E_FORMAT, "document '%s': appears twice", name);
    p->docs[i] = (pkg_doc){name, text, r.size};
    *reg = (region){r.offset, r.offset + r.size + 1, "document", name};
    return TM_OK;
}

static int region_cmp(const void *a, const void *b)
{
    const region *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int check_overlaps(tm_pkg *p, region *regs, size_t n, tm_err *err)
{
    qsort(regs, n, sizeof *regs, region_cmp);
    for (size_t i = 1; i < n; i++)
        if (regs[i].start < regs[i - 1].end)
            return fmt_err(p, err, TM_E_FORMAT, "%s '%s' [%llu, %llu) overlaps %s '%s' [%llu, %llu)", regs[i].kind,
                           regs[i].name, (unsigned long long)regs[i].start, (unsigned long long)regs[i].end,
                           regs[i - 1].kind, regs[i - 1].name, (unsigned long long)regs[i - 1].start,
                           (unsigned long long)regs[i - 1].end);
    return TM_OK;
}

static int by_name_cmp(const tm_pkg_entry *t, uint32_t a, uint32_t b)
{
    int c = strcmp(t[a].t.name, t[b].t.name);
    if (c) return c;
    return t[a].stages < t[b].stages ? -1 : t[a].stages > t[b].stages;
}

/* a merge sort of indices by name (no global state, unlike qsort + a context) */
static void by_name_sort(const tm_pkg_entry *t, uint32_t *idx, uint32_t *tmp, uint32_t n)
{
    if (n < 2) return;
    uint32_t h = n / 2;
    by_name_sort(t, idx, tmp, h);
    by_name_sort(t, idx + h, tmp, n - h);
    uint32_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = by_name_cmp(t, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

static int build_name_index(tm_pkg *p, tm_err *err)
{
    uint32_t n = p->n_tensors;
    p->by_name = malloc(((size_t)n + 1) * sizeof *p->by_name);
    uint32_t *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    if (!p->by_name || !tmp) {
        free(tmp);
        return fmt_err(p, err, TM_E_NOMEM, "out of memory indexing %u tensors", n);
    }
    for (uint32_t i = 0; i < n; i++) p->by_name[i] = i;
    by_name_sort(p->tensors, p->by_name, tmp, n);
    free(tmp);
    for (uint32_t i = 1; i < n; i++) {
        const tm_pkg_entry *a = &p->tensors[p->by_name[i - 1]], *b = &p->tensors[p->by_name[i]];
        if (strcmp(a->t.name, b->t.name) == 0 && (a->stages & b->stages))
            return fmt_err(p, err, TM_E_FORMAT, "tensor '%s': two copies for the %s stage", a->t.name,
                           (a->stages & b->stages & TM_PKG_PREFILL) ? "prefill" : "decode");
    }
    return TM_OK;
}

static int load_index(tm_pkg *p, tm_err *err)
{
    const uint8_t *idx = p->base + p->h.index_offset;
    tm_pkg_index_header ih;
    tm_pkg_index_header_get(idx, &ih);
    if (ih.n_tensors > TM_PKG_MAX_TENSORS || ih.n_docs > TM_PKG_MAX_DOCS || ih.strings_size > TM_PKG_MAX_STRINGS ||
        ih.meta_size > TM_PKG_MAX_META || ih.reserved != 0)
        return fmt_err(p, err, TM_E_FORMAT,
                       "index: n_tensors %u, n_docs %u, strings %llu bytes, metadata %llu bytes: beyond the limits "
                       "(%u, %u, %llu, %llu)",
                       ih.n_tensors, ih.n_docs, (unsigned long long)ih.strings_size, (unsigned long long)ih.meta_size,
                       TM_PKG_MAX_TENSORS, TM_PKG_MAX_DOCS, (unsigned long long)TM_PKG_MAX_STRINGS,
                       (unsigned long long)TM_PKG_MAX_META);
    uint64_t need = TM_PKG_INDEX_HEADER_SIZE + (uint64_t)TM_PKG_TENSOR_REC_SIZE * ih.n_tensors +
                    (uint64_t)TM_PKG_DOC_REC_SIZE * ih.n_docs + ih.strings_size + ih.meta_size + 1;
    if (need != p->h.index_size)
        return fmt_err(p, err, TM_E_FORMAT, "index: the counts need %llu bytes, the index is %llu",
                       (unsigned long long)need, (unsigned long long)p->h.index_size);
    const uint8_t *trec = idx + TM_PKG_INDEX_HEADER_SIZE;
    const uint8_t *drec = trec + (size_t)TM_PKG_TENSOR_REC_SIZE * ih.n_tensors;
    const char *pool = (const char *)(drec + (size_t)TM_PKG_DOC_REC_SIZE * ih.n_docs);
    const char *meta = pool + ih.strings_size;
    if (meta[ih.meta_size] != '\0') return fmt_err(p, err, TM_E_FORMAT, "metadata: not followed by a 0 byte");

    p->tensors = calloc((size_t)ih.n_tensors + 1, sizeof *p->tensors);
    p->docs = calloc((size_t)ih.n_docs + 1, sizeof *p->docs);
    region *regs = calloc((size_t)ih.n_tensors + ih.n_docs + 1, sizeof *regs);
    if (!p->tensors || !p->docs || !regs) {
        free(regs);
        return fmt_err(p, err, TM_E_NOMEM, "out of memory for %u tensor records", ih.n_tensors);
    }
    int rc = TM_OK;
    for (uint32_t i = 0; rc == TM_OK && i < ih.n_tensors; i++)
        rc = load_tensor(p, trec + (size_t)TM_PKG_TENSOR_REC_SIZE * i, pool, ih.strings_size, i, &regs[i], err);
    p->n_tensors = ih.n_tensors;
    for (uint32_t i = 0; rc == TM_OK && i < ih.n_docs; i++)
        rc = load_doc(p, drec + (size_t)TM_PKG_DOC_REC_SIZE * i, pool, ih.strings_size, i, &regs[ih.n_tensors + i],
                      err);
    p->n_docs = ih.n_docs;
    if (rc == TM_OK) rc = check_overlaps(p, regs, (size_t)ih.n_tensors + ih.n_docs, err);
    free(regs);
    if (rc == TM_OK) rc = build_name_index(p, err);
    if (rc) return rc;

    p->meta_text = meta;
    p->meta = cJSON_ParseWithLength(meta, (size_t)ih.meta_size);
    if (!cJSON_IsObject(p->meta)) return fmt_err(p, err, TM_E_FORMAT, "metadata: not a JSON object");
    return tm_pkg_functions_parse(cJSON_GetObjectItemCaseSensitive(p->meta, "functions"), p->label, &p->functions,
                                  &p->n_functions, err);
}

int tm_pkg_open_mem(tm_pkg **out, const void *data, size_t size, const char *label, tm_err *err)
{
    *out = NULL;
    tm_pkg *p = calloc(1, sizeof *p);
    if (!p) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", label ? label : "package");
    snprintf(p->label, sizeof p->label, "%s", label ? label : "package");
    p->base = data;
    p->size = size;
    p->stages[0] = (stage_ctx){p, TM_PKG_PREFILL};
    p->stages[1] = (stage_ctx){p, TM_PKG_DECODE};
    int rc = check_header(p, err);
    if (rc == TM_OK) rc = load_index(p, err);
    if (rc) {
        tm_pkg_close(p);
        return rc;
    }
    *out = p;
    return TM_OK;
}

int tm_pkg_open(tm_pkg **out, const char *path, tm_err *err)
{
    *out = NULL;
    tm_map m;
    int rc = tm_map_open(&m, path, err);
    if (rc) return rc;
    rc = tm_pkg_open_mem(out, m.data, m.size, path, err);
    if (rc) {
        tm_map_close(&m);
        return rc;
    }
    (*out)->map = m;
    return TM_OK;
}

void tm_pkg_close(tm_pkg *p)
{
    if (!p) return;
    tm_pkg_functions_free(p->functions, p->n_functions);
    cJSON_Delete(p->meta);
    free(p->tensors);
    free(p->by_name);
    free(p->docs);
    tm_map_close(&p->map);
    free(p);
}

const char *tm_pkg_label(const tm_pkg *p) { return p->label; }
uint64_t tm_pkg_file_size(const tm_pkg *p) { return p->size; }
uint32_t tm_pkg_alignment(const tm_pkg *p) { return p->h.alignment; }
uint32_t tm_pkg_version(const tm_pkg *p) { return p->h.version; }
int tm_pkg_n_tensors(const tm_pkg *p) { return (int)p->n_tensors; }

const tm_pkg_entry *tm_pkg_tensor(const tm_pkg *p, int i)
{
    return i >= 0 && (uint32_t)i < p->n_tensors ? &p->tensors[i] : NULL;
}

int tm_pkg_lookup(const tm_pkg *p, unsigned stage, const char *name, tm_tensor *out, tm_err *err)
{
    if (stage != TM_PKG_PREFILL && stage != TM_PKG_DECODE)
        return tm_errf(err, TM_E_INVALID, "%s: stage %u is not prefill (1) or decode (2)", p->label, stage);
    uint32_t lo = 0, hi = p->n_tensors; /* first index whose name is >= name */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (strcmp(p->tensors[p->by_name[mid]].t.name, name) < 0) lo = mid + 1;
        else hi = mid;
    }
    for (uint32_t i = lo; i < p->n_tensors; i++) {
        const tm_pkg_entry *e = &p->tensors[p->by_name[i]];
        if (strcmp(e->t.name, name) != 0) break;
        if (e->stages & stage) {
            *out = e->t;
            return TM_OK;
        }
    }
    return tm_errf(err, TM_E_NOTFOUND, "%s: tensor '%s': no copy for the %s stage", p->label, name,
                   stage == TM_PKG_PREFILL ? "prefill" : "decode");
}

void *tm_pkg_stage_ctx(tm_pkg *p, unsigned stage)
{
    return stage == TM_PKG_PREFILL ? &p->stages[0] : stage == TM_PKG_DECODE ? &p->stages[1] : NULL;
}

tm_tensor_source tm_pkg_source(tm_pkg *p, unsigned stage)
{
    tm_tensor_source s = {tm_pkg_stage_ctx(p, stage), tm_pkg_stage_lookup, 1};
    return s;
}

int tm_pkg_stage_lookup(void *ctx, const char *name, tm_tensor *out, tm_err *err)
{
    const stage_ctx *s = ctx;
    if (!s) return tm_errf(err, TM_E_INVALID, "package tensor source: no stage (stage must be prefill or decode)");
    return tm_pkg_lookup(s->p, s->stage, name, out, err);
}

/* madvise over the file pages of [off, off + n) of a mapped package */
static void advise(const tm_pkg *p, uint64_t off, uint64_t n, int advice)
{
    if (!p->map.size || n == 0) return; /* caller-owned memory: not ours to advise */
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t a = off & ~(pg - 1), e = (off + n + pg - 1) & ~(pg - 1);
    if (e > p->size) e = p->size;
    madvise((void *)(p->base + a), (size_t)(e - a), advice);
}

static uint64_t span(const tm_pkg_entry *e)
{
    return e->scales_bytes ? (uint64_t)((const uint8_t *)e->t.scales - (const uint8_t *)e->t.data) + e->scales_bytes
                           : e->t.nbytes;
}

int tm_pkg_verify(const tm_pkg *p, tm_err *err) { return tm_pkg_verify_flags(p, 0, err); }

int tm_pkg_verify_flags(const tm_pkg *p, unsigned flags, tm_err *err)
{
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        const tm_pkg_entry *e = &p->tensors[i];
        if (i + 1 < p->n_tensors) advise(p, p->tensors[i + 1].offset, span(&p->tensors[i + 1]), MADV_WILLNEED);
        tm_xxh64_state h;
        tm_xxh64_init(&h, 0);
        tm_xxh64_update(&h, e->t.data, e->t.nbytes);
        if (e->scales_bytes) tm_xxh64_update(&h, e->t.scales, e->scales_bytes);
        uint64_t got = tm_xxh64_digest(&h);
        if (flags & TM_PKG_VERIFY_RELEASE) advise(p, e->offset, span(e), MADV_DONTNEED);
        if (got != e->hash)
            return tm_errf(err, TM_E_CHECKSUM,
                           "%s: tensor '%s' (%s copy at offset %llu): checksum mismatch (recorded %016llx, computed "
                           "%016llx): the file is corrupt",
                           p->label, e->t.name,
                           e->stages == 3 ? "shared" : e->stages == TM_PKG_PREFILL ? "prefill" : "decode",
                           (unsigned long long)e->offset, (unsigned long long)e->hash, (unsigned long long)got);
    }
    return TM_OK;
}

const char *tm_pkg_doc(const tm_pkg *p, const char *name, size_t *len)
{
    for (uint32_t i = 0; i < p->n_docs; i++)
        if (strcmp(p->docs[i].name, name) == 0) {
            if (len) *len = (size_t)p->docs[i].size;
            return p->docs[i].text;
        }
    if (len) *len = 0;
    return NULL;
}

int tm_pkg_n_docs(const tm_pkg *p) { return (int)p->n_docs; }

const char *tm_pkg_doc_name(const tm_pkg *p, int i)
{
    return i >= 0 && (uint32_t)i < p->n_docs ? p->docs[i].name : NULL;
}

const char *tm_pkg_meta_json(const tm_pkg *p) { return p->meta_text; }

static const cJSON *meta_at(const tm_pkg *p, const char *path)
{
    const cJSON *j = p->meta;
    char key[256];
    while (j && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        j = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, key) : NULL;
        path += n + (dot ? 1 : 0);
    }
    return j;
}

const char *tm_pkg_meta_str(const tm_pkg *p, const char *path)
{
    const cJSON *j = meta_at(p, path);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

int tm_pkg_meta_num(const tm_pkg *p, const char *path, double *out)
{
    const cJSON *j = meta_at(p, path);
    if (!cJSON_IsNumber(j)) return -1;
    *out = j->valuedouble;
    return 0;
}

int tm_pkg_n_functions(const tm_pkg *p) { return p->n_functions; }

const tm_pkg_function *tm_pkg_function_at(const tm_pkg *p, int i)
{
    return i >= 0 && i < p->n_functions ? &p->functions[i] : NULL;
}

const tm_pkg_function *tm_pkg_function_find(const tm_pkg *p, const char *name)
{
    for (int i = 0; i < p->n_functions; i++)
        if (strcmp(p->functions[i].name, name) == 0) return &p->functions[i];
    return NULL;
}
