/* gpt.c: the "gpt" flow (not yet implemented: create reports PEAT_ERR_UNSUPPORTED). */
#include "models/flow_impl.h"

static peat_status gpt_create(peat_flow_t *f)
{
    (void)f;
    return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "flow gpt is not implemented yet");
}

const peat_models_flow_ops peat_models_gpt_ops = {
    .name = "gpt",
    .desc = "(not implemented yet)",
    .create = gpt_create,
};
