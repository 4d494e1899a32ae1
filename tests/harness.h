/* tests/harness.h: the minimal test harness every tests/test_*.c uses.
 *
 * Rule for where tests live: one binary per module, tests/test_<module>.c,
 * built by `make` into build/tests/. Each binary runs its cases, prints one
 * line per failure (file:line and what differed) and ends with
 *     <name>: N passed, M failed
 * Its exit status is 0 only if nothing failed. tests/run.sh runs them all and
 * sums the counts. Paths are relative to the repository root (tests run there);
 * ../shared is found through the TM_SHARED environment variable (default
 * "../shared"). */
#ifndef TM_TESTS_HARNESS_H
#define TM_TESTS_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

static int th_pass, th_fail;

#define CHECK(cond) do { \
    if (cond) th_pass++; \
    else { th_fail++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECKF(cond, ...) do { \
    if (cond) th_pass++; \
    else { th_fail++; fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); \
    CHECKF(_a == _b, "%s = %lld, %s = %lld", #a, _a, #b, _b); } while (0)

#define CHECK_EQ_STR(a, b) do { const char *_a = (a), *_b = (b); \
    CHECKF(_a && _b && strcmp(_a, _b) == 0, "%s = \"%s\", expected \"%s\"", #a, _a ? _a : "(null)", _b ? _b : "(null)"); } while (0)

#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); \
    CHECKF(fabs(_a - _b) <= (tol), "%s = %.9g, %s = %.9g, |diff| %.3g > %.3g", #a, _a, #b, _b, fabs(_a - _b), (double)(tol)); } while (0)

static inline const char *th_shared(void)
{
    const char *s = getenv("TM_SHARED");
    return s && *s ? s : "../shared";
}

/* th_slurp: a whole file, NUL-terminated (malloc'd), or NULL. */
static inline char *th_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* th_collect (a tandem_text_fn): the piece appended to the NUL-terminated text at ud, a buffer of
 * TH_TEXT_CAP bytes (what does not fit is dropped; ud NULL: nothing kept) */
#define TH_TEXT_CAP 8192
static inline int th_collect(void *ud, const char *piece, size_t len, int32_t tok)
{
    (void)tok;
    char *t = ud;
    size_t n = t ? strlen(t) : 0;
    if (t && n + len < TH_TEXT_CAP) {
        memcpy(t + n, piece, len);
        t[n + len] = '\0';
    }
    return 0;
}

/* th_write_file: path := data [n] (created or truncated); 0, or -1 */
static inline int th_write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* th_link_files: dir/NAME -> src_dir/NAME (absolute) for each of files [n] (an old link replaced); 0, or -1 */
static inline int th_link_files(const char *dir, const char *src_dir, const char *const *files, size_t n)
{
    char cwd[4096], path[4096], target[8192];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        snprintf(target, sizeof target, "%s%s%s/%s", src_dir[0] == '/' ? "" : cwd, src_dir[0] == '/' ? "" : "/", src_dir,
                 files[i]);
        unlink(path);
        if (symlink(target, path) != 0) return -1;
    }
    return 0;
}

/* th_max_abs: the largest |a[i]| of a row [n] */
static inline double th_max_abs(const float *a, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* th_max_diff: the largest |a[i] - b[i]| of two rows [n] */
static inline double th_max_diff(const float *a, const float *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* th_kl_row: KL(softmax(ref) || softmax(got)) of two logit rows [V], and (*agree) whether their argmax
 * agree: how the engine tests score a row against a reference. */
static inline double th_kl_row(const float *ref, const float *got, int V, int *agree)
{
    int ar = 0, ag = 0;
    for (int v = 1; v < V; v++) {
        if (ref[v] > ref[ar]) ar = v;
        if (got[v] > got[ag]) ag = v;
    }
    *agree = ar == ag;
    double zr = 0, zg = 0, kl = 0;
    for (int v = 0; v < V; v++) {
        zr += exp((double)ref[v] - ref[ar]);
        zg += exp((double)got[v] - got[ag]);
    }
    for (int v = 0; v < V; v++) {
        double lr = ref[v] - ref[ar] - log(zr), lg = got[v] - got[ag] - log(zg);
        kl += exp(lr) * (lr - lg);
    }
    return kl;
}

/* TH_PART(stmt): run stmt and print its wall time on stderr ("part stmt: 1.2 s"): where a long test's time goes
 * (tests/run.sh shows a failed test's output; CI-time work reads them from a run by hand) */
#define TH_PART(stmt)                                                                                           \
    do {                                                                                                        \
        double th_t0_ = tm_now_s();                                                                             \
        stmt;                                                                                                   \
        fprintf(stderr, "part %s: %.1f s\n", #stmt, tm_now_s() - th_t0_);                                       \
    } while (0)

/* th_done: print the summary line and return the exit status. */
static inline int th_done(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, th_pass, th_fail);
    return th_fail ? 1 : 0;
}

#endif
