/* tandem.h: the public C API of tandem (opaque handles only).
 *
 *   tandem_status st;
 *   tandem_model *m;
 *   if (tandem_model_open(&m, "model.tdm", &st) != 0) { fprintf(stderr, "%s\n", st.msg); return 1; }
 *   tandem_session_opts so;
 *   tandem_session_opts_default(&so);              // engines, threads and route from calibration
 *   tandem_session *s;
 *   tandem_session_new(&s, m, &so, &st);
 *   tandem_request r;
 *   tandem_request_default(&r);
 *   r.prompt = "Once upon a time"; r.max_tokens = 64;
 *   tandem_generate(s, &r, on_text, user_data, &stats, &st);   // streams text pieces to on_text
 *   tandem_session_free(s);
 *   tandem_model_free(m);
 *
 * Every function that can fail returns 0 or a negative status and fills the
 * caller's tandem_status with one line naming the file and field at fault.
 * The library never exits the process. Threads: a tandem_model is read-only
 * after open and may be shared; a tandem_session is used by one thread at a
 * time (the server runs one scheduler per session). */
#ifndef TANDEM_H
#define TANDEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TANDEM_VERSION_STRING "0.1.0"

/* Status codes (the same values as the library's internal tm_status). */
enum {
    TANDEM_OK = 0, TANDEM_E_IO = -1, TANDEM_E_FORMAT = -2, TANDEM_E_INVALID = -3, TANDEM_E_UNSUPPORTED = -4,
    TANDEM_E_NOMEM = -5, TANDEM_E_NOTFOUND = -6, TANDEM_E_TEMPLATE = -7, TANDEM_E_CANCELLED = -8,
    TANDEM_E_CHECKSUM = -9, TANDEM_E_LIMIT = -10,
};

typedef struct tandem_status {
    int code;        /* 0, or a negative status (see core/status.h for the list) */
    char msg[512];
} tandem_status;

typedef struct tandem_model tandem_model;
typedef struct tandem_session tandem_session;

/* ---- models: a package (.tdm) or a Hugging Face directory ---- */
int tandem_model_open(tandem_model **out, const char *path, tandem_status *st);
void tandem_model_free(tandem_model *m);

/* How an embedding pools the prompt's final hidden states (tandem_request.embed_pooling) */
enum { TANDEM_POOL_DEFAULT = 0, TANDEM_POOL_LAST = 1, TANDEM_POOL_MEAN = 2, TANDEM_POOL_CLS = 3 /* the first token's */ };

typedef struct tandem_model_info {
    const char *architecture;   /* "LlamaForCausalLM" */
    int vocab, hidden, layers, heads, kv_heads, head_dim, ffn, max_ctx;
    int64_t n_params;
    const char *prefill_encoding, *decode_encoding; /* "bf16", "int4g64", ... */
    int is_package;
    float temperature, top_p;   /* generation_config defaults; temperature -1 if none */
    int top_k;
    /* What one token costs, for bandwidth and peak fractions (tandem bench --ceilings):
     * decode_bytes_per_token: weight bytes a batch-1 decode step streams in the decode
     * encoding (data + scales of every layer matrix, norms and the output head; of a
     * mixture of experts only the top_k experts' share; not the KV cache);
     * prefill_ops_per_token: 2 x the layer matrices' multiply-adds per token (MoE: active
     * experts), the useful work of a prefill GEMM (attention not counted). */
    int64_t decode_bytes_per_token;
    double prefill_ops_per_token;
    int pooling;                /* TANDEM_POOL_*: the embedding's pooling by default: a sentence-transformers
                                   model's (its Pooling module), else TANDEM_POOL_LAST */
    int embed_normalize;        /* the model's modules end with Normalize (its embeddings are unit vectors) */
    const char *embed_unsupported; /* a module the embedding would need that tandem lacks (a Dense
                                   projection, an unknown pooling), or NULL */
    int headless;               /* no output head (a base model's checkpoint, as an embedding model's): it
                                   embeds but does not generate */
} tandem_model_info;
void tandem_model_get_info(const tandem_model *m, tandem_model_info *info);

/* ---- text ---- */
int tandem_tokenize(const tandem_model *m, const char *text, size_t len, int add_special,
                    int32_t **ids, size_t *n_ids, tandem_status *st);          /* free(*ids) */
