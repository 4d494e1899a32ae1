/* runtime/quality.c: perplexity, KL divergence and top-1 agreement of a
 * stage-encoding pair against the float32 reference (see quality.h). */
#include "runtime/quality.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/fileio.h"
#include "engine/ref/ref-impl.h" /* for ref_kv_transplant only: see there */
#include "engine/ref/ref.h"
#include "hf/hf_model.h"
#include "model/model.h"
#include "pkg/convert.h"
#include "runtime/rt_model.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

#define QUAL_MAX_CTX 65536
#define QUAL_TEXT_MAX ((size_t)256 << 20) /* bytes of text accepted by tm_qual_encode_file */

/* The pair whose package is open (HF mode: converted on the fly; package
 * mode: the package itself, opened once). */
typedef struct qual_pair {
    int prefill_enc, decode_enc;   /* as asked for (-1: default), -2 when nothing is open */
    tm_rt_model *rm;
    int fallbacks;
    tm_session *s;                 /* engine path, made on first use */
    tm_ref *rpre, *rdec;           /* reference path: one instance per stage, made on first use */
} qual_pair;

struct tm_qual {
    char model[1024];
    int is_pkg;
    tm_qual_opts o;
    int n_threads;
    int N, P, W;                   /* window tokens, prompt tokens, windows */
    int V;
    int32_t *win;                  /* [W][N] token ids of every window */
    float *ref;                    /* [W][N-P][V] fp32 reference logits; row r of a window predicts token P+r */
    float *buf;                    /* [N-P+1][V] a candidate's logits for one window */
    double ref_nll;                /* mean NLL of the reference */
    qual_pair cur;
};

/* ---- metrics -------------------------------------------------------------------- */

double tm_qual_logsumexp(const float *z, int V)
{
    double m = -INFINITY, s = 0;
    for (int v = 0; v < V; v++)
        if (z[v] > m) m = z[v];
    if (!isfinite(m)) return m;
    for (int v = 0; v < V; v++) s += exp((double)z[v] - m);
    return m + log(s);
}

double tm_qual_nll(const float *z, int V, int32_t target)
{
    return tm_qual_logsumexp(z, V) - (double)z[target];
}

double tm_qual_kl(const float *z_ref, const float *z, int V)
{
    double lr = tm_qual_logsumexp(z_ref, V), lz = tm_qual_logsumexp(z, V), kl = 0;
    for (int v = 0; v < V; v++) {
        double a = (double)z_ref[v] - lr, b = (double)z[v] - lz;
        if (a == b) continue; /* exact 0 for equal rows (and no 0 * inf) */
        kl += exp(a) * (a - b);
    }
    return kl;
}

int tm_qual_argmax(const float *z, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > z[best]) best = v;
    return best;
}

/* ---- options, text -------------------------------------------------------------- */

void tm_qual_opts_default(tm_qual_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ctx = 512;
    o->max_tokens = 2048;
    o->bos = -1;
    o->max_ref_bytes = (size_t)1 << 30;
}

int tm_qual_encode_file(const char *model, const char *file, int32_t **ids, size_t *n, int *bos, tm_err *err)
{
    *ids = NULL;
    *n = 0;
    *bos = -1;
    tm_tokenizer *tok = NULL;
    tm_rt_model *rm = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (tm_is_dir(model)) {
        char path[1200];
        if ((rc = tm_path_join(path, sizeof path, model, "tokenizer.json")) != TM_OK)
            return tm_errf(err, rc, "%s: path too long", model);
        rc = tm_tok_load(&tok, path, err);
    } else {
        rc = tm_rt_model_open(&rm, model, err);
    }
    if (rc != TM_OK) return rc;
    const tm_tokenizer *t = rm ? rm->tok : tok;
    if ((rc = tm_read_file(file, &text, &len, QUAL_TEXT_MAX, err)) != TM_OK) goto done;
    /* what the tokenizer's post-processor puts before any text: encode "" */
    int32_t *e = NULL;
    size_t ne = 0;
    if ((rc = tm_tok_encode(t, "", 0, 1, &e, &ne, err)) != TM_OK) goto done;
    int first = ne > 0 ? e[0] : -1;
    free(e);
    if ((rc = tm_tok_encode(t, text, len, 1, ids, n, err)) != TM_OK) {
        tm_err_prefix(err, "%s", file);
        goto done;
    }
    if (*n > 0 && first >= 0 && (*ids)[0] == first) *bos = first;
done:
    free(text);
    tm_tok_free(tok);
    tm_rt_model_free(rm);
    return rc;
}

/* ---- pairs: open, close ------------------------------------------------------------ */

