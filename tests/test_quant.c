/* tests/test_quant.c: weight encodings (quant/): sizes, shape rules, exact
 * bit layouts, rounding, round-trip error bounds, idempotence, the clipping
 * search, row-range quantization from bf16/f16 and bad input. */
#include "harness.h"

#include <stdint.h>

#include "quant/quant.h"

static const tm_dtype ALL_ENC[] = {TM_DT_F32, TM_DT_F16, TM_DT_BF16, TM_DT_Q8PC,
                                   TM_DT_Q4PC, TM_DT_Q4G64, TM_DT_Q4G32, TM_DT_Q6G64};
static const tm_dtype Q_ENC[] = {TM_DT_Q8PC, TM_DT_Q4PC, TM_DT_Q4G64, TM_DT_Q4G32, TM_DT_Q6G64};

/* a small deterministic PRNG for test data (splitmix64) */
static uint64_t rng_state = 0x1234567;
static double rnd_u01(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double rnd_gauss(void)
{
    return sqrt(-2.0 * log(rnd_u01())) * cos(6.283185307179586 * rnd_u01());
}
/* Student-t with 3 degrees of freedom: heavy tails, like real weights' outliers */
static double rnd_student3(void)
{
    double c = 0;
    for (int k = 0; k < 3; k++) {
        double z = rnd_gauss();
        c += z * z;
    }
    return rnd_gauss() / sqrt(c / 3.0);
}

static void fill_gauss(float *w, int64_t n, double sigma)
{
    for (int64_t i = 0; i < n; i++) w[i] = (float)(sigma * rnd_gauss());
}

static double sqerr(const float *a, const float *b, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++) e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return e;
}

static void test_sizes(void)
{
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_F32, 3, 64), 3 * 64 * 4);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_BF16, 3, 64), 3 * 64 * 2);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_F16, 3, 64), 3 * 64 * 2);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q8PC, 3, 64), 3 * 64);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q4PC, 3, 64), 3 * 32);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q4G64, 3, 128), 3 * 64);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q4G32, 3, 128), 3 * 64);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q6G64, 3, 256), 3 * 192);
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q6G64, 3, 192), 3 * (96 + 64)); /* a 192-element tail superchunk */
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q6G64, 1, 896), 3 * 192 + 64 + 64);
    CHECK_EQ_INT(tm_quant_scale_count(TM_DT_Q6G64, 3, 192), 9);
    CHECK_EQ_INT(tm_quant_group_size(TM_DT_Q6G64, 192), 64);
    CHECK(tm_quant_is_quantized(TM_DT_Q6G64) && tm_quant_is_encoding(TM_DT_Q6G64));
    CHECK_EQ_INT(tm_dtype_from_name("int6g64"), TM_DT_Q6G64);
    CHECK_EQ_INT(tm_quant_scale_count(TM_DT_BF16, 3, 128), 0);
    CHECK_EQ_INT(tm_quant_scale_count(TM_DT_Q8PC, 3, 128), 3);
    CHECK_EQ_INT(tm_quant_scale_count(TM_DT_Q4PC, 3, 128), 3);
    CHECK_EQ_INT(tm_quant_scale_count(TM_DT_Q4G64, 3, 128), 6);
    CHECK_EQ_INT(tm_quant_scale_count(TM_DT_Q4G32, 3, 128), 12);
    CHECK_EQ_INT(tm_quant_group_size(TM_DT_Q4PC, 96), 96);
    CHECK_EQ_INT(tm_quant_group_size(TM_DT_Q4G64, 128), 64);
    CHECK_EQ_INT(tm_quant_group_size(TM_DT_BF16, 128), 0);
    CHECK(tm_quant_is_quantized(TM_DT_Q4G32) && !tm_quant_is_quantized(TM_DT_BF16));
    CHECK(tm_quant_is_encoding(TM_DT_F16) && !tm_quant_is_encoding(TM_DT_I32));
}

static void test_shape_rules(void)
{
    tm_err err = {0};
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q4G64, 4, 100, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "int4g64") && strstr(err.msg, "K = 100") && strstr(err.msg, "multiple of 64"));
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q4G64, 4, 96, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q4G32, 4, 96, &err), TM_OK);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q6G64, 4, 96, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "int6g64") && strstr(err.msg, "multiple of 64"));
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q6G64, 4, 64, &err), TM_OK);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q4PC, 4, 96, &err), TM_OK);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q4PC, 4, 48, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "multiple of 32") != NULL);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q4G32, 4, 16, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q8PC, 4, 7, &err), TM_OK);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_BF16, 1, 1, &err), TM_OK);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q8PC, 0, 64, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "N = 0") != NULL);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_Q8PC, 4, -64, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "K = -64") != NULL);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_BF16, 4, (int64_t)1 << 31, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_BF16, (int64_t)1 << 20, (int64_t)1 << 21, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "2^40") != NULL);
    CHECK_EQ_INT(tm_quant_check_shape(TM_DT_I32, 4, 64, &err), TM_E_UNSUPPORTED);
    CHECK_EQ_INT(tm_quant_check_shape((tm_dtype)99, 4, 64, &err), TM_E_UNSUPPORTED);

    /* quantize and dequant refuse a bad shape too, without touching buffers */
    float w[100] = {0}, s[4] = {0}, out[100];
    uint8_t d[64];
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G64, w, 1, 100, d, s, NULL, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_quant_dequant(TM_DT_Q4G64, d, s, 1, 100, out, &err), TM_E_INVALID);
}

