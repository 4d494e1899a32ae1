/* text/tokconfig.h: a model's tokenizer and generation settings, from the Hugging Face
 * files tokenizer_config.json, special_tokens_map.json, chat_template.jinja (or
 * chat_template.json) and generation_config.json.
 *
 *   tm_tokconfig *c;
 *   if (tm_tokconfig_load(&c, "models/tiny-classics-llama", &err) != TM_OK) ...;
 *   const char *tpl = tm_tokconfig_chat_template(c, NULL);        // NULL: none
 *   tm_chat_render(tpl, messages, 1, NULL, tm_tokconfig_bos(c), tm_tokconfig_eos(c), NULL, &text, &err);
 *   int64_t eos0 = tm_tokconfig_gen(c)->eos_token_ids[0];
 *   tm_tokconfig_free(c);
 *
 * Packages embed these files as text: tm_tokconfig_parse() takes them from memory.
 *
 * Rules (those of transformers):
 *  - a special token (bos_token, eos_token, pad_token, unk_token) is a string, an
 *    AddedToken object {"content": "...", ...}, or null (none);
 *  - special_tokens_map.json, when present, overrides tokenizer_config.json's tokens;
 *  - chat_template is a string, or a list of {"name", "template"}; chat_template.jinja in
 *    the model directory, when present, replaces it (as newer transformers saves it), and
 *    chat_template.json ({"chat_template": ...}) is read when neither is there;
 *  - a missing file or key is fine (defaults); malformed JSON or a key of the wrong type
 *    is an error naming the file and the key. */
#ifndef TM_TEXT_TOKCONFIG_H
#define TM_TEXT_TOKCONFIG_H

#include <stdint.h>

#include "core/status.h"

typedef struct tm_tokconfig tm_tokconfig; /* opaque */

#define TM_GEN_MAX_EOS 16

/* generation_config.json. Unset integers are -1, unset reals NaN, unset flags -1. */
typedef struct tm_gen_defaults {
    int64_t bos_token_id;
    int64_t eos_token_ids[TM_GEN_MAX_EOS]; /* eos_token_id: an int or a list */
    int n_eos;
    int64_t pad_token_id;
    int do_sample;            /* -1, 0, 1 */
    double temperature;
    int64_t top_k;
    double top_p;
    double min_p;
    double repetition_penalty;
    int64_t max_new_tokens;
    int64_t max_length;
} tm_gen_defaults;

/* tm_tokconfig_load: read the files above from model_dir (each optional). */
int tm_tokconfig_load(tm_tokconfig **out, const char *model_dir, tm_err *err);

/* tm_tokconfig_parse: the same from NUL-terminated texts; any may be NULL (absent).
 * chat_template_jinja is the text of a chat_template.jinja file. */
int tm_tokconfig_parse(tm_tokconfig **out, const char *tokenizer_config_json,
                       const char *special_tokens_map_json, const char *generation_config_json,
                       const char *chat_template_jinja, tm_err *err);

void tm_tokconfig_free(tm_tokconfig *c);

/* transformers' folder of named templates beside chat_template.jinja (NAME.jinja each) */
#define TM_ADDITIONAL_TEMPLATES "additional_chat_templates"
/* tm_tokconfig_add_template: the template name := src (a package's additional_chat_templates/NAME.jinja). */
int tm_tokconfig_add_template(tm_tokconfig *c, const char *name, const char *src, tm_err *err);

/* special tokens as strings; NULL when the model has none */
const char *tm_tokconfig_bos(const tm_tokconfig *c);
const char *tm_tokconfig_eos(const tm_tokconfig *c);
const char *tm_tokconfig_pad(const tm_tokconfig *c);
const char *tm_tokconfig_unk(const tm_tokconfig *c);

/* add_bos_token / add_eos_token: 1, 0, or -1 when the file does not say */
int tm_tokconfig_add_bos(const tm_tokconfig *c);
int tm_tokconfig_add_eos(const tm_tokconfig *c);

/* model_max_length, 0 when unset or "unlimited" (transformers writes 1e30 for that) */
int64_t tm_tokconfig_model_max_length(const tm_tokconfig *c);

/* tm_tokconfig_chat_template: the template source called `name`, or with name NULL the
 * model's template (the single one, or the one named "default"); NULL if there is none. A single template
 * (chat_template.jinja) may stand beside named ones (a list's others, additional_chat_templates/): it is the
 * default. */
const char *tm_tokconfig_chat_template(const tm_tokconfig *c, const char *name);
/* the names of a template list, i in [0, n); a single template has no name (n = 0) */
int tm_tokconfig_n_templates(const tm_tokconfig *c);
const char *tm_tokconfig_template_name(const tm_tokconfig *c, int i);

const tm_gen_defaults *tm_tokconfig_gen(const tm_tokconfig *c);

#endif
