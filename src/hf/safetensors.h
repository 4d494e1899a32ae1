/* hf/safetensors.h: safetensors files, single or sharded, memory-mapped.
 *
 *   tm_err err = {0};
 *   tm_st_set *s;
 *   if (tm_st_set_open(&s, "models/tiny", &err) != TM_OK) { puts(err.msg); ... }
 *   tm_tensor t;
 *   if (tm_st_set_lookup(s, "model.embed_tokens.weight", &t, &err) == TM_OK)
 *       ... t.shape[0], t.dtype, t.data (points into the mapping) ...
 *   tm_st_set_close(s);
 *
 * Format (https://github.com/huggingface/safetensors): 8 bytes little-endian
 * u64 N, then N bytes of JSON header, then the data buffer. The header maps
 * each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} with
 * offsets relative to the data buffer; an optional "__metadata__" object maps
 * strings to strings. Validation follows the reference implementation: the
 * tensors, sorted by offset, tile the data buffer exactly (no overlap, no
 * hole, nothing past the end); end - begin == numel * element size; the
 * header is at most 100 MB; names are unique.
 *
 * Dtypes F32, F16 and BF16 are returned as tm_tensor; other safetensors dtypes
 * (F64, I64, I32, I16, I8, U8, BOOL, F8_*, ...) are parsed and size-checked,
 * but looking such a tensor up fails with TM_E_UNSUPPORTED naming it; an
 * unknown dtype string makes the file malformed (TM_E_FORMAT).
 *
 * Alignment: tensor data starts at 8 + N + begin; files written by the
 * safetensors library pad N to a multiple of 8, so their data is 8-aligned,
 * but nothing requires it: read element data with memcpy (or check).
 *
 * A sharded checkpoint has model.safetensors.index.json whose "weight_map"
 * maps tensor names to shard file names (plain names in the same directory).
 */
#ifndef TM_HF_SAFETENSORS_H
#define TM_HF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

#define TM_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* One safetensors file image. */
typedef struct tm_st_file tm_st_file;

/* tm_st_parse: parse a file image held in memory (not copied: data must
 * outlive the result). `name` is used in error messages ("model.safetensors"). */
int tm_st_parse(tm_st_file **out, const uint8_t *data /*[size]*/, size_t size, const char *name,
                tm_err *err);

/* tm_st_open: mmap and parse the file at path. */
int tm_st_open(tm_st_file **out, const char *path, tm_err *err);
void tm_st_close(tm_st_file *f);

int tm_st_count(const tm_st_file *f);
/* name, safetensors dtype string ("BF16") and shape of tensor i (in offset order). */
const char *tm_st_name(const tm_st_file *f, int i);
const char *tm_st_dtype_str(const tm_st_file *f, int i);
int tm_st_ndim(const tm_st_file *f, int i);
const int64_t *tm_st_shape(const tm_st_file *f, int i);
/* the "__metadata__" value for key, or NULL */
const char *tm_st_metadata(const tm_st_file *f, const char *key);

/* tm_st_find: the tensor called name. TM_E_NOTFOUND if absent,
 * TM_E_UNSUPPORTED if its dtype is not F32/F16/BF16. out->name points into f. */
int tm_st_find(const tm_st_file *f, const char *name, tm_tensor *out, tm_err *err);

/* A model directory: model.safetensors, or model.safetensors.index.json plus
 * its shards (each opened once). */
typedef struct tm_st_set tm_st_set;

int tm_st_set_open(tm_st_set **out, const char *dir, tm_err *err);
void tm_st_set_close(tm_st_set *s);
int tm_st_set_lookup(tm_st_set *s, const char *name, tm_tensor *out, tm_err *err);
/* number of files and the tensors of file i (for listing every tensor) */
int tm_st_set_nfiles(const tm_st_set *s);
const tm_st_file *tm_st_set_file(const tm_st_set *s, int i);

#endif