/* 32 values -8..7 then 7..-8: scale 1, nibbles j and 15 - j */
static void test_q4_layout(void)
{
    float w[32];
    for (int j = 0; j < 16; j++) {
        w[j] = (float)(j - 8);
        w[j + 16] = (float)(7 - j);
    }
    static const uint8_t expect[16] = {0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87,
                                       0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};
    const tm_dtype encs[] = {TM_DT_Q4PC, TM_DT_Q4G32};
    for (int e = 0; e < 2; e++) {
        uint8_t d[16];
        uint16_t s = 0; /* f16 */
        tm_err err = {0};
        CHECK_EQ_INT(tm_quant_quantize(encs[e], w, 1, 32, d, &s, NULL, &err), TM_OK);
        CHECK_NEAR(tm_f16_to_f32(s), 1.0, 0);
        CHECK(memcmp(d, expect, 16) == 0);
        int8_t q[32];
        tm_quant_q4_unpack_block(d, q);
        for (int j = 0; j < 32; j++) CHECK_EQ_INT(q[j], (int)w[j]);
        float out[32];
        tm_quant_dequant_row(encs[e], d, &s, 32, 0, out);
        CHECK(memcmp(out, w, sizeof w) == 0);
    }

    /* rounding: half to even; +7.5 clamps to 7; the -8 element sets d = 1 */
    float t[32] = {-8.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 6.5f, 7.5f, 0.49f, -3.51f};
    int expq[32] = {-8, 0, 2, 2, 0, -2, -2, 6, 7, 0, -4};
    uint8_t d[16];
    uint16_t s;
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G32, t, 1, 32, d, &s, NULL, NULL), TM_OK);
    CHECK_NEAR(tm_f16_to_f32(s), 1.0, 0);
    int8_t q[32];
    tm_quant_q4_unpack_block(d, q);
    int bad = 0;
    for (int j = 0; j < 32; j++) bad += q[j] != expq[j];
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(d[0], 0x80);                       /* q[0] = -8 -> 0, q[16] = 0 -> 8 */
    CHECK_EQ_INT(d[2], 0x8a);                       /* q[2] = 2 -> 10 */

    /* a positive extreme: d = 8 / -8 = -1, so 8 encodes as -8 and -3 as +3 */
    float p[32] = {8.0f, -3.0f, 2.0f};
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G32, p, 1, 32, d, &s, NULL, NULL), TM_OK);
    CHECK_NEAR(tm_f16_to_f32(s), -1.0, 0);
    tm_quant_q4_unpack_block(d, q);
    CHECK_EQ_INT(q[0], -8);
    CHECK_EQ_INT(q[1], 3);
    CHECK_EQ_INT(q[2], -2);

    /* +a and -a tie: the negative element sets the scale */
    float tie[32] = {4.0f, 1.0f, -4.0f};
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G32, tie, 1, 32, d, &s, NULL, NULL), TM_OK);
    CHECK_NEAR(tm_f16_to_f32(s), 0.5, 0);
    tm_quant_q4_unpack_block(d, q);
    CHECK_EQ_INT(q[0], 7);                          /* 8 clamps to 7 */
    CHECK_EQ_INT(q[2], -8);

    /* all-zero group: scale 0, q = 0 (bytes 0x88) */
    float z[64] = {0};
    uint8_t dz[32];
    uint16_t sz[2] = {1, 1};
    for (int j = 32; j < 64; j++) z[j] = (float)((j % 16) - 8) / 2.0f;   /* second group: m = -4 */
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G32, z, 1, 64, dz, sz, NULL, NULL), TM_OK);
    CHECK_EQ_INT(sz[0], 0);                        /* +0 */
    CHECK_NEAR(tm_f16_to_f32(sz[1]), 0.5, 0);                   /* m = -4 */
    int n88 = 0;
    for (int j = 0; j < 16; j++) n88 += dz[j] == 0x88;
    CHECK_EQ_INT(n88, 16);
    float out[64];
    tm_quant_dequant_row(TM_DT_Q4G32, dz, sz, 64, 0, out);
    CHECK(memcmp(out, z, sizeof z) == 0);
}

