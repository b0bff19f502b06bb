/* probe_internal.h: the probe builders shared by probe.c and probe_ops.c (analyzer/ only). */
#ifndef PEAT_ANALYZER_PROBE_INTERNAL_H
#define PEAT_ANALYZER_PROBE_INTERNAL_H

#include "analyzer/probe.h"

/* Appends an empty probe (NULL when out of memory). */
peat_probe *peat_analyzer_probe_add(peat_probe_set *s, peat_probe_kind kind, peat_probe_tag tag,
                                    const char *label);
/* Appends a probe with a writable copy of every input of rec (NULL when out of memory). */
peat_probe *peat_analyzer_probe_clone(peat_probe_set *s, const peat_record *rec,
                                      peat_probe_kind kind, peat_probe_tag tag, const char *label);
/* Value and shape probes of the ops probe.c has no own rule for (probe_ops.c). */
peat_status peat_analyzer_probe_ops(peat_probe_set *s, const peat_record *rec, uint64_t seed);

#endif
