/* cli/cmd_devices.c: `tandem devices`: the CPU's features, the kernel
 * variants available per op, and measured peaks (GEMV GB/s against plain
 * memory read bandwidth, GEMM GFLOP/s) with 1 and N threads. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/kmeasure.h"
#include "engine/engine.h"

static void devices_usage(FILE *f)
{
    fprintf(f, "usage: tandem devices [--quick] [--no-measure] [--threads N] [--variant NAME]\n"
               "  Lists CPU features, kernel variants per op, and measures (about 1 s each):\n"
               "  memory read GB/s, GEMV GB/s (int4g64, int8, bf16; B = 1), GEMM GFLOP/s\n"
               "  (bf16, int8 W8A8; M = 512), with 1 and N threads (default: every cpu this process may use).\n"
               "  --quick        shorter runs on less memory (0.25 s, 128 MiB)\n"
               "  --no-measure   features and variants only\n"
               "  --threads N    the N of the second column\n"
               "  --variant NAME measure this variant (scalar, avx2, avx512, amx) instead of the best\n");
}

typedef struct devopts {
    int quick, measure, threads;
    const char *variant;
} devopts;

static void list_variants(const tm_cpu *c)
{
    const char *const *v = tm_kernels_variants();
    tm_kernels tabs[8];
    int ok[8] = {0}, nv = 0;
    printf("kernel variants:");
    for (; v[nv] && nv < 8; nv++) {
        tm_err err = {0};
        ok[nv] = tm_kernels_select(v[nv], &tabs[nv], &err) == TM_OK;
        if (ok[nv]) printf(" %s", v[nv]);
        else printf(" (%s: %s)", v[nv], err.msg);
    }
    tm_kernels best;
    tm_kernels_best(&best);
    printf("\nbest: %s\n", best.name);
    printf("%-15s", "op");
    for (int i = 0; i < nv; i++) printf(" %-7s", v[i]);
    printf("  best uses\n");
    for (int op = 0; op < TM_KOP_COUNT; op++) {
        printf("%-15s", tm_kop_names[op]);
        for (int i = 0; i < nv; i++) {
            /* "own": the variant has its own implementation; "-": inherits a lower one */
            const char *mark = "n/a"; /* not runnable on this CPU */
            if (ok[i]) mark = strcmp(tm_kernels_op_source(&tabs[i], op), v[i]) == 0 ? "own" : "-";
            printf(" %-7s", mark);
        }
        printf("  %s\n", tm_kernels_op_source(&best, op));
    }
    (void)c;
}

/* the engines compiled in (best first), each with what it can do here or why it cannot run */
static void list_engines(void)
{
    int n;
    const tm_engine_vt *const *e = tm_engines(&n);
    printf("engines (best first; --prefill / --decode take these names):\n");
    for (int i = 0; i < n; i++) {
        tm_engine_caps c;
        tm_err err = {0};
        if (e[i]->probe(&c, &err) != TM_OK) {
            printf("  %-11s not here: %s\n", e[i]->name, err.msg);
            continue;
        }
        printf("  %-11s %-7s %-15s weights", c.name, c.device,
               (c.roles & TM_ROLE_PREFILL) && (c.roles & TM_ROLE_DECODE) ? "prefill, decode"
               : c.roles & TM_ROLE_PREFILL                               ? "prefill"
                                                                         : "decode");
        for (int k = 0; k < c.n_encodings; k++) printf("%s%s", k ? "/" : " ", tm_dtype_name(c.encodings[k]));
        printf(", KV");
        for (int k = 0; k < c.n_kv_dtypes; k++)
            printf("%s%s", k ? "/" : " ", c.kv_dtypes[k] == TM_DT_Q8PC ? "int8" : tm_dtype_name(c.kv_dtypes[k]));
        if (c.n_chunks) {
            printf(", chunks");
            for (int k = 0; k < c.n_chunks; k++) printf("%s%d", k ? "/" : " ", c.chunk_sizes[k]);
        }
        printf("\n");
    }
}

