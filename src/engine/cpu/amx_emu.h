/* engine/cpu/amx_emu.h: the AMX tile instructions the kernels use, emulated
 * in C on the calling thread's own eight tiles, so that gemm_amx.c and
 * attn_amx.c run (slowly) on any CPU with AVX-512: the "amx-emu" kernels.
 * They exist for tests and debugging where there is no AMX (CI, the
 * development machine): the AMX kernels' blocking, packing, tails and
 * epilogues are checked against the scalar reference everywhere, and only
 * their speed needs the real unit.
 *
 * Included first by the thin units gemm_amx_emu.c and attn_amx_emu.c, which
 * build the same sources (compiled for AVX-512, without AMX) with the tile
 * intrinsics below replaced and their exported names suffixed _emu. The
 * semantics are the SDM's for palette 1: a tile has rows[t] rows of colsb[t]
 * bytes; loads zero what lies past them; TDPBUSD adds u8 x s8 products in
 * groups of four into int32 (wrapping), TDPBF16PS bf16 x bf16 products in
 * pairs into f32, both over K = colsb(A) / 4. */
#ifndef TM_AMX_EMU_H
#define TM_AMX_EMU_H

#include <stddef.h>

#include <immintrin.h>

void tm_amx_emu_loadconfig(const void *cfg);
void tm_amx_emu_release(void);
void tm_amx_emu_zero(int t);
void tm_amx_emu_load(int t, const void *base, size_t stride);
void tm_amx_emu_store(int t, void *base, size_t stride);
void tm_amx_emu_dpbusd(int c, int a, int b);
void tm_amx_emu_dpbf16ps(int c, int a, int b);

#undef _tile_loadconfig
#undef _tile_release
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_dpbusd
#undef _tile_dpbf16ps
#define _tile_loadconfig(cfg) tm_amx_emu_loadconfig(cfg)
#define _tile_release() tm_amx_emu_release()
#define _tile_zero(t) tm_amx_emu_zero(t)
#define _tile_loadd(t, base, stride) tm_amx_emu_load((t), (base), (size_t)(stride))
#define _tile_stream_loadd(t, base, stride) tm_amx_emu_load((t), (base), (size_t)(stride))
#define _tile_stored(t, base, stride) tm_amx_emu_store((t), (base), (size_t)(stride))
#define _tile_dpbusd(c, a, b) tm_amx_emu_dpbusd((c), (a), (b))
#define _tile_dpbf16ps(c, a, b) tm_amx_emu_dpbf16ps((c), (a), (b))

/* the units' exported names (kernels-impl.h declares both) */
#define tm_kvariant_amx tm_kvariant_amx_emu
#define tm_kattn_fill_amx tm_kattn_fill_amx_emu
#define tm_kamx_config tm_kamx_config_emu

#endif
