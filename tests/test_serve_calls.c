/* tests/test_serve_calls.c: tool calls streamed as they are written (serve/reply.h, text/toolcall.h).
 *
 * 1. The reply reader with live calls: replies built from pieces of each dialect's forms, streamed a byte at a
 *    time: what the stream sends adds up to the whole reply's parts, its call pieces to the whole reply's calls.
 * 2. auto in the bare dialects (mistral, mistral_args, granite, llama3_json) through the server, on the demo
 *    model given their markers as special tokens (and Llama 3's call start as a token): a reply made to write
 *    the marker first (a logit bias) is held to the schemas and streams its calls in pieces; text before the
 *    marker streams as content; a reply without it is text (test_auto_bare).
 * 3. auto in harmony (gpt-oss's template) on the demo model given harmony's markers as special tokens and a
 *    call's recipient as a token: a reply made to write the recipient (a logit bias) is held to the schema from
 *    there and streams its call in pieces; a reply without it is text (test_auto_harmony). */
#include "harness.h"
#include "http_client.h"
#include "serve_util.h"
#include "vocab_util.h"

#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/oai.h"
#include "serve/reply.h"
#include "serve/serve-impl.h"
#include "serve/serve.h"
#include "tandem.h"
#include "text/reasoning.h"
#include "text/toolcall.h"

/* ---- 1. the reply reader ---- */

static uint64_t rs_state = 7;
static unsigned rnd(unsigned n)
{
    rs_state = rs_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rs_state >> 33) % n);
}

static size_t rstrip(const char *s, size_t n)
{
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    return n;
}

/* a stream's call pieces, put together: each call's name and id (its first piece's) and its arguments */
typedef struct pieced {
    int n, bad;              /* calls; pieces out of order (a later call before an earlier one began, a first
                                piece without a name or id, a later one with them) */
    char name[8][72], id[8][112], args[8][1024];
} pieced;

static void piece_up(pieced *c, const tm_reply_part *p)
{
    for (int i = 0; i < p->n_cd; i++) {
        const tm_oai_call_delta *d = &p->cd[i];
        int first = d->index == c->n;
        if (d->index < 0 || d->index >= 8 || d->index > c->n || first != (d->name && d->id)) {
            c->bad++;
            continue;
        }
        if (first) {
            c->n++;
            snprintf(c->name[d->index], sizeof c->name[0], "%s", d->name);
            snprintf(c->id[d->index], sizeof c->id[0], "%s", d->id);
            c->args[d->index][0] = '\0';
        }
        size_t l = strlen(c->args[d->index]);
        if (l + d->args_len < sizeof c->args[0]) memcpy(c->args[d->index] + l, d->args, d->args_len), c->args[d->index][l + d->args_len] = 0;
    }
}

/* what a stream sends (a delta after every byte, then the rest) adds up to the whole reply's parts, in
 * family m (or none) with dialect dn's calls (or none), the reply built from pieces; where the stream
 * sends calls as they are written (tm_reply_stream_calls), its pieces add up to the whole reply's calls
 * wherever that reads as calls (a reply no grammar holds may yet turn out not to be calls: the server
 * streams a grammar's replies only) */
