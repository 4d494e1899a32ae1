/* runtime/bridge.c: see bridge.h for the hand-off design block. */
#include "runtime/bridge.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"

/* Copy rows [sr, sr + n) of a source block to rows [dr, dr + n) of a
 * destination block (same Hk, Dh). Same dtype: the bytes (int8: the rows
 * and their scales); otherwise row by row through f32 (an int8 destination
 * quantizes each row: tm_kv_quant_row). */
static void copy_rows(const tm_kv_cache *src, const uint8_t *sb, int sr, const tm_kv_cache *dst, uint8_t *db,
                      int dr, int n)
{
    const tm_kv_cache_opts *so = tm_kv_cache_info(src), *dop = tm_kv_cache_info(dst);
    size_t Dh = (size_t)so->head_dim;
    if (so->dtype == dop->dtype && so->dtype == TM_DT_Q8PC) {
        memcpy(db + 4 * (size_t)dr, sb + 4 * (size_t)sr, 4 * (size_t)n);
        memcpy(db + 4 * (size_t)dop->page_size + dr * Dh, sb + 4 * (size_t)so->page_size + sr * Dh, (size_t)n * Dh);
    } else if (so->dtype == dop->dtype) {
        size_t esz = so->dtype == TM_DT_F32 ? 4 : 2;
        memcpy(db + dr * Dh * esz, sb + sr * Dh * esz, (size_t)n * Dh * esz);
    } else {
        float row[TM_KV_MAX_DH];
        for (int i = 0; i < n; i++) {
            tm_kv_row_load(src, sb, sr + i, row);
            tm_kv_row_store(dst, db, dr + i, row);
        }
    }
}

void tm_kv_copy_layer(const tm_kv_cache *src, const tm_kv_seq *ss, tm_kv_cache *dst,
                      const tm_kv_seq *ds, int layer, int p0, int p1)
{
    const tm_kv_cache_opts *so = tm_kv_cache_info(src), *dop = tm_kv_cache_info(dst);
    int Hk = so->n_kv_heads;
    for (int h = 0; h < Hk; h++) {
        int p = p0;
        while (p < p1) {
            /* the longest run contiguous in both layouts */
            int sp = p / so->page_size, sr = p % so->page_size;
            int dp = p / dop->page_size, dr = p % dop->page_size;
            int run = so->page_size - sr;
            if (dop->page_size - dr < run) run = dop->page_size - dr;
            if (p1 - p < run) run = p1 - p;
            copy_rows(src, tm_kv_page_k(src, ss->pages[sp], layer, h), sr, dst, tm_kv_page_k(dst, ds->pages[dp], layer, h),
                      dr, run);
            copy_rows(src, tm_kv_page_v(src, ss->pages[sp], layer, h), sr, dst, tm_kv_page_v(dst, ds->pages[dp], layer, h),
                      dr, run);
            p += run;
        }
    }
}

#define BRIDGE_MAXQ 4096

struct tm_bridge {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* work queued, or stop */
    pthread_cond_t done_cv; /* queue drained */
    int queue[BRIDGE_MAXQ];
    int head, tail;         /* queue[head..tail) */
    int busy;               /* copies in progress (bridge thread and/or finishing caller) */
    int stop;
    const tm_kv_cache *src;
    const tm_kv_seq *ss;
    tm_kv_cache *dst;
    tm_kv_seq *ds;
    int p0, p1;
    double busy_s;
};

/* Pop one queued layer and copy it (called with mu held; returns with it held).
 * Both the bridge thread and tm_bridge_finish's caller run this, so a hand-off
 * never waits on the bridge thread's wake-up latency. */
static void copy_one(tm_bridge *b)
{
    int layer = b->queue[b->head % BRIDGE_MAXQ];
    b->head++;
    b->busy++;
    pthread_mutex_unlock(&b->mu);
    double t0 = tm_now_s();
    tm_kv_copy_layer(b->src, b->ss, b->dst, b->ds, layer, b->p0, b->p1);
    double dt = tm_now_s() - t0;
    pthread_mutex_lock(&b->mu);
    b->busy_s += dt;
    b->busy--;
    if (b->head == b->tail && b->busy == 0) pthread_cond_broadcast(&b->done_cv);
}

static void *bridge_main(void *arg)
{
    tm_bridge *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (b->head == b->tail && !b->stop) pthread_cond_wait(&b->cv, &b->mu);
        if (b->head == b->tail && b->stop) break;
        copy_one(b);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

int tm_bridge_init(tm_bridge **out, int cpu, tm_err *err)
{
    tm_bridge *b = calloc(1, sizeof *b);
    if (!b) return tm_errf(err, TM_E_NOMEM, "bridge: out of memory");
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    pthread_cond_init(&b->done_cv, NULL);
    if (pthread_create(&b->thread, NULL, bridge_main, b) != 0) {
        free(b);
        return tm_errf(err, TM_E_NOMEM, "bridge: cannot start its thread");
    }
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        pthread_setaffinity_np(b->thread, sizeof set, &set); /* best effort */
    }
    *out = b;
    return TM_OK;
}

void tm_bridge_free(tm_bridge *b)
{
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    pthread_cond_destroy(&b->done_cv);
    free(b);
}

void tm_bridge_begin(tm_bridge *b, const tm_kv_cache *src, const tm_kv_seq *ss, tm_kv_cache *dst,
                     tm_kv_seq *ds, int p0, int p1)
{
    tm_bridge_finish(b); /* the previous hand-off, if any, must be complete */
    pthread_mutex_lock(&b->mu);
    b->src = src;
    b->ss = ss;
    b->dst = dst;
    b->ds = ds;
    b->p0 = p0;
    b->p1 = p1;
    b->busy_s = 0;
    pthread_mutex_unlock(&b->mu);
}

void tm_bridge_layer_done(void *bridge, int layer)
{
    tm_bridge *b = bridge;
    pthread_mutex_lock(&b->mu);
    while (b->tail - b->head >= BRIDGE_MAXQ) pthread_cond_wait(&b->done_cv, &b->mu);
    b->queue[b->tail % BRIDGE_MAXQ] = layer;
    b->tail++;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

double tm_bridge_finish(tm_bridge *b)
{
    double t0 = tm_now_s();
    pthread_mutex_lock(&b->mu);
    while (b->head != b->tail) copy_one(b); /* help: copy what is still queued here */
    while (b->busy) pthread_cond_wait(&b->done_cv, &b->mu);
    if (b->ds) b->ds->owner = TM_KV_OWNER_DECODE;
    b->ds = NULL; /* the hand-off is over: forget the sequence */
    b->ss = NULL;
    pthread_mutex_unlock(&b->mu);
    return tm_now_s() - t0;
}

double tm_bridge_busy_seconds(const tm_bridge *b) { return b->busy_s; }
