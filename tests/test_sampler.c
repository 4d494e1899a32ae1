/* tests/test_sampler.c: text/sampler: PRNG stream, parameter checks, greedy,
 * penalties' arithmetic, each filter's effect, empirical distributions
 * against an independent reference (HF-style masks), reproducibility, large
 * vocabularies, stop strings split across pieces in every possible way, and
 * the log-probabilities (tm_logprobs) against a long-double log-softmax. */
#include "harness.h"

#include <stdint.h>

#include "text/sampler.h"

static int sanitizer(void)
{
    return getenv("TM_SANITIZER") != NULL;
}

static tm_sampler *mk(float temp, int top_k, float top_p, float min_p, uint64_t seed, int32_t V)
{
    tm_sampler_params p;
    tm_sampler_params_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    tm_err err = {0};
    tm_sampler *s = tm_sampler_new(&p, V, &err);
    CHECKF(s != NULL, "%s", err.msg);
    return s;
}

/* ---- PRNG ---- */

static void test_rng(void)
{
    /* golden values from an independent implementation (Python big ints) of
     * splitmix64 seeding + xoshiro256** */
    static const uint64_t g0[4] = {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull,
                                   0x6aa594f1262d2d2cull};
    static const uint64_t g42[4] = {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull, 0xae17533239e499a1ull,
                                    0xecb8ad4703b360a1ull};
    tm_rng r;
    tm_rng_seed(&r, 0);
    CHECK(r.s[0] == 0xe220a8397b1dcdafull);   /* splitmix64(0), the published first value */
    for (int i = 0; i < 4; i++) CHECK(tm_rng_next(&r) == g0[i]);
    tm_rng_seed(&r, 42);
    for (int i = 0; i < 4; i++) CHECK(tm_rng_next(&r) == g42[i]);
    /* uniform in [0, 1), mean ~ 1/2 */
    double sum = 0, lo = 1, hi = 0;
    for (int i = 0; i < 100000; i++) {
        double u = tm_rng_uniform(&r);
        sum += u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    CHECK(lo >= 0 && hi < 1);
    CHECK_NEAR(sum / 100000, 0.5, 5 * sqrt(1.0 / 12 / 100000));
}

/* ---- parameters ---- */

static void test_params(void)
{
    tm_sampler_params p;
    tm_err err = {0};
    tm_sampler_params_default(&p);
    CHECK_EQ_INT(tm_sampler_params_check(&p, &err), TM_OK);
    CHECK(p.temperature == 1.0f && p.top_p == 1.0f && p.repetition_penalty == 1.0f && p.top_k == 0);
    struct { const char *field; float *f; float bad; } cases[] = {
        {"temperature", &p.temperature, -0.5f},     {"temperature", &p.temperature, NAN},
        {"top_p", &p.top_p, 0.0f},                  {"top_p", &p.top_p, 1.5f},
        {"min_p", &p.min_p, -0.1f},                 {"min_p", &p.min_p, 2.0f},
        {"repetition_penalty", &p.repetition_penalty, 0.0f},
        {"repetition_penalty", &p.repetition_penalty, INFINITY},
        {"presence_penalty", &p.presence_penalty, 2.5f},
        {"frequency_penalty", &p.frequency_penalty, -3.0f},
        {"frequency_penalty", &p.frequency_penalty, NAN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tm_sampler_params_default(&p);
        *cases[i].f = cases[i].bad;
        tm_err_clear(&err);
        CHECK_EQ_INT(tm_sampler_params_check(&p, &err), TM_E_INVALID);
        CHECKF(strstr(err.msg, cases[i].field) != NULL, "%s", err.msg);
        CHECK(tm_sampler_new(&p, 10, &err) == NULL);
    }
    tm_sampler_params_default(&p);
    CHECK(tm_sampler_new(&p, 0, &err) == NULL);
    CHECK(strstr(err.msg, "vocabulary") != NULL);
    CHECK(tm_sampler_new(&p, (1 << 24) + 1, &err) == NULL);
    CHECK(tm_sampler_new(NULL, 10, &err) == NULL);
    /* top_k < 0 means off */
    p.top_k = -1;
    tm_sampler *s = tm_sampler_new(&p, 10, &err);
    CHECK(s != NULL);
    CHECK_EQ_INT(tm_sampler_accept(s, 10), TM_E_INVALID);
    CHECK_EQ_INT(tm_sampler_accept(s, -1), TM_E_INVALID);
    int32_t bad[2] = {3, 11};
    CHECK_EQ_INT(tm_sampler_accept_prompt(s, bad, 2), TM_E_INVALID);
    tm_sampler_free(s);
    tm_sampler_free(NULL);
}

/* ---- greedy ---- */

static void test_greedy(void)
{
    tm_sampler *s = mk(0.0f, 0, 1.0f, 0.0f, 1, 6);
    float l[6] = {0.5f, 3.0f, -1.0f, 2.9f, 3.0f, 1.0f};
    CHECK_EQ_INT(tm_sampler_sample(s, l), 1);          /* tie 1 / 4: lower id */
    float l2[6] = {NAN, -INFINITY, -5.0f, NAN, -4.0f, -INFINITY};
    CHECK_EQ_INT(tm_sampler_sample(s, l2), 4);
    float l3[6] = {NAN, -INFINITY, -INFINITY, NAN, -INFINITY, -INFINITY};
    CHECK_EQ_INT(tm_sampler_sample(s, l3), -1);
    tm_sampler_free(s);
    /* top_k = 1 is greedy at any temperature */
    s = mk(5.0f, 1, 1.0f, 0.0f, 1, 6);
    for (int i = 0; i < 50; i++) {
        float l4[6] = {0.5f, 1.0f, 0.9f, 0.99f, -1.0f, 0.0f};
        CHECK_EQ_INT(tm_sampler_sample(s, l4), 1);
    }
    tm_sampler_free(s);
    /* a +inf logit takes all the mass; NaN / -inf are never drawn */
    s = mk(1.0f, 0, 1.0f, 0.0f, 3, 4);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        float a[4] = {1.0f, INFINITY, 2.0f, NAN};
        bad += tm_sampler_sample(s, a) != 1;
        float b[4] = {NAN, -INFINITY, 0.0f, NAN};
        bad += tm_sampler_sample(s, b) != 2;
    }
    CHECK_EQ_INT(bad, 0);
    tm_sampler_free(s);
    /* the blocked argmax (blocks of 256 in lanes of 16) against the plain scan, on vocabularies of odd
       sizes, a block's tail included: random values with ties, NaN, -inf and +inf sprinkled in, the
       largest put in the last partial block, in a block's last lane, or nowhere (all NaN / -inf) */
    static const int32_t sizes[] = {1, 15, 16, 63, 64, 65, 255, 256, 257, 511, 1000, 4097, 151936};
    uint64_t r = 0x9e3779b97f4a7c15ull;
    int wrong = 0, cases = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int32_t V = sizes[si];
        float *lv = malloc(sizeof(float) * (size_t)V);
        tm_sampler *g = mk(0.0f, 0, 1.0f, 0.0f, 1, V);
        for (int t = 0; t < 24 && lv && g; t++) {
            for (int32_t i = 0; i < V; i++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                int k = (int)(r % 64);
                lv[i] = k == 0 ? NAN : k == 1 ? -INFINITY : (float)(int)(r >> 40 & 255) / 8.0f - 16.0f; /* ties */
            }
            if (t % 6 == 1) lv[V - 1] = 1e30f;                            /* the tail's last */
            if (t % 6 == 2 && V >= 256) lv[255] = INFINITY, lv[V / 2] = INFINITY; /* +inf twice: the first */
            if (t % 6 == 3)
                for (int32_t i = 0; i < V; i++) lv[i] = i % 3 ? -INFINITY : NAN; /* nothing drawable */
            if (t % 6 == 4)
                for (int32_t i = 0; i < V; i++) lv[i] = -1e30f; /* all equal: index 0 */
            int32_t want = -1;
            for (int32_t i = 0; i < V; i++)
                if (lv[i] > -INFINITY && (want < 0 || lv[i] > lv[want])) want = i;
            wrong += tm_sampler_sample(g, lv) != want;
            cases++;
        }
        tm_sampler_free(g);
        free(lv);
    }
    CHECKF(wrong == 0, "blocked argmax: %d of %d cases differ from the plain scan", wrong, cases);
}

