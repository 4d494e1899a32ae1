/* engine/cpu/kmeasure_amx.c: the AMX tile peaks, the ceilings prefill GEMMs are
 * compared with (tandem bench --ceilings, tools/kbench peak). Four independent
 * C tiles, TDPBF16PS / TDPBUSD back to back, each 16 x 16 x 32 (bf16) or
 * 16 x 16 x 64 (int8) multiply-adds:
 *   - the peak: A and B loaded once, nothing but the products (issue 5's
 *     ceiling);
 *   - loaded: the four operand tiles of a 2 x 2 block of C (gemm_amx.c's) loaded
 *     again before each four products, from L1 (B's two tiles side by side at
 *     stride 128, as a panel lays them out): what a GEMM must at least do.
 * The two differ on the dev machine's Xeon though L1 keeps up (session 33,
 * docs/kernels.md "Known limits"): with non-zero operands the loaded loop runs
 * at ~0.8x the peak, at ~1.0x where one operand is all zero. Called only where
 * CPUID reports AMX and Linux granted XTILEDATA. */
#include <stdint.h>
#include <string.h>

#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

/* iters x 8 tile products on this thread (loaded: each four after their four
   tile loads); returns the ops done (2 per multiply-add) */
double tm_kamx_peak_run(int int8, int loaded, long iters);

/* one 2 x 2 block's K step: C[0..3] += A[4, 5] x B[6, 7] (a, b, loaded: tm_kamx_peak_run's) */
#define STEP(dp)                                      \
    do {                                              \
        if (loaded) {                                 \
            _tile_loadd(6, b, 128);                   \
            _tile_loadd(7, b + 64, 128);              \
            _tile_loadd(4, a, 64);                    \
        }                                             \
        dp(0, 4, 6);                                  \
        dp(1, 4, 7);                                  \
        if (loaded) _tile_loadd(5, a + 1024, 64);     \
        dp(2, 5, 6);                                  \
        dp(3, 5, 7);                                  \
    } while (0)

double tm_kamx_peak_run(int int8, int loaded, long iters)
{
    static _Alignas(64) uint8_t a[2048], b[2048]; /* A's two tiles of 16 rows x 64 bytes; B's two, side by side */
    static _Alignas(64) float c[256];
    for (int i = 0; i < 2048; i++) a[i] = b[i] = (uint8_t)(i * 7 + 1);
    tm_kamx_config();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 1024, 64);
    _tile_loadd(6, b, 128);
    _tile_loadd(7, b + 64, 128);
    for (long i = 0; i < iters; i++) {
        if (int8) {
            STEP(_tile_dpbusd);
            STEP(_tile_dpbusd);
        } else {
            STEP(_tile_dpbf16ps);
            STEP(_tile_dpbf16ps);
        }
    }
    _tile_stored(0, c, 64); /* keep the products live */
    _tile_release();
    return (double)iters * 8 * 16 * 16 * (int8 ? 64 : 32) * 2;
}
