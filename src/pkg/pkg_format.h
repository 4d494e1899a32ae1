/* pkg/pkg_format.h: the tandem package file format (.tdm), version 2.
 *
 * This comment is the normative specification; docs/package-format.md says the
 * same with the reasons behind it. The constants and record layouts below are
 * the single source of truth for pkg_write.c and pkg_read.c.
 *
 * 1. Overview
 *   One file holds everything both engines need: model metadata, the tokenizer,
 *   the chat template, generation defaults, a functions table, and every weight
 *   in each encoding that the prefill stage and the decode stage use. A weight
 *   used by both stages in the same encoding is stored once.
 *
 *   +----------------------+ 0
 *   | header (64 bytes)    |   magic, version, byte-order mark, alignment,
 *   | zero padding         |   file size, index location, hashes
 *   +----------------------+ A (the alignment, 4096 by default)
 *   | tensor and document  |   each region starts at a multiple of A, so every
 *   | data regions         |   tensor can be mmapped and registered with a GPU
 *   | (zero padding)       |   in place, without a copy
 *   +----------------------+ index_offset (a multiple of A)
 *   | index                |   tensor records, document records, string pool,
 *   |                      |   metadata JSON; ends exactly at the end of file
 *   +----------------------+ file_size
 *
 *   The index is written last, so a writer streams tensors one at a time and
 *   never holds the model in memory. Writers create "<path>.tmp.<pid>" and
 *   rename it over <path> only when complete: a file at <path> is whole.
 *
 * 2. Conventions
 *   All integers are unsigned little-endian; offsets are absolute byte offsets
 *   from the start of the file. Tensor data is stored little-endian too (a
 *   big-endian host cannot map the weights in place and must convert).
 *   "hash" is XXH64 with seed 0 (pkg/checksum.h). Padding bytes are written
 *   as zero; readers ignore them.
 *
 * 3. Header, at offset 0 (TM_PKG_HEADER_SIZE = 64 bytes)
 *     off size field
 *       0    4 magic          "TNDM" (0x54 0x4E 0x44 0x4D)
 *       4    4 version        2. A reader rejects any other version: a change
 *                             to the binary layout bumps it; additions go in
 *                             the metadata JSON, which readers extend freely.
 *                             (Version 1 stored int4 / int6 scales in f32; 2
 *                             stores them in f16. Re-convert a version 1 file.)
 *       8    4 byte_order     0x01020304 written little-endian (bytes 04 03 02 01).
 *                             Reading it as 0x04030201 means a big-endian writer.
 *      12    4 alignment      A: a power of two, 64 <= A <= 2^24. Writers use 4096.
 *      16    8 file_size      total bytes; must equal the real size (catches truncation)
 *      24    8 index_offset   a multiple of A, >= A
 *      32    8 index_size     index_offset + index_size == file_size
 *      40    8 index_hash     hash of the index bytes
 *      48    8 flags          0 (reserved; readers reject unknown bits)
 *      56    8 header_hash    hash of header bytes [0, 56)
 *
 * 4. Index, at index_offset
 *   4.1 Index header (TM_PKG_INDEX_HEADER_SIZE = 32 bytes)
 *     off size field
 *       0    4 n_tensors      <= TM_PKG_MAX_TENSORS
 *       4    4 n_docs         <= TM_PKG_MAX_DOCS
 *       8    8 strings_size   bytes of the string pool
 *      16    8 meta_size      bytes of the metadata JSON, excluding its NUL
 *      24    8 reserved       0
 *   followed, with no gaps, by
 *     n_tensors tensor records  (TM_PKG_TENSOR_REC_SIZE = 96 bytes each)
 *     n_docs document records   (TM_PKG_DOC_REC_SIZE = 32 bytes each)
 *     the string pool           (strings_size bytes)
 *     the metadata JSON         (meta_size bytes, then one 0 byte)
 *   so index_size == 32 + 96*n_tensors + 32*n_docs + strings_size + meta_size + 1.
 *
 *   4.2 Strings. A name is (name_off, name_len) into the pool: 1 <= name_len
 *   <= TM_PKG_MAX_NAME, no 0 byte inside, and pool[name_off + name_len] == 0
 *   (so readers hand out pointers into the mapping).
 *
 *   4.3 Tensor record (96 bytes)
 *     off size field
 *       0    4 name_off, 4 4 name_len   e.g. "model.layers.0.mlp.up_proj.weight" (HF names)
 *       8    4 dtype          a tm_dtype code (core/tensor.h): 0 f32, 1 f16, 2 bf16,
 *                             3 i8, 4 i32, 16 int8 per-channel, 17 int4 per-channel,
 *                             18 int4 group-64, 19 int4 group-32, 20 int6 group-64
 *      12    4 ndim           1..4 (TM_MAX_DIMS)
 *      16   32 shape[4]       u64, outermost first (HF order); 1 <= shape[i] <=
 *                             2^40 for i < ndim, 0 for i >= ndim; elements <= 2^48
 *      48    4 stages         bit 0: the prefill stage uses this copy; bit 1: the
 *                             decode stage does; nonzero, no other bits
 *      52    4 flags          0 (reserved)
 *      56    8 data_offset    a multiple of A
 *      64    8 data_size      exactly the size the dtype and shape imply (4.4)
 *      72    8 scales_offset  0 for plain dtypes; for quantized ones exactly
 *                             data_offset + data_size rounded up to 64, so a
 *                             tensor is one contiguous region and scales are
 *                             aligned
 *      80    8 scales_size    0 for plain dtypes; else the scale count times
 *                             4 (f32, int8) or 2 (f16, int4 and int6) (4.4)
 *      88    8 hash           hash of the data bytes followed by the scale bytes
 *   Each (name, stage) pair appears at most once: a name has either one record
 *   used by both stages or one record per stage.
 *
 *   4.4 Encodings. Plain dtypes: data_size = elements * element size. Quantized
 *   dtypes (layouts normative in core/tensor.h) treat the tensor as rows of K =
 *   shape[ndim-1] elements, R = elements / K rows, ndim >= 2:
 *     int8 per-channel : data R*K bytes,    scales f32 [R]
 *     int4 (group G)   : data R*K/2 bytes,  scales f16 [R][K/G]; G = K for
 *                        per-channel, 64 or 32 otherwise; K % 32 == 0, K % G == 0
 *     int6 (group 64)  : data R*(192 floor(K/256) + (t ? t/2 + 64 : 0)) bytes, t = K % 256,
 *                        scales f16 [R][K/64]; K % 64 == 0 (quant/quant.h)
 *
 *   4.5 Document record (32 bytes): an embedded text file, stored verbatim
 *     off size field
 *       0    4 name_off, 4 4 name_len   e.g. "tokenizer.json"
 *       8    8 offset         a multiple of A
 *      16    8 size           bytes, excluding the 0 byte that must follow them
 *      24    8 hash           hash of the size bytes
 *   Names in use (pkg.h TM_PKG_DOC_*): config.json, tokenizer.json,
 *   tokenizer_config.json, generation_config.json, special_tokens_map.json,
 *   chat_template.jinja (the template text, also when it came from
 *   tokenizer_config.json). Document names are unique.
 *
 *   Every tensor region [data_offset, end of scales) and every document region
 *   [offset, offset + size + 1) lies within [A, index_offset), and no two overlap.
 *
 *   4.6 Metadata: one UTF-8 JSON object. Keys defined by version 1 (readers
 *   ignore keys they do not know; writers may add any):
 *     "model":     {"architecture": "LlamaForCausalLM", "model_type": "llama",
 *                   "n_params": 12582912, ...}
 *     "converter": {"name": "tandem", "version": "0.1.0", "source": "<dir>",
 *                   "date": "2025-06-01T12:00:00Z",
 *                   "encodings": {"prefill": "bf16", "decode": "int4g64"},
 *                   "chunks": [64, 128, 256, 512], ...}
 *     "functions": [function, ...]   (validated by readers, see 4.7)
 *
 *   4.7 Function: an entry point an engine compiles or dispatches to.
 *     {"name": "prefill_256",            1..64 of [A-Za-z0-9_.-], unique
 *      "kind": "prefill" | "decode",
 *      "engine_class": "matrix",         the unit it targets: "matrix" (AMX,
 *                                        tensor cores) or "bandwidth" (AVX-512,
 *                                        CUDA decode); 1..32 characters
 *      "chunk": 256,                     tokens per call (T): 1..2^20
 *      "stateful": true,                 true: reads/writes the engine's KV cache;
 *                                        false: KV passes in and out as tensors
 *      "inputs":  [io, ...],             at most TM_PKG_MAX_FN_IO each
 *      "outputs": [io, ...]}
 *     io: {"name": "kv_in", "dtype": "bf16", "shape": ["L", 2, "Hk", "P", "Dh"]}
 *       dtype: a core/tensor.h dtype name; shape: 1..8 dims, each a positive
 *       integer or a symbol of the shape legend (core/tensor.h: B T P D H Hk
 *       Dh F V L E N K), bound by the model config and the call.
 *
 * 5. Limits (readers enforce them before allocating, so a hostile file cannot
 *   make a reader allocate more than a small multiple of the file's own size):
 *   see the TM_PKG_MAX_* constants below. Readers check every offset and size
 *   with overflow-safe arithmetic against the real file size.
 */
