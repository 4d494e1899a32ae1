/* tests/test_ref.c: properties of the reference engine and the RoPE tables
 * checked against independent computations (the HF comparisons are in
 * test_conformance): RoPE formulas (default, linear, llama3, yarn, longrope,
 * partial rotary), the sliding window's receptive field, incremental decoding
 * and rewinding vs a full recompute (bit-exact), quantized weights vs their
 * dequantized copy, soft-capping bounds, the residual trace, and errors. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref/ref.h"
#include "harness.h"
#include "hf/config.h"
#include "model/model.h"
#include "quant/quant.h"

static int model_from(const char *text, tm_model **mp, tm_err *err)
{
    tm_hf_config c;
    *mp = NULL;
    int rc = tm_hf_config_parse(&c, text, strlen(text), "config.json", err);
    if (rc) return rc;
    rc = tm_model_init(mp, &c, err);
    tm_hf_config_free(&c);
    return rc;
}

/* ---- a synthetic model: every required tensor filled with seeded values ---- */

typedef struct synth {
    int n;
    char (*names)[128];
    tm_tensor *t;
    void **bufs;
} synth;

static uint32_t rng_state;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

static int synth_lookup(void *ctx, const char *name, tm_tensor *out, tm_err *err)
{
    synth *s = ctx;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) {
            *out = s->t[i];
            return TM_OK;
        }
    return tm_errf(err, TM_E_NOTFOUND, "synth: no tensor '%s'", name);
}

/* f32 tensors for m's specs; quant: encoding for TM_TK_MATRIX tensors (F32 for none);
 * deq: 1 to store the dequantized values of that encoding as f32 instead */
static void synth_fill(synth *s, const tm_model *m, uint32_t seed, tm_dtype quant, int deq)
{
    s->n = m->n_spec;
    s->names = calloc((size_t)s->n, sizeof *s->names);
    s->t = calloc((size_t)s->n, sizeof *s->t);
    s->bufs = calloc((size_t)s->n * 2, sizeof *s->bufs);
    rng_state = seed;
    for (int i = 0; i < s->n; i++) {
        const tm_tensor_spec *sp = &m->spec[i];
        int64_t numel = sp->shape[0] * (sp->ndim == 2 ? sp->shape[1] : 1);
        float *w = malloc((size_t)numel * sizeof(float));
        int is_norm = strstr(sp->name, "norm") != NULL;
        for (int64_t k = 0; k < numel; k++) w[k] = is_norm ? 1.0f + 0.2f * frand() : 0.15f * frand();
        snprintf(s->names[i], sizeof s->names[i], "%s", sp->name);
        tm_tensor *t = &s->t[i];
        t->name = s->names[i];
        t->ndim = sp->ndim;
        t->shape[0] = sp->shape[0];
        t->shape[1] = sp->shape[1];
        t->dtype = TM_DT_F32;
        t->data = w;
        t->nbytes = (size_t)numel * sizeof(float);
        s->bufs[2 * i] = w;
        if (quant != TM_DT_F32 && sp->kind == TM_TK_MATRIX) {
            int64_t N = sp->shape[0], K = sp->shape[1];
            void *q = malloc(tm_quant_data_bytes(quant, N, K));
            float *sc = malloc(tm_quant_scale_count(quant, N, K) * sizeof(float));
            tm_err err = {0};
            CHECK(tm_quant_quantize(quant, w, N, K, q, sc, NULL, &err) == TM_OK);
            if (deq) {
                CHECK(tm_quant_dequant(quant, q, sc, N, K, w, &err) == TM_OK);
                free(q);
                free(sc);
            } else {
                t->dtype = quant;
                t->data = q;
                t->scales = sc;
                t->nbytes = tm_quant_data_bytes(quant, N, K);
                s->bufs[2 * i] = q;
                s->bufs[2 * i + 1] = sc;
                free(w);
            }
        }
    }
}

static void synth_free(synth *s)
{
    for (int i = 0; i < 2 * s->n; i++) free(s->bufs[i]);
    free(s->bufs);
    free(s->t);
    free(s->names);
}

/* model + its f32 weights + a reference engine */
typedef struct setup {
    tm_model *m;
    synth s;
    tm_ref *r;
} setup;