static void pair_close(qual_pair *p)
{
    tm_session_free(p->s);
    tm_ref_free(p->rpre);
    tm_ref_free(p->rdec);
    tm_rt_model_free(p->rm);
    memset(p, 0, sizeof *p);
    p->prefill_enc = p->decode_enc = -2;
}

/* HF mode: convert to a temporary package with the asked encodings, map it,
 * unlink it at once (the mapping stays valid; nothing is left on disk). */
static int pair_open_hf(tm_qual *q, int pre, int dec, tm_err *err)
{
    static int counter;
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    if (pre >= 0) co.prefill_enc = (tm_dtype)pre;
    if (dec >= 0) co.decode_enc = (tm_dtype)dec;
    int rc = tm_convert_check_opts(&co, err);
    if (rc != TM_OK) return rc;
    const char *td = getenv("TMPDIR");
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s/tandem-quality-%ld-%d.tdm", td && *td ? td : "/tmp", (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    tm_convert_stats st;
    if ((rc = tm_convert(q->model, tmp, &co, &st, err)) != TM_OK) return rc;
    rc = tm_rt_model_open(&q->cur.rm, tmp, err);
    unlink(tmp);
    if (rc != TM_OK) return rc;
    q->cur.fallbacks = st.fallbacks;
    q->cur.prefill_enc = pre;
    q->cur.decode_enc = dec;
    return TM_OK;
}

static int pair_select(tm_qual *q, int pre, int dec, tm_err *err)
{
    if (q->is_pkg) {
        const tm_rt_model *rm = q->cur.rm;
        if ((pre >= 0 && pre != (int)rm->prefill_enc) || (dec >= 0 && dec != (int)rm->decode_enc))
            return tm_errf(err, TM_E_INVALID,
                           "%s: the package holds prefill %s / decode %s; other encodings (%s / %s) need the "
                           "Hugging Face directory", q->model, tm_dtype_name(rm->prefill_enc),
                           tm_dtype_name(rm->decode_enc), pre >= 0 ? tm_dtype_name((tm_dtype)pre) : "-",
                           dec >= 0 ? tm_dtype_name((tm_dtype)dec) : "-");
        return TM_OK;
    }
    if (q->cur.rm && q->cur.prefill_enc == pre && q->cur.decode_enc == dec) return TM_OK;
    pair_close(&q->cur);
    int rc = pair_open_hf(q, pre, dec, err);
    if (rc != TM_OK) pair_close(&q->cur);
    return rc;
}

/* ---- windows and the reference ----------------------------------------------------- */

static int plan_windows(tm_qual *q, const int32_t *ids, size_t n, tm_err *err)
{
    const tm_qual_opts *o = &q->o;
    if (o->ctx < 2 || o->ctx > QUAL_MAX_CTX)
        return tm_errf(err, TM_E_INVALID, "ctx: %d tokens per window is outside [2, %d]", o->ctx, QUAL_MAX_CTX);
    int N = o->ctx, P = o->prefill_len ? o->prefill_len : N / 2;
    if (P < 1 || P >= N)
        return tm_errf(err, TM_E_INVALID, "prefill_len: %d prompt tokens in a window of %d (need 1..%d)", P, N, N - 1);
    if (o->max_tokens < 0) return tm_errf(err, TM_E_INVALID, "max_tokens: %d is negative", o->max_tokens);
    int with_bos = o->bos >= 0;
    const int32_t *s = ids;
    size_t ns = n;
    if (with_bos && ns > 0 && s[0] == o->bos) s++, ns--;
    size_t per = (size_t)(with_bos ? N - 1 : N);
    size_t avail = per ? ns / per : 0;
    if (avail == 0)
        return tm_errf(err, TM_E_INVALID, "ctx: the text holds %zu tokens, fewer than one window of %d", n, N);
    size_t W = avail;
    if (o->max_tokens > 0) {
        size_t want = ((size_t)o->max_tokens + (size_t)(N - P) - 1) / (size_t)(N - P);
        if (want < W) W = want;
    }
    if (W > (size_t)INT32_MAX / (size_t)N)
        return tm_errf(err, TM_E_LIMIT, "max_tokens: %zu windows of %d tokens are too many", W, N);
    q->N = N, q->P = P, q->W = (int)W;
    q->win = malloc(W * (size_t)N * sizeof(int32_t));
    if (!q->win) return tm_errf(err, TM_E_NOMEM, "out of memory for %zu windows of %d tokens", W, N);
    for (size_t w = 0; w < W; w++) {
        int32_t *d = q->win + w * (size_t)N;
        if (with_bos) *d++ = o->bos;
        memcpy(d, s + w * per, per * sizeof(int32_t));
    }
    return TM_OK;
}

