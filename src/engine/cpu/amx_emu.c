/* engine/cpu/amx_emu.c: the emulated tiles of amx_emu.h. Each thread has its
 * own eight tiles and configuration, as each core has on the real unit. */
#include <stdint.h>
#include <string.h>

#include "core/tensor.h"
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

/* a tile cell's 4 bytes as a little-endian word, and back (byte by byte rather than through memcpy into a
 * local, which under ASan costs a poisoned stack slot per cell, see tm_f32_bits) */
static uint32_t cell_get(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void cell_put(uint8_t *p, uint32_t u)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(u >> 8 * i);
}

static float bf16_at(const uint8_t *p)
{
    tm_f32_bits b = {.u = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 24};
    return b.f;
}

/* C[m][n] += the dot of A's row m and B's column n over K = colsb(A)/4 rows
 * of B (at most rows(B)), each of 4 bytes: int8, u8 A[m][4k+i] x s8
 * B[k][4n+i] into int32, wrapping as the unit does; bf16, the pairs
 * A[m][4k..4k+3] . B[k][4n..4n+3] into f32 */
static void tile_dot(int c, int a, int b, int bf16)
{
    c &= 7, a &= 7, b &= 7;
    int M = T.rows[c], N = T.colsb[c] / 4, K = T.colsb[a] / 4;
    if (K > T.rows[b]) K = T.rows[b];
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            uint8_t *cell = &T.data[c][m][4 * n];
            if (bf16) {
                tm_f32_bits acc = {.u = cell_get(cell)};
                for (int k = 0; k < K; k++)
                    for (int i = 0; i < 4; i += 2)
                        acc.f += bf16_at(&T.data[a][m][4 * k + i]) * bf16_at(&T.data[b][k][4 * n + i]);
                cell_put(cell, acc.u);
            } else {
                uint32_t acc = cell_get(cell);
                for (int k = 0; k < K; k++)
                    for (int i = 0; i < 4; i++)
                        acc += (uint32_t)((int32_t)T.data[a][m][4 * k + i] * (int32_t)(int8_t)T.data[b][k][4 * n + i]);
                cell_put(cell, acc);
            }
        }
}

void tm_amx_emu_dpbusd(int c, int a, int b) { tile_dot(c, a, b, 0); }

void tm_amx_emu_dpbf16ps(int c, int a, int b) { tile_dot(c, a, b, 1); }