int tandem_detokenize(const tandem_model *m, const int32_t *ids, size_t n, int skip_special,
                      char **text, tandem_status *st);                          /* free(*text) */
/* The bytes token id adds to a text in the middle of it (a decoder's rules for a text's first
 * token, such as SentencePiece's dropped leading space, do not apply; a token that holds part of
 * a UTF-8 character gives those bytes, not U+FFFD). "" for an id the tokenizer does not know.
 * *bytes: malloc'd and NUL-terminated, *len bytes without the NUL; free(*bytes). */
int tandem_token_bytes(const tandem_model *m, int32_t id, char **bytes, size_t *len, tandem_status *st);
/* messages_json: an array of {"role", "content"}; kwargs_json may be NULL.
 * template_src overrides the model's chat template (NULL: the model's). A
 * template's raise_exception gives status TM_E_TEMPLATE with its message. */
int tandem_chat_render(const tandem_model *m, const char *template_src, const char *messages_json,
                       int add_generation_prompt, const char *kwargs_json, char **text, tandem_status *st);
/* The model's chat template (Jinja source, owned by m), or NULL if it has none. */
const char *tandem_model_chat_template(const tandem_model *m);
/* Its template for a conversation with tools: the one named "tool_use" where the model has a list of named
 * templates (Command R, Hermes 2 Pro / 3: transformers' apply_chat_template picks it when given tools), else
 * NULL (the chat template serves). Owned by m. */
const char *tandem_model_tool_template(const tandem_model *m);

/* ---- sessions: engines bound, KV cache, scheduler ---- */
typedef enum tandem_route {
    TANDEM_ROUTE_AUTO = 0,     /* the router picks by its calibrated cost model */
    TANDEM_ROUTE_HYBRID,       /* prefill engine -> KV bridge -> decode engine */
    TANDEM_ROUTE_PREFILL_ONLY, /* the prefill engine does everything (stateful) */
    TANDEM_ROUTE_DECODE_ONLY,  /* the decode engine does everything */
} tandem_route;

/* The decode KV cache's element type (the stateless staging cache is bf16). */
typedef enum tandem_kv_dtype {
    TANDEM_KV_DEFAULT = 0,     /* bf16 */
    TANDEM_KV_BF16,
    TANDEM_KV_F16,
    TANDEM_KV_INT8,            /* int8 rows with one f32 scale per (token, kv head), K and V apart:
                                  about half of bf16's bytes (docs/quality.md has its cost) */
} tandem_kv_dtype;

typedef struct tandem_session_opts {
    const char *prefill_engine;   /* NULL: best available ("cpu-amx", "cpu-avx512", ...) */
    const char *decode_engine;    /* NULL: best available */
    int n_threads;                /* 0: every cpu the calling thread may run on (its affinity mask:
                                     taskset, a cpuset), at most 64; N: the first N of them */
    int prefill_threads;          /* 0: split by calibration */
    int max_ctx;                  /* 0: the model's, capped at 4096 */
    tandem_route route;
    int explain;                  /* log routing decisions to stderr */
    int stateless;                /* 1: stateless prefill + bridge copy; 0: stateful (zero copy) */
    int no_lend;                  /* 1: each side keeps to its own cores even when the other is idle */
    int exact_tail;               /* 1: the prompt's last chunk runs at its exact length instead of
                                     being padded to a built-in chunk size */
    tandem_kv_dtype kv_dtype;     /* the decode KV cache; both engines must take it (their caps) */
    int max_seqs;                 /* requests decoding at once (0: 8); 1 serves one request at a
                                     time, so a prompt never arrives while another decodes */
    int prefix_cache;             /* 1: keep requests' KV in whole pages (16 tokens), keyed by the
                                     tokens up to each page's end, and give a request whose prompt
                                     starts the same those pages (shared, read-only), prefilling
                                     only the rest: a chat's earlier turns, a common system prompt.
                                     Idle cached pages are given up, oldest first, as room is needed */
    float max_stall;              /* the rise in a running stream's time per token that a new
                                     prompt may cause (0: 0.25; < 0: no bound). The decode side
                                     borrows the idle prefill cores only where giving them back
                                     costs less than this (the calibrated slowdown, router.md) or
                                     where no prompt can arrive while it decodes (max_seqs 1). */
    float gpu_split;              /* where the prefill and the decode engine are one GPU (--prefill cuda
                                     --decode cuda) and requests may overlap (max_seqs > 1): in (0, 1), the
                                     prefill engine's share of its multiprocessors, the decode engine the
                                     rest (disjoint SMs; the idle side's share lent as idle cores are);
                                     else (the default) both on the whole GPU, the decode engine's streams
                                     at the greatest priority unless max_stall < 0 (no bound: the prompts'
                                     TTFT first; docs/benchmarks.md "Session 53" has the measurements) */
    int lookup;                   /* prompt lookup (speculative decoding drafted from the text so far, no
                                     draft model): 0 off; N (1..15): a greedy request decoding alone feeds
                                     up to N tokens that followed an earlier occurrence of its last 2-4
                                     tokens with its next, in one engine call, and keeps those the model's
                                     own picks confirm (tandem_stats.n_accepted; runtime/lookup.h). The
                                     output is plain decoding's up to the prefill kernels' rounding */
} tandem_session_opts;
void tandem_session_opts_default(tandem_session_opts *o);
/* The stall bound opts give: opts.max_stall, 0.25 when 0, or 0 for none (< 0). */
float tandem_stall_bound(const tandem_session_opts *o);
int tandem_session_new(tandem_session **out, tandem_model *m, const tandem_session_opts *o, tandem_status *st);
void tandem_session_free(tandem_session *s);
/* The session's context in tokens: one request's prompt + generated tokens
 * (tandem_submit refuses a longer prompt and clips max_tokens to fit). */
