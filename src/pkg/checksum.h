/* pkg/checksum.h: XXH64, the checksum of tandem packages.
 *
 *   uint64_t h = tm_xxh64(data, n, 0);           one shot
 *
 *   tm_xxh64_state s;                              streaming: same result
 *   tm_xxh64_init(&s, 0);
 *   tm_xxh64_update(&s, part1, n1);
 *   tm_xxh64_update(&s, part2, n2);
 *   uint64_t h = tm_xxh64_digest(&s);
 *
 * XXH64 is Yann Collet's 64-bit xxHash (spec: github.com/Cyan4973/xxHash,
 * doc/xxhash_spec.md), implemented here from the specification in portable C.
 * It runs near memory bandwidth without instruction-set dispatch, which
 * matters when `tandem inspect --verify` reads tens of gigabytes. It is an
 * integrity check against corruption, not a defence against forgery. */
#ifndef TM_PKG_CHECKSUM_H
#define TM_PKG_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

typedef struct tm_xxh64_state {
    uint64_t total;    /* bytes seen so far */
    uint64_t v[4];     /* the four lane accumulators */
    uint8_t buf[32];   /* [nbuf] bytes of a partial 32-byte stripe */
    uint32_t nbuf;
    uint64_t seed;
} tm_xxh64_state;

void tm_xxh64_init(tm_xxh64_state *s, uint64_t seed);
void tm_xxh64_update(tm_xxh64_state *s, const void *data, size_t n);
uint64_t tm_xxh64_digest(const tm_xxh64_state *s); /* does not change s */
uint64_t tm_xxh64(const void *data, size_t n, uint64_t seed);

#endif
