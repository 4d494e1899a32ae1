/* fuzz/fuzz_config.c: config.json text → tm_hf_config_parse → tm_model_init
 * (architecture rules, RoPE tables, tensor specs); the same bytes as sentence-transformers'
 * modules.json and Pooling config (split at the first NUL) → tm_embed_cfg_parse. Must never crash,
 * hang or allocate without bound. */
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include "hf/config.h"
#include "model/model.h"
#include "runtime/rt_model.h"
#include "tandem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tm_hf_config c;
    tm_err err = {0};
    const char *nul = memchr(data, 0, size);
    size_t mn = nul ? (size_t)(nul - (const char *)data) : size;
    tm_embed_cfg ec;
    int erc = tm_embed_cfg_parse(&ec, (const char *)data, mn, nul ? nul + 1 : NULL, nul ? size - mn - 1 : 0, &err);
    if (erc == TM_OK && (ec.pooling < TANDEM_POOL_LAST || ec.pooling > TANDEM_POOL_CLS || strlen(ec.unsupported) >= 160))
        __builtin_trap();
    if (erc != TM_OK && (erc != TM_E_FORMAT || !err.msg[0])) __builtin_trap();
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
