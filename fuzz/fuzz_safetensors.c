/* fuzz/fuzz_safetensors.c: a safetensors file image → tm_st_parse, then every
 * tensor through tm_st_find and a read of its first and last byte (so an
 * offset that escaped validation shows up under ASan). */
#include <stddef.h>
#include <stdint.h>

#include "hf/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tm_st_file *f = NULL;
    tm_err err = {0};
    if (tm_st_parse(&f, data, size, "fuzz.safetensors", &err) != TM_OK) return 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < tm_st_count(f); i++) {
        tm_tensor t;
        const char *name = tm_st_name(f, i);
        (void)tm_st_dtype_str(f, i);
        (void)tm_st_shape(f, i);
        if (tm_st_find(f, name, &t, &err) == TM_OK && t.nbytes) {
            const uint8_t *p = t.data;
            sink ^= p[0];
            sink ^= p[t.nbytes - 1];
        }
    }
    (void)tm_st_metadata(f, "format");
    (void)sink;
    tm_st_close(f);
    return 0;
}