/* ---- penalties ---- */

static void test_penalties(void)
{
    tm_sampler_params p;
    tm_sampler_params_default(&p);
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    tm_sampler *s = tm_sampler_new(&p, 6, NULL);
    const int32_t prompt[3] = {0, 1, 0};
    CHECK_EQ_INT(tm_sampler_accept_prompt(s, prompt, 3), TM_OK);
    CHECK_EQ_INT(tm_sampler_accept(s, 3), TM_OK);
    CHECK_EQ_INT(tm_sampler_accept(s, 1), TM_OK);
    CHECK_EQ_INT(tm_sampler_accept(s, 3), TM_OK);
    CHECK_EQ_INT(tm_sampler_accept(s, 5), TM_OK);
    float l[6] = {2.0f, -2.0f, 0.0f, 1.0f, 3.0f, -1.0f};
    tm_sampler_penalize(s, l);
    CHECK(l[0] == 1.0f);                     /* prompt only: 2 / 2, no presence/frequency */
    CHECK(l[1] == -4.75f);                   /* -2 * 2 - 0.5 - 0.25 * 1 */
    CHECK(l[2] == 0.0f);                     /* unseen */
    CHECK(l[3] == -0.5f);                    /* 1 / 2 - 0.5 - 0.25 * 2 */
    CHECK(l[4] == 3.0f);                     /* unseen */
    CHECK(l[5] == -2.75f);                   /* -1 * 2 - 0.5 - 0.25 */
    /* reset forgets the history */
    tm_sampler_reset(s);
    float m[6] = {2.0f, -2.0f, 0.0f, 1.0f, 3.0f, -1.0f};
    tm_sampler_penalize(s, m);
    CHECK(m[0] == 2.0f && m[1] == -2.0f && m[3] == 1.0f && m[5] == -1.0f);
    tm_sampler_free(s);

    /* negative presence / frequency encourage repeats (OpenAI allows [-2, 2]) */
    tm_sampler_params_default(&p);
    p.presence_penalty = -1.0f;
    p.frequency_penalty = -0.5f;
    s = tm_sampler_new(&p, 3, NULL);
    tm_sampler_accept(s, 2);
    tm_sampler_accept(s, 2);
    float n[3] = {0.0f, 0.0f, 0.0f};
    tm_sampler_penalize(s, n);
    CHECK(n[2] == 2.0f && n[0] == 0.0f);
    tm_sampler_free(s);

    /* penalties apply before greedy: 5 / 1.1 < 4.9 */
    tm_sampler_params_default(&p);
    p.temperature = 0;
    p.repetition_penalty = 1.1f;
    s = tm_sampler_new(&p, 2, NULL);
    float g[2] = {5.0f, 4.9f};
    CHECK_EQ_INT(tm_sampler_sample(s, g), 0);
    tm_sampler_accept(s, 0);
    float g2[2] = {5.0f, 4.9f};
    CHECK_EQ_INT(tm_sampler_sample(s, g2), 1);
    tm_sampler_free(s);

    /* many distinct tokens (history table growth), counted exactly */
    tm_sampler_params_default(&p);
    p.frequency_penalty = 0.125f;
    s = tm_sampler_new(&p, 5000, NULL);
    for (int r = 0; r < 3; r++)
        for (int32_t i = 0; i < 5000; i += 1 + r) CHECK_EQ_INT(tm_sampler_accept(s, i), TM_OK);
    float *big = calloc(5000, sizeof(float));
    tm_sampler_penalize(s, big);
    int bad = 0;
    for (int32_t i = 0; i < 5000; i++) {
        int c = 1 + (i % 2 == 0) + (i % 3 == 0);
        bad += big[i] != -0.125f * (float)c;
    }
    CHECK_EQ_INT(bad, 0);
    free(big);
    tm_sampler_free(s);
}

