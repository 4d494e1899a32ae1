/* pkg/pkg_write.c: the streaming package writer (see pkg.h, pkg_format.h).
 *
 * Tensors and documents go to the temporary file as they arrive, each at the
 * next multiple of the alignment, hashed on the way; only their records stay
 * in memory. finish() appends the index, rewrites the header at offset 0 and
 * renames the file into place (core/fileio.h's tm_afile). */
#include "pkg/pkg-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "pkg/checksum.h"
#include "quant/quant.h"

struct tm_pkg_writer {
    tm_afile af;
    uint32_t alignment;
    uint64_t pos;                /* bytes written so far == the current file offset */
    int failed;                  /* nonzero status once an I/O error spoiled the file */
    tm_pkg_tensor_rec *recs;     /* [n_recs] in file order */
    uint32_t n_recs, cap_recs;
    uint32_t *bucket;            /* [n_bucket] hash of name -> first record + 1 (0: empty) */
    uint32_t *chain;             /* [cap_recs] next record + 1 in the same bucket */
    uint32_t n_bucket;
    tm_pkg_doc_rec *docs;        /* [n_docs] */
    uint32_t n_docs, cap_docs;
    char *pool;                  /* string pool [n_pool] */
    uint64_t n_pool, cap_pool;
    cJSON *meta;                 /* the metadata object */
    cJSON *functions;            /* meta's "functions" array (owned by meta) */
};

static const uint8_t zeros[4096];

static int io_fail(tm_pkg_writer *w, tm_err *err)
{
    w->failed = TM_E_IO;
    return tm_errf(err, TM_E_IO, "%s: write failed: %s", w->af.tmp, strerror(errno ? errno : EIO));
}

static int put_bytes(tm_pkg_writer *w, const void *p, size_t n, tm_err *err)
{
    if (n && fwrite(p, 1, n, w->af.f) != n) return io_fail(w, err);
    w->pos += n;
    return TM_OK;
}

static int pad_to(tm_pkg_writer *w, uint64_t align, tm_err *err)
{
    uint64_t rem = w->pos % align;
    for (uint64_t left = rem ? align - rem : 0; left > 0;) {
        size_t k = left < sizeof zeros ? (size_t)left : sizeof zeros;
        int rc = put_bytes(w, zeros, k, err);
        if (rc) return rc;
        left -= k;
    }
    return TM_OK;
}

/* write and hash in slices, so each slice is still in cache for the copy */
static int put_hashed(tm_pkg_writer *w, tm_xxh64_state *h, const void *p, size_t n, tm_err *err)
{
    const uint8_t *b = p;
    const size_t slice = (size_t)4 << 20;
    for (size_t off = 0; off < n; off += slice) {
        size_t k = n - off < slice ? n - off : slice;
        tm_xxh64_update(h, b + off, k);
        int rc = put_bytes(w, b + off, k, err);
        if (rc) return rc;
    }
    return TM_OK;
}

/* room for one more record (recs and chain grow together) */
static int grow_recs(tm_pkg_writer *w)
{
    if (w->n_recs < w->cap_recs) return 0;
    uint32_t c = w->cap_recs ? w->cap_recs * 2 : 64;
    tm_pkg_tensor_rec *r = realloc(w->recs, (size_t)c * sizeof *r);
    if (!r) return -1;
    w->recs = r;
    uint32_t *ch = realloc(w->chain, (size_t)c * sizeof *ch);
    if (!ch) return -1;
    w->chain = ch;
    w->cap_recs = c;
    return 0;
}

static int pool_add(tm_pkg_writer *w, const char *s, uint32_t *off, uint32_t *len, tm_err *err)
{
    size_t n = strlen(s);
    if (w->n_pool + n + 1 > TM_PKG_MAX_STRINGS)
        return tm_errf(err, TM_E_LIMIT, "%s: names exceed the %llu-byte string pool", w->af.path,
                       (unsigned long long)TM_PKG_MAX_STRINGS);
    if (w->n_pool + n + 1 > w->cap_pool) {
        uint64_t c = w->cap_pool ? w->cap_pool * 2 : 4096;
        while (c < w->n_pool + n + 1) c *= 2;
        char *q = realloc(w->pool, (size_t)c);
        if (!q) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->af.path);
        w->pool = q;
        w->cap_pool = c;
    }
    *off = (uint32_t)w->n_pool;
    *len = (uint32_t)n;
    memcpy(w->pool + w->n_pool, s, n + 1);
    w->n_pool += n + 1;
    return TM_OK;
}

