/* tests/test_lookup.c: prompt lookup (runtime/lookup.h, tandem_session_opts.lookup):
 *   - the drafts: the longest suffix of 4 down to 2 tokens that occurred before, its latest earlier
 *     occurrence, the tokens after it up to kmax and never past the history's end; none where no
 *     suffix repeats or the history is too short; bad arguments give none;
 *   - a session on the demo model, a passage given twice (so greedy decoding copies it): with lookup 3,
 *     7 and 15 the tokens are plain decoding's (or part from them first at a near tie of plain's top
 *     two, within 0.02: the verify rows come from the prefill kernels) and drafts were confirmed
 *     (n_accepted > 0, at most n_drafted); max_tokens exact; a stop string met inside a confirmed run
 *     ends the text where plain decoding's ends; sampled requests (temperature 0.8) draft nothing; with
 *     the prefix cache on, a second request over the first's pages likewise;
 *   - the option's range: 16 is refused by name.
 * The session checks run on the best CPU engines, and again on the CUDA engine in both roles where the
 * build has it and a GPU is there (else a SKIP line for that part); each as the scheduler runs lookup
 * (paused where a verify costs more a token than a step) and with a verify wherever there is a draft
 * (TANDEM_LOOKUP_PAY=0: drafts are then surely confirmed). */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "engine/engine.h"
#include "runtime/lookup.h"
#include "tandem.h"

static const char *DEMO = "models/tiny-classics-llama";

static void draft_checks(void)
{
    int32_t d[16];
    /* ... 5 6 7 8 9 ... 5 6 7 | the longest suffix (4: x 5 6 7 absent; 3: 5 6 7) at its latest occurrence */
    int32_t h1[] = {1, 5, 6, 7, 8, 9, 2, 5, 6, 7, 3, 4, 5, 6, 7};
    int n1 = (int)(sizeof h1 / sizeof h1[0]);
    int k = tm_lookup_draft(h1, n1, 4, 2, d, 8);
    CHECKF(k == 5 && d[0] == 3 && d[1] == 4 && d[2] == 5 && d[3] == 6 && d[4] == 7, "k %d d0 %d", k, d[0]);
    k = tm_lookup_draft(h1, n1, 4, 2, d, 2); /* kmax */
    CHECKF(k == 2 && d[0] == 3 && d[1] == 4, "k %d", k);
    /* a 4-gram preferred to a later 2-gram: ... 1 2 3 4 [10] ... 3 4 [11] ... 1 2 3 4 */
    int32_t h2[] = {1, 2, 3, 4, 10, 20, 3, 4, 11, 21, 1, 2, 3, 4};
    k = tm_lookup_draft(h2, 14, 4, 2, d, 3);
    CHECKF(k == 3 && d[0] == 10 && d[1] == 20 && d[2] == 3, "4-gram: k %d d0 %d", k, d[0]);
    k = tm_lookup_draft(h2, 14, 2, 2, d, 3); /* only 2-grams: the latest earlier "3 4" */
    CHECKF(k == 3 && d[0] == 11 && d[1] == 21 && d[2] == 1, "2-gram: k %d d0 %d", k, d[0]);
    /* periodic text: the draft runs to the history's end */
    int32_t h3[] = {7, 8, 7, 8, 7, 8};
    k = tm_lookup_draft(h3, 6, 4, 2, d, 15);
    CHECKF(k == 2 && d[0] == 7 && d[1] == 8, "periodic: k %d", k);
    /* nothing repeats; too short; bad arguments */
    int32_t h4[] = {1, 2, 3, 4, 5, 6};
    CHECK(tm_lookup_draft(h4, 6, 4, 2, d, 8) == 0);
    CHECK(tm_lookup_draft(h3, 2, 4, 2, d, 8) == 0);
    CHECK(tm_lookup_draft(h3, 6, 4, 2, d, 0) == 0);
    CHECK(tm_lookup_draft(NULL, 6, 4, 2, d, 8) == 0);
    CHECK(tm_lookup_draft(h3, 6, 1, 2, d, 8) == 0);
}

typedef struct run_out {
    char text[TH_TEXT_CAP];
    int32_t tok[256];          /* the tokens that released text (one each here: the demo's text is ASCII) */
    float margin[256];         /* with margins: each step's log-probability gap between its top two tokens */
    int n_tok, n_lp;
    tandem_stats st;
} run_out;