int tandem_session_ctx(const tandem_session *s);
/* Which sides borrow the other's cores while it is idle (opts.no_lend, max_seqs, max_stall). */
enum { TANDEM_LEND_PREFILL = 1, TANDEM_LEND_DECODE = 2 };
int tandem_session_lending(const tandem_session *s);

/* One generated token's log-probability (tandem_request.logprobs, docs/sampling.md). */
#define TANDEM_MAX_LOGPROBS 20
#define TANDEM_MAX_TOKENS_NONE (-1) /* tandem_request.max_tokens: generate nothing */
typedef struct tandem_logprob {
    int32_t token;                          /* the token drawn */
    float logprob;                          /* its log-probability: the log-softmax of the logits the
                                               engine gave at that step, before the penalties,
                                               temperature and filters (-inf: it could not be drawn) */
    int n_top;                              /* alternatives below: request.logprobs, fewer where fewer
                                               tokens have a finite logit */
    int32_t top_token[TANDEM_MAX_LOGPROBS]; /* the most likely tokens of that step, most likely first */
    float top_logprob[TANDEM_MAX_LOGPROBS];
    int32_t rank;                           /* the token's rank by logit in the vocabulary (1: the most likely;
                                               tied tokens share one); 0 for a prompt's first token */
} tandem_logprob;