static const char *rec_name(const tm_pkg_writer *w, uint32_t i) { return w->pool + w->recs[i].name_off; }

static uint32_t name_bucket(const tm_pkg_writer *w, const char *name)
{
    return (uint32_t)(tm_xxh64(name, strlen(name), 0) & (w->n_bucket - 1));
}

/* the stages already taken by records named `name` */
static unsigned stages_taken(const tm_pkg_writer *w, const char *name)
{
    unsigned taken = 0;
    if (!w->n_bucket) return 0;
    for (uint32_t r = w->bucket[name_bucket(w, name)]; r; r = w->chain[r - 1])
        if (strcmp(rec_name(w, r - 1), name) == 0) taken |= w->recs[r - 1].stages;
    return taken;
}

static int index_rec(tm_pkg_writer *w, uint32_t i)
{
    if (w->n_recs * 2 >= w->n_bucket) { /* rehash into twice the buckets */
        uint32_t nb = w->n_bucket ? w->n_bucket * 2 : 256;
        uint32_t *b = calloc(nb, sizeof *b);
        if (!b) return -1;
        free(w->bucket);
        w->bucket = b;
        w->n_bucket = nb;
        for (uint32_t r = 0; r < i; r++) {
            uint32_t k = name_bucket(w, rec_name(w, r));
            w->chain[r] = w->bucket[k];
            w->bucket[k] = r + 1;
        }
    }
    uint32_t k = name_bucket(w, rec_name(w, i));
    w->chain[i] = w->bucket[k];
    w->bucket[k] = i + 1;
    return 0;
}

int tm_pkg_writer_open(tm_pkg_writer **out, const char *path, uint32_t alignment, tm_err *err)
{
    *out = NULL;
    if (alignment == 0) alignment = TM_PKG_ALIGNMENT;
    if (alignment < TM_PKG_MIN_ALIGNMENT || alignment > TM_PKG_MAX_ALIGNMENT || (alignment & (alignment - 1)))
        return tm_errf(err, TM_E_INVALID, "%s: alignment %u is not a power of two in [%u, %u]", path, alignment,
                       TM_PKG_MIN_ALIGNMENT, TM_PKG_MAX_ALIGNMENT);
    tm_pkg_writer *w = calloc(1, sizeof *w);
    if (!w) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", path);
    w->alignment = alignment;
    w->meta = cJSON_CreateObject();
    w->functions = cJSON_AddArrayToObject(w->meta, "functions");
    if (!w->meta || !w->functions) {
        cJSON_Delete(w->meta);
        free(w);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", path);
    }
    int rc = tm_afile_open(&w->af, path, err);
    if (rc) {
        cJSON_Delete(w->meta);
        free(w);
        return rc;
    }
    /* the header page: zeros now, the real header at finish */
    for (uint64_t n = 0; rc == TM_OK && n < alignment; n += sizeof zeros)
        rc = put_bytes(w, zeros, alignment - n < sizeof zeros ? alignment - n : sizeof zeros, err);
    if (rc) {
        tm_pkg_writer_abort(w);
        return rc;
    }
    *out = w;
    return TM_OK;
}

