/* cli/cmd_template.c: `tandem template [MODEL] --messages FILE.json`: render a chat
 * template exactly as transformers' apply_chat_template(tokenize=False) does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/fileio.h"
#include "text/jinja.h"
#include "pkg/pkg.h"
#include "text/tokconfig.h"

static const char template_usage[] =
    "usage: tandem template [MODEL] --messages FILE.json [options]\n"
    "\n"
    "Render MODEL's chat template for the OpenAI-style messages in FILE.json (a JSON array\n"
    "of {\"role\", \"content\", ...}; - reads stdin) and print exactly the text, with no\n"
    "newline added. MODEL is a Hugging Face model directory (tokenizer_config.json,\n"
    "chat_template.jinja). A template error exits 1 with \"TemplateError: <message>\".\n"
    "\n"
    "      --messages FILE        the conversation (required)\n"
    "      --add-generation-prompt  end with the assistant header\n"
    "      --kwargs JSON          extra template variables, e.g. '{\"enable_thinking\": false}'\n"
    "      --template FILE.jinja  use this template instead of MODEL's\n"
    "      --template-name NAME   pick a template of MODEL's list (default: \"default\",\n"
    "                             or \"tool_use\" when kwargs has tools)\n"
    "      --bos S, --eos S       the bos_token / eos_token strings (default: MODEL's)\n"
    "      --date YYYY-MM-DD      pin strftime_now() (default: $TANDEM_DATE, else today)\n";

/* read FILE ("-" = stdin) and parse it as JSON */
static cJSON *read_json_file(const char *path)
{
    char *text = NULL;
    size_t n = 0;
    if (strcmp(path, "-") == 0) {
        size_t cap = 0;
        for (;;) {
            if (n + 4096 + 1 > cap) {
                cap = cap ? cap * 2 : 65536;
                if (cap > ((size_t)1 << 30)) {
                    fprintf(stderr, "tandem template: stdin: messages larger than 1 GiB\n");
                    free(text);
                    return NULL;
                }
                char *p = realloc(text, cap);
                if (!p) {
                    fprintf(stderr, "tandem template: stdin: out of memory\n");
                    free(text);
                    return NULL;
                }
                text = p;
            }
            size_t k = fread(text + n, 1, 4096, stdin);
            n += k;
            if (k == 0) break;
        }
        text[n] = '\0';
    } else {
        tm_err rerr;
        if (tm_read_file(path, &text, &n, 0, &rerr) != TM_OK) {
            fprintf(stderr, "tandem template: %s\n", rerr.msg);
            return NULL;
        }
    }
    cJSON *j = NULL;
    tm_err err;
    if (tm_jinja_json_parse(text, n, path, &j, &err) != TM_OK) fprintf(stderr, "tandem template: %s\n", err.msg);
    free(text);
    return j;
}

static int has_tools(const cJSON *kwargs)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(kwargs, "tools");
    return t && !cJSON_IsNull(t) && !(cJSON_IsArray(t) && cJSON_GetArraySize(t) == 0);
}

