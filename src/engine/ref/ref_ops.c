/* engine/ref/ref_ops.c: scalar kernels of the reference engine and the
 * pthread splitter. */
#include <math.h>
#include <pthread.h>

#include "engine/ref/ref-impl.h"

#define REF_MAX_THREADS 256
#define REF_MIN_WORK 65536.0 /* multiply-adds below which threads do not pay */

typedef struct ref_job {
    void (*fn)(void *ctx, int i0, int i1);
    void *ctx;
    int i0, i1;
} ref_job;

static void *ref_job_run(void *p)
{
    ref_job *j = p;
    j->fn(j->ctx, j->i0, j->i1);
    return NULL;
}

void ref_parallel(int n_threads, int n, double work, void (*fn)(void *ctx, int i0, int i1), void *ctx)
{
    if (n_threads > REF_MAX_THREADS) n_threads = REF_MAX_THREADS;
    if (n_threads > n) n_threads = n;
    if (n_threads <= 1 || work < REF_MIN_WORK) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    pthread_t th[REF_MAX_THREADS];
    ref_job jobs[REF_MAX_THREADS];
    int started[REF_MAX_THREADS];
    for (int i = 0; i < n_threads; i++) {
        jobs[i] = (ref_job){fn, ctx, (int)((long long)n * i / n_threads), (int)((long long)n * (i + 1) / n_threads)};
        started[i] = i > 0 && pthread_create(&th[i], NULL, ref_job_run, &jobs[i]) == 0;
    }
    ref_job_run(&jobs[0]);
    for (int i = 1; i < n_threads; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else ref_job_run(&jobs[i]); /* could not start a thread: do it here */
    }
}

typedef struct mm_ctx {
    float *y;
    const float *x, *w, *b;
    int T, N, K;
} mm_ctx;

static void mm_rows(void *p, int n0, int n1)
{
    const mm_ctx *c = p;
    for (int n = n0; n < n1; n++) {
        const float *wr = c->w + (size_t)n * c->K;
        for (int t = 0; t < c->T; t++) {
            const float *xr = c->x + (size_t)t * c->K;
            double acc = 0;
            for (int k = 0; k < c->K; k++) acc += (double)xr[k] * (double)wr[k];
            float v = (float)acc;
            if (c->b) v += c->b[n];
            c->y[(size_t)t * c->N + n] = v;
        }
    }
}

void ref_matmul(int n_threads, float *y, const float *x, const float *w, const float *b, int T, int N, int K)
{
    mm_ctx c = {y, x, w, b, T, N, K};
    ref_parallel(n_threads, N, (double)T * N * K, mm_rows, &c);
}

void ref_rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    float var = (float)(ss / n);
    float r = (float)(1.0 / sqrt((double)(var + eps)));
    for (int i = 0; i < n; i++) y[i] = (x[i] * r) * w[i];
}

void ref_norm(tm_norm_kind kind, float *y, const float *x, const float *w, const float *b, int n, float eps)
{
    if (kind == TM_NORM_RMS) {
        ref_rmsnorm(y, x, w, n, eps);
        return;
    }
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    float mean = (float)(s / n);
    for (int i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    float var = (float)(ss / n);
    float r = (float)(1.0 / sqrt((double)(var + eps)));
    for (int i = 0; i < n; i++) y[i] = ((x[i] - mean) * r) * w[i] + (b ? b[i] : 0.f);
}

float ref_act(tm_act a, float x)
{
    double v = x;
    if (a == TM_ACT_SILU) return (float)(v / (1.0 + exp(-v)));
    if (a == TM_ACT_GELU) return (float)(0.5 * v * erfc(-v * 0.70710678118654752)); /* 0.5 v (1 + erf(v / sqrt 2)) */
    if (a == TM_ACT_RELU) return x > 0 ? x : 0.0f;
    if (a == TM_ACT_RELU2) return x > 0 ? x * x : 0.0f;
    if (a == TM_ACT_SWIGLU_OAI) return ref_glu(a, x, 0.0f); /* (its gate alone; only ref_glu is used with it) */
    /* GELU, tanh approximation */
    const double beta = 0.7978845608028654; /* sqrt(2 / pi) */
    return (float)(0.5 * v * (1.0 + tanh(beta * (v + 0.044715 * v * v * v))));
}

float ref_glu(tm_act a, float g, float u)
{
    if (a != TM_ACT_SWIGLU_OAI) return ref_act(a, g) * u;
    double gc = g < TM_SWIGLU_OAI_LIMIT ? g : TM_SWIGLU_OAI_LIMIT;
    double uc = u < -TM_SWIGLU_OAI_LIMIT ? -TM_SWIGLU_OAI_LIMIT : u > TM_SWIGLU_OAI_LIMIT ? TM_SWIGLU_OAI_LIMIT : u;
    return (float)(gc / (1.0 + exp(-(double)TM_SWIGLU_OAI_ALPHA * gc)) * (uc + 1.0));
}
