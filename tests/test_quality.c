/* tests/test_quality.c: runtime/quality: the per-position metrics, and
 * perplexity / KL / top-1 of stage-encoding pairs on the demo model against
 * computations done here independently. */
#include "harness.h"

#include <float.h>
#include <stdint.h>
#include <unistd.h>

#include "core/fileio.h"
#include "engine/ref/ref.h"
#include "hf/hf_model.h"
#include "model/model.h"
#include "pkg/convert.h"
#include "runtime/quality.h"
#include "text/tokenizer.h"

#define DEMO "models/tiny-classics-llama"

/* ---- metrics on hand-made rows ---- */

static void test_metrics(void)
{
    float two[2] = {0, 0};
    CHECK_NEAR(tm_qual_logsumexp(two, 2), log(2.0), 1e-15);
    float big[2] = {1000, 1000}; /* exp(1000) overflows: the shift must be there */
    CHECK_NEAR(tm_qual_logsumexp(big, 2), 1000 + log(2.0), 1e-12);
    float four[4] = {3, 3, 3, 3};
    CHECK_NEAR(tm_qual_nll(four, 4, 2), log(4.0), 1e-15);
    /* p = softmax(0, ln 3) = (1/4, 3/4), q = (1/2, 1/2) */
    float zp[2] = {0, (float)log(3.0)}, zq[2] = {5, 5};
    double pa = 1.0 / (1.0 + exp((double)zp[1])), pb = 1 - pa; /* from the stored float */
    double want = pa * log(pa / 0.5) + pb * log(pb / 0.5);
    CHECK_NEAR(tm_qual_kl(zp, zq, 2), want, 1e-14);
    CHECKF(tm_qual_kl(zq, zp, 2) > 0, "KL(q||p) %.3g", tm_qual_kl(zq, zp, 2));
    /* KL(p||p) == 0 exactly, and invariant to a constant shift of the logits */
    float a[64], b[64];
    uint32_t s = 12345;
    for (int i = 0; i < 64; i++) {
        s = s * 1664525u + 1013904223u;
        a[i] = (float)((s >> 8) % 2000) / 100.0f - 10.0f;
        b[i] = a[i] + 0.5f;
    }
    CHECK(tm_qual_kl(a, a, 64) == 0.0);
    CHECK_NEAR(tm_qual_kl(a, b, 64), 0.0, 1e-12);
    b[7] += 2;
    CHECKF(tm_qual_kl(a, b, 64) > 1e-6, "KL %.3g", tm_qual_kl(a, b, 64));
    /* a -inf logit in the candidate where the reference has mass: infinite KL, no NaN */
    float r2[2] = {0, 0}, c2[2] = {0, -INFINITY};
    CHECK(isinf(tm_qual_kl(r2, c2, 2)));
    float ties[5] = {1, 4, 2, 4, 0};
    CHECK_EQ_INT(tm_qual_argmax(ties, 5), 1);
}

/* ---- the demo model ---- */

typedef struct demo {
    int32_t *ids;      /* the held-out text's first bytes, tokenized with BOS */
    size_t n;
    int bos;
    tm_qual_opts o;
} demo;

static int demo_load(demo *d, int sanitizer)
{
    memset(d, 0, sizeof *d);
    tm_err err = {0};
    tm_tokenizer *tok;
    if (tm_tok_load(&tok, DEMO "/tokenizer.json", &err) != TM_OK) {
        CHECKF(0, "%s", err.msg);
        return -1;
    }
    char *text = NULL;
    size_t len;
    CHECKF(tm_read_file(DEMO "/heldout.txt", &text, &len, 0, &err) == TM_OK, "%s", err.msg);
    if (!text) return -1;
    CHECK(tm_tok_encode(tok, text, len < 6000 ? len : 6000, 1, &d->ids, &d->n, &err) == TM_OK);
    free(text);
    tm_tok_free(tok);
    CHECK(d->n > 200);
    d->bos = d->ids[0]; /* the demo tokenizer puts BOS first */
    tm_qual_opts_default(&d->o);
    d->o.ctx = sanitizer ? 16 : 48;
    d->o.prefill_len = d->o.ctx / 2;
    d->o.max_tokens = sanitizer ? 8 : 48; /* 1 or 2 windows */
    d->o.bos = d->bos;
    d->o.n_threads = 2;
    return 0;
}

/* exp(mean NLL) of the scored tokens, computed here from full-window fp32
 * reference logits: windows rebuilt from the token stream independently. */