typedef struct tandem_request {
    const char *prompt;           /* text, tokenized with special tokens; or: */
    const int32_t *prompt_ids;    /* token ids (used if prompt is NULL) */
    size_t n_prompt_ids;
    int max_tokens;               /* new tokens (0: the default, 128; TANDEM_MAX_TOKENS_NONE: none, the prompt is
                                     only prefilled (and scored: prompt_logprobs), finish "length") */
    float temperature;            /* default: the model's generation_config, else 1 */
    int top_k;                    /* 0 = off */
    float top_p, min_p;           /* 1 / 0 = off */
    float repetition_penalty, presence_penalty, frequency_penalty;
    uint64_t seed;
    const char *const *stop;      /* NULL-terminated stop strings, or NULL */
    int ignore_eos;
    int no_special;               /* 1: tokenize prompt without the model's special tokens
                                     (a rendered chat template already holds them) */
    const int32_t *logit_bias_ids;/* [n_logit_bias] token ids, each in the vocabulary */
    const float *logit_bias;      /* [n_logit_bias] added to those tokens' logits before sampling
                                     (OpenAI's logit_bias: -100 bans a token, +100 all but forces it;
                                     the log-probabilities reported stay the model's) */
    int n_logit_bias;
    int json_object;              /* 1: the output is constrained, token by token, to one JSON object
                                     (RFC 8259; OpenAI's response_format json_object); the request
                                     ends, finish "stop", when the object closes */
    const char *json_schema;      /* a JSON Schema (text) or NULL: the output is constrained to one JSON
                                     value it allows (OpenAI's response_format json_schema; the subset
                                     supported: docs/sampling.md); ends, finish "stop", as it closes */
    const char *grammar;          /* a GBNF grammar (llama.cpp's dialect, root rule "root") or NULL: the
                                     output is constrained to its language; an end-of-sequence token is
                                     allowed only where the text is a whole match, and the request ends,
                                     finish "stop", where nothing may follow. At most one of json_object,
                                     json_schema and grammar */
    const char *grammar_trigger;  /* with grammar: NULL (it holds from the start), or a text from whose first
                                     place in the output on the grammar holds (llama.cpp's lazy grammars:
                                     the output is free until the model writes it, and the text from its
                                     start must then be in the grammar's language); an output whose next
                                     bytes after it the grammar refuses is left free */
    int grammar_trigger_anchored; /* with grammar_trigger: 1: it counts only where the output, past leading
                                     whitespace (and past the skipped block below, where one is set),
                                     starts with it (a bare tool call, which has no marker: Llama 3's
                                     {"name": ...}); an output that starts otherwise stays free for good.
                                     A trigger that starts with whitespace is refused */
    const char *grammar_skip_open;  /* with grammar_trigger and grammar_skip_close: a block the output may
                                     open with, in which the trigger is not looked for (a reasoning model's
                                     thinking, which may name the trigger): where the output starts (past
                                     whitespace) with grammar_skip_open, or at once where it is "" (the
                                     prompt left the block open), the trigger is looked for only after the
                                     first grammar_skip_close; an output that does not start so is looked
                                     through from its start (text/reasoning.h's rules). NULL: none */
    const char *grammar_skip_close; /* the block's closing text: set with grammar_skip_open (NULL: none; one
                                     without the other, or without grammar_trigger, is refused) */
    int logprobs;                 /* with on_logprob: each generated token's log-probability and this
                                     many (0..TANDEM_MAX_LOGPROBS) of the most likely tokens at its step */
    struct tandem_logprob_cb {    /* (a struct so that a zeroed request has none) */
        int (*fn)(void *ud, const struct tandem_logprob *lp); /* NULL: none. Called with on_text's ud,
                                     from the same thread, before the token's text, for every generated
                                     token but an end-of-sequence one that ends the request; nonzero
                                     cancels the request, as from on_text */
    } on_logprob;
    int prompt_logprobs;          /* with on_prompt_logprob: each prompt token's log-probability given the
                                     tokens before it (from the second on; OpenAI's echo, vLLM's
                                     prompt_logprobs) and this many (0..TANDEM_MAX_LOGPROBS) of the most likely
                                     tokens at its place. The prompt is then prefilled whole (no prefix cache)
                                     by an engine that gives every row's logits (the CPU and CUDA engines; a request
                                     routed to one that does not goes to the other side's, else fails) */
    struct tandem_prompt_logprob_cb {
        int (*fn)(void *ud, int index, const struct tandem_logprob *lp); /* NULL: none. Called with on_text's
                                     ud for index 0 .. n_prompt - 1 in order (lp->token is prompt token index;
                                     index 0, which nothing predicts, has logprob NaN and n_top 0), once the
                                     prompt is prefilled, before any generated token; nonzero cancels */
    } on_prompt_logprob;
    float *embedding;             /* (optional) [tandem_model_info.hidden]: the prompt's embedding, written
                                     once the prompt is prefilled: its tokens' final hidden states (the final
                                     norm's output, which the output head reads) pooled by embed_pooling, and
                                     with embed_normalize scaled to unit length. max_tokens
                                     TANDEM_MAX_TOKENS_NONE: nothing generated. The prompt is then prefilled
                                     whole (no prefix cache) by an engine that gives every row's hidden state
                                     (the CPU and CUDA engines; routed as for prompt_logprobs) */
    int embed_pooling;            /* TANDEM_POOL_*; 0: the model's (tandem_model_info.pooling) */
    int embed_normalize;          /* 1: the embedding scaled to unit L2 norm */
    const char *const *keep_special; /* NULL-terminated texts of special tokens that stay in the output text,
                                     which drops the others (a reply format's markup: harmony's channel
                                     tokens); a grammar may then write them too. At most 16; a text that is
                                     not one of the model's special tokens is ignored */
    int show_special;             /* 1: the output text keeps every special token (llama.cpp's --special) */
    /* llama.cpp's limits for code completion (its /infill and /completion fields; an editor sends them). Both
       end the request with finish "length" (llama.cpp's stop_type "limit"), and both judge the text as it is
       released, after the stop strings, so on_text never sees text that is then cut */
    int n_indent;                 /* 0: off. N > 0: after the output's first newline, a line indented by fewer
                                     than N spaces and tabs ends the request just before its first other
                                     character (a blank line's newline is one); the newline and the
                                     indentation stay in the text. The first line is never judged */
    int t_max_predict_ms;         /* 0: off. N > 0: a token whose released text holds a newline ends the
                                     request (its text kept) once more than N ms have passed since the first
                                     token was drawn */
} tandem_request;
void tandem_request_default(tandem_request *r);