int tm_pkg_writer_add_tensor(tm_pkg_writer *w, const tm_tensor *t, unsigned stages, tm_err *err)
{
    if (w->failed) return tm_errf(err, w->failed, "%s: an earlier write failed", w->af.path);
    const char *name = t->name ? t->name : "";
    const char *file = w->af.path;
    size_t nlen = strlen(name);
    if (nlen < 1 || nlen > TM_PKG_MAX_NAME)
        return tm_errf(err, TM_E_INVALID, "%s: tensor name '%.64s': length %zu not in [1, %u]", file, name, nlen,
                       TM_PKG_MAX_NAME);
    if (stages == 0 || (stages & ~TM_PKG_STAGE_BITS))
        return tm_errf(err, TM_E_INVALID, "%s: tensor '%s': stages mask %u is not a nonzero mask of prefill|decode",
                       file, name, stages);
    if (w->n_recs >= TM_PKG_MAX_TENSORS)
        return tm_errf(err, TM_E_LIMIT, "%s: more than %u tensors", file, TM_PKG_MAX_TENSORS);
    tm_pkg_tensor_rec r;
    memset(&r, 0, sizeof r);
    if (t->ndim < 1 || t->ndim > TM_MAX_DIMS)
        return tm_errf(err, TM_E_INVALID, "%s: tensor '%s': ndim %d not in [1, 4]", file, name, t->ndim);
    r.ndim = (uint32_t)t->ndim;
    r.dtype = (uint32_t)t->dtype;
    for (int i = 0; i < t->ndim; i++) r.shape[i] = t->shape[i] < 0 ? UINT64_MAX : (uint64_t)t->shape[i];
    uint64_t data_bytes, scale_count;
    const char *why = NULL;
    if (tm_pkg_encoding_sizes(r.dtype, r.ndim, r.shape, &data_bytes, &scale_count, &why) != 0)
        return tm_errf(err, TM_E_INVALID, "%s: tensor '%s' (%s): %s", file, name, tm_dtype_name(t->dtype), why);
    if (t->nbytes != data_bytes || !t->data)
        return tm_errf(err, TM_E_INVALID, "%s: tensor '%s' (%s): %zu data bytes given, the shape needs %llu", file,
                       name, tm_dtype_name(t->dtype), t->data ? t->nbytes : 0, (unsigned long long)data_bytes);
    if (scale_count && !t->scales)
        return tm_errf(err, TM_E_INVALID, "%s: tensor '%s' (%s): needs %llu scales, none given", file, name,
                       tm_dtype_name(t->dtype), (unsigned long long)scale_count);
    unsigned taken = stages_taken(w, name);
    if (taken & stages)
        return tm_errf(err, TM_E_INVALID, "%s: tensor '%s': the %s stage already has a copy", file, name,
                       (taken & stages & TM_PKG_PREFILL) ? "prefill" : "decode");
    if (grow_recs(w) != 0) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", file);
    int rc = pool_add(w, name, &r.name_off, &r.name_len, err);
    if (rc) return rc;
    r.stages = stages;
    if ((rc = pad_to(w, w->alignment, err))) return rc;
    r.data_offset = w->pos;
    r.data_size = data_bytes;
    tm_xxh64_state h;
    tm_xxh64_init(&h, 0);
    if ((rc = put_hashed(w, &h, t->data, (size_t)data_bytes, err))) return rc;
    if (scale_count) {
        if ((rc = pad_to(w, TM_PKG_SCALES_ALIGN, err))) return rc;
        r.scales_offset = w->pos;
        r.scales_size = scale_count * tm_quant_scale_bytes(t->dtype);
        if ((rc = put_hashed(w, &h, t->scales, (size_t)r.scales_size, err))) return rc;
    }
    r.hash = tm_xxh64_digest(&h);
    w->recs[w->n_recs] = r;
    if (index_rec(w, w->n_recs) != 0) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", file);
    w->n_recs++;
    return TM_OK;
}

