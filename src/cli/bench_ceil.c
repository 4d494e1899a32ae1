/* cli/bench_ceil.c: `tandem bench --ceilings`: the machine's limits measured
 * in the same run as the tests (memory read bandwidth, the matrix units'
 * peaks), before the tests and again after the scenarios, and each test's
 * fraction of them:
 *   tgN: GB/s = decode bytes per token (tandem_model_info) x tokens/s, over
 *        the read bandwidth;
 *   ppN: useful GOP/s = prefill ops per token x tokens/s (attention not
 *        counted), over the peak of the prefill engine's matrix unit at the
 *        prefill encoding (AMX, AVX-512 or AVX2; bf16 or int8).
 * The ceiling used is the higher of the two measurements (the conservative
 * fraction); both are reported. The machine is shared: the spread between
 * them is part of the result. On hosts whose matrix unit a neighbour shares
 * that spread reaches 2x, so for ppN the peak is also measured right before
 * and right after every rep (PAIRED_PEAK_S each, cmd_bench.c), and the
 * prefill's GEMM kernels (tandem_stats.t_prefill_gemm: issue 5's measure)
 * are set against the mean of the two: the median of those per-rep shares
 * is reported beside the rest. Likewise for tgN the read bandwidth is measured
 * right before and after every rep (PAIRED_READ_S each, over 256 MB), and
 * that rep's weight stream set against the mean of the two ("read_share"):
 * on dev (session 37) one invocation read 45 / 49 GB/s before / after while
 * the reps between saw 28-55 GB/s beside them. The AMX peak is also measured with a 2 x 2
 * block's four tile loads before every four products ("amx-loaded",
 * kmeasure_amx.c), what any GEMM must do; where the prefill runs on AMX,
 * the GEMM share is also given over that ceiling (the paired share divided
 * by loaded / peak as measured in the ceilings: "gemm_share_loaded"). Where
 * the two measurements beside a rep differ by more than BENCH_STEADY (10%) of
 * the larger, the host changed under it (a lent Xeon's tile peak swung 4-9
 * TOP/s within reps, session 66): the shares are also given over the steady
 * reps alone ("gemm_share_steady", "gemm_steady_reps"; "read_share_steady"),
 * beside the median over all, which stays the headline. */
#include <stdio.h>
#include <string.h>

#include "cli/bench.h"
#include "core/cpu.h"
#include "core/threadpool.h"
#include "engine/cpu/kmeasure.h"

static const char *const peak_variant[4] = {"amx", "avx512", "amx-loaded", "avx2"};
#define N_PEAKS 4
static const tm_dtype peak_dtype[2] = {TM_DT_BF16, TM_DT_Q8PC};

/* A pool on the CPUs a session of `threads` threads takes, the calling
 * thread its worker 0, pinned to the first of them while it measures
 * (tm_pool_free gives its mask back: the peer is forked from this thread);
 * NULL with the error printed. *n: its workers. */
static tm_pool *measure_pool(int threads, int *n)
{
    int cpus[256], ncpu = tm_cpu_allowed(NULL, 256);
    *n = tm_cpu_pick(cpus, threads < 1 ? 1 : threads > ncpu ? ncpu : threads);
    tm_pool *pool = NULL;
    tm_err err = {0};
    if (tm_pool_init(&pool, cpus, *n, 0, &err) != TM_OK || tm_pool_pin_caller(pool, &err) != TM_OK) {
        fprintf(stderr, "tandem bench: --ceilings: %s\n", err.msg);
        tm_pool_free(pool);
        return NULL;
    }
    return pool;
}

/* the matrix unit a prefill engine's GEMMs run on, and the encoding: indexes of peak_variant /
   peak_dtype, -1 where none applies (cpu-amx-emu's tiles are emulated: it counts as AMX, whose
   peak cannot be measured without it) */
