/* engine/cpu/ops_avx2.c: the small ops for AVX2 (ops_vec.inc over
 * vec_avx2.h), and the "avx2" variant's table. */
#include <math.h>
#include <string.h>

#include "engine/cpu/kernels-impl.h"
#include "engine/cpu/vec_avx2.h"

#include "engine/cpu/ops_vec.inc"

void tm_kavx2_f32_to_bf16(uint16_t *y, const float *x, size_t n) { KFN(f32_to_bf16)(y, x, n); }

void tm_kavx2_quant_q8(uint8_t *yq, float *ys, int ld, const float *x, int T, int D)
{
    KFN(quant_q8)(yq, ys, ld, x, T, D);
}

void tm_kops_fill_avx2(tm_kernels *k) { KFN(fill_ops)(k); }

void tm_kvariant_avx2(tm_kernels *k)
{
    tm_kops_fill_avx2(k);
    tm_kmm_fill_avx2(k);
    tm_kattn_fill_avx2(k);
}
