/* text/tokconfig.c: see tokconfig.h. */
#include "text/tokconfig.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

#define CONFIG_MAX_BYTES ((size_t)256 << 20) /* tokenizer_config.json can list many added tokens */

struct tm_tokconfig {
    char *bos, *eos, *pad, *unk; /* NULL: none */
    int add_bos, add_eos;        /* -1 unset */
    int64_t model_max_length;    /* 0 unset */
    char *chat_template;         /* the single (unnamed) template */
    int ntemplates;              /* a named list instead */
    char **tnames, **tsrcs;      /* [ntemplates] */
    tm_gen_defaults gen;
};

static const char *const TOKEN_KEYS[4] = {"bos_token", "eos_token", "pad_token", "unk_token"};

static char **token_slot(tm_tokconfig *c, int i)
{
    return i == 0 ? &c->bos : i == 1 ? &c->eos : i == 2 ? &c->pad : &c->unk;
}

static const char *type_name(const cJSON *j)
{
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "a list";
    if (cJSON_IsObject(j)) return "an object";
    return "invalid";
}

static int set_str(char **slot, const char *s, const char *file, tm_err *err)
{
    free(*slot);
    *slot = NULL;
    if (!s) return TM_OK;
    *slot = strdup(s);
    return *slot ? TM_OK : tm_errf(err, TM_E_NOMEM, "%s: out of memory", file);
}

/* parse text (NUL-terminated) as a JSON object; errors name the file and where */
static int parse_json(const char *text, const char *file, cJSON **out, tm_err *err)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 0);
    if (!j) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        int line = 1;
        for (size_t i = 0; i < off && text[i]; i++)
            if (text[i] == '\n') line++;
        return tm_errf(err, TM_E_FORMAT, "%s: invalid JSON at line %d (byte %zu)", file, line, off);
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return tm_errf(err, TM_E_FORMAT, "%s: expected a JSON object at the top level", file);
    }
    *out = j;
    return TM_OK;
}

/* a special token: a string, {"content": string, ...} or null */
static int special_token(const cJSON *root, int i, const char *file, tm_tokconfig *c, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, TOKEN_KEYS[i]);
    if (!v) return TM_OK;
    if (cJSON_IsNull(v)) return set_str(token_slot(c, i), NULL, file, err);
    if (cJSON_IsString(v)) return set_str(token_slot(c, i), v->valuestring, file, err);
    if (cJSON_IsObject(v)) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (!cJSON_IsString(content))
            return tm_errf(err, TM_E_FORMAT, "%s: '%s': an AddedToken object needs a string \"content\"", file,
                           TOKEN_KEYS[i]);
        return set_str(token_slot(c, i), content->valuestring, file, err);
    }
    return tm_errf(err, TM_E_FORMAT, "%s: '%s' must be a string, an AddedToken object or null, not %s", file,
                   TOKEN_KEYS[i], type_name(v));
}

static int flag(const cJSON *root, const char *key, const char *file, int *out, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return TM_OK;
    if (!cJSON_IsBool(v))
        return tm_errf(err, TM_E_FORMAT, "%s: '%s' must be true, false or null, not %s", file, key, type_name(v));
    *out = cJSON_IsTrue(v);
    return TM_OK;
}

static void free_templates(tm_tokconfig *c)
{
    for (int i = 0; i < c->ntemplates; i++) {
        free(c->tnames[i]);
        free(c->tsrcs[i]);
    }
    free(c->tnames);
    free(c->tsrcs);
    c->tnames = c->tsrcs = NULL;
    c->ntemplates = 0;
    free(c->chat_template);
    c->chat_template = NULL;
}

/* "chat_template": a string, a list of {"name", "template"}, or null */
static int chat_template(const cJSON *v, const char *file, tm_tokconfig *c, tm_err *err)
{
    if (!v || cJSON_IsNull(v)) return TM_OK;
    if (cJSON_IsString(v)) {
        free_templates(c);
        return set_str(&c->chat_template, v->valuestring, file, err);
    }
    if (!cJSON_IsArray(v))
        return tm_errf(err, TM_E_FORMAT, "%s: 'chat_template' must be a string or a list of {\"name\", \"template\"}, not %s",
                       file, type_name(v));
    int n = cJSON_GetArraySize(v), k = 0;
    char **names = calloc((size_t)(n ? n : 1), sizeof *names), **srcs = calloc((size_t)(n ? n : 1), sizeof *srcs);
    if (!names || !srcs) {
        free(names);
        free(srcs);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", file);
    }
    const cJSON *e;
    int rc = TM_OK;
    cJSON_ArrayForEach(e, v)
    {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (!cJSON_IsObject(e) || !cJSON_IsString(nm) || !cJSON_IsString(tp)) {
            rc = tm_errf(err, TM_E_FORMAT, "%s: 'chat_template'[%d] must be an object with string \"name\" and \"template\"",
                         file, k);
            break;
        }
        names[k] = strdup(nm->valuestring);
        srcs[k] = strdup(tp->valuestring);
        k++;
        if (!names[k - 1] || !srcs[k - 1]) {
            rc = tm_errf(err, TM_E_NOMEM, "%s: out of memory", file);
            break;
        }
    }
    if (rc != TM_OK) {
        for (int i = 0; i < k; i++) {
            free(names[i]);
            free(srcs[i]);
        }
        free(names);
        free(srcs);
        return rc;
    }
    free_templates(c);
    c->tnames = names;
    c->tsrcs = srcs;
    c->ntemplates = k;
    return TM_OK;
}