static int setup_init(setup *u, const char *cfg, uint32_t seed, tm_dtype quant, int deq, int max_ctx)
{
    memset(u, 0, sizeof *u);
    tm_err err = {0};
    int rc = model_from(cfg, &u->m, &err);
    CHECKF(rc == TM_OK, "config: %s", err.msg);
    if (rc) return rc;
    synth_fill(&u->s, u->m, seed, quant, deq);
    if (quant == TM_DT_BF16 || quant == TM_DT_F16) u->m->check_dtype = 0; /* matrices differ from the declared f32 */
    tm_tensor_source src = {&u->s, synth_lookup, 0};
    rc = tm_model_bind(u->m, &src, &err);
    CHECKF(rc == TM_OK, "bind: %s", err.msg);
    if (rc) return rc;
    rc = tm_ref_init(&u->r, u->m, max_ctx, 2, &err);
    CHECKF(rc == TM_OK, "ref init: %s", err.msg);
    return rc;
}

static void setup_free(setup *u)
{
    tm_ref_free(u->r);
    tm_model_free(u->m);
    synth_free(&u->s);
}

#define CFG_BASE "\"vocab_size\":50,\"hidden_size\":64,\"intermediate_size\":96,\"num_attention_heads\":4," \
                 "\"num_key_value_heads\":2,\"torch_dtype\":\"float32\""

static const char *QWEN2 = "{\"architectures\":[\"Qwen2ForCausalLM\"]," CFG_BASE ",\"num_hidden_layers\":2}";

/* ---- RoPE against formulas evaluated in double ---- */

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

static void rope_case(const char *extra, void (*want)(int i, int half, double *inv), double want_att,
                      int want_rot, const char *what)
{
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_BASE ",\"num_hidden_layers\":1,"
             "\"max_position_embeddings\":4096%s}", extra);
    tm_model *m;
    tm_err err = {0};
    int rc = model_from(cfg, &m, &err);
    CHECKF(rc == TM_OK, "%s: %s", what, err.msg);
    if (rc) return;
    const tm_rope *r = &m->rope[0];
    int half = r->rot_dim / 2;
    CHECKF(r->rot_dim == want_rot, "%s: rot_dim %d, want %d", what, r->rot_dim, want_rot);
    double worst = 0;
    for (int i = 0; i < half; i++) {
        double w;
        want(i, half, &w);
        worst = fmax(worst, rel(r->inv_freq[i], w));
    }
    CHECKF(worst < 2e-6, "%s: inv_freq off by %.3g (relative)", what, worst);
    CHECKF(rel(r->attn_scaling, want_att) < 1e-6, "%s: attention scaling %.9g, want %.9g", what, r->attn_scaling, want_att);
    tm_model_free(m);
}

