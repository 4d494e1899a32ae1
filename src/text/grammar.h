/* text/grammar.h: grammar-constrained output. A GBNF grammar (llama.cpp's
 * dialect, below) is compiled once; a matcher follows the text generated so
 * far and masks, token by token, every token that would leave the language.
 *
 *   tm_grammar *g;
 *   tm_grammar_parse(&g, src, strlen(src), &err);     // root rule "root"
 *   tm_gmatch *m;
 *   tm_gmatch_new(&m, g, &err);
 *   for (;;) {
 *       tm_gmatch_mask(m, trie, logits);               // -inf for every token that breaks it
 *       if (tm_gmatch_accepting(m)) allow EOS; else mask EOS;
 *       id = sample(logits);
 *       if (EOS) break;
 *       tm_gmatch_advance(m, trie, id);
 *       if (tm_gmatch_accepting(m) && !tm_gmatch_can_continue(m)) break;  // nothing may follow
 *   }
 *   tm_gmatch_free(m); tm_grammar_free(g);
 *
 * The dialect (llama.cpp's GBNF)
 * ------------------------------
 *   # a comment, to the end of the line
 *   root   ::= object                      a rule: name ::= alternatives; "root" is where a match starts
 *   object ::= "{" ws ( pair ( "," ws pair )* )? "}" ws
 *   pair   ::= string ":" ws value
 *   digit  ::= [0-9]                       a character class: ranges, single characters, escapes
 *   char   ::= [^"\\\x00-\x1F] | "\\" .    [^...] negated; "." any character
 *   ws     ::= [ \t\n]{0,20}               x* x+ x? x{m} x{m,} x{m,n} repeat the element before
 * Names are letters, digits, '-' and '_'. Literals are "..." with the escapes \\ \" \' \[ \] \n \r
 * \t \/ \xHH \uHHHH \UHHHHHHHH (the same in classes, plus \- and \^). A rule ends at the end of its
 * line unless a group is open, the line ends in '|', or the next line starts with '|'. Characters
 * are Unicode code points: the matcher reads UTF-8 (strict: no overlong forms, surrogates or code
 * points past U+10FFFF) and a class or "." takes one code point. Refused with an error naming the
 * line: a syntax error, a rule defined twice, an undefined rule, a missing root, left recursion
 * (a rule that can reach itself before reading a character), a repetition bound over
 * TM_GRAMMAR_MAX_REPEAT, groups nested deeper than TM_GRAMMAR_MAX_NEST, a grammar over
 * TM_GRAMMAR_MAX_ELEMS elements once repetitions are expanded.
 *
 * Design block
 * ------------
 * Compiled form: every rule is a run of elements in one array, its alternatives separated by ALT
 * and closed by END; an element is a character set (sorted code point ranges) or a rule reference.
 * Repetitions and groups become generated rules (x* is `r ::= x r |` , right recursive).
 *
 * Matching is a pushdown automaton run on sets of stacks, as llama.cpp's grammar sampler does: a
 * stack is the position of the character set to read next, over the return positions of the rules
 * that called it. Stacks are interned as (position, rest) nodes, so equal stacks are one id and a
 * set of stacks is a sorted array of ids; a tail call (a reference that ends its alternative) does
 * not push, so right-recursive repetition runs in constant depth. A configuration is such a set
 * with the UTF-8 code point being read (its bytes so far) and whether the text so far is a whole
 * match; configurations are interned too, and each (configuration, byte) transition is computed
 * once and kept: the matcher is a DFA built lazily as the text and the masks explore it. So a mask
 * walks the vocabulary trie (text/vocab_trie.h) with one table lookup per edge once the states are
 * known, and the last masks are cached by configuration. When the tables pass their limits
 * (TM_GMATCH_MAX_CONFIGS configurations, or 64 transitions or stack ids a configuration on
 * average) they are dropped, between tokens, and rebuilt from the current configuration.
 *
 * Invariants
 *  1. tm_gmatch_mask allows a token only if the matcher takes all of its bytes from the current
 *     configuration (tests/test_grammar.c checks masks against feeding each token's bytes).
 *  2. Text the matcher takes is a prefix of a string of the grammar's language; it is accepting
 *     exactly when the text is one (checked against a backtracking recognizer on random grammars).
 *  3. A refused byte leaves the matcher as it was.
 *  4. Stacks deeper than TM_GRAMMAR_MAX_DEPTH, or configurations of more than TM_GRAMMAR_MAX_STACKS
 *     stacks, are not followed (the text that needs them is refused), so no input makes a step cost
 *     more than those bounds. */