/* group 64 spans two blocks: the scale is shared, the blocks are separate */
static void test_q4g64_layout(void)
{
    float w[128];
    for (int j = 0; j < 128; j++) w[j] = (float)((j % 16) - 8) * (j < 64 ? 1.0f : 0.25f);
    uint8_t d[64];
    uint16_t s[2];
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G64, w, 1, 128, d, s, NULL, NULL), TM_OK);
    CHECK_NEAR(tm_f16_to_f32(s[0]), 1.0, 0);
    CHECK_NEAR(tm_f16_to_f32(s[1]), 0.25, 0);
    for (int b = 0; b < 4; b++)
        for (int j = 0; j < 16; j++) CHECK_EQ_INT(d[b * 16 + j], j | (j << 4));
}

/* int6: element k of a 448-wide row (a full superchunk, then a 192-element
 * tail) holds q = (7k mod 64) - 32, so every group has -32 and scale 1; the
 * bytes are checked against the layout of quant/quant.h written out here */
static void test_q6_layout(void)
{
    enum { K = 448 };
    float w[K];
    int q[K];
    for (int k = 0; k < K; k++) w[k] = (float)(q[k] = (7 * k) % 64 - 32);
    uint8_t d[192 + 96 + 64], e[192 + 96 + 64] = {0};
    uint16_t s[7];
    CHECK_EQ_INT(tm_quant_data_bytes(TM_DT_Q6G64, 1, K), sizeof d);
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q6G64, w, 1, K, d, s, NULL, NULL), TM_OK);
    for (int g = 0; g < 7; g++) CHECK_NEAR(tm_f16_to_f32(s[g]), 1.0, 0);
    for (int k = 0; k < K; k++) {
        int sup = k / 256, el = k % 256, nib = sup < 1 ? 128 : 96, a = el / 128, j = el % 128 / 32, i = el % 32;
        int p = 16 * j + i % 16, u = q[k] + 32;
        uint8_t *sc = e + 192 * sup;
        sc[64 * a + p] |= (uint8_t)((u & 15) << (i < 16 ? 0 : 4));
        sc[nib + p] |= (uint8_t)((u >> 4) << (4 * a + (i < 16 ? 0 : 2)));
    }
    CHECK(memcmp(d, e, sizeof d) == 0);
    int bad = 0;
    for (int k = 0; k < K; k++) bad += tm_quant_q6_at(d, K, k) != q[k];
    CHECK_EQ_INT(bad, 0);
    float out[K];
    tm_quant_dequant_row(TM_DT_Q6G64, d, s, K, 0, out);
    CHECK(memcmp(out, w, sizeof w) == 0);
    /* a positive extreme: d = 32 / -32 = -1; 31.5 |d| on the other side clamps to 31 */
    float p[64] = {32.0f, -31.5f, -3.0f, 2.5f};
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q6G64, p, 1, 64, d, s, NULL, NULL), TM_OK);
    CHECK_NEAR(tm_f16_to_f32(s[0]), -1.0, 0);
    CHECK_EQ_INT(tm_quant_q6_at(d, 64, 0), -32);
    CHECK_EQ_INT(tm_quant_q6_at(d, 64, 1), 31);
    CHECK_EQ_INT(tm_quant_q6_at(d, 64, 2), 3);
    CHECK_EQ_INT(tm_quant_q6_at(d, 64, 3), -2);   /* -2.5 to even */
}

static void test_q8_layout(void)
{
    float w[6] = {127.0f, -63.5f, 0.5f, 1.5f, -127.0f, 2.5f};
    int8_t q[6];
    float s;
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q8PC, w, 1, 6, q, &s, NULL, NULL), TM_OK);
    CHECK_NEAR(s, 1.0, 0);
    const int8_t e[6] = {127, -64, 0, 2, -127, 2};
    CHECK(memcmp(q, e, 6) == 0);

    /* two rows, one scale each; the quantizer never writes -128 */
    float w2[2][4] = {{0.1f, -0.2f, 0.3f, -0.4f}, {-1000.0f, 10.0f, 0.0f, 999.0f}};
    int8_t q2[8];
    float s2[2];
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q8PC, &w2[0][0], 2, 4, q2, s2, NULL, NULL), TM_OK);
    CHECK_NEAR(s2[0], 0.4f / 127.0f, 0);
    CHECK_NEAR(s2[1], 1000.0f / 127.0f, 0);
    CHECK_EQ_INT(q2[3], -127);
    CHECK_EQ_INT(q2[4], -127);
    CHECK_EQ_INT(q2[7], 127);
    CHECK_EQ_INT(q2[5], 1);                         /* 10 / 7.874 = 1.27 */
    /* a decoder accepts -128 */
    int8_t m[2] = {-128, 127};
    float sm = 0.5f, out[2];
    tm_quant_dequant_row(TM_DT_Q8PC, m, &sm, 2, 0, out);
    CHECK_NEAR(out[0], -64.0, 0);
    CHECK_NEAR(out[1], 63.5, 0);
}

/* |w - deq| <= |d|/2 wherever w/d is within the grid; the int4 side opposite
 * to the extreme can reach w/d up to 8 and clamps to 7 (error <= |d|). */