static double independent_ppl(const demo *d, int *n_scored)
{
    tm_err err = {0};
    tm_model *m;
    if (tm_hf_model_open(&m, DEMO, NULL, &err) != TM_OK) {
        CHECKF(0, "%s", err.msg);
        return NAN;
    }
    int N = d->o.ctx, P = d->o.prefill_len, V = m->V;
    int W = d->o.max_tokens / (N - P);
    tm_ref *r;
    CHECKF(tm_ref_init(&r, m, N, 2, &err) == TM_OK, "%s", err.msg);
    float *z = malloc(sizeof(float) * (size_t)N * V);
    int32_t *win = malloc(sizeof(int32_t) * (size_t)N);
    double sum = 0;
    int cnt = 0;
    for (int w = 0; w < W; w++) {
        win[0] = (int32_t)d->bos;
        for (int i = 1; i < N; i++) win[i] = d->ids[1 + (size_t)w * (N - 1) + (i - 1)];
        tm_ref_reset(r);
        CHECKF(tm_ref_forward(r, win, N, 0, z, 1, &err) == TM_OK, "%s", err.msg);
        for (int t = P; t < N; t++) { /* token t from the logits after t-1 */
            const float *row = z + (size_t)(t - 1) * V;
            double mx = row[0], se = 0;
            for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
            for (int v = 0; v < V; v++) se += exp(row[v] - mx);
            sum += -(row[win[t]] - mx - log(se));
            cnt++;
        }
    }
    free(z);
    free(win);
    tm_ref_free(r);
    tm_model_free(m);
    *n_scored = cnt;
    return exp(sum / cnt);
}

static int run_case(tm_qual *q, int pre, int dec, tandem_route route, tm_qual_path path, tm_qual_result *res)
{
    tm_err err = {0};
    tm_qual_case c = {pre, dec, route, path};
    int rc = tm_qual_run(q, &c, res, &err);
    CHECKF(rc == TM_OK, "case %s/%s route %d path %d: %s", tm_dtype_name((tm_dtype)pre), tm_dtype_name((tm_dtype)dec),
           (int)route, (int)path, err.msg);
    if (rc == TM_OK)
        printf("  %-6s %-8s %-13s %-6s ppl %8.4f  KL %.5f (max %.4f)  top-1 %5.1f%%  by %s/%s  %.2fs\n",
               tm_dtype_name(res->prefill_enc), tm_dtype_name(res->decode_enc),
               route == TANDEM_ROUTE_HYBRID ? "hybrid" : route == TANDEM_ROUTE_PREFILL_ONLY ? "prefill-only"
                                                                                          : "decode-only",
               path == TM_QUAL_REF ? "ref" : "engine", res->ppl, res->kl, res->kl_max, 100 * res->top1,
               res->prefill_by, res->decode_by, res->seconds);
    return rc;
}

