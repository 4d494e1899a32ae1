/* fuzz/fuzz_config.c: config.json text → tm_hf_config_parse → tm_model_init
 * (architecture rules, RoPE tables, tensor specs). Must never crash, hang or
 * allocate without bound. */
#include <stddef.h>
#include <stdint.h>

#include "hf/config.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tm_hf_config c;
    tm_err err = {0};
    if (tm_hf_config_parse(&c, (const char *)data, size, "config.json", &err) != TM_OK) return 0;
    tm_model *m = NULL;
    if (tm_model_init(&m, &c, &err) == TM_OK) {
        volatile float sink = 0;
        for (int i = 0; i < m->n_rope; i++)
            for (int k = 0; k < m->rope[i].rot_dim / 2; k++) sink += m->rope[i].inv_freq[k];
        (void)sink;
        tm_model_free(m);
    }
    tm_hf_config_free(&c);
    return 0;
}