static int on_text(void *ud, const char *piece, size_t len, int32_t tok)
{
    run_out *o = ud;
    if (tok >= 0 && o->n_tok < 256) o->tok[o->n_tok++] = tok;
    return th_collect(o->text, piece, len, tok);
}

static int on_lp(void *ud, const tandem_logprob *lp)
{
    run_out *o = ud;
    if (o->n_lp < 256) o->margin[o->n_lp++] = lp->n_top >= 2 ? lp->top_logprob[0] - lp->top_logprob[1] : 99.0f;
    return 0;
}

/* one session, one request (two with the prefix cache: the second over the first's pages); margins: the
 * per-step top-2 gaps too (log-probabilities asked for, which turns prompt lookup off) */
static const char *engine; /* both roles' engine (NULL: the best CPU ones) */

/* a verify wherever there is a draft (TANDEM_LOOKUP_PAY=0), so that drafts are surely confirmed */
static int always(void)
{
    const char *v = getenv("TANDEM_LOOKUP_PAY");
    return v && !strcmp(v, "0");
}

static int gen(tandem_model *m, int lookup, int prefix_cache, const char *prompt, float temp, int n, const char *stop,
               int margins, run_out *o)
{
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.prefill_engine = so.decode_engine = engine;
    so.n_threads = 2, so.max_ctx = 1024, so.lookup = lookup, so.prefix_cache = prefix_cache;
    tandem_session *s = NULL;
    tandem_status ts = {0};
    if (tandem_session_new(&s, m, &so, &ts) != 0) {
        CHECKF(0, "session: %s", ts.msg);
        return -1;
    }
    const char *stops[2] = {stop, NULL};
    int rc = 0;
    for (int round = 0; round < 1 + prefix_cache && rc == 0; round++) {
        tandem_request r;
        tandem_request_default(&r);
        r.prompt = prompt, r.max_tokens = n, r.temperature = temp, r.seed = 5, r.ignore_eos = 1;
        if (stop) r.stop = stops;
        if (margins) r.on_logprob.fn = on_lp, r.logprobs = 2;
        o->text[0] = '\0', o->n_tok = o->n_lp = 0;
        rc = tandem_generate(s, &r, on_text, o, &o->st, &ts);
        CHECKF(rc == 0, "generate: %s", ts.msg);
    }
    tandem_session_free(s);
    return rc;
}

/* got's tokens are plain's, or part from them first where plain decoding's top two were within 0.02 of
 * each other (the verify rows come from the prefill kernels, whose rounding may settle a near tie the
 * other way); returns where they part (n_tok where they do not) */
static int same_or_near_tie(const run_out *plain, const run_out *got, const char *what)
{
    int i = 0, n = plain->n_tok < got->n_tok ? plain->n_tok : got->n_tok;
    while (i < n && plain->tok[i] == got->tok[i]) i++;
    if (i < n || plain->n_tok != got->n_tok) {
        float gap = i < plain->n_lp ? plain->margin[i] : 99.0f;
        printf("%s: parts from plain decoding at token %d of %d, where plain's top two were %.4f apart\n", what, i,
               plain->n_tok, gap);
        CHECKF(i < n && gap < 0.02f, "%s: token %d differs (top-2 gap %.4f)", what, i, gap);
    }
    return i;
}

