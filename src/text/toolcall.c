/* text/toolcall.c: tool-call dialects, their parser, the stream's hold-back and the grammar of a
 * forced call (text/toolcall.h has the design block). */
#include "text/toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "core/grow.h"
#include "text/grammar.h"
#include "text/harmony.h"
#include "text/json_compact.h"
#include "text/json_schema.h"

static const tm_tool_xml qwen3_xml = {.fn_open = "<function=", .fn_close = ">", .fn_end = "</function>",
                                      .key_open = "<parameter=", .key_close = ">", .val_open = "",
                                      .val_close = "</parameter>", .trim_nl = 1};
static const tm_tool_xml seed_xml = {.fn_open = "<function=", .fn_close = ">", .fn_end = "</function>",
                                     .key_open = "<parameter=", .key_close = ">", .val_open = "",
                                     .val_close = "</parameter>"};
static const tm_tool_xml minimax_xml = {.fn_open = "<invoke name=\"", .fn_close = "\">", .fn_end = "</invoke>",
                                        .key_open = "<parameter name=\"", .key_close = "\">", .val_open = "",
                                        .val_close = "</parameter>"};
static const tm_tool_xml glm_xml = {.fn_open = "", .fn_close = "", .fn_end = "", .key_open = "<arg_key>",
                                    .key_close = "</arg_key>", .val_open = "<arg_value>", .val_close = "</arg_value>"};

/* The dialects, in the order detection tries them (a template showing "[TOOL_CALLS]" may also
 * mention the others' words; none of the later markers contains an earlier one). */
/* DeepSeek V3.1's markers: special tokens its replies keep in their text */
static const char *const DS_KEEP[] = {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                                      "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", NULL};

/* Kimi K2's markers: special tokens */
static const char *const KIMI_KEEP[] = {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                                        "<|tool_call_argument_begin|>", "<|tool_call_end|>", NULL};

/* Command R7B's and Command A's markers: special tokens */
static const char *const COMMAND_KEEP[] = {"<|START_ACTION|>", "<|END_ACTION|>", NULL};

/* The bare dialects' markers that their models write as special tokens (tm_tool_dialect_kept) */
static const char *const MISTRAL_ARGS_TOKENS[] = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", NULL};
static const char *const MISTRAL_TOKENS[] = {"[TOOL_CALLS]", NULL};
static const char *const GRANITE_TOKENS[] = {"<|tool_call|>", NULL};

/* harmony's lazy form: a call's header after its recipient's name, in the forms text/harmony.c reads (the
 * channel after the recipient, as gpt-oss's template writes it, or before; the content type bare or
 * constrained), to its <|message|> */
#define HARMONY_HEAD \
    "( \" \"? \"<|channel|>commentary\" )? ( \" \" \"<|constrain|>\"? \"json\" | \"<|constrain|>json\" )? \"<|message|>\""

static const tm_tool_dialect dialects[] = {
    {.name = "deepseek_v3", .detect = {"<｜tool▁sep｜>", NULL}, .open = "<｜tool▁calls▁begin｜>",
     .close = "<｜tool▁calls▁end｜>", .args_key = "arguments", .gen_open = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>",
     .gen_close = "<｜tool▁call▁end｜>", .gen_sep = "<｜tool▁call▁begin｜>", .gen_end = "<｜tool▁calls▁end｜>",
     .args_marker = "<｜tool▁sep｜>", .gen_args = "<｜tool▁sep｜>", .call_open = "<｜tool▁call▁begin｜>",
     .call_close = "<｜tool▁call▁end｜>", .keep = DS_KEEP, .fenced = 1},
    {.name = "kimi_k2", .detect = {"<|tool_call_argument_begin|>", NULL}, .open = "<|tool_calls_section_begin|>",
     .close = "<|tool_calls_section_end|>", .args_key = "arguments",
     .gen_open = "<|tool_calls_section_begin|><|tool_call_begin|>functions.", .gen_close = "<|tool_call_end|>",
     .gen_sep = "<|tool_call_begin|>functions.", .gen_end = "<|tool_calls_section_end|>",
     .args_marker = "<|tool_call_argument_begin|>", .id_marker = ":", .gen_args = "<|tool_call_argument_begin|>",
     .call_open = "<|tool_call_begin|>", .call_close = "<|tool_call_end|>", .keep = KIMI_KEEP,
     .name_prefix = "functions.", .text_ids = 1, .gen_id = "\":\" [0-9]{1,4}"},
    {.name = "harmony", .detect = {"<|channel|>commentary", NULL}, .open = "to=functions.", .close = "", .args_key = "arguments",
     .gen_open = "<|channel|>commentary to=functions.", .gen_close = "", .gen_sep = "", .gen_end = "",
     .args_marker = "<|message|>", .gen_args = " <|constrain|>json<|message|>", .harmony = 1,
     .keep = TM_HARMONY_MARKERS, .lazy_args = HARMONY_HEAD, .lazy_end = "\"<|call|>\"?",
     .skip_open = "<|channel|>analysis<|message|>", .skip_close = "<|end|>"},
    {.name = "command_r", .detect = {"<|START_ACTION|>", NULL}, .open = "<|START_ACTION|>", .close = "<|END_ACTION|>",
     .list = 1, .args_key = "parameters", .name_key = "tool_name", .id_key = "tool_call_id",
     .gen_open = "<|START_ACTION|>[\n    ", .gen_close = "", .gen_sep = ",\n    ", .gen_end = "\n]", .keep = COMMAND_KEEP},
    {.name = "mistral_args", .detect = {"[ARGS]", NULL}, .open = "[TOOL_CALLS]", .close = "", .bare = 1,
     .args_key = "arguments", .gen_open = "[TOOL_CALLS]", .gen_close = "", .gen_sep = "", .gen_end = "", .id_len = 9,
     .args_marker = "[ARGS]", .id_marker = "[CALL_ID]", .tokens = MISTRAL_ARGS_TOKENS,
     .tokens_id = "( \"[CALL_ID]\" [a-zA-Z0-9]{9} )?"},
    {.name = "mistral", .detect = {"[TOOL_CALLS]", NULL}, .open = "[TOOL_CALLS]", .close = "", .list = 1,
     .bare = 1, .args_key = "arguments", .gen_open = "[TOOL_CALLS][", .gen_close = "", .gen_sep = ", ",
     .gen_end = "]", .id_len = 9, .tokens = MISTRAL_TOKENS},
    {.name = "granite", .detect = {"<|tool_call|>", NULL}, .open = "<|tool_call|>", .close = "", .list = 1,
     .bare = 1, .args_key = "arguments", .gen_open = "<|tool_call|>[", .gen_close = "", .gen_sep = ", ",
     .gen_end = "]", .tokens = GRANITE_TOKENS},
    {.name = "seed_oss", .detect = {"<seed:tool_call>", NULL}, .open = "<seed:tool_call>", .close = "</seed:tool_call>",
     .args_key = "arguments", .gen_open = "<seed:tool_call>\n", .gen_close = "</seed:tool_call>",
     .gen_sep = "\n<seed:tool_call>\n", .gen_end = "", .xml = &seed_xml},
    {.name = "minimax", .detect = {"<minimax:tool_call>", NULL}, .open = "<minimax:tool_call>",
     .close = "</minimax:tool_call>", .args_key = "arguments", .gen_open = "<minimax:tool_call>\n",
     .gen_close = "</minimax:tool_call>", .gen_sep = "\n<minimax:tool_call>\n", .gen_end = "", .xml = &minimax_xml},
    {.name = "qwen3_coder", .detect = {"<parameter=", NULL}, .open = "<tool_call>", .close = "</tool_call>",
     .args_key = "arguments", .gen_open = "<tool_call>\n", .gen_close = "\n</tool_call>", .gen_sep = "\n<tool_call>\n",
     .gen_end = "", .xml = &qwen3_xml},
    {.name = "glm", .detect = {"<arg_key>", NULL}, .open = "<tool_call>", .close = "</tool_call>", .args_key = "arguments",
     .gen_open = "<tool_call>", .gen_close = "</tool_call>", .gen_sep = "\n<tool_call>", .gen_end = "", .xml = &glm_xml},
    {.name = "hermes", .detect = {"<tool_call>", NULL}, .open = "<tool_call>", .close = "</tool_call>",
     .args_key = "arguments", .gen_open = "<tool_call>\n", .gen_close = "\n</tool_call>",
     .gen_sep = "\n<tool_call>\n", .gen_end = ""},
    {.name = "llama3_json", .detect = {"<|python_tag|>", "\"parameters\": dictionary"}, .open = "<|python_tag|>",
     .close = "", .bare = 1, .semicolons = 1, .args_key = "parameters", .gen_open = "", .gen_close = "",
     .gen_sep = "; ", .gen_end = "", .trigger = "{\"name\"", .anchored = 1},
};
#define N_DIALECTS (sizeof dialects / sizeof dialects[0])

