/* tests/test_synth.c: synthetic HF models (hf/synth.c) load as real ones:
 * config and tensors bind, weights are N(0, 0.02), norms 1, the tokenizer has
 * exactly vocab_size entries and round-trips text, and the seed is honoured. */
#include "harness.h"

#include "hf/hf_model.h"
#include "hf/synth.h"
#include "model/model.h"
#include "text/tokenizer.h"

static double tensor_std(const tm_tensor *t, double *mean)
{
    int64_t n = tm_tensor_numel(t);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = tm_bf16_to_f32(((const uint16_t *)t->data)[i]);
        s += v;
        s2 += v * v;
    }
    *mean = s / n;
    return sqrt(s2 / n - *mean * *mean);
}

int main(void)
{
    tm_err err = {0};
    CHECK(tm_synth_write("llama-tiny", "build/test_synth_a", 7, &err) == TM_OK);
    CHECK(tm_synth_write("llama-tiny", "build/test_synth_b", 7, &err) == TM_OK);
    CHECK_EQ_INT(tm_synth_write("no-such-model", "build/test_synth_c", 7, &err), TM_E_NOTFOUND);
    /* --layers: the preset's first layers only; more than it has is refused, naming the count */
    CHECK_EQ_INT(tm_synth_write_layers("llama-tiny", "build/test_synth_c", 7, 3, &err), TM_E_INVALID);
    CHECK(strstr(err.msg, "--layers 3") != NULL);
    tm_model *m1 = NULL;
    CHECKF(tm_synth_write_layers("qwen2-moe-tiny", "build/test_synth_d", 7, 1, &err) == TM_OK, "%s", err.msg);
    CHECKF(tm_hf_model_open(&m1, "build/test_synth_d", NULL, &err) == TM_OK, "%s", err.msg);
    if (m1) CHECK(m1->L == 1 && m1->n_experts == 8 && m1->layer[0].moe);
    tm_model_free(m1);
    tm_model *m = NULL, *m2 = NULL;
    CHECKF(tm_hf_model_open(&m, "build/test_synth_a", NULL, &err) == TM_OK, "%s", err.msg);
    CHECKF(tm_hf_model_open(&m2, "build/test_synth_b", NULL, &err) == TM_OK, "%s", err.msg);
    if (m && m2) {
        CHECK_EQ_INT(m->V, 1024);
        CHECK_EQ_INT(m->L, 2);
        double mean, sd = tensor_std(&m->w[1].w_up, &mean);
        CHECK_NEAR(sd, 0.02, 0.001);
        CHECK_NEAR(mean, 0.0, 0.001);
        CHECK_NEAR(tm_bf16_to_f32(((const uint16_t *)m->final_norm.data)[5]), 1.0, 0);
        CHECK(memcmp(m->w[0].wq.data, m2->w[0].wq.data, m->w[0].wq.nbytes) == 0); /* same seed, same bytes */
    }
    tm_model_free(m);
    tm_model_free(m2);
    tm_tokenizer *t = NULL;
    CHECKF(tm_tok_load(&t, "build/test_synth_a/tokenizer.json", &err) == TM_OK, "%s", err.msg);
    if (t) {
        CHECK_EQ_INT(tm_tok_vocab_size(t), 1024);
        const char *text = "Any text, even \xc3\xa9t\xc3\xa9 and \"quotes\" \\ encodes.";
        int32_t *ids = NULL;
        size_t n = 0;
        char *back = NULL;
        size_t len = 0;
        CHECK(tm_tok_encode(t, text, strlen(text), 1, &ids, &n, &err) == TM_OK);
        CHECK(n == strlen(text) + 1); /* BOS + one byte token per byte (no merges) */
        CHECK(tm_tok_decode(t, ids, n, 1, &back, &len, &err) == TM_OK);
        CHECK_EQ_STR(back, text);
        free(ids);
        free(back);
        tm_tok_free(t);
    }
    return th_done("test_synth");
}
