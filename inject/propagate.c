/* propagate.c: the propagated outcome of a trial: its training step against the golden step and
 * the band of honest reorderings of that step. */
#include "inject/internal.h"

peat_inject_outcome peat_inject_step_classify(const peat_inject_step *s,
                                              const peat_inject_step_band *b)
{
    if (s->failed || s->nonfinite) return PEAT_INJECT_DUE;
    if (s->identical) return PEAT_INJECT_MASKED;
    const double k = PEAT_INJECT_STEP_BAND_FACTOR;
    if (s->pred_changed <= b->pred && s->d_loss <= k * b->loss && s->d_w <= k * b->w)
        return PEAT_INJECT_TOLERABLE;
    return PEAT_INJECT_SDC;
}