static int unit_of(const char *prefill_engine)
{
    return !prefill_engine                   ? -1
           : strstr(prefill_engine, "amx")    ? 0
           : strstr(prefill_engine, "avx512") ? 1
           : strstr(prefill_engine, "avx2")   ? 3
                                              : -1;
}

static int dtype_of(const char *enc)
{
    return !enc ? -1 : !strcmp(enc, "bf16") ? 0 : !strcmp(enc, "int8") ? 1 : -1;
}

double bench_peak_now(int threads, const char *prefill_engine, const char *enc, double secs)
{
    int v = unit_of(prefill_engine), d = dtype_of(enc), n;
    if (v < 0 || d < 0) return 0;
    tm_pool *pool = measure_pool(threads, &n);
    tm_kmeasure r;
    tm_err err = {0};
    double g = pool && tm_kmeasure_peak(peak_variant[v], peak_dtype[d], secs, pool, &r, &err) == TM_OK ? r.gflops : 0;
    tm_pool_free(pool);
    return g;
}

double bench_read_now(int threads, double secs)
{
    int n;
    tm_pool *pool = measure_pool(threads, &n);
    tm_kmeasure r;
    tm_err err = {0};
    double g = pool && tm_kmeasure_memread((size_t)256 << 20, secs, pool, &r, &err) == TM_OK ? r.gbps : 0;
    tm_pool_free(pool);
    return g;
}

int bench_ceilings_measure(bench_ceil *c, int threads, int which)
{
    int n;
    tm_pool *pool = measure_pool(threads, &n);
    tm_err err = {0};
    if (!pool) return 1;
    c->threads = n;
    tm_kmeasure r;
    if (tm_kmeasure_memread((size_t)512 << 20, 1.0, pool, &r, &err) == TM_OK) c->read_gbps[which] = r.gbps;
    for (int v = 0; v < N_PEAKS; v++)
        for (int d = 0; d < 2; d++)
            if (tm_kmeasure_peak(peak_variant[v], peak_dtype[d], 0.5, pool, &r, &err) == TM_OK)
                c->peak_gops[v][d][which] = r.gflops;
    tm_pool_free(pool);
    fprintf(stderr, "bench ceilings (%s, %d threads): read %.1f GB/s; peaks GOP/s amx bf16 %.0f int8 %.0f, "
                    "avx512 bf16 %.0f int8 %.0f, amx with tile loads bf16 %.0f int8 %.0f, avx2 bf16 (FMA) %.0f int8 %.0f\n",
            which ? "after" : "before", n, c->read_gbps[which], c->peak_gops[0][0][which], c->peak_gops[0][1][which],
            c->peak_gops[1][0][which], c->peak_gops[1][1][which], c->peak_gops[2][0][which], c->peak_gops[2][1][which],
            c->peak_gops[3][0][which], c->peak_gops[3][1][which]);
    return 0;
}

static double hi(const double v[2]) { return v[0] > v[1] ? v[0] : v[1]; }

/* The ceiling a row is compared with: GB/s (tg) or GOP/s (pp); 0: none */
static double row_ceiling(const bench_ceil *c, const bench_row *r, const char *prefill_enc)
{
    if (r->kind == 'g') return hi(c->read_gbps);
    if (r->kind != 'p') return 0;
    int v = unit_of(r->prefill_engine), d = dtype_of(prefill_enc);
    return v < 0 || d < 0 ? 0 : hi(c->peak_gops[v][d]);
}

/* for a pp row on AMX: the loaded tile peak over the peak (hi of each; 0: not measured) */
static double loaded_factor(const bench_ceil *c, const bench_row *r, const char *prefill_enc)
{
    int d = dtype_of(prefill_enc);
    if (r->kind != 'p' || unit_of(r->prefill_engine) != 0 || d < 0) return 0;
    double p = hi(c->peak_gops[0][d]), l = hi(c->peak_gops[2][d]);
    return p > 0 && l > 0 ? l / p : 0;
}