static int tokenizer_config(tm_tokconfig *c, const char *text, const char *file, tm_err *err)
{
    cJSON *root;
    int rc = parse_json(text, file, &root, err);
    if (rc) return rc;
    for (int i = 0; i < 4 && !rc; i++) rc = special_token(root, i, file, c, err);
    if (!rc) rc = flag(root, "add_bos_token", file, &c->add_bos, err);
    if (!rc) rc = flag(root, "add_eos_token", file, &c->add_eos, err);
    if (!rc) rc = chat_template(cJSON_GetObjectItemCaseSensitive(root, "chat_template"), file, c, err);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model_max_length");
    if (!rc && m && !cJSON_IsNull(m)) {
        if (!cJSON_IsNumber(m) || m->valuedouble < 0 || m->valuedouble != floor(m->valuedouble))
            rc = tm_errf(err, TM_E_FORMAT, "%s: 'model_max_length' must be a non-negative integer", file);
        else if (m->valuedouble >= 1e18) c->model_max_length = 0; /* transformers' "no limit" */
        else c->model_max_length = (int64_t)m->valuedouble;
    }
    cJSON_Delete(root);
    return rc;
}

static int special_tokens_map(tm_tokconfig *c, const char *text, const char *file, tm_err *err)
{
    cJSON *root;
    int rc = parse_json(text, file, &root, err);
    if (rc) return rc;
    for (int i = 0; i < 4 && !rc; i++) rc = special_token(root, i, file, c, err);
    cJSON_Delete(root);
    return rc;
}

static int int_key(const cJSON *root, const char *key, const char *file, int64_t *out, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return TM_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return tm_errf(err, TM_E_FORMAT, "%s: '%s' must be an integer, not %s", file, key,
                       cJSON_IsNumber(v) ? "a fraction" : type_name(v));
    if (fabs(v->valuedouble) > 9.0e15) return tm_errf(err, TM_E_FORMAT, "%s: '%s' is out of range", file, key);
    *out = (int64_t)v->valuedouble;
    return TM_OK;
}

static int real_key(const cJSON *root, const char *key, const char *file, double *out, tm_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return TM_OK;
    if (!cJSON_IsNumber(v)) return tm_errf(err, TM_E_FORMAT, "%s: '%s' must be a number, not %s", file, key, type_name(v));
    *out = v->valuedouble;
    return TM_OK;
}