static void test_roundtrip_bounds(void)
{
    const int64_t N = 16, K = 256;
    float *w = malloc(sizeof(float) * N * K), *out = malloc(sizeof(float) * N * K);
    void *data = malloc(N * K * 4);
    float *sc = malloc(sizeof(float) * N * K);
    fill_gauss(w, N * K, 0.02);
    w[5] = 0.3f;      /* an outlier */
    w[K + 7] = -0.3f;
    for (size_t e = 0; e < sizeof ALL_ENC / sizeof ALL_ENC[0]; e++) {
        tm_dtype enc = ALL_ENC[e];
        tm_err err = {0};
        CHECK_EQ_INT(tm_quant_quantize(enc, w, N, K, data, sc, NULL, &err), TM_OK);
        CHECK_EQ_INT(tm_quant_dequant(enc, data, sc, N, K, out, &err), TM_OK);
        int64_t G = tm_quant_group_size(enc, K);
        int bad = 0, clamped = 0;
        for (int64_t i = 0; i < N * K; i++) {
            double diff = fabs((double)w[i] - out[i]);
            if (enc == TM_DT_F32) bad += diff != 0;
            else if (enc == TM_DT_BF16) bad += diff > fabs(w[i]) * (1.0 / 256);
            else if (enc == TM_DT_F16) bad += diff > fabs(w[i]) * (1.0 / 2048) + 3e-8;
            else {
                double sd = tm_quant_scale_at(enc, sc, (size_t)((i / K) * (K / G) + (i % K) / G));
                double d = fabs(sd), x = (double)w[i] / sd;
                double top = enc == TM_DT_Q6G64 ? 31.5 : 7.5;   /* the clamped side: q max + 1/2 */
                if (enc == TM_DT_Q8PC || x <= top) bad += diff > d / 2 * (1 + 1e-6);
                else { /* the f16 d is rounded away from zero, so |x| <= 8 (32) still */
                    clamped++;
                    bad += x > (top + 0.5) * (1 + 1e-6) || diff > d * (1 + 1e-6);
                }
            }
        }
        CHECKF(bad == 0, "%s: %d elements beyond the error bound", tm_dtype_name(enc), bad);
        if (enc == TM_DT_Q8PC) CHECK_EQ_INT(clamped, 0);
        /* dequant_row agrees with the whole-tensor dequant */
        float row[256];
        tm_quant_dequant_row(enc, data, sc, K, 9, row);
        CHECK(memcmp(row, out + 9 * K, sizeof row) == 0);
    }
    free(w);
    free(out);
    free(data);
    free(sc);
}

/* f16 scales across f16's range, subnormal steps included: every element
 * keeps the error bound (|d| / 2, or |d| for an opposite-sign element past
 * 7.5 / 31.5 |d|), and where d is a normal f16 the group's extreme encodes as
 * -8 / -32. (In the subnormal range the grid step is 2^-24, so d can be
 * coarser than m / -8; rounding it to nearest there could halve it and clamp
 * m itself: the quantizer rounds it away from zero.) */
static void test_f16_scale_range(void)
{
    enum { N = 8, K = 128 };
    static const tm_dtype enc[] = {TM_DT_Q4G32, TM_DT_Q4G64, TM_DT_Q4PC, TM_DT_Q6G64};
    float w[N * K], out[N * K];
    uint8_t d[N * K];
    uint16_t sc[N * K / 32];
    for (int e = 0; e < 4; e++)
        for (double sigma = 1e-9; sigma < 10.0; sigma *= 7.3) {
            fill_gauss(w, N * K, sigma);
            CHECK_EQ_INT(tm_quant_quantize(enc[e], w, N, K, d, sc, NULL, NULL), TM_OK);
            tm_quant_dequant(enc[e], d, sc, N, K, out, NULL);
            int64_t G = tm_quant_group_size(enc[e], K);
            double qneg = enc[e] == TM_DT_Q6G64 ? 32 : 8;
            int bad = 0, badm = 0;
            for (int64_t g = 0; g < N * K; g += G) {
                double dd = tm_quant_scale_at(enc[e], sc, (size_t)(g / G)), ad = fabs(dd);
                int64_t im = g;
                for (int64_t i = g; i < g + G; i++) {
                    if (fabsf(w[i]) > fabsf(w[im])) im = i;
                    double x = w[i] / dd, err = fabs((double)w[i] - out[i]);
                    bad += x > qneg - 0.5 ? err > ad * (1 + 1e-6) : err > ad / 2 * (1 + 1e-6);
                }
                if (ad >= 0x1p-14) badm += fabs(w[im] / dd + qneg) > 0.5;   /* m encodes as -qneg (d normal in f16) */
            }
            CHECKF(bad == 0 && badm == 0, "%s sigma %g: %d elements beyond the bound, %d extremes not -%g",
                   tm_dtype_name(enc[e]), sigma, bad, badm, qneg);
        }
}