/* the row's achieved rate in the ceiling's unit */
static double row_rate(const bench_ceil *c, const bench_row *r)
{
    if (r->kind == 'g') return r->value * (double)c->decode_bytes / 1e9;
    if (r->kind == 'p') return r->value * c->prefill_ops / 1e9;
    return 0;
}

void bench_ceilings_json(FILE *f, const bench_ceil *c, const bench_row *rows, int n, const char *prefill_enc)
{
    fprintf(f, "  \"ceilings\": {\"threads\": %d, \"read_gbps\": [%.2f, %.2f], \"decode_bytes_per_token\": %.0f, "
               "\"prefill_ops_per_token\": %.0f,\n    \"peak_gops\": {",
            c->threads, c->read_gbps[0], c->read_gbps[1], (double)c->decode_bytes, c->prefill_ops);
    for (int v = 0; v < N_PEAKS; v++)
        for (int d = 0; d < 2; d++)
            fprintf(f, "%s\"%s_%s\": [%.0f, %.0f]", v + d ? ", " : "", v == 2 ? "amx_loaded" : peak_variant[v],
                    d ? "int8" : "bf16", c->peak_gops[v][d][0], c->peak_gops[v][d][1]);
    fprintf(f, "},\n    \"tests\": [");
    int k = 0;
    for (int i = 0; i < n; i++) {
        double ceil = row_ceiling(c, &rows[i], prefill_enc), rate = row_rate(c, &rows[i]);
        if (ceil <= 0 || rate <= 0) continue;
        fprintf(f, "%s{\"test\": \"%s\", \"route\": \"%s\", \"%s\": %.2f, \"fraction\": %.3f", k++ ? ", " : "",
                rows[i].name, bench_route_name(rows[i].route), rows[i].kind == 'g' ? "gbps" : "useful_gops", rate,
                rate / ceil);
        double lf = loaded_factor(c, &rows[i], prefill_enc);
        if (rows[i].gemm_reps)
            fprintf(f, ", \"gemm_gops\": %.1f, \"gemm_share\": %.3f, \"gemm_share_range\": [%.3f, %.3f], "
                       "\"gemm_reps\": %d", rows[i].gemm_gops, rows[i].gemm_share, rows[i].gemm_share_lo,
                    rows[i].gemm_share_hi, rows[i].gemm_reps);
        if (rows[i].gemm_reps && lf > 0)
            fprintf(f, ", \"loaded_over_peak\": %.3f, \"gemm_share_loaded\": %.3f", lf, rows[i].gemm_share / lf);
        if (rows[i].gemm_reps) {
            fprintf(f, ", \"gemm_steady_reps\": %d", rows[i].gemm_steady_reps);
            if (rows[i].gemm_steady_reps) fprintf(f, ", \"gemm_share_steady\": %.3f", rows[i].gemm_share_steady);
        }
        if (rows[i].read_reps)
            fprintf(f, ", \"read_share\": %.3f, \"read_share_range\": [%.3f, %.3f], \"read_reps\": %d, "
                       "\"read_steady_reps\": %d",
                    rows[i].read_share, rows[i].read_share_lo, rows[i].read_share_hi, rows[i].read_reps,
                    rows[i].read_steady_reps);
        if (rows[i].read_steady_reps) fprintf(f, ", \"read_share_steady\": %.3f", rows[i].read_share_steady);
        fputc('}', f);
    }
    fprintf(f, "]},\n");
}