static int generation_config(tm_tokconfig *c, const char *text, const char *file, tm_err *err)
{
    cJSON *root;
    int rc = parse_json(text, file, &root, err);
    if (rc) return rc;
    tm_gen_defaults *g = &c->gen;
    rc = int_key(root, "bos_token_id", file, &g->bos_token_id, err);
    if (!rc) rc = int_key(root, "pad_token_id", file, &g->pad_token_id, err);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (!rc && e && !cJSON_IsNull(e)) {
        if (cJSON_IsNumber(e)) {
            rc = int_key(root, "eos_token_id", file, &g->eos_token_ids[0], err);
            g->n_eos = 1;
        } else if (cJSON_IsArray(e)) {
            const cJSON *x;
            g->n_eos = 0;
            cJSON_ArrayForEach(x, e)
            {
                if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > 9.0e15) {
                    rc = tm_errf(err, TM_E_FORMAT, "%s: 'eos_token_id'[%d] must be an integer, not %s", file, g->n_eos,
                                 type_name(x));
                    break;
                }
                if (g->n_eos == TM_GEN_MAX_EOS) {
                    rc = tm_errf(err, TM_E_FORMAT, "%s: 'eos_token_id' lists more than %d ids", file, TM_GEN_MAX_EOS);
                    break;
                }
                g->eos_token_ids[g->n_eos++] = (int64_t)x->valuedouble;
            }
        } else {
            rc = tm_errf(err, TM_E_FORMAT, "%s: 'eos_token_id' must be an integer or a list of integers, not %s", file,
                         type_name(e));
        }
    }
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(root, "do_sample");
    if (!rc && ds && !cJSON_IsNull(ds)) {
        if (!cJSON_IsBool(ds))
            rc = tm_errf(err, TM_E_FORMAT, "%s: 'do_sample' must be true or false, not %s", file, type_name(ds));
        else g->do_sample = cJSON_IsTrue(ds);
    }
    if (!rc) rc = real_key(root, "temperature", file, &g->temperature, err);
    if (!rc) rc = int_key(root, "top_k", file, &g->top_k, err);
    if (!rc) rc = real_key(root, "top_p", file, &g->top_p, err);
    if (!rc) rc = real_key(root, "min_p", file, &g->min_p, err);
    if (!rc) rc = real_key(root, "repetition_penalty", file, &g->repetition_penalty, err);
    if (!rc) rc = int_key(root, "max_new_tokens", file, &g->max_new_tokens, err);
    if (!rc) rc = int_key(root, "max_length", file, &g->max_length, err);
    /* absurd values are errors too */
    if (!rc && !isnan(g->temperature) && !(g->temperature >= 0 && isfinite(g->temperature)))
        rc = tm_errf(err, TM_E_FORMAT, "%s: 'temperature' must be >= 0", file);
    if (!rc && !isnan(g->top_p) && !(g->top_p >= 0 && g->top_p <= 1))
        rc = tm_errf(err, TM_E_FORMAT, "%s: 'top_p' must be in [0, 1]", file);
    if (!rc && !isnan(g->min_p) && !(g->min_p >= 0 && g->min_p <= 1))
        rc = tm_errf(err, TM_E_FORMAT, "%s: 'min_p' must be in [0, 1]", file);
    if (!rc && !isnan(g->repetition_penalty) && !(g->repetition_penalty > 0 && isfinite(g->repetition_penalty)))
        rc = tm_errf(err, TM_E_FORMAT, "%s: 'repetition_penalty' must be > 0", file);
    cJSON_Delete(root);
    return rc;
}

/* chat_template.json: {"chat_template": ...} */
static int chat_template_json(tm_tokconfig *c, const char *text, const char *file, tm_err *err)
{
    cJSON *root;
    int rc = parse_json(text, file, &root, err);
    if (rc) return rc;
    rc = chat_template(cJSON_GetObjectItemCaseSensitive(root, "chat_template"), file, c, err);
    cJSON_Delete(root);
    return rc;
}

static tm_tokconfig *tokconfig_new(void)
{
    tm_tokconfig *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->add_bos = c->add_eos = -1;
    tm_gen_defaults *g = &c->gen;
    g->bos_token_id = g->pad_token_id = -1;
    g->do_sample = -1;
    g->temperature = g->top_p = g->min_p = g->repetition_penalty = NAN;
    g->top_k = g->max_new_tokens = g->max_length = -1;
    return c;
}

int tm_tokconfig_parse(tm_tokconfig **out, const char *tokenizer_config_json, const char *special_tokens_map_json,
                       const char *generation_config_json, const char *chat_template_jinja, tm_err *err)
{
    *out = NULL;
    tm_tokconfig *c = tokconfig_new();
    if (!c) return tm_errf(err, TM_E_NOMEM, "tokenizer config: out of memory");
    int rc = TM_OK;
    if (tokenizer_config_json) rc = tokenizer_config(c, tokenizer_config_json, "tokenizer_config.json", err);
    if (!rc && special_tokens_map_json) rc = special_tokens_map(c, special_tokens_map_json, "special_tokens_map.json", err);
    if (!rc && generation_config_json) rc = generation_config(c, generation_config_json, "generation_config.json", err);
    if (!rc && chat_template_jinja) /* the default; a list's other templates stay named (a package keeps both) */
        rc = set_str(&c->chat_template, chat_template_jinja, "chat_template.jinja", err);
    if (rc) {
        tm_tokconfig_free(c);
        return rc;
    }
    *out = c;
    return TM_OK;
}

/* read dir/name if it exists: *text NULL when absent */
static int read_opt(const char *dir, const char *name, char *path, size_t pn, char **text, tm_err *err)
{
    *text = NULL;
    if (tm_path_join(path, pn, dir, name) != TM_OK)
        return tm_errf(err, TM_E_INVALID, "%s: model directory path too long", dir);
    if (!tm_file_exists(path)) return TM_OK;
    return tm_read_file(path, text, NULL, CONFIG_MAX_BYTES, err);
}

