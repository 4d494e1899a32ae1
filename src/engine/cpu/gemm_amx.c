/* engine/cpu/gemm_amx.c: prefill GEMM on Intel AMX (Sapphire Rapids and
 * later), and the "amx" variant's table (the AVX-512 one with these two
 * GEMMs). Chosen only when CPUID reports AMX-TILE/BF16/INT8 and Linux has
 * granted XTILEDATA (core/cpu.h).
 *
 * Tiles: C00 C01 C10 C11 = a 32 x 32 f32/int32 block (tiles 0-3), A0 A1 =
 * 16 rows of x each (tiles 4-5: 16 x 32 bf16 or 16 x 64 int8), B0 B1 = 16
 * columns each (tiles 6-7: 16 k-pair/k-quad rows of 64 bytes, read from the
 * panel layout with stride 128 bytes: a panel is exactly two B tiles side by
 * side, see kernels-impl.h). Per K step (32 bf16 / 64 int8): 4 tile loads,
 * 4 tdpbf16ps / tdpbusd; C stays in tiles over a chunk of up to AMX_KB K
 * steps (the whole K up to 1024 int8 / 512 bf16), see "the blocked loop",
 * or, where K is longer but a task's A rows fit in L2, over all of K ("long
 * K").
 *
 * x is first packed into tile order, [ceil(M/16)][K steps][16 rows][64 B],
 * so every A tile load reads 1 KB contiguously (in place, at K = 2048 int8,
 * its 16 rows would share 2 of L1's 64 sets). Rows past M are zero, so
 * every tile has 16 rows and one configuration serves all shapes; the
 * epilogue drops rows past M and columns past N, and for int8 applies 128
 * colsum and the scales. Where M is a multiple of 16, K is one chunk (long
 * K included) and the rows' stride spreads them over L1's sets (K = 896,
 * 4864), the tiles are read from the rows in place instead (see "packing
 * x"). */
#include <string.h>
#include <unistd.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

#include "engine/cpu/vec_exp.inc"

#ifndef MB
#define MB 256 /* rows per task (a multiple of 32): each task streams its panels once, so
                  M / MB passes over the weights (Xeon, 2 threads, M = 512: MB 64 -> 256
                  took int8 1.5-1.7 -> 1.7-2.2 TOP/s, bf16 0.71-0.82 -> 0.77-1.0 TFLOP/s) */
#endif
#ifndef AMX_MB_WIDE
#define AMX_MB_WIDE 1 /* 512 rows per task (MB_WIDE) where the GEMM's A rows fit L2 and N is wide; see
                         rows_per_task() */
#endif
#define MB_WIDE 512
#ifndef AMX_KB
#define AMX_KB 16  /* K steps per chunk: 32 KB of each panel (1024 int8 / 512 bf16 of K); a block's
                      A chunk, 32 KB, stays within L1 (session 15, run 68; see "the blocked loop") */
#endif
#ifndef AMX_PG
#define AMX_PG 4   /* panels per group: the group's B chunk, AMX_PG x 32 KB, stays in L2 */
#endif
#ifndef AMX_BT1
#define AMX_BT1 1  /* B tiles loaded with TILELOADDT1 (streamed, so A stays in L1); see "the blocked loop" */
#endif
#ifndef AMX_NT_BYTES
#define AMX_NT_BYTES (8u << 20) /* f32 outputs from this size up are stored non-temporally (session 11,
                                   Qwen pp512 on the Xeon: plain stores made the next pass 0.02 s faster
                                   and the GEMMs 0.09 s slower, docs/bench/xeon-s11-run45.txt) */
#endif
#ifndef AMX_INPLACE
#define AMX_INPLACE 1 /* A tiles read from the prepared rows, no pack pass, where K is one chunk and the
                         rows' stride suits L1 (see run()) */
#endif
#ifndef AMX_EPI_MEASURE
#define AMX_EPI_MEASURE 0 /* measurement builds only (kbench-ab; their y is wrong): 1 = the epilogue
                             stores to a 4 KB sink in L1 instead of y, 2 = no epilogue at all, 3 =
                             every panel reads panel 0's B (no weight traffic, no L2 prefetch), 4 =
                             3 and 2, 7 = as 2 and no tile stores either where K is one chunk (C
                             left in the tiles: what the block's end costs, beside 2); every
                             measurement build drops the y prefetch and runs each epilogue between
                             the blocks, except 9 = the shipped build with y's stores sent to the
                             sink (what the stores themselves cost) and 10 = 9 without the y
                             prefetch (no y traffic at all), 12 = 10 with the epilogue's rows only
                             loading C (summed into a register sink) and 13 = 12 with C dequantized
                             (dq_row): with 10 and 2, the epilogue's parts (session 33). (Sessions
                             18-19's 5, 6 and 8 are gone: docs/kernels.md) */
#endif
#define EPI_AS_SHIPPED (!AMX_EPI_MEASURE || AMX_EPI_MEASURE >= 9) /* the loop as shipped */
#ifndef AMX_YPF
#define AMX_YPF 1 /* y's lines a block's epilogue will write, fetched for writing (PREFETCHW) over the
                     block's last K chunk, so the epilogue's stores do not each wait for a line's
                     read-for-ownership (plain stores only: a non-temporal y takes none; into L2
                     instead where y's rows do not spread over L1's sets, since session 34, see run()).
                     Session 19, kbench-ab (A/A 0.98-1.00x): 512 x 1152 x 896 1.045x (run 88) and
                     1.040x (run 90), 896 x 4864 1.002x; 2048 x 2048 1.034x and 0.94x, 2048 x 8192
                     1.025x (then left out) */
#endif
#ifndef AMX_SPREAD
#define AMX_SPREAD 1 /* each block's epilogue run a few rows at a time after each of the next block's K
                        steps' tile products (its C in a scratch slot), not between the blocks: see "the
                        epilogue in the next block's shadow" (measurement builds but 9, 10, 12 and 13 leave it out) */
#endif
#define SPREAD_ON (AMX_SPREAD && EPI_AS_SHIPPED)
#ifndef AMX_PRELOAD
#define AMX_PRELOAD 1 /* at a block's end, the next block's first A tile (1), or A and both B tiles (2),
                         loaded before the C tile stores, which wait for the block's last products;
                         within a chunk_run only. Session 23, kbench-ab (run 111, A/A 1.008x, 0.993x),
                         1 / 2 over none: 1152 x 896 1.017x / 1.017x, 9728 x 896 1.047x / 1.040x,
                         896 x 4864 1.039x / 1.015x, 16384 x 2048 1.046x / 1.029x; run 112 (A/A
                         0.994x, 1.004x), 1 over none: 0.972x, 896 x 896 1.035x, 1.042x, 1.035x,
                         2048 x 2048 1.037x, 1.049x */
#endif
#define PRELOAD_ON (AMX_PRELOAD && EPI_AS_SHIPPED)
#ifndef AMX_KOUTER
#define AMX_KOUTER 1 /* K chunks outside the panel groups (see "K outer"): 1 where K takes more than two
                        chunks and long K does not apply, 2 (a measurement option) wherever K takes
                        several chunks, 0 never */
#endif
#ifndef AMX_ACT_LP
#define AMX_ACT_LP 1 /* the fused gate/up's SiLU and GELU-tanh for a bf16 y to ~1e-4 (vgate_lp), 0: vec_exp.inc's */
#endif
#ifndef AMX_SILU_LEAN
#define AMX_SILU_LEAN 1 /* the fused gate/up's SiLU for int8 weights and a bf16 y from C in fewer vector
                           instructions (silu_row, session 66); 0: dq_row twice and vsilu_mul_lp */
#endif
#ifndef AMX_GLU_MEASURE
#define AMX_GLU_MEASURE 0 /* a measurement build (its y wrong): the fused gate/up's act(g) * u as g * u */
#endif
/* the lean SiLU (silu_row) applies: int8 weights, the fused gate/up's SiLU, a bf16 y */
#define SILU_LEAN(q8, glu, bf16y) \
    (AMX_SILU_LEAN && AMX_ACT_LP && !AMX_GLU_MEASURE && (q8) && (glu) == TM_KGLU_SILU && (bf16y))
#ifndef AMX_EPI_SLOTS
#define AMX_EPI_SLOTS 1 /* scratch slots for the blocks' C (epi_state): 1, each block's C stored over its predecessor's,
                          whose rows all ran during the block's steps; 2 (until session 33) alternated, 4 KB more of
                          L1 (8 KB glu) beside A's 28 KB chunk (kbench-ab 1.01-1.05x at K = 896:
                          docs/kernels.md "Known limits") */
#endif
#ifndef AMX_SPLIT
#define AMX_SPLIT 1 /* split N (tm_kgemm_run_split): this many panel ranges per worker, each task all the rows of
                       its range, where K is one chunk, N >= 4096 and A within 1 MB; 0 never. See "split N" */
