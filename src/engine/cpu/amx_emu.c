/* engine/cpu/amx_emu.c: the emulated tiles of amx_emu.h. Each thread has its
 * own eight tiles and configuration, as each core has on the real unit. */
#include <stdint.h>
#include <string.h>

#include "engine/cpu/amx_emu.h"

static _Thread_local struct {
    uint8_t data[8][16][64];
    uint8_t rows[8];
    uint16_t colsb[8];
} T;

void tm_amx_emu_loadconfig(const void *cfg)
{
    const uint8_t *p = cfg; /* palette, start_row, 14 reserved, colsb[16] (u16), rows[16] */
    memset(&T, 0, sizeof T);
    if (p[0] == 0) return; /* palette 0: the init state */
    for (int t = 0; t < 8; t++) {
        unsigned cb = (unsigned)p[16 + 2 * t] | (unsigned)p[17 + 2 * t] << 8, r = p[48 + t];
        T.colsb[t] = (uint16_t)(cb > 64 ? 64 : cb);
        T.rows[t] = (uint8_t)(r > 16 ? 16 : r);
    }
}

void tm_amx_emu_release(void) { memset(&T, 0, sizeof T); }

void tm_amx_emu_zero(int t) { memset(T.data[t & 7], 0, sizeof T.data[0]); }

void tm_amx_emu_load(int t, const void *base, size_t stride)
{
    t &= 7;
    memset(T.data[t], 0, sizeof T.data[0]);
    for (int r = 0; r < T.rows[t]; r++) memcpy(T.data[t][r], (const uint8_t *)base + (size_t)r * stride, T.colsb[t]);
}

void tm_amx_emu_store(int t, void *base, size_t stride)
{
    t &= 7;
    for (int r = 0; r < T.rows[t]; r++) memcpy((uint8_t *)base + (size_t)r * stride, T.data[t][r], T.colsb[t]);
}

/* C[m][n] (int32) += sum over k < colsb(A)/4, i < 4 of u8 A[m][4k+i] * s8 B[k][4n+i] */
void tm_amx_emu_dpbusd(int c, int a, int b)
{
    c &= 7, a &= 7, b &= 7;
    int M = T.rows[c], N = T.colsb[c] / 4, K = T.colsb[a] / 4;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t acc;
            memcpy(&acc, &T.data[c][m][4 * n], 4);
            uint32_t sum = (uint32_t)acc; /* wraps, as the unit does */
            for (int k = 0; k < K && k < T.rows[b]; k++)
                for (int i = 0; i < 4; i++)
                    sum += (uint32_t)((int32_t)T.data[a][m][4 * k + i] * (int32_t)(int8_t)T.data[b][k][4 * n + i]);
            acc = (int32_t)sum;
            memcpy(&T.data[c][m][4 * n], &acc, 4);
        }
}

static float bf16_at(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* C[m][n] (f32) += sum over k < colsb(A)/4 of the pair A[m][2k..2k+1] . B[k][2n..2n+1] (bf16) */
void tm_amx_emu_dpbf16ps(int c, int a, int b)
{
    c &= 7, a &= 7, b &= 7;
    int M = T.rows[c], N = T.colsb[c] / 4, K = T.colsb[a] / 4;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc;
            memcpy(&acc, &T.data[c][m][4 * n], 4);
            for (int k = 0; k < K && k < T.rows[b]; k++) {
                acc += bf16_at(&T.data[a][m][4 * k]) * bf16_at(&T.data[b][k][4 * n]);
                acc += bf16_at(&T.data[a][m][4 * k + 2]) * bf16_at(&T.data[b][k][4 * n + 2]);
            }
            memcpy(&T.data[c][m][4 * n], &acc, 4);
        }
}
