/* pkg/checksum.c: XXH64 from its specification (see checksum.h). */
#include "pkg/checksum.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* little-endian loads, whatever the host byte order */
static inline uint64_t ld64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
#endif
}

static inline uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t round64(uint64_t acc, uint64_t lane)
{
    acc += lane * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}

static inline uint64_t merge64(uint64_t acc, uint64_t v)
{
    acc ^= round64(0, v);
    return acc * P1 + P4;
}

/* consume whole 32-byte stripes; returns the bytes consumed */
static size_t stripes(uint64_t v[4], const uint8_t *p, size_t n)
{
    uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = round64(a, ld64(p + i));
        b = round64(b, ld64(p + i + 8));
        c = round64(c, ld64(p + i + 16));
        d = round64(d, ld64(p + i + 24));
    }
    v[0] = a; v[1] = b; v[2] = c; v[3] = d;
    return i;
}

void tm_xxh64_init(tm_xxh64_state *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->v[0] = seed + P1 + P2;
    s->v[1] = seed + P2;
    s->v[2] = seed;
    s->v[3] = seed - P1;
}

void tm_xxh64_update(tm_xxh64_state *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->total += n;
    if (s->nbuf) {
        size_t take = 32 - s->nbuf;
        if (take > n) take = n;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += (uint32_t)take;
        p += take;
        n -= take;
        if (s->nbuf < 32) return;
        stripes(s->v, s->buf, 32);
        s->nbuf = 0;
    }
    size_t used = stripes(s->v, p, n);
    memcpy(s->buf, p + used, n - used);
    s->nbuf = (uint32_t)(n - used);
}

uint64_t tm_xxh64_digest(const tm_xxh64_state *s)
{
    uint64_t h;
    if (s->total >= 32) {
        const uint64_t *v = s->v;
        h = rotl64(v[0], 1) + rotl64(v[1], 7) + rotl64(v[2], 12) + rotl64(v[3], 18);
        for (int i = 0; i < 4; i++) h = merge64(h, v[i]);
    } else {
        h = s->seed + P5;
    }
    h += s->total;
    const uint8_t *p = s->buf;
    size_t n = s->nbuf;
    for (; n >= 8; p += 8, n -= 8) {
        h ^= round64(0, ld64(p));
        h = rotl64(h, 27) * P1 + P4;
    }
    if (n >= 4) {
        h ^= (uint64_t)ld32(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n > 0; p++, n--) {
        h ^= *p * P5;
        h = rotl64(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t tm_xxh64(const void *data, size_t n, uint64_t seed)
{
    tm_xxh64_state s;
    tm_xxh64_init(&s, seed);
    tm_xxh64_update(&s, data, n);
    return tm_xxh64_digest(&s);
}
