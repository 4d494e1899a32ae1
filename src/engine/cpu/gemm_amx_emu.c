/* engine/cpu/gemm_amx_emu.c: gemm_amx.c with its tile instructions emulated
 * (amx_emu.h): the "amx-emu" kernels' GEMMs, tm_kvariant_amx_emu. */
#include "engine/cpu/amx_emu.h"

#include "engine/cpu/gemm_amx.c"
