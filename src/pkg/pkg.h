/* pkg/pkg.h: tandem package files (.tdm), reading and writing.
 *
 * A package holds metadata, embedded documents (config.json, tokenizer.json,
 * the chat template, ...), a functions table and every weight in the encoding
 * each stage (prefill, decode) wants. The format is specified in
 * pkg/pkg_format.h and docs/package-format.md.
 *
 * Reading:
 *   tm_err err = {0};
 *   tm_pkg *p;
 *   if (tm_pkg_open(&p, "model.tdm", &err) != TM_OK) { fprintf(stderr, "%s\n", err.msg); return 1; }
 *   size_t n;
 *   const char *tok = tm_pkg_doc(p, TM_PKG_DOC_TOKENIZER, &n);  // NUL-terminated, in the mapping
 *   tm_tensor w;                                                 // a view into the mapping
 *   if (tm_pkg_lookup(p, TM_PKG_DECODE, "model.norm.weight", &w, &err) != TM_OK) ...;
 *   tm_tensor_source src = tm_pkg_source(p, TM_PKG_DECODE);     // for tm_model_bind
 *   if (tm_pkg_verify(p, &err) != TM_OK) ...;                    // every checksum
 *   tm_pkg_close(p);
 *
 * Writing (streaming, one tensor at a time; atomic: temp file + rename):
 *   tm_pkg_writer *w;
 *   tm_pkg_writer_open(&w, "model.tdm", 0, &err);
 *   tm_pkg_writer_add_doc(w, TM_PKG_DOC_CONFIG, text, strlen(text), &err);
 *   tm_pkg_writer_add_tensor(w, &t, TM_PKG_PREFILL | TM_PKG_DECODE, &err);  // shared copy
 *   tm_pkg_writer_add_function(w, &fn, &err);
 *   tm_pkg_writer_set_meta(w, "converter", "{\"version\": \"0.1.0\"}", &err);
 *   if (tm_pkg_writer_finish(w, &err) != TM_OK) ...;  // or tm_pkg_writer_abort(w)
 */
#ifndef TM_PKG_H
#define TM_PKG_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "model/model.h"
#include "pkg/pkg_format.h"

/* Stages, as bits: a tensor record says which stages use that copy. */
enum {
    TM_PKG_PREFILL = 1,
    TM_PKG_DECODE = 2,
};

/* Names of the embedded documents the converter writes. */
#define TM_PKG_DOC_CONFIG "config.json"
#define TM_PKG_DOC_TOKENIZER "tokenizer.json"
#define TM_PKG_DOC_TOKENIZER_CONFIG "tokenizer_config.json"
#define TM_PKG_DOC_GENERATION_CONFIG "generation_config.json"
#define TM_PKG_DOC_SPECIAL_TOKENS "special_tokens_map.json"
#define TM_PKG_DOC_CHAT_TEMPLATE "chat_template.jinja"
#define TM_PKG_DOC_MODULES "modules.json"             /* sentence-transformers' module list */
#define TM_PKG_DOC_POOLING "pooling_config.json"      /* its Pooling module's config.json */

/* ---- functions table ---------------------------------------------------- */

typedef enum tm_pkg_fn_kind {
    TM_PKG_FN_PREFILL = 0,
    TM_PKG_FN_DECODE = 1,
} tm_pkg_fn_kind;

/* One dimension of a function's input or output. */
typedef struct tm_pkg_dim {
    const char *sym;   /* a shape-legend symbol ("T", "Hk", ...), or NULL when fixed */
    int64_t size;      /* the fixed size when sym is NULL, else 0 */
} tm_pkg_dim;

/* A named input or output tensor of a function, e.g. kv_in [L][2][Hk][P][Dh]. */
typedef struct tm_pkg_io {
    const char *name;
    tm_dtype dtype;
    int ndim;                              /* 1..TM_PKG_MAX_FN_DIMS */
    tm_pkg_dim dims[TM_PKG_MAX_FN_DIMS];   /* [ndim], outermost first */
} tm_pkg_io;

/* An entry point of an engine (pkg_format.h section 4.7). */
typedef struct tm_pkg_function {
    const char *name;          /* "prefill_256", unique in the package */
    tm_pkg_fn_kind kind;
    const char *engine_class;  /* "matrix" (AMX, tensor cores) or "bandwidth" (AVX-512, CUDA decode) */
    int chunk;                 /* T: tokens per call (1 for a decode step) */
    int stateful;              /* 1: KV stays in the engine's cache; 0: KV in/out as tensors */
    int n_inputs, n_outputs;
    const tm_pkg_io *inputs;   /* [n_inputs] */
    const tm_pkg_io *outputs;  /* [n_outputs] */
} tm_pkg_function;

/* ---- reader --------------------------------------------------------------- */

typedef struct tm_pkg tm_pkg;

/* One tensor record as the reader sees it. */
typedef struct tm_pkg_entry {
    tm_tensor t;            /* view into the mapping: name, dtype, shape, data [nbytes], scales */
    size_t scales_bytes;    /* bytes at t.scales (0 for plain dtypes) */
    unsigned stages;        /* TM_PKG_PREFILL | TM_PKG_DECODE: the stages using this copy */
    uint64_t offset;        /* file offset of t.data, a multiple of the alignment */
    uint64_t hash;          /* recorded XXH64 of the data bytes then the scale bytes */
} tm_pkg_entry;

/* tm_pkg_open: map the file read-only and validate the header, the index, and
 * every offset and size against the file size (not the tensor checksums: see
 * tm_pkg_verify). Document checksums are checked here (they are small). */
int tm_pkg_open(tm_pkg **out, const char *path, tm_err *err);