static void test_demo(int sanitizer)
{
    demo d;
    if (demo_load(&d, sanitizer)) return;
    tm_err err = {0};
    tm_qual *q = NULL;
    CHECKF(tm_qual_open(&q, DEMO, d.ids, d.n, &d.o, &err) == TM_OK, "%s", err.msg);
    if (!q) {
        free(d.ids);
        return;
    }
    int W, N, P;
    tm_qual_windows(q, &W, &N, &P);
    CHECK_EQ_INT(W, d.o.max_tokens / (d.o.ctx / 2));
    CHECK_EQ_INT(N, d.o.ctx);
    CHECK_EQ_INT(P, d.o.ctx / 2);

    /* 1. the reference path's perplexity against an independent computation */
    tm_qual_result ref;
    CHECKF(tm_qual_reference(q, &ref, &err) == TM_OK, "%s", err.msg);
    int n_ind = 0;
    double ppl_ind = independent_ppl(&d, &n_ind);
    CHECK_EQ_INT(ref.n_scored, n_ind);
    CHECK_NEAR(ref.ppl, ppl_ind, 1e-9 * ppl_ind);
    CHECKF(ref.ppl > 1.5 && ref.ppl < 200, "fp32 perplexity %.3f of a trained model on its held-out text", ref.ppl);
    printf("  fp32 reference: ppl %.4f over %d tokens (independent: %.4f)\n", ref.ppl, ref.n_scored, ppl_ind);

    /* 2. reference path, bf16 both stages: the dequantized weights are the
     * source weights, so the hybrid (prompt KV moved between two reference
     * instances) must give the reference's logits bit for bit */
    tm_qual_result r;
    if (run_case(q, TM_DT_BF16, TM_DT_BF16, TANDEM_ROUTE_HYBRID, TM_QUAL_REF, &r) == TM_OK) {
        CHECK(r.kl == 0.0);
        CHECK(r.top1 == 1.0);
        CHECK(r.ppl == ref.ppl);
        CHECK_EQ_STR(r.prefill_by, "ref");
    }

    /* 3. the engines with bf16 weights against fp32: bf16 activations only */
    tm_qual_result e_bf16;
    if (run_case(q, TM_DT_BF16, TM_DT_BF16, TANDEM_ROUTE_HYBRID, TM_QUAL_ENGINE, &e_bf16) == TM_OK) {
        CHECKF(e_bf16.top1 >= 0.95, "bf16 engines vs fp32: top-1 %.3f", e_bf16.top1);
        CHECKF(e_bf16.kl > 0 && e_bf16.kl < 0.01, "bf16 engines vs fp32: KL %.5f", e_bf16.kl);
        CHECK_NEAR(e_bf16.ppl, ref.ppl, 0.03 * ref.ppl);
        CHECK_EQ_INT(e_bf16.prefill_enc, TM_DT_BF16);
        CHECK_EQ_INT(e_bf16.decode_enc, TM_DT_BF16);
    }

    /* 4. int4 decode costs more than bf16 decode, on both paths; the hybrid
     * reference really mixes the stages (it is neither single-stage run) */
    tm_qual_result e_q4, r_q4, r_q4_only;
    if (run_case(q, TM_DT_BF16, TM_DT_Q4G64, TANDEM_ROUTE_HYBRID, TM_QUAL_ENGINE, &e_q4) == TM_OK) {
        CHECKF(e_q4.kl > e_bf16.kl, "KL int4g64 decode %.5f <= bf16 decode %.5f", e_q4.kl, e_bf16.kl);
        CHECKF(e_q4.kl < 0.2, "KL int4g64 decode %.5f", e_q4.kl);
        CHECK_EQ_INT(e_q4.decode_enc, TM_DT_Q4G64);
    }
    if (run_case(q, TM_DT_BF16, TM_DT_Q4G64, TANDEM_ROUTE_HYBRID, TM_QUAL_REF, &r_q4) == TM_OK &&
        run_case(q, TM_DT_BF16, TM_DT_Q4G64, TANDEM_ROUTE_DECODE_ONLY, TM_QUAL_REF, &r_q4_only) == TM_OK) {
        CHECKF(r_q4.kl > 1e-4, "reference hybrid bf16 -> int4g64: KL %.3g", r_q4.kl);
        CHECK(r_q4.kl != r_q4_only.kl);
        CHECK_EQ_INT(r_q4_only.prefill_enc, TM_DT_Q4G64);
        CHECK_EQ_INT(r_q4_only.decode_enc, TM_DT_Q4G64);
        CHECK_EQ_INT(r_q4.prefill_enc, TM_DT_BF16);
    }

    /* 5. bad cases are refused with a message */
    tm_qual_case bad = {TM_DT_Q4G64, TM_DT_BF16, TANDEM_ROUTE_HYBRID, TM_QUAL_ENGINE};
    err = (tm_err){0};
    CHECK(tm_qual_run(q, &bad, &r, &err) == TM_E_INVALID && strstr(err.msg, "prefill"));
    bad = (tm_qual_case){TM_DT_BF16, TM_DT_BF16, TANDEM_ROUTE_AUTO, TM_QUAL_ENGINE};
    CHECK(tm_qual_run(q, &bad, &r, &err) == TM_E_INVALID && strstr(err.msg, "route"));
    tm_qual_free(q);

    /* 6. bad windows */
    tm_qual_opts o = d.o;
    o.ctx = 1;
    q = NULL;
    CHECK(tm_qual_open(&q, DEMO, d.ids, d.n, &o, &err) == TM_E_INVALID && strstr(err.msg, "ctx"));
    o = d.o;
    o.prefill_len = o.ctx;
    CHECK(tm_qual_open(&q, DEMO, d.ids, d.n, &o, &err) == TM_E_INVALID && strstr(err.msg, "prefill_len"));
    o = d.o;
    CHECK(tm_qual_open(&q, DEMO, d.ids, (size_t)o.ctx / 2, &o, &err) == TM_E_INVALID && strstr(err.msg, "fewer"));
    o.max_ref_bytes = 1000; /* checked when the reference is computed */
    tm_qual_result r2;
    CHECKF(tm_qual_open(&q, DEMO, d.ids, d.n, &o, &err) == TM_OK, "%s", err.msg);
    if (q) CHECK(tm_qual_reference(q, &r2, &err) == TM_E_LIMIT && strstr(err.msg, "max_tokens"));
    tm_qual_free(q);
    int32_t badid[80];
    for (int i = 0; i < 80; i++) badid[i] = i == 40 ? 1 << 30 : 5;
    o = d.o;
    o.ctx = 64;
    o.max_tokens = 32;
    q = NULL;
    CHECKF(tm_qual_open(&q, DEMO, badid, 80, &o, &err) == TM_OK, "%s", err.msg);
    /* a bad case is refused before the (slow) reference is computed */
    bad = (tm_qual_case){TM_DT_BF16, TM_DT_Q4PC, TANDEM_ROUTE_HYBRID, TM_QUAL_ENGINE};
    if (q) CHECK(tm_qual_run(q, &bad, &r2, &err) == TM_E_INVALID && strstr(err.msg, "decode"));
    if (q) CHECK(tm_qual_reference(q, &r2, &err) == TM_E_INVALID && strstr(err.msg, "vocabulary"));
    tm_qual_free(q);
    q = NULL;
    CHECK(q == NULL);
    free(d.ids);
}