/* quantize(dequant(q)) == q, for default and clip-search scales */
static void test_idempotent(void)
{
    const int64_t N = 8, K = 192;
    float *w = malloc(sizeof(float) * N * K), *deq = malloc(sizeof(float) * N * K);
    uint8_t *d1 = malloc(N * K), *d2 = malloc(N * K);
    float *s1 = malloc(sizeof(float) * N * K), *s2 = malloc(sizeof(float) * N * K);
    for (int64_t i = 0; i < N * K; i++) w[i] = (float)(0.02 * rnd_student3());
    for (size_t e = 0; e < sizeof Q_ENC / sizeof Q_ENC[0]; e++) {
        tm_dtype enc = Q_ENC[e];
        if (enc == TM_DT_Q4G64) continue;             /* K = 192 is a multiple of 64 too, but test below */
        for (int clip = 0; clip < 2; clip++) {
            tm_quant_opts o = {.clip_search = clip};
            size_t nb = tm_quant_data_bytes(enc, N, K), ns = tm_quant_scale_count(enc, N, K);
            CHECK_EQ_INT(tm_quant_quantize(enc, w, N, K, d1, s1, &o, NULL), TM_OK);
            CHECK_EQ_INT(tm_quant_dequant(enc, d1, s1, N, K, deq, NULL), TM_OK);
            CHECK_EQ_INT(tm_quant_quantize(enc, deq, N, K, d2, s2, &o, NULL), TM_OK);
            CHECKF(memcmp(d1, d2, nb) == 0, "%s clip=%d: re-quantized bytes differ", tm_dtype_name(enc), clip);
            int sbad = 0;
            for (size_t i = 0; i < ns; i++) {
                float a = tm_quant_scale_at(enc, s1, i), b = tm_quant_scale_at(enc, s2, i);
                sbad += fabsf(a - b) > fabsf(a) * 1e-6f;
            }
            CHECK_EQ_INT(sbad, 0);
        }
    }
    {
        tm_dtype enc = TM_DT_Q4G64;
        CHECK_EQ_INT(tm_quant_quantize(enc, w, N, K, d1, s1, NULL, NULL), TM_OK);
        CHECK_EQ_INT(tm_quant_dequant(enc, d1, s1, N, K, deq, NULL), TM_OK);
        CHECK_EQ_INT(tm_quant_quantize(enc, deq, N, K, d2, s2, NULL, NULL), TM_OK);
        CHECK(memcmp(d1, d2, tm_quant_data_bytes(enc, N, K)) == 0);
        CHECK(memcmp(s1, s2, tm_quant_scale_count(enc, N, K) * tm_quant_scale_bytes(enc)) == 0); /* -8 d / -8 is exact */
    }
    free(w);
    free(deq);
    free(d1);
    free(d2);
    free(s1);
    free(s2);
}

/* clip search: per group never worse, clearly better on heavy tails */
static void check_clip(tm_dtype enc, const float *w, int64_t N, int64_t K, double min_gain, const char *what)
{
    size_t nb = tm_quant_data_bytes(enc, N, K), ns = tm_quant_scale_count(enc, N, K);
    uint8_t *d = malloc(nb);
    float *s = malloc(ns * sizeof(float)), *o0 = malloc(sizeof(float) * N * K), *o1 = malloc(sizeof(float) * N * K);
    tm_quant_opts off = {0}, on = {.clip_search = 1};
    CHECK_EQ_INT(tm_quant_quantize(enc, w, N, K, d, s, &off, NULL), TM_OK);
    tm_quant_dequant(enc, d, s, N, K, o0, NULL);
    CHECK_EQ_INT(tm_quant_quantize(enc, w, N, K, d, s, &on, NULL), TM_OK);
    tm_quant_dequant(enc, d, s, N, K, o1, NULL);
    int64_t G = tm_quant_group_size(enc, K);
    int worse = 0;
    double e0 = 0, e1 = 0;
    for (int64_t g = 0; g < N * K; g += G) {
        double a = sqerr(w + g, o0 + g, G), b = sqerr(w + g, o1 + g, G);
        worse += b > a;
        e0 += a;
        e1 += b;
    }
    CHECKF(worse == 0, "%s %s: clip search increased the error of %d groups", tm_dtype_name(enc), what, worse);
    CHECKF(e1 <= e0 * (1.0 - min_gain), "%s %s: clip search error %.4g vs %.4g (want %.0f%% lower)",
           tm_dtype_name(enc), what, e1, e0, min_gain * 100);
    free(d);
    free(s);
    free(o0);
    free(o1);
}