/* Dh = 16: base frequencies theta^(-2i/16) */
static double base_inv(int i, double theta, int dim) { return pow(theta, -2.0 * i / dim); }
static void want_default(int i, int half, double *o) { (void)half; *o = base_inv(i, 10000, 16); }
static void want_linear(int i, int half, double *o) { (void)half; *o = base_inv(i, 10000, 16) / 4; }
static void want_partial(int i, int half, double *o) { (void)half; *o = base_inv(i, 10000, 8); }
static void want_llama3(int i, int half, double *o)
{
    (void)half;
    double f = base_inv(i, 500000, 16), wl = 2 * M_PI / f, factor = 8, lo = 1, hi = 4, orig = 64;
    if (wl < orig / hi) *o = f;
    else if (wl > orig / lo) *o = f / factor;
    else {
        double s = (orig / wl - lo) / (hi - lo);
        *o = (1 - s) * f / factor + s * f;
    }
}
static void want_yarn(int i, int half, double *o)
{
    (void)half;
    double dim = 16, base = 10000, factor = 4, orig = 256;
    double lo = floor(dim * log(orig / (32 * 2 * M_PI)) / (2 * log(base)));
    double hi = ceil(dim * log(orig / (1 * 2 * M_PI)) / (2 * log(base)));
    if (lo < 0) lo = 0;
    if (hi > dim - 1) hi = dim - 1;
    double ramp = fmin(fmax((i - lo) / (hi - lo), 0), 1), extra = 1 - ramp, p = pow(base, 2.0 * i / dim);
    *o = 1 / (factor * p) * (1 - extra) + 1 / p * extra;
}
static const double SHORT[8] = {1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7}, LONG[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static void want_longrope_short(int i, int half, double *o) { (void)half; *o = base_inv(i, 10000, 16) / SHORT[i]; }

static void test_rope(void)
{
    rope_case("", want_default, 1.0, 16, "default");
    rope_case(",\"rope_scaling\":{\"type\":\"linear\",\"factor\":4.0}", want_linear, 1.0, 16, "linear (legacy 'type' key)");
    rope_case(",\"rope_parameters\":{\"rope_type\":\"linear\",\"factor\":4.0,\"rope_theta\":10000}", want_linear, 1.0, 16,
              "linear (rope_parameters)");
    rope_case(",\"partial_rotary_factor\":0.5", want_partial, 1.0, 8, "partial rotary 0.5");
    rope_case(",\"rope_theta\":500000,\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
              "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":64}", want_llama3, 1.0, 16, "llama3");
    rope_case(",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":256}",
              want_yarn, 0.1 * log(4.0) + 1, 16, "yarn");
    rope_case(",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":256,"
              "\"mscale\":0.707,\"mscale_all_dim\":1.0}", want_yarn, (0.1 * 0.707 * log(4.0) + 1) / (0.1 * log(4.0) + 1), 16,
              "yarn with mscale / mscale_all_dim");
    rope_case(",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":256,"
              "\"attention_factor\":0.5}", want_yarn, 0.5, 16, "yarn with attention_factor");
    rope_case(",\"original_max_position_embeddings\":256,\"rope_scaling\":{\"rope_type\":\"longrope\","
              "\"short_factor\":[1,1.1,1.2,1.3,1.4,1.5,1.6,1.7],\"long_factor\":[1,2,3,4,5,6,7,8]}",
              want_longrope_short, sqrt(1 + log(4096.0 / 256) / log(256.0)), 16, "longrope");
    /* longrope: the long table past original_max_position_embeddings */
    tm_model *m;
    tm_err err = {0};
    CHECK_EQ_INT(model_from("{\"architectures\":[\"Phi3ForCausalLM\"]," CFG_BASE ",\"num_hidden_layers\":1,"
                            "\"max_position_embeddings\":4096,\"original_max_position_embeddings\":256,"
                            "\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1.1,1.2,1.3,1.4,1.5,1.6,1.7],"
                            "\"long_factor\":[1,2,3,4,5,6,7,8]}}", &m, &err), TM_OK);
    if (m) {
        const tm_rope *r = &m->rope[0];
        CHECK(tm_rope_inv_freq_at(r, 256) == r->inv_freq);
        CHECK(tm_rope_inv_freq_at(r, 257) == r->inv_freq_long);
        double worst = 0;
        for (int i = 0; i < 8; i++) worst = fmax(worst, rel(r->inv_freq_long[i], base_inv(i, 10000, 16) / LONG[i]));
        CHECK(worst < 2e-6);
    }
    tm_model_free(m);
}

/* ---- forward-pass properties ---- */

static int argmax_of(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* one layer with window W: logits at i depend on tokens (i - W, i] only */
static void test_sliding(void)
{
    const int T = 12, W = 4;
    int32_t a[12], b[12];
    for (int i = 0; i < T; i++) a[i] = b[i] = (int32_t)((i * 7 + 3) % 50);
    b[0] = 41;
    for (int sliding = 1; sliding >= 0; sliding--) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg, "{\"architectures\":[\"MistralForCausalLM\"]," CFG_BASE ",\"num_hidden_layers\":1,"
                 "\"sliding_window\":%s}", sliding ? "4" : "null");
        setup u;
        if (setup_init(&u, cfg, 7, TM_DT_F32, 0, 64)) {
            setup_free(&u);
            continue;
        }
        int V = u.m->V;
        float *la = malloc(sizeof(float) * T * V), *lb = malloc(sizeof(float) * T * V);
        tm_err err = {0};
        CHECK_EQ_INT(tm_ref_forward(u.r, a, T, 0, la, 1, &err), TM_OK);
        tm_ref_reset(u.r);
        CHECK_EQ_INT(tm_ref_forward(u.r, b, T, 0, lb, 1, &err), TM_OK);
        int same_before = 0, same_after = 1;
        for (int t = 0; t < T; t++) {
            int eq = memcmp(la + (size_t)t * V, lb + (size_t)t * V, sizeof(float) * V) == 0;
            if (t < W) same_before |= eq;
            else same_after &= eq;
        }
        CHECKF(!same_before, "sliding=%d: positions inside the window must see token 0", sliding);
        if (sliding) CHECKF(same_after, "window %d: positions >= %d must not see token 0", W, W);
        else CHECKF(!same_after, "no window: every position sees token 0");
        free(la);
        free(lb);
        setup_free(&u);
    }
}

