/* hf/hf_model.h: open a Hugging Face model directory as a bound tm_model.
 *
 *   tm_model *m;
 *   if (tm_hf_model_open(&m, "models/tiny-classics-llama", NULL, &err) != TM_OK)
 *       fprintf(stderr, "%s\n", err.msg);
 *   ... tm_ref_init(&r, m, 1024, 1, &err) ...
 *   tm_model_free(m);   // also unmaps the safetensors files
 *
 * The weights stay in the memory-mapped safetensors files (model.safetensors
 * or the shards of model.safetensors.index.json); the model owns the mapping. */
#ifndef TM_HF_HF_MODEL_H
#define TM_HF_HF_MODEL_H

#include "core/status.h"
#include "hf/safetensors.h"
#include "model/model.h"

/* config_path: NULL for dir/config.json, or another config file describing
 * the same weights (e.g. the transformers-5 form of the same config). */
int tm_hf_model_open(tm_model **out, const char *dir, const char *config_path, tm_err *err);

/* tm_st_set_source: a tensor source view of an open safetensors set. */
tm_tensor_source tm_st_set_source(tm_st_set *s);

#endif