static void session_checks(void)
{
    tandem_model *m = NULL;
    tandem_status ts = {0};
    CHECKF(tandem_model_open(&m, DEMO, &ts) == 0, "%s", ts.msg);
    if (!m) return;
    /* a passage of the held-out text, twice: the model continues by copying it */
    size_t len = 0;
    char *held = NULL;
    tm_err err = {0};
    CHECK(tm_read_file("models/tiny-classics-llama/heldout.txt", &held, &len, 1 << 24, &err) == TM_OK && len > 2000);
    if (!held) return;
    char passage[800], prompt[1700];
    memcpy(passage, held + 800, 600);
    passage[600] = '\0';
    snprintf(prompt, sizeof prompt, "%s%s", passage, passage);
    free(held);
    run_out *plain = calloc(1, sizeof *plain), *got = calloc(1, sizeof *got);
    gen(m, 0, 0, prompt, 0, 96, NULL, 1, plain);
    CHECK(plain->st.n_generated == 96 && plain->st.n_drafted == 0 && plain->n_lp == 96 && plain->n_tok == 96);
    int lk[] = {3, 7, 15};
    for (int i = 0; i < 3; i++) {
        gen(m, lk[i], 0, prompt, 0, 96, NULL, 0, got);
        char what[32];
        snprintf(what, sizeof what, "lookup %d", lk[i]);
        int same = same_or_near_tie(plain, got, what);
        printf("%s%s, lookup %d: %d drafted, %d confirmed; the same tokens as plain decoding for %d of 96\n",
               engine ? engine : "cpu", always() ? " (a verify wherever a draft)" : "", lk[i], got->st.n_drafted,
               got->st.n_accepted, same);
        CHECKF(got->st.n_generated == 96, "lookup %d: %d tokens", lk[i], got->st.n_generated);
        CHECKF(got->st.n_accepted <= got->st.n_drafted && got->st.n_drafted <= 96 * lk[i] &&
               (got->st.n_accepted > 0 || !always()), "lookup %d: %d of %d", lk[i], got->st.n_accepted,
               got->st.n_drafted);
    }
    /* a stop string a few words into the copied text: the same cut */
    char stop[24];
    const char *sp = plain->text + 40;
    while (*sp && *sp != ' ') sp++;
    snprintf(stop, sizeof stop, "%.6s", sp + 1);
    run_out *ps = calloc(1, sizeof *ps);
    gen(m, 0, 0, prompt, 0, 96, stop, 1, ps);
    gen(m, 7, 0, prompt, 0, 96, stop, 0, got);
    if (same_or_near_tie(ps, got, "a stop string") == ps->n_tok)
        CHECKF(!strcmp(got->text, ps->text) && got->st.n_generated == ps->st.n_generated && ps->st.n_generated < 96,
               "stop '%s': %d tokens '%s' against %d '%s'", stop, got->st.n_generated, got->text, ps->st.n_generated,
               ps->text);
    /* max_tokens small: exact */
    gen(m, 7, 0, prompt, 0, 5, NULL, 0, got);
    CHECKF(got->st.n_generated == 5 && !strncmp(got->text, plain->text, strlen(got->text)), "5 tokens: %d",
           got->st.n_generated);
    /* sampled: no drafts */
    gen(m, 7, 0, prompt, 0.8f, 32, NULL, 0, got);
    CHECKF(got->st.n_drafted == 0 && got->st.n_generated == 32, "sampled: %d drafted", got->st.n_drafted);
    /* the prefix cache: the second request takes the first's pages */
    gen(m, 7, 1, prompt, 0, 96, NULL, 0, got);
    same_or_near_tie(plain, got, "the prefix cache's second request");
    CHECKF(got->st.n_cached > 0 && (got->st.n_accepted > 0 || !always()), "prefix cache: %d cached, %d confirmed",
           got->st.n_cached, got->st.n_accepted);
    /* the option's range */
    tandem_session_opts so;
    tandem_session_opts_default(&so);
    so.lookup = 16;
    tandem_session *s = NULL;
    CHECK(tandem_session_new(&s, m, &so, &ts) != 0 && !s && strstr(ts.msg, "lookup"));
    free(plain), free(got), free(ps);
    tandem_model_free(m);
}

int main(void)
{
    draft_checks();
    /* first as the scheduler runs it (lookup paused where a verify costs more a token than a step: on a model
       this small, often), then with a verify wherever there is a draft, whose counts do not hang on timings */
    session_checks();
    setenv("TANDEM_LOOKUP_PAY", "0", 1);
    session_checks();
    /* the CUDA engine in both roles, where this build has it and there is a GPU */
    const tm_engine_vt *cu = tm_engine_find("cuda");
    tm_engine_caps caps;
    tm_err err = {0};
    if (cu && cu->probe(&caps, &err) == TM_OK) {
        engine = "cuda";
        session_checks();
        unsetenv("TANDEM_LOOKUP_PAY");
        session_checks();
    } else printf("SKIP the CUDA engine's lookup: %s\n", cu ? err.msg : "not in this build (make CUDA=1)");
    return th_done("test_lookup");
}
