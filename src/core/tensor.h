/* core/tensor.h: element types, encodings and a non-owning tensor view.
 *
 * Shape legend used in comments throughout tandem (as in llm.c):
 *   B batch (sequences)   T tokens in a chunk / sequence   P past tokens (KV length)
 *   D hidden size         H query heads    Hk key/value heads    Dh head dim
 *   F feed-forward (intermediate) size   V vocabulary   L layers   E experts
 *   N output features (rows of a weight)  K input features (columns)
 * A linear weight is stored as in Hugging Face: [N][K] row-major, y = x W^T.
 *
 * Encodings (quantized dtypes) of a weight [N][K]; bit layouts are normative and
 * documented in docs/package-format.md:
 *   TM_DT_Q8PC   int8 per output channel, symmetric. data: int8 [N][K];
 *                scales: f32 [N]. w[n][k] = scale[n] * q[n][k].
 *   TM_DT_Q4PC, TM_DT_Q4G64, TM_DT_Q4G32
 *                int4 symmetric, group size G = K (per channel), 64 or 32.
 *                data: uint8 [N][K/2] packed in blocks of 32 elements: byte j
 *                (0..15) of a block holds element j in its low nibble and
 *                element j+16 in its high nibble, each stored as q+8, q in
 *                [-8, 7]. scales: f16 [N][K/G]. w = scale * q.
 *                K must be a multiple of 32 (and of G).
 *   TM_DT_Q6G64  int6 symmetric, group size 64 (an output head's decode copy).
 *                data: uint8, per row superchunks of 256 elements (the
 *                last may hold 64, 128 or 192): nibbles (the low 4 bits of
 *                q+32, packed like int4's blocks) then 64 bytes of their high
 *                2 bits; see quant/quant.h. scales: f16 [N][K/64].
 *                K must be a multiple of 64.
 */
#ifndef TM_CORE_TENSOR_H
#define TM_CORE_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum tm_dtype {
    TM_DT_F32 = 0,
    TM_DT_F16 = 1,
    TM_DT_BF16 = 2,
    TM_DT_I8 = 3,
    TM_DT_I32 = 4,
    TM_DT_U8 = 5,   /* raw bytes: the MXFP4 experts' blocks and scales, read at bind (model/bind.c) */
    TM_DT_Q8PC = 16,
    TM_DT_Q4PC = 17,
    TM_DT_Q4G64 = 18,
    TM_DT_Q4G32 = 19,
    TM_DT_Q6G64 = 20,
} tm_dtype;

#define TM_MAX_DIMS 4

/* A view of a tensor somewhere in memory (an mmapped file, an arena).
 * It does not own data or scales. */
typedef struct tm_tensor {
    const char *name;            /* e.g. "model.layers.0.self_attn.q_proj.weight" */
    tm_dtype dtype;
    int ndim;
    int64_t shape[TM_MAX_DIMS];  /* outermost first, HF order */
    const void *data;            /* element data (packed for quantized dtypes) */
    size_t nbytes;               /* bytes at data */
    const void *scales;          /* quantized dtypes only: f32 (Q8PC) or f16 (int4, int6), see above */
} tm_tensor;

const char *tm_dtype_name(tm_dtype t);     /* "bf16", "q4g64", ... */
int tm_dtype_from_name(const char *s);     /* -1 if unknown */
size_t tm_dtype_size(tm_dtype t);          /* bytes per element for plain types, 0 for quantized */
int64_t tm_tensor_numel(const tm_tensor *t);

/* The bit casts go through a union (C11 6.5.2.3), not memcpy: a memcpy takes
 * the local's address, and under ASan every call then poisoned and unpoisoned a
 * stack slot (the hottest instructions of the scalar GEMM's inner loop in a
 * profile of the sanitizer tier). Release builds compile both forms the same. */
typedef union tm_f32_bits {
    float f;
    uint32_t u;
} tm_f32_bits;

static inline float tm_bf16_to_f32(uint16_t h)
{
    tm_f32_bits b = {.u = (uint32_t)h << 16};
    return b.f;
}

/* round to nearest even; NaN stays NaN */
static inline uint16_t tm_f32_to_bf16(float f)
{
    tm_f32_bits b = {.f = f};
    uint32_t u = b.u;
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tm_f16_to_f32(uint16_t h);
uint16_t tm_f32_to_f16(float f);

/* tm_to_f32: convert n plain elements (F32/F16/BF16) at src to float. */
void tm_to_f32(float *dst, const void *src, tm_dtype t, size_t n);

/* tm_argmax_f32: greedy decoding's pick from logits [V]: the lowest index of the largest value, NaN
 * never (and -inf only where nothing is larger: then -1), +inf taken like any other. -1 where every
 * value is NaN or -inf. */
int32_t tm_argmax_f32(const float *logits, int32_t V);

#endif