typedef struct tandem_stats {
    int n_prompt, n_generated;
    int n_cached;                            /* prompt tokens whose KV came from the prefix cache */
    double t_prefill, t_handoff, t_decode;   /* seconds */
    double ttft;                             /* seconds from submit to first token */
    double t_total;                          /* seconds from submit to the end */
    double tpot_p50, tpot_p99;               /* seconds between output tokens (percentiles) */
    const char *route;                       /* "hybrid", "prefill-only", "decode-only" */
    const char *prefill_engine, *decode_engine;
    const char *finish_reason;               /* "stop", "length" */
    double t_prefill_gemm;                   /* seconds of t_prefill in the prefill engine's GEMM kernels (its
                                                matrix unit: AMX tiles, AVX-512): the dense matmuls of the
                                                chunks (an MoE model's experts not counted) */
    double prefill_gemm_ops;                 /* their operations (2 per multiply-add) */
    int stop_index;                          /* finish "stop" by one of tandem_request.stop: its index; else -1
                                                (an end-of-sequence token, a closed constraint, "length") */
    int n_drafted, n_accepted;               /* prompt lookup (tandem_session_opts.lookup): tokens drafted, and
                                                those the model confirmed (each saved a decode step) */
} tandem_stats;

/* on_text receives each new piece of valid UTF-8 (never a partial character);
 * returning nonzero cancels the request. */
typedef int (*tandem_text_fn)(void *ud, const char *piece, size_t len, int32_t token);
int tandem_generate(tandem_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud,
                    tandem_stats *stats, tandem_status *st);

/* Concurrent use: submit returns at once; the session's prefill and decode
 * workers run requests side by side (on_text is called from their threads).
 * tandem_wait blocks until the request ends and frees the handle.
 * tandem_submit and tandem_wait may be called from several threads at once
 * (tandem serve does, one thread per connection). Call tandem_cancel only
 * where tandem_wait of the same handle cannot have returned yet (it frees the
 * handle); from on_text, return nonzero instead. */
typedef struct tandem_handle tandem_handle;
int tandem_submit(tandem_session *s, const tandem_request *r, tandem_text_fn on_text, void *ud, tandem_handle **h,
                  tandem_status *st);
void tandem_cancel(tandem_handle *h);
int tandem_wait(tandem_handle *h, tandem_stats *stats, tandem_status *st);

/* KV hand-off cost for a prompt of n_ctx tokens of this model (stateless
 * mode): *copy_s = seconds the bridge needs to convert and scatter every
 * layer's K/V into decode pages; *exposed_s = the part left on the critical
 * path when the copy overlaps the later layers (the last layer's copy).
 * Median of reps runs. Uses its own caches (about 2 x n_ctx x KV bytes). */
int tandem_handoff_cost(const tandem_model *m, int n_ctx, int reps, double *copy_s, double *exposed_s,
                        tandem_status *st);

/* Logits of every position: out [n][vocab] float32 (fp32 reference engine). */
int tandem_logits(const tandem_model *m, const int32_t *ids, size_t n, float *out, tandem_status *st);

#ifdef __cplusplus
}
#endif
#endif
