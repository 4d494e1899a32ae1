/* runtime/quality.h: what per-stage precision costs. Perplexity, mean KL
 * divergence and top-1 agreement of a (prefill encoding, decode encoding)
 * pair, scored exactly as the hybrid route runs a request, against the
 * float32 reference forward over the same source (unquantized) weights.
 *
 *   int32_t *ids; size_t n; int bos;
 *   tm_qual_encode_file("models/tiny-classics-llama", "heldout.txt", &ids, &n, &bos, &err);
 *   tm_qual_opts o;
 *   tm_qual_opts_default(&o);                  // windows of 512, prompt 256, >= 2048 scored tokens
 *   o.bos = bos;
 *   tm_qual *q;
 *   if (tm_qual_open(&q, "models/tiny-classics-llama", ids, n, &o, &err) != TM_OK) ...;
 *   tm_qual_case c = {TM_DT_BF16, TM_DT_Q4G64, TANDEM_ROUTE_HYBRID, TM_QUAL_ENGINE};
 *   tm_qual_result r;
 *   tm_qual_run(q, &c, &r, &err);              // converts to a temporary package, scores it
 *   printf("ppl %.3f  KL %.4f  top-1 %.1f%%\n", r.ppl, r.kl, 100 * r.top1);
 *   tm_qual_free(q);
 *
 * Windows. The token stream is cut into W windows of N tokens (opts.ctx);
 * with opts.bos >= 0 each window is [bos] + N-1 stream tokens (a leading bos
 * of the stream is dropped first), as llama.cpp's perplexity does. In each
 * window the first P tokens (opts.prefill_len) are the prompt and tokens
 * P..N-1 are scored: token t by the logits after position t-1. On the hybrid
 * route the prompt is prefilled with the prefill-stage weights (they make its
 * KV cache), so token P is scored by the prefill stage's last logits and
 * tokens P+1..N-1 by the decode stage, one at a time, reading that KV.
 *
 * Metrics over the scored tokens (natural logs, accumulated in double):
 *   nll  = mean(logsumexp(z) - z[target]),  ppl = exp(nll)
 *   kl   = mean KL(P_ref || P) = mean sum_v p_ref(v) (log p_ref(v) - log p(v))
 *   top1 = fraction of positions where argmax z == argmax z_ref (lowest index on ties)
 * The reference P_ref is the float32 forward (engine/ref) over the source
 * weights: for a HF directory its safetensors; for a package its bf16 (or
 * f16) stage, and a package with no such stage is refused.
 *
 * Paths.
 *   TM_QUAL_ENGINE  the fast engines through tm_session_score (routes:
 *                   hybrid, prefill-only = prefill encoding everywhere,
 *                   decode-only = decode encoding everywhere).
 *   TM_QUAL_REF     the float32 reference forward over the DEQUANTIZED stage
 *                   weights: hybrid = the prompt through the prefill-stage
 *                   model, its KV moved into a second reference instance
 *                   bound to the decode-stage weights, which scores the rest;
 *                   the single-stage routes run one model over the window.
 *                   It isolates what the encodings cost from what the
 *                   engines' bf16 arithmetic costs.
 * With a HF directory any pair can be asked for: it is converted on the fly
 * (tm_convert) into a temporary package that is unlinked as soon as it is
 * mapped. The last pair stays open, so consecutive cases on one pair convert
 * once. */
#ifndef TM_RUNTIME_QUALITY_H
#define TM_RUNTIME_QUALITY_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "tandem.h"

typedef struct tm_qual tm_qual;

typedef enum tm_qual_path {
    TM_QUAL_ENGINE = 0,   /* fast engines, tm_session_score */
    TM_QUAL_REF = 1,      /* fp32 reference over dequantized stage weights */
} tm_qual_path;

