/* tests/test_threadpool.c: parallel-for correctness, pinning, two pools at once. */
#include "harness.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "core/cpu.h"
#include "core/threadpool.h"

#define MAXT 1100 /* > TM_POOL_HOMED_MAX: test_run_homed runs past it */

typedef struct {
    _Atomic int hits[MAXT];
    _Atomic int bad_worker;
    int n_workers;
    const int *cpus;      /* expected cpu per worker, or NULL */
    _Atomic int bad_cpu;  /* tasks that ran on an unexpected cpu */
    _Atomic int nested_rc;
    tm_pool *pool;
} job;

static void body(void *ctx, int task, int worker)
{
    job *j = ctx;
    atomic_fetch_add(&j->hits[task], 1);
    if (worker < 0 || worker >= j->n_workers) atomic_fetch_add(&j->bad_worker, 1);
    if (j->cpus && sched_getcpu() != j->cpus[worker]) atomic_fetch_add(&j->bad_cpu, 1);
}

static void reset(job *j)
{
    for (int i = 0; i < MAXT; i++) atomic_store(&j->hits[i], 0);
}

static int all_once(job *j, int n)
{
    for (int i = 0; i < MAXT; i++)
        if (atomic_load(&j->hits[i]) != (i < n)) return 0;
    return 1;
}

static int n_allowed_cpus(int *cpus, int max)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) != 0) return 0;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &s)) cpus[n++] = c;
    return n;
}

static void test_parallel_for(void)
{
    tm_err err = {0};
    tm_pool *pool;
    CHECK_EQ_INT(tm_pool_init(&pool, NULL, 3, 0, &err), TM_OK);
    CHECK_EQ_INT(tm_pool_size(pool), 3);
    static job j;
    j.n_workers = 3;
    int ok = 1, iters = getenv("TM_SANITIZER") ? 300 : 2000;
    for (int it = 0; it < iters; it++) {
        int n = 1 + (it * 37) % MAXT;
        if (it % 7 == 0) n = it % 5; /* includes 0 tasks */
        reset(&j);
        CHECK_EQ_INT(tm_pool_run(pool, n, body, &j), TM_OK);
        if (!all_once(&j, n)) ok = 0;
        if (it == iters / 2) tm_pool_set_spin(pool, 0); /* futex sleep path every time */
    }
    CHECK(ok);
    CHECK_EQ_INT(atomic_load(&j.bad_worker), 0);
    tm_pool_free(pool);

    /* NULL pool runs inline */
    reset(&j);
    j.n_workers = 1;
    CHECK_EQ_INT(tm_pool_run(NULL, 17, body, &j), TM_OK);
    CHECK(all_once(&j, 17));
    CHECK_EQ_INT(tm_pool_size(NULL), 1);
}

static void nested_body(void *ctx, int task, int worker)
{
    (void)worker;
    job *j = ctx;
    atomic_fetch_add(&j->hits[task], 1);
    int rc = tm_pool_run(j->pool, 2, body, j);
    if (rc != TM_E_INVALID) atomic_store(&j->nested_rc, rc == TM_OK ? 1 : rc);
}

static void test_nested_rejected(void)
{
    tm_err err = {0};
    static job j;
    CHECK_EQ_INT(tm_pool_init(&j.pool, NULL, 2, 0, &err), TM_OK);
    j.n_workers = 2;
    atomic_store(&j.nested_rc, 0);
    CHECK_EQ_INT(tm_pool_run(j.pool, 4, nested_body, &j), TM_OK);
    CHECK_EQ_INT(atomic_load(&j.nested_rc), 0); /* every nested call was refused */
    tm_pool_free(j.pool);
}

/* tm_pool_run_homed: every task once on a valid worker; a worker's first
 * task is one of its own (t mod n), unless others ran all of its own */
typedef struct {
    _Atomic int hits[MAXT], bad;
    int ran_on[MAXT];
    _Atomic int first[8];
    int n;
} homed_job;

static void homed_body(void *ctx, int task, int worker)
{
    homed_job *j = ctx;
    if (worker < 0 || worker >= j->n) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    atomic_fetch_add(&j->hits[task], 1);
    j->ran_on[task] = worker;
    int none = -1;
    atomic_compare_exchange_strong(&j->first[worker], &none, task);
    for (volatile int k = 0; k < (task % 5) * 200; k++) {} /* uneven tasks */
}

