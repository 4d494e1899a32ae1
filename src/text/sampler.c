/* text/sampler.c: penalties, temperature, top-k / top-p / min-p and the PRNG.
 * The order of the steps is specified in text/sampler.h and docs/sampling.md.
 *
 * Nothing is ever sorted (V up to ~150k must stay cheap per token):
 *   top-k (0 < k < V): one pass with a size-k min-heap.
 *   else: weights w = exp((l - max) / T) over V; with top-p, only tokens with
 *         w >= t can be in the nucleus when the mass of {w >= t} already
 *         reaches top_p: a histogram of w by binary exponent gives the largest
 *         such t = 2^-b, so the nucleus and less than one octave more remain.
 *   top-p: a weighted quickselect finds the nucleus (expected linear time).
 *   min-p: a threshold, w >= min_p (the argmax has w = 1 and is always kept).
 *   draw:  a cumulative walk over what is left, in its (deterministic) order.
 * Pre-filtering with min-p before top-p is safe: it only removes tokens that
 * min-p would remove afterwards, and top-p's total is the unfiltered one. */
#include "text/sampler.h"

#include "core/tensor.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCAB ((int32_t)1 << 24)

/* ---- PRNG ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void tm_rng_seed(tm_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t tm_rng_next(tm_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tm_rng_uniform(tm_rng *r)
{
    return (double)(tm_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- the sampler ---- */

/* history: open addressing on id, id == -1 marks an empty slot */
typedef struct hist_entry {
    int32_t id;
    int32_t count;       /* times generated (accept) */
    int32_t in_prompt;   /* seen in the prompt (accept_prompt) */
} hist_entry;

typedef struct cand {
    int32_t id;
    float l;             /* logit (after penalties) */
    float w;             /* exp((l - max) / T) */
} cand;

struct tm_sampler {
    tm_sampler_params p;
    int32_t V;
    tm_rng rng;
    hist_entry *tab;     /* [cap] */
    uint32_t cap, used;  /* cap is a power of two, used <= cap / 2 */
    cand *heap;          /* [k] top-k heap, k = min(top_k, V) */
    cand *all;           /* [V] full-vocabulary scratch, allocated on first use */
};