/* a mark when other processes took the CPU during a measurement */
static void busy_mark(const tm_kmeasure *r, int threads, int *any)
{
    double share = r->seconds > 0 ? r->cpu_seconds / (r->seconds * threads) : 1;
    if (share < 0.9) {
        printf("*");
        *any = 1;
    } else {
        printf(" ");
    }
}

/* a pool of the first n of cpus (tm_cpu_pick's), the caller as worker 0 */
static int make_pool(int n, const int *cpus, tm_pool **pool)
{
    tm_err err = {0};
    if (tm_pool_init(pool, cpus, n, 0, &err) != TM_OK || tm_pool_pin_caller(*pool, &err) != TM_OK) {
        fprintf(stderr, "tandem devices: threads: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* free the pools and give the caller back the mask it had before they pinned it
 * (each pool restores the mask it saw, and the second one saw the first's pin) */
static void free_pools(tm_pool **pools, int n, const cpu_set_t *was, int have_was)
{
    for (int c = 0; c < n; c++) tm_pool_free(pools[c]);
    if (have_was) sched_setaffinity(0, sizeof *was, was);
}

static int measure(const tm_kernels *k, const devopts *o)
{
    double secs = o->quick ? 0.25 : 1.0;
    size_t bytes = o->quick ? (size_t)128 << 20 : (size_t)512 << 20;
    int cpus[256], ncpu = tm_cpu_allowed(NULL, 256);
    cpu_set_t was;
    int have_was = sched_getaffinity(0, sizeof was, &was) == 0;
    int nt[2] = {1, o->threads < ncpu ? o->threads : ncpu};
    nt[1] = tm_cpu_pick(cpus, nt[1]); /* a session's CPUs for that many threads; one thread: the first */
    if (o->threads > ncpu)
        fprintf(stderr, "tandem devices: --threads %d: this process may use %d cpus; measuring with %d\n", o->threads,
                ncpu, ncpu);
    int ncol = nt[1] > 1 ? 2 : 1;
    double read[2] = {0, 0};
    tm_err err = {0};
    printf("\nmeasured with kernels '%s' (synthetic weights cycled through %zu MiB for GEMV):\n", k->name, bytes >> 20);
    printf("%-34s %16s", "", "1 thread");
    if (ncol > 1) printf(" %13d threads", nt[1]);
    printf("\n");
    tm_pool *pools[2] = {NULL, NULL};
    for (int c = 0; c < ncol; c++)
        if (make_pool(nt[c], cpus, &pools[c])) {
            free_pools(pools, 2, &was, have_was);
            return 1;
        }
    tm_kmeasure r;
    int busy = 0;
    printf("%-34s", "memory read");
    for (int c = 0; c < ncol; c++) {
        tm_pool_pin_caller(pools[c], NULL);
        if (tm_kmeasure_memread(bytes, secs, pools[c], &r, &err)) { printf(" failed: %s", err.msg); break; }
        read[c] = r.gbps;
        printf(" %14.2f GB/s", r.gbps);
        busy_mark(&r, nt[c], &busy);
        fflush(stdout);
    }
    printf("\n");
    static const tm_dtype gv[] = {TM_DT_Q4G64, TM_DT_Q6G64, TM_DT_Q8PC, TM_DT_BF16};
    for (int i = 0; i < 4; i++) {
        char label[64];
        snprintf(label, sizeof label, "GEMV %s 4096x4096, B=1", tm_dtype_name(gv[i]));
        printf("%-34s", label);
        for (int c = 0; c < ncol; c++) {
            tm_pool_pin_caller(pools[c], NULL);
            if (tm_kmeasure_gemv(k, gv[i], 4096, 4096, 1, bytes, secs, pools[c], &r, &err)) {
                printf(" failed: %s", err.msg);
                break;
            }
            printf(" %8.2f GB/s %3.0f%%", r.gbps, read[c] > 0 ? 100 * r.gbps / read[c] : 0);
            busy_mark(&r, nt[c], &busy);
            fflush(stdout);
        }
        printf("\n");
    }
    static const tm_dtype gm[] = {TM_DT_BF16, TM_DT_Q8PC};
    for (int i = 0; i < 2; i++) {
        char label[64];
        snprintf(label, sizeof label, "GEMM %s 512x2048x2048", gm[i] == TM_DT_BF16 ? "bf16" : "int8 W8A8");
        printf("%-34s", label);
        for (int c = 0; c < ncol; c++) {
            tm_pool_pin_caller(pools[c], NULL);
            if (tm_kmeasure_gemm(k, gm[i], 512, 2048, 2048, 0, secs, pools[c], &r, &err)) {
                printf(" failed: %s", err.msg);
                break;
            }
            printf(" %8.1f GFLOP/s", r.gflops);
            busy_mark(&r, nt[c], &busy);
            fflush(stdout);
        }
        printf("\n");
    }
    printf("(GEMV %% = share of the plain read bandwidth in the same column)\n");
    if (busy) printf("* other processes took more than 10%% of the CPU during this measurement: it reads low\n");
    free_pools(pools, ncol, &was, have_was);
    return 0;
}

static void amx_note(const tm_cpu *c)
{
    if (c->amx_usable) {
        printf("\nAMX: usable (tiles used for the prefill GEMMs: bf16 and int8 W8A8)\n");
        return;
    }
    /* TMUL peaks (Intel): tdpbf16ps 16x16x32 and tdpbusd 16x16x64 each in 16
     * cycles: 1024 bf16 FLOP and 2048 int8 OP per cycle per core, 16x and 16x
     * AVX-512 BF16 / VNNI with two 512-bit ports (64 FLOP, 128 OP). */
    printf("\nAMX: %s.\n"
           "  On a CPU with AMX (Sapphire Rapids or later) the 'amx' variant runs the prefill GEMMs\n"
           "  on tiles: per core 1024 bf16 FLOP/cycle and 2048 int8 OP/cycle, 16x AVX-512-BF16/VNNI\n"
           "  (at 2 GHz: ~2 TFLOP/s bf16, ~4 TOP/s int8 per core; measured on 2 SPR cores: 2-3 TFLOP/s\n"
           "  bf16). Decode GEMV is bandwidth-bound and would not change.\n",
           c->amx_note);
}

int cmd_devices(int argc, char **argv)
{
    devopts o = {0, 1, 0, NULL};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            devices_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--quick")) {
            o.quick = 1;
        } else if (!strcmp(argv[i], "--no-measure")) {
            o.measure = 0;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            o.threads = atoi(argv[++i]);
            if (o.threads < 1 || o.threads > 256) {
                fprintf(stderr, "tandem devices: --threads: %s is not in 1..256\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--variant") && i + 1 < argc) {
            o.variant = argv[++i];
        } else {
            devices_usage(stderr);
            return 2;
        }
    }
    const tm_cpu *c = tm_cpu_get();
    int n_allowed = tm_cpu_allowed(NULL, 256);
    if (!o.threads) o.threads = n_allowed;
    char feat[256];
    printf("cpu: %s (%s), %d logical cpus, %d of them allowed to this process\n", c->brand[0] ? c->brand : "?",
           c->vendor, c->n_cpus, n_allowed);
    printf("features: %s\n", tm_cpu_features_str(c, feat, sizeof feat));
    printf("amx: %s\n", c->amx_note);
    list_variants(c);
    list_engines();
    tm_kernels k;
    if (o.variant) {
        tm_err err = {0};
        if (tm_kernels_select(o.variant, &k, &err) != TM_OK) {
            fprintf(stderr, "tandem devices: --variant: %s\n", err.msg);
            return 1;
        }
    } else {
        tm_kernels_best(&k);
    }
    if (o.measure && measure(&k, &o)) return 1;
    amx_note(c);
    return 0;
}