static void test_run_homed(void)
{
    static homed_job j;
    int once = 1, home_first = 1, homes_used = 0;
    for (int flags = 0; flags <= TM_POOL_SPAWN_ALL; flags += TM_POOL_SPAWN_ALL)
        for (int n = 1; n <= 4; n++) {
            tm_err err = {0};
            tm_pool *pool;
            CHECK_EQ_INT(tm_pool_init(&pool, NULL, n, flags, &err), TM_OK);
            j.n = n;
            for (int it = 0; it < 300; it++) {
                int nt = it % 3 == 2 ? TM_POOL_HOMED_MAX + 1 + it % 7 : 1 + (it * 37) % 200; /* past the max: plain */
                for (int t = 0; t < MAXT; t++) atomic_store(&j.hits[t], 0);
                for (int w = 0; w < 8; w++) atomic_store(&j.first[w], -1);
                CHECK_EQ_INT(tm_pool_run_homed(pool, nt, homed_body, &j), TM_OK);
                for (int t = 0; t < MAXT; t++)
                    if (atomic_load(&j.hits[t]) != (t < nt)) once = 0;
                if (nt > TM_POOL_HOMED_MAX) continue;
                for (int w = 0; w < n; w++) {
                    int f = atomic_load(&j.first[w]), all_taken = 1;
                    for (int t = w; t < nt; t += n) all_taken &= j.ran_on[t] != w;
                    if (f >= 0 && f % n != w && !all_taken) home_first = 0;
                    if (f >= 0 && f % n == w) homes_used++;
                }
                /* a plain run in between: the homed mode does not stick */
                static job pj;
                pj.n_workers = n;
                reset(&pj);
                CHECK_EQ_INT(tm_pool_run(pool, 37, body, &pj), TM_OK);
                if (!all_once(&pj, 37)) once = 0;
                if (it == 150) tm_pool_set_spin(pool, 0);
            }
            tm_pool_free(pool);
        }
    CHECK(once);
    CHECK(home_first);
    CHECK(homes_used > 0);
    CHECK_EQ_INT(atomic_load(&j.bad), 0);
    j.n = 1;
    for (int t = 0; t < MAXT; t++) atomic_store(&j.hits[t], 0);
    CHECK_EQ_INT(tm_pool_run_homed(NULL, 5, homed_body, &j), TM_OK); /* inline */
    CHECK_EQ_INT(atomic_load(&j.hits[4]), 1);
}

static void test_affinity(void)
{
    static int saved[1024];
    int n_saved = n_allowed_cpus(saved, 1024);
    int cpus[8];
    int n = n_allowed_cpus(cpus, 2);
    tm_err err = {0};
    tm_pool *pool;
    CHECK_EQ_INT(tm_pool_init(&pool, cpus, n, 0, &err), TM_OK);
    CHECK_EQ_INT(tm_pool_pin_caller(pool, &err), TM_OK);
    static job j;
    j.n_workers = n;
    j.cpus = cpus;
    atomic_store(&j.bad_cpu, 0);
    for (int it = 0; it < 200; it++) {
        reset(&j);
        tm_pool_run(pool, 64, body, &j);
    }
    CHECK(all_once(&j, 64));
    CHECKF(atomic_load(&j.bad_cpu) == 0, "%d tasks ran off their worker's cpu", atomic_load(&j.bad_cpu));
    tm_pool_free(pool);
    j.cpus = NULL;
    /* freeing the pool gave the caller back every cpu it was allowed before */
    int after[1024];
    CHECK_EQ_INT(n_allowed_cpus(after, 1024), n_saved);
    CHECK(memcmp(after, saved, sizeof(int) * (size_t)n_saved) == 0);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int i = 0; i < n_saved; i++) CPU_SET(saved[i], &all);
    sched_setaffinity(0, sizeof all, &all); /* for the tests after, whatever the check said */
}

/* tm_cpu_allowed follows the calling thread's mask (taskset, a cpuset): the
 * sessions' core plans and the CLI's pools take their cpus from it. */