static void test_clip_search(void)
{
    const int64_t N = 32, K = 512;
    float *w = malloc(sizeof(float) * N * K);
    for (int64_t i = 0; i < N * K; i++) w[i] = (float)(0.02 * rnd_student3());
    for (size_t e = 0; e < sizeof Q_ENC / sizeof Q_ENC[0]; e++)
        check_clip(Q_ENC[e], w, N, K, Q_ENC[e] == TM_DT_Q8PC ? 0.005 : Q_ENC[e] == TM_DT_Q6G64 ? 0.01 : 0.03, "student-t");
    /* Gaussian with 1% outliers at 10 sigma */
    fill_gauss(w, N * K, 0.02);
    for (int64_t i = 0; i < N * K; i += 97) w[i] = (float)(i % 2 ? 0.2 : -0.2);
    for (size_t e = 0; e < sizeof Q_ENC / sizeof Q_ENC[0]; e++)
        check_clip(Q_ENC[e], w, N, K, 0.0, "outliers");
    /* plain Gaussian: still never worse */
    fill_gauss(w, N * K, 0.02);
    for (size_t e = 0; e < sizeof Q_ENC / sizeof Q_ENC[0]; e++) check_clip(Q_ENC[e], w, N, K, 0.0, "gaussian");
    free(w);
}

/* quality on N(0, 0.02): guards against a regression of the scale choice
 * (docs/encodings.md has the measured figures) */
static void test_rmse(void)
{
    const int64_t N = 32, K = 1024;
    float *w = malloc(sizeof(float) * N * K), *o = malloc(sizeof(float) * N * K);
    uint8_t *d = malloc(N * K * 2);
    float *s = malloc(sizeof(float) * N * K);
    fill_gauss(w, N * K, 0.02);
    double ms = 0;
    for (int64_t i = 0; i < N * K; i++) ms += (double)w[i] * w[i];
    const struct { tm_dtype enc; double max_rel; } c[] = {
        {TM_DT_Q8PC, 0.0095}, {TM_DT_Q4G32, 0.090}, {TM_DT_Q4G64, 0.100}, {TM_DT_Q4PC, 0.150}, {TM_DT_Q6G64, 0.026},
        {TM_DT_BF16, 0.0025}, {TM_DT_F16, 0.0004},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        tm_quant_quantize(c[i].enc, w, N, K, d, s, NULL, NULL);
        tm_quant_dequant(c[i].enc, d, s, N, K, o, NULL);
        double rel = sqrt(sqerr(w, o, N * K) / ms);
        CHECKF(rel < c[i].max_rel, "%s: relative RMSE %.4f >= %.4f", tm_dtype_name(c[i].enc), rel, c[i].max_rel);
        CHECKF(rel > c[i].max_rel / 20, "%s: relative RMSE %.5f implausibly small", tm_dtype_name(c[i].enc), rel);
    }
    free(w);
    free(o);
    free(d);
    free(s);
}

/* rows [r0, r1) from bf16 / f16 sources equal quantizing the f32 values, and
 * nothing outside the range is written */
static void test_rows_from_half(void)
{
    const int64_t N = 6, K = 128;
    float w[6 * 128], wf[6 * 128];
    uint16_t hb[6 * 128], hh[6 * 128];
    fill_gauss(w, N * K, 0.05);
    const tm_dtype srcs[] = {TM_DT_BF16, TM_DT_F16};
    for (int si = 0; si < 2; si++) {
        uint16_t *h = si == 0 ? hb : hh;
        for (int64_t i = 0; i < N * K; i++) h[i] = si == 0 ? tm_f32_to_bf16(w[i]) : tm_f32_to_f16(w[i]);
        tm_to_f32(wf, h, srcs[si], (size_t)(N * K));
        for (size_t e = 0; e < sizeof ALL_ENC / sizeof ALL_ENC[0]; e++) {
            tm_dtype enc = ALL_ENC[e];
            size_t nb = tm_quant_data_bytes(enc, N, K), ns = tm_quant_scale_count(enc, N, K);
            uint8_t ref[6 * 128 * 4], got[6 * 128 * 4];
            union { float f[64]; uint16_t h[128]; } rsu, gsu; /* f32 (int8) or f16 scales */
            void *rs = &rsu, *gs = &gsu;
            CHECK_EQ_INT(tm_quant_quantize(enc, wf, N, K, ref, rs, NULL, NULL), TM_OK);
            memset(got, 0xa5, sizeof got);
            memset(gs, 0x5a, sizeof gsu);
            tm_err err = {0};
            CHECK_EQ_INT(tm_quant_quantize_rows(enc, srcs[si], h, N, K, 2, 5, got, gs, NULL, &err), TM_OK);
            size_t rb = nb / N, sr = ns / N, sb = tm_quant_scale_bytes(enc);
            CHECK(memcmp(got + 2 * rb, ref + 2 * rb, 3 * rb) == 0);
            CHECK(ns == 0 || memcmp((char *)gs + 2 * sr * sb, (char *)rs + 2 * sr * sb, 3 * sr * sb) == 0);
            int touched = 0;
            for (size_t i = 0; i < 2 * rb; i++) touched += got[i] != 0xa5;
            for (size_t i = 5 * rb; i < nb; i++) touched += got[i] != 0xa5;
            for (size_t i = 0; i < ns * sb; i++) /* the scale bytes outside rows [2, 5) */
                if (i < 2 * sr * sb || i >= 5 * sr * sb) touched += ((uint8_t *)gs)[i] != 0x5a;
            CHECK_EQ_INT(touched, 0);
            /* the rest of the rows, then the whole tensor matches */
            CHECK_EQ_INT(tm_quant_quantize_rows(enc, srcs[si], h, N, K, 0, 2, got, gs, NULL, NULL), TM_OK);
            CHECK_EQ_INT(tm_quant_quantize_rows(enc, srcs[si], h, N, K, 5, 6, got, gs, NULL, NULL), TM_OK);
            CHECK_EQ_INT(tm_quant_quantize_rows(enc, srcs[si], h, N, K, 6, 6, got, gs, NULL, NULL), TM_OK);
            CHECK(memcmp(got, ref, nb) == 0);
        }
    }
    /* bf16 -> bf16 is a bit-exact copy */
    uint16_t out[6 * 128];
    CHECK_EQ_INT(tm_quant_quantize_rows(TM_DT_BF16, TM_DT_BF16, hb, N, K, 0, N, out, NULL, NULL, NULL), TM_OK);
    CHECK(memcmp(out, hb, sizeof out) == 0);
}

