/* engine/cpu/kmeasure.h: timing the kernels on this machine (tandem devices,
 * tools/kbench, the router's calibration).
 *
 *   tm_kernels k; tm_kernels_best(&k);
 *   tm_kmeasure r;
 *   tm_kmeasure_gemv(&k, TM_DT_Q4G64, 4096, 4096, 1, 256 << 20, 1.0, pool, &r, &err);
 *   printf("%.1f GB/s\n", r.gbps);
 *
 * GEMV cycles through as many [N][K] weights as fill total_bytes (make it
 * several times the last-level cache, so the figure is memory bandwidth, not
 * cache), one call per weight, like a decode step walks its layers. GEMM
 * repeats one [M][N] x [N][K] product. Each runs one warm-up pass, then for
 * at least `seconds`. Weights are synthetic (values do not change speed). */
#ifndef TM_ENGINE_CPU_KMEASURE_H
#define TM_ENGINE_CPU_KMEASURE_H

#include <stddef.h>

#include "core/status.h"
#include "engine/cpu/kernels.h"

struct tm_pool;

typedef struct tm_kmeasure {
    double seconds;   /* measured time */
    double cpu_seconds; /* process CPU time in that window (all threads; on a
                           shared machine, seconds * threads - cpu_seconds is
                           time other processes took) */
    long calls;       /* op calls timed */
    double gbps;      /* weight bytes streamed per second / 1e9 (GEMV) */
    double gflops;    /* 2 M N K per second / 1e9 */
} tm_kmeasure;

int tm_kmeasure_gemv(const tm_kernels *k, tm_dtype dt, int N, int K, int B, size_t total_bytes, double seconds,
                     struct tm_pool *pool, tm_kmeasure *out, tm_err *err);
/* total_bytes: of weights cycled, one per call (0: one weight, warm) */
int tm_kmeasure_gemm(const tm_kernels *k, tm_dtype dt, int M, int N, int K, size_t total_bytes, double seconds,
                     struct tm_pool *pool, tm_kmeasure *out, tm_err *err);
/* tm_kmeasure_gemm's weights and rows made once and timed as often as wanted,
 * by any kernels of the same weight layout (kbench -a: two builds of the AMX
 * GEMM in turn, in slices short enough that the host's drift falls on both
 * alike). open synthesizes and prepares (no GEMM runs); time runs whole passes
 * over the set, one call per weight, for at least `seconds`. */
typedef struct tm_kgemm_set tm_kgemm_set;
int tm_kgemm_set_open(tm_kgemm_set **out, const tm_kernels *k, tm_dtype dt, int M, int N, int K, size_t total_bytes,
                      struct tm_pool *pool, tm_err *err);
int tm_kgemm_set_time(tm_kgemm_set *g, const tm_kernels *k, double seconds, tm_kmeasure *out, tm_err *err);
/* The calls' outputs in turn over a ring of total_bytes or more (0: one y,
 * warm in the caches after the first call, the default): each call then
 * writes lines that left the caches, as the engine's layers do (their y
 * buffers were last written a layer earlier). *count (if given): the
 * ring's outputs; TM_E_INVALID past 4096 of them. */
int tm_kgemm_set_ycycle(tm_kgemm_set *g, size_t total_bytes, int *count, tm_err *err);
void tm_kgemm_set_close(tm_kgemm_set *g);
/* The FFN's gate/up step of a prefill chunk, int8, each way the engine can
 * run it (TM_KFFN_*): apart (one GEMM of gate and up [2F][D], then
 * act(gate) * up and the int8 rows for the down projection in one pass) or
 * fused (gemm_glu's epilogue applies the activation, then the int8 rows),
 * each with the GEMM's y in f32 or, where the kernels have gemm_bf16y, in
 * bf16 (the engine's default there; the rows pass widens it). silu, M rows (a
 * multiple of 16), warm weights. Rounds take the ways in turn, `seconds` each;
 * gops[way * rounds + r]: GOP/s of round r (gate and up's 4 M F D operations
 * over the whole step; 0 for the bf16 ways without gemm_bf16y).
 * TM_E_UNSUPPORTED where the kernels have no gemm_glu. */
/* With alt (kbench-ab: the alternative AMX build's kernels, or NULL), a fifth way, TM_KFFN_ALT_BF16Y:
 * fused with a bf16 y by alt's gemm_bf16y, in turn with the others (gops then holds 5 x rounds). */
enum { TM_KFFN_APART, TM_KFFN_FUSED, TM_KFFN_APART_BF16Y, TM_KFFN_FUSED_BF16Y, TM_KFFN_WAYS,
       TM_KFFN_ALT_BF16Y = TM_KFFN_WAYS };
int tm_kmeasure_ffn(const tm_kernels *k, const tm_kernels *alt, int M, int F, int D, int rounds, double seconds,
                    struct tm_pool *pool, double *gops, tm_err *err);
/* Plain read bandwidth over `bytes` of memory, split across the pool (the
 * ceiling GEMV figures are compared with). */
int tm_kmeasure_memread(size_t bytes, double seconds, struct tm_pool *pool, tm_kmeasure *out, tm_err *err);
/* The matrix unit's peak on every thread of the pool: out->gflops (GFLOP/s
 * for bf16, GOP/s for int8) of back-to-back products with operands in
 * registers, the ceiling GEMM figures are compared with. variant "amx"
 * (TDPBF16PS / TDPBUSD tiles), "avx512" (vdpbf16ps / vpdpbusd) or "avx2"
 * (f32 FMA for bf16, whose GEMM widens it; maddubs + madd + add for int8); or
 * "amx-loaded": the same products with a 2 x 2 block's four operand tiles
 * loaded from L1 before every four (kmeasure_amx.c), the most a GEMM can
 * reach where tile loads cost; dt TM_DT_BF16 or TM_DT_Q8PC. TM_E_UNSUPPORTED
 * where this CPU cannot run it. */
int tm_kmeasure_peak(const char *variant, tm_dtype dt, double seconds, struct tm_pool *pool, tm_kmeasure *out,
                     tm_err *err);

#endif