#endif
#ifndef AMX_LONGK_L2
#define AMX_LONGK_L2 70 /* long K (see "long K"): where a task's A rows over all of K take at most this
                           percent of L2 (run-time: sysconf's L2 size, 2 MB where it reports none) */
#endif
#ifndef AMX_LONGK_CHUNKS
#define AMX_LONGK_CHUNKS 2 /* long K only where K takes more than this many AMX_KB chunks (see "long K" for
                              why not two; 1 is a measurement option) */
#endif
#ifndef AMX_LONGK_BYTES
#define AMX_LONGK_BYTES 0 /* a fixed long-K budget in bytes instead (gemm_amx_emu.c: small, so the tests'
                             shapes run both loops); 0: AMX_LONGK_L2 of L2 */
#endif
#ifndef AMX_ACC_PAD
#define AMX_ACC_PAD 16 /* floats past a group's AMX_PG * 32 in each acc row: see ACC_LD */
#endif
/* acc's row stride in floats, 64 bytes past the group. In session 6's loop
 * (a C round trip per 32 products, the next block 32 rows on) the unpadded
 * stride (512 B at AMX_PG 4) put one block's C stores and the next block's
 * loads a multiple of 4 KB apart, and a load whose low 12 address bits match
 * an older store's may wait for it: the pad gained 1-3 points on every shape
 * (docs/bench/xeon-s6-amx.txt). In this loop acc only carries C between K
 * chunks beyond 1024 int8 / 512 bf16; the pad stays, not re-measured. */
#define ACC_LD (AMX_PG * 32 + AMX_ACC_PAD)
#define MB_MAX (AMX_MB_WIDE && MB_WIDE > MB ? MB_WIDE : MB)
#define ACC_K_LD (16 * 32 + AMX_ACC_PAD) /* AMX_KOUTER's acc rows: a task's 16 panels at most (tm_kgemm_run) */
#define ACC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define ACC_WORKER ACC_MAX(MB_MAX * ACC_LD, AMX_KOUTER ? MB * ACC_K_LD : 0) /* floats of acc per worker */

/* -DAMX_PROF: TSC cycles spent packing, in the tile loop and in the epilogue,
 * summed over workers, printed at exit: a measurement build (tools/kbench.c
 * linked with this file built so), not the shipped one; tile and epilogue
 * are timed per block. With session 6's loop (a separate epilogue pass), on
 * the h200-host Xeon, 2 threads, int8 M = 512: the tile loop was 75-85% of
 * the GEMM, the epilogue 15% (N = 2048) to 25% (N = 8192: its 16 MB of f32
 * output leave the caches), packing 1-3%. With AMX_SPREAD the epilogue runs
 * inside the next block's steps, so its cycles count as the tile loop's
 * (build with -DAMX_SPREAD=0 to time it apart). */
#ifdef AMX_PROF
#include <stdio.h>
#include <x86intrin.h>
static _Atomic unsigned long long prof_pack, prof_tile, prof_epi, prof_calls;
static void __attribute__((destructor)) prof_print(void)
{
    if (prof_calls)
        fprintf(stderr, "amx_prof: %llu calls, Mcycles/call: pack %.3f tile %.3f epilogue %.3f\n", prof_calls,
                prof_pack / 1e6 / prof_calls, prof_tile / 1e6 / prof_calls, prof_epi / 1e6 / prof_calls);
}
#define PROF_T(v) unsigned long long v = __rdtsc()
#define PROF_ADD(ctr, t0) (ctr += __rdtsc() - (t0))
#define PROF_CALL() (prof_calls++)
#else
#define PROF_T(v) (void)0
#define PROF_ADD(ctr, t0) (void)0
#define PROF_CALL() (void)0
#endif

typedef struct tilecfg {
    uint8_t palette;     /* 1 */
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];  /* bytes per row of each tile */
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) tilecfg;

/* every tile 16 rows x 64 bytes (the GEMM's and attn_amx.c's configuration).
 * A static constant, not a local filled in before the load: gcc 12 does not
 * see LDTILECFG read its operand and dropped the stores of the rows and
 * widths from the out-of-line copy of this function (the tiles were then
 * configured empty, and the first tile instruction raised SIGILL: seen in
 * the tile peak, on a Sapphire Rapids host with Debian's gcc 12.2). */
static const tilecfg amx_cfg = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

void tm_kamx_config(void)
{
    _tile_loadconfig(&amx_cfg);
}

typedef struct gemm_ctx {
    const tm_kweight *w;
    const uint8_t *xt;  /* packed x: [ceil(M/16)][nsteps][16][64] bytes, or the rows in place */
    size_t a_grp, a_ld; /* bytes from one 16-row group of xt to the next, and from row to row (packed:
                           nsteps * 1024 and 64; in place: 16 ld and ld); a K step is 64 bytes on */
    int a_step;         /* bytes from one K step to the next: 1024 packed, 64 in place */
    int nsteps;         /* K steps: Kp/32 (bf16) or Kp/64 (int8) */
    const float *xs;    /* int8: [M] */
    int M, N, is_q8;
    int nt;             /* y stored non-temporally: it is AMX_NT_BYTES or more, the caches would not keep it */
    int glu;            /* w->glu: panels in gate/up pairs, y = act(gate) * up (tm_kpack_glu) */
    float *y;           /* [M][N] f32, or NULL: */
    uint16_t *yb;       /* [M][N] bf16 (gemm_bf16y) */
    float *acc;         /* [workers][ACC_WORKER] partial sums between K chunks: rows ACC_LD floats apart
                           (ACC_K_LD with AMX_KOUTER) */
    int ypf;            /* AMX_YPF: y's lines fetched ahead of its stores, for writing into L1 (1) or into L2 (2) */
    int kb, pg;         /* K steps per chunk and panels per group: AMX_KB and AMX_PG, or, long K (see
                           "long K"), all of K and one panel */
    int kouter;         /* K chunks outside the panel groups (AMX_KOUTER, "K outer") */
} gemm_ctx;

/* ---- packing x into tile order (parallel over 16-row groups) ----------------- */

/* The pack is a parallel pass of its own over x (M x K bytes read and
 * written), so its share of a GEMM goes as 1 / N. Where it is not needed
 * (run(): K in one chunk, a stride whose 16 rows fall in 16 L1 sets) the A
 * tiles are read from the prepared rows themselves. Session 17, h200-host
 * Xeon, `kbench-ab -a 1 -p 8 -m 128` (in place against packed, in one
 * process; the ratio over pairs of rounds with each build first; 3 calls'
 * medians, with an A/A control on every shape reading 0.88-1.09x): int8 512
 * x 896 x 896 1.06 / 1.14 / 1.14x, 512 x 1152 x 896 1.11 / 1.04 / 1.02x,
 * 512 x 9728 x 896 0.82 / 1.20 / 0.99x; K = 4864 (several chunks, so packed
 * now) 0.99 / 0.97 / 0.96x (docs/bench/xeon-s17-run78.txt). */

typedef struct pack_job {
    const uint8_t *x;   /* prepared rows [M][ld_bytes] */
    size_t ld_bytes;
    int M, nsteps;
    uint8_t *out;
} pack_job;

static void pack_task(void *ctx, int grp, int worker)
{
    (void)worker;
    PROF_T(t0);
    const pack_job *j = ctx;
    uint8_t *o = j->out + (size_t)grp * j->nsteps * 1024;
    for (int s = 0; s < j->nsteps; s++)
        for (int r = 0; r < 16; r++) {
            int m = grp * 16 + r;
            uint8_t *dst = o + (size_t)s * 1024 + r * 64;
            if (m < j->M) memcpy(dst, j->x + (size_t)m * j->ld_bytes + (size_t)s * 64, 64);
            else memset(dst, 0, 64);
        }
    PROF_ADD(prof_pack, t0);
}

/* packed x, then the workers' accumulators */
static size_t pack_bytes(const tm_kweight *w, int M, int nsteps, struct tm_pool *pool)
{
    return (size_t)((M + 15) / 16) * nsteps * 1024 + (size_t)tm_pool_size(pool) * ACC_WORKER * 4;
}

/* ---- the blocked loop -------------------------------------------------------- */

