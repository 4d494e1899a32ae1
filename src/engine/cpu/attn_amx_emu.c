/* engine/cpu/attn_amx_emu.c: attn_amx.c with its tile instructions emulated
 * (amx_emu.h): the "amx-emu" kernels' prefill attention. */
#include "engine/cpu/amx_emu.h"

#include "engine/cpu/attn_amx.c"