/* Logits of one window's scored positions through one reference instance:
 * rows [N-P][V], row r after position P-1+r. */
static int ref_score_single(tm_ref *r, const int32_t *win, int N, int P, float *rows, tm_err *err)
{
    int rc = TM_OK;
    tm_ref_reset(r);
    if (P > 1) rc = tm_ref_forward(r, win, P - 1, 0, NULL, 0, err);
    if (rc == TM_OK) rc = tm_ref_forward(r, win + P - 1, N - P, P - 1, rows, 1, err);
    return rc;
}

/* The reference engine has no public call that moves KV between instances
 * (ref.h); the hybrid reference needs exactly that, so this one function
 * reads its private layout (ref-impl.h: kc, vc [L][Hk][max_ctx][Dh] of
 * post-RoPE K and V, positions [0, n_past) valid). test_quality guards the
 * assumption: a hybrid whose two stages hold the same weights must give the
 * single-model logits bit for bit. */
static int ref_kv_transplant(tm_ref *dst, const tm_ref *src, int n, tm_err *err)
{
    if (dst->L != src->L || dst->Hk != src->Hk || dst->Dh != src->Dh || dst->max_ctx != src->max_ctx ||
        n > src->n_past || n > dst->max_ctx)
        return tm_errf(err, TM_E_INVALID, "reference hybrid: the two stages' KV caches do not match");
    size_t row = (size_t)src->max_ctx * src->Dh, len = (size_t)n * src->Dh * sizeof(float);
    for (size_t lg = 0; lg < (size_t)src->L * src->Hk; lg++) {
        memcpy(dst->kc + lg * row, src->kc + lg * row, len);
        memcpy(dst->vc + lg * row, src->vc + lg * row, len);
    }
    dst->n_past = n;
    return TM_OK;
}

/* Hybrid through the reference: prompt by the prefill-stage model (its last
 * logits score token P), continuation by the decode-stage model over that KV. */
static int ref_score_hybrid(tm_ref *pre, tm_ref *dec, const int32_t *win, int N, int P, int V, float *rows,
                            tm_err *err)
{
    tm_ref_reset(pre);
    int rc = tm_ref_forward(pre, win, P, 0, rows, 0, err);
    if (rc == TM_OK) rc = ref_kv_transplant(dec, pre, P, err);
    if (rc == TM_OK && N - P > 1) rc = tm_ref_forward(dec, win + P, N - P - 1, P, rows + V, 1, err);
    return rc;
}

/* A package's reference weights: its bf16 (or f16) stage. */
static int pkg_reference_model(const tm_qual *q, const tm_model **m, tm_err *err)
{
    const tm_rt_model *rm = q->cur.rm;
    int pre_ok = rm->prefill_enc == TM_DT_BF16 || rm->prefill_enc == TM_DT_F16 || rm->prefill_enc == TM_DT_F32;
    int dec_ok = rm->decode_enc == TM_DT_BF16 || rm->decode_enc == TM_DT_F16 || rm->decode_enc == TM_DT_F32;
    if (!pre_ok && !dec_ok)
        return tm_errf(err, TM_E_UNSUPPORTED,
                       "%s: neither stage is bf16/f16 (prefill %s, decode %s): the fp32 reference needs "
                       "unquantized weights; give the Hugging Face directory", q->model,
                       tm_dtype_name(rm->prefill_enc), tm_dtype_name(rm->decode_enc));
    *m = pre_ok ? rm->prefill : rm->decode;
    return TM_OK;
}

/* The fp32 reference logits of every scored position, computed on first
 * need (so that a bad case is refused before this, the slow part): a HF
 * directory's safetensors, or a package's bf16/f16 stage. */