/* A TDPBF16PS / TDPBUSD takes 16 cycles and reads 2 KB of tiles, so the 2 x 2
 * block needs 1 KB of operands per product: 64 B per cycle at the tile peak.
 * Per task (MB rows x some panels), per group of AMX_PG panels and K chunk of
 * AMX_KB steps, each 32-row block runs the chunk over the group's panels in
 * turn, C in tiles the whole chunk:
 *
 *   for group of AMX_PG panels:            B chunk AMX_PG x 32 KB: L2, reused by every row block
 *     for K chunk [s0, s1) (AMX_KB steps):
 *       for 32-row block m:                A chunk 32 KB: L1, reused by the group's panels
 *         for panel j of the group:
 *           C = s0 ? acc[m][j] : 0; C += A[m][s0:s1] B[j][s0:s1]   (tiles, block_steps)
 *           last chunk ? epilogue(C) -> y : C -> acc[m][j]
 *
 * Up to 1024 int8 / 512 bf16 of K there is one chunk: C never leaves the
 * tiles until the block's epilogue, which reads it from a 4 KB scratch in L1
 * right away. Beyond, C makes one round trip through acc per chunk: every
 * 64 products, not every 32. A glu weight (tm_kpack_glu) has its panels in
 * gate/up pairs, so a group holds AMX_PG / 2 pairs and the epilogue runs
 * once per pair, from both blocks' C.
 *
 * History (Xeon, 2 threads, M = 512, paired with the tile peak, kbench -p;
 * docs/bench/xeon-s6-amx.txt, xeon-s7-amx.txt). Until session 6 the loop
 * was group > K chunk of 8 steps > panel > row block: the B chunk (16 KB)
 * reused from L1 across row blocks, but C in and out of acc (in L2) every
 * 32 products and the epilogue a separate pass over acc. That loop's own
 * ceiling was 57-64% of the peak (tools/amx_tileloop.c gemm) and the GEMM
 * reached 33-40%. This order, session 7, over 7 interleaved rounds: int8
 * 512 x 2048 x 2048 37% -> 41-45%, 512 x 2048 x 8192 28-31% -> 38-40%, with
 * the non-temporal output 512 x 8192 x 2048 36% -> 44%; bf16 2048^2 about
 * the same (37-43% both). Five rounds of the final code: int8 2048^2 45%,
 * 8192 x 2048 52%, 2048 x 8192 40%; bf16 2048^2 45%.
 *
 * The first block of a chunk meets its B chunk in L3 or DRAM: the panels lie
 * Kp * 32 bytes apart, and the L2 streamer stops at every 4 KB page. So each
 * block also prefetches its share of the next B chunk into L2, a few lines
 * per step (session 5: 28-33% -> 32-37% of the peak on every shape).
 *
 * At 64 B of operands per cycle the 2 x 2 block needs all of L2's bandwidth
 * when both operands come from L2. A block's A chunk is reused by the
 * group's panels, so it should stay in L1 while B streams past: B tiles are
 * loaded with TILELOADDT1 (AMX_BT1), a load hinted as not reused, which
 * keeps B from evicting A. Then only the first panel of a block reads A from
 * L2. Where the A chunk fits L1 (K up to ~1400 int8) that halves the L2
 * traffic. Session 11, h200-host Xeon, two calls, 3 rounds each paired with
 * the tile peak (docs/bench/xeon-s11-run39.txt, run42.txt), medians
 * TILELOADD -> TILELOADDT1: int8 512 x 1152 x 896 33% -> 36-40%,
 * 512 x 9728 x 896 39-40% -> 47%, 512 x 2048 x 8192 35-40% -> 41-42%;
 * 512 x 8192 x 2048, int8 2048^2 and bf16 2048^2 within the host's noise
 * (48-52%, 35-43% and 39-46% both ways).
 *
 * The K chunk was 32 steps until session 15: a block's A chunk then filled
 * 64 KB for every K from 2048 int8, more than the 48 KB L1, and streamed
 * from L2 beside B. At 16 steps (32 KB) it stays. Run 68 (Xeon, 2 threads,
 * 2 rounds paired with the tile peak, 32 -> 16): int8 512 x 3072 x 2048
 * 50.0 -> 52.1%, 2048^2 45.2 -> 50.2%, 512 x 8192 x 2048 54.9 -> 59.9%,
 * 512 x 896 x 4864 43.2 -> 46.0%, 512 x 2048 x 8192 42.1 -> 40.6%; Llama
 * pp512 1020 -> 1262 t/s (4 runs each, interleaved). K = 896 (14 steps)
 * is one chunk either way.
 *
 * Tried and not kept (session 15, runs 64-65, docs/benchmarks-history-2.md): each
 * block's epilogue spread over the next block's K steps (the vector work in
 * the shadow of the tile products, no second C buffer): AMX_PROF put the
 * tile loop plus the spread epilogue at 23.0 Mcycles against 19.2 + 2.3 for
 * the two apart (512 x 9728 x 896), no overlap; a step's products B-major
 * (0, 2, 1, 3: two products of slack for each streamed B load instead of
 * one); the next block's A prefetched into L1 during a block's last panel.
 * All within the host's noise or below, by shape.
 *
 * Session 16 measured build options in one process against this build
 * (`make kbench-ab AMX_ALT=...`, `kbench -a 1 -p 5 -m 128`: each round the
 * tile peak, both builds in alternating order, the peak; median of the
 * rounds' ratios over 2 calls; an A/A control read 0.97-1.03x; run 74,
 * docs/benchmarks-history-2.md). Each lost or tied on every shape tried: each row
 * block running all its K chunks in turn, C between chunks in a 16 KB acc in
 * L1 and the group's whole-K B in L2 (0.85-0.93x, 1.05x on 2048^2); B tiles
 * prefetched into L1 one step ahead with NTA (0.74-0.95x) or two with T0
 * (0.80-1.01x); AMX_PG 8 (0.90-1.02x); MB 512 on K = 896 (0.85-0.98x); MB
 * 128 on K = 4864 / 8192 (0.84-0.90x).
 *
 * Session 17 (runs 77-78, kbench-ab as above with 8 rounds, the ratio taken
 * over pairs of rounds with each build first, beside an A/A control reading
 * 0.88-1.09x): where K is one chunk, each panel's B kept in L1 over the
 * task's row blocks and A streamed (TILELOADDT1 on A, plain loads on B; the
 * streamed tile then has two products of slack, B has one in this order):
 * 512 x 1152 x 896 1.10 / 0.98 / 1.04x, 896 x 896 1.02 / 0.94 / 1.05x, 9728
 * x 896 1.02 / 0.87 / 1.02x; the same with 512 rows per task 0.95x / 1.16x
 * (1152 / 9728 x 896, run 77). Not kept.
 *
 * Session 18 (run 82, the same harness) weighed the epilogue with
 * AMX_EPI_MEASURE builds: y's stores sent to an L1 sink made 512 x 9728 x
 * 896 1.33x faster (its 20 MB of f32 y are a quarter of the GEMM), 1152 x
 * 896 1.20x, 16384 x 2048 1.12x; no epilogue at all 1.49x on 1152 x 896.
 * Hence gemm_bf16y (y in bf16, half the bytes), which the engine runs on the
 * int8 gate|up projection. Run 85: without the epilogue the K = 896 shapes
 * run 1.42-1.62x, without the weights' traffic (every panel reading panel
 * 0's B) 0.83-1.01x; the down projection (K = 4864) the other way round
 * (0.95x, 1.18x). On K = 896 the epilogue, not the tile loop, is what keeps
 * the GEMM under 50% of the tile peak.
 *
 * Session 21 (runs 98-99, kbench-ab with both builds storing y in bf16 as
 * the engine does, 40 rounds; A/A 0.988-1.016x; the options' code is
 * docs/bench/scripts-s21/s21-options.diff): odd row blocks taking the
 * group's panels last to first (B's chunk reused across the block change)
 * 0.98-1.03x; y's full rows stored unmasked 0.98-1.04x; AMX_KOUTER in passes
 * of 8 panels 0.95-1.00x; the next row block's y lines into L2 (PREFETCHT1)
 * 0.98-1.02x, 1.095x once on 2048 x 2048 where the identical build read
 * 1.022x (so that shape's A/B moves 5-10% between calls); 512-row tasks for
 * A up to 4 MB 0.91-0.95x. None kept. One core alone reaches 1-7 points more
 * of its peak than two (run 100): the two cores' sharing is not the gap.
 *
 * The epilogue in the next block's shadow (AMX_SPREAD, session 22). The
 * vector work between two blocks does not overlap the tiles: nothing after
 * it starts until it is done, and it cannot start before the block's C is
 * tile-stored, so the AMX unit idles through it. tools/amx_tileloop.c ystore
 * (K = 896, one thread, cycles per product, the quietest of 3 reps; run 105):
 * no epilogue 18.6, the epilogue's vector work alone 21.3, to an L1 sink
 * 21.9, to y 24.2 (23.5 with y's lines fetched for writing); the epilogue
 * after the next block's first step 23.4; spread over the next block's steps
 * (2-3 rows after each step's products) 20.9, into the sink 19.4. So each
 * block's C goes to a scratch slot and its rows run after the
 * next block's K steps (block_steps; a task's last block runs its own at the
 * end). Set up once a block (epi_set: the columns' corrections and masks),
 * the rows inlined in the step loop: kbench-ab (run 107, y in bf16, A/A
 * 1.004x and 0.982x), the epilogue between blocks over this: 1152 x 896
 * 0.963x, 896 x 896 0.986x, 9728 x 896 0.933x, 16384 x 2048 0.954x, 896 x
 * 4864 1.001x, 2048 x 2048 1.004x. A first version that set each call's
 * rows up anew (dq_load per call, not inlined) lost 1-3.5% (run 106). The
 * y prefetch still pays with it (without: 0.977x, 0.963x on the K = 896
 * shapes). Not better in the tileloop: the colsum subtractions gone (s8
 * activations) 20.7 against 20.9; each y line demoted (CLDEMOTE) once
 * stored 40-45; y non-temporal 28.3.
 *
 * Session 23 (runs 111-113): the next block's first A tile loaded before a
 * block's C stores (AMX_PRELOAD, 1.035-1.049x on 5 of 6 shapes, above). What
 * the shipped loop still spends, by measurement builds against it: y's stores
 * sent to an L1 sink (AMX_EPI_MEASURE 9) 1.02-1.03x on 1152 x 896, 1.06x on
 * 9728 x 896; that and no y prefetch, so no y traffic at all (10), 1.16x and
 * 1.07x; no weight traffic (3) about 1.0x. So where y goes through the
 * caches (1152 x 896) its lines, fetched for ownership from L3, cost about
 * 12%; where it is streamed (9728 x 896: 10 MB, AMX_NT_BYTES) nothing is
 * fetched and the streamed stores cost 6-7%.
 *
 * Long K (session 29, the dev machine: a Sapphire Rapids-class VM, 48 KB
 * L1d and 2 MB L2 a core). Where K takes three chunks or more, C's round trip
 * through acc every AMX_KB steps, and the pack pass, cost more than A's
 * chunk in L1 saves. So where a task's A rows over all of K fit in
 * AMX_LONGK_L2 (70%) of L2 (not glu), the loop runs K in one chunk and
 * groups of one panel: per panel (its whole-K B, 152 KB at K = 4864, in L2
 * and prefetched there by the panel before), every row block runs all of K
 * with C in the tiles, A from L2 (each tile's rows read in place where the
 * stride allows: no pack pass). tools/amx_tileloop.c put the tile loop with
 * both operands from L2 at 63-66% of the peak on this machine, against 82-85%
 * with A in L1 and B streamed from L2: less per step, but no C round trips
 * and one epilogue per K / 64 steps. kbench-ab, 2 threads, int8, weights from
 * memory, the long-K loop over the chunked one (8 pairs of rounds each):
 * Qwen's down 512 x 896 x 4864 1.29x (in groups of 2 panels 1.13x, of 4
 * 1.11x: B's group then crowds A out of L2), 256 x 896 x 4864 1.30x, 128 x
 * 896 x 4864 1.25x, 512 x 896 x 3072 1.11x, 512 x 2048 x 5632 (A 1.4 MB)
 * 1.08x, bf16 256 x 896 x 4864 1.00x;
 * where A took 1.5 MB (512 x 896 x 6144) 0.97x and 2.2 MB (512 x 1536 x
 * 8960) 0.88x, hence the budget. Not where K takes two chunks (K up to 2048
 * int8 / 1024 bf16): there the chunked loop makes one C round trip a block,
 * and inside the engine (TANDEM_PROFILE=warm, Llama pp512) long K ran
 * Llama's q|k|v 3072 x 2048 at 0.69-0.84x and its o 2048 x 2048 at 1.00x,
 * though kbench-ab read 1.02-1.09x and 1.03x there (Qwen's down ran 1.11x
 * and 0.99x in two such runs, and Qwen pp512's GEMM share rose in all 5
 * interleaved pairs, docs/kernels.md). Session 30 found why: kbench's y was
 * one warm buffer. With y out of the caches (kbench -y 256) long K at two
 * chunks (AMX_LONGK_CHUNKS=1) runs 0.66x / 0.61x on 3072 / 2048 x 2048
 * (0.99x / 1.00x warm): one panel at a time, each block's 32 y lines miss,
 * and at these strides (multiples of 1 KB) nothing fetches them ahead
 * (AMX_YPF); with y non-temporal too it is 1.05x / 1.11x, below the
 * non-temporal y alone (1.11x / 1.16x). Tried with it, not kept: B-major tile
 * products (0.985x), B loaded without the streaming hint (0.996x); without
 * the next panel's B prefetched into L2 it runs 0.87x. The K = 896 shapes
 * are one chunk either way; one-panel groups there lose 9-12%.
 *
 * Where the K = 896 GEMMs' time goes on this machine (kbench-ab, the
 * measurement builds over the shipped one): no epilogue (2) 1.31x on 9728 x
 * 896 and 1152 x 896, y's stores to the sink (9) 1.12x and 1.06x, no weight
 * traffic (3) 1.00x and 1.19x, both (4) 1.51x and 1.71x; with the weights
 * warm in L2 (no -m) 1152 x 896 runs 1.12x. A measurement build that ran
 * silu(v) v on every output of the plain epilogue read 0.72x / 0.79x, and
 * 0.65x / 0.78x with rcp14 and a Newton step for the division: the glu
 * epilogue's exp is a real part of the gate|up GEMM's time, the divider not. */

