/* tests/test_tokconfig.c: tokenizer_config.json, special_tokens_map.json,
 * generation_config.json and chat_template.jinja (text/tokconfig.h).
 *
 * Expected values are read off the files themselves (the demo model, the conformance
 * model and tokenizer directories); the inline JSON cases cover each rule and each
 * malformed input. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "harness.h"
#include "text/jinja.h"
#include "text/tokconfig.h"

static void check_str(const char *got, const char *want, const char *what)
{
    if (!want) CHECKF(got == NULL, "%s: got \"%s\", want none", what, got);
    else CHECKF(got && strcmp(got, want) == 0, "%s: got \"%s\", want \"%s\"", what, got ? got : "(none)", want);
}

static void test_demo_model(void)
{
    tm_tokconfig *c;
    tm_err err;
    int rc = tm_tokconfig_load(&c, "models/tiny-classics-llama", &err);
    CHECKF(rc == TM_OK, "%s", err.msg);
    if (rc) return;
    check_str(tm_tokconfig_bos(c), "<|begin_of_text|>", "demo bos");
    check_str(tm_tokconfig_eos(c), "<|end_of_text|>", "demo eos");
    check_str(tm_tokconfig_pad(c), NULL, "demo pad");
    CHECK_EQ_INT(tm_tokconfig_model_max_length(c), 1024);
    CHECK_EQ_INT(tm_tokconfig_add_bos(c), -1);
    CHECK(tm_tokconfig_chat_template(c, NULL) == NULL);
    const tm_gen_defaults *g = tm_tokconfig_gen(c);
    CHECK_EQ_INT(g->bos_token_id, 0);
    CHECK_EQ_INT(g->n_eos, 1);
    CHECK_EQ_INT(g->eos_token_ids[0], 1);
    CHECK_EQ_INT(g->pad_token_id, 1);
    CHECK_EQ_INT(g->do_sample, 1);
    CHECK_NEAR(g->temperature, 0.8, 1e-12);
    CHECK_NEAR(g->top_p, 0.95, 1e-12);
    CHECK_EQ_INT(g->max_new_tokens, 256);
    CHECK_EQ_INT(g->top_k, -1);
    CHECK(isnan(g->min_p) && isnan(g->repetition_penalty));
    tm_tokconfig_free(c);
}

static void test_conformance_dirs(void)
{
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/conformance/models", th_shared());
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/hf", dir, e->d_name);
        if (!tm_is_dir(path)) continue;
        tm_tokconfig *c;
        tm_err err;
        int rc = tm_tokconfig_load(&c, path, &err);
        CHECKF(rc == TM_OK, "%s", err.msg);
        if (rc) continue;
        /* all of these were saved with the same Llama 3 style tokenizer_config.json */
        check_str(tm_tokconfig_bos(c), "<|begin_of_text|>", path);
        check_str(tm_tokconfig_eos(c), "<|end_of_text|>", path);
        check_str(tm_tokconfig_pad(c), NULL, path);
        CHECK_EQ_INT(tm_tokconfig_model_max_length(c), 131072);
        CHECK_EQ_INT(tm_tokconfig_gen(c)->bos_token_id, 0);
        CHECK_EQ_INT(tm_tokconfig_gen(c)->n_eos, 1);
        CHECK_EQ_INT(tm_tokconfig_gen(c)->eos_token_ids[0], 1);
        tm_tokconfig_free(c);
        n++;
    }
    closedir(d);
    CHECKF(n >= 7, "only %d conformance model directories", n);

    static const struct {
        const char *name, *bos, *eos, *pad, *unk;
        int add_bos, add_eos;
        int64_t max_len;
    } TOK[] = {
        {"llama-bpe", "<|begin_of_text|>", "<|end_of_text|>", NULL, NULL, -1, -1, 131072},
        {"llama-spm", "<s>", "</s>", NULL, "<unk>", 1, 0, 4096},
        {"qwen2", NULL, "<|endoftext|>", "<|endoftext|>", NULL, 0, 0, 32768},
    };
    for (size_t i = 0; i < sizeof TOK / sizeof TOK[0]; i++) {
        snprintf(path, sizeof path, "%s/conformance/tokenizers/%s", th_shared(), TOK[i].name);
        tm_tokconfig *c;
        tm_err err;
        int rc = tm_tokconfig_load(&c, path, &err);
        CHECKF(rc == TM_OK, "%s", err.msg);
        if (rc) continue;
        check_str(tm_tokconfig_bos(c), TOK[i].bos, TOK[i].name);
        check_str(tm_tokconfig_eos(c), TOK[i].eos, TOK[i].name);
        check_str(tm_tokconfig_pad(c), TOK[i].pad, TOK[i].name);
        check_str(tm_tokconfig_unk(c), TOK[i].unk, TOK[i].name);
        CHECK_EQ_INT(tm_tokconfig_add_bos(c), TOK[i].add_bos);
        CHECK_EQ_INT(tm_tokconfig_add_eos(c), TOK[i].add_eos);
        CHECK_EQ_INT(tm_tokconfig_model_max_length(c), TOK[i].max_len);
        tm_tokconfig_free(c);
    }
}

