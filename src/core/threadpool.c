/* core/threadpool.c: pinned workers, spin-then-futex parallel-for.
 *
 * Design block.
 *   Invariants
 *   - Job fields (fn, ctx, n_tasks, homed, claim, next, pending) are written only by the
 *     caller, and only while no job is in flight (busy == 1, pending == 0).
 *   - A job is published by incrementing `epoch` (seq_cst); a worker reads
 *     the job fields only after it has seen the new epoch (acquire).
 *   - Every spawned worker takes part in every job and decrements `pending`
 *     exactly once, so pending == 0 means no worker touches the job any more.
 *   - Sleep/wake uses the Dekker pattern on seq_cst atomics: the sleeper
 *     announces itself (sleepers / caller_sleeping) before futex_wait checks
 *     the word; the waker changes the word before reading the announcement.
 *
 *   worker:  WAIT(epoch == seen) --epoch++--> RUN tasks --pending--> WAIT
 *                 | spin spin_us, then futex_wait(epoch)
 *   caller:  IDLE --tm_pool_run: publish, epoch++--> RUN own tasks (unless
 *            SPAWN_ALL) --> WAIT(pending == 0) --> IDLE
 *   - A task runs once: tm_pool_run hands out `next` (fetch_add); a homed
 *     run has each worker exchange claim[t] to 1 before running task t, its
 *     own tasks (t mod n == its id) first, then any left, last first.
 */
#include "core/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TM_POOL_MAX 256

struct worker_arg {
    struct tm_pool *pool;
    int wid;
};

struct tm_pool {
    int n;        /* workers taking tasks */
    int n_spawn;  /* threads we created */
    int first;    /* worker id of spawned thread 0 (1, or 0 with SPAWN_ALL) */
    int flags;
    int spin_us;
    int *cpus;    /* [n] or NULL */
    pthread_t *threads;        /* [n_spawn] */
    struct worker_arg *args;   /* [n_spawn] */

    /* the job in flight (see invariants) */
    tm_pool_fn fn;
    void *ctx;
    int n_tasks;
    int homed;    /* tm_pool_run_homed: claim[] below, not next */
    _Atomic int next;
    _Atomic unsigned char claim[TM_POOL_HOMED_MAX]; /* tm_pool_run_homed: task t taken */

    _Atomic uint32_t epoch;    /* futex word: workers wait for it to change */
    _Atomic uint32_t pending;  /* futex word: spawned workers not done with the job */
    _Atomic int sleepers;      /* workers inside futex_wait(epoch) */
    _Atomic int caller_sleeping;
    _Atomic int busy;
    _Atomic int stop;

    /* tm_pool_pin_caller: the thread it pinned and that thread's mask before,
     * given back by tm_pool_free when called from the same thread */
    int caller_pinned;
    pthread_t caller;
    cpu_set_t caller_mask;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr, int n)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void run_tasks(struct tm_pool *p, int wid)
{
    int n = p->n_tasks;
    if (p->homed) {
        /* its own tasks first, in order; then whatever is left, from the end
         * (another worker, late or slowed, is working from its list's front) */
        for (int t = wid; t < n; t += p->n)
            if (!atomic_exchange_explicit(&p->claim[t], 1, memory_order_relaxed)) p->fn(p->ctx, t, wid);
        for (int t = n - 1; t >= 0; t--)
            if (!atomic_load_explicit(&p->claim[t], memory_order_relaxed) &&
                !atomic_exchange_explicit(&p->claim[t], 1, memory_order_relaxed))
                p->fn(p->ctx, t, wid);
        return;
    }
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= n) break;
        p->fn(p->ctx, i, wid);
    }
}