int tm_pkg_writer_add_doc(tm_pkg_writer *w, const char *name, const void *data, size_t n, tm_err *err)
{
    if (w->failed) return tm_errf(err, w->failed, "%s: an earlier write failed", w->af.path);
    const char *file = w->af.path;
    size_t nlen = name ? strlen(name) : 0;
    if (nlen < 1 || nlen > TM_PKG_MAX_NAME)
        return tm_errf(err, TM_E_INVALID, "%s: document name length %zu not in [1, %u]", file, nlen, TM_PKG_MAX_NAME);
    if (n && !data) return tm_errf(err, TM_E_INVALID, "%s: document '%s': no data", file, name);
    if (w->n_docs >= TM_PKG_MAX_DOCS)
        return tm_errf(err, TM_E_LIMIT, "%s: more than %u documents", file, TM_PKG_MAX_DOCS);
    for (uint32_t i = 0; i < w->n_docs; i++)
        if (strcmp(w->pool + w->docs[i].name_off, name) == 0)
            return tm_errf(err, TM_E_INVALID, "%s: document '%s' added twice", file, name);
    if (w->n_docs == w->cap_docs) {
        uint32_t c = w->cap_docs ? w->cap_docs * 2 : 16;
        tm_pkg_doc_rec *d = realloc(w->docs, (size_t)c * sizeof *d);
        if (!d) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", file);
        w->docs = d;
        w->cap_docs = c;
    }
    tm_pkg_doc_rec r;
    memset(&r, 0, sizeof r);
    int rc = pool_add(w, name, &r.name_off, &r.name_len, err);
    if (rc || (rc = pad_to(w, w->alignment, err))) return rc;
    r.offset = w->pos;
    r.size = n;
    tm_xxh64_state h;
    tm_xxh64_init(&h, 0);
    if ((rc = put_hashed(w, &h, data, n, err)) || (rc = put_bytes(w, zeros, 1, err))) return rc;
    r.hash = tm_xxh64_digest(&h);
    w->docs[w->n_docs++] = r;
    return TM_OK;
}

int tm_pkg_writer_set_meta(tm_pkg_writer *w, const char *key, const char *json, tm_err *err)
{
    if (!key || !*key || strcmp(key, "functions") == 0)
        return tm_errf(err, TM_E_INVALID, "%s: metadata key '%s' is reserved or empty", w->af.path, key ? key : "");
    cJSON *v = json ? cJSON_Parse(json) : NULL;
    if (!v) return tm_errf(err, TM_E_INVALID, "%s: metadata '%s': not valid JSON", w->af.path, key);
    if (cJSON_GetObjectItemCaseSensitive(w->meta, key)) cJSON_DeleteItemFromObjectCaseSensitive(w->meta, key);
    if (!cJSON_AddItemToObject(w->meta, key, v)) {
        cJSON_Delete(v);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->af.path);
    }
    return TM_OK;
}

int tm_pkg_writer_add_function(tm_pkg_writer *w, const tm_pkg_function *f, tm_err *err)
{
    const char *file = w->af.path;
    if (cJSON_GetArraySize(w->functions) >= TM_PKG_MAX_FUNCTIONS)
        return tm_errf(err, TM_E_LIMIT, "%s: more than %d functions", file, TM_PKG_MAX_FUNCTIONS);
    cJSON *j = tm_pkg_function_to_json(f);
    cJSON *one = cJSON_CreateArray();
    if (!j || !one || !cJSON_AddItemToArray(one, j)) {
        cJSON_Delete(j);
        cJSON_Delete(one);
        return tm_errf(err, TM_E_INVALID, "%s: function '%s': bad kind, dtype or io arrays", file,
                       f->name ? f->name : "");
    }
    /* validate with the reader's own rules */
    tm_pkg_function *parsed;
    int n, rc = tm_pkg_functions_parse(one, file, &parsed, &n, err);
    tm_pkg_functions_free(parsed, n);
    if (rc == TM_OK && tm_pkg_functions_parse(w->functions, file, &parsed, &n, NULL) == TM_OK) {
        for (int i = 0; i < n; i++)
            if (strcmp(parsed[i].name, f->name) == 0)
                rc = tm_errf(err, TM_E_INVALID, "%s: function '%s' added twice", file, f->name);
        tm_pkg_functions_free(parsed, n);
    }
    cJSON_DetachItemViaPointer(one, j);
    cJSON_Delete(one);
    if (rc) {
        cJSON_Delete(j);
        if (rc == TM_E_FORMAT) { /* here it is a bad argument, not a bad file */
            rc = TM_E_INVALID;
            if (err) err->code = rc;
        }
        return rc;
    }
    cJSON_AddItemToArray(w->functions, j);
    return TM_OK;
}

uint64_t tm_pkg_writer_bytes(const tm_pkg_writer *w) { return w->pos; }