static void reply_family(const tm_think_markers *m, const char *dn, const char *const *pieces, size_t npieces)
{
    long calls_seen = 0, thoughts_seen = 0, streamed = 0;
    for (int round = 0; round < 3000; round++) {
        const tm_think_markers *think = rnd(2) ? m : NULL;
        int opened = (int)rnd(2);
        const tm_tool_dialect *d = rnd(3) ? tm_tool_dialect_named(dn) : NULL;
        char text[1024];
        size_t n = 0;
        for (int i = 0, np = 1 + (int)rnd(7); i < np; i++) {
            const char *p = pieces[rnd((unsigned)npieces)];
            memcpy(text + n, p, strlen(p));
            n += strlen(p);
        }
        text[n] = '\0';
        tm_reply a, b;
        tm_reply_init(&a, d, TOOLS, think, opened, 0);
        tm_reply_init(&b, d, TOOLS, think, opened, 0);
        int live = rnd(2);
        if (live) tm_reply_stream_calls(&a, 77);
        char rs[1024], cs[1024];
        size_t rl = 0, cl = 0;
        tm_reply_part p;
        pieced pc = {0};
        int fed = 1;
        for (size_t k = 0; k < n; k++) {
            fed &= tm_reply_add(&a, text + k, 1) == 0;
            fed &= tm_reply_delta(&a, &p) == 0;
            memcpy(rs + rl, p.reasoning, p.reasoning_len), rl += p.reasoning_len;
            memcpy(cs + cl, p.content, p.content_len), cl += p.content_len;
            fed &= p.tc.n == 0 && (live || p.n_cd == 0); /* calls go out before the end only when live */
            piece_up(&pc, &p);
        }
        CHECK(fed);
        int early = pc.n; /* calls begun before the end */
        CHECK(tm_reply_finish(&a, 0, 1) == 0);
        CHECK(tm_reply_rest(&a, &p) == 0);
        piece_up(&pc, &p);
        memcpy(rs + rl, p.reasoning, p.reasoning_len), rl += p.reasoning_len;
        memcpy(cs + cl, p.content, p.content_len), cl += p.content_len;
        int ncalls = p.tc.n;
        /* the pieces add up to the calls, with the ids the whole answer gives them */
        int pok = !pc.bad && (live && !ncalls ? 1 : pc.n == ncalls);
        for (int i = 0; pok && i < ncalls && i < 8; i++)
            pok = !strcmp(pc.name[i], p.tc.v[i].name) && !strcmp(pc.args[i], p.tc.v[i].arguments) &&
                  !strcmp(pc.id[i], p.tc.v[i].id);
        CHECKF(pok, "%s live %d: '%s': %d calls pieced (%d bad), %d whole; call 0 %s(%s) / %s(%s)", dn, live, text, pc.n,
               pc.bad, ncalls, pc.name[0], pc.args[0], ncalls ? p.tc.v[0].name : "", ncalls ? p.tc.v[0].arguments : "");
        streamed += live && ncalls && early;
        CHECK(tm_reply_add(&b, text, n) == 0 && tm_reply_finish(&b, 0, 1) == 0);
        tm_reply_part w;
        tm_reply_whole(&b, &w);
        int ok = rl == w.reasoning_len && !memcmp(rs, w.reasoning, rl) && ncalls == w.tc.n;
        ok = ok && (w.tc.n ? rstrip(cs, cl) == rstrip(w.content, w.content_len) && !memcmp(cs, w.content, rstrip(cs, cl))
                           : cl == w.content_len && !memcmp(cs, w.content, cl));
        CHECKF(ok, "%s think %d opened %d calls %d: '%s': streamed '%.*s' / '%.*s', whole '%.*s' / '%.*s' (%d calls)",
               m->name, think != NULL, opened, d != NULL, text, (int)rl, rs, (int)cl, cs, (int)w.reasoning_len,
               w.reasoning, (int)w.content_len, w.content, w.tc.n);
        calls_seen += w.tc.n > 0;
        thoughts_seen += w.reasoning_len > 0;
        tm_reply_free(&a);
        tm_reply_free(&b);
    }
    CHECKF(calls_seen > 200 && thoughts_seen > 200 && (!dn || streamed > 50),
           "%s: %ld replies with calls (%ld streamed as written), %ld with reasoning", m->name, calls_seen, streamed,
           thoughts_seen);
}

static void test_reply(void)
{
    static const char *pieces[] = {
        "<think>", "</think>", "\n", "Let me see.", " ", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}", "\n</tool_call>", "Done.",
        "<th", "</tool", "<tool_c",
    };
    reply_family(&tm_think_tags, "hermes", pieces, sizeof pieces / sizeof pieces[0]);
    /* Command R7B: a plan, then calls, or an answer in its wrapper */
    static const char *command[] = {
        "<|START_THINKING|>", "<|END_THINKING|>", "\n", "I will look.", " ", "<|START_RESPONSE|>", "<|END_RESPONSE|>",
        "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"now\", \"parameters\": {}}\n]<|END_ACTION|>",
        "<|START_ACTION|>[", "{\"tool_call_id\": \"1\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
        "]", "<|END_ACTION|>", "<|START_", "<|END_", "Done.",
    };
    const tm_think_markers *cm = tm_think_detect("<|START_THINKING|><|END_THINKING|>");
    CHECK(cm != NULL);
    if (cm) reply_family(cm, "command_r", command, sizeof command / sizeof command[0]);
}