static int ensure_reference(tm_qual *q, tm_err *err)
{
    if (q->ref) return TM_OK;
    tm_model *own = NULL;
    const tm_model *m;
    int rc;
    if (q->is_pkg) {
        if ((rc = pkg_reference_model(q, &m, err)) != TM_OK) return rc;
    } else {
        if ((rc = tm_hf_model_open(&own, q->model, NULL, err)) != TM_OK) return rc;
        m = own;
    }
    q->V = m->V;
    size_t S = (size_t)(q->N - q->P);
    size_t rows = (size_t)q->W * S;
    float *ref = NULL;
    if (q->V < 1 || rows > q->o.max_ref_bytes / sizeof(float) / (size_t)q->V) {
        rc = tm_errf(err, TM_E_LIMIT, "max_tokens: %zu scored positions x %d logits exceed the reference cache "
                     "limit of %zu bytes (lower max_tokens)", rows, q->V, q->o.max_ref_bytes);
        goto done;
    }
    ref = malloc(rows * (size_t)q->V * sizeof(float));
    q->buf = malloc((S + 1) * (size_t)q->V * sizeof(float));
    if (!ref || !q->buf) {
        rc = tm_errf(err, TM_E_NOMEM, "out of memory for %zu x %d reference logits", rows, q->V);
        goto done;
    }
    tm_ref *r = NULL;
    if ((rc = tm_ref_init(&r, m, q->N, q->n_threads, err)) != TM_OK) goto done;
    double nll = 0;
    for (int w = 0; w < q->W && rc == TM_OK; w++) {
        const int32_t *win = q->win + (size_t)w * q->N;
        float *z = ref + (size_t)w * S * q->V;
        if ((rc = ref_score_single(r, win, q->N, q->P, z, err)) != TM_OK) break;
        for (size_t i = 0; i < S; i++) nll += tm_qual_nll(z + i * q->V, q->V, win[q->P + i]);
    }
    tm_ref_free(r);
    q->ref_nll = nll / (double)rows;
    if (rc != TM_OK) tm_err_prefix(err, "%s: fp32 reference", q->model);
done:
    if (rc == TM_OK) q->ref = ref;
    else free(ref);
    tm_model_free(own);
    return rc;
}

int tm_qual_open(tm_qual **out, const char *model, const int32_t *ids, size_t n, const tm_qual_opts *o,
                 tm_err *err)
{
    *out = NULL;
    tm_qual *q = calloc(1, sizeof *q);
    if (!q) return tm_errf(err, TM_E_NOMEM, "out of memory");
    q->cur.prefill_enc = q->cur.decode_enc = -2;
    q->o = *o;
    q->n_threads = o->n_threads > 0 ? o->n_threads : tm_cpu_allowed(NULL, 256);
    if (q->n_threads < 1) q->n_threads = 1;
    if (q->n_threads > 256) q->n_threads = 256;
    int rc;
    if (snprintf(q->model, sizeof q->model, "%s", model) >= (int)sizeof q->model) {
        rc = tm_errf(err, TM_E_INVALID, "%.100s...: path too long", model);
        goto fail;
    }
    if ((rc = plan_windows(q, ids, n, err)) != TM_OK) goto fail;
    q->is_pkg = !tm_is_dir(model);
    if (q->is_pkg) {
        if ((rc = tm_rt_model_open(&q->cur.rm, model, err)) != TM_OK) goto fail;
        q->cur.prefill_enc = q->cur.decode_enc = -1;
        const tm_model *m;
        if ((rc = pkg_reference_model(q, &m, err)) != TM_OK) goto fail;
    }
    *out = q;
    return TM_OK;
fail:
    tm_qual_free(q);
    return rc;
}

void tm_qual_free(tm_qual *q)
{
    if (!q) return;
    pair_close(&q->cur);
    free(q->win);
    free(q->ref);
    free(q->buf);
    free(q);
}

void tm_qual_windows(const tm_qual *q, int *n_windows, int *ctx, int *prefill_len)
{
    *n_windows = q->W;
    *ctx = q->N;
    *prefill_len = q->P;
}

int tm_qual_reference(tm_qual *q, tm_qual_result *res, tm_err *err)
{
    memset(res, 0, sizeof *res);
    int rc = ensure_reference(q, err);
    if (rc != TM_OK) return rc;
    res->nll = q->ref_nll;
    res->ppl = exp(q->ref_nll);
    res->top1 = 1;
    res->n_scored = q->W * (q->N - q->P);
    res->n_windows = q->W;
    res->prefill_enc = res->decode_enc = TM_DT_F32;
    snprintf(res->prefill_by, sizeof res->prefill_by, "ref");
    snprintf(res->decode_by, sizeof res->decode_by, "ref");
    return TM_OK;
}

/* ---- scoring one case ------------------------------------------------------------------ */

static int ensure_session(tm_qual *q, tm_err *err)
{
    if (q->cur.s) return TM_OK;
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.n_threads = q->n_threads;
    /* tm_session_score wants n + 1 positions; the prefill engine also
     * computes the padding rows of its last chunk (chunks up to 512) */
    so.max_ctx = q->N + 1 > q->P + 512 ? q->N + 1 : q->P + 512;
    so.prefill_engine = q->o.prefill_engine;
    so.decode_engine = q->o.decode_engine;
    so.kv_dtype = q->o.kv_dtype;
    so.route = TANDEM_ROUTE_AUTO;
    return tm_session_new(&q->cur.s, q->cur.rm, &so, err);
}

