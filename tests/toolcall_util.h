/* tests/toolcall_util.h: what test_toolcall.c and test_toolcall_dialects.c share: the tools array most
 * cases use, parsing a reply against the calls and content expected, and the dialects' forced and lazy
 * grammars with their checks. */
#ifndef TM_TESTS_TOOLCALL_UTIL_H
#define TM_TESTS_TOOLCALL_UTIL_H

#include "grammar_util.h"
#include "harness.h"
#include "text/grammar.h"
#include "text/toolcall.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather in a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"],\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

/* parse text in dialect d: expect n calls "name args" joined by "|", and content */
static inline void parse_d(const char *tools, int cut, const tm_tool_dialect *d, const char *text, const char *want_calls,
                    const char *want_content)
{
    const char *dn = d->name;
    tm_tool_calls c;
    tm_err e = {0};
    CHECKF(tm_tool_parse(d, text, strlen(text), tools, cut, &c, &e) == TM_OK, "%s", e.msg);
    char got[2048] = "";
    for (int i = 0; i < c.n; i++) {
        size_t k = strlen(got);
        snprintf(got + k, sizeof got - k, "%s%s %s", i ? "|" : "", c.v[i].name, c.v[i].arguments);
    }
    CHECKF(!strcmp(got, want_calls), "%s: %s: calls '%s', expected '%s'", dn, text, got, want_calls);
    CHECKF(c.content && strlen(c.content) == c.content_len && !strcmp(c.content, want_content),
           "%s: %s: content '%s', expected '%s'", dn, text, c.content ? c.content : "(null)", want_content);
    tm_tool_calls_free(&c);
}

static inline void parse_with(const char *tools, int cut, const char *dn, const char *text, const char *want_calls,
                       const char *want_content)
{
    parse_d(tools, cut, tm_tool_dialect_named(dn), text, want_calls, want_content);
}

static inline void parse_case(const char *dn, const char *text, const char *want_calls, const char *want_content)
{
    parse_with(TOOLS, 0, dn, text, want_calls, want_content);
}

/* dialect d's grammar of a forced reply (with_open 0) or of auto's lazy one (1) */
static inline tm_grammar *grammar_of(const tm_tool_dialect *d, const char *tools, const char *only, int parallel,
                              int with_open)
{
    char *src = NULL;
    tm_err e = {0};
    tm_grammar *g = NULL;
    const char *dn = d->name;
    int rc = tm_tool_grammar(d, tools, only, parallel, with_open, &src, &e);
    CHECKF(rc == TM_OK, "%s: %s", dn, e.msg);
    if (rc == TM_OK) CHECKF(tm_grammar_parse(&g, src, strlen(src), &e) == TM_OK, "%s: %s\n%s", dn, e.msg, src);
    free(src);
    return g;
}

static inline tm_grammar *forced(const char *dn, const char *tools, const char *only, int parallel)
{
    return grammar_of(tm_tool_dialect_named(dn), tools, only, parallel, 0);
}

/* g takes text (after the dialect's gen_open), and the parse of gen_open + text gives calls */
static inline void forced_yes(const char *tools, const char *dn, const tm_grammar *g, const char *text,
                       const char *want_calls)
{
    CHECKF(th_takes(g, text) == 1, "%s refuses %s", dn, text);
    const tm_tool_dialect *d = tm_tool_dialect_named(dn);
    char full[2048];
    snprintf(full, sizeof full, "%s%s", d->gen_open, text);
    parse_with(tools, 0, dn, full, want_calls, "");
}

/* dialect dn's forced grammar (parallel) takes one (a call to get_weather, Oslo) and two (now, then add 1 + 2), each
 * read back as those calls, and refuses bad; the grammar (NULL where it failed, a check failed) for more checks */
static inline tm_grammar *forced_three(const char *dn, const char *one, const char *two, const char *bad)
{
    tm_grammar *g = forced(dn, TOOLS, NULL, 1);
    if (g) {
        forced_yes(TOOLS, dn, g, one, "get_weather {\"city\":\"Oslo\"}");
        forced_yes(TOOLS, dn, g, two, "now {}|add {\"a\":1,\"b\":2}");
        CHECK(th_takes(g, bad) == 0);
    }
    return g;
}

/* dialect dn's lazy grammar (from its marker on) takes with_marker and not without */
static inline void lazy_case(const char *dn, const char *with_marker, const char *without)
{
    char *src = NULL;
    tm_err e = {0};
    tm_grammar *g = NULL;
    CHECKF(tm_tool_grammar(tm_tool_dialect_named(dn), TOOLS, NULL, 1, 1, &src, &e) == TM_OK &&
               tm_grammar_parse(&g, src, strlen(src), &e) == TM_OK,
           "%s: %s", dn, e.msg);
    if (g) {
        CHECKF(th_takes(g, with_marker) == 1, "%s lazy: refuses %s", dn, with_marker);
        CHECKF(th_takes(g, without) == 0, "%s lazy: takes %s", dn, without);
    }
    tm_grammar_free(g);
    free(src);
}

#endif