const tm_tool_dialect *tm_tool_dialect_named(const char *name)
{
    for (size_t i = 0; name && i < N_DIALECTS; i++)
        if (!strcmp(name, dialects[i].name)) return &dialects[i];
    return NULL;
}

const tm_tool_dialect *tm_tool_dialect_detect(const char *template_src)
{
    for (size_t i = 0; template_src && i < N_DIALECTS; i++)
        for (int k = 0; k < 2; k++)
            if (dialects[i].detect[k] && strstr(template_src, dialects[i].detect[k])) return &dialects[i];
    return NULL;
}

const char *tm_tool_dialect_names(void)
{
    return "hermes, llama3_json, mistral, mistral_args, granite, qwen3_coder, glm, seed_oss, minimax, harmony, "
           "deepseek_v3, command_r, kimi_k2";
}

int tm_tool_dialect_kept(const tm_tool_dialect *d, const char *template_src, int (*special)(void *ud, const char *text),
                         void *ud, tm_tool_dialect *out)
{
    if (!d || !d->tokens || !special(ud, d->open) || (d->args_marker && !special(ud, d->args_marker))) return 0;
    *out = *d;
    out->bare = 0; /* the marker is in the text: the calls start there, as hermes' do at <tool_call> */
    out->keep = d->tokens;
    if (d->args_marker) { /* [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}, a [CALL_ID] and an id in some */
        out->gen_sep = d->open;
        out->gen_args = d->args_marker;
        int id = d->id_marker && template_src && strstr(template_src, d->id_marker) && special(ud, d->id_marker);
        out->gen_id = id ? d->tokens_id : NULL;
    }
    return 1;
}

const char *tm_tool_lazy_trigger(const tm_tool_dialect *d, int *anchored)
{
    *anchored = 0;
    if (!d) return NULL;
    if (d->trigger) {
        *anchored = d->anchored;
        return d->trigger;
    }
    return d->bare ? NULL : d->open;
}

/* ---- the tools array ---------------------------------------------------------------------- */

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TM_TOOL_MAX_NAME) return 0;
    for (const char *p = s; *p; p++)
        if (!name_char(*p)) return 0;
    return 1;
}

/* tools[i].function (checked by tm_tool_check) */
static const cJSON *tool_fn(const cJSON *tool)
{
    return cJSON_GetObjectItemCaseSensitive(tool, "function");
}

static const char *tool_name(const cJSON *tool)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(tool_fn(tool), "name");
    return cJSON_IsString(n) ? n->valuestring : NULL;
}

int tm_tool_check(const char *tools_json, tm_err *err)
{
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    int rc = TM_OK, i = 0;
    if (!cJSON_IsArray(tools)) {
        rc = tm_errf(err, TM_E_FORMAT, "tools: must be an array of tools");
        goto out;
    }
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        if (i == TM_TOOL_MAX_TOOLS) {
            rc = tm_errf(err, TM_E_FORMAT, "tools: more than %d tools", TM_TOOL_MAX_TOOLS);
            goto out;
        }
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = tool_fn(t);
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0) {
            rc = tm_errf(err, TM_E_FORMAT, "tools[%d]: must be {\"type\": \"function\", \"function\": {...}}", i);
            goto out;
        }
        if (!cJSON_IsObject(fn)) {
            rc = tm_errf(err, TM_E_FORMAT, "tools[%d].function: must be an object", i);
            goto out;
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(name) || !name_ok(name->valuestring)) {
            rc = tm_errf(err, TM_E_FORMAT,
                         "tools[%d].function.name: must be 1 to %d letters, digits, '_', '-' or '.'", i,
                         TM_TOOL_MAX_NAME);
            goto out;
        }
        for (const cJSON *u = tools->child; u != t; u = u->next)
            if (!strcmp(tool_name(u), name->valuestring)) {
                rc = tm_errf(err, TM_E_FORMAT, "tools[%d].function.name: '%s' is declared twice", i,
                             name->valuestring);
                goto out;
            }
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
        if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc)) {
            rc = tm_errf(err, TM_E_FORMAT, "tools[%d].function.description: must be a string", i);
            goto out;
        }
        const cJSON *strict = cJSON_GetObjectItemCaseSensitive(fn, "strict");
        if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict)) {
            rc = tm_errf(err, TM_E_FORMAT, "tools[%d].function.strict: must be a boolean", i);
            goto out;
        }
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (params && !cJSON_IsNull(params)) {
            const cJSON *pt = cJSON_GetObjectItemCaseSensitive(params, "type");
            if (!cJSON_IsObject(params) ||
                (pt && !(cJSON_IsString(pt) && !strcmp(pt->valuestring, "object")))) {
                rc = tm_errf(err, TM_E_FORMAT, "tools[%d].function.parameters: must be a JSON Schema of an object", i);
                goto out;
            }
        }
    }
    if (i == 0) rc = tm_errf(err, TM_E_FORMAT, "tools: is empty");
out:
    cJSON_Delete(tools);
    return rc;
}

static const cJSON *declared(const cJSON *tools, const char *name)
{
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
        const char *n = tool_name(t);
        if (n && !strcmp(n, name)) return t;
    }
    return NULL;
}

/* ---- parsing ------------------------------------------------------------------------------- */

typedef struct calls {
    tm_tool_call *v;
    size_t n, cap;
    int want_part;           /* tm_tool_parse_partial: keep the call the text ends inside in part */
    tm_tool_call part;       /* its name (NULL: none begun), the start of its arguments, its text id */
} calls;

static void call_free(tm_tool_call *t)
{
    free(t->name);
    free(t->arguments);
    free(t->id);
    memset(t, 0, sizeof *t);
}

static void calls_clear(calls *c)
{
    for (size_t i = 0; i < c->n; i++) call_free(&c->v[i]);
    free(c->v);
    call_free(&c->part);
    memset(c, 0, sizeof *c);
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const char *s, size_t i, size_t len)
{
    while (i < len && is_ws(s[i])) i++;
    return i;
}

enum { GOOD = 1, BAD = 2, CUT = 3 }; /* beside TM_OK (0) and the negative statuses; CUT: an unfinished call ends
                                        a reply cut short */

/* a JSON call's keys: its name under the dialect's name_key or "name", its arguments under "arguments" or
 * "parameters"; where a call has both of a pair, the first written is read (so a stream that has read
 * one knows it is the one) */
static int is_name_key(const char *k, const char *name_key)
{
    return k && (!strcmp(k, "name") || (name_key && !strcmp(k, name_key)));
}

static int is_args_key(const char *k)
{
    return k && (!strcmp(k, "arguments") || !strcmp(k, "parameters"));
}

/* o as a call to a declared tool, appended to c: GOOD, BAD (not a call) or TM_E_NOMEM. name_key: the
 * key of the tool's name in the dialect's calls (NULL: "name" only; else also "name") */
static int add_call(const cJSON *o, const char *name_key, const cJSON *tools, calls *c)
{
    const cJSON *name = NULL, *args = NULL;
    for (const cJSON *m = cJSON_IsObject(o) ? o->child : NULL; m; m = m->next) { /* the first of either key */
        if (!name && (is_name_key(m->string, name_key))) name = m;
        if (!args && is_args_key(m->string)) args = m;
    }
    if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !declared(tools, name->valuestring)) return BAD;
    cJSON *parsed = NULL;
    if (cJSON_IsString(args)) /* some models write the arguments as a string holding the object */
        args = parsed = cJSON_Parse(args->valuestring);
    char *text = NULL;
    if (!args || cJSON_IsNull(args)) text = strdup("{}");
    else if (cJSON_IsObject(args)) text = cJSON_PrintUnformatted(args);
    else {
        cJSON_Delete(parsed);
        return BAD;
    }
    cJSON_Delete(parsed);
    char *nm = strdup(name->valuestring);
    if (!text || !nm || tm_grow((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v)) {
        free(text);
        free(nm);
        return TM_E_NOMEM;
    }
    c->v[c->n++] = (tm_tool_call){nm, text, NULL};
    return GOOD;
}

