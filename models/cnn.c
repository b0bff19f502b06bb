/* cnn.c: the "cnn" flow (not yet implemented: create reports PEAT_ERR_UNSUPPORTED). */
#include "models/flow_impl.h"

static peat_status cnn_create(peat_flow_t *f)
{
    (void)f;
    return PEAT_ERROR(PEAT_ERR_UNSUPPORTED, "flow cnn is not implemented yet");
}

const peat_models_flow_ops peat_models_cnn_ops = {
    .name = "cnn",
    .desc = "(not implemented yet)",
    .create = cnn_create,
};