/* a fresh directory /tmp/tm_NAME_ plus mkdtemp's six letters (dir [64]) holding the demo model with its last n
 * vocabulary entries renamed to names (special where special[i]: vocab_util.h), opened (*m) with a session of two
 * threads on one route; NULL (a failed check) where it cannot be had */
static tandem_session *marked_session(char *dir, const char *name, const char *const *names, const int *special, int n,
                                      tandem_model **m)
{
    int l = snprintf(dir, 64, "/tmp/tm_%.40s_", name);
    memset(dir + l, 'X', 6), dir[l + 6] = '\0'; /* mkdtemp's template */
    CHECK(mkdtemp(dir) != NULL);
    tandem_status st;
    CHECK(tv_model_dir(dir, "models/tiny-classics-llama", names, special, n) == 0);
    CHECKF(tandem_model_open(m, dir, &st) == 0, "%s", st.msg);
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.n_threads = 2;
    so.max_ctx = 1024;
    so.route = TANDEM_ROUTE_HYBRID;
    tandem_session *s = NULL;
    if (*m) CHECKF(tandem_session_new(&s, *m, &so, &st) == 0, "%s", st.msg);
    return s;
}

/* auto with tools and no bias on the server at port: a text reply (no call, content, not finished by calls), the
 * same streamed */
static void plain_text(int port, const char *msgs, const char *tools, const char *what)
{
    char body[4096];
    reply a, b;
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"max_tokens\":24}", msgs, tools);
    ask(port, body, 0, &a);
    snprintf(body, sizeof body, "{%s,\"tools\":%s,\"max_tokens\":24,\"stream\":true}", msgs, tools);
    ask(port, body, 1, &b);
    CHECKF(a.status == 200 && a.n == 0 && a.has_content && strcmp(a.finish, "tool_calls") && b.status == 200 &&
               b.n == 0 && !strcmp(a.content, b.content) && !strcmp(a.finish, b.finish),
           "%s, text: %d calls '%s' (%s) / streamed %d '%s'", what, a.n, a.content, a.finish, b.n, b.content);
}

/* ---- 2. auto held once a call starts, in the bare dialects ---- */

/* tool-call markers a vocabulary has as special tokens, and Llama 3's call start as an ordinary token (one no
 * text tokenizes to), put in the demo model's vocabulary (tv_model_dir) so that a logit bias can make it write
 * each one first */
static const char *const MARKS[5] = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|tool_call|>", "{\"name\""};
static const int MARK_SPECIAL[5] = {1, 1, 1, 1, 0};

