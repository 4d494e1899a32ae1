/* engine/cpu/gemm_amx_emu.c: gemm_amx.c with its tile instructions emulated
 * (amx_emu.h): the "amx-emu" kernels' GEMMs, tm_kvariant_amx_emu. Outputs
 * from 4 KB up take the non-temporal store path here (8 MB on the real
 * tiles), and K in three chunks or more takes the long-K loop only where a
 * task's A rows are 96 KB or less (70% of L2 on the real tiles), so the
 * tests' shapes run both store paths and both loops. */
#include "engine/cpu/amx_emu.h"

#define AMX_NT_BYTES 4096u
#define AMX_LONGK_BYTES (96u << 10)
#include "engine/cpu/gemm_amx.c"