void tm_sampler_params_default(tm_sampler_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

int tm_sampler_params_check(const tm_sampler_params *p, tm_err *err)
{
    if (!p) return tm_errf(err, TM_E_INVALID, "sampler: no parameters");
    if (!isfinite(p->temperature) || p->temperature < 0)
        return tm_errf(err, TM_E_INVALID, "sampler: temperature = %g is out of range [0, inf)",
                       (double)p->temperature);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return tm_errf(err, TM_E_INVALID, "sampler: top_p = %g is out of range (0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return tm_errf(err, TM_E_INVALID, "sampler: min_p = %g is out of range [0, 1]", (double)p->min_p);
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0)
        return tm_errf(err, TM_E_INVALID, "sampler: repetition_penalty = %g is out of range (0, inf)",
                       (double)p->repetition_penalty);
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
        return tm_errf(err, TM_E_INVALID, "sampler: presence_penalty = %g is out of range [-2, 2]",
                       (double)p->presence_penalty);
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        return tm_errf(err, TM_E_INVALID, "sampler: frequency_penalty = %g is out of range [-2, 2]",
                       (double)p->frequency_penalty);
    return TM_OK;
}

tm_sampler *tm_sampler_new(const tm_sampler_params *p, int32_t V, tm_err *err)
{
    if (tm_sampler_params_check(p, err) != TM_OK) return NULL;
    if (V < 1 || V > MAX_VOCAB) {
        tm_errf(err, TM_E_INVALID, "sampler: vocabulary size %d is out of range [1, 2^24]", (int)V);
        return NULL;
    }
    tm_sampler *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->p = *p;
    s->V = V;
    s->cap = 64;
    s->tab = malloc(s->cap * sizeof *s->tab);
    if (!s->tab) goto nomem;
    if (p->top_k > 0 && p->top_k < V && !(s->heap = malloc((size_t)p->top_k * sizeof *s->heap))) goto nomem;
    tm_sampler_reset(s);
    return s;
nomem:
    tm_sampler_free(s);
    tm_errf(err, TM_E_NOMEM, "sampler: out of memory (V = %d)", (int)V);
    return NULL;
}

void tm_sampler_free(tm_sampler *s)
{
    if (!s) return;
    free(s->tab);
    free(s->heap);
    free(s->all);
    free(s);
}

void tm_sampler_reset(tm_sampler *s)
{
    for (uint32_t i = 0; i < s->cap; i++) s->tab[i].id = -1;
    s->used = 0;
    tm_rng_seed(&s->rng, s->p.seed);
}

static uint32_t hash_id(int32_t id)
{
    return (uint32_t)id * 2654435761u;
}

static int grow(tm_sampler *s)
{
    uint32_t ncap = s->cap * 2;
    hist_entry *t = malloc(ncap * sizeof *t);
    if (!t) return TM_E_NOMEM;
    for (uint32_t i = 0; i < ncap; i++) t[i].id = -1;
    for (uint32_t i = 0; i < s->cap; i++) {
        if (s->tab[i].id < 0) continue;
        uint32_t h = hash_id(s->tab[i].id) & (ncap - 1);
        while (t[h].id >= 0) h = (h + 1) & (ncap - 1);
        t[h] = s->tab[i];
    }
    free(s->tab);
    s->tab = t;
    s->cap = ncap;
    return TM_OK;
}

/* the entry of id, created (zeroed) if absent; NULL on no memory */
static hist_entry *hist_get(tm_sampler *s, int32_t id)
{
    if (2 * (s->used + 1) > s->cap && grow(s) != TM_OK) return NULL;
    uint32_t h = hash_id(id) & (s->cap - 1);
    while (s->tab[h].id >= 0 && s->tab[h].id != id) h = (h + 1) & (s->cap - 1);
    if (s->tab[h].id < 0) {
        s->tab[h] = (hist_entry){.id = id};
        s->used++;
    }
    return &s->tab[h];
}

int tm_sampler_accept_prompt(tm_sampler *s, const int32_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->V)
            return TM_E_INVALID;
        hist_entry *e = hist_get(s, ids[i]);
        if (!e) return TM_E_NOMEM;
        e->in_prompt = 1;
    }
    return TM_OK;
}

int tm_sampler_accept(tm_sampler *s, int32_t id)
{
    if (id < 0 || id >= s->V) return TM_E_INVALID;
    hist_entry *e = hist_get(s, id);
    if (!e) return TM_E_NOMEM;
    if (e->count < INT32_MAX) e->count++;
    return TM_OK;
}

void tm_sampler_penalize(const tm_sampler *s, float *logits)
{
    const float rp = s->p.repetition_penalty, pres = s->p.presence_penalty, freq = s->p.frequency_penalty;
    if (rp == 1.0f && pres == 0.0f && freq == 0.0f) return;
    for (uint32_t i = 0; i < s->cap; i++) {
        const hist_entry *e = &s->tab[i];
        if (e->id < 0) continue;
        float l = logits[e->id];
        if (rp != 1.0f) l = l > 0 ? l / rp : l * rp;
        if (e->count > 0) l -= pres + freq * (float)e->count;
        logits[e->id] = l;
    }
}

/* a before b in the candidate order: larger logit, then lower id */
static int better(const cand *a, const cand *b)
{
    return a->l > b->l || (a->l == b->l && a->id < b->id);
}

/* heap[0] is the worst of the k kept */
static void sift_down(cand *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && better(&h[c], &h[c + 1])) c++;
        if (!better(&h[i], &h[c])) return;
        cand t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* top-k by one pass over logits; returns how many (<= k) are finite */