static void writer_free(tm_pkg_writer *w)
{
    free(w->recs);
    free(w->chain);
    free(w->bucket);
    free(w->docs);
    free(w->pool);
    cJSON_Delete(w->meta);
    free(w);
}

void tm_pkg_writer_abort(tm_pkg_writer *w)
{
    if (!w) return;
    tm_afile_abort(&w->af);
    writer_free(w);
}

/* the index (section 4) in one buffer; *size receives its length */
static uint8_t *build_index(tm_pkg_writer *w, uint64_t *size, tm_err *err)
{
    char *meta = cJSON_Print(w->meta);
    if (!meta) {
        tm_errf(err, TM_E_NOMEM, "%s: out of memory printing the metadata", w->af.path);
        return NULL;
    }
    uint64_t meta_size = strlen(meta);
    if (meta_size > TM_PKG_MAX_META) {
        free(meta);
        tm_errf(err, TM_E_LIMIT, "%s: metadata is %llu bytes, more than %llu", w->af.path,
                (unsigned long long)meta_size, (unsigned long long)TM_PKG_MAX_META);
        return NULL;
    }
    uint64_t n = TM_PKG_INDEX_HEADER_SIZE + (uint64_t)TM_PKG_TENSOR_REC_SIZE * w->n_recs +
                 (uint64_t)TM_PKG_DOC_REC_SIZE * w->n_docs + w->n_pool + meta_size + 1;
    uint8_t *buf = calloc(1, (size_t)n);
    if (!buf) {
        free(meta);
        tm_errf(err, TM_E_NOMEM, "%s: out of memory for a %llu-byte index", w->af.path, (unsigned long long)n);
        return NULL;
    }
    tm_pkg_index_header ih = {w->n_recs, w->n_docs, w->n_pool, meta_size, 0};
    tm_pkg_index_header_put(buf, &ih);
    uint8_t *p = buf + TM_PKG_INDEX_HEADER_SIZE;
    for (uint32_t i = 0; i < w->n_recs; i++, p += TM_PKG_TENSOR_REC_SIZE) tm_pkg_tensor_rec_put(p, &w->recs[i]);
    for (uint32_t i = 0; i < w->n_docs; i++, p += TM_PKG_DOC_REC_SIZE) tm_pkg_doc_rec_put(p, &w->docs[i]);
    if (w->n_pool) memcpy(p, w->pool, (size_t)w->n_pool);
    p += w->n_pool;
    memcpy(p, meta, (size_t)meta_size); /* the 0 byte after it is calloc's */
    free(meta);
    *size = n;
    return buf;
}

int tm_pkg_writer_finish(tm_pkg_writer *w, tm_err *err)
{
    int rc = w->failed ? tm_errf(err, w->failed, "%s: an earlier write failed", w->af.path) : TM_OK;
    uint64_t isize = 0;
    uint8_t *index = NULL;
    if (rc == TM_OK) rc = pad_to(w, w->alignment, err);
    if (rc == TM_OK && !(index = build_index(w, &isize, err))) rc = err ? err->code : TM_E_NOMEM;
    tm_pkg_header h = {0};
    if (rc == TM_OK) {
        h.version = TM_PKG_VERSION;
        h.byte_order = TM_PKG_BYTE_ORDER;
        h.alignment = w->alignment;
        h.index_offset = w->pos;
        h.index_size = isize;
        h.file_size = w->pos + isize;
        h.index_hash = tm_xxh64(index, (size_t)isize, 0);
        rc = put_bytes(w, index, (size_t)isize, err);
    }
    free(index);
    if (rc == TM_OK) {
        uint8_t hb[TM_PKG_HEADER_SIZE];
        tm_pkg_header_put(hb, &h);
        if (fseeko(w->af.f, 0, SEEK_SET) != 0 || fwrite(hb, 1, sizeof hb, w->af.f) != sizeof hb)
            rc = io_fail(w, err);
    }
    if (rc == TM_OK) {
        rc = tm_afile_commit(&w->af, err); /* unlinks the temporary itself on failure */
        writer_free(w);
        return rc;
    }
    tm_pkg_writer_abort(w);
    return rc;
}
