/* policy.c: the recording-policy specs of `peat run` (iteration lists, op lists, --compress,
 * phases): parsed here once, for the CLI's checks and the stages that apply them. */
#include "harness/campaign/campaign.h"

#include <stdlib.h>
#include <string.h>

peat_status peat_campaign_op_mask_parse(const char *list, uint64_t *mask)
{
    *mask = 0;
    if (!list || !strcmp(list, "all")) {
        *mask = PEAT_OP_COUNT >= 64 ? ~(uint64_t)0 : PEAT_OP_BIT(PEAT_OP_COUNT) - 1u;
        return PEAT_OK;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        peat_op_kind op;
        if (peat_op_parse(t, &op) != PEAT_OK)
            return PEAT_ERROR(PEAT_ERR_INVAL, "unknown op '%s' in op list '%s' (see `peat list`)",
                              t, list);
        *mask |= PEAT_OP_BIT(op);
    }
    if (!*mask) return PEAT_ERROR(PEAT_ERR_INVAL, "empty op list");
    return PEAT_OK;
}

peat_status peat_campaign_compress_parse(const char *spec, int *deflate_level, int *min_saving_pct)
{
    *deflate_level = 0;
    *min_saving_pct = 0;
    if (!spec || !strcmp(spec, "auto")) return PEAT_OK;
    if (!strcmp(spec, "all")) {
        *min_saving_pct = -1;
        return PEAT_OK;
    }
    if (!strcmp(spec, "none")) {
        *deflate_level = -1;
        return PEAT_OK;
    }
    char *end = NULL;
    long pct = strtol(spec, &end, 10);
    if (end != spec && (*end == 0 || (*end == '%' && end[1] == 0)) && pct >= 1 && pct <= 100) {
        *min_saving_pct = (int)pct;
        return PEAT_OK;
    }
    return PEAT_ERROR(PEAT_ERR_INVAL,
                      "compress mode '%s' is not auto, all, none or a percent 1..100", spec);
}

peat_status peat_campaign_phase_parse(const char *list, int *fwd, int *bwd, int *opt)
{
    *fwd = *bwd = *opt = 0;
    if (!list) return PEAT_OK;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "fwd"))
            *fwd = 1;
        else if (!strcmp(t, "bwd"))
            *bwd = 1;
        else if (!strcmp(t, "opt"))
            *opt = 1;
        else
            return PEAT_ERROR(PEAT_ERR_INVAL, "unknown phase '%s' (fwd, bwd, opt)", t);
    }
    if (!*fwd && !*bwd && !*opt) return PEAT_ERROR(PEAT_ERR_INVAL, "empty phase list");
    return PEAT_OK;
}
