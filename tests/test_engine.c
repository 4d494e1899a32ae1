/* tests/test_engine.c: the CPU engines against the fp32 reference, through the
 * runtime (every route, stateless and stateful hand-off). */
#include "harness.h"

#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "engine/engine.h"
#include "engine/ref/ref.h"
#include "model/model.h"
#include "runtime/rt_model.h"
#include "pkg/convert.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

static double max_abs_diff(const float *a, const float *b, int n, int *arg_a, int *arg_b)
{
    double m = 0;
    *arg_a = *arg_b = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m) m = d;
        if (a[i] > a[*arg_a]) *arg_a = i;
        if (b[i] > b[*arg_b]) *arg_b = i;
    }
    return m;
}

/* Every engine and route against the fp32 reference over the same weights:
 * a package whose two stages are both bf16, so any difference is the
 * engines' arithmetic (bf16 activations), not the encodings. */
static void test_routes_exact(void)
{
    tm_err err = {0};
    tm_convert_opts co;
    tm_convert_opts_default(&co);
    co.decode_enc = TM_DT_BF16;
    tm_convert_stats cs;
    const char *pkg = "build/test_engine_bf16.tdm";
    CHECKF(tm_convert("models/tiny-classics-llama", pkg, &co, &cs, &err) == TM_OK, "%s", err.msg);
    tm_rt_model *rm;
    CHECKF(tm_rt_model_open(&rm, pkg, &err) == TM_OK, "%s", err.msg);
    if (!rm) return;
    int V = rm->decode->V;
    /* prompt0 of the model card */
    int32_t ids[] = {0, 7793, 537, 260, 594, 13, 477, 310, 260, 536, 952, 479, 373, 260, 536, 952};
    int n = 16, np = 12;
    /* fp32 reference logits at every position */
    tm_ref *ref;
    CHECKF(tm_ref_init(&ref, rm->decode, 256, 1, &err) == TM_OK, "%s", err.msg);
    float *want = malloc(sizeof(float) * (size_t)n * V);
    CHECKF(tm_ref_forward(ref, ids, n, 0, want, 1, &err) == TM_OK, "%s", err.msg);
    tm_ref_free(ref);

    const char *engines[] = {"cpu-scalar", "cpu-avx2", "cpu-avx512", "cpu-amx"};
    const tandem_route routes[] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_PREFILL_ONLY, TANDEM_ROUTE_DECODE_ONLY};
    float *got = malloc(sizeof(float) * (size_t)(n - np + 1) * V);
    for (size_t e = 0; e < sizeof engines / sizeof engines[0]; e++) {
        tm_engine_caps caps;
        const tm_engine_vt *vt = tm_engine_find(engines[e]);
        tm_err e2 = {0};
        if (!vt || vt->probe(&caps, &e2) != TM_OK) {
            printf("SKIP %s: %s\n", engines[e], e2.msg);
            continue;
        }
        for (int stateless = 0; stateless < 2; stateless++) {
            tandem_session_opts o;
            memset(&o, 0, sizeof o);
            o.prefill_engine = engines[e];
            o.decode_engine = engines[e];
            o.n_threads = 2;
            o.max_ctx = 256;
            o.stateless = stateless;
            tm_session *s;
            CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
            if (!s) continue;
            for (size_t r = 0; r < 3; r++) {
                if (stateless && routes[r] != TANDEM_ROUTE_HYBRID) continue;
                CHECKF(tm_session_score(s, ids, n, np, routes[r], got, &err) == TM_OK, "%s", err.msg);
                for (int p = np - 1; p < n; p++) {
                    int aa, ab;
                    double d = max_abs_diff(got + (size_t)(p - np + 1) * V, want + (size_t)p * V, V, &aa, &ab);
                    /* bf16 weights and bf16-rounded activations: |logit| ~ 10, bf16 eps 2^-8 */
                    CHECKF(d < 0.25, "%s route %zu stateless %d pos %d: max |diff| %.4f", engines[e], r, stateless, p, d);
                    CHECKF(aa == ab, "%s route %zu stateless %d pos %d: argmax %d, reference %d", engines[e], r,
                           stateless, p, aa, ab);
                }
            }
            tm_session_free(s);
        }
    }
    free(got);
    free(want);
    tm_rt_model_free(rm);
    unlink(pkg);
}

/* The default package (prefill bf16, decode int4g64) on the hybrid route:
 * the prompt's KV comes from the bf16 prefill, the continuation is scored by
 * the int4 decode. Judged against the fp32 reference by top-1 agreement and
 * mean KL divergence over held-out text (docs/quality.md has the full table). */
static void test_hybrid_quantized(void)
{
    tm_err err = {0};
    tm_rt_model *rm;
    CHECKF(tm_rt_model_open(&rm, "models/tiny-classics-llama", &err) == TM_OK, "%s", err.msg);
    if (!rm) return;
    char *text = NULL;
    size_t len;
    CHECK(tm_read_file("models/tiny-classics-llama/heldout.txt", &text, &len, 0, &err) == TM_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(tm_tok_encode(rm->tok, text, 4000, 1, &ids, &n, &err) == TM_OK);
    free(text);
    int N = n < 192 ? (int)n : 192, np = 96, V = rm->decode->V;
    tm_ref *ref;
    CHECKF(tm_ref_init(&ref, rm->prefill, 256, 2, &err) == TM_OK, "%s", err.msg);
    float *want = malloc(sizeof(float) * (size_t)N * V), *got = malloc(sizeof(float) * (size_t)(N - np + 1) * V);
    CHECK(tm_ref_forward(ref, ids, N, 0, want, 1, &err) == TM_OK); /* bf16 weights in f32: the reference */
    tm_ref_free(ref);
    tandem_session_opts o;
    memset(&o, 0, sizeof o);
    o.n_threads = 2;
    o.max_ctx = 256;
    o.stateless = 1;
    tm_session *s;
    CHECKF(tm_session_new(&s, rm, &o, &err) == TM_OK, "%s", err.msg);
    CHECKF(tm_session_score(s, ids, N, np, TANDEM_ROUTE_HYBRID, got, &err) == TM_OK, "%s", err.msg);
    int agree = 0, rows = N - np + 1;
    double kl = 0;
    for (int r = 0; r < rows; r++) {
        const float *a = got + (size_t)r * V, *b = want + (size_t)(np - 1 + r) * V;
        int aa, ab;
        max_abs_diff(a, b, V, &aa, &ab);
        agree += aa == ab;
        double ma = a[aa], mb = b[ab], za = 0, zb = 0;
        for (int v = 0; v < V; v++) { za += exp(a[v] - ma); zb += exp(b[v] - mb); }
        for (int v = 0; v < V; v++) {
            double pb = exp(b[v] - mb) / zb, la = a[v] - ma - log(za), lb = b[v] - mb - log(zb);
            kl += pb * (lb - la);
        }
    }
    kl /= rows;
    printf("hybrid bf16 prefill + int4g64 decode vs fp32: top-1 %d/%d, mean KL %.4f\n", agree, rows, kl);
    CHECKF(agree >= rows * 80 / 100, "top-1 agreement %d/%d", agree, rows);
    CHECKF(kl < 0.05, "mean KL %.4f", kl);
    tm_session_free(s);
    free(got);
    free(want);
    free(ids);
    tm_rt_model_free(rm);
}

int main(void)
{
    test_routes_exact();
    test_hybrid_quantized();
    return th_done("test_engine");
}