static void test_plain_dequant(void)
{
    const uint16_t bf[2] = {0x3f80, 0xc000}, hf[2] = {0x3c00, 0xc000};
    const float f[2] = {1.0f, -2.0f};
    float out[2];
    tm_quant_dequant_row(TM_DT_BF16, bf, NULL, 2, 0, out);
    CHECK(out[0] == 1.0f && out[1] == -2.0f);
    tm_quant_dequant_row(TM_DT_F16, hf, NULL, 1, 1, out);
    CHECK(out[0] == -2.0f);
    tm_quant_dequant_row(TM_DT_F32, f, NULL, 1, 1, out);
    CHECK(out[0] == -2.0f);
    float w[2] = {1.0f, 3.0f};
    uint16_t h[2];
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_F16, w, 1, 2, h, NULL, NULL, NULL), TM_OK);
    CHECK_EQ_INT(h[1], 0x4200);
}

static void test_bad_input(void)
{
    const int64_t N = 4, K = 64;
    float w[4 * 64];
    uint8_t d[4 * 64 * 4];
    union { float f[16]; uint16_t h[32]; } su; /* f32 (int8) or f16 (int4, int6) scales */
    float *s = su.f;
    fill_gauss(w, N * K, 1.0);
    tm_err err = {0};
    w[3 * K + 7] = NAN;
    for (size_t e = 0; e < sizeof Q_ENC / sizeof Q_ENC[0]; e++) {
        tm_err_clear(&err);
        CHECK_EQ_INT(tm_quant_quantize(Q_ENC[e], w, N, K, d, s, NULL, &err), TM_E_INVALID);
        CHECKF(strstr(err.msg, "row 3, column 7") && strstr(err.msg, "not finite"), "%s", err.msg);
    }
    w[3 * K + 7] = -INFINITY;
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G64, w, N, K, d, s, NULL, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "row 3, column 7") != NULL);
    /* plain encodings keep NaN / inf faithfully */
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_BF16, w, N, K, d, s, NULL, &err), TM_OK);
    w[3 * K + 7] = 1.0f;
    /* a finite weight beyond f16's range */
    w[K + 2] = 70000.0f;
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_F16, w, N, K, d, NULL, NULL, &err), TM_E_INVALID);
    CHECKF(strstr(err.msg, "row 1, column 2") && strstr(err.msg, "f16"), "%s", err.msg);
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q8PC, w, N, K, d, s, NULL, &err), TM_OK);
    w[K + 2] = 3.4e38f;   /* rounds to infinity in bf16 */
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_BF16, w, N, K, d, NULL, NULL, &err), TM_E_INVALID);
    CHECKF(strstr(err.msg, "row 1, column 2") && strstr(err.msg, "bf16"), "%s", err.msg);
    w[K + 2] = 3.3e38f;
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_BF16, w, N, K, d, NULL, NULL, &err), TM_OK);
    /* int4 / int6 scales are f16: a group whose scale would overflow it is an error naming the weight */
    for (size_t e = 1; e < sizeof Q_ENC / sizeof Q_ENC[0]; e++) {
        tm_err_clear(&err);
        CHECK_EQ_INT(tm_quant_quantize(Q_ENC[e], w, N, K, d, s, NULL, &err), TM_E_INVALID);
        CHECKF(strstr(err.msg, "row 1, column 2") && strstr(err.msg, "f16 group scale"), "%s", err.msg);
    }
    w[K + 2] = 1.0f;
    /* bad row ranges, source types and buffers */
    CHECK_EQ_INT(tm_quant_quantize_rows(TM_DT_Q8PC, TM_DT_F32, w, N, K, 3, 2, d, s, NULL, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "[3, 2)") != NULL);
    CHECK_EQ_INT(tm_quant_quantize_rows(TM_DT_Q8PC, TM_DT_F32, w, N, K, 0, 5, d, s, NULL, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_quant_quantize_rows(TM_DT_Q8PC, TM_DT_F32, w, N, K, -1, 2, d, s, NULL, &err), TM_E_INVALID);
    CHECK_EQ_INT(tm_quant_quantize_rows(TM_DT_Q8PC, TM_DT_I8, w, N, K, 0, 1, d, s, NULL, &err), TM_E_UNSUPPORTED);
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q8PC, w, N, K, d, NULL, NULL, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "scales") != NULL);
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G64, w, N, K, d, s, NULL, NULL), TM_OK);   /* NULL err is fine */
    /* huge and tiny magnitudes stay finite and within bounds */
    float big[32], tiny[32], out[32];
    for (int j = 0; j < 32; j++) {
        big[j] = (j % 2 ? 1 : -1) * 3.0e38f * ((float)(j + 1) / 32.0f);
        tiny[j] = (float)(j - 16) * 1e-44f;
    }
    big[5] = 3.4028235e38f;   /* FLT_MAX */
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q8PC, big, 1, 32, d, s, NULL, NULL), TM_OK);
    tm_quant_dequant_row(TM_DT_Q8PC, d, s, 32, 0, out);
    int bad = 0;
    for (int j = 0; j < 32; j++) bad += !isfinite(out[j]) || fabsf(out[j] - big[j]) > fabsf(s[0]);
    CHECKF(bad == 0, "int8: %d bad", bad);
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G32, big, 1, 32, d, s, NULL, &err), TM_E_INVALID);
    CHECKF(strstr(err.msg, "row 0, column 5") != NULL, "%s", err.msg);   /* FLT_MAX, the group's largest */
    /* f16's range edge: |m| = 8 * 65504 (int4) and 32 * 65504 (int6) still encode, exactly */
    for (int e = 0; e < 2; e++) {
        tm_dtype enc = e ? TM_DT_Q6G64 : TM_DT_Q4G64;
        float top = (e ? 32.0f : 8.0f) * 65504.0f, edge[64] = {0}, eo[64];
        edge[0] = -top;
        edge[1] = top / 2;
        CHECK_EQ_INT(tm_quant_quantize(enc, edge, 1, 64, d, s, NULL, &err), TM_OK);
        tm_quant_dequant_row(enc, d, s, 64, 0, eo);
        CHECK(eo[0] == -top && eo[1] == top / 2);
        edge[0] = -top * 1.001f;
        CHECK_EQ_INT(tm_quant_quantize(enc, edge, 1, 64, d, s, NULL, &err), TM_E_INVALID);
    }
    /* magnitudes below f16's subnormals: d = 2^-24, every q = 0 (error <= |d| / 2) */
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G32, tiny, 1, 32, d, s, NULL, NULL), TM_OK);
    CHECK(fabsf(tm_quant_scale_at(TM_DT_Q4G32, s, 0)) == 0x1p-24f);
    tm_quant_dequant_row(TM_DT_Q4G32, d, s, 32, 0, out);
    bad = 0;
    for (int j = 0; j < 32; j++) bad += out[j] != 0.0f;
    CHECK_EQ_INT(bad, 0);
    tm_quant_opts on = {.clip_search = 1};
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q8PC, tiny, 1, 32, d, s, &on, NULL), TM_OK);
    /* amax / 127 and m / -8 underflow to 0 here: d becomes the smallest subnormal of the scale's type
       (int8: f32's, so the values come back exactly; int4: f16's 2^-24, of the sign that makes m -8's side) */
    float sub[32] = {0};
    sub[3] = 3 * 1.401298464e-45f;   /* 3 * 2^-149 */
    sub[9] = -1.401298464e-45f;
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q8PC, sub, 1, 32, d, s, NULL, NULL), TM_OK);
    CHECK(s[0] != 0.0f);
    tm_quant_dequant_row(TM_DT_Q8PC, d, s, 32, 0, out);
    int diff = 0;
    for (int j = 0; j < 32; j++) diff += out[j] != sub[j];   /* values: a negative d gives -0 */
    CHECK_EQ_INT(diff, 0);
    CHECK_EQ_INT(tm_quant_quantize(TM_DT_Q4G32, sub, 1, 32, d, s, NULL, NULL), TM_OK);
    CHECK(tm_quant_scale_at(TM_DT_Q4G32, s, 0) == -0x1p-24f);   /* m = 3 * 2^-149 > 0, so d < 0 */
}

int main(void)
{
    test_sizes();
    test_shape_rules();
    test_q4_layout();
    test_q4g64_layout();
    test_q6_layout();
    test_q8_layout();
    test_roundtrip_bounds();
    test_f16_scale_range();
    test_idempotent();
    test_clip_search();
    test_rmse();
    test_rows_from_half();
    test_plain_dequant();
    test_bad_input();
    return th_done("test_quant");
}