/* all positions at once == one token at a time == chunks, bit for bit; rewinding */
static void test_incremental(void)
{
    const int T = 20;
    int32_t ids[20], alt[20];
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 13 + 5) % 50), alt[i] = (int32_t)((i * 3 + 1) % 50);
    const char *cfgs[] = {QWEN2,
                          "{\"architectures\":[\"Gemma2ForCausalLM\"]," CFG_BASE ",\"num_hidden_layers\":2,\"head_dim\":16,"
                          "\"sliding_window\":6,\"query_pre_attn_scalar\":20,\"attn_logit_softcapping\":0.5,"
                          "\"final_logit_softcapping\":2.0}",
                          "{\"architectures\":[\"Qwen3MoeForCausalLM\"]," CFG_BASE ",\"num_hidden_layers\":2,\"head_dim\":16,"
                          "\"num_experts\":4,\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,\"norm_topk_prob\":true}"};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        setup u;
        if (setup_init(&u, cfgs[c], 11 + (uint32_t)c, TM_DT_F32, 0, 32)) {
            setup_free(&u);
            continue;
        }
        int V = u.m->V;
        float *full = malloc(sizeof(float) * T * V), *step = malloc(sizeof(float) * T * V);
        tm_err err = {0};
        CHECK_EQ_INT(tm_ref_forward(u.r, ids, T, 0, full, 1, &err), TM_OK);
        CHECK_EQ_INT(tm_ref_n_past(u.r), T);
        tm_ref_reset(u.r);
        CHECK_EQ_INT(tm_ref_n_past(u.r), 0);
        for (int t = 0; t < T; t++) CHECK_EQ_INT(tm_ref_forward(u.r, ids + t, 1, t, step + (size_t)t * V, 0, &err), TM_OK);
        CHECKF(memcmp(full, step, sizeof(float) * T * V) == 0, "%s: token-by-token differs from the full pass", u.m->arch_name);
        tm_ref_reset(u.r);
        CHECK_EQ_INT(tm_ref_forward(u.r, ids, 7, 0, step, 1, &err), TM_OK);
        CHECK_EQ_INT(tm_ref_forward(u.r, ids + 7, 13, 7, step + (size_t)7 * V, 1, &err), TM_OK);
        CHECKF(memcmp(full, step, sizeof(float) * T * V) == 0, "%s: chunks 7 + 13 differ from the full pass", u.m->arch_name);
        /* rewind to 8 and continue with other tokens == a fresh pass over the spliced sequence */
        int32_t mix[20];
        memcpy(mix, ids, 8 * sizeof *mix);
        memcpy(mix + 8, alt + 8, 12 * sizeof *mix);
        CHECK_EQ_INT(tm_ref_forward(u.r, mix + 8, 12, 8, step + (size_t)8 * V, 1, &err), TM_OK);
        float *fresh = malloc(sizeof(float) * T * V);
        tm_ref_reset(u.r);
        CHECK_EQ_INT(tm_ref_forward(u.r, mix, T, 0, fresh, 1, &err), TM_OK);
        CHECKF(memcmp(fresh + (size_t)8 * V, step + (size_t)8 * V, sizeof(float) * 12 * V) == 0,
               "%s: rewinding differs from a fresh pass", u.m->arch_name);
        /* last-position logits only */
        float *last = malloc(sizeof(float) * V);
        tm_ref_reset(u.r);
        CHECK_EQ_INT(tm_ref_forward(u.r, ids, T, 0, last, 0, &err), TM_OK);
        CHECK(memcmp(last, full + (size_t)(T - 1) * V, sizeof(float) * V) == 0);
        if (u.m->final_softcap != 0) {
            int inside = 1;
            for (int i = 0; i < T * V; i++) inside &= fabsf(full[i]) < u.m->final_softcap;
            CHECKF(inside, "final soft-capping bounds |logits| by %g", u.m->final_softcap);
        }
        free(last);
        free(fresh);
        free(full);
        free(step);
        setup_free(&u);
    }
}

