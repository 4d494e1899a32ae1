/* pkg/pkg_layout.c: byte-exact encoders and decoders of the records in
 * pkg_format.h, and the sizes an encoding implies (section 4.4). */
#include "pkg/pkg_format.h"

#include <string.h>

#include "core/tensor.h"
#include "pkg/checksum.h"
#include "quant/quant.h"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void tm_pkg_header_put(uint8_t dst[TM_PKG_HEADER_SIZE], const tm_pkg_header *h)
{
    memset(dst, 0, TM_PKG_HEADER_SIZE);
    memcpy(dst, TM_PKG_MAGIC, 4);
    put32(dst + 4, h->version);
    put32(dst + 8, h->byte_order);
    put32(dst + 12, h->alignment);
    put64(dst + 16, h->file_size);
    put64(dst + 24, h->index_offset);
    put64(dst + 32, h->index_size);
    put64(dst + 40, h->index_hash);
    put64(dst + 48, h->flags);
    put64(dst + 56, tm_xxh64(dst, 56, 0));
}

void tm_pkg_header_get(const uint8_t src[TM_PKG_HEADER_SIZE], tm_pkg_header *h)
{
    h->version = get32(src + 4);
    h->byte_order = get32(src + 8);
    h->alignment = get32(src + 12);
    h->file_size = get64(src + 16);
    h->index_offset = get64(src + 24);
    h->index_size = get64(src + 32);
    h->index_hash = get64(src + 40);
    h->flags = get64(src + 48);
    h->header_hash = get64(src + 56);
}

void tm_pkg_index_header_put(uint8_t *dst, const tm_pkg_index_header *h)
{
    put32(dst, h->n_tensors);
    put32(dst + 4, h->n_docs);
    put64(dst + 8, h->strings_size);
    put64(dst + 16, h->meta_size);
    put64(dst + 24, h->reserved);
}

void tm_pkg_index_header_get(const uint8_t *src, tm_pkg_index_header *h)
{
    h->n_tensors = get32(src);
    h->n_docs = get32(src + 4);
    h->strings_size = get64(src + 8);
    h->meta_size = get64(src + 16);
    h->reserved = get64(src + 24);
}

void tm_pkg_tensor_rec_put(uint8_t *dst, const tm_pkg_tensor_rec *r)
{
    put32(dst, r->name_off);
    put32(dst + 4, r->name_len);
    put32(dst + 8, r->dtype);
    put32(dst + 12, r->ndim);
    for (int i = 0; i < 4; i++) put64(dst + 16 + 8 * i, r->shape[i]);
    put32(dst + 48, r->stages);
    put32(dst + 52, r->flags);
    put64(dst + 56, r->data_offset);
    put64(dst + 64, r->data_size);
    put64(dst + 72, r->scales_offset);
    put64(dst + 80, r->scales_size);
    put64(dst + 88, r->hash);
}

void tm_pkg_tensor_rec_get(const uint8_t *src, tm_pkg_tensor_rec *r)
{
    r->name_off = get32(src);
    r->name_len = get32(src + 4);
    r->dtype = get32(src + 8);
    r->ndim = get32(src + 12);
    for (int i = 0; i < 4; i++) r->shape[i] = get64(src + 16 + 8 * i);
    r->stages = get32(src + 48);
    r->flags = get32(src + 52);
    r->data_offset = get64(src + 56);
    r->data_size = get64(src + 64);
    r->scales_offset = get64(src + 72);
    r->scales_size = get64(src + 80);
    r->hash = get64(src + 88);
}

void tm_pkg_doc_rec_put(uint8_t *dst, const tm_pkg_doc_rec *r)
{
    put32(dst, r->name_off);
    put32(dst + 4, r->name_len);
    put64(dst + 8, r->offset);
    put64(dst + 16, r->size);
    put64(dst + 24, r->hash);
}

void tm_pkg_doc_rec_get(const uint8_t *src, tm_pkg_doc_rec *r)
{
    r->name_off = get32(src);
    r->name_len = get32(src + 4);
    r->offset = get64(src + 8);
    r->size = get64(src + 16);
    r->hash = get64(src + 24);
}

int tm_pkg_reseal(uint8_t *file, uint64_t size)
{
    if (size < TM_PKG_HEADER_SIZE) return -1;
    tm_pkg_header h;
    tm_pkg_header_get(file, &h);
    if (h.index_offset > size || h.index_size > size - h.index_offset) return -1;
    h.index_hash = tm_xxh64(file + h.index_offset, (size_t)h.index_size, 0);
    uint8_t magic[4];
    memcpy(magic, file, 4);
    tm_pkg_header_put(file, &h);
    memcpy(file, magic, 4); /* keep a deliberately wrong magic wrong */
    put64(file + 56, tm_xxh64(file, 56, 0));
    return 0;
}

int tm_pkg_encoding_sizes(uint32_t dtype, uint32_t ndim, const uint64_t *shape,
                          uint64_t *data_bytes, uint64_t *scale_count, const char **why)
{
    *data_bytes = *scale_count = 0;
    if (ndim < 1 || ndim > TM_MAX_DIMS) {
        *why = "ndim must be 1..4";
        return -1;
    }
    uint64_t numel = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape[i] < 1 || shape[i] > TM_PKG_MAX_DIM) {
            *why = "a dimension is 0 or larger than 2^40";
            return -1;
        }
        if (shape[i] > TM_PKG_MAX_NUMEL / numel) {
            *why = "more than 2^48 elements";
            return -1;
        }
        numel *= shape[i];
    }
    uint64_t k = shape[ndim - 1], rows = numel / k, group = 0;
    switch (dtype) {
    case TM_DT_F32: case TM_DT_F16: case TM_DT_BF16: case TM_DT_I8: case TM_DT_I32:
        *data_bytes = numel * tm_dtype_size((tm_dtype)dtype);
        return 0;
    case TM_DT_Q8PC:
        if (ndim < 2) break;
        *data_bytes = numel;
        *scale_count = rows;
        return 0;
    case TM_DT_Q4PC: group = k; break;
    case TM_DT_Q4G64: group = 64; break;
    case TM_DT_Q4G32: group = 32; break;
    case TM_DT_Q6G64: group = 64; break;
    default:
        *why = "unknown dtype code";
        return -1;
    }
    if (ndim < 2) {
        *why = "a quantized encoding needs ndim >= 2 (rows of K)";
        return -1;
    }
    if (k % 32 != 0 || k % group != 0) {
        *why = "int4 / int6 encodings need K (the last dimension) to be a multiple of 32 and of the group size";
        return -1;
    }
    *data_bytes = rows * tm_quant_row_bytes((tm_dtype)dtype, (int64_t)k); /* k <= 2^40 (checked above) */
    *scale_count = rows * (k / group);
    return 0;
}