int tm_tokconfig_add_template(tm_tokconfig *c, const char *name, const char *src, tm_err *err)
{
    for (int i = 0; i < c->ntemplates; i++)
        if (!strcmp(c->tnames[i], name)) { /* replaced */
            char *s = strdup(src);
            if (!s) return tm_errf(err, TM_E_NOMEM, "tokenizer config: out of memory");
            free(c->tsrcs[i]);
            c->tsrcs[i] = s;
            return TM_OK;
        }
    char **names = realloc(c->tnames, sizeof *names * (size_t)(c->ntemplates + 1));
    if (names) c->tnames = names;
    char **srcs = names ? realloc(c->tsrcs, sizeof *srcs * (size_t)(c->ntemplates + 1)) : NULL;
    if (srcs) c->tsrcs = srcs;
    char *n = srcs ? strdup(name) : NULL, *s = n ? strdup(src) : NULL;
    if (!s) {
        free(n);
        return tm_errf(err, TM_E_NOMEM, "tokenizer config: out of memory");
    }
    c->tnames[c->ntemplates] = n;
    c->tsrcs[c->ntemplates++] = s;
    return TM_OK;
}

static int add_named(void *c, const char *name, const char *text, size_t len, tm_err *err)
{
    (void)len;
    return tm_tokconfig_add_template(c, name, text, err);
}

/* model_dir/additional_chat_templates/NAME.jinja, each as the template NAME */
static int additional_templates(tm_tokconfig *c, const char *model_dir, tm_err *err)
{
    char dir[4096];
    if (tm_path_join(dir, sizeof dir, model_dir, TM_ADDITIONAL_TEMPLATES) != TM_OK) return TM_OK;
    return tm_read_dir_files(dir, ".jinja", CONFIG_MAX_BYTES, add_named, c, err);
}

int tm_tokconfig_load(tm_tokconfig **out, const char *model_dir, tm_err *err)
{
    *out = NULL;
    if (!tm_is_dir(model_dir)) return tm_errf(err, TM_E_NOTFOUND, "%s: not a directory", model_dir);
    tm_tokconfig *c = tokconfig_new();
    if (!c) return tm_errf(err, TM_E_NOMEM, "tokenizer config: out of memory");
    static const char *const FILES[] = {"tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                                        "chat_template.json", "chat_template.jinja"};
    char path[4096];
    int rc = TM_OK;
    for (int i = 0; i < 5 && !rc; i++) {
        char *text;
        if (i == 3) { /* chat_template.json only counts when chat_template.jinja is absent */
            char jp[4096];
            if (tm_path_join(jp, sizeof jp, model_dir, "chat_template.jinja") == TM_OK && tm_file_exists(jp)) continue;
        }
        rc = read_opt(model_dir, FILES[i], path, sizeof path, &text, err);
        if (rc || !text) continue;
        switch (i) {
        case 0: rc = tokenizer_config(c, text, path, err); break;
        case 1: rc = special_tokens_map(c, text, path, err); break;
        case 2: rc = generation_config(c, text, path, err); break;
        case 3: rc = chat_template_json(c, text, path, err); break;
        default: /* transformers' own layout: chat_template.jinja, the others additional_chat_templates/NAME.jinja */
            free_templates(c);
            rc = set_str(&c->chat_template, text, path, err);
            if (!rc) rc = additional_templates(c, model_dir, err);
            break;
        }
        free(text);
    }
    if (rc) {
        tm_tokconfig_free(c);
        return rc;
    }
    *out = c;
    return TM_OK;
}

void tm_tokconfig_free(tm_tokconfig *c)
{
    if (!c) return;
    for (int i = 0; i < 4; i++) free(*token_slot(c, i));
    free_templates(c);
    free(c);
}

const char *tm_tokconfig_bos(const tm_tokconfig *c) { return c->bos; }
const char *tm_tokconfig_eos(const tm_tokconfig *c) { return c->eos; }
const char *tm_tokconfig_pad(const tm_tokconfig *c) { return c->pad; }
const char *tm_tokconfig_unk(const tm_tokconfig *c) { return c->unk; }
int tm_tokconfig_add_bos(const tm_tokconfig *c) { return c->add_bos; }
int tm_tokconfig_add_eos(const tm_tokconfig *c) { return c->add_eos; }
int64_t tm_tokconfig_model_max_length(const tm_tokconfig *c) { return c->model_max_length; }
const tm_gen_defaults *tm_tokconfig_gen(const tm_tokconfig *c) { return &c->gen; }
int tm_tokconfig_n_templates(const tm_tokconfig *c) { return c->ntemplates; }

const char *tm_tokconfig_template_name(const tm_tokconfig *c, int i)
{
    return i >= 0 && i < c->ntemplates ? c->tnames[i] : NULL;
}

const char *tm_tokconfig_chat_template(const tm_tokconfig *c, const char *name)
{
    if (!name || !strcmp(name, "default")) {
        if (c->chat_template) return c->chat_template; /* (beside a list: chat_template.jinja, the default) */
        name = "default";
    }
    for (int i = 0; i < c->ntemplates; i++)
        if (strcmp(c->tnames[i], name) == 0) return c->tsrcs[i];
    return NULL;
}
