/* engine/cpu/kmeasure_amx.c: the AMX tile peak, the ceiling prefill GEMMs are
 * compared with (tandem bench --ceilings, tools/kbench peak). Four independent
 * C tiles, A and B loaded once: nothing but TDPBF16PS / TDPBUSD back to back,
 * each 16 x 16 x 32 (bf16) or 16 x 16 x 64 (int8) multiply-adds. Called only
 * where CPUID reports AMX and Linux granted XTILEDATA. */
#include <stdint.h>
#include <string.h>

#include "engine/cpu/kernels-impl.h"

#include <immintrin.h>

/* iters x 8 tile products on this thread; returns the ops done (2 per multiply-add) */
double tm_kamx_peak_run(int int8, long iters);

double tm_kamx_peak_run(int int8, long iters)
{
    static _Alignas(64) uint8_t a[1024], b[1024];
    static _Alignas(64) float c[256];
    for (int i = 0; i < 1024; i++) a[i] = b[i] = (uint8_t)(i * 7 + 1);
    tm_kamx_config();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    for (long i = 0; i < iters; i++) {
        if (int8) {
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
        } else {
            _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
            _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, c, 64); /* keep the products live */
    _tile_release();
    return (double)iters * 8 * 16 * 16 * (int8 ? 64 : 32) * 2;
}