/* tm_pkg_open_mem: the same over caller-owned memory (which must stay valid
 * and unchanged until tm_pkg_close). label names it in error messages. */
int tm_pkg_open_mem(tm_pkg **out, const void *data, size_t size, const char *label, tm_err *err);

void tm_pkg_close(tm_pkg *p);

const char *tm_pkg_label(const tm_pkg *p);      /* the path given to open */
uint64_t tm_pkg_file_size(const tm_pkg *p);
uint32_t tm_pkg_alignment(const tm_pkg *p);
uint32_t tm_pkg_version(const tm_pkg *p);

/* Tensor table, in file order. */
int tm_pkg_n_tensors(const tm_pkg *p);
const tm_pkg_entry *tm_pkg_tensor(const tm_pkg *p, int i);  /* NULL if i is out of range */

/* tm_pkg_lookup: the copy of tensor `name` that `stage` (TM_PKG_PREFILL or
 * TM_PKG_DECODE) uses; TM_E_NOTFOUND if that stage has none. */
int tm_pkg_lookup(const tm_pkg *p, unsigned stage, const char *name, tm_tensor *out, tm_err *err);

/* tm_pkg_source: the tensor source of one stage for the model binder
 * (model/model.h), valid as long as p: it is {tm_pkg_stage_ctx(p, stage),
 * tm_pkg_stage_lookup}. stage must be TM_PKG_PREFILL or TM_PKG_DECODE. */
tm_tensor_source tm_pkg_source(tm_pkg *p, unsigned stage);
void *tm_pkg_stage_ctx(tm_pkg *p, unsigned stage);
int tm_pkg_stage_lookup(void *ctx, const char *name, tm_tensor *out, tm_err *err);

/* tm_pkg_verify: recompute every tensor checksum; on the first mismatch
 * returns TM_E_CHECKSUM naming the tensor. */
int tm_pkg_verify(const tm_pkg *p, tm_err *err);

/* tm_pkg_verify_flags: the same; TM_PKG_VERIFY_RELEASE (for tools that only
 * check a file) drops each tensor's pages from this process after hashing it,
 * so a 16 GB package is verified in a small resident set. Without it the
 * pages stay mapped in, as an engine using the weights wants. */
enum { TM_PKG_VERIFY_RELEASE = 1 };
int tm_pkg_verify_flags(const tm_pkg *p, unsigned flags, tm_err *err);

/* Embedded documents: the text (NUL-terminated, in the mapping) or NULL. */
const char *tm_pkg_doc(const tm_pkg *p, const char *name, size_t *len);
int tm_pkg_n_docs(const tm_pkg *p);
const char *tm_pkg_doc_name(const tm_pkg *p, int i);        /* NULL if out of range */

/* Metadata: the whole JSON document, and typed look-ups by a dotted path
 * ("converter.encodings.decode"). */
const char *tm_pkg_meta_json(const tm_pkg *p);
const char *tm_pkg_meta_str(const tm_pkg *p, const char *path);         /* NULL if absent or not a string */
int tm_pkg_meta_num(const tm_pkg *p, const char *path, double *out);    /* 0 if found, -1 otherwise */

/* Functions table. */
int tm_pkg_n_functions(const tm_pkg *p);
const tm_pkg_function *tm_pkg_function_at(const tm_pkg *p, int i);   /* NULL if out of range */
const tm_pkg_function *tm_pkg_function_find(const tm_pkg *p, const char *name);

/* ---- writer --------------------------------------------------------------- */

typedef struct tm_pkg_writer tm_pkg_writer;

/* tm_pkg_writer_open: start "<path>.tmp.<pid>". alignment 0 means 4096
 * (otherwise a power of two, 64 .. 2^24). */
int tm_pkg_writer_open(tm_pkg_writer **out, const char *path, uint32_t alignment, tm_err *err);

/* tm_pkg_writer_add_tensor: append one tensor now (aligned, hashed) and
 * remember its record. t->nbytes must be the size dtype and shape imply;
 * quantized dtypes need t->scales (the count implied too). stages is a
 * nonzero mask of TM_PKG_PREFILL | TM_PKG_DECODE; a (name, stage) pair may
 * appear once. An invalid argument leaves the writer usable; an I/O error
 * makes every later call fail. */
int tm_pkg_writer_add_tensor(tm_pkg_writer *w, const tm_tensor *t, unsigned stages, tm_err *err);

/* tm_pkg_writer_add_doc: append an embedded document (stored verbatim). */
int tm_pkg_writer_add_doc(tm_pkg_writer *w, const char *name, const void *data, size_t n, tm_err *err);

/* tm_pkg_writer_set_meta: set the top-level metadata key to a JSON value given
 * as text (replacing an earlier one). "functions" is reserved: use add_function. */
int tm_pkg_writer_set_meta(tm_pkg_writer *w, const char *key, const char *json, tm_err *err);

/* tm_pkg_writer_add_function: validate and append a functions-table entry. */
int tm_pkg_writer_add_function(tm_pkg_writer *w, const tm_pkg_function *f, tm_err *err);

/* tm_pkg_writer_finish: write the index and the header, fsync, rename over the
 * path; frees w whatever happens (on failure nothing appears at the path). */
int tm_pkg_writer_finish(tm_pkg_writer *w, tm_err *err);

/* tm_pkg_writer_abort: discard everything; frees w. */
void tm_pkg_writer_abort(tm_pkg_writer *w);

/* tm_pkg_writer_bytes: bytes written so far (for progress reports). */
uint64_t tm_pkg_writer_bytes(const tm_pkg_writer *w);

#endif