/* removes the model directory tv_model_dir made */
static void model_dir_rm(const char *dir)
{
    static const char *const files[] = {"tokenizer.json", "config.json", "model.safetensors", "tokenizer_config.json",
                                        "special_tokens_map.json"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* the id of the vocabulary entry with text t among m's last entries (where tv_model_dir put MARKS), or -1 */
static int32_t mark_id(const tandem_model *m, const char *t)
{
    tandem_model_info mi;
    tandem_model_get_info(m, &mi);
    int32_t *ids = NULL, found = -1;
    size_t n = 0;
    tandem_status st;
    if (tandem_tokenize(m, t, strlen(t), 0, &ids, &n, &st) == 0 && n == 1) found = ids[0]; /* a special token */
    free(ids);
    for (int32_t id = mi.vocab - 8; found < 0 && id < mi.vocab; id++) { /* an ordinary one no text makes */
        char *b = NULL;
        if (tandem_token_bytes(m, id, &b, &n, &st) == 0 && n == strlen(t) && !memcmp(b, t, n)) found = id;
        free(b);
    }
    return found;
}

/* a's calls are b's: as many (b streamed: one more where max_tokens cut it), the same names and arguments (b: each
 * in more than one piece, unless its arguments are "{}"), and the same finish */
static void same_reply_calls(const reply *a, const reply *b, const char *what)
{
    /* (a call max_tokens cut has gone out in the stream as far as it got; the JSON answer drops it) */
    int cut = !strcmp(a->finish, "length");
    CHECKF(a->status == 200 && b->status == 200 && a->n >= 1 && (a->n == b->n || (cut && b->n == a->n + 1)) &&
               !strcmp(a->finish, b->finish),
           "%s: %d calls (%s), streamed %d (%s)", what, a->n, a->finish, b->n, b->finish);
    for (int i = 0; i < a->n && i < b->n; i++)
        CHECKF(args_ok(a->name[i], a->args[i]) && !strcmp(a->name[i], b->name[i]) && !strcmp(a->args[i], b->args[i]) &&
                   strlen(a->id[i]) == strlen(b->id[i]) &&
                   (b->pieces[i] > 1 || strlen(a->args[i]) <= 2),
               "%s call %d: %s(%s) / %s(%s) in %d pieces", what, i, a->name[i], a->args[i], b->name[i], b->args[i],
               b->pieces[i]);
}

/* Where the vocabulary has a bare dialect's markers as special tokens (mistral's [TOOL_CALLS], mistral_args'
 * [TOOL_CALLS] [ARGS] [CALL_ID], granite's <|tool_call|>: the demo model with entries renamed), auto's replies
 * keep them and are held to the calls' form from the marker on; llama3_json's from a reply that opens with a
 * call ({"name"). The models' own templates (Mistral Nemo's, Small 3.2's with [CALL_ID], Ministral 3's with its
 * [THINK] block, Llama 3.1's) and Granite 3's form. The demo model writes the marker first under a logit bias of
 * +100 (the bias's only effect: the rest is the model's, held to the schemas): a call held to its schema, JSON and
 * streamed alike, the stream's in pieces that add up to the JSON answer's (mistral_args: several calls, each after
 * its own marker; [CALL_ID] and [ARGS] written as their tokens where biased, [CALL_ID] only where the template
 * shows it); with no bias the reply is text, streamed the same; text written before the marker (a smaller bias,
 * bisected) streams as content before the call, the marker in neither, and Llama 3's call start after text is
 * text. */
static void test_auto_bare(void)
{
    char dir[64];
    tandem_status st;
    tandem_model *m = NULL, *demo = NULL;
    tandem_session *s = marked_session(dir, "bare", MARKS, MARK_SPECIAL, 5, &m);
    CHECKF(tandem_model_open(&demo, "models/tiny-classics-llama", &st) == 0, "%s", st.msg);
    char *nemo = shared_template("mistralai-Mistral-Nemo-Instruct-2407.jinja");
    char *llama = shared_template("meta-llama-Llama-3.1-8B-Instruct.jinja");
    char *small = th_slurp("tests/data/chat_templates/Mistral-Small-3.2-24B-Instruct-2506.jinja");
    char *ministral = th_slurp("tests/data/chat_templates/mistralai-Ministral-3-14B-Reasoning-2512.jinja");
    /* Granite 3's form of a conversation, its calls shown as <|tool_call|>[...] */
    const char *granite = "{%- for m in messages %}<|start_of_role|>{{ m['role'] }}<|end_of_role|>{{ m['content'] }}"
                          "<|end_of_text|>\n{% endfor %}{# calls: <|tool_call|>[{\"name\": ...}] #}"
                          "<|start_of_role|>assistant<|end_of_role|>";
    CHECK(small && ministral);
    if (!s || !demo || !nemo || !llama || !small || !ministral) goto out;
    /* the markers are special tokens here, not in the demo model (whose bare dialects stay as they were) */
    CHECK(tm_serve_special(m, "[TOOL_CALLS]") && tm_serve_special(m, "[ARGS]") && tm_serve_special(m, "<|tool_call|>"));
    CHECK(!tm_serve_special(m, "{\"name\"") && !tm_serve_special(m, "[TOOL") && !tm_serve_special(m, "the"));
    CHECK(!tm_serve_special(demo, "[TOOL_CALLS]") && !tm_serve_special(demo, "<|tool_call|>"));
    static const struct {
        int tpl;                /* 0 Nemo, 1 Small 3.2, 2 Ministral 3, 3 Granite's form, 4 Llama 3.1 */
        const char *mark;       /* the one it writes first: a call's marker, or its start */
        size_t id_len;
    } cases[] = {
        {0, "[TOOL_CALLS]", 9},   {1, "[TOOL_CALLS]", 9}, {2, "[TOOL_CALLS]", 9},
        {3, "<|tool_call|>", 29}, {4, "{\"name\"", 29},
    };
    const char *tpls[5] = {nemo, small, ministral, granite, llama};
    /* (a system message of its own: Small 3.2's default one would fill the demo model's context) */
    const char *U = "\"messages\":[{\"role\":\"system\",\"content\":\"Call tools.\"},{\"role\":\"user\","
                    "\"content\":\"What is the weather in Oslo?\"}],\"temperature\":0";
    char body[4096], what[64];
    reply a, b;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tm_server_opts o;
        tm_server_opts_default(&o);
        o.port = 0;
        o.chat_template = tpls[cases[c].tpl];
        tm_server *srv = NULL;
        tm_err err = {0};
        CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
        if (!srv) continue;
        int port = tm_server_port(srv);
        int32_t id = mark_id(m, cases[c].mark);
        CHECKF(id >= 0, "no token %s", cases[c].mark);
        /* a call, held: JSON and streamed; mistral_args also parallel calls (the marker before each), and the
           model writing [CALL_ID] and [ARGS] as their tokens (biased below the marker: taken where the grammar
           allows them; [CALL_ID] only where the template shows it) */
        int named = cases[c].tpl == 1 || cases[c].tpl == 2;
        for (int v = 0; v < (named ? 3 : 1); v++) {
            int par = v == 1;
            snprintf(what, sizeof what, "template %d, %s%s", cases[c].tpl, cases[c].mark,
                     v == 1 ? ", parallel" : v == 2 ? ", [CALL_ID] [ARGS]" : "");
            char bias[96];
            snprintf(bias, sizeof bias, "{\"%d\":100", id);
            if (v == 2)
                snprintf(bias + strlen(bias), sizeof bias - strlen(bias), ",\"%d\":60,\"%d\":50",
                         mark_id(m, "[CALL_ID]"), mark_id(m, "[ARGS]"));
            for (int stream = 0; stream < (v == 2 ? 3 : 2); stream++) {
                snprintf(body, sizeof body, "{%s,\"tools\":%s,\"logit_bias\":%s},\"parallel_tool_calls\":%s,"
                         "\"max_tokens\":120,\"stream\":%s%s}", U, TOOLS, bias, par ? "true" : "false",
                         stream == 1 ? "true" : "false", stream == 2 ? ",\"logprobs\":true" : "");
                if (stream < 2) {
                    ask(port, body, stream, stream ? &b : &a);
                    continue;
                }
                /* the tokens the reply wrote: the markers as the special tokens where biased */
                int status, has[2] = {0, 0};
                cJSON *j = http_json(port, "POST", "/v1/chat/completions", body, NULL, &status);
                const cJSON *t, *lp = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j,
                                                          "choices"), 0), "logprobs"), "content");
                cJSON_ArrayForEach(t, lp) {
                    const char *tk = jstr(t, "token") ? jstr(t, "token") : "";
                    has[0] |= !strcmp(tk, "[CALL_ID]"), has[1] |= !strcmp(tk, "[ARGS]");
                }
                CHECKF(status == 200 && has[0] == (cases[c].tpl == 1) && has[1],
                       "%s: status %d, tokens [CALL_ID] %d [ARGS] %d", what, status, has[0], has[1]);
                cJSON_Delete(j);
            }
            same_reply_calls(&a, &b, what);
            CHECKF(!a.has_content && !b.has_content && strlen(a.id[0]) == cases[c].id_len &&
                       !strcmp(a.finish, par ? "length" : "tool_calls") && (!par || a.n >= 2),
                   "%s: content '%s' / '%s', id %s, finish %s, %d calls", what, a.content, b.content, a.id[0], a.finish,
                   a.n);
        }
        /* text, then the marker: a smaller bias, between one that makes the model write the marker first and one
           that does not (bisected); the text streams as content, then the call in pieces; llama3_json's call start
           after text is no call */
        int found = 0, anch = !strcmp(cases[c].mark, "{\"name\"");
        double lo = 0, hi = 40, bv = 0;
        for (int it = 0; it < 14 && !found; it++) {
            bv = (lo + hi) / 2;
            snprintf(body, sizeof body, "{%s,\"tools\":%s,\"logit_bias\":{\"%d\":%.6f},\"parallel_tool_calls\":false,"
                     "\"max_tokens\":120}", U, TOOLS, id, bv);
            ask(port, body, 0, &a);
            const char *at = strstr(a.content, cases[c].mark);
            if ((a.n && !a.content[0]) || !strncmp(a.content, cases[c].mark, strlen(cases[c].mark)))
                hi = bv; /* the marker first */
            else lo = bv;
            found = anch ? at && at > a.content && a.n == 0 : a.n == 1 && a.content[0];
        }
        CHECKF(found, "template %d: no bias in [%g, %g] makes the model write text before %s", cases[c].tpl, lo, hi,
               cases[c].mark);
        if (found) {
            snprintf(body, sizeof body, "{%s,\"tools\":%s,\"logit_bias\":{\"%d\":%.6f},\"parallel_tool_calls\":false,"
                     "\"max_tokens\":120,\"stream\":true}", U, TOOLS, id, bv);
            ask(port, body, 1, &b);
            snprintf(what, sizeof what, "template %d, text then %s (bias %g)", cases[c].tpl, cases[c].mark, bv);
            size_t bl = strlen(b.content);
            while (bl && (b.content[bl - 1] == ' ' || b.content[bl - 1] == '\n')) bl--; /* (the parse trims it) */
            CHECKF(b.status == 200 && bl == strlen(a.content) && !strncmp(a.content, b.content, bl) &&
                       !strcmp(a.finish, b.finish), "%s: content '%s' / streamed '%s'", what, a.content, b.content);
            if (!anch) { /* (the kept marker is not content) */
                same_reply_calls(&a, &b, what);
                CHECKF(!strstr(a.content, cases[c].mark) && !strstr(b.content, cases[c].mark), "%s: content '%s'", what,
                       b.content);
            } else { /* free after it too: not held to a call's form, whose next byte is ':' */
                const char *after = strstr(a.content, cases[c].mark) + strlen(cases[c].mark);
                CHECKF(b.n == 0 && strcmp(a.finish, "tool_calls") && after[after[0] == ' '] != ':',
                       "%s: %d calls streamed, finish %s: '%s'", what, b.n, a.finish, a.content);
            }
        }
        /* no bias: text, the same streamed */
        snprintf(what, sizeof what, "template %d", cases[c].tpl);
        plain_text(port, U, TOOLS, what);
        tm_server_stop(srv);
    }