#ifndef TM_PKG_FORMAT_H
#define TM_PKG_FORMAT_H

#include <stdint.h>

#define TM_PKG_MAGIC "TNDM"
#define TM_PKG_VERSION 2u
#define TM_PKG_BYTE_ORDER 0x01020304u
#define TM_PKG_ALIGNMENT 4096u          /* what writers use by default */
#define TM_PKG_MIN_ALIGNMENT 64u
#define TM_PKG_MAX_ALIGNMENT (1u << 24)
#define TM_PKG_SCALES_ALIGN 64u

#define TM_PKG_HEADER_SIZE 64u
#define TM_PKG_INDEX_HEADER_SIZE 32u
#define TM_PKG_TENSOR_REC_SIZE 96u
#define TM_PKG_DOC_REC_SIZE 32u

#define TM_PKG_MAX_TENSORS (1u << 20)
#define TM_PKG_MAX_DOCS 256u
#define TM_PKG_MAX_NAME 1024u
#define TM_PKG_MAX_DIM ((uint64_t)1 << 40)
#define TM_PKG_MAX_NUMEL ((uint64_t)1 << 48)
#define TM_PKG_MAX_META ((uint64_t)64 << 20)      /* metadata JSON bytes */
#define TM_PKG_MAX_STRINGS ((uint64_t)256 << 20)  /* string pool bytes */
#define TM_PKG_MAX_FUNCTIONS 256
#define TM_PKG_MAX_FN_IO 32
#define TM_PKG_MAX_FN_DIMS 8
#define TM_PKG_MAX_FN_NAME 64
#define TM_PKG_MAX_FN_CHUNK (1 << 20)