/* quantized weights give exactly what their dequantized f32 copy gives */
static void test_quantized(void)
{
    tm_dtype encs[] = {TM_DT_Q8PC, TM_DT_Q4G32, TM_DT_BF16};
    const int T = 6;
    int32_t ids[6] = {1, 5, 9, 2, 44, 17};
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        setup q, f;
        int ok = setup_init(&q, QWEN2, 99, encs[e], 0, 16) == TM_OK;
        ok &= setup_init(&f, QWEN2, 99, encs[e], 1, 16) == TM_OK;
        if (ok) {
            int V = q.m->V;
            float *lq = malloc(sizeof(float) * T * V), *lf = malloc(sizeof(float) * T * V);
            tm_err err = {0};
            CHECK_EQ_INT(tm_ref_forward(q.r, ids, T, 0, lq, 1, &err), TM_OK);
            CHECK_EQ_INT(tm_ref_forward(f.r, ids, T, 0, lf, 1, &err), TM_OK);
            CHECKF(memcmp(lq, lf, sizeof(float) * T * V) == 0, "%s weights differ from their dequantized copy",
                   tm_dtype_name(encs[e]));
            free(lq);
            free(lf);
        }
        setup_free(&q);
        setup_free(&f);
    }
}

static void test_trace_and_errors(void)
{
    setup u;
    if (setup_init(&u, QWEN2, 3, TM_DT_F32, 0, 8) == TM_OK) {
        const tm_model *m = u.m;
        int32_t ids[3] = {4, 8, 15};
        float *tr = malloc(sizeof(float) * (m->L + 2) * 3 * m->D), *lg = malloc(sizeof(float) * 3 * m->V);
        tm_err err = {0};
        tm_ref_trace(u.r, tr);
        CHECK_EQ_INT(tm_ref_forward(u.r, ids, 3, 0, lg, 1, &err), TM_OK);
        tm_ref_trace(u.r, NULL);
        const float *emb = u.s.t[0].data; /* spec 0 is the embedding */
        CHECK(memcmp(tr + m->D, emb + (size_t)8 * m->D, sizeof(float) * m->D) == 0);
        /* the last slot is the final norm's output: logits = it · lm_headᵀ */
        const float *head = m->lm_head.data; /* f32 in this synthetic model */
        const float *xn = tr + (size_t)(m->L + 1) * 3 * m->D + 2 * m->D;
        double l7 = 0;
        for (int d = 0; d < m->D; d++) l7 += (double)xn[d] * head[(size_t)7 * m->D + d];
        CHECK_NEAR(lg[2 * m->V + 7], l7, 1e-5);
        int32_t bad = 50, neg = -1;
        CHECK_EQ_INT(tm_ref_forward(u.r, &bad, 1, 3, lg, 0, &err), TM_E_INVALID);
        CHECK(strstr(err.msg, "token 50") != NULL);
        CHECK_EQ_INT(tm_ref_forward(u.r, &neg, 1, 3, lg, 0, &err), TM_E_INVALID);
        CHECK_EQ_INT(tm_ref_forward(u.r, ids, 1, 4, lg, 0, &err), TM_E_INVALID); /* cache holds 3 */
        CHECK(strstr(err.msg, "pos0 = 4") != NULL);
        CHECK_EQ_INT(tm_ref_forward(u.r, ids, 3, 6, lg, 0, &err), TM_E_INVALID);
        CHECK_EQ_INT(tm_ref_forward(u.r, ids, 0, 0, lg, 0, &err), TM_E_INVALID);
        int32_t many[9] = {0};
        CHECK_EQ_INT(tm_ref_forward(u.r, many, 9, 0, NULL, 0, &err), TM_E_LIMIT);
        CHECK_EQ_INT(tm_ref_forward(u.r, many, 8, 0, NULL, 0, &err), TM_OK);
        CHECK_EQ_INT(tm_ref_n_past(u.r), 8);
        CHECK_EQ_INT(argmax_of(lg, m->V) >= 0, 1);
        free(tr);
        free(lg);
    }
    setup_free(&u);
    tm_model *m;
    tm_err err = {0};
    tm_ref *r = NULL;
    CHECK_EQ_INT(model_from(QWEN2, &m, &err), TM_OK);
    CHECK_EQ_INT(tm_ref_init(&r, m, 8, 1, &err), TM_E_INVALID); /* not bound */
    CHECK(r == NULL);
    tm_model_free(m);
}

int main(void)
{
    test_rope();
    test_sliding();
    test_incremental();
    test_quantized();
    test_trace_and_errors();
    return th_done("test_ref");
}