/* ---- the reference distribution: HF warpers written independently ---- */

/* probs [V] after temperature, top-k, top-p, min-p, each as HF does it:
 * a mask of tokens set to -inf, then a softmax */
static void reference_probs(const float *logits, int V, float T, int top_k, float top_p, float min_p, double *probs)
{
    double *l = malloc(sizeof(double) * V);
    int *order = malloc(sizeof(int) * V);
    for (int i = 0; i < V; i++) {
        l[i] = (double)logits[i] / T;
        order[i] = i;
    }
    /* order: descending logit, ascending id on ties (insertion sort, small V) */
    for (int i = 1; i < V; i++)
        for (int j = i; j > 0 && (l[order[j]] > l[order[j - 1]] ||
                                  (l[order[j]] == l[order[j - 1]] && order[j] < order[j - 1])); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    if (top_k > 0 && top_k < V)
        for (int r = top_k; r < V; r++) l[order[r]] = -INFINITY;
    if (top_p < 1.0f) {
        double mx = l[order[0]], z = 0;
        for (int i = 0; i < V; i++) z += exp(l[i] - mx);
        /* ascending cumulative sum; drop tokens whose cumsum <= 1 - top_p, keep the top one */
        double cum = 0;
        for (int r = V - 1; r >= 1; r--) {
            cum += exp(l[order[r]] - mx) / z;
            if (cum <= 1.0 - top_p) l[order[r]] = -INFINITY;
        }
    }
    if (min_p > 0) {
        double mx = l[order[0]];
        for (int i = 0; i < V; i++)
            if (exp(l[i] - mx) < min_p) l[i] = -INFINITY;   /* p < min_p * p_max */
    }
    double mx = l[order[0]], z = 0;
    for (int i = 0; i < V; i++) z += exp(l[i] - mx);
    for (int i = 0; i < V; i++) probs[i] = exp(l[i] - mx) / z;
    free(l);
    free(order);
}

static void check_distribution(const char *what, const float *logits, int V, float T, int top_k, float top_p,
                               float min_p, int n)
{
    double probs[64];
    int count[64] = {0};
    reference_probs(logits, V, T, top_k, top_p, min_p, probs);
    tm_sampler *s = mk(T, top_k, top_p, min_p, 12345, V);
    float *l = malloc(sizeof(float) * V);
    for (int i = 0; i < n; i++) {
        memcpy(l, logits, sizeof(float) * V);
        int32_t id = tm_sampler_sample(s, l);
        if (id >= 0 && id < V) count[id]++;
    }
    double chi2 = 0;
    int df = -1, bad = 0;
    for (int i = 0; i < V; i++) {
        double e = n * probs[i];
        if (probs[i] == 0) {
            bad += count[i] != 0;
            continue;
        }
        df++;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        bad += fabs(count[i] - e) > 5 * sqrt(e * (1 - probs[i])) + 1;
    }
    CHECKF(bad == 0, "%s: %d buckets off (chi2 %.1f)", what, bad, chi2);
    /* chi-square, 99.99th percentile is < 4 * (df + 6) for small df */
    CHECKF(chi2 < 4.0 * (df + 6), "%s: chi2 %.1f with %d degrees of freedom", what, chi2, df);
    free(l);
    tm_sampler_free(s);
}

static void test_distributions(void)
{
    const float l[8] = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};
    const int n = 40000;
    check_distribution("T=1", l, 8, 1.0f, 0, 1.0f, 0.0f, n);
    check_distribution("T=0.5", l, 8, 0.5f, 0, 1.0f, 0.0f, n);
    check_distribution("T=2 top_k=3", l, 8, 2.0f, 3, 1.0f, 0.0f, n);
    check_distribution("top_p=0.7", l, 8, 1.0f, 0, 0.7f, 0.0f, n);
    check_distribution("min_p=0.15", l, 8, 1.0f, 0, 1.0f, 0.15f, n);
    check_distribution("T=1.5 top_k=6 top_p=0.9 min_p=0.05", l, 8, 1.5f, 6, 0.9f, 0.05f, n);
    check_distribution("T=0.8 top_k=5 min_p=0.2", l, 8, 0.8f, 5, 1.0f, 0.2f, n);
    check_distribution("T=3 top_p=0.5", l, 8, 3.0f, 0, 0.5f, 0.0f, n);
    check_distribution("T=3 top_k=7 top_p=0.5", l, 8, 3.0f, 7, 0.5f, 0.0f, n);

    /* 64 tokens with many tied logits (ties break by lower id at every cut) */
    float r[64];
    tm_rng g;
    tm_rng_seed(&g, 2024);
    for (int i = 0; i < 64; i++) r[i] = (float)floor(tm_rng_uniform(&g) * 12.0) * 0.25f;
    check_distribution("V=64 T=1.3 top_p=0.8", r, 64, 1.3f, 0, 0.8f, 0.0f, n);
    check_distribution("V=64 top_k=20 top_p=0.9", r, 64, 1.0f, 20, 0.9f, 0.0f, n);
    check_distribution("V=64 T=0.7 top_k=30 top_p=0.95 min_p=0.1", r, 64, 0.7f, 30, 0.95f, 0.1f, n);
    check_distribution("V=64 T=2 top_p=0.6 min_p=0.3", r, 64, 2.0f, 0, 0.6f, 0.3f, n);
    check_distribution("V=64 top_k=13", r, 64, 1.0f, 13, 1.0f, 0.0f, n);

    /* each filter's effect on hand-made logits, exactly */
    double p[8];
    reference_probs(l, 8, 1.0f, 3, 1.0f, 0.0f, p);
    CHECK(p[2] > 0 && p[3] == 0);
    /* p = softmax(l): 0.395, 0.240, 0.145, ... top_p 0.6 keeps 2 tokens (0.395 + 0.240 >= 0.6) */
    reference_probs(l, 8, 1.0f, 0, 0.6f, 0.0f, p);
    CHECK(p[1] > 0 && p[2] == 0);
    /* min_p 0.5: exp(-0.5) = 0.61 >= 0.5 kept, exp(-1) = 0.37 not */
    reference_probs(l, 8, 1.0f, 0, 1.0f, 0.5f, p);
    CHECK(p[1] > 0 && p[2] == 0);
    tm_sampler *s = mk(1.0f, 0, 1.0f, 0.5f, 9, 8);
    int seen[8] = {0};
    for (int i = 0; i < 2000; i++) {
        float x[8];
        memcpy(x, l, sizeof x);
        seen[tm_sampler_sample(s, x)]++;
    }
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] + seen[3] + seen[4] + seen[5] + seen[6] + seen[7] == 0);
    tm_sampler_free(s);
}

