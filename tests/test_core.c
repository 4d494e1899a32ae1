/* tests/test_core.c: status, file I/O, dtype conversions. */
#include "harness.h"

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

int main(void)
{
    test_f16_roundtrip();
    test_bf16();
    test_atomic_write();
    return th_done("test_core");
}
