/* fuzz/fuzz_sampler.c: the sampler (text/sampler.c) on arbitrary parameters,
 * logits (raw floats: NaN, inf, subnormals) and histories.
 * Input: 16 bytes of parameters, then V = 1..64 raw float logits, then the
 * history (one byte per token, bit 7 = prompt). Checked: the parameters are
 * accepted or rejected without a crash; the id is -1 exactly when no
 * penalized logit is finite or +inf, and otherwise a token whose penalized
 * logit is not NaN / -inf; greedy returns the argmax. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/sampler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 17) return 0;
    tm_sampler_params p;
    tm_sampler_params_default(&p);
    p.temperature = (float)data[0] / 64.0f;                  /* 0 .. 4 */
    p.top_k = data[1] % 70 - 3;
    p.top_p = data[2] == 0 ? 1.0f : (float)data[2] / 255.0f;
    p.min_p = (float)(data[3] % 128) / 127.0f;
    p.repetition_penalty = 0.5f + (float)data[4] / 128.0f;
    p.presence_penalty = ((float)data[5] - 128.0f) / 64.0f;
    p.frequency_penalty = ((float)data[6] - 128.0f) / 64.0f;
    memcpy(&p.seed, data + 7, 8);
    int V = data[15] % 64 + 1;
    if (data[16] & 1) memcpy(&p.temperature, data + 8, 4);   /* sometimes a raw float */
    data += 17;
    size -= 17;
    if (size < (size_t)V * 4) return 0;
    float logits[64], pen[64];
    memcpy(logits, data, (size_t)V * 4);
    data += (size_t)V * 4;
    size -= (size_t)V * 4;
    tm_sampler *s = tm_sampler_new(&p, V, NULL);
    if (!s) return 0;
    for (size_t i = 0; i < size; i++) {
        int32_t id = data[i] & 0x7f;
        if (id >= V) continue;
        if (data[i] & 0x80) tm_sampler_accept_prompt(s, &id, 1);
        else tm_sampler_accept(s, id);
    }
    memcpy(pen, logits, sizeof pen);
    tm_sampler_penalize(s, pen);
    int any = 0, best = -1;
    for (int i = 0; i < V; i++)
        if (pen[i] > -INFINITY) {
            any = 1;
            if (best < 0 || pen[i] > pen[best]) best = i;
        }
    for (int rep = 0; rep < 3; rep++) {
        float l[64];
        memcpy(l, logits, sizeof l);
        int32_t id = tm_sampler_sample(s, l);
        if (memcmp(l, pen, (size_t)V * 4) != 0) abort();   /* penalties applied in place */
        if (!any) {
            if (id != -1) abort();
            continue;
        }
        if (id < 0 || id >= V || !(pen[id] > -INFINITY)) abort();
        if ((p.temperature <= 0 || p.top_k == 1) && id != best) abort();
    }
    tm_sampler_free(s);
    return 0;
}