/* A package: the reference comes from its bf16 stage; it runs its own pair
 * only; a package without an unquantized stage is refused. */
static void test_package(int sanitizer)
{
    demo d;
    if (demo_load(&d, sanitizer)) return;
    d.o.max_tokens = d.o.ctx / 2; /* one window */
    tm_err err = {0};
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    co.prefill_enc = TM_DT_BF16; /* a bf16 stage: the package holds its own fp32 reference */
    const char *pkg = "build/test_quality_default.tdm";
    CHECKF(tm_convert(DEMO, pkg, &co, NULL, &err) == TM_OK, "%s", err.msg);
    tm_qual *qp = NULL, *qh = NULL;
    CHECKF(tm_qual_open(&qp, pkg, d.ids, d.n, &d.o, &err) == TM_OK, "%s", err.msg);
    CHECKF(tm_qual_open(&qh, DEMO, d.ids, d.n, &d.o, &err) == TM_OK, "%s", err.msg);
    if (qp && qh) {
        tm_qual_result a, b, ra, rb;
        CHECK(tm_qual_reference(qp, &ra, &err) == TM_OK);
        CHECK(tm_qual_reference(qh, &rb, &err) == TM_OK);
        CHECK(ra.ppl == rb.ppl); /* same bf16 weights in f32 */
        if (run_case(qp, -1, -1, TANDEM_ROUTE_HYBRID, TM_QUAL_REF, &a) == TM_OK &&
            run_case(qh, TM_DT_BF16, TM_DT_Q4G64, TANDEM_ROUTE_HYBRID, TM_QUAL_REF, &b) == TM_OK) {
            CHECK(a.kl == b.kl);
            CHECK(a.ppl == b.ppl);
            CHECK_EQ_INT(a.fallbacks, 0);
        }
        tm_qual_case other = {TM_DT_BF16, TM_DT_Q8PC, TANDEM_ROUTE_HYBRID, TM_QUAL_ENGINE};
        CHECK(tm_qual_run(qp, &other, &a, &err) == TM_E_INVALID && strstr(err.msg, "Hugging Face directory"));
    }
    tm_qual_free(qp);
    tm_qual_free(qh);
    unlink(pkg);

    co.prefill_enc = TM_DT_Q8PC;
    pkg = "build/test_quality_q8q4.tdm";
    CHECKF(tm_convert(DEMO, pkg, &co, NULL, &err) == TM_OK, "%s", err.msg);
    qp = NULL;
    CHECK(tm_qual_open(&qp, pkg, d.ids, d.n, &d.o, &err) == TM_E_UNSUPPORTED && strstr(err.msg, "unquantized"));
    CHECK(qp == NULL);
    unlink(pkg);
    free(d.ids);
}

/* tm_qual_encode_file: BOS detection through the tokenizer. */
static void test_encode(void)
{
    tm_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    int bos = -2;
    const char *path = "build/test_quality_text.txt";
    FILE *f = fopen(path, "w");
    if (!f) {
        CHECK(0);
        return;
    }
    fputs("It was a dark and stormy night.", f);
    fclose(f);
    CHECKF(tm_qual_encode_file(DEMO, path, &ids, &n, &bos, &err) == TM_OK, "%s", err.msg);
    CHECK(n > 3);
    CHECK_EQ_INT(bos, 0); /* the demo model's BOS id (config.json bos_token_id) */
    CHECK(n > 0 && ids[0] == 0);
    free(ids);
    ids = NULL;
    CHECK(tm_qual_encode_file(DEMO, "build/no-such-file.txt", &ids, &n, &bos, &err) != TM_OK &&
          strstr(err.msg, "no-such-file"));
    unlink(path);
}

int main(void)
{
    int sanitizer = getenv("TM_SANITIZER") != NULL;
    test_metrics();
    test_encode();
    test_demo(sanitizer);
    test_package(sanitizer);
    return th_done("test_quality");
}