out:
    free(nemo), free(llama), free(small), free(ministral);
    tandem_session_free(s);
    tandem_model_free(m);
    tandem_model_free(demo);
    model_dir_rm(dir);
}

/* ---- 3. auto held once a call starts, in harmony (gpt-oss) ---- */

/* harmony's markers as special tokens and a call's recipient, "to=functions.", as an ordinary one (no text
 * tokenizes to it), in the demo model's vocabulary; and an analysis message's opening that names the recipient */
#define AN_OPEN "<|channel|>analysis<|message|>"
static const char *const HMARKS[9] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>",
                                      "<|return|>", "to=functions.", AN_OPEN "to=functions."};
static const int HMARK_SPECIAL[9] = {1, 1, 1, 1, 1, 1, 1, 0, 0};
/* TOOLS with a description each (gpt-oss's template prints them) */
static const char *HTOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather in a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Oslo\",\"Rome\"]},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\",\"description\":\"The time\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{},\"additionalProperties\":false}}}]";

/* gpt-oss's template, auto: the demo model made to write a call's recipient first (a logit bias of +100 on it;
 * the rest is the model's) writes a call held to the tool's schema from there (the header in a form the reader
 * takes, the arguments the schema's), read as the call, JSON and streamed alike, the stream's in pieces that add
 * up to the JSON answer's, the markers written as their special tokens; a reply without the recipient is text, as
 * before, streamed the same; a recipient named in the analysis message the reply opens with starts no grammar (the
 * model made to write that opening and the recipient, again and again: reasoning, free, no tool's name after it). */