static int32_t select_top_k(const float *logits, int32_t V, cand *h, int32_t k)
{
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++) {
        float l = logits[i];
        if (!(l > -INFINITY)) continue;   /* -inf and NaN */
        cand c = {i, l, 0};
        if (n < k) {
            /* sift up */
            int32_t j = n++;
            h[j] = c;
            while (j > 0 && better(&h[(j - 1) / 2], &h[j])) {
                cand t = h[j];
                h[j] = h[(j - 1) / 2];
                h[(j - 1) / 2] = t;
                j = (j - 1) / 2;
            }
        } else if (better(&c, &h[0])) {
            h[0] = c;
            sift_down(h, n, 0);
        }
    }
    return n;
}

static void swap_cand(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* top-p without sorting: reorder c [n] so that c[0..m) is the nucleus, the
 * shortest prefix in the candidate order (larger logit, then lower id: a
 * strict order) whose mass reaches target, and return m >= 1. A weighted
 * quickselect, expected O(n); the nucleus comes out unsorted.
 * Invariant: mass(c[0..lo)) < target (those are kept) and m <= hi. */
static int32_t nucleus_select(cand *c, int32_t n, double target)
{
    int32_t lo = 0, hi = n;
    double need = target;   /* target - mass(c[0..lo)) */
    while (hi - lo > 1) {
        /* pivot: median of three, moved to the end */
        int32_t a = lo, b = lo + (hi - lo) / 2, z = hi - 1;
        if (better(&c[b], &c[a])) swap_cand(&c[a], &c[b]);
        if (better(&c[z], &c[b])) swap_cand(&c[b], &c[z]);
        if (better(&c[b], &c[a])) swap_cand(&c[a], &c[b]);
        swap_cand(&c[b], &c[z]);
        const cand pv = c[z];
        int32_t i = lo;
        double m = 0;
        for (int32_t j = lo; j < z; j++)
            if (better(&c[j], &pv)) {
                m += c[j].w;
                swap_cand(&c[i++], &c[j]);
            }
        swap_cand(&c[i], &c[z]);   /* [lo, i) better, pivot at i, (i, hi) worse */
        if (m >= need) {
            hi = i;
        } else if (m + pv.w >= need) {
            return i + 1;
        } else {
            need -= m + pv.w;
            lo = i + 1;
        }
    }
    /* hi == lo only if rounding made the running sums disagree: keep [0, hi) */
    return hi > 0 ? hi : 1;
}

/* draw from c [n] by weight */
static int32_t draw(tm_sampler *s, const cand *c, int32_t n)
{
    double total = 0;
    for (int32_t i = 0; i < n; i++) total += c[i].w;
    double u = tm_rng_uniform(&s->rng) * total, acc = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].w > 0) last = i;
        acc += c[i].w;
        if (u < acc) return c[i].id;
    }
    return c[last].id;   /* u * total rounded up to total */
}

/* w = exp((l - lmax) / T) of every token with w > 0 into all[]; returns the
 * count, *Z the sum */
static int32_t weigh_all(tm_sampler *s, const float *logits, float lmax, float invT, double *Z)
{
    int32_t n = 0;
    double z = 0;
    for (int32_t i = 0; i < s->V; i++) {
        float l = logits[i];
        if (!(l > -INFINITY)) continue;
        float w = expf((l - lmax) * invT);
        if (w > 0) {
            s->all[n++] = (cand){i, l, w};
            z += w;
        }
    }
    *Z = z;
    return n;
}

/* keep the c [n] with w >= t (in place, order kept); returns the new count */
static int32_t keep_at_least(cand *c, int32_t n, float t)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (c[i].w >= t) c[m++] = c[i];
    return m;
}

/* the largest power-of-two threshold t = 2^-b such that the tokens with
 * w >= t (a prefix of the sorted order) carry at least `target` mass; one
 * pass with a histogram of w by binary exponent (w in (0, 1]) */