void bench_ceilings_md(FILE *f, const bench_ceil *c, const bench_row *rows, int n, const char *prefill_enc)
{
    fprintf(f, "\nCeilings measured in this run (%d threads, before / after the tests): read %.1f / %.1f GB/s; "
               "AMX bf16 %.2f / %.2f TFLOP/s, int8 %.2f / %.2f TOP/s (with a 2 x 2 block's tile loads: bf16 %.2f / %.2f, "
               "int8 %.2f / %.2f); AVX-512 bf16 %.2f / %.2f, int8 %.2f / %.2f; AVX2 bf16 (f32 FMA) %.2f / %.2f, "
               "int8 %.2f / %.2f.\n",
            c->threads, c->read_gbps[0], c->read_gbps[1], c->peak_gops[0][0][0] / 1e3, c->peak_gops[0][0][1] / 1e3,
            c->peak_gops[0][1][0] / 1e3, c->peak_gops[0][1][1] / 1e3, c->peak_gops[2][0][0] / 1e3,
            c->peak_gops[2][0][1] / 1e3, c->peak_gops[2][1][0] / 1e3, c->peak_gops[2][1][1] / 1e3,
            c->peak_gops[1][0][0] / 1e3, c->peak_gops[1][0][1] / 1e3, c->peak_gops[1][1][0] / 1e3,
            c->peak_gops[1][1][1] / 1e3, c->peak_gops[3][0][0] / 1e3, c->peak_gops[3][0][1] / 1e3,
            c->peak_gops[3][1][0] / 1e3, c->peak_gops[3][1][1] / 1e3);
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double ceil = row_ceiling(c, r, prefill_enc), rate = row_rate(c, r);
        if (ceil <= 0 || rate <= 0) continue;
        if (r->kind == 'g')
            fprintf(f, "- %s (%s): %.1f GB/s of weights (%.3f GB per token) = **%.0f%%** of the read bandwidth\n",
                    r->name, bench_route_name(r->route), rate, (double)c->decode_bytes / 1e9, 100 * rate / ceil);
        else
            fprintf(f, "- %s (%s, %s %s): %.2f TOP/s of useful matrix work (%.2f GOP per token) = **%.0f%%** of the "
                       "peak\n", r->name, bench_route_name(r->route), r->prefill_engine, prefill_enc, rate / 1e3,
                    c->prefill_ops / 1e9, 100 * rate / ceil);
        if (r->kind == 'g' && r->read_reps)
            fprintf(f, "- %s (%s): **%.0f%%** of the read bandwidth measured right before and after each rep "
                       "(median of %d reps, range %.0f-%.0f%%)\n", r->name, bench_route_name(r->route),
                    100 * r->read_share, r->read_reps, 100 * r->read_share_lo, 100 * r->read_share_hi);
        if (r->kind == 'g' && r->read_steady_reps)
            fprintf(f, "- %s (%s): over the %d of those reps whose two read bandwidths agreed within %.0f%%: **%.0f%%** "
                       "(median)\n", r->name, bench_route_name(r->route), r->read_steady_reps, 100 * BENCH_STEADY,
                    100 * r->read_share_steady);
        if (r->kind == 'p' && r->gemm_reps)
            fprintf(f, "- %s (%s): its GEMM kernels ran %.2f TOP/s = **%.0f%%** of the peak measured right before and "
                       "after each rep (median of %d reps, range %.0f-%.0f%%)\n", r->name, bench_route_name(r->route),
                    r->gemm_gops / 1e3, 100 * r->gemm_share, r->gemm_reps, 100 * r->gemm_share_lo,
                    100 * r->gemm_share_hi);
        if (r->kind == 'p' && r->gemm_steady_reps)
            fprintf(f, "- %s (%s): over the %d of those reps whose two peaks agreed within %.0f%%: **%.0f%%** (median)\n",
                    r->name, bench_route_name(r->route), r->gemm_steady_reps, 100 * BENCH_STEADY,
                    100 * r->gemm_share_steady);
        double lf = loaded_factor(c, r, prefill_enc);
        if (r->kind == 'p' && r->gemm_reps && lf > 0)
            fprintf(f, "- %s (%s): the tile peak with a 2 x 2 block's tile loads is %.0f%% of the peak; over it the GEMMs "
                       "ran **%.0f%%**\n", r->name, bench_route_name(r->route), 100 * lf, 100 * r->gemm_share / lf);
    }
}