#ifndef TM_TEXT_GRAMMAR_H
#define TM_TEXT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define TM_GRAMMAR_MAX_REPEAT 1000   /* the largest m or n in x{m,n} */
#define TM_GRAMMAR_MAX_ELEMS (1 << 20)
#define TM_GRAMMAR_MAX_NEST 128      /* groups within groups */
#define TM_GRAMMAR_MAX_DEPTH 512     /* rule calls pending on one stack */
#define TM_GRAMMAR_MAX_STACKS 1024   /* stacks in one configuration */
#define TM_GMATCH_MAX_CONFIGS (1 << 16) /* the matcher's tables are rebuilt past this many states */

typedef struct tm_grammar tm_grammar;

/* tm_gbnf_name_char: c may appear in a GBNF rule name (letters, digits, '-', '_'); the parser's rule and
 * text/toolcall.c's renaming of rules both read names by it. */
static inline int tm_gbnf_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* tm_grammar_parse: compile GBNF src[0..len) (not NUL-terminated necessarily). Errors name the
 * line: TM_E_FORMAT for the syntax, undefined rules, a missing root and left recursion,
 * TM_E_LIMIT for the bounds above. */
int tm_grammar_parse(tm_grammar **out, const char *src, size_t len, tm_err *err);
void tm_grammar_free(tm_grammar *g);

typedef struct tm_gmatch tm_gmatch;
struct tm_vocab_trie;

/* tm_gmatch_new: a matcher at the start of g's root rule; g must outlive it. */
int tm_gmatch_new(tm_gmatch **out, const tm_grammar *g, tm_err *err);
void tm_gmatch_free(tm_gmatch *m);

/* tm_gmatch_feed: take bytes s[0..n): 1 if the matcher took them all (and advanced), 0 if one is
 * refused (the matcher unchanged, invariant 3), negative on failure: TM_E_NOMEM, TM_E_LIMIT (the
 * tables would pass 4 x TM_GMATCH_MAX_CONFIGS configurations or 2^24 stack ids before a rebuild,
 * between tokens, could drop them). */
int tm_gmatch_feed(tm_gmatch *m, const void *s, size_t n);
/* tm_gmatch_would_take: what tm_gmatch_feed would return, the matcher left where it is. */
int tm_gmatch_would_take(tm_gmatch *m, const void *s, size_t n);
/* tm_gmatch_accepting: the text so far is a whole string of the language. */
int tm_gmatch_accepting(const tm_gmatch *m);
/* tm_gmatch_can_continue: some byte may follow the text so far. */
int tm_gmatch_can_continue(const tm_gmatch *m);

/* tm_gmatch_cut: how many times the bounds of invariant 4 cut a path so far (a configuration's
 * transitions are computed once, so this counts distinct cuts, in feeds and masks alike). */
int64_t tm_gmatch_cut(const tm_gmatch *m);

/* tm_gmatch_set_limit: drop and rebuild the matcher's tables when they hold more than n
 * configurations (default TM_GMATCH_MAX_CONFIGS; a small n is for tests). */
void tm_gmatch_set_limit(tm_gmatch *m, int32_t n);

/* tm_gmatch_mask: logits [V] := -inf for every token whose bytes the matcher refuses (and for
 * tokens not in the trie: special tokens, tokens with no bytes). End-of-sequence is the caller's:
 * allow it only while tm_gmatch_accepting. Returns TM_OK, TM_E_NOMEM or TM_E_LIMIT (as feed). */
int tm_gmatch_mask(tm_gmatch *m, struct tm_vocab_trie *t, float *logits);
/* tm_gmatch_advance: take token id's bytes; as tm_gmatch_feed (0 for an id not in the trie). */
int tm_gmatch_advance(tm_gmatch *m, const struct tm_vocab_trie *t, int32_t id);

#endif
