/* engine/engine.h: the engine interface. An engine is a small vtable, a
 * context, and a version (ggml-backend, sqlite3_io_methods).
 *
 *   const tm_engine_vt *e = tm_engine_find("cpu-avx512");
 *   tm_engine_caps caps;
 *   if (e->probe(&caps) != TM_OK) ...;            // not available on this machine
 *   void *ctx;
 *   e->bind(&ctx, model, &opts, &err);            // repack/upload the stage's weights
 *   e->prefill(ctx, &(tm_prefill_args){...}, &err); // one fixed-size chunk
 *   e->decode(ctx, &(tm_decode_args){...}, &err);   // one step for B sequences
 *   e->unbind(ctx);
 *
 * The runtime asks engines what they can do (caps) and never switches on an
 * engine's name. Roles: a prefill engine is a matrix unit that wants fixed
 * chunk shapes (AMX tiles, tensor cores); a decode engine is a bandwidth
 * unit (AVX-512/VNNI GEMV, CUDA). One engine may serve both roles.
 *
 * KV: every engine reads and writes KV through the paged cache of
 * runtime/kvcache.h. Stateful prefill writes the chunk's K/V straight into
 * the decode side's cache (zero copy when dtype and layout agree). Stateless
 * prefill writes into a prefill-private staging cache and reports each layer
 * as done through on_layer, so the KV bridge (runtime/bridge.h) converts and
 * scatters that layer into decode pages while later layers compute.
 *
 * Shapes: T chunk tokens, B sequences, V vocabulary (legend in core/tensor.h). */
#ifndef TM_ENGINE_ENGINE_H
#define TM_ENGINE_ENGINE_H

#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "runtime/kvcache.h"

