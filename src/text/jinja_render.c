/* text/jinja_render.c: the public entry points of text/jinja.h. */
#include <stdlib.h>
#include <string.h>

#include "text/jinja-impl.h"

int tm_jinja_compile(tm_jinja **out, const char *src, size_t len, tm_err *err)
{
    *out = NULL;
    if (err) tm_err_clear(err);
    if (!src && len) return tm_errf(err, TM_E_INVALID, "chat template: no source");
    tm_jinja *t = calloc(1, sizeof *t);
    if (!t) return tm_errf(err, TM_E_NOMEM, "out of memory compiling the template");
    jtok *toks = NULL;
    size_t n = 0;
    int rc = jlex(&t->arena, src ? src : "", len, &toks, &n, err);
    if (rc == TM_OK) rc = jparse(t, toks, n, err);
    free(toks);
    if (rc != TM_OK) {
        tm_jinja_free(t);
        return rc;
    }
    *out = t;
    return TM_OK;
}

void tm_jinja_free(tm_jinja *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nconsts; i++) free(t->consts[i]); /* immortal strings: no children */
    free(t->consts);
    ja_free(&t->arena);
    free(t);
}

static int valid_date(const char *d)
{
    /* YYYY-MM-DD */
    if (strlen(d) != 10 || d[4] != '-' || d[7] != '-') return 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && (d[i] < '0' || d[i] > '9')) return 0;
    int m = (d[5] - '0') * 10 + (d[6] - '0'), day = (d[8] - '0') * 10 + (d[9] - '0');
    return m >= 1 && m <= 12 && day >= 1 && day <= 31;
}

int tm_jinja_render_ex(const tm_jinja *t, const cJSON *vars, const char *strftime_date,
                       const tm_jinja_limits *limits, char **out, size_t *len, tm_err *err)
{
    *out = NULL;
    if (len) *len = 0;
    if (err) tm_err_clear(err);
    if (strftime_date && !valid_date(strftime_date))
        return tm_errf(err, TM_E_INVALID, "strftime date '%.40s' is not YYYY-MM-DD", strftime_date);
    if (vars && !cJSON_IsObject(vars) && !cJSON_IsNull(vars))
        return tm_errf(err, TM_E_INVALID, "template variables must be a JSON object");
    jrt rt;
    memset(&rt, 0, sizeof rt);
    tm_err local;
    rt.err = err ? err : &local;
    tm_err_clear(rt.err);
    rt.lim.max_output = limits && limits->max_output ? limits->max_output : (size_t)64 << 20;
    rt.lim.max_memory = limits && limits->max_memory ? limits->max_memory : (size_t)512 << 20;
    rt.lim.max_steps = limits && limits->max_steps ? limits->max_steps : 20000000;
    rt.lim.max_depth = limits && limits->max_depth ? limits->max_depth : 200;
    rt.date = strftime_date;
    int rc = jeval_root_new(&rt);
    if (vars && cJSON_IsObject(vars))
        for (const cJSON *c = vars->child; c && !rc; c = c->next) {
            jv v;
            if (!c->string) continue;
            rc = jv_from_cjson(&rt, c, &v);
            if (!rc) rc = jeval_root_set(&rt, c->string, v);
        }
    jbuf b = {0};
    if (!rc) rc = jeval_render(&rt, t, &b);
    jeval_cleanup(&rt);
    if (rc) {
        jb_free(&b);
        int code = rt.err->code ? rt.err->code : TM_E_TEMPLATE;
        return code;
    }
    if (!b.p) {
        b.p = calloc(1, 1);
        if (!b.p) return tm_errf(err, TM_E_NOMEM, "out of memory");
    }
    *out = b.p;
    if (len) *len = b.n;
    return TM_OK;
}

int tm_jinja_render(const tm_jinja *t, const cJSON *vars, const char *strftime_date, char **out, size_t *len,
                    tm_err *err)
{
    return tm_jinja_render_ex(t, vars, strftime_date, NULL, out, len, err);
}