/* bytes of one panel (32 columns x Kp, int8 or bf16) */
static inline size_t panel_bytes(const gemm_ctx *g)
{
    return (size_t)g->w->Kp * 32 * (g->is_q8 ? 1 : 2);
}

/* one tile product C[c] += A[a] B[b]: int8 (u8 x s8 into int32) or bf16 (into f32) */
#define TDP(c, a, b)                         \
    do {                                     \
        if (g->is_q8) _tile_dpbusd(c, a, b); \
        else _tile_dpbf16ps(c, a, b);        \
    } while (0)

/* the int8 correction of 32 columns of C from panel-order column n: 128
 * colsum and the weight scales (unused for bf16) */
typedef struct dq32 {
    __m512i c0, c1;
    __m512 s0, s1;
} dq32;

static inline dq32 dq_load(const gemm_ctx *g, int n)
{
    dq32 d = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    if (g->is_q8) {
        d.c0 = _mm512_slli_epi32(_mm512_loadu_si512(g->w->colsum + n), 7);
        d.c1 = _mm512_slli_epi32(_mm512_loadu_si512(g->w->colsum + n + 16), 7);
        d.s0 = _mm512_loadu_ps(g->w->pscale + n);
        d.s1 = _mm512_loadu_ps(g->w->pscale + n + 16);
    }
    return d;
}

/* one row of C (32 columns at c) as y values: int8 (q8; x the row's scale, broadcast), minus 128
 * colsum, times the scales; bf16 weights: C as it is */
static inline __attribute__((always_inline)) void dq_row(int q8, const dq32 *d, const float *c, __m512 x, __m512 *v0,
                                                         __m512 *v1)
{
    *v0 = _mm512_load_ps(c);
    *v1 = _mm512_load_ps(c + 16);
    if (q8) {
        __m512i c0 = _mm512_castps_si512(*v0), c1 = _mm512_castps_si512(*v1);
        c0 = _mm512_sub_epi32(c0, d->c0);
        c1 = _mm512_sub_epi32(c1, d->c1);
        *v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(c0), _mm512_mul_ps(d->s0, x));
        *v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(c1), _mm512_mul_ps(d->s1, x));
    }
}

/* One block's epilogue: y's rows m0 .. m0 + rows - 1 from its C [32][32]
 * of panel p, y's 32 columns from n0 = 32 p; or, for a glu weight, c from
 * gate panel p and cu from up panel p + 1, y's columns from n0 = 32 (p / 2)
 * = act(gate) * up. Columns past N are dropped. Set up once (epi_set), its
 * rows run in one go or a few at a time in the next block's shadow
 * (epi_rows, AMX_SPREAD). */
typedef struct epi_pend {
    dq32 dg, du;         /* the columns' int8 corrections: gate (or the panel's), up; for the lean SiLU
                            (SILU_LEAN) their scales times -log2 e and -ln 2, see silu_row */
    const float *c, *cu; /* its C in a scratch slot (glu: gate, up; else cu NULL) */
    int m0, n0;
    int rows, done;      /* rows in all (0: nothing pending) and rows already stored */
    __mmask32 k;         /* the columns within N, as 32 bf16 or two 16-float masks */
    int stream;          /* stored non-temporally: y is (g->nt) and all 32 columns are in it */
} epi_pend;

static inline void epi_set(const gemm_ctx *g, epi_pend *e, int m0, int rows, int p, const float *c, const float *cu)
{
    int n0 = 32 * (cu ? p / 2 : p), nc = g->N - n0 < 32 ? g->N - n0 : 32;
    e->dg = dq_load(g, 32 * p);
    e->du = cu ? dq_load(g, 32 * p + 32) : e->dg;
    if (cu && SILU_LEAN(g->is_q8, g->glu, g->yb != NULL)) {
        const __m512 lg = _mm512_set1_ps(-1.44269504088896341f), ln = _mm512_set1_ps(-0.693147180559945309f);
        e->dg.s0 = _mm512_mul_ps(e->dg.s0, lg);
        e->dg.s1 = _mm512_mul_ps(e->dg.s1, lg);
        e->du.s0 = _mm512_mul_ps(e->du.s0, ln);
        e->du.s1 = _mm512_mul_ps(e->du.s1, ln);
    }
    e->c = c;
    e->cu = cu;
    e->m0 = m0;
    e->n0 = n0;
    e->rows = rows;
    e->done = 0;
    e->k = nc >= 32 ? 0xffffffffu : (__mmask32)((1ull << nc) - 1);
    e->stream = !AMX_EPI_MEASURE && g->nt && nc == 32;
}

