/* text/json_compact.h: a JSON value's compact text while it is still being written.
 *
 * A tool call's arguments go out in a stream as the model writes them (serve/reply.h), and what a
 * stream sends must add up to what the JSON answer holds: the arguments as cJSON_PrintUnformatted
 * prints the object the model wrote (text/toolcall.h). tm_json_compact reads the value's text so
 * far and writes the part of that print which no continuation can change:
 *
 *   tm_jbuf out = {0};
 *   size_t used;
 *   int rc = tm_json_compact(text, n, &out, &used);   // TM_JC_WHOLE, TM_JC_MORE or TM_JC_BAD
 *   // out.p [out.n]: cJSON_PrintUnformatted(cJSON_Parse(whole value)) starts with it
 *   free(out.p);
 *
 * Design block
 * ------------
 * One pass over the bytes, as cJSON's parser reads them (cJSON 1.7): whitespace is any byte up to
 * 32 between tokens; structure ({ } [ ] : ,) is written as it comes; a string's characters as
 * they are decoded, escaped as cJSON's printer escapes them (\" \\ \b \f \n \r \t, \u00xx for the
 * other bytes under 32, every other byte as it is), an escape only once it is whole (a \u high
 * surrogate with its low half), and nothing after a \u0000 (cJSON's strings end there); a number
 * or a literal only once the byte after it (or its last letter) is read, the number printed by
 * cJSON itself from its text (1.0 prints 1, 1e2 100). So the output for a prefix of a text is a
 * prefix of the output for the whole. Anything cJSON would refuse (a bad escape, a missing
 * colon, a trailing comma, a number strtod does not read whole, nesting past 1000) ends the
 * output there: TM_JC_BAD, with what was written before it left as it is. tests/test_json_compact.c
 * checks both claims against cJSON on generated values cut at every byte. */
#ifndef TM_TEXT_JSON_COMPACT_H
#define TM_TEXT_JSON_COMPACT_H

#include <stddef.h>

/* a growing byte buffer: p [n] (NUL-terminated when n > 0), cap bytes allocated */
typedef struct tm_jbuf {
    char *p;
    size_t n, cap;
} tm_jbuf;

/* tm_jbuf_put: s [n] appended. TM_OK or TM_E_NOMEM. */
int tm_jbuf_put(tm_jbuf *b, const char *s, size_t n);

enum { TM_JC_WHOLE = 1, TM_JC_MORE = 2, TM_JC_BAD = 3 };

/* tm_json_compact: the JSON value at the start of s [n] (whitespace before it skipped), appended to
 * out as far as it is certain (above). TM_JC_WHOLE: the value ends in s, *used the bytes up to its
 * end; TM_JC_MORE: s ends inside it (or holds only whitespace); TM_JC_BAD: s is not the start of a
 * value cJSON reads; TM_E_NOMEM. */
int tm_json_compact(const char *s, size_t n, tm_jbuf *out, size_t *used);

/* tm_json_escape_put: the string s [n] escaped as cJSON prints a string's characters (no quotes;
 * up to a NUL byte, where cJSON's strings end), appended. TM_OK or TM_E_NOMEM. */
int tm_json_escape_put(tm_jbuf *out, const char *s, size_t n);

#endif