/* The JSON value at text[p..len): parsed (*v), its end in *end; NULL if none. */
static cJSON *json_at(const char *text, size_t len, size_t p, size_t *end)
{
    const char *e = NULL;
    cJSON *v = p < len ? cJSON_ParseWithLengthOpts(text + p, len - p, &e, 0) : NULL;
    if (v) *end = (size_t)(e - text);
    return v;
}

/* ---- the call a reply being written ends inside (tm_tool_parse_partial) ---- */

/* cJSON's whitespace between tokens: any byte up to 32 */
static size_t skip_jws(const char *s, size_t i, size_t len)
{
    while (i < len && (unsigned char)s[i] <= 32) i++;
    return i;
}

/* c->part := a call to nm [nl] where that is a declared tool (else none), its arguments so far args
 * [alen], its text id id [idl] (NULL: none). CUT (the caller's status: the text ends inside the call)
 * or TM_E_NOMEM. */
static int set_part(calls *c, const cJSON *tools, const char *nm, size_t nl, const char *args, size_t alen,
                    const char *id, size_t idl)
{
    if (!c->want_part) return CUT;
    call_free(&c->part);
    char name[TM_TOOL_MAX_NAME + 1];
    if (!nl || nl > TM_TOOL_MAX_NAME) return CUT;
    memcpy(name, nm, nl);
    name[nl] = '\0';
    if (!declared(tools, name)) return CUT;
    c->part.name = strdup(name);
    c->part.arguments = strndup(args ? args : "", alen);
    c->part.id = id ? strndup(id, idl) : NULL;
    if (!c->part.name || !c->part.arguments || (id && !c->part.id)) {
        call_free(&c->part);
        return TM_E_NOMEM;
    }
    return CUT;
}

/* set_part with the arguments the compact start of the object at text[a..len) (text/json_compact.h;
 * none yet where a is len, or where no object starts there: a string holding one is read whole) */
static int part_json(calls *c, const cJSON *tools, const char *nm, size_t nl, const char *text, size_t len, size_t a,
                     const char *id, size_t idl)
{
    if (!c->want_part) return CUT;
    tm_jbuf args = {0};
    size_t used = 0;
    if (a < len && text[a] == '{' && tm_json_compact(text + a, len - a, &args, &used) == TM_E_NOMEM) {
        free(args.p);
        return TM_E_NOMEM;
    }
    int rc = set_part(c, tools, nm, nl, args.p, args.n, id, idl);
    free(args.p);
    return rc;
}

/* The JSON call object at text[p..len) ('{') that the text ends inside: its members read in turn while
 * they are whole; the first name key's string names it, the first arguments key's value is its arguments
 * (add_call's rule). CUT or TM_E_NOMEM. */
static int part_object(const tm_tool_dialect *d, const char *text, size_t len, size_t p, const cJSON *tools, calls *c)
{
    char name[TM_TOOL_MAX_NAME + 1];
    size_t nl = 0, a = len, q = p + 1;
    int have_name = 0, have_args = 0, rc = CUT;
    if (!c->want_part) return CUT;
    while ((q = skip_jws(text, q, len)) < len && text[q] == '"') {
        size_t used = 0;
        tm_jbuf kb = {0};
        int k = tm_json_compact(text + q, len - q, &kb, &used);
        cJSON *key = k == TM_JC_WHOLE ? cJSON_ParseWithLength(text + q, used) : NULL;
        free(kb.p);
        if (k == TM_E_NOMEM) return TM_E_NOMEM;
        if (!cJSON_IsString(key)) {
            cJSON_Delete(key);
            break;
        }
        int is_name = !have_name && is_name_key(key->valuestring, d->name_key);
        int is_args = !have_args && is_args_key(key->valuestring);
        cJSON_Delete(key);
        q = skip_jws(text, q + used, len);
        if (q == len || text[q] != ':') break;
        q = skip_jws(text, q + 1, len);
        if (is_args) have_args = 1, a = q;
        tm_jbuf vb = {0};
        k = q < len ? tm_json_compact(text + q, len - q, &vb, &used) : TM_JC_MORE;
        cJSON *v = is_name && k == TM_JC_WHOLE ? cJSON_ParseWithLength(text + q, used) : NULL;
        free(vb.p);
        if (k == TM_E_NOMEM) return TM_E_NOMEM;
        if (is_name) { /* the first name key decides: a string naming a tool, or no call */
            have_name = 1;
            if (cJSON_IsString(v) && strlen(v->valuestring) <= TM_TOOL_MAX_NAME) {
                nl = strlen(v->valuestring);
                memcpy(name, v->valuestring, nl + 1);
            }
            cJSON_Delete(v);
            if (!nl) return CUT;
        }
        if (k != TM_JC_WHOLE) break;
        q = skip_jws(text, q + used, len);
        if (q == len || text[q] != ',') break;
        q++;
    }
    if (nl) rc = part_json(c, tools, name, nl, text, len, a, NULL, 0);
    return rc;
}

/* does text[p..len) start with marker m (*whole = 1), or is it a proper prefix of m (*whole = 0)? */
static int marker_at(const char *m, const char *text, size_t len, size_t p, int *whole)
{
    size_t k = m ? strlen(m) : 0;
    if (!k || p >= len) return 0;
    *whole = len - p >= k;
    return !memcmp(text + p, m, *whole ? k : len - p);
}

/* One call of a named dialect at text[p..len): [name_prefix] name, [id_marker id], [args_marker], object, no
 * space between (where d->text_ids, the text from the prefix to the id is the call's id). GOOD (*end past the
 * object), BAD, CUT, or TM_E_NOMEM. */
static int named_call_at(const tm_tool_dialect *d, const char *text, size_t len, size_t p, const cJSON *tools,
                         calls *c, size_t *end, int cut)
{
    int whole, fenced = 0;
    if (marker_at(d->call_open, text, len, p, &whole)) { /* (optional) */
        if (!whole) return cut ? CUT : BAD;
        p += strlen(d->call_open);
    }
    /* the older typed form (fenced): "function" and the marker before the name, the object in a json fence */
    size_t tl = d->fenced ? 8 + strlen(d->args_marker) : 0;
    if (tl && len - p > tl && !memcmp(text + p, "function", 8) && !memcmp(text + p + 8, d->args_marker, tl - 8) &&
        name_char(text[p + tl]))
        p += tl, fenced = 1;
    size_t id0 = p; /* where the call's text id starts (text_ids) */
    if (marker_at(d->name_prefix, text, len, p, &whole) && whole) p += strlen(d->name_prefix);
    size_t q = p;
    while (q < len && name_char(text[q])) q++;
    if (q == len) return cut ? CUT : BAD;
    if (q == p || q - p > TM_TOOL_MAX_NAME) return BAD;
    size_t nend = q;
    /* the text ends inside the call past its name: CUT, with the call as far as it goes (part_json) */
#define NAMED_CUT(a, id, idl) (cut ? part_json(c, tools, text + p, nend - p, text, len, a, id, idl) : BAD)
    if (fenced) { /* NAME\n```json\n{...}\n``` */
        size_t k = skip_ws(text, q, len);
        if (k == len) return NAMED_CUT(len, NULL, 0);
        if (!marker_at("```json", text, len, k, &whole)) return BAD;
        if (!whole) return NAMED_CUT(len, NULL, 0);
        q = skip_ws(text, k + 7, len);
    }
    if (marker_at(d->id_marker, text, len, q, &whole)) {
        if (!whole) return cut ? CUT : BAD;
        q += strlen(d->id_marker);
        while (q < len && name_char(text[q])) q++;
        if (q == len) return cut ? CUT : BAD;
    }
    size_t idend = q;
    const char *tid = d->text_ids && idend - id0 <= TM_TOOL_MAX_NAME + 32 ? text + id0 : NULL; /* (below) */
    if (marker_at(d->args_marker, text, len, q, &whole)) {
        if (!whole) return NAMED_CUT(len, tid, idend - id0);
        q += strlen(d->args_marker);
    }
    if (q == len) return NAMED_CUT(len, tid, idend - id0);
    if (text[q] != '{') return BAD; /* the object right after (cJSON would skip a space) */
    size_t e = 0;
    cJSON *args = json_at(text, len, q, &e);
    if (!args) return NAMED_CUT(q, tid, idend - id0);
#undef NAMED_CUT
    cJSON *o = cJSON_CreateObject();
    char nm[TM_TOOL_MAX_NAME + 1];
    memcpy(nm, text + p, nend - p);
    nm[nend - p] = '\0';
    if (!o || !cJSON_AddStringToObject(o, "name", nm) || !cJSON_AddItemToObject(o, "arguments", args)) {
        if (!o || !cJSON_GetObjectItemCaseSensitive(o, "arguments")) cJSON_Delete(args);
        cJSON_Delete(o);
        return TM_E_NOMEM;
    }
    int rc = add_call(o, NULL, tools, c);
    cJSON_Delete(o);
    if (rc != GOOD) return rc;
    if (tid) { /* the id as written: prefix, name, id marker and id (up to the arguments' marker); a longer one
                  is not kept: the server's */
        if (!(c->v[c->n - 1].id = strndup(tid, idend - id0))) return TM_E_NOMEM;
    }
    size_t k = skip_ws(text, e, len);
    if (fenced && marker_at("```", text, len, k, &whole)) { /* the fence's end (optional) */
        if (!whole) return cut ? CUT : BAD;
        e = k + 3;
        k = skip_ws(text, e, len);
    }
    if (marker_at(d->call_close, text, len, k, &whole)) { /* (optional; a piece of it ends a cut reply) */
        if (!whole) return cut ? CUT : BAD;
        e = k + strlen(d->call_close);
    }
    *end = e;
    return rc;
}