/* The fused gate/up's activations for a bf16 result (gemm_bf16y), to ~1e-4
 * relative where bf16 keeps 2^-8, in about half the instructions of
 * vec_exp.inc's (a ~2 ulp exp and a divide). 2^t = 2^f 2^floor(t): f = t -
 * floor(t) in [0, 1) by vreduceps (exact), 2^f by a degree-4 polynomial
 * fitted for relative error (a Remez fit: 2.6e-6 with the coefficients in
 * f32), scaled by vscalefps, which takes floor(t) itself (inf or 0 past
 * f32's range, so no clamp); 1 / (1 + e) by vrcp14ps (6.1e-5; 0 for inf).
 * For finite t (an infinite one gives NaN; the GEMM's C is finite). Until
 * session 66 f was t - round(t), by vroundscaleps and a subtraction. (A
 * degree-3 polynomial, 7.5e-5, would save one FMA more, but more of the
 * bf16 results would round the other way than test_kernels allows.)
 * attn_amx.c's vexp2 is the round(t) scheme at degree 5 (1.5e-7), for the
 * softmax, whose P enters the tiles as two bf16 terms. docs/kernels.md
 * "Numerics" has the measurements. */
static inline __m512 vexp2_lp(__m512 t)
{
    __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.0135341678f), f, _mm512_set1_ps(0.0520114601f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.241442755f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693003833f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.00000262f));
    return _mm512_scalef_ps(p, t);
}

/* x u / (1 + 2^t): silu(x) u with t = -x log2 e, gelu_tanh(x) u = 0.5 x (1 + tanh z) u with t = -2 z log2 e */
static inline __m512 vgate_lp(__m512 x, __m512 u, __m512 t)
{
    __m512 r = _mm512_rcp14_ps(_mm512_add_ps(vexp2_lp(t), _mm512_set1_ps(1.f)));
    return _mm512_mul_ps(_mm512_mul_ps(x, r), u);
}

static inline __m512 vsilu_mul_lp(__m512 x, __m512 u)
{
    return vgate_lp(x, u, _mm512_mul_ps(x, _mm512_set1_ps(-1.44269504088896341f)));
}

static inline __m512 vgelu_tanh_mul_lp(__m512 x, __m512 u)
{
    /* z = sqrt(2 / pi) (x + 0.044715 x^3), as vgelu_tanh_mul */
    __m512 z = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                             _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), _mm512_mul_ps(x, x)), x, x));
    return vgate_lp(x, u, _mm512_mul_ps(z, _mm512_set1_ps(-2.88539008177792681f)));
}

/* The lean SiLU (AMX_SILU_LEAN): one row's 32 outputs silu(g) u from the gate's and up's C (cg, cu),
 * g = a sg x and u = b su x (a, b: C less 128 colsum, as floats; x the row's scale, broadcast; sg, su
 * the columns' scales). With t = -g log2 e = a (sg (-log2 e)) x, so g = -t ln 2,
 *   silu(g) u = g u / (1 + 2^t) = (t b) ((su (-ln 2)) x) / (1 + 2^t),
 * the column factors set once a block (epi_set puts them in dg's and du's scales): 38 vector
 * instructions a row where dq_row twice and session 32's vsilu_mul_lp took 42 (2 of the 4 are
 * vexp2_lp's, which both take now). x enters each factor once, so nothing overflows that g u itself
 * would not; the f32 roundings add ~5e-7 to vexp2_lp's and vrcp14ps's errors (7.2e-5 at most in
 * all, a scalar model of the instructions over 2M random C, scales and x). */
static inline __attribute__((always_inline)) void silu_row(const dq32 *dg, const dq32 *du, const float *cg,
                                                           const float *cu, __m512 x, __m512 *v0, __m512 *v1)
{
    const __m512 one = _mm512_set1_ps(1.f);
    __m512 a0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(cg), dg->c0));
    __m512 a1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(cg + 16), dg->c1));
    __m512 b0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(cu), du->c0));
    __m512 b1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(cu + 16), du->c1));
    __m512 t0 = _mm512_mul_ps(a0, _mm512_mul_ps(dg->s0, x)), t1 = _mm512_mul_ps(a1, _mm512_mul_ps(dg->s1, x));
    __m512 r0 = _mm512_rcp14_ps(_mm512_add_ps(vexp2_lp(t0), one));
    __m512 r1 = _mm512_rcp14_ps(_mm512_add_ps(vexp2_lp(t1), one));
    *v0 = _mm512_mul_ps(_mm512_mul_ps(t0, b0), _mm512_mul_ps(_mm512_mul_ps(du->s0, x), r0));
    *v1 = _mm512_mul_ps(_mm512_mul_ps(t1, b1), _mm512_mul_ps(_mm512_mul_ps(du->s1, x), r1));
}

/* act(gate) * up for one row's 32 columns, by the weight's activation (glu: TM_KGLU_*); for a bf16 y
 * (bf16y) the SiLU and GELU-tanh to ~1e-4 (AMX_ACT_LP) */
static inline __attribute__((always_inline)) void glu_apply(int glu, int bf16y, __m512 *v0, __m512 *v1, __m512 u0,
                                                            __m512 u1)
{
    if (AMX_GLU_MEASURE) {
        *v0 = _mm512_mul_ps(*v0, u0);
        *v1 = _mm512_mul_ps(*v1, u1);
    } else if (glu == TM_KGLU_SILU && AMX_ACT_LP && bf16y) {
        *v0 = vsilu_mul_lp(*v0, u0);
        *v1 = vsilu_mul_lp(*v1, u1);
    } else if (glu == TM_KGLU_GELU_TANH && AMX_ACT_LP && bf16y) {
        *v0 = vgelu_tanh_mul_lp(*v0, u0);
        *v1 = vgelu_tanh_mul_lp(*v1, u1);
    } else if (glu == TM_KGLU_SILU) {
        *v0 = vsilu_mul_avx512(*v0, u0);
        *v1 = vsilu_mul_avx512(*v1, u1);
    } else if (glu == TM_KGLU_GELU) {
        *v0 = vgelu_mul_avx512(*v0, u0);
        *v1 = vgelu_mul_avx512(*v1, u1);
    } else {
        *v0 = vgelu_tanh_mul_avx512(*v0, u0);
        *v1 = vgelu_tanh_mul_avx512(*v1, u1);
    }
}

/* rows [i0, i1) of the pending block e: y[m0 + i][n0 ..] from C's row i. q8 (int8 weights), glu (0, or
 * e->cu's activation), bf16y and stream are constants where epi_rows calls it for the common cases,
 * so each gets its own loop. Everything a row needs is read into locals before the loop: the masked
 * stores may write any memory, so a field read through g or e in the loop would be read again after
 * every store. Session 34 (kbench-ab, 512 x 1152 x 896 int8, bf16 y): this loop over the one that read
 * g's and e's fields and took the glu, y and stream branches per row, 1.075x (one thread, warm) and
 * 1.095x (two threads, weights from memory, y out of the caches); 896 x 896 1.049x */
static inline __attribute__((always_inline)) void epi_loop(const gemm_ctx *g, const epi_pend *e, int i0, int i1,
                                                           int q8, int glu, int bf16y, int stream)
{
    const float *c = e->c, *cu = e->cu, *xs = q8 ? g->xs + e->m0 : NULL;
    const dq32 dg = e->dg, du = e->du;
    const size_t ldy = (size_t)g->N, at = (size_t)(e->m0 + i0) * ldy + e->n0;
    uint16_t *yb = bf16y ? g->yb + at : NULL;
    float *yf = bf16y ? NULL : g->y + at;
    const __mmask32 km = e->k;
    const __mmask16 k0 = (__mmask16)km, k1 = (__mmask16)(km >> 16);
    for (int i = i0; i < i1; i++) {
        const __m512 x = q8 ? _mm512_set1_ps(xs[i]) : _mm512_setzero_ps();
        __m512 v0, v1;
        if (SILU_LEAN(q8, glu, bf16y)) {
            silu_row(&dg, &du, c + i * 32, cu + i * 32, x, &v0, &v1);
        } else {
            dq_row(q8, &dg, c + i * 32, x, &v0, &v1);
            if (glu) {
                __m512 u0, u1;
                dq_row(q8, &du, cu + i * 32, x, &u0, &u1);
                glu_apply(glu, bf16y, &v0, &v1, u0, u1);
            }
        }
#if AMX_EPI_MEASURE == 1 || AMX_EPI_MEASURE == 9 || AMX_EPI_MEASURE == 10
        static _Thread_local _Alignas(64) float sink[32][32];
        _mm512_store_ps(sink[i], v0);
        _mm512_store_ps(sink[i] + 16, v1);
        continue;
#endif
        if (bf16y) { /* 32 bf16, one line; the instruction rounds to nearest even, a denormal to zero */
            uint16_t *yr = yb + (size_t)(i - i0) * ldy;
            __m512i h = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
            if (stream && !((uintptr_t)yr & 63)) _mm512_stream_si512((__m512i *)yr, h);
            else _mm512_mask_storeu_epi16(yr, km, h);
        } else {
            float *yr = yf + (size_t)(i - i0) * ldy;
            if (stream && !((uintptr_t)yr & 63)) {
                _mm512_stream_ps(yr, v0);
                _mm512_stream_ps(yr + 16, v1);
            } else {
                _mm512_mask_storeu_ps(yr, k0, v0);
                _mm512_mask_storeu_ps(yr + 16, k1, v1);
            }
        }
    }
}