static float nucleus_threshold(const cand *c, int32_t n, double target)
{
    double mass[64] = {0};
    for (int32_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &c[i].w, 4);
        int b = 127 - (int)(u >> 23);          /* w in [2^-b, 2^-b+1) */
        mass[b < 0 ? 0 : b > 63 ? 63 : b] += c[i].w;
    }
    double cum = 0;
    for (int b = 0; b < 63; b++) {
        cum += mass[b];
        if (cum >= target) return ldexpf(1.0f, -b);
    }
    return 0.0f;
}

int tm_sampler_is_greedy(const tm_sampler *s)
{
    const tm_sampler_params *p = &s->p;
    return (p->temperature <= 0 || p->top_k == 1) && p->repetition_penalty == 1.0f && p->presence_penalty == 0 &&
           p->frequency_penalty == 0;
}

int32_t tm_sampler_sample(tm_sampler *s, float *logits)
{
    const tm_sampler_params *p = &s->p;
    const int32_t V = s->V;
    tm_sampler_penalize(s, logits);
    int32_t top = tm_argmax_f32(logits, V);
    if (top < 0) return -1;
    if (p->temperature <= 0 || p->top_k == 1) return top;

    const float lmax = logits[top], invT = 1.0f / p->temperature;
    if (lmax == INFINITY || !isfinite(invT)) return top;   /* +inf logit, or T ~ 0 */
    cand *c;
    int32_t n;
    double total;
    if (p->top_k > 0 && p->top_k < V) {
        c = s->heap;
        n = select_top_k(logits, V, c, p->top_k);
        total = 0;
        for (int32_t i = 0; i < n; i++) total += c[i].w = expf((c[i].l - lmax) * invT);
    } else {
        if (!s->all && !(s->all = malloc((size_t)V * sizeof *s->all))) return top;   /* no memory: greedy */
        c = s->all;
        n = weigh_all(s, logits, lmax, invT, &total);
        /* cheap pre-filter: only w >= t can be in the nucleus (or pass min-p) */
        float t = p->top_p < 1.0f ? nucleus_threshold(c, n, (double)p->top_p * total) : 0.0f;
        n = keep_at_least(c, n, t > p->min_p ? t : p->min_p);
    }
    if (n == 0) return top;
    if (p->top_p < 1.0f) n = nucleus_select(c, n, (double)p->top_p * total);
    if (p->min_p > 0) n = keep_at_least(c, n, p->min_p);   /* w >= min_p * w_max, w_max = 1 */
    return n > 0 ? draw(s, c, n) : top;
}

/* ---- log-probabilities ---- */

/* a logit as the log-softmax sees it: +inf as the largest float */
static double lp_logit(float l) { return l == INFINITY ? (double)FLT_MAX : (double)l; }

double tm_logprob_value(float logit, double lse)
{
    if (!(logit > -INFINITY) || !(lse > -INFINITY)) return -INFINITY; /* -inf, NaN, or nothing finite */
    return lp_logit(logit) - lse;
}

int32_t tm_logprobs(const float *logits, int32_t V, int32_t n_top, int32_t *top_ids, float *top_lp, double *lse)
{
    double m = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] > -INFINITY && lp_logit(logits[i]) > m) m = lp_logit(logits[i]);
    double sum = 0;
    if (m > -INFINITY)
        for (int32_t i = 0; i < V; i++)
            if (logits[i] > -INFINITY) sum += expf((float)(lp_logit(logits[i]) - m)); /* float terms, double sum */
    *lse = m > -INFINITY ? m + log(sum) : -INFINITY;
    if (n_top > TM_LOGPROBS_MAX) n_top = TM_LOGPROBS_MAX;
    if (n_top <= 0) return 0;
    cand h[TM_LOGPROBS_MAX];
    int32_t n = select_top_k(logits, V, h, n_top);
    /* the heap's root is the worst kept: take roots off from the end */
    for (int32_t k = n; k > 0; k--) {
        top_ids[k - 1] = h[0].id;
        top_lp[k - 1] = (float)tm_logprob_value(h[0].l, *lse);
        h[0] = h[k - 1];
        sift_down(h, k - 1, 0);
    }
    return n;
}