typedef struct tm_qual_opts {
    int ctx;                /* N: tokens per window, 2..65536 (default 512) */
    int prefill_len;        /* P: prompt tokens per window, 1..N-1 (0: N/2) */
    int max_tokens;         /* windows stop once this many tokens are scored (default 2048; 0: whole text) */
    int bos;                /* id that starts every window, or -1 (default -1) */
    int n_threads;          /* engine and reference threads (0: all cores) */
    const char *prefill_engine, *decode_engine;   /* (optional) default NULL: the best available */
    tandem_kv_dtype kv_dtype;   /* the engine path's decode KV cache (default bf16; the reference keeps f32) */
    size_t max_ref_bytes;   /* cap on the cached reference logits (default 1 GiB) */
} tm_qual_opts;

/* One thing to score. An encoding of -1 means the package's own (a HF
 * directory: tm_convert's default, bf16 prefill / int4g64 decode). */
typedef struct tm_qual_case {
    int prefill_enc;        /* tm_dtype: BF16, F16, Q8PC, Q4PC; or -1 */
    int decode_enc;         /* tm_dtype: Q4G64, Q4G32, Q8PC, BF16, F16; or -1 */
    tandem_route route;     /* HYBRID, PREFILL_ONLY or DECODE_ONLY */
    tm_qual_path path;
} tm_qual_case;

typedef struct tm_qual_result {
    double nll, ppl;        /* mean negative log-likelihood (nats) and exp(nll) */
    double kl, kl_max;      /* mean and largest per-token KL(P_ref || P), nats */
    double top1;            /* fraction of scored positions agreeing with the reference's argmax */
    int n_scored, n_windows;
    tm_dtype prefill_enc, decode_enc;   /* the stage encodings that ran */
    int fallbacks;          /* matrices the converter stored in a fallback encoding (0 for a package) */
    char prefill_by[32], decode_by[32]; /* who ran the prompt / the continuation: engine names or "ref" */
    double seconds;         /* scoring time (conversion and reference excluded) */
} tm_qual_result;

void tm_qual_opts_default(tm_qual_opts *o);

/* tm_qual_encode_file: the text of `file` tokenized with the model's
 * tokenizer and its special tokens (as a prompt would be); *bos receives the
 * id the tokenizer puts first (e.g. BOS) or -1 if it adds none. model: a HF
 * directory or a package. free(*ids). */
int tm_qual_encode_file(const char *model, const char *file, int32_t **ids, size_t *n, int *bos, tm_err *err);

/* tm_qual_open: cut ids[n] into windows (see above). model: a HF directory
 * (any pair can be run) or a package (its own pair; it must hold a bf16/f16
 * stage). The float32 reference logits of every scored position are
 * computed once, on first need (tm_qual_run after it accepted the case, or
 * tm_qual_reference), and kept for all later runs. */
int tm_qual_open(tm_qual **out, const char *model, const int32_t *ids, size_t n, const tm_qual_opts *o,
                 tm_err *err);

/* tm_qual_run: score one case. */
int tm_qual_run(tm_qual *q, const tm_qual_case *c, tm_qual_result *res, tm_err *err);

/* tm_qual_reference: the float32 reference's own figures (kl 0, top1 1). */
int tm_qual_reference(tm_qual *q, tm_qual_result *res, tm_err *err);

/* tm_qual_windows: the window plan: windows, tokens per window, prompt tokens. */
void tm_qual_windows(const tm_qual *q, int *n_windows, int *ctx, int *prefill_len);

void tm_qual_free(tm_qual *q);

/* ---- the per-position metrics (pure functions; z are logits [V]) ---- */

/* log sum_v exp(z[v]), in double, stable for any finite z */
double tm_qual_logsumexp(const float *z, int V);
/* -log softmax(z)[target] */
double tm_qual_nll(const float *z, int V, int32_t target);
/* KL(softmax(z_ref) || softmax(z)) >= 0; exactly 0 when the rows are equal */
double tm_qual_kl(const float *z_ref, const float *z, int V);
/* index of the largest element (the lowest index among equals) */
int tm_qual_argmax(const float *z, int V);

#endif