/* the block's rows [e->done, to): the int8 GEMMs with a bf16 y cached (the engine's prefill
 * projections, the fused gate/up's SiLU) in loops of their own, the rest in one general loop */
static inline __attribute__((always_inline)) void epi_rows(const gemm_ctx *g, epi_pend *e, int to)
{
    const int i0 = e->done;
    e->done = to;
#if AMX_EPI_MEASURE == 12 || AMX_EPI_MEASURE == 13
    static _Thread_local __m512 sum; /* the measurement's sink */
    for (int i = i0; i < to; i++) {
        __m512 v0, v1;
        if (AMX_EPI_MEASURE == 13) {
            dq_row(g->is_q8, &e->dg, e->c + i * 32, _mm512_set1_ps(g->is_q8 ? g->xs[e->m0 + i] : 0.f), &v0, &v1);
        } else {
            v0 = _mm512_load_ps(e->c + i * 32);
            v1 = _mm512_load_ps(e->c + i * 32 + 16);
        }
        sum = _mm512_add_ps(sum, _mm512_add_ps(v0, v1));
    }
    return;
#endif
    const int glu = e->cu ? g->glu : 0;
    if (g->is_q8 && g->yb && !e->stream && !glu) epi_loop(g, e, i0, to, 1, 0, 1, 0);
    else if (g->is_q8 && g->yb && !e->stream && glu == TM_KGLU_SILU) epi_loop(g, e, i0, to, 1, TM_KGLU_SILU, 1, 0);
    else epi_loop(g, e, i0, to, g->is_q8, glu, g->yb != NULL, e->stream);
}

/* lines of y to fetch for writing over a block's steps (AMX_YPF): rows of `lines` (1 or 2) lines, ld bytes apart */
typedef struct ypf {
    const char *p;
    size_t ld;
    int rows, lines;
} ypf;

/* a task's epilogue state: the pending block, and the scratch slot(s) for the blocks' C */
typedef struct epi_state {
    _Alignas(64) float cs[AMX_EPI_SLOTS][2][32][32]; /* [slot][gate, up][32 rows][32 columns] */
    epi_pend pend;                       /* the block whose rows the next block's steps run */
    int slot;                            /* the slot the next block's C go to */
} epi_state;

/* AMX_PRELOAD: the tiles of a block's first step already loaded by the block before it (pre: 0
 * none, 1 its A tile 4, 2 that and its B tiles 6, 7), and where the next block's first step reads
 * (na, nb: NULL where no block follows within the chunk_run) */
typedef struct tpre {
    int pre;
    const uint8_t *na, *nb;
} tpre;

/* B tile t loaded from p (a panel's K step: rows 128 bytes apart), streamed past L1 (AMX_BT1) or not */
#define BLOAD(t, p)                                                 \
    do {                                                            \
        if (AMX_BT1) _tile_stream_loadd(t, p, 128);                 \
        else _tile_loadd(t, p, 128);                                \
    } while (0)

/* rows m .. m+31 (two tile rows; the second only if two) x panel p, K steps
 * [s0, s1): C [32][32] f32/int32 loaded from cin (rows ldin bytes apart), or
 * zero if cin is NULL, and stored to c (rows ld bytes apart); on the way,
 * l2lines cache lines from l2next are prefetched into L2, yp's lines (the
 * block's y, which its epilogue will store) fetched for writing, the earlier
 * block's pending epilogue pe run to its end, its rows spread over the
 * steps, and (AMX_PRELOAD) the next block's first tiles loaded */
static inline void block_steps(const gemm_ctx *g, int m, int two, int p, int s0, int s1, const uint8_t *cin,
                               size_t ldin, uint8_t *c, size_t ld, uintptr_t l2next, int l2lines, ypf yp,
                               epi_pend *pe, tpre tp)
{
    const uint8_t *A0 = g->xt + (size_t)(m / 16) * g->a_grp;
    const uint8_t *A1 = A0 + g->a_grp;
    const uint8_t *B = (const uint8_t *)g->w->panel + (size_t)p * panel_bytes(g);
    if (AMX_EPI_MEASURE == 3 || AMX_EPI_MEASURE == 4) {
        B = (const uint8_t *)g->w->panel;
        l2lines = 0;
    }
    const int nst = s1 - s0, ytot = yp.rows * yp.lines, yl2 = g->ypf == 2;
    int l2acc = 0, yacc = 0, yi = 0; /* spreads: l2lines and ytot lines evenly over the nst steps */
    int eacc = 0, eto = pe->done;      /* and pe's rows */
    if (!cin) {
        _tile_zero(0);
        _tile_zero(1);
        if (two) {
            _tile_zero(2);
            _tile_zero(3);
        }
    } else {
        _tile_loadd(0, cin, ldin);
        _tile_loadd(1, cin + 64, ldin);
        if (two) {
            _tile_loadd(2, cin + 16 * ldin, ldin);
            _tile_loadd(3, cin + 16 * ldin + 64, ldin);
        }
    }
    for (int s = s0; s < s1; s++) {
        const uint8_t *b = B + (size_t)s * 2048; /* 16 panel rows of 128 bytes */
        /* this block's share of the next B chunk, into L2, spread over its steps (without dividing) */
        for (l2acc += l2lines; l2acc >= nst; l2acc -= nst, l2next += 64) _mm_prefetch((const char *)l2next, _MM_HINT_T1);
        for (yacc += ytot; yacc >= nst; yacc -= nst, yi++) /* AMX_YPF: y's lines for the epilogue, for writing */
        {
            const char *yq = yp.p + (size_t)(yi >> (yp.lines - 1)) * yp.ld + (size_t)(yi & (yp.lines - 1)) * 64;
            if (yl2) _mm_prefetch(yq, _MM_HINT_T1);
            else __builtin_prefetch(yq, 1, 3);
        }
        if (!PRELOAD_ON || s > s0 || tp.pre < 2) {
            BLOAD(6, b);
            BLOAD(7, b + 64);
        }
        if (!PRELOAD_ON || s > s0 || !tp.pre) _tile_loadd(4, A0 + (size_t)s * g->a_step, g->a_ld);
        TDP(0, 4, 6);
        TDP(1, 4, 7);
        if (two) {
            _tile_loadd(5, A1 + (size_t)s * g->a_step, g->a_ld);
            TDP(2, 5, 6);
            TDP(3, 5, 7);
        }
        /* the earlier block's rows, while the tiles work: the products above do not wait for them */
        for (eacc += pe->rows; eacc >= nst; eacc -= nst) eto++;
        if (eto > pe->done) epi_rows(g, pe, eto);
    }
    pe->rows = pe->done = 0; /* all its rows ran (eto reached rows at the last step) */
    if (PRELOAD_ON && tp.na) { /* the next block's first tiles, while the last products drain */
        _tile_loadd(4, tp.na, g->a_ld);
        if (AMX_PRELOAD == 2) {
            BLOAD(6, tp.nb);
            BLOAD(7, tp.nb + 64);
        }
    }
    if (AMX_EPI_MEASURE == 7 && s0 == 0 && s1 == g->nsteps) return;
    /* Session 24 deferred these stores into the next block's first step, each just before that
     * tile's first product there (AMX_STORE_LATE, run 116): 0.95-1.00x on six shapes, 0.94-0.99x
     * with the B tiles preloaded too (A/A 0.96x, 1.01x); removed */
    _tile_stored(0, c, ld);
    _tile_stored(1, c + 64, ld);
    if (two) {
        _tile_stored(2, c + 16 * ld, ld);
        _tile_stored(3, c + 16 * ld + 64, ld);
    }
}

/* One K chunk [s0, s1) of rows [m0, m1) over the np panels from pg, in row
 * blocks of 32: C from and to acc (rows ACC_LD or ACC_K_LD floats apart, the
 * group's panel j at column 32 j), or in the last chunk through the
 * epilogue; each block prefetches its share of `lines` lines from each
 * panel's next B chunk nb[j] (see amx_block) */
