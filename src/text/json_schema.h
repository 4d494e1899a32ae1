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

/* tm_json_schema_gbnf_lenient: the same, but keywords that constrain a value in ways not supported
 * are ignored rather than refused (the value is then held to the rest of its schema): refused
 * keywords (pattern, not, multipleOf, ...), bounds on numbers that are not integers or past 2^53,
 * formats not supported (and any format beside a length: the lengths hold), keywords beside enum
 * or const. For what the caller does not promise to enforce, as a tool not marked "strict"
 * (text/toolcall.h). Forms the converter cannot read at all (remote $refs, anyOf beside oneOf, a
 * cycle that reads nothing, a schema that allows no value) are refused as ever. */
int tm_json_schema_gbnf_lenient(const char *schema, size_t len, char **gbnf, tm_err *err);

#endif