static void test_cpu_allowed(void)
{
    static int saved[1024], got[1024];
    int n_saved = n_allowed_cpus(saved, 1024);
    CHECK(n_saved >= 1);
    if (n_saved < 1) return;
    CHECK_EQ_INT(tm_cpu_allowed(got, 1024), n_saved);
    CHECK(memcmp(got, saved, sizeof(int) * (size_t)n_saved) == 0);
    CHECK_EQ_INT(tm_cpu_allowed(NULL, 1024), n_saved); /* counting only */
    CHECK_EQ_INT(tm_cpu_allowed(got, 1), 1);
    CHECK_EQ_INT(got[0], saved[0]);
    cpu_set_t one, all;
    CPU_ZERO(&one);
    CPU_SET(saved[n_saved - 1], &one); /* the last allowed cpu only */
    CHECK_EQ_INT(sched_setaffinity(0, sizeof one, &one), 0);
    int n = tm_cpu_allowed(got, 1024);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(got[0], saved[n_saved - 1]);
    CPU_ZERO(&all);
    for (int i = 0; i < n_saved; i++) CPU_SET(saved[i], &all);
    sched_setaffinity(0, sizeof all, &all);
}

/* tm_cpu_pick: the first n allowed cpus, CPU 0 left out where n others are
 * allowed, checked against the allowed list under the process's own mask and
 * under masks with and without CPU 0. */
static void check_pick(const int *allowed, int m)
{
    static int got[1024];
    for (int n = 1; n <= m + 1 && n <= 1024; n++) {
        int skip = m > n && allowed[0] == 0, want = m - skip < n ? m - skip : n;
        CHECK_EQ_INT(tm_cpu_pick(got, n), want);
        for (int i = 0; i < want; i++) CHECK_EQ_INT(got[i], allowed[skip + i]);
        if (n > 4 && n < m - 1) n = m - 2; /* the ends are what differs */
    }
}

static void test_cpu_pick(void)
{
    static int saved[1024];
    int n_saved = n_allowed_cpus(saved, 1024);
    if (n_saved < 1) return;
    check_pick(saved, n_saved);
    if (n_saved < 2 || saved[0] != 0) return; /* the masks below take CPU 0 and one other */
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(0, &s);
    CPU_SET(saved[1], &s);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof s, &s), 0);
    int two[2] = {0, saved[1]}, got[2];
    check_pick(two, 2);
    CHECK_EQ_INT(tm_cpu_pick(got, 1), 1); /* one thread: the other cpu */
    CHECK_EQ_INT(got[0], saved[1]);
    CHECK_EQ_INT(tm_cpu_pick(got, 2), 2); /* both: CPU 0 too */
    CHECK_EQ_INT(got[0], 0);
    CPU_ZERO(&s);
    CPU_SET(0, &s); /* CPU 0 alone: it is all there is */
    CHECK_EQ_INT(sched_setaffinity(0, sizeof s, &s), 0);
    CHECK_EQ_INT(tm_cpu_pick(got, 1), 1);
    CHECK_EQ_INT(got[0], 0);
    CHECK_EQ_INT(tm_cpu_pick(got, 2), 1);
    CPU_ZERO(&s);
    for (int i = 0; i < n_saved; i++) CPU_SET(saved[i], &s);
    sched_setaffinity(0, sizeof s, &s);
}

/* Two pools on disjoint core sets, driven at the same time from two threads. */
typedef struct {
    int cpu;
    int iters;
    job j;
    int rc_init, ok;
} side;

static void *side_main(void *arg)
{
    side *s = arg;
    tm_err err = {0};
    tm_pool *pool;
    s->rc_init = tm_pool_init(&pool, &s->cpu, 1, TM_POOL_SPAWN_ALL, &err);
    if (s->rc_init) return NULL;
    s->j.n_workers = 1;
    s->j.cpus = &s->cpu;
    s->ok = 1;
    for (int it = 0; it < s->iters; it++) {
        int n = 1 + it % 97;
        reset(&s->j);
        if (tm_pool_run(pool, n, body, &s->j) != TM_OK || !all_once(&s->j, n)) s->ok = 0;
    }
    tm_pool_free(pool);
    return NULL;
}

static void test_two_pools(void)
{
    int cpus[2];
    if (n_allowed_cpus(cpus, 2) < 2) {
        printf("SKIP: two pools on disjoint cores need 2 cpus\n");
        return;
    }
    static side a, b;
    a.cpu = cpus[0];
    b.cpu = cpus[1];
    a.iters = b.iters = getenv("TM_SANITIZER") ? 100 : 400;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, side_main, &a);
    pthread_create(&tb, NULL, side_main, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_INT(a.rc_init, TM_OK);
    CHECK_EQ_INT(b.rc_init, TM_OK);
    CHECK(a.ok);
    CHECK(b.ok);
    CHECK_EQ_INT(atomic_load(&a.j.bad_cpu), 0);
    CHECK_EQ_INT(atomic_load(&b.j.bad_cpu), 0);
}