static void chunk_run(const gemm_ctx *g, int m0, int m1, int pg, int np, int s0, int s1, float *acc, size_t acc_ld,
                      const uintptr_t *nb, int lines, epi_state *es)
{
    const size_t ld = acc_ld * sizeof(float);
    const int nblk = (m1 - m0 + 31) / 32, last = s1 == g->nsteps;
    int pre = 0;               /* AMX_PRELOAD: this block's first tiles loaded by the block before */
    for (int m = m0; m < m1; m += 32) {
        int bi = (m - m0) / 32, l0 = lines * bi / nblk, l1 = lines * (bi + 1) / nblk;
        for (int j = 0; j < np; j++) {
            uint8_t *c = (uint8_t *)(acc + (size_t)(m - m0) * acc_ld + 32 * j);
            PROF_T(t0);
            int h = g->glu ? j & 1 : 0; /* glu: gate (even panels) then up */
            float(*cs)[32][32] = es->cs[es->slot]; /* the last chunk's C of this block (glu: gate, up) */
            uint8_t *out = last ? (uint8_t *)cs[h] : c;
            size_t out_ld = last ? sizeof cs[0][0] : ld;
            ypf yp = {0};
            if (g->ypf && last && (!g->glu || h)) {
                int n0 = 32 * (g->glu ? (pg + j) / 2 : pg + j);
                yp.rows = m1 - m < 32 ? m1 - m : 32;
                yp.lines = g->yb ? 1 : 2;
                yp.ld = (size_t)g->N * (g->yb ? 2 : 4);
                yp.p = g->yb ? (const char *)(g->yb + (size_t)m * g->N + n0) : (const char *)(g->y + (size_t)m * g->N + n0);
                if (g->N - n0 < 32) yp.lines = 1; /* a last panel's columns past N: only the first line surely in y */
            }
            int jn = j + 1 < np ? j + 1 : 0, mn = j + 1 < np ? m : m + 32; /* the next block */
            tpre tp = {pre, NULL, NULL};
            if (PRELOAD_ON && mn < m1) {
                tp.na = g->xt + (size_t)(mn / 16) * g->a_grp + (size_t)s0 * g->a_step;
                tp.nb = (const uint8_t *)g->w->panel + (size_t)(pg + jn) * panel_bytes(g) + (size_t)s0 * 2048;
            }
            block_steps(g, m, m1 - m > 16, pg + j, s0, s1, s0 == 0 ? NULL : c, ld, out, out_ld,
                        nb[j] + (uintptr_t)l0 * 64, l1 - l0, yp, &es->pend, tp);
            pre = tp.na ? AMX_PRELOAD : 0;
            PROF_ADD(prof_tile, t0);
            if (AMX_EPI_MEASURE != 2 && AMX_EPI_MEASURE != 4 && AMX_EPI_MEASURE != 7 && last && (!g->glu || h)) {
                epi_set(g, &es->pend, m, m1 - m < 32 ? m1 - m : 32, pg + j - h, &cs[0][0][0],
                        g->glu ? &cs[1][0][0] : NULL);
                if (SPREAD_ON) {
                    es->slot = (es->slot + 1) % AMX_EPI_SLOTS; /* the next block's steps run this one's rows (block_steps) */
                } else {
                    PROF_T(t1);
                    epi_rows(g, &es->pend, es->pend.rows);
                    es->pend.rows = es->pend.done = 0;
                    PROF_ADD(prof_epi, t1);
                }
            }
        }
    }
}

/* one task: rows [m0, m1) (at most MB_MAX) x panels [p0, p1) (glu: pairs,
 * so panels [2 p0, 2 p1)), in the order above: per group, its K chunks.
 *
 * K outer (g->kouter: K in more than two chunks where long K does not apply,
 * i.e. the task's A rows over all of K are too large for L2; the task at
 * most MB rows and 16 panels, not glu): the other way round, per K chunk,
 * every group, C for all the task's panels in acc (ACC_K_LD, 540 KB at 256
 * rows x 16 panels), so each group reads the rows' A chunk (MB x 1 KB, 256
 * KB) from L2 instead of the whole A (MB x K: 2 MB at Llama's K = 8192)
 * from L3. Session 30, the dev machine (2 MB L2 a core), kbench-ab (8 pairs
 * of rounds, weights from memory): 512 x 2048 x 8192 (Llama's down) 1.13x
 * (1.14x in groups of 8 panels, 1.11x of 2; K chunks of 32 steps 0.97x);
 * at K = 2048, two chunks, 3072 x 2048 0.99x and 2048 x 2048 1.00x, so not
 * there. Inside the engine (TANDEM_PROFILE=warm, 5 interleaved pairs of
 * Llama pp512): its down 3945 -> 4469 GOP/s (medians), pp512's GEMM share
 * 33.8% -> 37.1%, 1434 -> 1512 t/s, all 5 pairs up. Sessions 20 and 22 had
 * measured it on the h200-host Xeon at 0.95-1.00x on Llama's down. */
static void amx_block(void *ctx, int m0, int m1, int p0, int p1, int worker)
{
    const gemm_ctx *g = ctx;
    if (g->glu) {
        p0 *= 2;
        p1 *= 2;
    }
    float *acc = g->acc + (size_t)worker * ACC_WORKER;
    const uint8_t *pan = (const uint8_t *)g->w->panel;
    const size_t pbytes = panel_bytes(g);
    const int ns = g->nsteps;
    uintptr_t nb[AMX_PG];
    epi_state es; /* the blocks' C for their epilogues, and the one pending (AMX_SPREAD) */
    es.pend = (epi_pend){0};
    es.slot = 0;
    tm_kamx_config();
    if (g->kouter && m1 - m0 <= MB && p1 - p0 <= 16) {
        for (int s0 = 0; s0 < ns; s0 += AMX_KB) {
            int s1 = s0 + AMX_KB < ns ? s0 + AMX_KB : ns;
            for (int pg = p0; pg < p1; pg += AMX_PG) {
                int np = p1 - pg < AMX_PG ? p1 - pg : AMX_PG;
                /* next: the following group's panels in this chunk, or the first group's in the next chunk */
                int nxt = pg + AMX_PG < p1, lines = nxt ? (s1 - s0) * 32 : s1 < ns ? (s1 + AMX_KB < ns ? AMX_KB : ns - s1) * 32 : 0;
                for (int j = 0; j < np; j++)
                    nb[j] = (uintptr_t)(pan + (size_t)(nxt ? pg + AMX_PG + j : p0 + j) * pbytes + (size_t)(nxt ? s0 : s1) * 2048);
                chunk_run(g, m0, m1, pg, np, s0, s1, acc + 32 * (pg - p0), ACC_K_LD, nb, lines, &es);
            }
        }
    } else {
        const int kb = g->kb, gp = g->pg;
        for (int pg = p0; pg < p1; pg += gp) {
            int np = p1 - pg < gp ? p1 - pg : gp;
            for (int s0 = 0; s0 < ns; s0 += kb) {
                int s1 = s0 + kb < ns ? s0 + kb : ns, last = s1 == ns;
                /* the B chunk each panel needs next: its K steps from s1, or the next group's first
                   (nsn steps), spread over the row blocks */
                int nsn = last ? (ns < kb ? ns : kb) : (s1 + kb < ns ? kb : ns - s1);
                for (int j = 0; j < np; j++)
                    nb[j] = last ? (uintptr_t)(pan + (pg + j + gp) * pbytes)
                                 : (uintptr_t)(pan + (pg + j) * pbytes + (size_t)s1 * 2048);
                chunk_run(g, m0, m1, pg, np, s0, s1, acc, ACC_LD, nb, nsn * 32, &es);
            }
        }
    }
    epi_rows(g, &es.pend, es.pend.rows); /* the task's last block's, where no block followed it */
    _tile_release();
    if (g->nt) _mm_sfence(); /* the non-temporal stores are weakly ordered: drain before the pool's join */
}

/* ---- entry points -------------------------------------------------------------- */

/* Rows per task. MB (256) rows: at M = 512 the two workers take the two row
 * halves of one panel range at a time, so each streams every panel into its
 * own L2. With AMX_MB_WIDE, where the A rows (M x K int8, twice that bf16)
 * fit in half of L2 and N is wide enough for 16-panel tasks to spread (N >=
 * 4096), a task takes all 512 rows of its panels: the workers read disjoint
 * panels, each weight byte reaches one L2, and A stays there across tasks.
 * Session 20, kbench-ab (40 rounds of 0.05 s a build, int8, M = 512). Run
 * 92, 512 rows for every shape: 512 x 16384 x 2048 1.067x, 2048 x 8192 (A 4
 * MB) 1.026x, 896 x 4864 (A 2.4 MB, 28 panels) 0.883x. Run 93, this rule:
 * 16384 x 2048 (Llama's gate|up) 1.088x, 8192 x 2048 1.027x, 9728 x 896
 * (Qwen's gate|up) 1.000x; the shapes it leaves, as controls, 1.012x (2048
 * x 8192) and 0.992x (1152 x 896). */
static int rows_per_task(const tm_kweight *w, int M, int is_q8)
{
    size_t a_bytes = (size_t)M * w->Kp * (is_q8 ? 1 : 2);
    return AMX_MB_WIDE && M > MB && a_bytes <= ((size_t)1 << 20) && w->Np >= 4096 ? MB_WIDE : MB;
}

/* the long-K budget: AMX_LONGK_BYTES, or AMX_LONGK_L2 percent of this CPU's L2 (read once) */
static size_t longk_budget(void)
{
    static _Atomic size_t l2;
    if (AMX_LONGK_BYTES != 0) return AMX_LONGK_BYTES;
    size_t b = l2;
    if (!b) {
        long r = sysconf(_SC_LEVEL2_CACHE_SIZE);
        l2 = b = r > 0 ? (size_t)r : (size_t)2 << 20;
    }
    return b / 100 * AMX_LONGK_L2;
}

