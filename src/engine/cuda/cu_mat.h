/* engine/cuda/cu_mat.h: the CUDA engine's weight matrices and their products (private to engine/cuda).
 *
 * A matrix W [N][K] lives on the device in one of two forms, chosen at bind by the stage's encoding and
 * the engine's roles:
 *   bf16  [N][K], for cuBLAS's tensor-core GEMMs (the prefill engine's form: any encoding, dequantized);
 *   packed, the package's own bytes (int4 g32 / g64 / per channel, int8 per channel; int6 g64 widened to
 *         int8 g64), for the decode engine: a step streams every weight, and reading 4.25 bits a weight
 *         instead of 16 is the decode's speed (cu_gemv.cu).
 * A packed matrix may keep its bf16 copy too (the engine's choice where memory allows): the GEMV reads a
 * weight once per 8 rows, so past ~16 rows a step reads more bytes than cuBLAS over bf16 does.
 * cu_mat_mul runs y[T][N] = x[T][K] · Wᵀ by the forms and T: packed by the GEMV for T <= gemv_max rows
 * (the engine passes its limit for the call), else bf16 through cuBLAS, the copy kept or the packed form
 * dequantized into the scratch (bf16 [N][K]; a prefill chunk on the decode engine: a pass over the weight
 * per chunk, 4.5 bytes a weight moved against T x 2 flops a weight).
 * Every call is on the given stream and may be captured into a CUDA graph (no allocation). */
#ifndef TM_ENGINE_CUDA_CU_MAT_H
#define TM_ENGINE_CUDA_CU_MAT_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/cuda/cuda-impl.h"

typedef struct cu_mat {
    int N, K;
    uint16_t *bf;                     /* bf16 [N][K], or NULL (packed only) */
    cu_qmat q;                        /* packed (q.q, q.s device memory the matrix owns), or q.q NULL (bf16 only) */
} cu_mat;

/* rows [row, row + n) of tensor t ([Nt][K], any encoding), one part of a matrix stacked from parts
 * (fused q|k|v, gate|up) */
typedef struct cu_part {
    const tm_tensor *t;
    int64_t row, n;
} cu_part;

typedef struct cu_mm {
    cublasHandle_t blas;
    cudaStream_t st;
    uint16_t *dq;                     /* scratch for a packed matrix dequantized: the largest N K bf16 */
    int gemv_max;                     /* rows up to which a packed matrix runs the GEMV */
} cu_mm;

/* a CUDA error as a tm status naming what failed ("cuda engine: WHAT: the driver's words") */
int cu_err(tm_err *err, cudaError_t e, const char *what);
#define CK(call, what)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return cu_err(err, e_, what);                                                           \
    } while (0)

/* dst[n] bf16 (device) from h [n] f32 (host), through the device f32 staging tmp of tmp_n floats */
int cu_up_bf16_into(cudaStream_t st, uint16_t *dst, const float *h, size_t n, float *tmp, size_t tmp_n, tm_err *err);

/* m = w [N][K] (host f32; NULL: an empty matrix) as bf16 */
int cu_mat_up_f32(cu_mat *m, cudaStream_t st, const float *w, int N, int K, float *tmp, size_t tmp_n, tm_err *err);

/* m = the parts stacked ([Σ n][K]) as bf16, read a block of rows at a time (any encoding tm_ref_rows_f32 reads;
 * the host never holds more than the staging's tmp_n values of them) */
int cu_mat_up_parts(cu_mat *m, cudaStream_t st, const cu_part *p, int n_parts, int64_t K, float *tmp, size_t tmp_n,
                    tm_err *err);

/* the view of rows [i n, (i + 1) n) of m (one of a stack of equal matrices: a layer's experts), in m's
 * forms; not owned (never cu_mat_free'd) */
cu_mat cu_mat_view(const cu_mat *m, int i, int n);

/* a packed m's bf16 copy beside it, from w [m->N][m->K] (host f32: the same weights dequantized) */
int cu_mat_add_bf16(cu_mat *m, cudaStream_t st, const float *w, float *tmp, size_t tmp_n, tm_err *err);

/* m = the parts stacked, packed: TM_OK; 1 (no error set) where they cannot stay packed (a plain
 * encoding, parts of different encodings, int8 rows of K % 16 != 0): the caller uploads bf16 */
int cu_mat_up_packed(cu_mat *m, cudaStream_t st, const cu_part *p, int n_parts, int64_t K, tm_err *err);

/* m = the parts stacked: packed where `packed` and their encoding allow (cu_mat_up_packed), else bf16
 * (cu_mat_up_parts) */
int cu_mat_up_stage(cu_mat *m, cudaStream_t st, const cu_part *p, int n_parts, int64_t K, int packed, float *tmp,
                    size_t tmp_n, tm_err *err);

/* *d = a device copy of h [n] f32 (h NULL: *d = NULL), landed before the call returns */
int cu_up_f32(float **d, cudaStream_t st, const float *h, size_t n, tm_err *err);

/* bytes of scratch (cu_mm.dq) a product over m may need: N K bf16 if packed only, else 0 */
size_t cu_mat_dq_bytes(const cu_mat *m);

/* y[T][N] f32 = x[T][K] bf16 · mᵀ */
int cu_mat_mul(const cu_mm *c, float *y, const uint16_t *x, const cu_mat *m, int T, tm_err *err);

/* the FFN's first product and activation (cuda-impl.h's cu_gemv_epi: ep->g [T][F] bf16 = act of
 * x · mᵀ): the GEMV's epilogue where m is packed and T <= gemv_max, else the product into gu
 * (f32 [T][N] scratch) and cu_glu */
int cu_mat_mul_act(const cu_mm *c, const cu_gemv_epi *ep, const uint16_t *x, const cu_mat *m, int T, float *gu, tm_err *err);

/* the residual add (and the next norm) after the product (cuda-impl.h's cu_gemv_res, ep's residual
 * fields: ep->x [T][N] += x · mᵀ + b, ...): the GEMV's epilogue where m is packed and T <= gemv_max,
 * else the product into a (f32 [T][N] scratch) and cu_residual */
int cu_mat_mul_res(const cu_mm *c, const cu_gemv_epi *ep, const uint16_t *x, const cu_mat *m, int T, float *a, tm_err *err);

void cu_mat_free(cu_mat *m);

#endif