/* ---- XML dialects ---- */

/* does text[p..len) start with tag t? 1 yes, 0 no, -1 the text ends inside it; t "" is never there */
static int tag_at(const char *t, const char *text, size_t len, size_t p)
{
    int whole;
    if (!marker_at(t, text, len, p, &whole)) return 0;
    return whole ? 1 : -1;
}

/* the schema of tool's parameter key (NULL: none declared) */
static const cJSON *param_schema(const cJSON *tool, const char *key)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(tool_fn(tool), "parameters");
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(params, "properties"), key);
}

/* is schema's value a string (written raw between the tags)? Its "type" says so (or lists "string");
 * without a type, an enum or const of strings only, or nothing that says otherwise (no schema) */
static int string_typed(const cJSON *schema)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(schema, "type"), *e;
    if (cJSON_IsString(ty)) return !strcmp(ty->valuestring, "string");
    if (cJSON_IsArray(ty)) {
        cJSON_ArrayForEach(e, ty) if (cJSON_IsString(e) && !strcmp(e->valuestring, "string")) return 1;
        return 0;
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    const cJSON *co = cJSON_GetObjectItemCaseSensitive(schema, "const");
    if (co) return cJSON_IsString(co);
    for (e = cJSON_IsArray(en) ? en->child : NULL; e; e = e->next)
        if (!cJSON_IsString(e)) return 0;
    return 1;
}

/* an XML argument's value, raw text v [n], typed by its schema: a string where the schema says so (or
 * says nothing), else the text as JSON, or as Python's str() of a boolean or None (the form the
 * templates print non-string values in), else the text. NULL: out of memory */
static cJSON *xml_value(const cJSON *schema, const char *v, size_t n)
{
    if (!string_typed(schema)) {
        const char *e = NULL;
        cJSON *j = n ? cJSON_ParseWithLengthOpts(v, n, &e, 0) : NULL;
        if (j && skip_ws(v, (size_t)(e - v), n) == n) return j; /* the whole text, not a value and more */
        cJSON_Delete(j);
        static const struct {
            const char *py;
            int kind;
        } py[] = {{"True", cJSON_True}, {"False", cJSON_False}, {"None", cJSON_NULL}};
        for (size_t i = 0; i < sizeof py / sizeof py[0]; i++)
            if (n == strlen(py[i].py) && !memcmp(v, py[i].py, n))
                return py[i].kind == cJSON_True ? cJSON_CreateTrue()
                       : py[i].kind == cJSON_False ? cJSON_CreateFalse() : cJSON_CreateNull();
    }
    char *str = malloc(n + 1);
    if (!str) return NULL;
    memcpy(str, v, n);
    str[n] = '\0';
    cJSON *j = cJSON_CreateString(str);
    free(str);
    return j;
}

/* The XML call to nm the text ends inside: its arguments so far are the object args of its whole ones,
 * open, and where the text ends inside a string argument (*pkey), that one's value from text[pv] on,
 * less what may yet turn out to be its closing tag (and, with trim_nl, the newline before it). CUT or
 * TM_E_NOMEM. */
static int part_xml(const tm_tool_xml *x, const char *text, size_t len, const char *nm, const cJSON *args,
                    const char *pkey, size_t pv, const cJSON *tools, calls *c)
{
    char *whole = cJSON_PrintUnformatted(args); /* "{...}" */
    tm_jbuf b = {0};
    int rc = whole && !tm_jbuf_put(&b, whole, strlen(whole) - 1) ? TM_OK : TM_E_NOMEM;
    if (rc == TM_OK && *pkey) {
        size_t end = len, vl = strlen(x->val_close);
        for (size_t k = vl - 1 < len - pv ? vl - 1 : len - pv; k > 0; k--)
            if (!memcmp(text + len - k, x->val_close, k)) {
                end = len - k;
                break;
            }
        if (x->trim_nl && end > pv && text[end - 1] == '\n') end--;
        if ((args->child && tm_jbuf_put(&b, ",", 1)) || tm_jbuf_put(&b, "\"", 1) ||
            tm_json_escape_put(&b, pkey, strlen(pkey)) || tm_jbuf_put(&b, "\":\"", 3) ||
            tm_json_escape_put(&b, text + pv, end - pv))
            rc = TM_E_NOMEM;
    }
    if (rc == TM_OK) rc = set_part(c, tools, nm, strlen(nm), b.p, b.n, NULL, 0);
    free(whole);
    free(b.p);
    return rc;
}

/* One call of an XML dialect at text[p..len): GOOD (*end past it), BAD, CUT or TM_E_NOMEM. A tag the
 * text ends inside, or a value without its closing tag, is CUT in a reply cut short. */