static void test_inline(void)
{
    tm_tokconfig *c;
    tm_err err;
    /* AddedToken objects, a template list, special_tokens_map overriding, eos as a list */
    const char *tok = "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\", \"lstrip\": false},"
                      " \"eos_token\": \"</s>\", \"unk_token\": null, \"add_bos_token\": true,"
                      " \"model_max_length\": 1000000000000000019884624838656,"
                      " \"chat_template\": [{\"name\": \"default\", \"template\": \"D{{ bos_token }}\"},"
                      "                     {\"name\": \"tool_use\", \"template\": \"T\"}]}";
    const char *stm = "{\"eos_token\": {\"content\": \"<|eot|>\", \"special\": true}, \"pad_token\": \"<pad>\"}";
    const char *gen = "{\"eos_token_id\": [7, 8, 9], \"top_k\": 40, \"repetition_penalty\": 1.1, \"min_p\": 0.05,"
                      " \"max_length\": 4096, \"do_sample\": false, \"temperature\": 1}";
    CHECK_EQ_INT(tm_tokconfig_parse(&c, tok, stm, gen, NULL, &err), TM_OK);
    check_str(tm_tokconfig_bos(c), "<s>", "AddedToken bos");
    check_str(tm_tokconfig_eos(c), "<|eot|>", "special_tokens_map eos");
    check_str(tm_tokconfig_pad(c), "<pad>", "special_tokens_map pad");
    check_str(tm_tokconfig_unk(c), NULL, "null unk");
    CHECK_EQ_INT(tm_tokconfig_add_bos(c), 1);
    CHECK_EQ_INT(tm_tokconfig_model_max_length(c), 0); /* 1e30: no limit */
    CHECK_EQ_INT(tm_tokconfig_n_templates(c), 2);
    check_str(tm_tokconfig_template_name(c, 1), "tool_use", "template name");
    check_str(tm_tokconfig_chat_template(c, NULL), "D{{ bos_token }}", "default template");
    check_str(tm_tokconfig_chat_template(c, "tool_use"), "T", "named template");
    check_str(tm_tokconfig_chat_template(c, "nope"), NULL, "missing template");
    const tm_gen_defaults *g = tm_tokconfig_gen(c);
    CHECK_EQ_INT(g->n_eos, 3);
    CHECK_EQ_INT(g->eos_token_ids[2], 9);
    CHECK_EQ_INT(g->top_k, 40);
    CHECK_NEAR(g->repetition_penalty, 1.1, 1e-12);
    CHECK_NEAR(g->min_p, 0.05, 1e-12);
    CHECK_NEAR(g->temperature, 1.0, 0);
    CHECK_EQ_INT(g->max_length, 4096);
    CHECK_EQ_INT(g->do_sample, 0);
    CHECK_EQ_INT(g->bos_token_id, -1);
    /* the default template renders with the model's tokens */
    char *out;
    CHECK_EQ_INT(tm_chat_render(tm_tokconfig_chat_template(c, NULL), NULL, 0, NULL, tm_tokconfig_bos(c),
                                tm_tokconfig_eos(c), NULL, &out, &err), TM_OK);
    CHECK_EQ_STR(out, "D<s>");
    free(out);
    tm_tokconfig_free(c);

    /* a package's: the list in its tokenizer_config.json and the default as chat_template.jinja: both kept, the
       jinja text the default; a named one added (a package's additional_chat_templates/NAME.jinja) */
    CHECK_EQ_INT(tm_tokconfig_parse(&c, tok, NULL, NULL, "J", &err), TM_OK);
    check_str(tm_tokconfig_chat_template(c, NULL), "J", "the jinja default beside a list");
    check_str(tm_tokconfig_chat_template(c, "default"), "J", "the jinja default by name");
    check_str(tm_tokconfig_chat_template(c, "tool_use"), "T", "the list's tool_use beside the jinja default");
    CHECK_EQ_INT(tm_tokconfig_add_template(c, "rag", "R", &err), TM_OK);
    CHECK_EQ_INT(tm_tokconfig_add_template(c, "tool_use", "T2", &err), TM_OK);
    check_str(tm_tokconfig_chat_template(c, "rag"), "R", "an added template");
    check_str(tm_tokconfig_chat_template(c, "tool_use"), "T2", "a replaced template");
    CHECK_EQ_INT(tm_tokconfig_n_templates(c), 3);
    tm_tokconfig_free(c);

    /* a string template; chat_template.jinja text replaces it */
    CHECK_EQ_INT(tm_tokconfig_parse(&c, "{\"chat_template\": \"A\"}", NULL, NULL, "B", &err), TM_OK);
    check_str(tm_tokconfig_chat_template(c, NULL), "B", "chat_template.jinja wins");
    check_str(tm_tokconfig_chat_template(c, "default"), "B", "single template as default");
    CHECK_EQ_INT(tm_tokconfig_n_templates(c), 0);
    tm_tokconfig_free(c);

    /* nothing at all is fine */
    CHECK_EQ_INT(tm_tokconfig_parse(&c, NULL, NULL, NULL, NULL, &err), TM_OK);
    check_str(tm_tokconfig_bos(c), NULL, "empty bos");
    CHECK_EQ_INT(tm_tokconfig_gen(c)->n_eos, 0);
    tm_tokconfig_free(c);
}