#define TM_ENGINE_VERSION 8 /* 2: tm_engine_opts.roles; 3: tm_prefill_args.gemm; 4: every row's logits
                                   (caps.row_logits, tm_prefill_args.on_row_logits); 5: every row's hidden
                                   state (caps.row_hidden, tm_prefill_args.on_row_hidden); 6: host_alloc,
                                   host_free; 7: a decode step's greedy tokens (caps.argmax,
                                   tm_decode_args.argmax); 8: a share of the device (tm_engine_opts.part,
                                   part_share; the calls' alone), urgent */

struct tm_model;
struct tm_pool;

enum { TM_ROLE_PREFILL = 1, TM_ROLE_DECODE = 2 };

typedef struct tm_engine_caps {
    const char *name;          /* "cpu-amx", "cpu-avx512", "cpu-avx2", "cpu-scalar", "cuda" */
    const char *device;        /* "cpu", "cuda:0" */
    unsigned roles;            /* TM_ROLE_* bits */
    tm_dtype encodings[8];     /* weight encodings bind accepts, preferred first */
    int n_encodings;
    int chunk_sizes[8];        /* prefill chunk sizes it is built for */
    int n_chunks;
    tm_dtype kv_dtypes[4];     /* paged KV cache dtypes it reads/writes, preferred first
                                  (TM_DT_Q8PC: int8 rows + row scales, runtime/kvcache.h) */
    int n_kv_dtypes;
    int max_batch;             /* decode: most sequences per step */
    int row_logits;            /* prefill gives every valid row's logits (tm_prefill_args.on_row_logits) */
    int row_hidden;            /* prefill gives every valid row's hidden state (tm_prefill_args.on_row_hidden) */
    int argmax;                /* decode gives each row's greedy token (tm_decode_args.argmax) */
} tm_engine_caps;

typedef struct tm_engine_opts {
    tm_dtype weight_enc;       /* encoding of the stage's weights to bind */
    struct tm_pool *pool;      /* threads (pinned to this engine's core set) */
    int max_ctx;               /* longest sequence it must serve */
    unsigned roles;            /* TM_ROLE_* it is bound for (0: every role its caps have). Both
                                  calls still work whatever it says: it picks what bind prepares,
                                  e.g. the CPU engines copy the rows decode streams every step
                                  into huge pages only for TM_ROLE_DECODE */
    /* (v8) a share of the device, for engines on one (the CUDA engine: multiprocessors, through a
     * green context), so that a prefill and a decode engine bound to the same device run side by side
     * on disjoint parts of it. The device is split in two, the first part_share (0 < share < 1) of its
     * compute units and the rest: part 1 takes the first, part 2 the rest, 0 the whole device. A call
     * with alone set may run on the whole device (the other engine is idle: lending, as the CPU
     * engines' pools do). CPU engines ignore it: their pool is their share. An engine that cannot
     * split its device (an older driver) runs on the whole of it. */
    int part;
    double part_share;
    /* (v8) where it shares its device with another engine, this one's work goes first when both have
     * work waiting (the CUDA engine: its streams at the device's greatest priority, so the block
     * scheduler starts its blocks before a prefill's queued ones). The session sets it for the decode
     * engine on the prefill engine's device: a step is short, and running streams wait on it. */
    int urgent;
} tm_engine_opts;

typedef struct tm_prefill_args {
    const int32_t *tokens;     /* [T]: n_valid real tokens, then padding */
    int T;                     /* chunk size (one of caps.chunk_sizes, or exact) */
    int n_valid;               /* real tokens, 1..T */
    int pos0;                  /* position of tokens[0]; KV holds [0, pos0) */
    tm_kv_cache *kv;           /* where this chunk's K/V go and earlier K/V are */
    tm_kv_seq *seq;            /* pages covering [0, pos0 + n_valid) */
    float *logits;             /* (optional) [V]: logits after tokens[n_valid-1] */
    /* (optional) called once a layer's K/V for this chunk are in kv */
    void (*on_layer)(void *ud, int layer);
    void *ud;
    struct tm_pool *pool;      /* (optional) threads for this call; default: the bind pool */
    /* (optional) [2]: the engine adds the seconds and the operations (2 per
     * multiply-add) of this call's matmuls that ran on its matrix unit's GEMM
     * kernels (not GEMVs): the measure of issue 5's share of the unit's peak */
    double *gemm;
    /* (optional; engines with caps.row_logits, others refuse it) every valid row's logits: called
     * for t = 0 .. n_valid - 1 in order, on the calling thread, with row t's logits [V] (the
     * distribution of the token after tokens[t]; the pointer holds during the call only). The
     * prompt's scores (request.prompt_logprobs) rest on it. */
    void (*on_row_logits)(void *ud, int t, const float *logits);
    /* (optional; engines with caps.row_hidden, others refuse it) every valid row's final hidden
     * state: called for t = 0 .. n_valid - 1 in order, on the calling thread, with row t's output of
     * the final norm [D] (what the head reads; the pointer holds during the call only), before any
     * on_row_logits. Embeddings rest on it. */
    void (*on_row_hidden)(void *ud, int t, const float *hidden);
    void *row_ud;              /* ud of on_row_logits and on_row_hidden */
    int alone;                 /* (v8) the other role's engine is idle for this call: an engine bound to a
                                  part of its device (tm_engine_opts.part) may use all of it */
} tm_prefill_args;

typedef struct tm_decode_args {
    int B;                     /* sequences this step */
    const int32_t *tokens;     /* [B] the token each sequence feeds */
    const int *pos;            /* [B] its position; KV holds [0, pos[b]) */
    tm_kv_cache *kv;
    tm_kv_seq *const *seqs;    /* [B] pages covering [0, pos[b] + 1) */
    float *logits;             /* [B][V], or NULL where argmax is given and the logits are not wanted */
    struct tm_pool *pool;      /* (optional) threads for this call; default: the bind pool */
    /* (optional; engines with caps.argmax, others refuse it) [B] each row's greedy token, what
     * tm_argmax_f32 (core/tensor.h) picks from its logits: the lowest id of the largest, never a NaN,
     * -1 where no logit is above -inf. With logits NULL an engine whose logits live on a device need
     * not bring them to the host (the CUDA engine: 4 bytes a row instead of 4 V) */
    int32_t *argmax;
    int alone;                 /* (v8) as tm_prefill_args.alone */
} tm_decode_args;

typedef struct tm_engine_vt {
    int version;               /* TM_ENGINE_VERSION */
    const char *name;          /* same as caps.name */
    /* probe: fill caps; TM_E_UNSUPPORTED if the engine cannot run here
     * (e.g. no AMX), with the reason in err. */
    int (*probe)(tm_engine_caps *caps, tm_err *err);
    /* bind: take the model's weights (already in opts->weight_enc, from the
     * stage's tensor source) and make them ready: repack into tiles, etc. */
    int (*bind)(void **ctx, const struct tm_model *m, const tm_engine_opts *opts, tm_err *err);
    /* (optional) prefill one chunk; NULL if the engine has no prefill role */
    int (*prefill)(void *ctx, const tm_prefill_args *a, tm_err *err);
    /* (optional) one decode step for a batch; NULL if no decode role */
    int (*decode)(void *ctx, const tm_decode_args *a, tm_err *err);
    void (*unbind)(void *ctx);
    /* (optional) host memory for the buffers the runtime hands the engine's calls to fill (the decode
     * steps' logits): page-locked where the engine copies them from a device, so that copy runs at the
     * bus's rate. NULL: malloc and free. host_free takes only what host_alloc gave (any engine's may
     * be used with any engine). */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
} tm_engine_vt;

/* The registry: every engine compiled in, best first, except the CUDA engine, listed last so that a
 * session takes it only when named (registry.c says why). */
const tm_engine_vt *const *tm_engines(int *n);
const tm_engine_vt *tm_engine_find(const char *name); /* "cpu-amx" or "amx"; NULL if unknown */

#endif