int tm_chat_render(const char *template_src, const cJSON *messages, int add_generation_prompt,
                   const cJSON *kwargs, const char *bos, const char *eos, const char *date, char **out,
                   tm_err *err)
{
    *out = NULL;
    if (!template_src) return tm_errf(err, TM_E_INVALID, "chat template: none given");
    if (messages && !cJSON_IsArray(messages))
        return tm_errf(err, TM_E_INVALID, "messages: expected a JSON array of {\"role\", \"content\"} objects");
    if (kwargs && !cJSON_IsObject(kwargs) && !cJSON_IsNull(kwargs))
        return tm_errf(err, TM_E_INVALID, "template kwargs: expected a JSON object");
    tm_jinja *t;
    int rc = tm_jinja_compile(&t, template_src, strlen(template_src), err);
    if (rc) return rc;
    cJSON *vars = cJSON_CreateObject();
    int ok = vars != NULL;
    /* the variables apply_chat_template passes; the tree only borrows messages and kwargs */
    if (ok && messages) ok = cJSON_AddItemReferenceToObject(vars, "messages", (cJSON *)messages);
    else if (ok) ok = cJSON_AddArrayToObject(vars, "messages") != NULL;
    if (ok) ok = cJSON_AddNullToObject(vars, "tools") != NULL;
    if (ok) ok = cJSON_AddNullToObject(vars, "documents") != NULL;
    if (ok) ok = cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt != 0) != NULL;
    if (ok && bos) ok = cJSON_AddStringToObject(vars, "bos_token", bos) != NULL;
    if (ok && eos) ok = cJSON_AddStringToObject(vars, "eos_token", eos) != NULL;
    if (ok && kwargs && cJSON_IsObject(kwargs))
        for (const cJSON *c = kwargs->child; c && ok; c = c->next) {
            if (!c->string) continue;
            cJSON_DeleteItemFromObjectCaseSensitive(vars, c->string);
            ok = cJSON_AddItemReferenceToObject(vars, c->string, (cJSON *)c);
        }
    if (!ok) {
        cJSON_Delete(vars);
        tm_jinja_free(t);
        return tm_errf(err, TM_E_NOMEM, "out of memory building the template variables");
    }
    rc = tm_jinja_render(t, vars, date, out, NULL, err);
    cJSON_Delete(vars);
    tm_jinja_free(t);
    return rc;
}

/* ------------------------------------------------------------------ JSON with number literals */

typedef struct numscan {
    const char *s;
    size_t n, pos;
} numscan;

/* the next number token of the JSON text (outside strings): start and length; 0 at the end */
static int next_number(numscan *ns, size_t *start, size_t *len)
{
    while (ns->pos < ns->n) {
        char c = ns->s[ns->pos];
        if (c == '"') { /* skip a string */
            ns->pos++;
            while (ns->pos < ns->n && ns->s[ns->pos] != '"') ns->pos += ns->s[ns->pos] == '\\' ? 2 : 1;
            ns->pos++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            size_t b = ns->pos;
            while (ns->pos < ns->n && strchr("+-.0123456789eE", ns->s[ns->pos]) && ns->s[ns->pos]) ns->pos++;
            *start = b;
            *len = ns->pos - b;
            return 1;
        }
        ns->pos++;
    }
    return 0;
}

/* number nodes in document order (cJSON keeps children in order) get their literal text */
static int attach_literals(cJSON *j, numscan *ns)
{
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            size_t b, n;
            if (!next_number(ns, &b, &n)) return -1;
            char *lit = malloc(n + 1);
            if (!lit) return -1;
            memcpy(lit, ns->s + b, n);
            lit[n] = '\0';
            j->valuestring = lit;
        } else if (j->child && attach_literals(j->child, ns)) {
            return -1;
        }
    }
    return 0;
}

int tm_jinja_json_parse(const char *text, size_t len, const char *what, cJSON **out, tm_err *err)
{
    *out = NULL;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        int line = 1;
        for (size_t i = 0; i < off && i < len; i++)
            if (text[i] == '\n') line++;
        return tm_errf(err, TM_E_FORMAT, "%s: invalid JSON at line %d (byte %zu)", what, line, off);
    }
    numscan ns = {text, len, 0};
    if (attach_literals(j, &ns)) {
        cJSON_Delete(j);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", what);
    }
    *out = j;
    return TM_OK;
}
