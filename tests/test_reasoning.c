/* tests/test_reasoning.c: thinking apart from the answer (text/reasoning.h).
 *
 * 1. Detection on the conformance templates (Qwen3 thinks; the others do not), on published
 *    templates of each family (tests/data/chat_templates, llama.cpp's models/templates where the
 *    peer's checkout has them), and a prompt left inside an open think block.
 * 2. Splits by hand: a closed block, one never closed (thinking only, or cut short), a reply
 *    that does not think, one that starts in a block the prompt opened, whitespace around both;
 *    Command's wrapped answers (<|START_RESPONSE|> ... <|END_RESPONSE|>) and the other families.
 * 3. Streams: for random replies built from markers, pieces of markers, newlines and words, the
 *    pieces a stream sends (each span past what it sent, after every byte) add up to the final
 *    split's spans; for the <think> family and for Command's (whose answer is also wrapped). */
#include "harness.h"

#include <limits.h>
#include <stdint.h>

#include "text/reasoning.h"

static const tm_think_markers *fam; /* the family split_case reads in */

static void split_case(const char *text, int opened, const char *reasoning, const char *content)
{
    tm_think_span s;
    size_t n = strlen(text);
    tm_think_split(fam, text, n, opened, 1, &s);
    CHECKF(s.r0 <= s.r1 && s.r1 <= n && s.c0 <= s.c1 && s.c1 <= n, "%s: spans out of order", text);
    int ok = s.r1 - s.r0 == strlen(reasoning) && !memcmp(text + s.r0, reasoning, s.r1 - s.r0) &&
             s.c1 - s.c0 == strlen(content) && !memcmp(text + s.c0, content, s.c1 - s.c0);
    CHECKF(ok, "%s: '%s' (opened %d): reasoning '%.*s', content '%.*s'; expected '%s', '%s'", fam->name, text, opened,
           (int)(s.r1 - s.r0), text + s.r0, (int)(s.c1 - s.c0), text + s.c0, reasoning, content);
}

static void detect_file(const char *path, const char *want)
{
    char *src = th_slurp(path);
    const tm_think_markers *m = src ? tm_think_detect(src) : NULL;
    CHECKF(src && (want ? m && !strcmp(m->name, want) : !m), "%s: %s, expected %s", path, m ? m->name : "none",
           want ? want : "none");
    free(src);
}

static void test_detect(void)
{
    static const struct {
        const char *file;
        const char *want;
    } cases[] = {
        {"Qwen-Qwen3-0.6B.jinja", "think"},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", NULL},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", NULL},
        {"google-gemma-2-2b-it.jinja", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/conformance/chat_templates/%s", th_shared(), cases[i].file);
        detect_file(path, cases[i].want);
    }
    detect_file("tests/data/chat_templates/ByteDance-Seed-OSS.jinja", "seed");
    detect_file("tests/data/chat_templates/Qwen-QwQ-32B.jinja", "think");
    detect_file("tests/data/chat_templates/Mistral-Small-3.2-24B-Instruct-2506.jinja", NULL);
    detect_file("tests/data/chat_templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command");
    detect_file("tests/data/chat_templates/Cohere2MoE.jinja", "command4");
    detect_file("tests/data/chat_templates/mistralai-Ministral-3-14B-Reasoning-2512.jinja", "mistral");
    CHECK(!tm_think_detect(NULL));
    const tm_think_markers *t = &tm_think_tags;
    const char *p1 = "<|User|>Hi<|Assistant|><think>\n";
    CHECK(tm_think_opened(t, p1, strlen(p1)));
    const char *p2 = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    CHECK(!tm_think_opened(t, p2, strlen(p2)));
    const char *p3 = "<think>x</think> then <think> a";
    CHECK(!tm_think_opened(t, p3, strlen(p3)));
    CHECK(!tm_think_opened(t, "", 0) && !tm_think_opened(t, "<think", 6) && !tm_think_opened(NULL, p1, strlen(p1)));
    /* Command A Reasoning's generation prompt: the block opened when thinking, opened and closed when not */
    const tm_think_markers *c4 = tm_think_detect("<|START_TEXT|><|START_THINKING|><|END_THINKING|>");
    const char *p4 = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>";
    const char *p5 = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>";
    CHECK(c4 && !strcmp(c4->name, "command4") && tm_think_opened(c4, p4, strlen(p4)) && !tm_think_opened(c4, p5, strlen(p5)));
}