static void *worker_main(void *arg)
{
    struct worker_arg *a = arg;
    struct tm_pool *p = a->pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t e = atomic_load_explicit(&p->epoch, memory_order_acquire);
        if (e == seen) {
            int64_t deadline = now_ns() + (int64_t)p->spin_us * 1000;
            for (unsigned it = 1;; it++) {
                e = atomic_load_explicit(&p->epoch, memory_order_acquire);
                if (e != seen) break;
                if ((it & 255) == 0 && now_ns() >= deadline) {
                    atomic_fetch_add(&p->sleepers, 1);
                    futex_wait(&p->epoch, seen);
                    atomic_fetch_sub(&p->sleepers, 1);
                } else {
                    cpu_relax();
                }
            }
        }
        seen = e;
        if (atomic_load(&p->stop)) break;
        run_tasks(p, a->wid);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping))
            futex_wake(&p->pending, 1);
    }
    return NULL;
}

static int check_cpu(int cpu, tm_err *err)
{
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    int lim = conf > 0 && conf < CPU_SETSIZE ? (int)conf : CPU_SETSIZE;
    if (cpu < 0 || cpu >= lim)
        return tm_errf(err, TM_E_INVALID, "thread pool: cpu %d out of range [0, %d)", cpu, lim);
    return TM_OK;
}

int tm_pool_init(tm_pool **out, const int *cpus, int n_threads, int flags, tm_err *err)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > TM_POOL_MAX)
        return tm_errf(err, TM_E_INVALID, "thread pool: n_threads %d out of range [1, %d]", n_threads, TM_POOL_MAX);
    for (int i = 0; cpus && i < n_threads; i++) {
        int rc = check_cpu(cpus[i], err);
        if (rc) return rc;
    }
    struct tm_pool *p = calloc(1, sizeof *p);
    if (!p) return tm_errf(err, TM_E_NOMEM, "thread pool: out of memory");
    p->n = n_threads;
    p->flags = flags;
    p->first = (flags & TM_POOL_SPAWN_ALL) ? 0 : 1;
    p->n_spawn = n_threads - p->first;
    p->spin_us = 200;
    if (cpus) {
        p->cpus = malloc(sizeof(int) * (size_t)n_threads);
        if (!p->cpus) { free(p); return tm_errf(err, TM_E_NOMEM, "thread pool: out of memory"); }
        memcpy(p->cpus, cpus, sizeof(int) * (size_t)n_threads);
    }
    if (p->n_spawn > 0) {
        p->threads = calloc((size_t)p->n_spawn, sizeof *p->threads);
        p->args = calloc((size_t)p->n_spawn, sizeof *p->args);
        if (!p->threads || !p->args) {
            tm_pool_free(p);
            return tm_errf(err, TM_E_NOMEM, "thread pool: out of memory");
        }
    }
    for (int i = 0; i < p->n_spawn; i++) {
        int wid = p->first + i;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (p->cpus) {
            cpu_set_t s;
            CPU_ZERO(&s);
            CPU_SET(p->cpus[wid], &s);
            pthread_attr_setaffinity_np(&attr, sizeof s, &s);
        }
        p->args[i].pool = p;
        p->args[i].wid = wid;
        int rc = pthread_create(&p->threads[i], &attr, worker_main, &p->args[i]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            p->n_spawn = i; /* join only those started */
            tm_pool_free(p);
            if (cpus)
                return tm_errf(err, TM_E_INVALID, "thread pool: cannot start worker %d on cpu %d: %s", wid,
                               cpus[wid], strerror(rc));
            return tm_errf(err, TM_E_INVALID, "thread pool: cannot start worker %d: %s", wid, strerror(rc));
        }
    }
    *out = p;
    return TM_OK;
}

void tm_pool_free(tm_pool *p)
{
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->epoch, 1);
    futex_wake(&p->epoch, INT_MAX);
    for (int i = 0; i < p->n_spawn; i++) pthread_join(p->threads[i], NULL);
    if (p->caller_pinned && pthread_equal(p->caller, pthread_self()))
        pthread_setaffinity_np(p->caller, sizeof p->caller_mask, &p->caller_mask);
    free(p->threads);
    free(p->args);
    free(p->cpus);
    free(p);
}

int tm_pool_size(const tm_pool *p)
{
    return p ? p->n : 1;
}

void tm_pool_set_spin(tm_pool *p, int spin_us)
{
    if (p) p->spin_us = spin_us < 0 ? 0 : spin_us;
}

