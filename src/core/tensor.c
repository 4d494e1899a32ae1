/* core/tensor.c: dtype names, scalar conversions, the greedy argmax. */
#include "core/tensor.h"

#include <math.h>

static const struct { tm_dtype t; const char *name; size_t size; } dtypes[] = {
    {TM_DT_F32, "f32", 4},     {TM_DT_F16, "f16", 2},     {TM_DT_BF16, "bf16", 2},
    {TM_DT_I8, "i8", 1},       {TM_DT_I32, "i32", 4},     {TM_DT_U8, "u8", 1},       {TM_DT_Q8PC, "int8", 0},
    {TM_DT_Q4PC, "int4pc", 0}, {TM_DT_Q4G64, "int4g64", 0}, {TM_DT_Q4G32, "int4g32", 0},
    {TM_DT_Q6G64, "int6g64", 0},
};

const char *tm_dtype_name(tm_dtype t)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].t == t) return dtypes[i].name;
    return "?";
}

int tm_dtype_from_name(const char *s)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, s) == 0) return (int)dtypes[i].t;
    return -1;
}

size_t tm_dtype_size(tm_dtype t)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].t == t) return dtypes[i].size;
    return 0;
}

int64_t tm_tensor_numel(const tm_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

float tm_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    tm_f32_bits b = {.u = u};
    return b.f;
}

uint16_t tm_f32_to_f16(float f)
{
    tm_f32_bits b = {.f = f};
    uint32_t u = b.u;
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);     /* NaN */
    if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);    /* overflow -> inf */
    if (absu < 0x38800000u) {                                      /* subnormal or zero */
        if (absu < 0x33000000u) return (uint16_t)sign;
        uint32_t e = absu >> 23;
        uint32_t m = (absu & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                                  /* 14 + (113 - e) - 1 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = absu - 0x38000000u;                               /* rebias 127 -> 15 */
    uint32_t h = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

void tm_to_f32(float *dst, const void *src, tm_dtype t, size_t n)
{
    const uint16_t *h = src;
    switch (t) {
    case TM_DT_F32: memcpy(dst, src, n * 4); break;
    case TM_DT_BF16: for (size_t i = 0; i < n; i++) dst[i] = tm_bf16_to_f32(h[i]); break;
    case TM_DT_F16: for (size_t i = 0; i < n; i++) dst[i] = tm_f16_to_f32(h[i]); break;
    default: break;
    }
}

/* tm_argmax_f32 (tensor.h). Greedy decoding (text/sampler.c, the CPU engines' tm_decode_args.argmax)
 * runs it on every token over the whole vocabulary (128K-152K logits): the running index the plain loop kept cost ~12 instructions a logit, ~0.1 ms a token, a tenth of a GPU decode step.
 * So blocks of 256 in two passes: each block's largest value in 16 lanes (`x > m ? x : m` is MAXPS's
 * own rule, NaN x keeping m, so the compiler vectorizes it without reordering anything), the first
 * block holding the overall largest, then the first index in that block that equals it. Dev (152K
 * logits, in cache, the portable x86-64 build): 131 -> 25 us a call (blocks of 64: 37 us, the serial
 * reduction of 16 lanes a block then showing). */
int32_t tm_argmax_f32(const float *logits, int32_t V)
{
    enum { BLK = 256, LANES = 16 };
    float best = -INFINITY;
    int32_t bblk = -1;
    for (int32_t b0 = 0; b0 < V; b0 += BLK) {
        float m = -INFINITY;
        if (V - b0 >= BLK) {
            float lane[LANES];
            for (int k = 0; k < LANES; k++) lane[k] = -INFINITY;
#pragma GCC unroll 16 /* the lanes then stay in registers */
            for (int j = 0; j < BLK; j += LANES)
                for (int k = 0; k < LANES; k++) {
                    const float x = logits[b0 + j + k];
                    lane[k] = x > lane[k] ? x : lane[k];
                }
            for (int k = 0; k < LANES; k++) m = lane[k] > m ? lane[k] : m;
        } else {
            for (int32_t i = b0; i < V; i++) m = logits[i] > m ? logits[i] : m;
        }
        if (m > best) best = m, bblk = b0; /* strictly: an earlier block keeps a tie */
    }
    if (bblk < 0) return -1; /* every logit NaN or -inf */
    for (int32_t i = bblk;; i++)
        if (logits[i] == best) return i;
}
