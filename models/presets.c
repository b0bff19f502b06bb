/* presets.c: the flows' size presets (tiny = the defaults, small, base): sizes and the shape
 * settings that only a preset reaches (gpt's vocabulary, head size and task, cnn's images). */
#include "models/flow_impl.h"

#include <string.h>

static const char *const size_names[PEAT_FLOW_SIZES] = {"tiny", "small", "base"};

/* Rows: tiny, small, base. tiny is each flow's historical default, bit for bit. */
static const struct {
    const char *flow;
    peat_models_preset p[PEAT_FLOW_SIZES];
} presets[] = {
    {"mlp",
     {{.batch = 32, .width = 64, .depth = 2},
      {.batch = 64, .width = 256, .depth = 2},
      {.batch = 128, .width = 512, .depth = 3}}},
    {"cnn",
     {{.batch = 32, .width = 8, .depth = 1, .image = 12, .channels = 1, .strided = 1},
      {.batch = 32, .width = 16, .depth = 1, .image = 16, .channels = 3, .strided = 1},
      {.batch = 16, .width = 32, .depth = 1, .image = 32, .channels = 3, .strided = 2}}},
    {"gpt",
     {{.batch = 32, .width = 32, .depth = 2, .seq = 8, .vocab = 16, .head_dim = 16},
      {.batch = 32, .width = 128, .depth = 2, .seq = 11, .vocab = 256, .head_dim = 32},
      /* base: language modelling (models/corpus.c), 4 rows of 128 tokens = 512 rows per GEMM */
      {.batch = 4, .width = 256, .depth = 4, .seq = 128, .vocab = 1024, .head_dim = 64, .lm = 1}}},
};

const char *peat_models_flow_size_name(int size)
{
    return size >= 0 && size < PEAT_FLOW_SIZES ? size_names[size] : "?";
}

peat_status peat_models_flow_size_parse(const char *name, int *size)
{
    for (int s = 0; s < PEAT_FLOW_SIZES; s++)
        if (name && strcmp(name, size_names[s]) == 0) {
            *size = s;
            return PEAT_OK;
        }
    return PEAT_ERROR(PEAT_ERR_INVAL, "unknown size '%s' (tiny, small or base)", name ? name : "");
}

const peat_models_preset *peat_models_preset_get(const char *flow, int size)
{
    if (size < 0 || size >= PEAT_FLOW_SIZES) return NULL;
    /* gpt_unfused and llama are the gpt model (llama with its own norm and no biases) */
    if (strcmp(flow, "llama") == 0) flow = "gpt";
    if (strcmp(flow, "mlp_silu") == 0) flow = "mlp"; /* the mlp model with SiLU */
    if (strcmp(flow, "resnet") == 0) flow = "cnn";   /* the cnn flow's images and sizes */
    size_t n = strncmp(flow, "gpt", 3) == 0 ? 3 : strlen(flow) + 1;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strncmp(presets[i].flow, flow, n) == 0) return &presets[i].p[size];
    return NULL;
}