int tm_pool_pin_caller(tm_pool *p, tm_err *err)
{
    if (!p || !p->cpus) return TM_OK;
    if (!p->caller_pinned && pthread_getaffinity_np(pthread_self(), sizeof p->caller_mask, &p->caller_mask) == 0) {
        p->caller_pinned = 1;
        p->caller = pthread_self();
    }
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(p->cpus[0], &s);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof s, &s);
    if (rc != 0)
        return tm_errf(err, TM_E_INVALID, "thread pool: cannot pin caller to cpu %d: %s", p->cpus[0], strerror(rc));
    return TM_OK;
}

static void wait_done(struct tm_pool *p)
{
    if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
    int spin_us = (p->flags & TM_POOL_SPAWN_ALL) ? 0 : p->spin_us;
    int64_t deadline = now_ns() + (int64_t)spin_us * 1000;
    for (unsigned it = 1; atomic_load_explicit(&p->pending, memory_order_acquire) != 0; it++) {
        if ((it & 255) == 0 && now_ns() >= deadline) break;
        cpu_relax();
    }
    atomic_store(&p->caller_sleeping, 1);
    for (;;) {
        uint32_t v = atomic_load(&p->pending);
        if (v == 0) break;
        futex_wait(&p->pending, v);
    }
    atomic_store(&p->caller_sleeping, 0);
}

static int pool_run(tm_pool *p, int n_tasks, int homed, tm_pool_fn fn, void *ctx)
{
    if (n_tasks <= 0) return TM_OK;
    if (!p) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
        return TM_OK;
    }
    if (atomic_exchange(&p->busy, 1)) return TM_E_INVALID;
    if (p->n_spawn == 0 || (n_tasks == 1 && p->first == 1)) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
        atomic_store(&p->busy, 0);
        return TM_OK;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    p->homed = homed && n_tasks <= TM_POOL_HOMED_MAX;
    for (int t = 0; p->homed && t < n_tasks; t++) atomic_store_explicit(&p->claim[t], 0, memory_order_relaxed);
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->pending, (uint32_t)p->n_spawn, memory_order_relaxed);
    atomic_fetch_add(&p->epoch, 1); /* publish (seq_cst) */
    if (atomic_load(&p->sleepers) > 0) futex_wake(&p->epoch, INT_MAX);
    if (p->first == 1) run_tasks(p, 0);
    wait_done(p);
    atomic_store(&p->busy, 0);
    return TM_OK;
}

int tm_pool_run(tm_pool *p, int n_tasks, tm_pool_fn fn, void *ctx)
{
    return pool_run(p, n_tasks, 0, fn, ctx);
}

int tm_pool_run_homed(tm_pool *p, int n_tasks, tm_pool_fn fn, void *ctx)
{
    return pool_run(p, n_tasks, 1, fn, ctx);
}

int tm_cpu_list_parse(const char *s, int *cpus, int max, tm_err *err)
{
    int n = 0;
    const char *q = s;
    if (!s || !*s) return tm_errf(err, TM_E_INVALID, "cpu list: empty");
    while (*q) {
        char *end;
        long a = strtol(q, &end, 10);
        if (end == q || a < 0 || a >= CPU_SETSIZE)
            return tm_errf(err, TM_E_INVALID, "cpu list '%s': bad cpu id at '%s'", s, q);
        long b = a;
        q = end;
        if (*q == '-') {
            b = strtol(q + 1, &end, 10);
            if (end == q + 1 || b < a || b >= CPU_SETSIZE)
                return tm_errf(err, TM_E_INVALID, "cpu list '%s': bad range at '%s'", s, q);
            q = end;
        }
        for (long c = a; c <= b; c++) {
            if (n >= max) return tm_errf(err, TM_E_LIMIT, "cpu list '%s': more than %d cpus", s, max);
            cpus[n++] = (int)c;
        }
        if (*q == ',') q++;
        else if (*q) return tm_errf(err, TM_E_INVALID, "cpu list '%s': unexpected '%c'", s, *q);
    }
    return n;
}