int cmd_template(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(template_usage, stdout);
        return 0;
    }
    const char *model = NULL, *messages_path = NULL, *kwargs_text = NULL, *template_path = NULL;
    const char *template_name = NULL, *bos = NULL, *eos = NULL, *date = NULL;
    int agp = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (!strcmp(a, "--messages")) slot = &messages_path;
        else if (!strcmp(a, "--kwargs")) slot = &kwargs_text;
        else if (!strcmp(a, "--template")) slot = &template_path;
        else if (!strcmp(a, "--template-name")) slot = &template_name;
        else if (!strcmp(a, "--bos")) slot = &bos;
        else if (!strcmp(a, "--eos")) slot = &eos;
        else if (!strcmp(a, "--date")) slot = &date;
        else if (!strcmp(a, "--add-generation-prompt")) {
            agp = 1;
            continue;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tandem template: unknown option '%s' (see tandem template --help)\n", a);
            return 2;
        } else if (!model) {
            model = a;
            continue;
        } else {
            fprintf(stderr, "tandem template: unexpected argument '%s'\n", a);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tandem template: %s needs a value\n", a);
            return 2;
        }
        *slot = argv[++i];
    }
    if (!messages_path) {
        fprintf(stderr, "tandem template: --messages FILE.json is required (see tandem template --help)\n");
        return 2;
    }
    if (!model && !template_path) {
        fprintf(stderr, "tandem template: give MODEL or --template FILE.jinja\n");
        return 2;
    }
    if (!date) {
        const char *env = getenv("TANDEM_DATE");
        if (env && *env) date = env;
    }

    int rc = 1;
    tm_err err;
    tm_tokconfig *cfg = NULL;
    cJSON *messages = NULL, *kwargs = NULL;
    char *tsrc = NULL, *out = NULL;
    const char *tpl = NULL;

    if (kwargs_text) {
        if (tm_jinja_json_parse(kwargs_text, strlen(kwargs_text), "--kwargs", &kwargs, &err) != TM_OK) {
            fprintf(stderr, "tandem template: %s\n", err.msg);
            goto done;
        }
        if (!cJSON_IsObject(kwargs)) {
            fprintf(stderr, "tandem template: --kwargs: expected a JSON object\n");
            goto done;
        }
    }
    if (!(messages = read_json_file(messages_path))) goto done;
    if (!cJSON_IsArray(messages)) {
        fprintf(stderr, "tandem template: %s: expected a JSON array of messages\n", messages_path);
        goto done;
    }
    if (model && !tm_is_dir(model)) { /* a package: its embedded tokenizer_config, template, ... */
        tm_pkg *p = NULL;
        size_t dn;
        int prc = tm_pkg_open(&p, model, &err);
        if (prc == TM_OK)
            prc = tm_tokconfig_parse(&cfg, tm_pkg_doc(p, TM_PKG_DOC_TOKENIZER_CONFIG, &dn),
                                     tm_pkg_doc(p, TM_PKG_DOC_SPECIAL_TOKENS, &dn),
                                     tm_pkg_doc(p, TM_PKG_DOC_GENERATION_CONFIG, &dn),
                                     tm_pkg_doc(p, TM_PKG_DOC_CHAT_TEMPLATE, &dn), &err);
        for (int i = 0; prc == TM_OK && i < tm_pkg_n_docs(p); i++) { /* additional_chat_templates/NAME.jinja */
            const char *dname = tm_pkg_doc_name(p, i), *pre = TM_ADDITIONAL_TEMPLATES "/";
            size_t pl = strlen(pre), nl = dname ? strlen(dname) : 0;
            if (nl > pl + 6 && !strncmp(dname, pre, pl) && !strcmp(dname + nl - 6, ".jinja")) {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int)(nl - pl - 6), dname + pl);
                prc = tm_tokconfig_add_template(cfg, name, tm_pkg_doc(p, dname, &dn), &err);
            }
        }
        if (p) tm_pkg_close(p);
        if (prc != TM_OK) {
            fprintf(stderr, "tandem template: %s\n", err.msg);
            goto done;
        }
    } else if (model && tm_tokconfig_load(&cfg, model, &err) != TM_OK) {
        fprintf(stderr, "tandem template: %s\n", err.msg);
        goto done;
    }
    if (template_path) {
        if (tm_read_file(template_path, &tsrc, NULL, (size_t)64 << 20, &err) != TM_OK) {
            fprintf(stderr, "tandem template: %s\n", err.msg);
            goto done;
        }
        tpl = tsrc;
    } else {
        const char *name = template_name;
        if (!name && tm_tokconfig_n_templates(cfg) && has_tools(kwargs) && tm_tokconfig_chat_template(cfg, "tool_use"))
            name = "tool_use";
        tpl = tm_tokconfig_chat_template(cfg, name);
        if (!tpl) {
            if (name) fprintf(stderr, "tandem template: %s: no chat template named '%s'\n", model, name);
            else if (tm_tokconfig_n_templates(cfg))
                fprintf(stderr, "tandem template: %s: several chat templates and none named 'default' (use --template-name)\n",
                        model);
            else fprintf(stderr, "tandem template: %s: no chat_template in tokenizer_config.json or chat_template.jinja (use --template)\n",
                         model);
            goto done;
        }
    }
    if (!bos && cfg) bos = tm_tokconfig_bos(cfg);
    if (!eos && cfg) eos = tm_tokconfig_eos(cfg);
    int r = tm_chat_render(tpl, messages, agp, kwargs, bos, eos, date, &out, &err);
    if (r == TM_E_TEMPLATE || r == TM_E_LIMIT) {
        fprintf(stderr, "TemplateError: %s\n", err.msg);
        goto done;
    }
    if (r != TM_OK) {
        fprintf(stderr, "tandem template: %s\n", err.msg);
        goto done;
    }
    fwrite(out, 1, strlen(out), stdout);
    fflush(stdout);
    rc = 0;
done:
    free(out);
    free(tsrc);
    cJSON_Delete(messages);
    cJSON_Delete(kwargs);
    tm_tokconfig_free(cfg);
    return rc;
}
