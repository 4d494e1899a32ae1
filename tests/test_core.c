/* tests/test_core.c: status, file I/O, dtype conversions. */
#include "harness.h"

#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/status.h"
#include "core/tensor.h"

static void test_f16_roundtrip(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue; /* NaN */
        float f = tm_f16_to_f32((uint16_t)h);
        if (tm_f32_to_f16(f) != h) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_NEAR(tm_f16_to_f32(0x3c00), 1.0, 0);
    CHECK_NEAR(tm_f16_to_f32(0x0001), 5.9604644775390625e-08, 0);
    CHECK_EQ_INT(tm_f32_to_f16(65520.0f), 0x7c00);           /* rounds to inf */
    CHECK_EQ_INT(tm_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);  /* tie to even */
}

static void test_bf16(void)
{
    CHECK_EQ_INT(tm_f32_to_bf16(1.0f), 0x3f80);
    CHECK_NEAR(tm_bf16_to_f32(0x3f80), 1.0, 0);
    CHECK_EQ_INT(tm_f32_to_bf16(1.00390625f), 0x3f80);        /* tie to even, down */
    CHECK_EQ_INT(tm_f32_to_bf16(1.01171875f), 0x3f82);        /* tie to even, up */
}

static void test_atomic_write(void)
{
    tm_err err = {0};
    const char *p = "build/test_core_atomic.txt";
    unlink(p);
    tm_afile a;
    CHECK_EQ_INT(tm_afile_open(&a, p, &err), TM_OK);
    fputs("hello", a.f);
    CHECK(!tm_file_exists(p)); /* not visible before commit */
    CHECK_EQ_INT(tm_afile_commit(&a, &err), TM_OK);
    char *s = NULL;
    CHECK_EQ_INT(tm_read_file(p, &s, NULL, 0, &err), TM_OK);
    CHECK_EQ_STR(s, "hello");
    free(s);
    CHECK_EQ_INT(tm_afile_open(&a, p, &err), TM_OK);
    fputs("partial", a.f);
    tm_afile_abort(&a);
    CHECK_EQ_INT(tm_read_file(p, &s, NULL, 0, &err), TM_OK);
    CHECK_EQ_STR(s, "hello"); /* aborted write left the old file */
    free(s);
    unlink(p);
    CHECK(tm_read_file("build/does-not-exist", &s, NULL, 0, &err) == TM_E_IO);
    CHECK(strstr(err.msg, "build/does-not-exist") != NULL);
}

/* tm_read_dir_files: the files of one suffix in name order, their stems and texts; a status from the
 * callback stops the walk; a missing directory has no files */
typedef struct {
    char seen[256];
    int calls, stop_at;
} walk;

static int on_file(void *ctx, const char *stem, const char *text, size_t len, tm_err *err)
{
    walk *w = ctx;
    size_t k = strlen(w->seen);
    snprintf(w->seen + k, sizeof w->seen - k, "%s=%s(%zu);", stem, text, len);
    return ++w->calls == w->stop_at ? tm_errf(err, TM_E_INVALID, "stop at %s", stem) : TM_OK;
}

static void test_dir_files(void)
{
    char dir[] = "/tmp/tm_core_XXXXXX", p[128];
    CHECK(mkdtemp(dir) != NULL);
    const char *files[][2] = {{"b.jinja", "B"}, {"a.jinja", "AA"}, {"c.txt", "C"}, {".x.jinja", "hidden"}, {".jinja", "-"}};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i][0]);
        CHECK(th_write_file(p, files[i][1], strlen(files[i][1])) == 0);
    }
    tm_err err = {0};
    walk w = {"", 0, 0};
    CHECK_EQ_INT(tm_read_dir_files(dir, ".jinja", 0, on_file, &w, &err), TM_OK);
    CHECK_EQ_STR(w.seen, "a=AA(2);b=B(1);");
    walk w2 = {"", 0, 1};
    CHECK_EQ_INT(tm_read_dir_files(dir, ".jinja", 0, on_file, &w2, &err), TM_E_INVALID);
    CHECK_EQ_STR(err.msg, "stop at a");
    CHECK_EQ_INT(w2.calls, 1);
    walk w3 = {"", 0, 0};
    CHECK_EQ_INT(tm_read_dir_files("/nonexistent/dir", ".jinja", 0, on_file, &w3, &err), TM_OK);
    CHECK_EQ_INT(w3.calls, 0);
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i][0]);
        unlink(p);
    }
    rmdir(dir);
}

int main(void)
{
    test_f16_roundtrip();
    test_bf16();
    test_atomic_write();
    test_dir_files();
    return th_done("test_core");
}
