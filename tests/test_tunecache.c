/* tests/test_tunecache.c: core/tunecache.h, and the decode engine's GEMV
 * choice kept through it.
 *
 * 1. put / get / replace in a scratch cache directory; other keys kept; an
 *    unreadable or garbage file only means "not stored"; TANDEM_TUNE_CACHE=0
 *    turns it off.
 * 2. Sessions without TANDEM_GEMV: the first stores its measured choice per
 *    op; a stored "avx2" (or "avx512") makes a session compute exactly what
 *    the pinned choice does, bit for bit, so a stored choice is what every
 *    later session runs (on a CPU with AVX-512, where the two differ). */
#include "harness.h"

#include <sys/stat.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/fileio.h"
#include "core/tunecache.h"
#include "model/model.h"
#include "runtime/rt_model.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

static char dir[] = "/tmp/tandem-test-tune.XXXXXX";

static void test_store(void)
{
    char v[32];
    CHECK_EQ_INT(tm_tune_get("k1", v, sizeof v), 0);
    tm_tune_put("k1", "avx2");
    tm_tune_put("k2", "x y");
    CHECK(tm_tune_get("k1", v, sizeof v) && !strcmp(v, "avx2"));
    CHECK(tm_tune_get("k2", v, sizeof v) && !strcmp(v, "x y"));
    tm_tune_put("k1", "avx512"); /* replaced, k2 kept */
    CHECK(tm_tune_get("k1", v, sizeof v) && !strcmp(v, "avx512"));
    CHECK(tm_tune_get("k2", v, sizeof v) && !strcmp(v, "x y"));
    CHECK_EQ_INT(tm_tune_get("k", v, sizeof v), 0); /* a prefix of a key is not the key */
    char small[4];
    CHECK(tm_tune_get("k1", small, sizeof small) && !strcmp(small, "avx"));
    tm_tune_put("bad\tkey", "v"); /* refused: the format has no room for it */
    CHECK_EQ_INT(tm_tune_get("bad\tkey", v, sizeof v), 0);
    /* the file: one line per key, the build and the CPU in front */
    char path[600], *text = NULL;
    snprintf(path, sizeof path, "%s/tandem/tune.txt", dir);
    tm_err e = {0};
    CHECK_EQ_INT(tm_read_file(path, &text, NULL, 0, &e), TM_OK);
    int lines = 0;
    for (const char *p = text; p && *p; p++) lines += *p == '\n';
    CHECK_EQ_INT(lines, 2);
    CHECK(text && strstr(text, tm_cpu_get()->brand) && strstr(text, " k1\tavx512\n"));
    free(text);
    /* garbage in the file: nothing found, and a put still works */
    FILE *f = fopen(path, "w");
    fputs("\x01\x02 no tab here\n\n\t\tk1\n", f);
    fclose(f);
    CHECK_EQ_INT(tm_tune_get("k1", v, sizeof v), 0);
    tm_tune_put("k3", "z");
    CHECK(tm_tune_get("k3", v, sizeof v) && !strcmp(v, "z"));
    /* off */
    setenv("TANDEM_TUNE_CACHE", "0", 1);
    CHECK_EQ_INT(tm_tune_get("k3", v, sizeof v), 0);
    tm_tune_put("k4", "w");
    unsetenv("TANDEM_TUNE_CACHE");
    CHECK_EQ_INT(tm_tune_get("k4", v, sizeof v), 0);
    unlink(path);
}

/* the decode-only route's logits for a prompt and 6 decode steps, in a fresh session */
static void score(tm_rt_model *rm, const int32_t *ids, int n, float *out)
{
    tm_err e = {0};
    tandem_session_opts o;
    memset(&o, 0, sizeof o);
    o.n_threads = 1;
    o.max_ctx = 256;
    o.route = TANDEM_ROUTE_DECODE_ONLY;
    tm_session *s = NULL;
    CHECKF(tm_session_new(&s, rm, &o, &e) == TM_OK, "%s", e.msg);
    if (s) CHECKF(tm_session_score(s, ids, n, n - 6, TANDEM_ROUTE_DECODE_ONLY, out, &e) == TM_OK, "%s", e.msg);
    tm_session_free(s);
}

/* every stored GEMV choice set to val */
static int set_choices(const char *val)
{
    char path[600], *text = NULL;
    snprintf(path, sizeof path, "%s/tandem/tune.txt", dir);
    tm_err e = {0};
    if (tm_read_file(path, &text, NULL, 0, &e) != TM_OK) return 0;
    int n = 0;
    for (char *p = strstr(text, " gemv "); p; p = strstr(p + 1, " gemv ")) {
        char key[256];
        char *tab = strchr(p, '\t');
        size_t l = tab ? (size_t)(tab - p - 1) : 0;
        if (!tab || l >= sizeof key) break;
        memcpy(key, p + 1, l);
        key[l] = '\0';
        tm_tune_put(key, val);
        n++;
    }
    free(text);
    return n;
}

static void test_gemv_choice(void)
{
    if (!tm_cpu_get()->avx512f) {
        fprintf(stderr, "test_tunecache: no AVX-512 here: the decode engine has one GEMV choice, part 2 not run\n");
        return;
    }
    tm_err e = {0};
    tm_rt_model *rm = NULL;
    CHECKF(tm_rt_model_open(&rm, "models/tiny-classics-llama", &e) == TM_OK, "%s", e.msg);
    if (!rm) return;
    const char *prompt = "The old man looked at the sea and said, it was a long way to the harbour";
    int32_t *ids = NULL;
    size_t n = 0;
    tm_tok_encode(rm->tok, prompt, strlen(prompt), 1, &ids, &n, &e);
    int V = rm->decode->V;
    size_t sz = sizeof(float) * (size_t)V * 7;
    float *pin512 = malloc(sz), *pin2 = malloc(sz), *got = malloc(sz);
    setenv("TANDEM_GEMV", "avx512", 1);
    score(rm, ids, (int)n, pin512);
    setenv("TANDEM_GEMV", "avx2", 1);
    score(rm, ids, (int)n, pin2);
    CHECKF(memcmp(pin512, pin2, sz) != 0, "the AVX-512 and AVX2 GEMVs gave the same bits: this check cannot tell them apart");
    unsetenv("TANDEM_GEMV");
    score(rm, ids, (int)n, got); /* measures and stores */
    CHECK(memcmp(got, pin512, sz) == 0 || memcmp(got, pin2, sz) == 0);
    int stored = set_choices("avx2");
    CHECKF(stored >= 1, "%d GEMV choices stored", stored); /* one per encoding kind the decode weights use */
    score(rm, ids, (int)n, got);
    CHECK(memcmp(got, pin2, sz) == 0);
    set_choices("avx512");
    score(rm, ids, (int)n, got);
    CHECK(memcmp(got, pin512, sz) == 0);
    free(pin512);
    free(pin2);
    free(got);
    free(ids);
    tm_rt_model_free(rm);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    setenv("XDG_CACHE_HOME", dir, 1);
    unsetenv("TANDEM_TUNE_CACHE");
    test_store();
    test_gemv_choice();
    char path[600];
    snprintf(path, sizeof path, "%s/tandem/tune.txt", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tandem", dir);
    rmdir(path);
    rmdir(dir);
    return th_done("test_tunecache");
}