static void test_malformed(void)
{
    static const struct {
        const char *tok, *gen, *msg;
    } BAD[] = {
        /* (where cJSON reports a syntax error: at or just past the offending byte) */
        {"{\"bos_token\": ", NULL, "tokenizer_config.json: invalid JSON at line 1 (byte 14)"},
        {"{\n\"a\": 1,\n}", NULL, "tokenizer_config.json: invalid JSON at line 3 (byte 11)"},
        {"[1, 2]", NULL, "tokenizer_config.json: expected a JSON object at the top level"},
        {"{\"bos_token\": 5}", NULL,
         "tokenizer_config.json: 'bos_token' must be a string, an AddedToken object or null, not a number"},
        {"{\"eos_token\": {\"lstrip\": true}}", NULL,
         "tokenizer_config.json: 'eos_token': an AddedToken object needs a string \"content\""},
        {"{\"add_bos_token\": \"yes\"}", NULL,
         "tokenizer_config.json: 'add_bos_token' must be true, false or null, not a string"},
        {"{\"chat_template\": 3}", NULL,
         "tokenizer_config.json: 'chat_template' must be a string or a list of {\"name\", \"template\"}, not a number"},
        {"{\"chat_template\": [{\"name\": \"x\"}]}", NULL,
         "tokenizer_config.json: 'chat_template'[0] must be an object with string \"name\" and \"template\""},
        {"{\"model_max_length\": -5}", NULL, "tokenizer_config.json: 'model_max_length' must be a non-negative integer"},
        {NULL, "{\"eos_token_id\": \"2\"}",
         "generation_config.json: 'eos_token_id' must be an integer or a list of integers, not a string"},
        {NULL, "{\"eos_token_id\": [1, 2.5]}", "generation_config.json: 'eos_token_id'[1] must be an integer, not a number"},
        {NULL, "{\"top_k\": 1.5}", "generation_config.json: 'top_k' must be an integer, not a fraction"},
        {NULL, "{\"temperature\": \"hot\"}", "generation_config.json: 'temperature' must be a number, not a string"},
        {NULL, "{\"temperature\": -1}", "generation_config.json: 'temperature' must be >= 0"},
        {NULL, "{\"top_p\": 1.5}", "generation_config.json: 'top_p' must be in [0, 1]"},
        {NULL, "{\"do_sample\": 1}", "generation_config.json: 'do_sample' must be true or false, not a number"},
        {NULL, "{\"max_new_tokens\": 1e300}", "generation_config.json: 'max_new_tokens' is out of range"},
        {NULL, "", "generation_config.json: invalid JSON at line 1 (byte 0)"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        tm_tokconfig *c = (tm_tokconfig *)1;
        tm_err err = {0};
        int rc = tm_tokconfig_parse(&c, BAD[i].tok, NULL, BAD[i].gen, NULL, &err);
        CHECKF(rc == TM_E_FORMAT, "case %zu: status %d", i, rc);
        CHECK(c == NULL);
        CHECKF(strcmp(err.msg, BAD[i].msg) == 0, "case %zu:\n  got  \"%s\"\n  want \"%s\"", i, err.msg, BAD[i].msg);
    }
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *dir, const char *name)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static void test_model_dir_files(void)
{
    char dir[] = "/tmp/tm_tokconfig_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tm_tokconfig *c;
    tm_err err;
    /* an empty directory: all defaults */
    CHECK_EQ_INT(tm_tokconfig_load(&c, dir, &err), TM_OK);
    CHECK(tm_tokconfig_bos(c) == NULL && tm_tokconfig_chat_template(c, NULL) == NULL);
    tm_tokconfig_free(c);
    /* chat_template.json is read when there is no chat_template.jinja */
    write_file(dir, "tokenizer_config.json", "{\"bos_token\": \"<b>\", \"chat_template\": \"from config\"}");
    write_file(dir, "chat_template.json", "{\"chat_template\": \"from json\"}");
    CHECK_EQ_INT(tm_tokconfig_load(&c, dir, &err), TM_OK);
    check_str(tm_tokconfig_chat_template(c, NULL), "from json", "chat_template.json");
    tm_tokconfig_free(c);
    /* chat_template.jinja replaces both */
    write_file(dir, "chat_template.jinja", "{{ bos_token }}jinja file\n");
    CHECK_EQ_INT(tm_tokconfig_load(&c, dir, &err), TM_OK);
    check_str(tm_tokconfig_chat_template(c, NULL), "{{ bos_token }}jinja file\n", "chat_template.jinja");
    check_str(tm_tokconfig_bos(c), "<b>", "bos beside the jinja file");
    tm_tokconfig_free(c);
    /* transformers' layout for named templates: additional_chat_templates/NAME.jinja beside chat_template.jinja
       (only .jinja files count) */
    char sub[2100];
    snprintf(sub, sizeof sub, "%s/additional_chat_templates", dir);
    CHECK(mkdir(sub, 0755) == 0);
    write_file(sub, "tool_use.jinja", "tools: {{ tools | length }}");
    write_file(sub, "notes.txt", "not a template");
    CHECK_EQ_INT(tm_tokconfig_load(&c, dir, &err), TM_OK);
    check_str(tm_tokconfig_chat_template(c, NULL), "{{ bos_token }}jinja file\n", "the default beside named ones");
    check_str(tm_tokconfig_chat_template(c, "tool_use"), "tools: {{ tools | length }}", "additional tool_use");
    check_str(tm_tokconfig_chat_template(c, "notes"), NULL, "a file that is not .jinja");
    CHECK_EQ_INT(tm_tokconfig_n_templates(c), 1);
    tm_tokconfig_free(c);
    remove_file(sub, "tool_use.jinja");
    remove_file(sub, "notes.txt");
    rmdir(sub);
    /* errors name the file path */
    write_file(dir, "generation_config.json", "{\"pad_token_id\": [0]}");
    CHECK_EQ_INT(tm_tokconfig_load(&c, dir, &err), TM_E_FORMAT);
    char want[2200];
    snprintf(want, sizeof want, "%s/generation_config.json: 'pad_token_id' must be an integer, not a list", dir);
    CHECK_EQ_STR(err.msg, want);
    remove_file(dir, "generation_config.json");
    remove_file(dir, "chat_template.jinja");
    remove_file(dir, "chat_template.json");
    remove_file(dir, "tokenizer_config.json");
    rmdir(dir);
    /* a directory that does not exist */
    CHECK_EQ_INT(tm_tokconfig_load(&c, "/nonexistent/model", &err), TM_E_NOTFOUND);
    CHECK_EQ_STR(err.msg, "/nonexistent/model: not a directory");
}

int main(void)
{
    test_demo_model();
    test_conformance_dirs();
    test_inline();
    test_malformed();
    test_model_dir_files();
    return th_done("test_tokconfig");
}
