/* engine/cpu/gemv_gfni.c: the int4 / int6 decode GEMV (gemv_q4.inc) built
 * with GFNI for its nibble split: AVX-512 + GFNI (the Makefile's _gfni.c
 * units), chosen by tm_kmm_fill_avx512 only where tm_cpu reports GFNI. */
#include <stddef.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

#define AI static inline __attribute__((always_inline))

#define Q4_GFNI 1
#define Q4_GEMV_NAME tm_kgemv_q4_avx512_gfni
#include "engine/cpu/gemv_q4.inc"