static int xml_call_at(const tm_tool_dialect *d, const char *text, size_t len, size_t p, const cJSON *tools,
                       calls *c, size_t *end, int cut)
{
    const tm_tool_xml *x = d->xml;
    const int more = cut ? CUT : BAD; /* the text ends where the call goes on */
    size_t q = p;
    int t = tag_at(x->fn_open, text, len, q);
    if (t < 0 || (*x->fn_open && q == len)) return more;
    if (*x->fn_open && !t) return BAD;
    q += strlen(x->fn_open);
    size_t n0 = q;
    while (q < len && name_char(text[q])) q++;
    if (q == len) return more;
    if (q == n0 || q - n0 > TM_TOOL_MAX_NAME) return BAD;
    char nm[TM_TOOL_MAX_NAME + 1];
    memcpy(nm, text + n0, q - n0);
    nm[q - n0] = '\0';
    if ((t = tag_at(x->fn_close, text, len, q)) < 0) return cut ? set_part(c, tools, nm, strlen(nm), "", 0, NULL, 0) : BAD;
    if (*x->fn_close && !t) return BAD;
    q += strlen(x->fn_close);
    const cJSON *tool = declared(tools, nm);
    if (!tool) return BAD;
    char pkey[257] = "";     /* a string argument the text ends inside: its key and where its value starts */
    size_t pv = len;
    cJSON *o = cJSON_CreateObject(), *args = cJSON_CreateObject();
    if (!o || !args || !cJSON_AddStringToObject(o, "name", nm) || !cJSON_AddItemToObject(o, "arguments", args)) {
        if (!cJSON_GetObjectItemCaseSensitive(o, "arguments")) cJSON_Delete(args);
        cJSON_Delete(o);
        return TM_E_NOMEM;
    }
    int rc = GOOD;
    size_t kl = strlen(x->key_close), vl = strlen(x->val_close);
    for (;;) {
        q = skip_ws(text, q, len);
        if ((t = tag_at(x->key_open, text, len, q)) < 0 || (q == len && (cut || *x->fn_end))) {
            rc = more;
            break;
        }
        if (!t) { /* no more arguments: the call's end tag, where it has one (a reply cut inside it: complete) */
            if (*x->fn_end && (t = tag_at(x->fn_end, text, len, q)) != 1) {
                if (t < 0 && cut) q = len;
                else rc = t < 0 ? more : BAD;
            } else {
                q += strlen(x->fn_end);
            }
            break;
        }
        q += strlen(x->key_open);
        const char *kc = memmem(text + q, len - q, x->key_close, kl);
        size_t k1 = kc ? (size_t)(kc - text) : len;
        if (!kc && len - q <= 256) { /* (a key of up to 256 bytes may still close; past that it is not one) */
            rc = more;
            break;
        }
        if (k1 == q || k1 - q > 256 || memchr(text + q, '\n', k1 - q) || memchr(text + q, '<', k1 - q)) {
            rc = BAD; /* not a key */
            break;
        }
        char key[257];
        memcpy(key, text + q, k1 - q);
        key[k1 - q] = '\0';
        q = k1 + kl;
        if (*x->val_open) {
            q = skip_ws(text, q, len);
            if ((t = tag_at(x->val_open, text, len, q)) != 1 || q == len) {
                rc = t < 0 || q == len ? more : BAD;
                break;
            }
            q += strlen(x->val_open);
        }
        const char *vc = memmem(text + q, len - q, x->val_close, vl);
        if (!vc) {
            if (cut && string_typed(param_schema(tool, key))) {
                memcpy(pkey, key, strlen(key) + 1);
                pv = x->trim_nl && q < len && text[q] == '\n' ? q + 1 : q;
            }
            rc = more;
            break;
        }
        size_t v0 = q, v1 = (size_t)(vc - text);
        if (x->trim_nl && v0 < v1 && text[v0] == '\n') v0++;
        if (x->trim_nl && v1 > v0 && text[v1 - 1] == '\n') v1--;
        q = (size_t)(vc - text) + vl;
        cJSON *val = xml_value(param_schema(tool, key), text + v0, v1 - v0);
        if (!val) {
            rc = TM_E_NOMEM;
            break;
        }
        if (!cJSON_AddItemToObject(args, key, val)) { /* a key written twice stays twice, as in a JSON call */
            cJSON_Delete(val);
            rc = TM_E_NOMEM;
            break;
        }
    }
    if (rc == GOOD) rc = add_call(o, NULL, tools, c);
    else if (rc == CUT && c->want_part) rc = part_xml(x, text, len, nm, args, pkey, pv, tools, c);
    cJSON_Delete(o);
    if (rc == GOOD) *end = q;
    return rc;
}

/* The calls of one marker (or of a bare reply) at text[p..len): GOOD with *end past them, BAD,
 * CUT (cut: the reply ends inside a call; the complete ones before it are in c) or TM_E_NOMEM. A
 * list is read element by element, so that a cut one leaves those before it. */
static int calls_at(const tm_tool_dialect *d, const char *text, size_t len, size_t p, const cJSON *tools, calls *c,
                    size_t *end, int cut)
{
    if (d->xml) { /* one call a marker; a second function tag in the same block is a second call */
        int rc = xml_call_at(d, text, len, p, tools, c, end, cut);
        while (rc == GOOD && *d->xml->fn_open) {
            size_t q = skip_ws(text, *end, len), e = 0;
            if (tag_at(d->xml->fn_open, text, len, q) != 1) break;
            int r2 = xml_call_at(d, text, len, q, tools, c, &e, cut);
            if (r2 != GOOD) return r2;
            *end = e;
        }
        return rc;
    }
    if (d->args_marker) { /* named calls, one after another (their markers are special tokens the text may skip) */
        int rc = named_call_at(d, text, len, p, tools, c, end, cut);
        while (rc == GOOD) {
            size_t q = skip_ws(text, *end, len);
            int whole;
            if (q == len || (!name_char(text[q]) && !marker_at(d->call_open, text, len, q, &whole))) break;
            size_t e = 0;
            int r2 = named_call_at(d, text, len, q, tools, c, &e, cut);
            if (r2 == GOOD) *end = e;
            else if (r2 == CUT) return CUT;
            else if (r2 != BAD) return r2;
            else break; /* not a call: text after the calls */
        }
        return rc;
    }
    if (d->list) {
        if (p == len) return cut ? CUT : BAD;
        if (text[p] != '[') return BAD;
        p = skip_ws(text, p + 1, len);
    }
    for (;;) {
        size_t e = 0;
        cJSON *v = json_at(text, len, p, &e);
        if (!v) return !cut || (p < len && text[p] != '{') ? BAD : p < len ? part_object(d, text, len, p, tools, c) : CUT;
        int rc = add_call(v, d->name_key, tools, c);
        cJSON_Delete(v);
        if (rc != GOOD) return rc;
        size_t q = skip_ws(text, e, len);
        if (d->list) {
            if (q == len) return cut ? CUT : BAD;
            if (text[q] == ']') {
                *end = q + 1;
                return GOOD;
            }
            if (text[q] != ',') return BAD;
            p = skip_ws(text, q + 1, len);
            continue;
        }
        *end = e;
        if (!d->semicolons || q == len || text[q] != ';') return GOOD;
        *end = q + 1; /* a ';' after the last call belongs to it */
        p = skip_ws(text, q + 1, len);
        if (p == len && cut) return CUT;
        if (p == len || text[p] != '{') return GOOD;
    }
}

/* Content: sb-like append */
typedef struct text {
    char *p;
    size_t n, cap;
} text_t;

static int put(text_t *t, const char *s, size_t n)
{
    if (tm_grow((void **)&t->p, &t->cap, t->n + n + 1, 1)) return TM_E_NOMEM;
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
    return TM_OK;
}

/* GOOD: every marker opened calls (c, content), BAD: the reply is not calls, or TM_E_NOMEM */
static int split(const tm_tool_dialect *d, const char *text, size_t len, const cJSON *tools, int cut, calls *c,
                 text_t *content)
{
    size_t i = skip_ws(text, 0, len), e = 0, olen = strlen(d->open), clen = strlen(d->close), pos = 0;
    /* a bare reply: the calls' bracket first, or (named) a name, and no marker anywhere */
    int bare_start = i < len && (d->args_marker ? name_char(text[i]) && !memmem(text, len, d->open, olen)
                                                : text[i] == (d->list ? '[' : '{'));
    if (d->bare && bare_start && !(len - i >= olen && !memcmp(text + i, d->open, olen))) {
        /* named calls stand bare only where no marker comes anywhere: a reply still being written cannot
           know that yet */
        if (c->want_part && d->args_marker) return BAD;
        int rc = calls_at(d, text, len, i, tools, c, &e, cut);
        if (rc == CUT) return c->n || c->part.name ? GOOD : BAD;
        return rc == GOOD && skip_ws(text, e, len) < len ? BAD : rc;
    }
    while (pos < len) {
        const char *m = memmem(text + pos, len - pos, d->open, olen);
        size_t at = m ? (size_t)(m - text) : len;
        if (put(content, text + pos, at - pos)) return TM_E_NOMEM;
        if (!m) break;
        int rc = calls_at(d, text, len, skip_ws(text, at + olen, len), tools, c, &e, cut);
        if (rc == CUT) break; /* the unfinished call is neither a call nor content */
        if (rc != GOOD) return rc;
        pos = e;
        if (clen) {
            size_t q = skip_ws(text, e, len);
            if (len - q >= clen && !memcmp(text + q, d->close, clen)) pos = q + clen;
            else if (q < len && !(cut && len - q < clen && !memcmp(text + q, d->close, len - q)))
                return BAD; /* an unclosed call before more text */
            else pos = len;
        }
    }
    return c->n || c->part.name ? GOOD : BAD;
}

/* ---- harmony ---- */