/* Split N (AMX_SPLIT, session 32). Where K is one chunk (no C round trip
 * through acc, so a task may take any number of rows), N >= 4096 and A
 * within 1 MB, each worker takes one range of N / workers panels (split by
 * panel, not by group) with all the rows, instead of tm_kgemm_run's ranges
 * in units of 4 panels: Qwen's gate|up (152 pairs) then splits 76 / 76
 * where 38 units of 4 gave 20 tasks. kbench-ab (dev, 2 threads, weights
 * over 128 MB, y over 256 MB, 6 pairs of rounds), split over the ranges
 * before: 512 x 9728 x 896 1.043x; 2 ranges a worker 0.98-1.00x and 4
 * 0.98-0.99x of one. 1152 x 896 and 896 x 896 read 1.07x there but 0.93x
 * and 0.90x inside the engine: the norm pass before them leaves each
 * worker's half of A in its own L2 (homed rows), and a split task reads all
 * of A, half from the other core; hence N >= 4096, where A is read once per
 * 4-panel group of many. K in two chunks (512 rows through acc) 0.85-0.88x
 * on 3072 and 2048 x 2048. In the engine (Qwen pp512, 6 interleaved pairs,
 * docs/benchmarks.md "Session 32") the fused gate|up 5160 -> 5265 GOP/s. */
static int run(const tm_kweight *w, const tm_kact *x, const void *xr, size_t ld_bytes, const float *xs,
               tm_kbuf *ws, size_t off, float *y, uint16_t *yb, struct tm_pool *pool, int is_q8)
{
    int nsteps = is_q8 ? w->Kp / 64 : w->Kp / 32;
    pack_job pj = {xr, ld_bytes, x->M, nsteps, tm_kbuf_at(ws, off)};
    float *acc = (float *)(pj.out + (size_t)((x->M + 15) / 16) * nsteps * 1024);
    gemm_ctx g = {w, pj.out, (size_t)nsteps * 1024, 64, 1024, nsteps, xs, x->M, w->N, is_q8,
                  (size_t)x->M * w->N * (yb ? 2 : 4) >= AMX_NT_BYTES, w->glu, y, yb, acc, 0, AMX_KB, AMX_PG, 0};
    /* y's lines fetched where its stores are plain: for writing into L1 (1) where a block's 32 rows fall
       in 8 or more of L1's 64 sets (the rows not a multiple of 1 KB apart), else into L2 (2): rows 8 KB
       apart (N = 2048 f32) put the block's 64 lines in 2 sets of 12 ways, and there run 90 measured the
       L1 prefetch 6% slower; without any, stores to lines out of the caches can hold up the next tile
       loads (session 34, a throwaway probe: two such stores a K step took the loaded 2 x 2 loop from
       16.9 to 25-28 cycles a product; one variant of the probe read otherwise). Into L2, session 34 (kbench-ab, 2 threads, weights and y out of
       the caches): 512 x 2048 x 2048 1.116x, 3072 x 2048 1.070x, 2048 x 8192 1.014x */
    g.ypf = !AMX_YPF || !EPI_AS_SHIPPED || AMX_EPI_MEASURE >= 10 || g.nt ? 0
            : ((size_t)w->N * (yb ? 2 : 4)) % 1024 != 0 ? 1 : 2;
    /* long K: where K takes more than two chunks and a task's A rows over all of K fit the budget (not
       glu; see "long K" for why not two) */
    int mb = rows_per_task(w, x->M, is_q8);
    /* split N (AMX_SPLIT, above): K in one chunk, N >= 4096, A (all M rows) within 1 MB */
    int split = AMX_SPLIT && nsteps <= AMX_KB && w->Np >= 4096 && (size_t)x->M * w->Kp * (is_q8 ? 1 : 2) <= ((size_t)1 << 20);
    size_t a_task = (size_t)(x->M < mb ? x->M : mb) * w->Kp * (is_q8 ? 1 : 2);
    int longk = !w->glu && nsteps > AMX_LONGK_CHUNKS * AMX_KB && a_task <= longk_budget();
    g.kb = longk ? nsteps : AMX_KB;
    g.pg = longk ? 1 : AMX_PG;
    /* K outer: where K takes more than two chunks and long K does not apply (A too large for L2) */
    int kchunks = (nsteps + AMX_KB - 1) / AMX_KB;
    g.kouter = !w->glu && !longk && (AMX_KOUTER == 2 ? kchunks > 1 : AMX_KOUTER == 1 && kchunks > 2);
    /* The rows as they are (AMX_INPLACE) when every tile has 16 rows, K is one chunk (the block's A
       rows are then read whole, from L1 by the group's panels or, long K, from L2) and a tile's 16
       lines fall in 16 different L1 sets (of 64: the stride in lines shares at most a factor 4 with
       64): Qwen's K = 896 (14 lines) and 4864 (76), not 2048 (32). See "packing x" above for the
       measurements, and "long K" (in place there over packed, Qwen's down: 1.12x). */
    size_t lines = ld_bytes / 64;
    if (AMX_INPLACE && x->M % 16 == 0 && nsteps <= g.kb && ld_bytes % 64 == 0 && (lines & 7) != 0 &&
        (size_t)nsteps * 64 <= ld_bytes) {
        g.xt = xr;
        g.a_grp = 16 * ld_bytes;
        g.a_ld = ld_bytes;
        g.a_step = 64;
    } else {
        tm_pool_run(pool, (x->M + 15) / 16, pack_task, &pj);
    }
    PROF_CALL();
    if (split) {
        tm_kgemm_run_split(x->M, w->Np, MB_WIDE, AMX_SPLIT, amx_block, &g, pool);
        return TM_OK;
    }
    tm_kgemm_run(x->M, w->Np, mb, amx_block, &g, pool);
    return TM_OK;
}

/* checks done: w's dtype and panels and x's K (glu or not); y f32 or yb bf16 */
static int gemm_any(const tm_kweight *w, const tm_kact *x, float *y, uint16_t *yb, tm_kbuf *ws, struct tm_pool *pool)
{
    if (w->dtype == TM_DT_BF16) {
        size_t prep = tm_kact_need_bf16(x);
        if (tm_kbuf_reserve(ws, prep + pack_bytes(w, x->M, w->Kp / 32, pool) + 64)) return TM_E_NOMEM;
        const uint16_t *xb = tm_kact_get_bf16(x, ws, 0, tm_kavx512_f32_to_bf16, pool);
        return run(w, x, xb, (size_t)tm_kact_ld(x->K) * 2, NULL, ws, prep, y, yb, pool, 0);
    }
    size_t prep = tm_kact_need_q8(x);
    if (tm_kbuf_reserve(ws, prep + pack_bytes(w, x->M, w->Kp / 64, pool) + 64)) return TM_E_NOMEM;
    const float *xs;
    const uint8_t *xq = tm_kact_get_q8(x, ws, 0, tm_kavx512_quant_q8, &xs, pool);
    return run(w, x, xq, (size_t)tm_kact_ld(x->K), xs, ws, prep, y, yb, pool, 1);
}

static int gemm_bf16(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    return tm_kcheck_gemm(w, x, TM_DT_BF16) ? TM_E_INVALID : gemm_any(w, x, y, NULL, ws, pool);
}

static int gemm_q8(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    return tm_kcheck_gemm(w, x, TM_DT_Q8PC) ? TM_E_INVALID : gemm_any(w, x, y, NULL, ws, pool);
}

/* a glu weight (tm_kpack_glu) checked as the plain GEMM weight it is made of */
static int check_glu(const tm_kweight *w, const tm_kact *x)
{
    tm_kweight plain = *w;
    plain.glu = 0;
    return tm_kcheck_gemm(&plain, x, w->dtype);
}

/* y[M][F] = act(x gate^T) * (x up^T) on a tm_kpack_glu weight */
static int gemm_glu(const tm_kweight *w, const tm_kact *x, float *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (!w || !w->glu || check_glu(w, x)) return TM_E_INVALID;
    return gemm_any(w, x, y, NULL, ws, pool);
}

/* gemm_bf16 / gemm_q8 by w's encoding, or gemm_glu on a glu weight, y stored as bf16 */
static int gemm_bf16y(const tm_kweight *w, const tm_kact *x, uint16_t *y, tm_kbuf *ws, struct tm_pool *pool)
{
    if (!w || (w->dtype != TM_DT_BF16 && w->dtype != TM_DT_Q8PC)) return TM_E_INVALID;
    if (w->glu ? check_glu(w, x) : tm_kcheck_gemm(w, x, w->dtype)) return TM_E_INVALID;
    return gemm_any(w, x, NULL, y, ws, pool);
}

void tm_kvariant_amx(tm_kernels *k)
{
    k->gemm_bf16 = gemm_bf16;
    k->gemm_q8 = gemm_q8;
    k->gemm_glu = gemm_glu;
    k->gemm_bf16y = gemm_bf16y;
    tm_kattn_fill_amx(k);
}