static void test_auto_harmony(void)
{
    char dir[64];
    tandem_status st;
    tandem_model *m = NULL;
    tandem_session *s = marked_session(dir, "harmony", HMARKS, HMARK_SPECIAL, 9, &m);
    char *tpl = th_slurp("tests/data/chat_templates/openai-gpt-oss-120b.jinja");
    tm_server *srv = NULL;
    if (!s || !tpl) goto out;
    CHECK(tm_serve_special(m, "<|message|>") && tm_serve_special(m, "<|call|>") && !tm_serve_special(m, "to=functions."));
    tm_server_opts o;
    tm_server_opts_default(&o);
    o.port = 0;
    o.chat_template = tpl;
    tm_err err = {0};
    CHECKF(tm_server_start(&srv, m, s, &o, &err) == TM_OK, "%s", err.msg);
    if (!srv) goto out;
    int port = tm_server_port(srv);
    int32_t id = mark_id(m, "to=functions."), *gw = NULL;
    size_t ngw = 0;
    CHECKF(id >= 0, "no token to=functions.");
    /* (and get_weather's first token, a smaller bias: a call with arguments; where the grammar allows it, only as
       the tool's name) */
    CHECK(tandem_tokenize(m, "get_weather", 11, 0, &gw, &ngw, &st) == 0 && ngw >= 1);
    int32_t g0 = gw ? gw[0] : 0;
    free(gw);
    const char *U = "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Oslo?\"}],\"temperature\":0";
    char body[4096];
    reply a, b;
    for (int stream = 0; stream < 3; stream++) {
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"logit_bias\":{\"%d\":100,\"%d\":30},\"max_tokens\":64,"
                 "\"stream\":%s%s}", U, HTOOLS, id, g0, stream == 1 ? "true" : "false",
                 stream == 2 ? ",\"logprobs\":true" : "");
        if (stream < 2) {
            ask(port, body, stream, stream ? &b : &a);
            continue;
        }
        /* the tokens the reply wrote: the recipient first, <|message|> as its special token */
        int status, has_msg = 0;
        cJSON *j = http_json(port, "POST", "/v1/chat/completions", body, NULL, &status);
        const cJSON *t, *lp = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j,
                                                  "choices"), 0), "logprobs"), "content");
        const char *first = jstr(cJSON_GetArrayItem(lp, 0), "token");
        cJSON_ArrayForEach(t, lp) has_msg |= !strcmp(jstr(t, "token") ? jstr(t, "token") : "", "<|message|>");
        CHECKF(status == 200 && first && !strcmp(first, "to=functions.") && has_msg, "harmony auto: status %d, first %s, "
               "<|message|> %d", status, first ? first : "-", has_msg);
        cJSON_Delete(j);
    }
    same_reply_calls(&a, &b, "harmony auto");
    CHECKF(a.n == 1 && !strcmp(a.name[0], "get_weather") && !strcmp(a.finish, "tool_calls") && !a.has_content &&
               !b.has_content && !a.has_reasoning,
           "harmony auto: %d calls (%s), finish %s, content '%s' / '%s'", a.n, a.name[0], a.finish, a.content, b.content);
    /* the recipient inside the opening analysis: left free (the bias's token, never a name after the recipient) */
    int32_t an = mark_id(m, AN_OPEN "to=functions.");
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body, "{%s,\"tools\":%s,\"logit_bias\":{\"%d\":100},\"max_tokens\":6,\"stream\":%s}", U,
                 HTOOLS, an, stream ? "true" : "false");
        ask(port, body, stream, stream ? &b : &a);
    }
    CHECKF(an >= 0 && a.status == 200 && a.n == 0 && b.n == 0 && !strcmp(a.finish, "length") &&
               !strncmp(a.reasoning, "to=functions.\n\nto=functions.", 28) && !strstr(a.reasoning, "functions.get") &&
               !strstr(a.reasoning, "functions.now") && !strcmp(a.reasoning, b.reasoning) && !a.has_content,
           "harmony auto, analysis: %d calls (%s), reasoning '%s' / '%s', content '%s'", a.n, a.finish, a.reasoning,
           b.reasoning, a.content);
    /* no bias: text, as before (this model never writes the format: all answer), the same streamed */
    plain_text(port, U, HTOOLS, "harmony auto");
out:
    if (srv) tm_server_stop(srv);
    free(tpl);
    tandem_session_free(s);
    tandem_model_free(m);
    model_dir_rm(dir);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_reply();
    test_auto_bare();
    test_auto_harmony();
    return th_done("test_serve_calls");
}