/* tm_tool_harmony_calls over the tools parsed (NULL: none) */
static int harmony_calls(const tm_harmony *h, const cJSON *tools, int cut, tm_tool_calls *out, tm_err *err)
{
    memset(out, 0, sizeof *out);
    calls c = {0};
    text_t content = {0};
    int rc = put(&content, h->content ? h->content : "", h->clen);
    for (int i = 0; i < h->n_calls && rc == TM_OK; i++) {
        const tm_harmony_call *hc = &h->calls[i];
        if (cut && !hc->closed && i == h->n_calls - 1) break; /* the call the reply was cut inside */
        cJSON *o = cJSON_CreateObject(), *args = hc->body ? cJSON_ParseWithLength(hc->body, hc->blen) : NULL;
        int r = BAD;
        if (o && args && cJSON_IsObject(args) && strlen(hc->to) <= TM_TOOL_MAX_NAME &&
            cJSON_AddStringToObject(o, "name", hc->to) && cJSON_AddItemToObject(o, "arguments", args)) {
            args = NULL;
            r = tools ? add_call(o, NULL, tools, &c) : BAD;
        } else if (!o) {
            r = TM_E_NOMEM;
        }
        cJSON_Delete(o);
        cJSON_Delete(args);
        if (r == TM_E_NOMEM) rc = r;
        else if (r == BAD && hc->blen) /* not a call: what the model wrote stays the answer's */
            rc = (content.n && put(&content, "\n\n", 2)) || put(&content, hc->body, hc->blen) ? TM_E_NOMEM : TM_OK;
    }
    if (rc != TM_OK) {
        calls_clear(&c);
        free(content.p);
        return tm_errf(err, TM_E_NOMEM, "out of memory");
    }
    out->v = c.v;
    out->n = (int)c.n;
    out->content = content.p;
    out->content_len = content.n;
    return TM_OK;
}

int tm_tool_harmony_calls(const tm_harmony *h, const char *tools_json, int cut, tm_tool_calls *out, tm_err *err)
{
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    int rc = harmony_calls(h, tools, cut, out, err);
    cJSON_Delete(tools);
    return rc;
}

/* A harmony reply's call the parser h (fed so far) ends inside, into *part (tm_tool_parse_partial) */
static int harmony_part(const tm_harmony *h, const cJSON *tools, tm_tool_call *part)
{
    const tm_harmony_call *hc = h->n_calls ? &h->calls[h->n_calls - 1] : NULL;
    if (!hc || hc->closed || !tools) return TM_OK;
    calls c = {.want_part = 1};
    size_t a = skip_jws(hc->body ? hc->body : "", 0, hc->blen);
    int rc = part_json(&c, tools, hc->to, strlen(hc->to), hc->body ? hc->body : "", hc->blen, a, NULL, 0);
    *part = c.part;
    return rc == TM_E_NOMEM ? rc : TM_OK;
}

/* tm_tool_parse over the tools parsed (NULL: none), and with part (tm_tool_parse_partial) the call the text
 * ends inside */
static int parse(const tm_tool_dialect *d, const char *text, size_t len, const cJSON *tools, int cut,
                 tm_tool_calls *out, tm_tool_call *part, tm_err *err)
{
    memset(out, 0, sizeof *out);
    if (part) memset(part, 0, sizeof *part), cut = 1;
    if (d && d->harmony) {
        tm_harmony h;
        tm_harmony_init(&h, 1);
        int rc = tm_harmony_feed(&h, text, len, !part) ? TM_E_NOMEM : harmony_calls(&h, tools, cut, out, err);
        if (rc == TM_OK && part && (rc = harmony_part(&h, tools, part)) != TM_OK) tm_tool_calls_free(out);
        tm_harmony_free(&h);
        return rc == TM_OK ? rc : tm_errf(err, TM_E_NOMEM, "out of memory");
    }
    calls c = {.want_part = part != NULL};
    text_t content = {0};
    int rc = d && tools ? split(d, text, len, tools, cut, &c, &content) : BAD;
    if (rc == GOOD) {
        while (content.n && is_ws(content.p[content.n - 1])) content.n--;
        rc = TM_OK;
    } else if (rc == BAD) {
        calls_clear(&c);
        content.n = 0;
        rc = put(&content, text, len);
    }
    if (rc == TM_OK && !content.p) rc = put(&content, "", 0);
    if (rc != TM_OK) {
        calls_clear(&c);
        free(content.p);
        return tm_errf(err, TM_E_NOMEM, "out of memory");
    }
    content.p[content.n] = '\0';
    if (part) *part = c.part;
    else call_free(&c.part);
    out->v = c.v;
    out->n = (int)c.n;
    out->content = content.p;
    out->content_len = content.n;
    return TM_OK;
}

int tm_tool_parse(const tm_tool_dialect *d, const char *text, size_t len, const char *tools_json, int cut,
                  tm_tool_calls *out, tm_err *err)
{
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    int rc = parse(d, text, len, tools, cut, out, NULL, err);
    cJSON_Delete(tools);
    return rc;
}

int tm_tool_parse_partial(const tm_tool_dialect *d, const char *text, size_t len, const struct cJSON *tools,
                          tm_tool_calls *out, tm_tool_call *part, tm_err *err)
{
    return parse(d, text, len, tools, 1, out, part, err);
}

void tm_tool_call_free(tm_tool_call *t)
{
    call_free(t);
}

void tm_tool_calls_free(tm_tool_calls *c)
{
    calls cc = {.v = c->v, .n = (size_t)c->n, .cap = (size_t)c->n};
    calls_clear(&cc);
    free(c->content);
    memset(c, 0, sizeof *c);
}

size_t tm_tool_safe_prefix(const tm_tool_dialect *d, const char *text, size_t len)
{
    if (d->harmony) return 0; /* its text is markup: text/harmony.h reads the answer out of it */
    if (d->bare) {
        size_t i = skip_ws(text, 0, len);
        if (i == len || (!d->args_marker && text[i] == (d->list ? '[' : '{'))) return 0;
        if (d->args_marker) { /* a name run to the end, or one followed by a marker or the object: maybe calls */
            size_t j = i;
            while (j < len && name_char(text[j])) j++;
            if (j > i && (j == len || text[j] == '{' || text[j] == '[')) return 0;
        }
    }
    size_t olen = strlen(d->open);
    const char *m = memmem(text, len, d->open, olen);
    if (m) return (size_t)(m - text);
    for (size_t k = olen - 1 < len ? olen - 1 : len; k > 0; k--)
        if (!memcmp(text + len - k, d->open, k)) return len - k;
    return len;
}

/* ---- the grammar of a forced reply ---------------------------------------------------------- */

static int puts_(text_t *t, const char *s)
{
    return put(t, s, strlen(s));
}

/* s as a GBNF literal */
static int put_lit(text_t *t, const char *s)
{
    int rc = puts_(t, "\"");
    for (; *s && !rc; s++) {
        char e[8];
        if (*s == '"' || *s == '\\') snprintf(e, sizeof e, "\\%c", *s);
        else if (*s == '\n') snprintf(e, sizeof e, "\\n");
        else if ((unsigned char)*s < 0x20) snprintf(e, sizeof e, "\\x%02X", (unsigned)(unsigned char)*s);
        else snprintf(e, sizeof e, "%c", *s);
        rc = puts_(t, e);
    }
    return rc ? rc : puts_(t, "\"");
}

/* src (GBNF) with every rule name prefixed by pfx: names are read outside literals, classes,
 * comments and repetition bounds. The converter's whitespace rule "ws" is written as at most one
 * space: a call's JSON is spaced as json.dumps spaces it, the form chat templates show the model. */
static int put_renamed(text_t *t, const char *src, const char *pfx)
{
    int rc = TM_OK;
    for (const char *p = src; *p && !rc;) {
        const char *q = p + 1;
        if ((p == src || p[-1] == '\n') && !strncmp(p, "ws ::= ", 7)) {
            rc = puts_(t, pfx);
            if (!rc) rc = puts_(t, "ws ::= \" \"?");
            p = strchr(p, '\n');
            if (!p) break;
            continue;
        }
        if (*p == '"' || *p == '[') {
            char close = *p == '"' ? '"' : ']';
            while (*q && *q != close) q += q[0] == '\\' && q[1] ? 2 : 1;
            if (*q) q++;
        } else if (*p == '#') {
            while (*q && *q != '\n') q++;
        } else if (*p == '{') {
            while (*q && *q != '}') q++;
            if (*q) q++;
        } else if (tm_gbnf_name_char(*p)) {
            while (tm_gbnf_name_char(*q)) q++;
            rc = puts_(t, pfx);
        }
        if (!rc) rc = put(t, p, (size_t)(q - p));
        p = q;
    }
    return rc;
}

