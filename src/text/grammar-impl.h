/* text/grammar-impl.h: the compiled grammar, shared by the parser
 * (grammar.c) and the matcher (gmatch.c). Not part of any public interface. */
#ifndef TM_TEXT_GRAMMAR_IMPL_H
#define TM_TEXT_GRAMMAR_IMPL_H

#include <stdint.h>

#include "text/grammar.h"

enum { GE_END, GE_ALT, GE_REF, GE_SET };

typedef struct tm_gelem {
    uint8_t type;     /* GE_* */
    int32_t arg;      /* GE_REF: the rule; GE_SET: the set */
} tm_gelem;

struct tm_grammar {
    tm_gelem *el;       /* [n_el] every rule's alternatives, each closed by GE_ALT, the last by GE_END */
    int32_t n_el;
    int32_t *alt_off;   /* [n_rules + 1] rule r's alternatives start at el[alt[alt_off[r] .. alt_off[r + 1])] */
    int32_t *alt;       /* [alt_off[n_rules]] element index of each alternative's first element */
    int32_t n_rules;
    uint32_t *rng;      /* [2 * n_rng] code point ranges [lo, hi], each set's sorted and disjoint */
    int32_t *set_off;   /* [n_sets + 1] set s is rng pairs set_off[s] .. set_off[s + 1] */
    int32_t n_sets;
    int32_t root;
};

/* tm_gset_has: set s holds code point cp. tm_gset_meets: set s holds one of [lo, hi]. */
int tm_gset_has(const tm_grammar *g, int32_t s, uint32_t cp);
int tm_gset_meets(const tm_grammar *g, int32_t s, uint32_t lo, uint32_t hi);

#endif
