/* core/threadpool.h: a fixed pool of pinned workers with a low-overhead
 * parallel-for.
 *
 *   static void body(void *ctx, int task, int worker) { ... task in [0, n) ... }
 *
 *   int cpus[] = {2, 3};
 *   tm_pool *pool;
 *   if (tm_pool_init(&pool, cpus, 2, 0, &err) != TM_OK) ...;
 *   tm_pool_pin_caller(pool, &err);           // the calling thread is worker 0 (cpu 2)
 *   tm_pool_run(pool, n, body, ctx);          // returns when all n tasks are done
 *   tm_pool_free(pool);
 *
 * Model. A pool has n workers. By default the thread calling tm_pool_run is
 * worker 0 and takes tasks too; the pool spawns n-1 threads pinned to
 * cpus[1..n-1] (pthread_setaffinity_np). With TM_POOL_SPAWN_ALL it spawns n
 * threads pinned to cpus[0..n-1] and the caller only waits (use it when the
 * calling thread must not run on the pool's cores). Tasks are handed out
 * dynamically (an atomic counter), so uneven tasks balance.
 *
 * Waiting. Idle workers spin (with pause) for spin_us microseconds after their
 * last job, then sleep on a futex; back-to-back tm_pool_run calls within that
 * window cost no system call. The caller waits the same way.
 *
 * Several pools may run at the same time from different threads (e.g. a
 * prefill pool and a decode pool on disjoint core sets): they share nothing.
 * One pool serves one tm_pool_run at a time: a concurrent or nested call on
 * the same pool returns TM_E_INVALID. */
#ifndef TM_CORE_THREADPOOL_H
#define TM_CORE_THREADPOOL_H

#include "core/status.h"

typedef struct tm_pool tm_pool;

/* A task body: `task` in [0, n_tasks), `worker` in [0, tm_pool_size) (use it
 * to index per-worker scratch; 0 is the caller unless TM_POOL_SPAWN_ALL). */
typedef void (*tm_pool_fn)(void *ctx, int task, int worker);

enum {
    TM_POOL_SPAWN_ALL = 1, /* spawn n threads; the caller does not take tasks */
};

/* tm_pool_init: a pool of n_threads workers (1..256). cpus[n_threads] are the
 * logical CPU ids to pin to (worker i on cpus[i]); cpus may be NULL for no
 * pinning. Fails (TM_E_INVALID) if a CPU id is out of range or pinning is
 * refused (e.g. the CPU is outside this process's cpuset), naming the CPU. */
int tm_pool_init(tm_pool **out, const int *cpus, int n_threads, int flags, tm_err *err);
void tm_pool_free(tm_pool *pool); /* joins the workers; NULL is fine */

int tm_pool_size(const tm_pool *pool); /* n workers (1 for a NULL pool) */

/* tm_pool_set_spin: microseconds an idle worker (and the waiting caller)
 * spins before sleeping; default 200. 0 sleeps at once. */
void tm_pool_set_spin(tm_pool *pool, int spin_us);

/* tm_pool_pin_caller: pin the calling thread to cpus[0] (the caller is
 * worker 0 by default). No-op for a pool made without cpus. The first call
 * keeps the thread's mask from before; tm_pool_free, called from that same
 * thread, gives it back (so what the thread starts or forks afterwards, e.g.
 * bench's peer, is not left on one cpu). */
int tm_pool_pin_caller(tm_pool *pool, tm_err *err);

/* tm_pool_run: run fn(ctx, i, worker) for every i in [0, n_tasks) and return
 * when all are done. pool may be NULL: then the tasks run inline in order,
 * worker 0. Returns TM_OK, or TM_E_INVALID if the pool is already running a
 * job (concurrent or nested call). */
int tm_pool_run(tm_pool *pool, int n_tasks, tm_pool_fn fn, void *ctx);

/* tm_pool_run_homed: tm_pool_run where task t's home is worker t mod
 * tm_pool_size: each worker runs its own tasks first, in order, then takes
 * what is left from the end of the others' (a worker that is late or slowed
 * by another process is balanced as in tm_pool_run). Where two calls give the
 * same rows to the same home, what one worker wrote the next call reads from
 * its own core's caches. Over TM_POOL_HOMED_MAX tasks it is tm_pool_run. */
#define TM_POOL_HOMED_MAX 1024
int tm_pool_run_homed(tm_pool *pool, int n_tasks, tm_pool_fn fn, void *ctx);

/* tm_cpu_list_parse: parse "0-3,6,8-9" into cpus[max]; returns the count or
 * a negative status (err names the text). */
int tm_cpu_list_parse(const char *s, int *cpus, int max, tm_err *err);

#endif