/* the rules "PFX..." of schema (root PFXroot), converted strictly or, for a tool not strict,
 * leniently (keywords not supported ignored), and where even that fails, any value (any object where
 * obj); obj: the schema of an object ("type" added where it has none). field names it in errors. */
static int put_schema(text_t *t, const cJSON *schema_in, int strict, int obj, const char *pfx, const char *field,
                      tm_err *err)
{
    cJSON *schema = cJSON_IsObject(schema_in) ? cJSON_Duplicate(schema_in, 1) : cJSON_CreateObject();
    if (schema && obj && !cJSON_GetObjectItemCaseSensitive(schema, "type") &&
        !cJSON_AddStringToObject(schema, "type", "object")) {
        cJSON_Delete(schema);
        schema = NULL;
    }
    char *js = schema ? cJSON_PrintUnformatted(schema) : NULL;
    cJSON_Delete(schema);
    if (!js) return tm_errf(err, TM_E_NOMEM, "out of memory");
    char *gbnf = NULL;
    tm_err e2 = {0};
    int rc = strict ? tm_json_schema_gbnf(js, strlen(js), &gbnf, &e2) : tm_json_schema_gbnf_lenient(js, strlen(js), &gbnf, &e2);
    free(js);
    if (rc != TM_OK && rc != TM_E_NOMEM && !strict) {
        const char *any = obj ? "{\"type\":\"object\"}" : "{}";
        rc = tm_json_schema_gbnf(any, strlen(any), &gbnf, &e2);
    }
    if (rc != TM_OK) {
        free(gbnf);
        return tm_errf(err, rc, "%s: %s", field, e2.msg);
    }
    rc = put_renamed(t, gbnf, pfx);
    free(gbnf);
    return rc ? tm_errf(err, TM_E_NOMEM, "out of memory") : TM_OK;
}

