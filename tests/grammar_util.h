/* tests/grammar_util.h: whether a compiled grammar's language holds a text (the tool-call tests'). */
#ifndef TM_TESTS_GRAMMAR_UTIL_H
#define TM_TESTS_GRAMMAR_UTIL_H

#include <string.h>

#include "text/grammar.h"

/* 1: g takes t whole, 0: not, -1: no matcher */
static inline int th_takes(const tm_grammar *g, const char *t)
{
    tm_gmatch *m = NULL;
    tm_err e = {0};
    if (tm_gmatch_new(&m, g, &e) != TM_OK) return -1;
    int ok = tm_gmatch_feed(m, t, strlen(t)) == 1 && tm_gmatch_accepting(m);
    tm_gmatch_free(m);
    return ok;
}

#endif
