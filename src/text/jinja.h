/* text/jinja.h: chat templates, a Jinja2 interpreter in C.
 *
 *   tm_jinja *t;
 *   tm_err err;
 *   if (tm_jinja_compile(&t, src, strlen(src), &err) != TM_OK) ...;   // "line 3: ..."
 *   cJSON *vars = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],"
 *                             " \"add_generation_prompt\": true}");
 *   char *text; size_t n;
 *   if (tm_jinja_render(t, vars, NULL, &text, &n, &err) != TM_OK) ...;
 *   ... use text[0 .. n) ...
 *   free(text); cJSON_Delete(vars); tm_jinja_free(t);
 *
 * or, in one call, as `tokenizer.apply_chat_template(messages, tokenize=False, ...)` does it:
 *
 *   tm_chat_render(template_src, messages, 1, NULL, "<s>", "</s>", NULL, &text, &err);
 *
 * The interpreter replicates the environment Hugging Face transformers renders chat
 * templates in (see docs/templates.md): jinja2's ImmutableSandboxedEnvironment with
 * trim_blocks and lstrip_blocks, the loopcontrols extension ({% break %}, {% continue %}),
 * the {% generation %} tag, `tojson` as Python's json.dumps(ensure_ascii=False), and the
 * globals raise_exception(message) and strftime_now(format). Values are JSON-like
 * (None, bool, int, float, str, list, tuple, dict with insertion order) and behave as
 * Python's do: truthiness, str(), repr(), comparisons, string methods, slicing.
 *
 * Errors: every template error returns TM_E_TEMPLATE. The message names the template
 * line ("line 7: no filter named 'foo'"), except for raise_exception(msg), where the
 * message is exactly msg (so a caller can print "TemplateError: " + msg as transformers
 * does). Exceeding a limit (output size, memory, steps, recursion) returns TM_E_LIMIT.
 * A compiled template is immutable: several threads may render it at the same time. */
#ifndef TM_TEXT_JINJA_H
#define TM_TEXT_JINJA_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/status.h"

typedef struct tm_jinja tm_jinja; /* a compiled template (opaque) */

/* Bounds that keep a hostile template from hanging or exhausting memory. A zero field
 * takes the default shown. */
typedef struct tm_jinja_limits {
    size_t max_output; /* bytes of any rendered text (output, macro result, set block); 64 MiB */
    size_t max_memory; /* bytes of live values (strings, lists, dicts) at any moment; 512 MiB */
    size_t max_steps;  /* statements executed + loop iterations + calls; 20,000,000 */
    int max_depth;     /* nesting of macro calls and recursive loops; 200 */
} tm_jinja_limits;

/* tm_jinja_compile: parse `src` (len bytes, UTF-8) into *out. Syntax errors, unknown tags,
 * filters and tests fail here with the line ("line 3: unknown tag 'foo'"). */
int tm_jinja_compile(tm_jinja **out, const char *src, size_t len, tm_err *err);
void tm_jinja_free(tm_jinja *t);

/* tm_jinja_render: render with the variables of `vars` (a cJSON object, NULL = none):
 * messages, add_generation_prompt, bos_token, ... JSON numbers become Python ints or
 * floats as json.loads makes them when the tree comes from tm_jinja_json_parse, else ints
 * when whole. strftime_date pins strftime_now() to that day
 * ("YYYY-MM-DD", 00:00:00 local time); NULL means now. *out is NUL-terminated, free() it;
 * *len (optional) receives its length. */
int tm_jinja_render(const tm_jinja *t, const cJSON *vars, const char *strftime_date,
                    char **out, size_t *len, tm_err *err);

/* tm_jinja_render_ex: the same with explicit limits (NULL = defaults). */
int tm_jinja_render_ex(const tm_jinja *t, const cJSON *vars, const char *strftime_date,
                       const tm_jinja_limits *limits, char **out, size_t *len, tm_err *err);

/* tm_jinja_json_parse: parse JSON text (len bytes) for template variables. Unlike a plain
 * cJSON_Parse, it keeps each number's literal text (in the number's valuestring, freed by
 * cJSON_Delete) so that, as with Python's json.loads, 1.0 stays a float (tojson prints
 * 1.0) and 1 an int; numbers from other cJSON trees are ints when whole. Errors name
 * `what` (a file name or "messages") and the line. */
int tm_jinja_json_parse(const char *text, size_t len, const char *what, cJSON **out, tm_err *err);

/* tm_chat_render: compile `template_src` and render it with the variables transformers'
 * apply_chat_template passes: messages (a cJSON array of {"role", "content", ...}),
 * tools = None, documents = None, add_generation_prompt, bos_token and eos_token (each
 * left undefined when NULL, as for a model without one), then every member of `kwargs`
 * (a cJSON object or NULL; it may override any of the above, e.g. "tools").
 * `date` as strftime_date above. *out as above (NUL-terminated, free() it). */
int tm_chat_render(const char *template_src, const cJSON *messages, int add_generation_prompt,
                   const cJSON *kwargs, const char *bos, const char *eos, const char *date,
                   char **out, tm_err *err);

#endif
