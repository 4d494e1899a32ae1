/* tests/test_reasoning.c: thinking apart from the answer (text/reasoning.h).
 *
 * 1. Detection on the conformance templates (Qwen3 thinks; the others do not), and a prompt left
 *    inside an open think block.
 * 2. Splits by hand: a closed block, one never closed (thinking only, or cut short), a reply
 *    that does not think, one that starts in a block the prompt opened, whitespace around both.
 * 3. Streams: for random replies built from markers, pieces of markers, newlines and words, the
 *    pieces a stream sends (each span past what it sent, after every byte) add up to the final
 *    split's spans. */
#include "harness.h"

#include <limits.h>
#include <stdint.h>

#include "text/reasoning.h"

static void split_case(const char *text, int opened, const char *reasoning, const char *content)
{
    tm_think_span s;
    size_t n = strlen(text);
    tm_think_split(text, n, opened, 1, &s);
    CHECKF(s.r0 <= s.r1 && s.r1 <= n && s.c0 <= s.c1 && s.c1 <= n, "%s: spans out of order", text);
    int ok = s.r1 - s.r0 == strlen(reasoning) && !memcmp(text + s.r0, reasoning, s.r1 - s.r0) &&
             s.c1 - s.c0 == strlen(content) && !memcmp(text + s.c0, content, s.c1 - s.c0);
    CHECKF(ok, "'%s' (opened %d): reasoning '%.*s', content '%.*s'; expected '%s', '%s'", text, opened,
           (int)(s.r1 - s.r0), text + s.r0, (int)(s.c1 - s.c0), text + s.c0, reasoning, content);
}

static void test_detect(void)
{
    static const struct {
        const char *file;
        int want;
    } cases[] = {
        {"Qwen-Qwen3-0.6B.jinja", 1},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", 0},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", 0},
        {"google-gemma-2-2b-it.jinja", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/conformance/chat_templates/%s", th_shared(), cases[i].file);
        char *src = th_slurp(path);
        CHECKF(src && tm_think_detect(src) == cases[i].want, "%s", cases[i].file);
        free(src);
    }
    CHECK(!tm_think_detect(NULL));
    const char *p1 = "<|User|>Hi<|Assistant|><think>\n";
    CHECK(tm_think_opened(p1, strlen(p1)));
    const char *p2 = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    CHECK(!tm_think_opened(p2, strlen(p2)));
    const char *p3 = "<think>x</think> then <think> a";
    CHECK(!tm_think_opened(p3, strlen(p3)));
    CHECK(!tm_think_opened("", 0) && !tm_think_opened("<think", 6));
}

static void test_split(void)
{
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
}

static uint64_t rs = 99;
static unsigned rnd(unsigned n)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rs >> 33) % n);
}

/* what a stream sends: after each byte, each span past what was sent of it */
static void test_stream(void)
{
    static const char *pieces[] = {"<think>", "</think>", "<thi", "</th", "<", "\n", "\n\n", " ", "a", "b c", "x\n"};
    long rounds = 0;
    for (int round = 0; round < 5000; round++) {
        char text[512];
        size_t n = 0;
        int np = 1 + (int)rnd(10), opened = (int)rnd(2);
        for (int i = 0; i < np; i++) {
            const char *p = pieces[rnd(sizeof pieces / sizeof pieces[0])];
            size_t k = strlen(p);
            memcpy(text + n, p, k);
            n += k;
        }
        text[n] = '\0';
        char r[512] = "", c[512] = "";
        size_t rl = 0, cl = 0, rsent = 0, csent = 0;
        int ok = 1;
        for (size_t k = 0; k <= n && ok; k++) {
            tm_think_span s;
            tm_think_split(text, k, opened, k == n, &s);
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
        tm_think_split(text, n, opened, 1, &f);
        ok = ok && rl == f.r1 - f.r0 && !memcmp(r, text + f.r0, rl) && cl == f.c1 - f.c0 && !memcmp(c, text + f.c0, cl);
        CHECKF(ok, "opened %d, '%s': streamed '%.*s' / '%.*s', whole '%.*s' / '%.*s'", opened, text, (int)rl, r,
               (int)cl, c, (int)(f.r1 - f.r0), text + f.r0, (int)(f.c1 - f.c0), text + f.c0);
        rounds++;
    }
    CHECK(rounds == 5000);
}

int main(void)
{
    test_detect();
    test_split();
    test_stream();
    return th_done("test_reasoning");
}