/* the rules "tI-..." of tool I's arguments: its parameters schema (an object schema) */
static int put_args(text_t *t, const cJSON *fn, int i, tm_err *err)
{
    char pfx[24], field[48];
    snprintf(pfx, sizeof pfx, "t%d-", i);
    snprintf(field, sizeof field, "tools[%d].function.parameters", i);
    return put_schema(t, cJSON_GetObjectItemCaseSensitive(fn, "parameters"),
                      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict")), 1, pfx, field, err);
}

/* s as a GBNF character class's members */
static int put_class_chars(text_t *t, const char *s)
{
    int rc = TM_OK;
    for (; *s && !rc; s++) {
        char e[8];
        if (*s == '\n') snprintf(e, sizeof e, "\\n");
        else if (strchr("\\]^-[", *s)) snprintf(e, sizeof e, "\\%c", *s);
        else snprintf(e, sizeof e, "%c", *s);
        rc = puts_(t, e);
    }
    return rc;
}

/* rules tc-s0 .. tc-s{m-1}: the texts that do not contain stop (m ASCII bytes, its first byte nowhere
 * else in it: so it has no border, and a value then stop holds stop only at its end). They are stop's
 * prefix automaton: tc-sI has read a text whose longest end that begins stop is I bytes long; on a
 * byte that does not go on with stop, that is 1 if the byte is stop's first, else 0. */
static int put_avoid(text_t *t, const char *stop)
{
    size_t m = strlen(stop);
    char seen[128] = "";
    size_t ns = 0;
    for (size_t k = 0; k < m; k++)
        if (!memchr(seen, stop[k], ns)) seen[ns++] = stop[k];
    seen[ns] = '\0';
    int rc = TM_OK;
    for (size_t i = 0; i < m && !rc; i++) {
        char head[48];
        snprintf(head, sizeof head, "tc-s%zu ::= [^", i);
        rc = puts_(t, head) || put_class_chars(t, seen) || puts_(t, "] tc-s0");
        for (size_t k = 0; k < ns && !rc; k++) {
            size_t j = stop[i] == seen[k] ? i + 1 : stop[0] == seen[k] ? 1 : 0;
            if (j == m) continue; /* stop itself: not in a value */
            char ch[2] = {seen[k], '\0'}, nx[32];
            snprintf(nx, sizeof nx, " tc-s%zu", j);
            rc = puts_(t, " | ") || put_lit(t, ch) || puts_(t, nx);
        }
        rc = rc || puts_(t, " |\n");
    }
    return rc;
}

/* stop := what ends a string value in the grammar: the form's newline, then the closing tag */
static void xml_stop(const tm_tool_xml *x, char *stop, size_t size)
{
    snprintf(stop, size, "%s%s", x->trim_nl ? "\n" : "", x->val_close);
}

/* can the grammar write s between an XML dialect's tags? Valid UTF-8 (a literal holds code points), and,
 * for a key (key: 1), 1 to 256 bytes without '<', '>' or a newline, which would end it early */
static int xml_writable(const char *s, int key)
{
    size_t n = strlen(s);
    if (key && (n == 0 || n > 256 || strpbrk(s, "<>\n"))) return 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* a string value's element, raw text: its enum's or const's strings, else any text without the closing
 * tag (tc-s0). What else would bound a string (lengths, pattern, format) is not enforced: refused for a
 * strict tool (TM_E_UNSUPPORTED naming the field), ignored for the others. */
static int put_str_value(text_t *t, const cJSON *schema, int strict, const char *stop, const char *field, tm_err *err)
{
    static const char *bounds[] = {"minLength", "maxLength", "pattern", "format"};
    for (size_t b = 0; strict && b < sizeof bounds / sizeof bounds[0]; b++)
        if (cJSON_GetObjectItemCaseSensitive(schema, bounds[b]))
            return tm_errf(err, TM_E_UNSUPPORTED, "%s: '%s' is not supported for a string argument of this tool-call dialect",
                           field, bounds[b]);
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum"), *e;
    const cJSON *co = cJSON_GetObjectItemCaseSensitive(schema, "const");
    int bad = 0, first = 1;
    int writable = !cJSON_IsString(co) || (xml_writable(co->valuestring, 0) && !strstr(co->valuestring, stop));
    for (e = cJSON_IsArray(en) ? en->child : NULL; e && writable; e = e->next)
        writable = !cJSON_IsString(e) || (xml_writable(e->valuestring, 0) && !strstr(e->valuestring, stop));
    if (!writable) return tm_errf(err, TM_E_UNSUPPORTED, "%s: a value this tool-call dialect cannot write", field);
    if (cJSON_IsString(co)) return puts_(t, " ") || put_lit(t, co->valuestring) ? tm_errf(err, TM_E_NOMEM, "out of memory") : TM_OK;
    for (e = cJSON_IsArray(en) ? en->child : NULL; e && !bad; e = e->next, first = 0)
        bad = puts_(t, first ? " ( " : " | ") || put_lit(t, e->valuestring);
    if (!first) bad = bad || puts_(t, " )");
    else bad = puts_(t, " tc-s0");
    return bad ? tm_errf(err, TM_E_NOMEM, "out of memory") : TM_OK;
}

/* tool I's call in XML dialect x: tc-I ::= fn_open NAME fn_close "\n" arguments fn_end, each declared
 * property in the schema's order (the required ones present), key_open KEY key_close "\n" val_open
 * VALUE ["\n"] val_close "\n"; a string's VALUE tc-s0 (no closing tag in it), another its schema */
static int put_xml_call(text_t *t, const tm_tool_xml *x, const cJSON *tool, int i, tm_err *err)
{
    char stop[64];
    xml_stop(x, stop, sizeof stop);
    const cJSON *fn = tool_fn(tool), *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    int strict = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict"));
    char rule[64];
    snprintf(rule, sizeof rule, "tc-%d ::= ", i);
    int bad = puts_(t, rule) || put_lit(t, x->fn_open) || puts_(t, " ") || put_lit(t, tool_name(tool)) ||
              puts_(t, " ") || put_lit(t, x->fn_close) || puts_(t, " \"\\n\"");
    const cJSON *first = cJSON_IsObject(props) ? props->child : NULL, *p;
    int k = 0;
    for (p = first; p; p = p->next) {
        int required = 0;
        for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
            required |= cJSON_IsString(r) && !strcmp(r->valuestring, p->string);
        snprintf(rule, sizeof rule, " t%d-a%d%s", i, k++, required ? "" : "?");
        bad = bad || puts_(t, rule);
    }
    bad = bad || puts_(t, " ") || put_lit(t, x->fn_end) || puts_(t, "\n");
    k = 0;
    int rc = TM_OK;
    for (p = first; p && !bad && !rc; p = p->next) {
        char pfx[32], field[96];
        snprintf(rule, sizeof rule, "t%d-a%d ::= ", i, k);
        bad = puts_(t, rule) || put_lit(t, x->key_open) || puts_(t, " ") || put_lit(t, p->string) || puts_(t, " ") ||
              put_lit(t, x->key_close) || puts_(t, x->trim_nl || *x->val_open ? " \"\\n\" " : " ") ||
              put_lit(t, x->val_open);
        snprintf(pfx, sizeof pfx, "t%d-v%d-", i, k);
        snprintf(field, sizeof field, "tools[%d].function.parameters.properties.%.40s", i, p->string);
        if (!xml_writable(p->string, 1)) {
            rc = tm_errf(err, TM_E_UNSUPPORTED, "%s: a name this tool-call dialect cannot write", field);
            break;
        }
        if (!bad && string_typed(p)) rc = put_str_value(t, p, strict, stop, field, err);
        else bad = bad || puts_(t, " ") || puts_(t, pfx) || puts_(t, "root");
        bad = bad || puts_(t, " ") || (x->trim_nl && puts_(t, "\"\\n\" ")) || put_lit(t, x->val_close) ||
              puts_(t, " \"\\n\"\n");
        if (!bad && !rc && !string_typed(p)) rc = put_schema(t, p, strict, 0, pfx, field, err);
        k++;
    }
    if (bad) return tm_errf(err, TM_E_NOMEM, "out of memory");
    return rc;
}

int tm_tool_grammar(const tm_tool_dialect *d, const char *tools_json, const char *only, int parallel, int with_open,
                    char **gbnf, tm_err *err)
{
    *gbnf = NULL;
    int rc = tm_tool_check(tools_json, err);
    if (rc != TM_OK) return rc;
    cJSON *tools = cJSON_Parse(tools_json);
    if (!tools) return tm_errf(err, TM_E_NOMEM, "out of memory");
    if (d->harmony) parallel = 0; /* a harmony reply ends with its call (<|call|>) */
    if (only && !declared(tools, only)) {
        cJSON_Delete(tools);
        return tm_errf(err, TM_E_INVALID, "tool_choice: the function '%.64s' is not among the tools", only);
    }
    text_t t = {0};
    /* root ::= [gen_open] call close (sep call close)* end; where gen_open starts with a marker that is a special
       token kept in the text (the kept forms), a space may follow the marker: a SentencePiece tokenizer's next
       word starts with one (Mistral 7B v0.3 writes "[TOOL_CALLS] [") (with_open: from open on, where gen_open
       holds it later: harmony's recipient) */
    int kept = with_open && d->tokens && !d->bare;
    const char *go = with_open && *d->open && strstr(d->gen_open, d->open) ? strstr(d->gen_open, d->open) : d->gen_open;
    size_t ol = kept && !strncmp(go, d->open, strlen(d->open)) ? strlen(d->open) : 0;
    int bad = puts_(&t, "root ::= ") || (ol && (put_lit(&t, d->open) || puts_(&t, " \" \"? "))) ||
              (with_open && (put_lit(&t, go + ol) || puts_(&t, " "))) ||
              puts_(&t, "tc-call ") || put_lit(&t, d->gen_close);
    if (parallel && !bad)
        bad = puts_(&t, " ( ") || put_lit(&t, d->gen_sep) || puts_(&t, " tc-call ") || put_lit(&t, d->gen_close) ||
              puts_(&t, " )*");
    bad = bad || puts_(&t, " ") || put_lit(&t, d->gen_end) ||
          (with_open && d->lazy_end && (puts_(&t, " ") || puts_(&t, d->lazy_end))) || puts_(&t, "\ntc-call ::=");
    int i = 0, first = 1;
    for (const cJSON *tool = tools->child; tool && !bad; tool = tool->next, i++) {
        if (only && strcmp(tool_name(tool), only)) continue;
        char nm[40];
        snprintf(nm, sizeof nm, "%s tc-%d", first ? "" : " |", i);
        bad = puts_(&t, nm);
        first = 0;
    }
    bad = bad || puts_(&t, "\ntc-ws ::= \" \"?\n");
    if (d->xml && !bad) { /* a string value: any text without the closing tag (with the form's newline) */
        char stop[64];
        xml_stop(d->xml, stop, sizeof stop);
        bad = put_avoid(&t, stop);
    }
    i = 0;
    for (const cJSON *tool = tools->child; tool && !bad && rc == TM_OK; tool = tool->next, i++) {
        if (only && strcmp(tool_name(tool), only)) continue;
        char key[64], nm[96], rule[32], nkey[40], ikey[40];
        if (d->xml) {
            rc = put_xml_call(&t, d->xml, tool, i, err);
            continue;
        }
        if (d->args_marker) { /* the bare form: the name, then the object */
            snprintf(rule, sizeof rule, "tc-%d ::= ", i);
            bad = puts_(&t, rule) || put_lit(&t, tool_name(tool)) || (d->gen_id && (puts_(&t, " ") || puts_(&t, d->gen_id))) ||
                  (d->gen_args && (puts_(&t, " ") || (with_open && d->lazy_args ? puts_(&t, d->lazy_args)
                                                                                  : put_lit(&t, d->gen_args))));
            snprintf(rule, sizeof rule, " t%d-root\n", i);
            bad = bad || puts_(&t, rule);
            if (!bad) rc = put_args(&t, tool_fn(tool), i, err);
            continue;
        }
        snprintf(rule, sizeof rule, "tc-%d ::= \"{\" tc-ws ", i);
        snprintf(key, sizeof key, "\"%s\"", d->args_key);
        snprintf(nm, sizeof nm, "\"%s\"", tool_name(tool));
        snprintf(nkey, sizeof nkey, "\"%s\"", d->name_key ? d->name_key : "name");
        snprintf(ikey, sizeof ikey, "\"%s\"", d->id_key ? d->id_key : "");
        bad = puts_(&t, rule) || /* the call's number first, where the dialect's calls have one: "0", "1", ... */
              (d->id_key && (put_lit(&t, ikey) || puts_(&t, " tc-ws \":\" tc-ws \"\\\"\" [0-9]{1,6} \"\\\"\" tc-ws \",\" tc-ws "))) ||
              put_lit(&t, nkey) || puts_(&t, " tc-ws \":\" tc-ws ") || put_lit(&t, nm) ||
              puts_(&t, " tc-ws \",\" tc-ws ") || put_lit(&t, key) || puts_(&t, " tc-ws \":\" tc-ws ");
        snprintf(rule, sizeof rule, "t%d-root tc-ws \"}\"\n", i);
        bad = bad || puts_(&t, rule);
        if (!bad) rc = put_args(&t, tool_fn(tool), i, err);
    }
    cJSON_Delete(tools);
    if (bad || rc != TM_OK) {
        free(t.p);
        return bad ? tm_errf(err, TM_E_NOMEM, "out of memory") : rc;
    }
    *gbnf = t.p;
    return TM_OK;
}

void tm_tool_call_id(const tm_tool_dialect *d, uint64_t seed, char *buf, size_t size)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    int n = d && d->id_len ? d->id_len : 24;
    size_t w = d && d->id_len ? 0 : (size_t)snprintf(buf, size, "call_");
    uint64_t x = seed;
    for (int i = 0; i < n && w + 1 < size; i++) {
        x += 0x9E3779B97F4A7C15ull; /* splitmix64 */
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        buf[w++] = al[z % 62];
    }
    if (size) buf[w < size ? w : size - 1] = '\0';
}
