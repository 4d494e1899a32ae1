/* runtime/rt_model.h: a model as the runtime sees it: both stages' weights,
 * the tokenizer and the text configuration, from a package or a HF directory.
 *
 *   tm_rt_model *rm;
 *   if (tm_rt_model_open(&rm, "model.tdm", &err) != TM_OK) ...;
 *   rm->prefill   // tm_model bound to the prefill stage's weights (e.g. bf16)
 *   rm->decode    // tm_model bound to the decode stage's weights (e.g. int4g64)
 *   rm->tok       // tokenizer
 *   tm_rt_model_free(rm);
 *
 * A package binds each stage to its own copy of the weights (shared copies
 * are the same bytes). A HF directory is converted on the fly with the
 * default encodings into an unlinked temporary package (nothing is left on
 * disk), so every command sees the same thing whatever it was given. */
#ifndef TM_RUNTIME_RT_MODEL_H
#define TM_RUNTIME_RT_MODEL_H

#include "core/status.h"
#include "core/tensor.h"

#include <pthread.h>

struct tm_model;
struct tm_tokenizer;
struct tm_pkg;
struct tm_vocab_trie;

typedef struct tm_rt_model {
    char path[1024];
    struct tm_pkg *pkg;
    struct tm_model *prefill;        /* weights in the prefill encoding */
    struct tm_model *decode;         /* weights in the decode encoding */
    struct tm_tokenizer *tok;
    tm_dtype prefill_enc, decode_enc;
    char *chat_template;             /* NULL if the model has none */
    char *tool_template;             /* its template named "tool_use" (for conversations with tools, as transformers
                                        picks it), or NULL */
    char *bos_token, *eos_token;     /* special-token strings for templates, or NULL */
    int eos_ids[16], n_eos;          /* generation stops on these */
    float temperature, top_p, min_p, repetition_penalty; /* generation_config defaults */
    int top_k;
    int has_sampling_defaults;
    int pooling;                     /* TANDEM_POOL_*: the embedding's default (sentence-transformers' Pooling) */
    int embed_normalize;             /* the modules end in Normalize */
    char embed_unsupported[160];     /* a module tandem lacks ("" where none) */
    pthread_mutex_t trie_mu;         /* trie, built by the first constrained request */
    struct tm_vocab_trie *trie;
} tm_rt_model;

int tm_rt_model_open(tm_rt_model **out, const char *path, tm_err *err);

/* The embedding's modules: sentence-transformers' modules.json [n] and its Pooling module's
 * config.json [pn] (either may be NULL): the pooling (cls, mean or last token; last where none is
 * given), Normalize; any other module (Dense, LayerNorm, ...) or pooling mode (max, weighted mean,
 * ...) named in unsupported (embeddings are then refused). TM_E_FORMAT naming the document that is
 * not the JSON it should be. Pure (fuzz/fuzz_config.c). */
typedef struct tm_embed_cfg {
    int pooling;                     /* TANDEM_POOL_* */
    int normalize;
    char unsupported[160];           /* "" where none */
} tm_embed_cfg;
int tm_embed_cfg_parse(tm_embed_cfg *c, const char *modules, size_t n, const char *pooling, size_t pn, tm_err *err);
void tm_rt_model_free(tm_rt_model *rm);

/* The vocabulary trie of constrained output (text/vocab_trie.h: JSON mode, grammars) over the
 * decode stage's logits, built on first use (0.2 s for a 152k vocabulary here) and kept with the
 * model. */
int tm_rt_model_trie(tm_rt_model *rm, struct tm_vocab_trie **out, tm_err *err);

#endif
