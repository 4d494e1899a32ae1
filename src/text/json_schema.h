/* text/json_schema.h: a JSON Schema turned into a GBNF grammar (text/grammar.h) whose language is
 * the JSON texts the schema allows, so that generation can be constrained to it (OpenAI's
 * response_format {"type": "json_schema"}, llama.cpp's --json-schema).
 *
 *   char *gbnf;
 *   tm_json_schema_gbnf(schema_text, strlen(schema_text), &gbnf, &err);
 *   tm_grammar_parse(&g, gbnf, strlen(gbnf), &err);
 *   free(gbnf);
 *
 * What is supported, what is refused and how whitespace is bounded: the comment at the top of
 * json_schema.c (and docs/sampling.md). A keyword that would constrain the value and is not
 * supported is refused (TM_E_UNSUPPORTED naming it and its JSON pointer), never ignored, so a
 * generation never claims a schema it does not enforce. */
#ifndef TM_TEXT_JSON_SCHEMA_H
#define TM_TEXT_JSON_SCHEMA_H

#include <stddef.h>

#include "core/status.h"

/* tm_json_schema_gbnf: *gbnf (malloc'd, NUL-terminated) := the grammar of schema[0..len), root rule
 * "root". TM_E_FORMAT: not JSON, or not a schema (a wrong type for a keyword); TM_E_UNSUPPORTED:
 * a keyword or form not supported; TM_E_LIMIT: the grammar would be too large;
 * TM_E_NOMEM. */
int tm_json_schema_gbnf(const char *schema, size_t len, char **gbnf, tm_err *err);

#endif