static int ensure_ref(tm_ref **r, const struct tm_model *m, int N, int n_threads, tm_err *err)
{
    return *r ? TM_OK : tm_ref_init(r, m, N, n_threads, err);
}

int tm_qual_run(tm_qual *q, const tm_qual_case *c, tm_qual_result *res, tm_err *err)
{
    memset(res, 0, sizeof *res);
    if (c->route != TANDEM_ROUTE_HYBRID && c->route != TANDEM_ROUTE_PREFILL_ONLY && c->route != TANDEM_ROUTE_DECODE_ONLY)
        return tm_errf(err, TM_E_INVALID, "route: %d is not hybrid, prefill-only or decode-only", (int)c->route);
    if (c->path != TM_QUAL_ENGINE && c->path != TM_QUAL_REF)
        return tm_errf(err, TM_E_INVALID, "path: %d is neither engine nor reference", (int)c->path);
    int rc = pair_select(q, c->prefill_enc, c->decode_enc, err);
    if (rc == TM_OK) rc = ensure_reference(q, err);
    if (rc != TM_OK) return rc;
    tm_rt_model *rm = q->cur.rm;
    if (rm->decode->V != q->V)
        return tm_errf(err, TM_E_INVALID, "%s: vocabulary %d differs from the reference's %d", q->model,
                       rm->decode->V, q->V);
    int N = q->N, P = q->P, V = q->V, S = N - P;
    const char *pre_by = "ref", *dec_by = "ref";
    if (c->path == TM_QUAL_ENGINE) {
        if ((rc = ensure_session(q, err)) != TM_OK) return rc;
        const char *pe = tm_session_prefill_engine(q->cur.s), *de = tm_session_decode_engine(q->cur.s);
        pre_by = c->route == TANDEM_ROUTE_DECODE_ONLY ? de : pe;
        dec_by = c->route == TANDEM_ROUTE_PREFILL_ONLY ? pe : de;
    } else {
        if (c->route != TANDEM_ROUTE_DECODE_ONLY &&
            (rc = ensure_ref(&q->cur.rpre, rm->prefill, N, q->n_threads, err)) != TM_OK)
            return rc;
        if (c->route != TANDEM_ROUTE_PREFILL_ONLY &&
            (rc = ensure_ref(&q->cur.rdec, rm->decode, N, q->n_threads, err)) != TM_OK)
            return rc;
    }
    double t0 = tm_now_s(), nll = 0, kl = 0, kl_max = 0;
    long agree = 0;
    for (int w = 0; w < q->W; w++) {
        const int32_t *win = q->win + (size_t)w * N;
        if (c->path == TM_QUAL_ENGINE)
            rc = tm_session_score(q->cur.s, win, N, P, c->route, q->buf, err);
        else if (c->route == TANDEM_ROUTE_HYBRID)
            rc = ref_score_hybrid(q->cur.rpre, q->cur.rdec, win, N, P, V, q->buf, err);
        else
            rc = ref_score_single(c->route == TANDEM_ROUTE_PREFILL_ONLY ? q->cur.rpre : q->cur.rdec, win, N, P,
                                  q->buf, err);
        if (rc != TM_OK) return tm_err_prefix(err, "%s: window %d", q->model, w);
        const float *zr = q->ref + (size_t)w * S * V;
        for (int i = 0; i < S; i++) {
            const float *z = q->buf + (size_t)i * V, *r = zr + (size_t)i * V;
            nll += tm_qual_nll(z, V, win[P + i]);
            double k = tm_qual_kl(r, z, V);
            kl += k;
            if (k > kl_max) kl_max = k;
            agree += tm_qual_argmax(z, V) == tm_qual_argmax(r, V);
        }
    }
    double rows = (double)q->W * S;
    res->seconds = tm_now_s() - t0;
    res->nll = nll / rows;
    res->ppl = exp(res->nll);
    res->kl = kl / rows;
    res->kl_max = kl_max;
    res->top1 = (double)agree / rows;
    res->n_scored = q->W * S;
    res->n_windows = q->W;
    res->prefill_enc = c->route == TANDEM_ROUTE_DECODE_ONLY ? rm->decode_enc : rm->prefill_enc;
    res->decode_enc = c->route == TANDEM_ROUTE_PREFILL_ONLY ? rm->prefill_enc : rm->decode_enc;
    res->fallbacks = q->cur.fallbacks;
    snprintf(res->prefill_by, sizeof res->prefill_by, "%s", pre_by ? pre_by : "?");
    snprintf(res->decode_by, sizeof res->decode_by, "%s", dec_by ? dec_by : "?");
    return TM_OK;
}
