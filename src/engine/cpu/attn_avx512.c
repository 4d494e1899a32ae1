/* engine/cpu/attn_avx512.c: attention for AVX512 (attn_vec.inc over vec_avx512.h). */
#include <math.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx512.h"

#include "engine/cpu/attn_vec.inc"

void tm_kattn_fill_avx512(tm_kernels *k) { KFN(fill_attn)(k); }

int tm_kattn_prefill_avx512(const tm_kattn_prefill *a, tm_kbuf *ws, struct tm_pool *pool)
{
    return KFN(attn_prefill)(a, ws, pool);
}