/* stage bits of a tensor record */
#define TM_PKG_STAGE_BITS 3u

/* Header fields (section 3), decoded. */
typedef struct tm_pkg_header {
    uint32_t version;
    uint32_t byte_order;
    uint32_t alignment;
    uint64_t file_size;
    uint64_t index_offset;
    uint64_t index_size;
    uint64_t index_hash;
    uint64_t flags;
    uint64_t header_hash;
} tm_pkg_header;

/* Index header (4.1), decoded. */
typedef struct tm_pkg_index_header {
    uint32_t n_tensors;
    uint32_t n_docs;
    uint64_t strings_size;
    uint64_t meta_size;
    uint64_t reserved;
} tm_pkg_index_header;

/* Tensor record (4.3), decoded. */
typedef struct tm_pkg_tensor_rec {
    uint32_t name_off, name_len;
    uint32_t dtype;
    uint32_t ndim;
    uint64_t shape[4];
    uint32_t stages;
    uint32_t flags;
    uint64_t data_offset, data_size;
    uint64_t scales_offset, scales_size;
    uint64_t hash;
} tm_pkg_tensor_rec;

/* Document record (4.5), decoded. */
typedef struct tm_pkg_doc_rec {
    uint32_t name_off, name_len;
    uint64_t offset, size;
    uint64_t hash;
} tm_pkg_doc_rec;

/* Encoders write exactly the record size at dst; decoders read it from src. */
void tm_pkg_header_put(uint8_t dst[TM_PKG_HEADER_SIZE], const tm_pkg_header *h); /* computes header_hash */
void tm_pkg_header_get(const uint8_t src[TM_PKG_HEADER_SIZE], tm_pkg_header *h);
void tm_pkg_index_header_put(uint8_t *dst, const tm_pkg_index_header *h);
void tm_pkg_index_header_get(const uint8_t *src, tm_pkg_index_header *h);
void tm_pkg_tensor_rec_put(uint8_t *dst, const tm_pkg_tensor_rec *r);
void tm_pkg_tensor_rec_get(const uint8_t *src, tm_pkg_tensor_rec *r);
void tm_pkg_doc_rec_put(uint8_t *dst, const tm_pkg_doc_rec *r);
void tm_pkg_doc_rec_get(const uint8_t *src, tm_pkg_doc_rec *r);

/* tm_pkg_reseal: recompute index_hash and header_hash of the package image
 * file[size] in place (when its header's index range lies inside it). For
 * tests and fuzzing: it makes a deliberately edited image consistent, so the
 * structural checks behind the hashes get exercised. Returns 0, or -1 if the
 * image is too small or its index range is out of bounds. */
int tm_pkg_reseal(uint8_t *file, uint64_t size);

/* tm_pkg_encoding_sizes: the data bytes and the scale count (f32 values) that
 * section 4.4 requires of a tensor with this dtype and shape. Returns 0, or -1
 * with *why set to a static explanation (unknown dtype, bad shape, K not a
 * multiple of 32, too large). */
int tm_pkg_encoding_sizes(uint32_t dtype, uint32_t ndim, const uint64_t *shape,
                          uint64_t *data_bytes, uint64_t *scale_count, const char **why);

/* tm_pkg_scales_offset: where the scales of a quantized tensor start (4.3). */
static inline uint64_t tm_pkg_scales_offset(uint64_t data_offset, uint64_t data_size)
{
    return data_offset + ((data_size + TM_PKG_SCALES_ALIGN - 1) & ~(uint64_t)(TM_PKG_SCALES_ALIGN - 1));
}

#endif