/* ---- reproducibility ---- */

static void test_reproducible(void)
{
    const int V = 50, n = 500;
    float base[50];
    for (int i = 0; i < V; i++) base[i] = (float)sin(i * 1.7) * 2.0f;
    int32_t a[500], b[500], c[500];
    tm_sampler *s1 = mk(0.9f, 20, 0.95f, 0.01f, 777, V), *s2 = mk(0.9f, 20, 0.95f, 0.01f, 777, V),
               *s3 = mk(0.9f, 20, 0.95f, 0.01f, 778, V);
    for (int i = 0; i < n; i++) {
        float x[50];
        memcpy(x, base, sizeof x);
        a[i] = tm_sampler_sample(s1, x);
        memcpy(x, base, sizeof x);
        b[i] = tm_sampler_sample(s2, x);
        memcpy(x, base, sizeof x);
        c[i] = tm_sampler_sample(s3, x);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    tm_sampler_reset(s1);
    int same = 1;
    for (int i = 0; i < n; i++) {
        float x[50];
        memcpy(x, base, sizeof x);
        same &= tm_sampler_sample(s1, x) == a[i];
    }
    CHECK(same);
    tm_sampler_free(s1);
    tm_sampler_free(s2);
    tm_sampler_free(s3);
}

/* ---- large vocabularies: partial selection and the nucleus threshold ---- */

static int cmp_desc(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return a > b ? -1 : a < b ? 1 : 0;
}

static void test_large_vocab(void)
{
    const int V = 150000, n = sanitizer() ? 30 : 200;
    float *base = malloc(sizeof(float) * V), *x = malloc(sizeof(float) * V), *sorted = malloc(sizeof(float) * V);
    uint64_t st = 99;
    for (int i = 0; i < V; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        base[i] = (float)((double)(st >> 11) / 9007199254740992.0 * 12.0 - 6.0);
    }
    memcpy(sorted, base, sizeof(float) * V);
    qsort(sorted, V, sizeof(float), cmp_desc);

    /* top-k 40: every draw is among the 40 largest logits, and not always the top one */
    tm_sampler *s = mk(0.8f, 40, 1.0f, 0.0f, 5, V);
    int bad = 0, distinct_top = 0;
    for (int i = 0; i < n; i++) {
        memcpy(x, base, sizeof(float) * V);
        int32_t id = tm_sampler_sample(s, x);
        bad += id < 0 || base[id] < sorted[39];
        distinct_top += id >= 0 && base[id] < sorted[0];
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(distinct_top > 0);
    tm_sampler_free(s);

    /* top-p 0.5 alone: every draw lies in the nucleus computed by a full sort */
    double z = 0, cum = 0;
    for (int i = 0; i < V; i++) z += exp((double)sorted[i] - sorted[0]);
    int keep = 0;
    while (cum < 0.5 * z) cum += exp((double)sorted[keep++] - sorted[0]);
    s = mk(1.0f, 0, 0.5f, 0.0f, 6, V);
    bad = 0;
    for (int i = 0; i < n; i++) {
        memcpy(x, base, sizeof(float) * V);
        int32_t id = tm_sampler_sample(s, x);
        bad += id < 0 || base[id] < sorted[keep - 1];
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(keep > 1000);   /* a wide nucleus: the threshold path, not a trivial one */
    tm_sampler_free(s);

    /* ties in the nucleus: one token with w = 1 and 20000 ties with w = 5e-4
     * (mass 10): the nucleus of 0.9 is token 0 plus the lowest-id ties */
    const int V2 = 20001;
    float *f = malloc(sizeof(float) * V2);
    double wt = exp(-7.6);
    double zt = 1 + 20000 * wt, need = 0.9 * zt - 1;
    int last = (int)ceil(need / wt - 1e-9);   /* ties kept: ids 1 .. last */
    s = mk(1.0f, 0, 0.9f, 0.0f, 7, V2);
    bad = 0;
    int maxid = 0, m2 = sanitizer() ? 50 : 300;
    for (int i = 0; i < m2; i++) {
        f[0] = 0.0f;
        for (int j = 1; j < V2; j++) f[j] = -7.6f;
        int32_t id = tm_sampler_sample(s, f);
        bad += id < 0 || id > last + 1;
        maxid = id > maxid ? id : maxid;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(maxid > last / 2);
    tm_sampler_free(s);

    /* no filter and min-p alone on the full vocabulary */
    s = mk(1.0f, 0, 1.0f, 0.3f, 8, V);
    bad = 0;
    for (int i = 0; i < n; i++) {
        memcpy(x, base, sizeof(float) * V);
        int32_t id = tm_sampler_sample(s, x);
        bad += id < 0 || expf(base[id] - sorted[0]) < 0.3f;
    }
    CHECK_EQ_INT(bad, 0);
    tm_sampler_free(s);
    s = mk(1.0f, 0, 1.0f, 0.0f, 8, V);
    double mean = 0;
    for (int i = 0; i < n; i++) {
        memcpy(x, base, sizeof(float) * V);
        int32_t id = tm_sampler_sample(s, x);
        mean += id >= 0 ? base[id] : -100;
    }
    CHECK(mean / n > sorted[V / 10]);   /* draws favour large logits */
    tm_sampler_free(s);
    free(f);
    free(base);
    free(x);
    free(sorted);
}

/* ---- stop strings ---- */

typedef struct feed_result {
    char out[256];
    size_t n;
    int stopped, which;
} feed_result;

/* feed `text` cut at the positions in `cuts` (bitmask over len-1 gaps) */
static feed_result feed_split(tm_stop *st, const char *text, unsigned cuts, int flush)
{
    feed_result r = {.which = -1};
    size_t len = strlen(text), start = 0;
    tm_stop_reset(st);
    for (size_t i = 1; i <= len; i++) {
        if (i < len && !(cuts & (1u << (i - 1)))) continue;
        const char *e;
        size_t en;
        int rc = tm_stop_feed(st, text + start, i - start, &e, &en);
        if (rc < 0) return r;
        memcpy(r.out + r.n, e, en);
        r.n += en;
        start = i;
        if (rc == 1) {
            r.stopped = 1;
            break;
        }
    }
    if (flush) {
        const char *e;
        size_t en;
        tm_stop_flush(st, &e, &en);
        memcpy(r.out + r.n, e, en);
        r.n += en;
    }
    r.out[r.n] = 0;
    r.which = tm_stop_matched(st);
    return r;
}

static void check_all_splits(tm_stop *st, const char *text, const char *expect, int stopped, int which)
{
    size_t len = strlen(text);
    unsigned ncuts = 1u << (len - 1);
    int bad = 0;
    for (unsigned c = 0; c < ncuts; c++) {
        feed_result r = feed_split(st, text, c, 1);
        if (strcmp(r.out, expect) != 0 || r.stopped != stopped || r.which != which) {
            if (!bad)
                fprintf(stderr, "  split %#x of \"%s\": got \"%s\" stopped %d which %d\n", c, text, r.out,
                        r.stopped, r.which);
            bad++;
        }
    }
    CHECKF(bad == 0, "\"%s\": %d of %u splits wrong", text, bad, ncuts);
}

static void test_stop_strings(void)
{
    tm_err err = {0};
    const char *stops[] = {"stop", "\nUser:", "。\n"};
    tm_stop *st = tm_stop_new(NULL, 0, stops, 3, &err);
    CHECKF(st != NULL, "%s", err.msg);
    check_all_splits(st, "hello stop world", "hello ", 1, 0);
    check_all_splits(st, "a sto-p stor\nUse", "a sto-p stor\nUse", 0, -1);   /* near misses */
    check_all_splits(st, "ok.\nUser: hi", "ok.", 1, 1);
    check_all_splits(st, "好。\n再见", "好", 1, 2);                            /* split inside UTF-8 */
    check_all_splits(st, "ststop", "st", 1, 0);                               /* overlapping prefix */
    check_all_splits(st, "stop", "", 1, 0);
    check_all_splits(st, "x\nUsestop\nUser:", "x\nUse", 1, 0);

    /* what is held back, step by step */
    const char *e;
    size_t n;
    tm_stop_reset(st);
    CHECK_EQ_INT(tm_stop_feed(st, "I will s", 8, &e, &n), 0);
    CHECK(n == 7 && memcmp(e, "I will ", 7) == 0);            /* "s" may start "stop" */
    CHECK_EQ_INT(tm_stop_feed(st, "to", 2, &e, &n), 0);
    CHECK_EQ_INT(n, 0);                                        /* "sto" held */
    CHECK_EQ_INT(tm_stop_feed(st, "ry", 2, &e, &n), 0);
    CHECK(n == 5 && memcmp(e, "story", 5) == 0);
    CHECK_EQ_INT(tm_stop_feed(st, " st", 3, &e, &n), 0);
    CHECK(n == 1 && e[0] == ' ');
    CHECK_EQ_INT(tm_stop_feed(st, "op now", 6, &e, &n), 1);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(tm_stop_matched(st), 0);
    CHECK_EQ_INT(tm_stop_feed(st, "more", 4, &e, &n), 1);     /* after a stop: nothing */
    CHECK_EQ_INT(n, 0);
    tm_stop_flush(st, &e, &n);
    CHECK_EQ_INT(n, 0);
    /* flush emits what was held */
    tm_stop_reset(st);
    CHECK_EQ_INT(tm_stop_feed(st, "end\nUs", 6, &e, &n), 0);
    CHECK(n == 3);
    tm_stop_flush(st, &e, &n);
    CHECK(n == 3 && memcmp(e, "\nUs", 3) == 0);
    /* an empty piece is harmless */
    tm_stop_reset(st);
    CHECK_EQ_INT(tm_stop_feed(st, "", 0, &e, &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(tm_stop_feed(st, NULL, 0, &e, &n), 0);
    /* a long piece with the stop near its end */
    char *lng = malloc(10001);
    memset(lng, 'a', 10000);
    memcpy(lng + 9990, "stop", 4);
    lng[10000] = 0;
    CHECK_EQ_INT(tm_stop_feed(st, lng, 10000, &e, &n), 1);
    CHECK_EQ_INT(n, 9990);
    free(lng);
    tm_stop_free(st);

    /* first completed wins: "bc" completes before "abcd" when "d" comes later */
    const char *ov[] = {"abcd", "bc"};
    st = tm_stop_new(NULL, 0, ov, 2, NULL);
    feed_result r = feed_split(st, "xabcd", 0xf /* x|a|b|c|d */, 0);
    CHECK_EQ_STR(r.out, "xa");
    CHECK_EQ_INT(r.which, 1);
    r = feed_split(st, "xabcd", 0 /* one piece: both complete, earliest start */, 0);
    CHECK_EQ_STR(r.out, "x");
    CHECK_EQ_INT(r.which, 0);
    tm_stop_free(st);

    /* EOS ids, and no stop strings: pieces pass straight through */
    const int32_t eos[3] = {2, 128001, 128009};
    st = tm_stop_new(eos, 3, NULL, 0, &err);
    CHECK(st && tm_stop_is_eos(st, 128009) && tm_stop_is_eos(st, 2) && !tm_stop_is_eos(st, 3));
    CHECK_EQ_INT(tm_stop_feed(st, "stop", 4, &e, &n), 0);
    CHECK(n == 4 && memcmp(e, "stop", 4) == 0);
    tm_stop_free(st);

    /* bad input */
    const char *empty[] = {"a", ""};
    CHECK(tm_stop_new(NULL, 0, empty, 2, &err) == NULL);
    CHECK(strstr(err.msg, "stop[1]") && strstr(err.msg, "empty"));
    const char *nul[] = {NULL};
    CHECK(tm_stop_new(NULL, 0, nul, 1, &err) == NULL);
    char *huge = malloc(TM_STOP_MAX_LEN + 2);
    memset(huge, 'x', TM_STOP_MAX_LEN + 1);
    huge[TM_STOP_MAX_LEN + 1] = 0;
    const char *hs[] = {huge};
    CHECK(tm_stop_new(NULL, 0, hs, 1, &err) == NULL);
    CHECK(strstr(err.msg, "stop[0]") != NULL);
    free(huge);
    const char *many[TM_STOP_MAX_STRINGS + 1];
    for (int i = 0; i <= TM_STOP_MAX_STRINGS; i++) many[i] = "x";
    CHECK(tm_stop_new(NULL, 0, many, TM_STOP_MAX_STRINGS + 1, &err) == NULL);
    const int32_t neg[1] = {-5};
    CHECK(tm_stop_new(neg, 1, NULL, 0, &err) == NULL);
    CHECK(strstr(err.msg, "eos[0]") != NULL);
    CHECK(tm_stop_new(NULL, -1, NULL, 0, &err) == NULL);
}


/* tm_logprobs against a plain long-double log-softmax and a full sort, on random logits with
 * ties, NaN and -inf among them; odd vocabulary sizes */
static int lp_before(const float *l, int32_t a, int32_t b) /* a ranks before b */
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void test_logprobs(void)
{
    tm_rng r;
    tm_rng_seed(&r, 7);
    static const int32_t Vs[] = {1, 2, 3, 19, 20, 21, 257, 5003, 151936};
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
        int32_t V = Vs[vi];
        float *l = malloc(sizeof(float) * (size_t)V);
        int32_t *order = malloc(sizeof(int32_t) * (size_t)V);
        for (int rep = 0; rep < 4; rep++) {
            int32_t n_ok = 0;
            for (int32_t i = 0; i < V; i++) {
                double u = tm_rng_uniform(&r);
                l[i] = rep == 3 ? 2.5f : (float)(tm_rng_uniform(&r) * 40 - 20); /* rep 3: all tied */
                if (rep == 1 && u < 0.3) l[i] = (float)(int)(l[i] / 4);          /* many ties */
                if (rep == 2 && u < 0.1) l[i] = NAN;
                if (rep == 2 && u > 0.9) l[i] = -INFINITY;
                if (l[i] > -INFINITY) order[n_ok++] = i;
            }
            long double m = -INFINITY, sum = 0;
            for (int32_t k = 0; k < n_ok; k++) m = l[order[k]] > m ? l[order[k]] : m;
            for (int32_t k = 0; k < n_ok; k++) sum += expl((long double)l[order[k]] - m);
            long double lse_ref = m + logl(sum);
            /* insertion sort of the drawable ids is too slow at V = 151936: select the top 20 by passes */
            int32_t want = n_ok < TM_LOGPROBS_MAX ? n_ok : TM_LOGPROBS_MAX;
            for (int32_t k = 0; k < want; k++) {
                int32_t best = k;
                for (int32_t j = k + 1; j < n_ok; j++)
                    if (lp_before(l, order[j], order[best])) best = j;
                int32_t t = order[k];
                order[k] = order[best];
                order[best] = t;
            }
            for (int32_t n_top = 0; n_top <= TM_LOGPROBS_MAX + 1; n_top += n_top < 3 ? 1 : 9) {
                int32_t ids[TM_LOGPROBS_MAX];
                float lp[TM_LOGPROBS_MAX];
                double lse;
                int32_t got = tm_logprobs(l, V, n_top, ids, lp, &lse);
                int32_t exp_n = n_top < want ? n_top : want;
                CHECKF(got == exp_n, "V %d rep %d n_top %d: %d of %d", V, rep, n_top, got, exp_n);
                CHECKF(n_ok ? fabsl((long double)lse - lse_ref) <= 1e-7L * (1 + fabsl(lse_ref)) : lse == -INFINITY,
                       "V %d rep %d: lse %.17g, %.17Lg", V, rep, lse, lse_ref);
                for (int32_t k = 0; k < got && k < exp_n; k++) {
                    CHECKF(ids[k] == order[k], "V %d rep %d n_top %d: rank %d id %d, want %d", V, rep, n_top, k, ids[k],
                           order[k]);
                    float want_lp = (float)((long double)l[order[k]] - lse_ref);
                    CHECKF(fabsf(lp[k] - want_lp) <= 1e-6f * (1 + fabsf(want_lp)), "V %d: lp %g, want %g", V, lp[k],
                           want_lp);
                    CHECK(lp[k] <= 0);
                }
                if (n_ok) {
                    double v = tm_logprob_value(l[order[0]], lse);
                    CHECK(fabs(v - (double)((long double)l[order[0]] - lse_ref)) < 1e-6);
                }
            }
            if (rep == 3) { /* V ties: each -log V */
                double lse;
                int32_t id;
                float lp;
                tm_logprobs(l, V, 1, &id, &lp, &lse);
                CHECKF(id == 0 && fabs(lp + log((double)V)) < 1e-5, "ties: id %d lp %g, want %g", id, lp, -log((double)V));
            }
        }
        free(l);
        free(order);
    }
    /* nothing drawable; NaN / -inf ids */
    float z[3] = {NAN, -INFINITY, NAN};
    int32_t ids[4];
    float lp[4];
    double lse;
    CHECK_EQ_INT(tm_logprobs(z, 3, 4, ids, lp, &lse), 0);
    CHECK(lse == -INFINITY && tm_logprob_value(1.0f, lse) == -INFINITY);
    float one[3] = {NAN, 3.0f, -INFINITY};
    CHECK_EQ_INT(tm_logprobs(one, 3, 4, ids, lp, &lse), 1);
    CHECK(ids[0] == 1 && lp[0] == 0.0f && lse == 3.0);
    CHECK(tm_logprob_value(one[0], lse) == -INFINITY && tm_logprob_value(one[2], lse) == -INFINITY);
}

/* ---- the indentation limit (llama.cpp's n_indent) ---- */

/* text fed to a fresh scanner (n_indent n) cut at the gaps in cuts (bitmask over len-1 gaps): what it
 * lets through, and whether it cut */
static size_t indent_split(int n, const char *text, unsigned cuts, char *out, int *cut)
{
    tm_indent in;
    tm_indent_init(&in, n);
    size_t len = strlen(text), start = 0, k = 0;
    for (size_t i = 1; i <= len; i++) {
        if (i < len && !(cuts & (1u << (i - 1)))) continue;
        size_t ok = tm_indent_scan(&in, text + start, i - start);
        memcpy(out + k, text + start, ok);
        k += ok;
        start = i;
    }
    out[k] = 0;
    *cut = in.cut;
    return k;
}

/* every split of text gives expect, cut or not */
static void check_indent(int n, const char *text, const char *expect, int cut)
{
    size_t len = strlen(text);
    int bad = 0;
    for (unsigned c = 0; c < 1u << (len - 1); c++) {
        char out[64];
        int got;
        indent_split(n, text, c, out, &got);
        if (strcmp(out, expect) || got != cut) {
            if (!bad) fprintf(stderr, "  n_indent %d, split %#x of \"%s\": \"%s\" cut %d\n", n, c, text, out, got);
            bad++;
        }
    }
    CHECKF(bad == 0, "n_indent %d, \"%s\": %d splits wrong", n, text, bad);
}

static void test_indent(void)
{
    check_indent(4, "foo\n    bar\n  baz", "foo\n    bar\n  ", 1);   /* the short line's text goes, its indent stays */
    check_indent(4, "x\n\t\t\t\ty\n        z", "x\n\t\t\t\ty\n        z", 0); /* tabs count one each */
    check_indent(3, "a\n \tb", "a\n \t", 1);
    check_indent(2, "a\n \tb", "a\n \tb", 0);
    check_indent(1, "first line", "first line", 0); /* never judged (every split of 2^(len-1): keep it short) */
    check_indent(1, "a\n\nb", "a\n", 1);                           /* a blank line is short (llama.cpp) */
    check_indent(2, "a\n  \n  b", "a\n  \n  b", 0);                /* ... unless its whitespace is enough */
    check_indent(1, "a\r\n\r\nb", "a\r\n", 1);                     /* "\r" is a line's character */
    check_indent(4, "a\n      ", "a\n      ", 0);                  /* the indentation still open: kept */
    check_indent(4, "a\n  ", "a\n  ", 0);
    check_indent(2, "x\n  \xc3\xa9\n\xc3\xa9", "x\n  \xc3\xa9\n", 1);   /* UTF-8: whole characters */
    check_indent(0, "a\nb\n\nc", "a\nb\n\nc", 0);                  /* 0: off */
    /* after a cut nothing passes; an empty piece is harmless */
    tm_indent in;
    tm_indent_init(&in, 2);
    CHECK(tm_indent_scan(&in, "", 0) == 0 && tm_indent_scan(&in, NULL, 0) == 0 && !in.cut);
    CHECK(tm_indent_scan(&in, "a\n b", 4) == 3 && in.cut);
    CHECK(tm_indent_scan(&in, "    more", 8) == 0 && in.cut);
}

int main(void)
{
    test_rng();
    test_params();
    test_greedy();
    test_penalties();
    test_distributions();
    test_reproducible();
    test_large_vocab();
    test_stop_strings();
    test_indent();
    test_logprobs();
    return th_done("test_sampler");
}