static void test_split(void)
{
    fam = &tm_think_tags;
    split_case("<think>\nLet me add.\n</think>\n\n4", 0, "Let me add.", "4");
    split_case("  <think>a\n\nb</think>c", 0, "a\n\nb", "c");
    split_case("<think>\nstill thinking\n\n", 0, "still thinking", "");
    split_case("<think></think>", 0, "", "");
    split_case("Just the answer.", 0, "", "Just the answer.");
    split_case("  Answer <think>x</think>", 0, "", "  Answer <think>x</think>");
    split_case("\nOkay, 2+2.\n</think>\n\nIt is 4.", 1, "Okay, 2+2.", "It is 4.");
    split_case("cut short by max_tok", 1, "cut short by max_tok", "");
    split_case("<thin", 0, "", "<thin");
    split_case("<think>a</thi", 0, "a</thi", "");
    split_case("", 0, "", "");
    split_case("<think>a</think></think>b", 0, "a", "</think>b");
    split_case("<think>a</think><|START_RESPONSE|>b", 0, "a", "<|START_RESPONSE|>b"); /* no wrapper in this family */
    fam = tm_think_detect("<|START_THINKING|>{{ plan }}<|END_THINKING|>");
    CHECK(fam && !strcmp(fam->name, "command"));
    if (!fam) return;
    split_case("<|START_THINKING|>Plan: call.<|END_THINKING|><|START_ACTION|>[]<|END_ACTION|>", 0, "Plan: call.",
               "<|START_ACTION|>[]<|END_ACTION|>");
    split_case("<|START_RESPONSE|>Hello.<|END_RESPONSE|>", 0, "", "Hello.");
    split_case("  <|START_RESPONSE|>Hello.<|END_RESPONSE|>trailing", 0, "", "Hello.");
    split_case("<|START_THINKING|>p<|END_THINKING|>\n<|START_RESPONSE|>4<|END_RESPONSE|>", 0, "p", "4");
    split_case("<|START_RESPONSE|>cut short", 0, "", "cut short");
    split_case("<|START_RESP", 0, "", "<|START_RESP");
    split_case("Plain answer.", 0, "", "Plain answer.");
    split_case("thinking<|END_THINKING|><|START_RESPONSE|>x<|END_RESPONSE|>", 1, "thinking", "x");
    split_case("Hi <|START_RESPONSE|>x", 0, "", "Hi <|START_RESPONSE|>x"); /* a wrapper only at the answer's start */
    fam = tm_think_detect("<seed:think>x</seed:think>");
    CHECK(fam && !strcmp(fam->name, "seed"));
    if (fam) split_case("<seed:think>hmm</seed:think>Yes.", 0, "hmm", "Yes.");
    fam = tm_think_detect("[THINK]x[/THINK]");
    CHECK(fam && !strcmp(fam->name, "mistral"));
    if (fam) split_case("[THINK]\nhmm\n[/THINK]\nYes.", 0, "hmm", "Yes.");
    fam = tm_think_detect("<|START_TEXT|>{{ m }}<|END_TEXT|><|START_THINKING|><|END_THINKING|>");
    CHECK(fam && !strcmp(fam->name, "command4"));
    if (fam) split_case("<|START_THINKING|>a<|END_THINKING|><|START_TEXT|>b<|END_TEXT|>", 0, "a", "b");
}

static uint64_t rs = 99;
static unsigned rnd(unsigned n)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rs >> 33) % n);
}

/* what a stream sends in family m: after each byte, each span past what was sent of it */
static void stream_family(const tm_think_markers *m, const char *const *pieces, size_t npieces)
{
    long rounds = 0;
    for (int round = 0; round < 5000; round++) {
        char text[1024];
        size_t n = 0;
        int np = 1 + (int)rnd(10), opened = (int)rnd(2);
        for (int i = 0; i < np; i++) {
            const char *p = pieces[rnd((unsigned)npieces)];
            size_t k = strlen(p);
            memcpy(text + n, p, k);
            n += k;
        }
        text[n] = '\0';
        char r[1024] = "", c[1024] = "";
        size_t rl = 0, cl = 0, rsent = 0, csent = 0;
        int ok = 1;
        for (size_t k = 0; k <= n && ok; k++) {
            tm_think_span s;
            tm_think_split(m, text, k, opened, k == n, &s);
            ok = s.r0 <= s.r1 && s.r1 <= k && s.c0 <= s.c1 && s.c1 <= k;
            size_t from = rsent > s.r0 ? rsent : s.r0;
            if (ok && s.r1 > from) {
                memcpy(r + rl, text + from, s.r1 - from);
                rl += s.r1 - from;
                rsent = s.r1;
            }
            from = csent > s.c0 ? csent : s.c0;
            if (ok && s.c1 > from) {
                memcpy(c + cl, text + from, s.c1 - from);
                cl += s.c1 - from;
                csent = s.c1;
            }
        }
        tm_think_span f;
        tm_think_split(m, text, n, opened, 1, &f);
        ok = ok && rl == f.r1 - f.r0 && !memcmp(r, text + f.r0, rl) && cl == f.c1 - f.c0 && !memcmp(c, text + f.c0, cl);
        CHECKF(ok, "%s, opened %d, '%s': streamed '%.*s' / '%.*s', whole '%.*s' / '%.*s'", m->name, opened, text,
               (int)rl, r, (int)cl, c, (int)(f.r1 - f.r0), text + f.r0, (int)(f.c1 - f.c0), text + f.c0);
        rounds++;
    }
    CHECK(rounds == 5000);
}

static void test_stream(void)
{
    static const char *think[] = {"<think>", "</think>", "<thi", "</th", "<", "\n", "\n\n", " ", "a", "b c", "x\n"};
    stream_family(&tm_think_tags, think, sizeof think / sizeof think[0]);
    static const char *command[] = {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>",
                                    "<|START_", "<|END_RES", "<|", "\n", " ", "a", "b c", "<|START_ACTION|>[]"};
    const tm_think_markers *m = tm_think_detect("<|END_THINKING|>");
    CHECK(m && m->ans_open);
    if (m) stream_family(m, command, sizeof command / sizeof command[0]);
}

int main(void)
{
    test_detect();
    test_split();
    test_stream();
    return th_done("test_reasoning");
}