static void test_errors(void)
{
    tm_err err = {0};
    tm_pool *pool = (tm_pool *)1;
    int bad[] = {0, 100000};
    CHECK_EQ_INT(tm_pool_init(&pool, bad, 2, 0, &err), TM_E_INVALID);
    CHECK(pool == NULL);
    CHECK(strstr(err.msg, "cpu 100000") != NULL);
    CHECK_EQ_INT(tm_pool_init(&pool, NULL, 0, 0, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_pool_init(&pool, NULL, 100000, 0, &err), TM_E_INVALID);

    int cpus[16];
    CHECK_EQ_INT(tm_cpu_list_parse("0-3,6,8-9", cpus, 16, &err), 7);
    CHECK_EQ_INT(cpus[3], 3);
    CHECK_EQ_INT(cpus[4], 6);
    CHECK_EQ_INT(cpus[6], 9);
    CHECK(tm_cpu_list_parse("3-1", cpus, 16, &err) < 0);
    CHECK(tm_cpu_list_parse("a", cpus, 16, &err) < 0);
    CHECK(tm_cpu_list_parse("0-100", cpus, 16, &err) == TM_E_LIMIT);
    CHECK(tm_cpu_list_parse("1,", cpus, 16, &err) == 1);
    CHECK(tm_cpu_list_parse("1;2", cpus, 16, &err) < 0);
}

static void noop(void *ctx, int task, int worker)
{
    (void)ctx; (void)task; (void)worker;
}

static void test_overhead(void)
{
    tm_err err = {0};
    tm_pool *pool;
    CHECK_EQ_INT(tm_pool_init(&pool, NULL, 2, 0, &err), TM_OK);
    /* best of 5 batches: other processes on a shared machine can preempt a
     * spinning worker, which says nothing about the pool */
    double best = 1e30;
    for (int batch = 0; batch < 5; batch++) {
        int iters = 4000;
        double t0 = tm_now_s();
        for (int i = 0; i < iters; i++) tm_pool_run(pool, 2, noop, NULL);
        double us = (tm_now_s() - t0) * 1e6 / iters;
        if (us < best) best = us;
    }
    printf("tm_pool_run overhead (2 workers, empty tasks): %.2f us per call (best of 5 batches)\n", best);
    /* A smoke bound, generous for a loaded 2-core machine: an idle machine
     * gives < 1 us; a pool that slept in the kernel on every call would
     * show scheduler latencies of milliseconds. */
    CHECKF(best < 2000.0, "%.1f us per empty parallel-for", best);
    tm_pool_free(pool);
}

static void test_cpu_features(void)
{
    const tm_cpu *c = tm_cpu_get();
    CHECK(c == tm_cpu_get());
    CHECK(c->n_cpus >= 1);
    char buf[256];
    tm_cpu_features_str(c, buf, sizeof buf);
    printf("cpu: %s | %s | %s\n", c->brand, buf, c->amx_note);
    /* Cross-check against the kernel's view in /proc/cpuinfo where it exists. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[8192];
        int has_avx2 = -1, has_512f = -1, has_bf16 = -1, has_vnni = -1, has_gfni = -1;
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "flags", 5) != 0) continue;
            has_avx2 = strstr(line, " avx2") != NULL;
            has_512f = strstr(line, " avx512f") != NULL;
            has_bf16 = strstr(line, " avx512_bf16") != NULL;
            has_vnni = strstr(line, " avx512_vnni") != NULL;
            has_gfni = strstr(line, " gfni") != NULL;
            break;
        }
        fclose(f);
        if (has_avx2 >= 0) {
            CHECK_EQ_INT(c->avx2, has_avx2);
            CHECK_EQ_INT(c->avx512f, has_512f);
            CHECK_EQ_INT(c->avx512bf16, has_bf16);
            CHECK_EQ_INT(c->avx512vnni, has_vnni);
            CHECK_EQ_INT(c->gfni, has_gfni);
        }
    }
    if (c->amx_tile) CHECK(c->amx_usable || strstr(c->amx_note, "not permitted"));
    else CHECK(strstr(c->amx_note, "no AMX") != NULL);
    char small[8];
    tm_cpu_features_str(c, small, sizeof small);
    CHECK(strlen(small) < sizeof small);
}

int main(void)
{
    test_cpu_features();
    test_parallel_for();
    test_nested_rejected();
    test_run_homed();
    test_affinity();
    test_cpu_allowed();
    test_cpu_pick();
    test_two_pools();
    test_errors();
    test_overhead();
    return th_done("test_threadpool");
}
